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

"""Engines that do not complete, fenced before vhost unmaps guest memory.

A clear that gives up on an engine lets vhost unmap the guest's memory
(the device went away, a new memory table).  The engine still holds the
copies it did not complete: they must never land.  So the engine is
fenced first (rte_dma_stop(): dma_swcopy's worker executes or drops what
it holds and starts nothing afterwards), what the stop executed is
retired, and only what it dropped is abandoned.  An engine out of
service stays stopped, whatever happens to the hold, until
netdev-dpdk/dmadev-enable brings it back.

Every case creates the state on purpose and checks that it was reached:
copies held in flight on the engine, the clear giving up, copies
abandoned or executed by the stop, and then the release of the hold,
which used to make the engine write into unmapped memory (SIGSEGV)."""

import signal
import time

import pytest

from ovs_async import traffic
from ovs_async.wait import wait_until
from ovs_async.watch import Responsiveness

from test_lifecycle import (ENGINE, baseline, check_recovered, hold_copies,
                            inflight_total, lifecycle_sandbox, log_count,
                            start_traffic)


def dmadev_state(sb, engine=ENGINE):
    out = sb.appctl("netdev-dpdk/dmadev-show")
    block = out.split("dmadev %s " % engine, 1)[1].split("\ndmadev ", 1)[0]
    return block


def enable_engine(sb, engine=ENGINE, timeout=20):
    """netdev-dpdk/dmadev-enable, once no port has copies on the engine
    any more (the ports whose copies it dropped are reset first)."""
    def enabled():
        r = sb.appctl_result("netdev-dpdk/dmadev-enable", engine)
        return r.stdout if r.returncode == 0 else None
    return wait_until(enabled, timeout, lambda: (
        sb.appctl_result("netdev-dpdk/dmadev-enable", engine).stderr,
        sb.appctl("netdev-dpdk/vhost-copy-mode-get")), interval=0.5)


def event_gone(sb, g, event):
    """Makes a device go away while the engine holds its copies."""
    if event == "guest-kill":
        g.stop(sig=signal.SIGKILL)
    else:
        sb.del_port("v1")


def restore(sb, g, event, mode):
    if event == "port-delete":
        sb.add_port("v1", ofport=2)
        sb.set_copy_mode(mode, "v1")
        sb.set_topology("loop")
        g.stop(sig=signal.SIGKILL)


@pytest.mark.parametrize("event", ["guest-kill", "port-delete"])
@pytest.mark.parametrize("mode", ["v3", "defer"])
def test_release_after_abandon(sandbox_factory, mode, event):
    """The engine held (no time limit) with copies in flight, the device
    goes away, the clear gives up after its deadline and the copies are
    abandoned; then the hold is released.  The engine was stopped before
    vhost unmapped the memory: it runs none of those copies (the switch
    lives, no sanitizer report), and stays out of service until
    dmadev-enable, after which the ports copy on DMA again."""
    sb = lifecycle_sandbox(sandbox_factory, mode)
    base = baseline(sb)
    g = start_traffic(sb)
    time.sleep(1.5)
    probe = Responsiveness(sb)
    probe.start()
    held = hold_copies(sb)
    event_gone(sb, g, event)
    wait_until(lambda: log_count(sb, "DMA copies abandoned"), 20,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    assert log_count(sb, "dmadev %s taken out of service" % ENGINE) == 1

    # The dangerous moment: the engine is told to go on.
    sb.swcopy("release", ENGINE)
    time.sleep(1)
    assert sb.vswitchd_alive(), "ovs-vswitchd died when the engine resumed"
    state = sb.swcopy_state(ENGINE)
    assert state["worker"].endswith("stopped"), state
    assert int(state["copies dropped by a stop"]) >= held // 2, (held, state)
    assert "stopped" in dmadev_state(sb), dmadev_state(sb)
    assert "dmadev-enable" in dmadev_state(sb), dmadev_state(sb)
    probe.finish()

    restore(sb, g, event, mode)
    print(enable_engine(sb))
    assert "out of service" not in dmadev_state(sb)
    check_recovered_after_abandon(sb, base, mode)


def check_recovered_after_abandon(sb, base, mode):
    """check_recovered(), for a switch that abandoned copies on purpose:
    their mbufs stay with vhost 22.11, nothing else may be missing."""
    assert sb.vswitchd_alive()
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1.5))
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA CPU fallbacks"] == 0, counters
    wait_until(lambda: not inflight_total(sb), 10,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.1)
    with open(sb.vswitchd_log) as f:
        log = f.read()
    assert "AddressSanitizer" not in log and "runtime error" not in log


