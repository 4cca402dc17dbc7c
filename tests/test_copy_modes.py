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

"""End-to-end: vhost copy modes (cpu, v3, ring, defer, auto) with DMA engines.

Every run is verified byte for byte by ovs-vhost-guest, and every mbuf must
come back to its mempool once traffic stops."""

import re
import time

import pytest

from conftest import pairwise
from ovs_async import traffic
from ovs_async.modes import ASYNC_MODES, COPY_MODES
from ovs_async.wait import wait_until


MODES = list(COPY_MODES)


@pytest.fixture(scope="module")
def skeleton_sandbox(module_sandbox_factory):
    return module_sandbox_factory(ports=2, mtu=9000, dma=1)


# Every mode with every size, and each of them with one and two queues
# (conftest.pairwise).
@pytest.mark.parametrize("mode,size,queues",
                         pairwise(MODES, [64, 1518, 9000], [1, 2]))
def test_mode_verified(skeleton_sandbox, mode, size, queues):
    sb = skeleton_sandbox
    sb.set_copy_mode(mode)
    sb.appctl("dpif-netdev/pmd-stats-clear")
    run = traffic.loop_run(sb, size=size, duration=1.5, queues=queues)
    traffic.check(run)
    counters = sb.pmd_counters()
    if mode == "cpu":
        assert counters.get("DMA copies submitted", 0) == 0, counters
    else:
        # The PMD has the dmadev: copies went through it, none on the CPU.
        assert counters["DMA copies submitted"] > 0, counters
        assert counters["DMA CPU fallbacks"] == 0, counters
    if mode == "defer":
        assert counters["deferred work items queued"] > 0, counters
    assert sb.vswitchd_alive()


def test_mempools_back_to_baseline(skeleton_sandbox):
    sb = skeleton_sandbox
    sb.set_copy_mode("cpu")
    traffic.loop_run(sb, size=64, duration=0.5)
    baseline = sb.mempool_in_use()
    for mode in ASYNC_MODES:
        sb.set_copy_mode(mode)
        traffic.check(traffic.loop_run(sb, size=1518, duration=1))
    sb.set_copy_mode("cpu")
    assert sb.wait_mempools_back(baseline) == {}


def test_dmadev_show_and_stats(skeleton_sandbox):
    sb = skeleton_sandbox
    sb.set_copy_mode("defer")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    show = sb.appctl("netdev-dpdk/dmadev-show")
    assert "dmadev dma_skeleton0" in show
    assert "owner: pmd core 1" in show
    submitted = int(re.search(r"copies submitted: (\d+)", show).group(1))
    completed = int(re.search(r"copies completed: (\d+)", show).group(1))
    assert submitted > 0 and completed == submitted, show
    perf = sb.appctl("dpif-netdev/pmd-perf-show")
    assert "DMA copies submitted" in perf
    sb.appctl("dpif-netdev/pmd-stats-clear")
    assert sb.pmd_counters()["DMA copies submitted"] == 0


def test_no_dmadev_falls_back_to_cpu(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=0)
    assert "No dmadevs" in sb.appctl("netdev-dpdk/dmadev-show")
    for mode in ASYNC_MODES:
        sb.set_copy_mode(mode)
        sb.appctl("dpif-netdev/pmd-stats-clear")
        traffic.check(traffic.loop_run(sb, size=256, duration=1))
        counters = sb.pmd_counters()
        assert counters["DMA copies submitted"] == 0, counters
        assert counters["DMA CPU fallbacks"] > 0, counters


def test_two_pmds_one_txq(sandbox_factory):
    """Two PMDs receive from v0's two queues and both send into v1's only
    txq.  In 'defer' both PMDs' deferred work polls that vring's
    completions, without the txq lock: the two polls must meet (counted
    when one finds the vring's lock taken, vhost_async_poll_busy) and the
    switch must live through it.  vhost 24.11 no longer serializes them,
    and unserialized they corrupt vhost's memory (a crash in rte_free()
    when the guest leaves)."""
    sb = sandbox_factory(ports=2, dma=2, pmd_cpus=[0, 1])
    sb.vsctl("set", "Interface", "v0",
             "other_config:pmd-rxq-affinity=0:0,1:1")
    sb.vsctl("set", "Interface", "v1", "other_config:pmd-rxq-affinity=0:1")
    met = {}
    for mode in MODES:
        sb.set_copy_mode(mode)
        before = sb.coverage("vhost_async_poll_busy")
        g = traffic.start_held(sb, [("v0", "gen+sink", 2),
                                    ("v1", "loop", 1)],
                               ["--size", 256, "--duration", 2])
        run = traffic.finish(sb, g, ("v0", "v1"), timeout=90)
        traffic.check(run)
        # Both PMDs sent into v1's single txq.
        rxq = [p for p in run["guest"]["ports"] if p["role"] == "gen+sink"]
        assert all(n > 0 for n in rxq[0]["tx_queues"]), rxq
        met[mode] = sb.coverage("vhost_async_poll_busy") - before
        assert sb.vswitchd_alive()
    print("completion polls that found another in the vring: %s" % met)
    assert met["defer"] > 0, met


