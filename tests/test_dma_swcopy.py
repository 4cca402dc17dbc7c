# Copyright (c) 2026 The Open vSwitch async vhost fork authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at:
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""dma_swcopy, our software dmadev: the driver through the dmadev API
(also under ASan), and every async copy mode of the switch on it."""

import os
import re
import subprocess
import tempfile

import pytest

from ovs_async import traffic
from ovs_async.modes import ASYNC_MODES
from ovs_async.wait import wait_until

from conftest import TOP


def check_summary(out):
    """The test program ends with 'N passed, M failed'."""
    m = re.search(r"^(\d+) passed, (\d+) failed$", out, re.M)
    assert m, out[-2000:]
    assert int(m.group(2)) == 0, out[-4000:]
    assert int(m.group(1)) >= 10, out[-2000:]


@pytest.mark.unit
def test_driver_functional(build):
    r = subprocess.run([os.path.join(build, "tests/test-dma-swcopy")],
                       capture_output=True, text=True, timeout=600)
    check_summary(r.stdout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_driver_asan():
    """The driver test built with AddressSanitizer and UBSan is clean."""
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "config.h"), "w").close()
        cflags = subprocess.run(["pkg-config", "--cflags", "libdpdk"],
                                capture_output=True, text=True,
                                check=True).stdout.split()
        libs = subprocess.run(["pkg-config", "--libs", "libdpdk"],
                              capture_output=True, text=True,
                              check=True).stdout.split()
        exe = os.path.join(d, "test-dma-swcopy-asan")
        cc = subprocess.run(
            ["cc", "-O1", "-g", "-fsanitize=address,undefined",
             "-fno-omit-frame-pointer", "-DALLOW_EXPERIMENTAL_API",
             "-I" + d, "-I" + os.path.join(TOP, "lib")] + cflags
            + [os.path.join(TOP, "lib/dma-swcopy.c"),
               os.path.join(TOP, "tests/test-dma-swcopy.c"),
               "-o", exe] + libs + ["-lrte_bus_vdev", "-lpthread"],
            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr[-3000:]
        env = dict(os.environ,
                   ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        r = subprocess.run([exe], capture_output=True, text=True,
                           timeout=900, env=env)
        assert "ERROR: AddressSanitizer" not in r.stderr, r.stderr[-4000:]
        assert "runtime error" not in r.stderr, r.stderr[-4000:]
        check_summary(r.stdout)
        assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def swcopy_module_sandbox(module_sandbox_factory):
    return module_sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")


def test_dmadev_show_lists_swcopy(swcopy_module_sandbox):
    show = swcopy_module_sandbox.appctl("netdev-dpdk/dmadev-show")
    assert "dmadev dma_swcopy0" in show
    assert "owner: pmd core 1" in show


@pytest.mark.parametrize("size", [64, 1518])
@pytest.mark.parametrize("mode", ASYNC_MODES)
def test_modes_on_swcopy(swcopy_module_sandbox, mode, size):
    sb = swcopy_module_sandbox
    sb.set_copy_mode("cpu")
    traffic.loop_run(sb, size=64, duration=0.3)
    baseline = sb.mempool_in_use()
    sb.set_copy_mode(mode)
    run = traffic.loop_run(sb, size=size, duration=1.5)
    traffic.check(run)
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA CPU fallbacks"] == 0, counters
    sb.set_copy_mode("cpu")
    assert sb.wait_mempools_back(baseline) == {}


def test_worker_on_a_pmd_core_is_refused_loudly(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy",
                         pmd_cpus=[1], dma_cpus=[1])
    assert sb.swcopy_state("dma_swcopy0")["worker"].startswith("cpu 1")
    with open(sb.vswitchd_log) as f:
        log = f.read()
    assert ("dma_swcopy worker runs on CPU 1, which is also a PMD "
            "thread's core") in log


def test_timed_hold_ends_while_idle(sandbox_factory):
    """A timed hold ends at its time even if the engine never had work
    meanwhile (it used to stay held until a copy came), and a new hold
    right after an expired one is a hold of its own."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    engine = "dma_swcopy0"
    sb.swcopy("hold", engine, 300)
    state = sb.swcopy_state(engine)
    assert state["held"].startswith("yes (released in"), state
    # Released within seconds of its 300 ms: not only when a copy comes.
    state = wait_until(lambda: (sb.swcopy_state(engine)["held"] == "no"
                                and sb.swcopy_state(engine)), 5,
                       lambda: sb.swcopy_state(engine), interval=0.1)
    assert state["copies submitted"] == "0", state
    holds = int(state["holds"])
    sb.swcopy("hold", engine)
    state = sb.swcopy_state(engine)
    assert state["held"] == "yes" and int(state["holds"]) == holds + 1, state
    sb.swcopy("release", engine)
    assert sb.swcopy_state(engine)["held"] == "no"


def test_testing_aids_only_with_enable_dummy(sandbox_factory):
    """A switch started as production starts it (no --enable-dummy) has no
    fault injection nor lock holding; the diagnostics and dmadev-enable
    remain.  With --enable-dummy (every other test) they are there."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy",
                         testing_aids=False)
    assert "--enable-dummy" not in sb.vswitchd_args
    commands = sb.appctl("list-commands")
    for aid in ("dma-swcopy/hold", "dma-swcopy/release", "dma-swcopy/fail",
                "dma-swcopy/delay", "netdev-dpdk/vhost-txq-hold",
                "netdev-dpdk/vhost-txq-release", "time/warp"):
        assert aid not in commands, aid
    for cmd in ("dma-swcopy/show", "netdev-dpdk/dmadev-show",
                "netdev-dpdk/dmadev-enable"):
        assert cmd in commands, cmd
    r = sb.appctl_result("dma-swcopy/hold", "dma_swcopy0")
    assert r.returncode != 0 and "is not a valid command" in r.stderr, r
