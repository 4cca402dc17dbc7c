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

import re
import signal
import threading
import time

import pytest

from conftest import shared_txq_sandbox
from ovs_async import parse, traffic
from ovs_async.wait import wait_until
from ovs_async.watch import Responsiveness

from test_lifecycle import (ENGINE, baseline, hold_copies, inflight_total,
                            rx_inflight_total,
                            start_traffic, stop_guest)


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
    if event.startswith("guest-kill"):
        g.stop(sig=signal.SIGKILL)
    else:
        sb.del_port("v1")


def restore(sb, g, event, mode):
    if event == "port-delete":
        sb.add_port("v1", ofport=2)
        sb.set_copy_mode(mode, "v1")
        sb.set_topology("loop")
        g.stop(sig=signal.SIGKILL)


@pytest.mark.parametrize("event", ["guest-kill", "guest-kill-flush50",
                                   "port-delete"])
@pytest.mark.parametrize("mode", ["v3", "defer"])
def test_release_after_abandon(swcopy_sandbox, mode, event):
    """The engine held (no time limit) with copies in flight, the device
    goes away, the clear gives up after its deadline and the copies are
    abandoned; then the hold is released.  The engine was stopped before
    vhost unmapped the memory: it runs none of those copies (the switch
    lives, no sanitizer report), and stays out of service until
    dmadev-enable, after which the ports copy on DMA again."""
    # With tx-flush-interval, packets wait in the PMD's output batches: the
    # main thread once blocked 17.8 s on this path.
    flush = "50" if event.endswith("flush50") else "0"
    sb = swcopy_sandbox(mode,
                           other_config={"tx-flush-interval": flush})
    base = baseline(sb)
    g = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    held = hold_copies(sb)
    event_gone(sb, g, event)
    wait_until(lambda: sb.log_count("DMA copies abandoned"), 20,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    assert sb.log_count("dmadev %s taken out of service" % ENGINE) == 1

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
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
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
def test_slow_engine_finished_by_the_fence(swcopy_sandbox, mode):
    """An engine slower than the clear's deadline (dma-swcopy/delay: 20 ms
    a copy) when the guest vanishes: the clear gives up, the fence stops
    the engine, whose worker executes what it still holds at once, while
    the memory is mapped, and the clear retires it: nothing is abandoned,
    and nothing lands later (the switch lives)."""
    sb = swcopy_sandbox(mode)
    g = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    sb.swcopy("delay", ENGINE, 20000)
    wait_until(lambda: inflight_total(sb) >= 200, 20,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    g.stop(sig=signal.SIGKILL)
    wait_until(lambda: sb.log_count("dmadev %s taken out of service"
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


def rx_dma_traffic(swcopy_sandbox):
    """A sandbox in Tx cpu and Rx dma, its mempools' baseline, a guest
    sending, and the main thread watched."""
    sb = swcopy_sandbox("cpu")
    sb.set_rx_copy_mode("dma")
    base = baseline(sb)
    g = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    return sb, base, g, probe


def rx_mbufs_kept(sb):
    """The mbufs of abandoned copies that vhost kept, as the switch logged
    them (those of Rx copies: vhost allocated them)."""
    return sum(int(n) for n in re.findall(r"those of the other "
                                          r"(\d+)", sb.log_text()))


def test_rx_mbufs_back_after_abandon(swcopy_sandbox):
    """Rx copies (vhost-rx-copy-mode=dma, Tx cpu) held on the engine when
    the guest vanishes: the clear gives up and they are abandoned.  vhost
    allocated their mbufs and keeps them, and has no call that hands them
    back: the port's mempool used to lose them for good, up to a ring's
    worth per engine failure.  Once the engine is brought back
    (dmadev-enable), every mbuf is back in its mempool, and the switch
    says how many it freed."""
    sb, base, g, probe = rx_dma_traffic(swcopy_sandbox)
    held = hold_copies(sb, count=rx_inflight_total)
    g.stop(sig=signal.SIGKILL)
    wait_until(lambda: sb.log_count("DMA copies abandoned"), 20,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    probe.finish()
    # The state: Rx copies abandoned, their mbufs with vhost, not back.
    kept = rx_mbufs_kept(sb)
    assert kept > 0, (held, sb.log_text()[-3000:])
    grown = sb.wait_mempools_back(base, timeout=2)
    missing = sum(now - was for was, now in grown.values())
    assert missing >= kept, (grown, kept)

    sb.swcopy("release", ENGINE)
    print(enable_engine(sb))
    state = dmadev_state(sb)
    assert sb.wait_mempools_back(base) == {}, (kept, state)
    m = re.search(r"mbufs of Rx copies freed: (\d+)", state)
    assert m and int(m.group(1)) >= kept, state
    assert sb.log_count("freed the") == 1
    print("Rx copies held: %d, mbufs kept by vhost: %d, freed: %s"
          % (held, kept, m.group(1)))
    # The port copies out of the guest on the engine again.
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    counters = sb.pmd_counters()
    assert counters["DMA Rx copies submitted"] > 0, counters
    assert counters["DMA Rx CPU fallbacks"] == 0, counters
    assert sb.wait_mempools_back(base) == {}


# An ARP request from 198.18.0.1 for 198.18.0.2, as OVN's packet-outs look
# to the port: a frame the guest counts as not one of its own ("foreign").
ARP = ("ffffffffffff020000000001080600010800060400010200000000"
       "01c6120001000000000000c6120002")


def packet_outs(sb, port_no, n):
    for _ in range(n):
        sb.ofctl("packet-out", "br0", "in_port=controller packet=%s "
                 "actions=output:%d" % (ARP, port_no))


def leaving_run(sb, n_outs, duration=20):
    """auto queues leaving a slow engine (dma-swcopy/delay, as in
    test_auto_keeps_off_an_engine_that_fell_behind), while the main thread
    sends 'n_outs' packet-outs into v0 under the watch.  Returns the
    verified run and the packet-outs' count: those that reached the guest
    plus the drops the switch counted beyond the generator's lost
    frames."""
    sb.set_copy_mode("auto")
    sb.swcopy("delay", ENGINE, 200)
    result = {}

    def run():
        result["run"] = traffic.loop_run(
            sb, size=1518, duration=duration,
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
    run = traffic.check(result["run"], others=n_outs)
    foreign = run["guest"]["foreign"]
    dropped = max(0, run["switch_dropped"] - run["guest"]["lost"])
    print("packet-outs: %d sent, %d reached the guest, %d more drops"
          % (n_outs, foreign, dropped))
    return run, foreign + dropped


def test_packet_out_while_auto_leaves_dma(swcopy_sandbox):
    """The main thread, which has no deferred work list, sends OpenFlow
    packet-outs into a port whose auto Tx queue is leaving DMA with copies
    in flight.  It used to run the queue's work inline, under the queue's
    lock that it held itself, and spin forever.  Now it must stay
    answered, and every packet-out reaches the guest once the copies are
    done.  The state is made on purpose: auto pinned to DMA (threshold 64
    B), the engine held with copies in flight, then the threshold raised
    above the frame size, so that the queue leaves DMA and stays leaving
    until the engine is released."""
    sb = swcopy_sandbox("auto")
    g = sb.start_guest([("v0", "sink"), ("v1", "gen")],
                       ["--size", 512, "--rate", 100, "--duration", 600,
                        "--wait-link", 60, "--progress", 0, "--warmup", 0])
    traffic.wait_for(g, lambda: g.log_has("port(s) up"), 60, "up")
    time.sleep(1)
    probe = Responsiveness(sb)
    probe.start()
    hold_copies(sb, n=16)
    leaving = sb.coverage("vhost_async_auto_leaving")
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-copy-auto-threshold=4096")
    wait_until(lambda: sb.coverage("vhost_async_auto_leaving") > leaving,
               10, "the queue did not leave DMA")
    no_list = sb.coverage("vhost_async_tx_no_list")
    # Few enough that what waits aside (with the generator's frames) fits
    # the guest's vring when it goes out at once.
    n_outs = 20
    packet_outs(sb, 1, n_outs)
    # The main thread met the copies in flight (coverage counters are
    # summed once a second).
    wait_until(lambda: sb.coverage("vhost_async_tx_no_list") > no_list, 5,
               "the main thread never met the queue leaving DMA")
    sb.swcopy("release", ENGINE)
    probe.finish()
    time.sleep(1.5)
    res = stop_guest(g)
    print("packet-outs: %d sent, %d reached the guest; %d frames lost"
          % (n_outs, res["foreign"], res["lost"]))
    assert res["foreign"] == n_outs, res
    assert res["lost"] == 0 and res["reordered"] == 0, res


def test_full_work_list_while_auto_leaves_dma(sandbox_factory):
    """auto queues leaving a slow engine while the main thread sends
    packet-outs, with the PMD's deferred work list filled on purpose
    (other_config:pmd-defer-max-items=1: v0's and v1's queues need two
    items).  A PMD whose list is full used to run the work inline under the
    queue's lock, as the main thread did; now the port's Rx poller sweeps
    what no list takes, and traffic stays verified."""
    sb = sandbox_factory(ports=2, mtu=9000, dma=1, dma_driver="dma_swcopy",
                         other_config={"pmd-defer-max-items": "1"})
    n_outs = 100
    _, accounted = leaving_run(sb, n_outs)
    assert accounted >= n_outs, accounted
    refused = sb.pmd_counters()["deferred work items refused (list full)"]
    assert refused > 0, sb.pmd_counters()
    wait_until(lambda: sb.coverage("vhost_async_swept") > 0, 5,
               "nothing was swept")


@pytest.mark.parametrize("mode", ["v3", "defer", "auto"])
def test_packet_out_into_held_txq(swcopy_sandbox, mode):
    """The main thread sends packet-outs into a port whose Tx queue locks
    are held (vhost-txq-hold, no time limit): it used to wait for the lock
    for good, so that vhost-txq-release could never run.  Now it stays
    answered: in defer and auto it puts its packets aside, and the port's
    Rx poller sends them once the lock is released; in v3 (no ring) it
    gives up on the lock after a bound and drops, counted.  Every
    packet-out is accounted for."""
    sb = swcopy_sandbox(mode)
    # A guest that sends a little from v1 to v0: what reaches v0 that is
    # not its own traffic ("foreign") is the packet-outs.  Little enough
    # that what waits aside during the hold, sent at once after it, fits
    # the guest's vring.
    g = sb.start_guest([("v0", "sink"), ("v1", "gen")],
                       ["--size", 512, "--rate", 10, "--duration", 600,
                        "--wait-link", 60, "--progress", 0, "--warmup", 0])
    traffic.wait_for(g, lambda: g.log_has("port(s) up"), 60, "up")
    probe = Responsiveness(sb)
    probe.start()
    n_outs = 20
    sb.appctl("netdev-dpdk/vhost-txq-hold", "v0")
    packet_outs(sb, 1, n_outs)
    probe.finish()
    sb.appctl("netdev-dpdk/vhost-txq-release", "v0")
    time.sleep(1.5)
    res = stop_guest(g)
    lock_drops = sb.coverage("vhost_async_lock_wait_drop")
    print("%s: %d packet-outs, %d reached the guest, %d lock-wait drops"
          % (mode, n_outs, res["foreign"], lock_drops))
    assert res["foreign"] + lock_drops >= n_outs, (res, lock_drops)
    if mode == "v3":
        # No ring to put packets aside: the main thread gave up on the
        # lock, each time after its bound.
        assert lock_drops == n_outs, lock_drops
    else:
        # Put aside, and sent once the lock was free.
        assert res["foreign"] == n_outs, res


def test_rx_engine_error(swcopy_sandbox):
    """Rx copies (vhost-rx-copy-mode=dma, Tx cpu) behind a copy that fails
    (dma-swcopy/fail): vhost never completes it nor any later one of the
    engine, so the guest's transmit queue never gets its descriptors back.
    The Rx queue must be reset as a wedged Tx queue is (it was not: the
    guest could never send again), its copies abandoned and counted, and
    the port must carry verified traffic again, its Rx copied on the
    CPU."""
    sb, base, g, probe = rx_dma_traffic(swcopy_sandbox)
    sb.swcopy("fail", ENGINE, 1)

    def resets():
        return parse.resets(sb.appctl("netdev-dpdk/vhost-copy-mode-get"))
    wait_until(lambda: sb.log_count("copies in flight on a DMA engine out "
                                 "of service") and resets(), 20,
               lambda: (sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
                        sb.swcopy_state(ENGINE)), interval=0.2)
    assert "copies failed: 1 (1 on purpose)" in sb.swcopy("show", ENGINE)
    assert sb.log_count("rxq 0 has") >= 1
    res = stop_guest(g)
    assert res["reordered"] == 0, res
    probe.finish()
    print("Rx engine error: %d resets, abandoned %s" % (resets(),
                                                        sb.abandoned()))
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    counters = sb.pmd_counters()
    assert counters["DMA Rx copies submitted"] == 0, counters
    assert counters["DMA Rx CPU fallbacks"] > 0, counters
    # The mbufs of the copies behind the failed one, which vhost kept, are
    # freed when the engine comes back.
    kept = rx_mbufs_kept(sb)
    assert kept > 0, sb.log_text()[-3000:]
    enable_engine(sb)
    assert sb.wait_mempools_back(base) == {}, (kept, dmadev_state(sb))


@pytest.mark.parametrize("event", ["mem-table", "port-delete"])
def test_one_deadline_per_device_event(swcopy_sandbox, event):
    """Four queue pairs (Tx defer, Rx dma) with copies held on at least 4
    vrings by an engine that does not come back, then a memory table
    change (the guest grows its memory: vhost clears each vring in turn,
    with the queue locks held) or the port's delete (the main thread
    clears them).  The clears share one deadline (2 s) and the engine is
    fenced once: the event takes about one deadline, not 2 s per vring,
    and the main thread stays answered."""
    sb = swcopy_sandbox("defer")
    sb.set_rx_copy_mode("dma")
    g = sb.start_guest([("v0", "gen+sink", 4), ("v1", "loop", 4)],
                       ["--size", 512, "--duration", 600, "--wait-link", 60,
                        "--progress", 0, "--warmup", 0])
    traffic.wait_for(g, lambda: g.log_has("port(s) up"), 60, "up")
    time.sleep(1.5)
    probe = Responsiveness(sb)
    probe.start()

    def v0_vrings(sb):
        """v0's copies in flight, once 4 of its vrings have some (its 4 Rx
        queues, where the guest generates)."""
        tx = sb.txq_inflight().get("v0", {})
        rx = sb.rxq_inflight().get("v0", {})
        busy = [q for q in tx.values() if q] + [q for q in rx.values() if q]
        return sum(busy) if len(busy) >= 4 else 0
    held = hold_copies(sb, n=64, count=v0_vrings)
    start = time.time()
    if event == "mem-table":
        g.grow_memory()
    else:
        sb.del_port("v0")
    took = time.time() - start
    try:
        wait_until(lambda: sb.log_count("dmadev %s stopped" % ENGINE), 10,
                   "the engine was not stopped")
        if event == "mem-table":
            # vhost's thread cleared the vrings, and waited for the engine,
            # in vhost callbacks.  The switch then resets v0, whose copies
            # can never complete, and brings the engine back: both wait on
            # the main thread for every thread to quiesce, vhost's among
            # them (which must not be left registered and busy for RCU).
            wait_until(lambda: sb.log_count("again to reset the device"),
                       10, "v0 was not reset")
            r = sb.appctl_result("netdev-dpdk/dmadev-enable", ENGINE)
            assert r.returncode == 0 and "in service" in r.stdout, r
    finally:
        probe.finish()
    print("%s with %d copies held on 4 queue pairs: %.1f s, main thread's "
          "worst answer %.1f s" % (event, held, took, probe.worst))
    assert sb.vswitchd_alive()
    # One deadline (2 s) plus the fence, with a wide margin; a deadline
    # per vring would be 8 s or more.
    assert took < 6, took
    assert sb.log_count("dmadev %s taken out of service" % ENGINE) == 1
    g.stop(sig=signal.SIGKILL)


@pytest.mark.parametrize("mode", ["defer", "v3"])
def test_stalled_engine_watchdog(swcopy_sandbox, mode):
    """An engine that simply stops completing, without reporting an error
    (held, no time limit), while the guest stays connected: the health
    watch notices it after other_config:dma-stall-timeout (1500 ms here:
    long enough for the held copies to pile up first, also on a loaded
    machine), fences it (its held copies are dropped, never executed),
    logs it once, and the queues behind it are reset onto the CPU;
    nothing waits for a clear to time out (2000 ms).  Releasing the hold
    afterwards changes nothing."""
    sb = swcopy_sandbox(mode,
                           other_config={"dma-stall-timeout": "1500"})
    baseline(sb)
    g = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    held = hold_copies(sb, n=64)
    wait_until(lambda: sb.log_count("taken out of service: it completed no "
                                 "copy for other_config:dma-stall-timeout"),
               10, lambda: sb.appctl("netdev-dpdk/dmadev-show"),
               interval=0.1)

    def reset_done():
        modes = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
        return ("on a DMA engine out of service" not in modes
                and sum(sb.abandoned().values()) > 0)
    wait_until(reset_done, 20, lambda: sb.appctl(
        "netdev-dpdk/vhost-copy-mode-get"), interval=0.2)
    assert sb.log_count("dmadev %s taken out of service" % ENGINE) == 1
    assert "stalls: 1 (completed nothing" in dmadev_state(sb)
    sb.swcopy("release", ENGINE)
    time.sleep(0.5)
    assert sb.vswitchd_alive()
    state = sb.swcopy_state(ENGINE)
    assert int(state["copies dropped by a stop"]) > 0, (held, state)
    res = stop_guest(g)
    assert res["reordered"] == 0, res
    probe.finish()
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] == 0, counters
    assert counters["DMA CPU fallbacks"] > 0, counters


def pmd_engine(sb, core):
    """The dmadev that the PMD thread on 'core' took."""
    with open(sb.vswitchd_log) as f:
        m = re.findall(r"PMD thread on core %d uses dmadev (\S+) " % core,
                       f.read())
    assert m, "the PMD on core %d took no dmadev" % core
    return m[-1]


def test_wedge_while_auto_leaves_dma(swcopy_sandbox):
    """Two PMDs, each with its own engine, send into v1's only Tx queue in
    auto (pinned to DMA).  Engine A holds copies of that queue; the
    threshold goes up, so the queue leaves DMA and puts aside what comes
    until its copies are done.  Then A fails a copy and goes out of
    service: its copies never complete, and B's, behind them in the
    queue's order, never retire.  The queue used to stay leaving for good
    (the leaving branch returned before the wedge check), putting aside
    or dropping everything, its device never reset.  The wedge must be
    seen: v1 is reset once, and the port carries verified traffic again.
    B, which completed all it had, stays in service: the reset used to
    take out every engine that had ever copied for the queue."""
    sb = shared_txq_sandbox(swcopy_sandbox, dma=2)
    engine_a, engine_b = pmd_engine(sb, 0), pmd_engine(sb, 1)
    assert engine_a != engine_b
    # v0's two queues, polled by the two PMDs, both send into v1's queue.
    g = sb.start_guest([("v0", "gen+sink", 2), ("v1", "loop", 1)],
                       ["--size", 512, "--rate", 2000, "--duration", 600,
                        "--wait-link", 60, "--progress", 0, "--warmup", 0])
    traffic.wait_for(g, lambda: g.log_has("port(s) up"), 60, "up")
    executed = {e: sb.swcopy_state(e)["copies executed"]
                for e in (engine_a, engine_b)}
    wait_until(lambda: all(sb.swcopy_state(e)["copies executed"]
                           != executed[e] for e in executed), 10,
               lambda: "not both engines copy: %s"
               % {e: sb.swcopy_state(e) for e in executed})
    probe = Responsiveness(sb)
    probe.start()

    def v1_inflight(sb):
        return sum(sb.txq_inflight()["v1"].values())
    held = hold_copies(sb, n=16, engines=(engine_a,), count=v1_inflight)
    leaving = sb.coverage("vhost_async_auto_leaving")
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-copy-auto-threshold=4096")
    wait_until(lambda: sb.coverage("vhost_async_auto_leaving") > leaving,
               10, "the queue did not leave DMA")
    sb.swcopy("fail", engine_a, 1)
    sb.swcopy("release", engine_a)
    wait_until(lambda: sb.log_count("dmadev %s taken out of service: a "
                                 "copy failed" % engine_a), 10,
               lambda: sb.appctl("netdev-dpdk/dmadev-show"), interval=0.2)
    # B stays in service, so only the wedge check can see that v1's queue
    # waits for copies that never come back.
    wait_until(lambda: "resets for a failed DMA engine: 1" in sb.appctl(
        "netdev-dpdk/vhost-copy-mode-get", "v1"), 15,
        lambda: "v1 was never reset: %s" % sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get", "v1"), interval=0.2)
    probe.finish()
    res = stop_guest(g)
    print("%d copies held on %s; v1 reset; guest: %d received, %d lost"
          % (held, engine_a, res["rx_pkts"], res["lost"]))
    assert sb.log_count("resetting the vhost-user connection") >= 1
    # B completed every copy it had: the reset must not fence it for
    # copies of A that it could not return past.
    assert "out of service" not in dmadev_state(sb, engine_b), \
        dmadev_state(sb, engine_b)
    assert sb.log_count("dmadev %s taken out of service" % engine_b) == 0
    assert sb.vswitchd_alive()
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-copy-auto-threshold=64")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    # B still copies (for the PMD on core 1), A's PMD on the CPU.
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA CPU fallbacks"] > 0, counters