@pytest.mark.parametrize("mode", ASYNC_MODES)
def test_mode_switches_under_traffic(skeleton_sandbox, mode):
    sb = skeleton_sandbox
    sb.set_copy_mode("cpu")
    baseline = sb.mempool_in_use()
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 512, "--duration", 12])
    time.sleep(1)
    for i in range(50):
        sb.appctl("netdev-dpdk/vhost-copy-mode-set",
                  mode if i % 2 == 0 else "cpu")
        time.sleep(0.1)
    sb.set_copy_mode(mode)
    res = g.wait(timeout=90)
    assert res["corrupted"] == 0 and res["duplicates"] == 0, res
    assert res["reordered"] == 0, res
    assert res["rx_pkts"] > 0
    assert sb.vswitchd_alive()
    sb.set_copy_mode("cpu")
    assert sb.wait_mempools_back(baseline) == {}


@pytest.mark.parametrize("mode", ASYNC_MODES)
def test_disruptions_under_traffic(sandbox_factory, mode):
    """Guest restart, port delete + re-add, an MTU change and a
    pmd-cpu-mask change while copies are in flight."""
    sb = sandbox_factory(ports=2, dma=2)
    sb.set_copy_mode(mode)
    traffic.loop_run(sb, size=64, duration=0.5)
    baseline = sb.mempool_in_use()

    # Guest restart in the middle of traffic.
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 1518, "--duration", 30])
    traffic.wait_flowing(sb, g)
    g.stop()
    assert sb.vswitchd_alive()
    traffic.check(traffic.loop_run(sb, size=1518, duration=1))

    # Port delete + re-add, an MTU change and a PMD mask change, under
    # traffic.
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 1518, "--duration", 6,
                        "--wait-link", 30])
    # Both ports connected and traffic flowing: deleting v1 any earlier
    # would cut the guest off while it negotiates, not under traffic.
    traffic.wait_flowing(sb, g)
    sb.del_port("v1")
    time.sleep(0.5)
    sb.add_port("v1", ofport=2)
    sb.set_copy_mode(mode, "v1")
    sb.set_topology("loop")
    time.sleep(1)
    # An MTU change reconfigures the port (new mempool) with copies in
    # flight.
    sb.vsctl("set", "Interface", "v0", "mtu_request=2000")
    time.sleep(0.5)
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x1")
    time.sleep(1)
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x2")
    res = g.wait(timeout=90)
    assert res["corrupted"] == 0 and res["duplicates"] == 0, res
    assert sb.vswitchd_alive()
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    sb.set_copy_mode("cpu")
    assert sb.wait_mempools_back(baseline) == {}


def test_bad_input_changes_nothing(skeleton_sandbox):
    sb = skeleton_sandbox
    sb.set_copy_mode("defer")
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "v0", "warp")
    assert r.returncode != 0 and "unknown vhost copy mode" in r.stderr
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "nosuch", "cpu")
    assert r.returncode != 0 and "not a vhost-user port" in r.stderr
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "br0", "cpu")
    assert r.returncode != 0 and "not a vhost-user port" in r.stderr
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-get", "nosuch")
    assert r.returncode != 0
    assert sb.copy_mode("v0") == "defer" and sb.copy_mode("v1") == "defer"

    # An invalid value in the database is logged and ignored.
    sb.vsctl("set", "Interface", "v0", "options:vhost-copy-mode=warp")
    time.sleep(1)
    assert sb.copy_mode("v0") == "defer"
    with open(sb.vswitchd_log) as f:
        assert 'invalid options:vhost-copy-mode "warp"' in f.read()
    # A valid value in the database wins over the appctl override.
    sb.vsctl("set", "Interface", "v0", "options:vhost-copy-mode=ring")
    wait_until(lambda: sb.copy_mode("v0") == "ring", 10, "v0 not in ring",
               interval=0.1)
    sb.vsctl("remove", "Interface", "v0", "options", "vhost-copy-mode")
    sb.set_copy_mode("cpu")


def test_modes_listed_from_the_table(sandbox):
    """The switch lists its modes from its table, in the usage text and on
    the "available:" line; the Python list (ovs_async.modes) agrees."""
    out = sandbox.appctl("netdev-dpdk/vhost-copy-mode-get")
    available = re.search(r"^available: (.*)$", out, re.M)
    assert available, out
    assert tuple(available.group(1).split(", ")) == COPY_MODES
    usage = sandbox.appctl("list-commands")
    assert "netdev-dpdk/vhost-copy-mode-set [interface] %s" % "|".join(
        COPY_MODES) in usage, usage
    r = sandbox.appctl_result("netdev-dpdk/vhost-copy-mode-set", "warp")
    assert "(expected one of: %s)" % ", ".join(COPY_MODES) in r.stderr


def test_default_from_other_config(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1,
                         other_config={"vhost-copy-mode": "defer"})
    assert sb.copy_mode("v0") == "defer"
    assert "other_config" in sb.appctl("netdev-dpdk/vhost-copy-mode-get",
                                       "v0")
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:vhost-copy-mode=v3")
    wait_until(lambda: sb.copy_mode("v0") == "v3", 10, "v0 not in v3",
               interval=0.1)
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
    stats = sb.custom_stats("v0")
    assert "ovs_async_tx_completed" in stats


def test_async_refused_with_iommu(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1,
                         other_config={"vhost-iommu-support": "true"})
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "defer")
    assert r.returncode != 0 and "IOMMU" in r.stderr
    assert sb.copy_mode("v0") == "cpu"
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
