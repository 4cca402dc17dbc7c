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

"""Preparing an async port for live migration, an optional step: an async
port offers dirty page logging and copies on the CPU while QEMU logs
(tests/test_vm_migrate.py).  netdev-dpdk/vhost-migrate-prepare moves the
port's copies to the CPU ahead of time and registers its socket again
without async copies (the guest reconnects); vhost-migrate-done restores
the copy modes.  vhost-copy-mode-get says how the port can migrate now.
(The migration of a QEMU guest itself is not in this file.)"""

import signal
import time

from ovs_async import traffic
from ovs_async.wait import wait_until


def test_migrate_prepare_and_done(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("defer")
    sb.set_rx_copy_mode("dma")
    assert sb.migration_line("v0").startswith("possible: while QEMU logs "
                                               "dirty pages, the port "
                                               "copies on the CPU")

    guest_args = ([("v0", "gen+sink"), ("v1", "loop")],
                  ["--size", 512, "--duration", 30, "--wait-link", 30])
    g = sb.start_guest(*guest_args)
    traffic.wait_for(g, lambda: g.log_has("port(s) up"), 30, "up")
    registered = sb.log_count("v0: registering vhost-user socket")
    out = sb.appctl("netdev-dpdk/vhost-migrate-prepare", "v0")
    assert "v0: preparing for live migration" in out, out
    # The socket is registered again without async copies, the guest
    # reconnects, and the port copies on the CPU in both directions.
    # (If the guest's DPDK 22.11 virtio-user logged that it could not
    # take the new connection, a new guest connects instead, once.)
    ready = wait_until(lambda: (
        sb.migration_line("v0").startswith("ready")
        or ("failed" if traffic.reconnect_failed(g) else None)), 30,
        lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"), interval=0.2)
    if ready == "failed":
        print("the guest's virtio-user did not reconnect; a new guest")
        g.stop(sig=signal.SIGKILL)
        g = sb.start_guest(*guest_args)
        wait_until(lambda: sb.migration_line("v0").startswith("ready"),
                   30, lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
                   interval=0.2)
    assert sb.log_count("v0: registering vhost-user socket") \
        == registered + 1
    assert sb.log_count("again without async copies, so that it offers "
                         "dirty page logging") == 1
    assert sb.copy_mode("v0") == "cpu" and sb.rx_copy_mode("v0") == "cpu"
    out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v0")
    assert "(from netdev-dpdk/vhost-migrate-prepare)" in out, out
    # The other port is untouched.
    assert sb.copy_mode("v1") == "defer" and sb.rx_copy_mode("v1") == "dma"
    assert sb.migration_line("v1").startswith("possible: while QEMU")
    res = g.wait(timeout=90)
    assert res["corrupted"] == 0 and res["duplicates"] == 0, res

    # Asking twice changes nothing; a mode change meanwhile is refused by
    # the preparation (it is requested, not applied).
    out = sb.appctl("netdev-dpdk/vhost-migrate-prepare", "v0")
    assert "prepared for live migration already" in out, out
    sb.appctl("netdev-dpdk/vhost-copy-mode-set", "v0", "ring")
    time.sleep(0.5)
    assert sb.copy_mode("v0") == "cpu"
    traffic.check(traffic.loop_run(sb, size=256, duration=1))

    # Done: the requested modes come back (ring, the last request), with
    # the socket registered for async copies again.
    out = sb.appctl("netdev-dpdk/vhost-migrate-done", "v0")
    assert "copy modes restored" in out, out
    wait_until(lambda: sb.copy_mode("v0") == "ring"
               and sb.rx_copy_mode("v0") == "dma", 30,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    assert sb.migration_line("v0").startswith("possible: while QEMU")
    assert sb.log_count("v0: registering vhost-user socket") \
        == registered + 2
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=256, duration=1))
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA Rx copies submitted"] > 0, counters


def test_migrate_bad_input(sandbox_factory):
    sb = sandbox_factory(ports=2)
    assert sb.migration_line("v0").startswith("possible")
    for cmd in ("netdev-dpdk/vhost-migrate-prepare",
                "netdev-dpdk/vhost-migrate-done"):
        r = sb.appctl_result(cmd, "nosuch")
        assert r.returncode != 0 and "not a vhost-user port" in r.stderr, r
        r = sb.appctl_result(cmd)
        assert r.returncode != 0, r
    out = sb.appctl("netdev-dpdk/vhost-migrate-done", "v0")
    assert "not prepared for live migration" in out, out
    assert sb.copy_mode("v0") == "cpu"