@pytest.mark.parametrize("mode", ["v3", "defer"])
def test_slow_engine_finished_by_the_fence(sandbox_factory, mode):
    """An engine slower than the clear's deadline (dma-swcopy/delay: 20 ms
    a copy) when the guest vanishes: the clear gives up, the fence stops
    the engine, whose worker executes what it still holds at once, while
    the memory is mapped, and the clear retires it: nothing is abandoned,
    and nothing lands later (the switch lives)."""
    sb = lifecycle_sandbox(sandbox_factory, mode)
    g = start_traffic(sb)
    time.sleep(1.5)
    probe = Responsiveness(sb)
    probe.start()
    sb.swcopy("delay", ENGINE, 20000)
    wait_until(lambda: inflight_total(sb) >= 200, 20,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    g.stop(sig=signal.SIGKILL)
    wait_until(lambda: log_count(sb, "dmadev %s taken out of service"
                                 % ENGINE), 20,
               lambda: sb.appctl("netdev-dpdk/dmadev-show"), interval=0.2)
    time.sleep(2)
    assert sb.vswitchd_alive(), "ovs-vswitchd died: a late copy landed"
    state = sb.swcopy_state(ENGINE)
    assert state["worker"].endswith("stopped"), state
    assert int(state["copies executed by a stop"]) > 0, state
    assert not any(sb.abandoned().values()), sb.abandoned()
    probe.finish()
    sb.swcopy("delay", ENGINE, 0)
    enable_engine(sb)
    check_recovered_after_abandon(sb, {}, mode)


# An ARP request from 198.18.0.1 for 198.18.0.2, as OVN's packet-outs look
# to the port: a frame the guest counts as not one of its own ("foreign").
ARP = ("ffffffffffff020000000001080600010800060400010200000000"
       "01c6120001000000000000c6120002")


def packet_outs(sb, port_no, n):
    for _ in range(n):
        sb.ofctl("packet-out", "br0", "in_port=controller packet=%s "
                 "actions=output:%d" % (ARP, port_no))


def test_packet_out_while_auto_leaves_dma(sandbox_factory):
    """The main thread, which has no deferred work list, sends OpenFlow
    packet-outs into ports whose auto Tx queues leave a slow engine
    (dma-swcopy/delay, as in test_auto_keeps_off_an_engine_that_fell_behind).
    It must stay answered (it used to spin forever on the queue's lock,
    which it held itself), and every packet-out reaches the guest or is
    counted as a drop."""
    sb = sandbox_factory(ports=2, mtu=9000, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("auto")
    sb.swcopy("delay", ENGINE, 200)
    result = {}
    n_outs = 300

    import threading

    def run():
        result["run"] = traffic.loop_run(
            sb, size=1518, duration=14,
            extra=["--rate", 40000, "--burst", 1])
    t = threading.Thread(target=run)
    t.start()
    probe = Responsiveness(sb)
    try:
        wait_until(lambda: sb.coverage("vhost_async_auto_leaving") > 0, 30,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
                   interval=0.2)
        probe.start()
        packet_outs(sb, 1, n_outs)
        probe.finish()
    finally:
        t.join(120)
    run = result["run"]
    foreign = run["guest"]["foreign"]
    # Drops the switch counted beyond the generator's lost frames.
    dropped = max(0, run["switch_dropped"] - run["guest"]["lost"])
    print("packet-outs: %d sent, %d reached the guest, %d more drops"
          % (n_outs, foreign, dropped))
    assert foreign + dropped >= n_outs, (foreign, dropped)
    traffic.check(run)
