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

"""Life-cycle events with DMA copies in flight, on purpose.

Each case holds the dma_swcopy engine (dma-swcopy/hold) until at least
HELD copies are in flight and checks that they are, then arms a timed
release and causes the event: whatever waits for the copies (a clear
before vhost unmaps guest memory, a mode switch) must wait for the engine
and must not block the main thread for more than a few seconds.  Then it
checks that the switch is alive and answered throughout, that the port
carries verified traffic again, that no copy is left in flight or was
abandoned, and that every mempool is back to its baseline."""

import os
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import pairwise
from ovs_async import parse, traffic
from ovs_async.modes import ASYNC_MODES
from ovs_async.sandbox import SandboxError
from ovs_async.wait import wait_until
from ovs_async.watch import Responsiveness


ENGINE = "dma_swcopy0"
MODES = list(ASYNC_MODES)

# Copies in flight before each event.
HELD = 256

# The engine resumes by itself this long after the event started: longer
# than the event needs to reach the copies, shorter than the 2 s for which
# a clear waits for an engine.
RELEASE_MS = 1000

def baseline(sb):
    """A verified run, then the mempools' in-use counts at rest."""
    traffic.check(traffic.loop_run(sb, size=512, duration=0.5))
    return sb.mempool_in_use()


def start_traffic(sb, seconds=600):
    """A guest that sends to v0 -> v1 -> v0 without a break, once its
    traffic flows.  It runs until the test stops it (stop_guest(), or the
    sandbox's end): on a loaded machine its start alone took 57 s once, and
    a guest that ended on its own before the test's event left the engine
    no copies to hold."""
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 512, "--duration", seconds,
                        "--wait-link", 60, "--progress", 0,
                        "--warmup", 0])
    traffic.wait_flowing(sb, g)
    return g


def inflight_total(sb):
    """Copies in flight into the guest (Tx queues)."""
    return sum(sum(q.values()) for q in sb.txq_inflight().values())


def rx_inflight_total(sb):
    """Copies in flight out of the guest (Rx queues)."""
    return sum(sum(q.values()) for q in sb.rxq_inflight().values())


def hold_copies(sb, n=HELD, timeout=15, engines=(ENGINE,),
                count=inflight_total):
    """Holds the engines until at least 'n' copies are in flight, as
    'count' counts them; returns how many are."""
    for engine in engines:
        sb.swcopy("hold", engine)
    total = wait_until(lambda: (lambda t: t if t >= n else 0)(count(sb)),
                       timeout,
                       lambda: "only %d copies in flight:\n%s\n%s"
                       % (count(sb),
                          sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
                          sb.appctl("dpif-netdev/pmd-stats-show")))
    for engine in engines:
        state = sb.swcopy_state(engine)
        assert state["held"].startswith("yes"), state
    return total


def during_held_copies(sb, event, engines=(ENGINE,), count=inflight_total):
    """Causes 'event' with copies held, the engines resuming by themselves
    RELEASE_MS into it, while the main thread is watched."""
    probe = Responsiveness(sb)
    probe.start()
    held = hold_copies(sb, engines=engines, count=count)
    for engine in engines:
        sb.swcopy("hold", engine, RELEASE_MS)
    try:
        event()
    finally:
        for engine in engines:
            sb.swcopy("release", engine)
        probe.finish()
    return held


def stop_guest(g):
    """Ends a traffic guest and checks what it received."""
    if g.running():
        g.proc.send_signal(signal.SIGINT)
    res = g.wait(timeout=60)
    assert res["corrupted"] == 0 and res["duplicates"] == 0, res
    assert res["misdelivered"] == 0, res
    return res


def check_recovered(sb, base, mode, rx_mode="cpu"):
    """The port carries verified traffic in 'mode' (and Rx copy mode
    'rx_mode'), nothing is in flight or abandoned, and every mempool is
    back to 'base'."""
    assert sb.vswitchd_alive()
    for port in ("v0", "v1"):
        assert sb.copy_mode(port) == mode, sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get")
        assert sb.rx_copy_mode(port) == rx_mode, sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    counters = sb.pmd_counters()
    if mode != "cpu":
        assert counters["DMA copies submitted"] > 0, counters
        assert counters["DMA CPU fallbacks"] == 0, counters
    if rx_mode != "cpu":
        assert counters["DMA Rx copies submitted"] > 0, counters
        assert counters["DMA Rx CPU fallbacks"] == 0, counters
    wait_until(lambda: not inflight_total(sb) and not rx_inflight_total(sb),
               10, lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.1)
    assert not any(sb.abandoned().values()), sb.abandoned()
    assert sb.wait_mempools_back(base) == {}
    with open(sb.vswitchd_log) as f:
        log = f.read()
    assert "abandoned" not in log
    assert "AddressSanitizer" not in log and "runtime error" not in log


def readd_port(sb, mode, name="v1", ofport=2):
    sb.del_port(name)
    sb.add_port(name, ofport=ofport)
    sb.set_copy_mode(mode, name)
    sb.set_topology("loop")


def grow_shrink_pmds(sb):
    """A second PMD thread (on CPU 0), then back to the one on CPU 1."""
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x3")
    time.sleep(0.5)
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x2")


def grow_memory(sb, g):
    """The guest's memory grows: each port gets a new memory table on its
    live device, which vhost brackets with a disable of every vring (the
    clear of the copies held) and an enable."""
    before = sb.log_count("read message VHOST_USER_SET_MEM_TABLE")
    g.proc.send_signal(signal.SIGUSR2)
    wait_until(lambda: sb.log_count(
        "read message VHOST_USER_SET_MEM_TABLE") >= before + 2,
        10, "no SET_MEM_TABLE")


EVENTS = ["port-readd", "guest-kill", "pmd-mask", "rxq-affinity",
          "mode-switch", "mem-table"]


# Every mode with every event, and each of them with both flush intervals
# (conftest.pairwise): 24 tests instead of 48.
@pytest.mark.parametrize(
    "mode,event,flush", pairwise(MODES, EVENTS, [0, 50]),
    ids=lambda v: "flush%d" % v if isinstance(v, int) else v)
def test_event_with_copies_held(swcopy_sandbox, mode, event, flush):
    sb = swcopy_sandbox(mode, pmd_cpus=[1],
                           other_config={"tx-flush-interval": str(flush)})
    base = baseline(sb)
    g = start_traffic(sb)

    if event == "port-readd":
        during_held_copies(sb, lambda: readd_port(sb, mode))
    elif event == "guest-kill":
        during_held_copies(sb, lambda: g.stop(sig=signal.SIGKILL))
    elif event == "pmd-mask":
        during_held_copies(sb, lambda: grow_shrink_pmds(sb))
    elif event == "rxq-affinity":
        def pin():
            sb.vsctl("set", "Interface", "v0",
                     "other_config:pmd-rxq-affinity=0:1")
            sb.appctl("dpif-netdev/pmd-rxq-rebalance")
            sb.vsctl("remove", "Interface", "v0", "other_config",
                     "pmd-rxq-affinity")
        during_held_copies(sb, pin)
    elif event == "mem-table":
        during_held_copies(sb, lambda: grow_memory(sb, g))
        assert g.log_has("memory grown by 64 MB"), g.log_tail()
    elif event == "mode-switch":
        # Every async mode to each other mode and to cpu, and back.
        for other in [m for m in MODES + ["cpu"] if m != mode]:
            during_held_copies(sb, lambda: sb.set_copy_mode(other))
            sb.set_copy_mode(mode)
            time.sleep(0.5)

    if event != "guest-kill":
        stop_guest(g)
    check_recovered(sb, base, mode)


RX_EVENTS = ["port-readd", "guest-kill", "pmd-mask", "mem-table",
             "rx-mode-switch"]

# Engines of the Rx tests: one per PMD once the PMD mask grows, so that an
# Rx queue moves to a PMD whose engine does not hold its copies.
RX_ENGINES = ("dma_swcopy0", "dma_swcopy1")


@pytest.mark.parametrize("event", RX_EVENTS)
@pytest.mark.parametrize("mode", ["cpu", "defer"])
def test_event_with_rx_copies_held(swcopy_sandbox, mode, event):
    """Rx (dequeue) copies held in flight by the engines through a life
    -cycle event: the copies of the guest's packets are finished before
    vhost unmaps guest memory, kept for the PMD when the queue lives on
    (delivered, in order) and dropped, counted, when the guest is gone."""
    sb = swcopy_sandbox(mode, pmd_cpus=[1], dma=2)
    sb.set_rx_copy_mode("dma")
    base = baseline(sb)
    g = start_traffic(sb)
    held = dict(engines=RX_ENGINES, count=rx_inflight_total)

    if event == "port-readd":
        def readd():
            readd_port(sb, mode)
            sb.set_rx_copy_mode("dma", "v1")
        during_held_copies(sb, readd, **held)
    elif event == "guest-kill":
        during_held_copies(sb, lambda: g.stop(sig=signal.SIGKILL), **held)
        # What the clears completed of the dead guest's packets is counted.
        wait_until(lambda: sb.log_count("packets received from the guest "
                                     "by DMA copies that completed as its "
                                     "device went away"), 10,
                   "no Rx drops logged")
        out = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
        dropped = sum(int(n) for n in re.findall(
            r"^  Rx packets dropped, their device gone: (\d+)$", out, re.M))
        assert dropped > 0, out
    elif event == "pmd-mask":
        # The second PMD takes an Rx queue whose copies sit on the first
        # PMD's engine.
        during_held_copies(sb, lambda: grow_shrink_pmds(sb), **held)
    elif event == "mem-table":
        during_held_copies(sb, lambda: grow_memory(sb, g), **held)
        assert g.log_has("memory grown by 64 MB"), g.log_tail()
    elif event == "rx-mode-switch":
        for other in ("cpu", "auto"):
            during_held_copies(sb, lambda: sb.set_rx_copy_mode(other),
                               **held)
            sb.set_rx_copy_mode("dma")
            time.sleep(0.5)

    if event != "guest-kill":
        res = stop_guest(g)
        assert res["reordered"] == 0, res
    check_recovered(sb, base, mode, rx_mode="dma")


def rxq_cores(sb):
    return parse.rxq_cores(sb.appctl("dpif-netdev/pmd-rxq-show"))


def rx_packets(sb):
    return parse.rx_packets(sb.appctl("dpif-netdev/pmd-stats-show"))


def warp(sb, ms):
    sb.appctl("time/warp", str(ms))


ALB_DRY_RUN = "PMD auto load balance dry run. Requesting datapath reconfigure."

# Frames per second of the traffic on v0 and v1 in the pmd-auto-lb test.
LOW_RATE = 2000


# Each mode with one flush interval, each interval with half the modes
# (test_event_with_copies_held meets every mode with both).
@pytest.mark.parametrize("mode,flush", [(m, (0, 50)[i % 2])
                                        for i, m in enumerate(MODES)],
                         ids=lambda v: "flush%d" % v if isinstance(v, int)
                         else v)
def test_pmd_auto_lb_with_copies_held(swcopy_sandbox, mode, flush):
    """pmd-auto-lb moves an Rx queue to the other PMD while copies are
    held.

    ALB wants each PMD overloaded for 12 intervals of 5 s and then waits
    for its rebalance interval (minutes): time/warp (--enable-dummy) makes
    that time pass at once.  With load and improvement thresholds of 0 %
    every interval counts as overloaded and the dry run always asks for a
    reconfigure, and the queues are placed so that it must move one: v0
    and v1, which carry the traffic, start on the same PMD."""
    sb = swcopy_sandbox(
        mode, ports=4, pmd_cpus=[0, 1], dma=2,
        vswitchd_args=["--enable-dummy"],
        other_config={"tx-flush-interval": str(flush),
                      "pmd-rxq-assign": "group",
                      "pmd-auto-lb-load-threshold": "0",
                      "pmd-auto-lb-improvement-threshold": "0",
                      "pmd-auto-lb-rebal-interval": "2"})
    engines = ["dma_swcopy0", "dma_swcopy1"]

    # Both guests connect first and wait (--hold): a guest that connects or
    # goes away makes the datapath place every queue again.  The one on v0
    # and v1 sends at a low rate, so that v2's full rate costs far more
    # even on a slow build; ALB only compares loads, and 256 copies are in
    # flight after a fraction of a second.
    g = traffic.start_held(sb, [("v0", "gen+sink"), ("v1", "loop")],
                           ["--size", 512, "--duration", 60, "--rate",
                            LOW_RATE, "--progress", 0, "--warmup", 0])
    side = traffic.start_held(sb, [("v2", "gen"), ("v3", "sink")],
                              ["--size", 512, "--duration", 6])
    for guest in (g, side):
        traffic.wait_for(guest, lambda guest=guest:
                         guest.log_has("ready; waiting"), 120, "ready")
    base = sb.mempool_in_use()

    # While v2 carries most of the traffic, measured intervals go by; then
    # the group assignment gives each queue, the busiest first, to the PMD
    # with the least load: v2 to A, and v0, v1 and v3 (the sink's few
    # cycles) to B.  The PMDs measure a queue's cycles by the TSC, so on a
    # loaded machine a PMD preempted in the middle of v0's burst charges
    # v0 for the wait: the rebalance is asked again, over more intervals
    # (a PMD keeps 12), until the measured loads place the queues so.
    side.release()
    g.release()
    traffic.wait_for(side, lambda: rx_packets(sb) > 1000, 60, "sending")
    for attempt in range(4):
        for _ in range(2):
            warp(sb, 5100)
            time.sleep(0.3)
        sb.appctl("dpif-netdev/pmd-rxq-rebalance")
        cores = rxq_cores(sb)
        if cores["v0"] == cores["v1"] != cores["v2"]:
            break
    with open(sb.vswitchd_log) as f:
        placed = [line for line in f if "measured processing cycles" in line]
    assert cores["v0"] == cores["v1"] != cores["v2"], (cores, placed[-4:])
    print("pmd-auto-lb: v2 placed apart after %d rebalance(s)"
          % (attempt + 1))
    traffic.wait_for(side, side.result_ready, 60, "done")

    # A minute of overloaded intervals, short of the rebalance interval.
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-auto-lb=true")
    for _ in range(13):
        warp(sb, 5100)
        time.sleep(0.1)
    assert sb.log_count(ALB_DRY_RUN) == 0
    assert rxq_cores(sb) == cores

    probe = Responsiveness(sb)
    probe.start()
    try:
        held = hold_copies(sb, engines=engines)
        # The rebalance interval ends: the dry run, the new assignment and
        # the reload of both PMDs, all with the engines held.
        warp(sb, 60000)
        wait_until(lambda: rxq_cores(sb)["v0"] != rxq_cores(sb)["v1"], 10,
                   lambda: rxq_cores(sb))
        assert sb.log_count(ALB_DRY_RUN) == 1
        still = inflight_total(sb)
        assert still > 0, "nothing in flight when the queue moved"
    finally:
        for engine in engines:
            sb.swcopy("release", engine)
        probe.finish()
    print("pmd-auto-lb: %d copies held, %d still in flight after the move: "
          "%s -> %s" % (held, still, cores, rxq_cores(sb)))

    stop_guest(g)
    side.release()
    res = side.wait(timeout=30)
    assert res["corrupted"] == 0 and res["rx_pkts"] > 0, res
    check_recovered(sb, base, mode)


@pytest.mark.parametrize("mode", MODES)
def test_bridge_delete_with_copies_held(swcopy_sandbox, mode):
    sb = swcopy_sandbox(mode)
    base = baseline(sb)
    g = start_traffic(sb)
    during_held_copies(sb, lambda: sb.vsctl("--timeout=30", "del-br",
                                             "br0"))
    assert sb.vswitchd_alive()
    stop_guest(g)
    sb.vsctl("--timeout=30", "add-br", "br0", "--", "set", "bridge", "br0",
             "datapath_type=netdev")
    ports, sb.ports = list(sb.ports), []
    for i, name in enumerate(ports):
        sb.add_port(name, ofport=i + 1)
    sb.set_copy_mode(mode)
    sb.set_topology("loop")
    check_recovered(sb, base, mode)


SHUTDOWNS = ["exit", "exit-cleanup", "sigterm"]


# Each mode with two of the three ways to stop, each way with at least two
# modes: 8 cases instead of 12.
@pytest.mark.parametrize("mode,how", [(m, SHUTDOWNS[(i + j) % 3])
                                      for i, m in enumerate(MODES)
                                      for j in range(2)])
def test_shutdown_with_copies_held(swcopy_sandbox, mode, how):
    sb = swcopy_sandbox(mode)
    baseline(sb)
    g = start_traffic(sb)
    hold_copies(sb)
    sb.swcopy("hold", ENGINE, RELEASE_MS)
    proc = sb.procs["ovs-vswitchd"]
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:
        args = ["exit"] + (["--cleanup"] if how == "exit-cleanup" else [])
        r = sb.appctl_result(*args)
        assert r.returncode == 0, r.stderr
    # Exiting is bounded (the engine resumes after RELEASE_MS; a clear
    # gives up after 2 s).
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        raise SandboxError("ovs-vswitchd did not exit within 20 s")
    assert rc == (-signal.SIGTERM if how == "sigterm" else 0), rc
    g.stop()
    with open(sb.vswitchd_log) as f:
        log = f.read()
    assert "AddressSanitizer" not in log and "runtime error" not in log
    if how == "exit-cleanup":
        assert "abandoned" not in log


def assert_verified_on_cpu(sb):
    """The switch carries verified traffic, copied on the CPU: the engine
    of its PMD is out of service."""
    assert sb.vswitchd_alive()
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] == 0, counters
    assert counters["DMA CPU fallbacks"] > 0, counters


def traffic_watched(swcopy_sandbox, mode):
    """A sandbox in 'mode' with traffic flowing and the main thread
    watched.  Returns the sandbox, the mempool baseline, the guest and the
    watcher."""
    sb = swcopy_sandbox(mode)
    base = baseline(sb)
    g = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    return sb, base, g, probe


def engine_stuck(swcopy_sandbox, mode):
    """traffic_watched(), and the engine held (no timed release) with
    copies in flight; also returns the number of copies held."""
    sb, base, g, probe = traffic_watched(swcopy_sandbox, mode)
    return sb, base, g, probe, hold_copies(sb)


@pytest.mark.parametrize("mode", MODES)
def test_reload_with_engine_stuck(swcopy_sandbox, mode):
    """A PMD reload while the engine completes nothing: the drain gives up
    after its bound instead of holding the reload (and the main thread,
    which waits for it) until the engine comes back."""
    sb, base, g, probe, _ = engine_stuck(swcopy_sandbox, mode)
    sb.appctl("dpif-netdev/pmd-stats-clear")
    for mask in ("0x3", "0x2"):
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:pmd-cpu-mask=%s" % mask)
        time.sleep(1)
    assert sb.swcopy_state(ENGINE)["held"] == "yes"
    probe.finish()
    if mode in ("defer", "auto"):
        left = sb.pmd_counters()["deferred work left by a drain"]
        assert left > 0, sb.pmd_counters()
        assert sb.log_count("deferred work items still in flight") > 0
    sb.swcopy("release", ENGINE)
    stop_guest(g)
    check_recovered(sb, base, mode)


@pytest.mark.parametrize("mode", MODES)
def test_mode_switch_waits_for_stuck_engine(swcopy_sandbox, mode):
    """A switch to cpu while the engine completes nothing keeps the async
    mode (CPU enqueues would overtake the copies in the guest's queue) and
    retries; it happens once the engine is back."""
    sb, base, g, probe, _ = engine_stuck(swcopy_sandbox, mode)
    sb.appctl("netdev-dpdk/vhost-copy-mode-set", "cpu")
    # The switch gave up waiting for the copies at least once, and the
    # mode stayed.
    wait_until(lambda: sb.log_count("keeping vhost copy mode %s" % mode),
               15, "the switch to cpu did not give up on the held copies")
    modes = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
    assert "(requested cpu, not applied)" in modes, modes
    probe.finish()
    sb.swcopy("release", ENGINE)
    wait_until(lambda: sb.copy_mode("v0") == sb.copy_mode("v1") == "cpu", 30,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)
    res = stop_guest(g)
    assert res["reordered"] == 0, res
    check_recovered(sb, base, "cpu")


@pytest.mark.parametrize("mode", MODES)
def test_guest_gone_with_engine_stuck(swcopy_sandbox, mode):
    """The guest vanishes while the engine completes nothing and never
    will: after its bound the clear abandons the copies (counted, logged
    once per port), the engine goes out of service and the port carries
    verified traffic again on the CPU.  The copies are all Tx copies, whose
    mbufs vhost would keep for good: the switch frees them once the engine
    is fenced, so every mempool comes back to its baseline."""
    sb, base, g, probe, held = engine_stuck(swcopy_sandbox, mode)
    g.stop(sig=signal.SIGKILL)
    wait_until(lambda: sum(sb.abandoned().values()) >= held, 20,
               lambda: (held, sb.abandoned()), interval=0.2)
    probe.finish()
    assert sum(sb.abandoned().values()) >= held, (held, sb.abandoned())
    assert sb.log_count("DMA copies abandoned") == sum(
        1 for n in sb.abandoned().values() if n)
    assert sb.log_count("dmadev %s taken out of service" % ENGINE) == 1
    assert "out of service" in sb.appctl("netdev-dpdk/dmadev-show")
    assert_verified_on_cpu(sb)
    assert sb.wait_mempools_back(base) == {}
    abandoned = sb.abandoned()
    assert sum(abandoned.values()) > 0
    assert sb.abandoned_freed() == abandoned
    # The engine is never released: its copies would write into memory
    # that vhost unmapped (see Documentation/dma-swcopy.md).


# One mode that retires copies where it submits them (defer) and one that
# retires them from a ring (ring); the new guest's negotiation is the same
# code in every mode.
@pytest.mark.parametrize("mode", ["ring", "defer"])
def test_guest_starts_while_engine_held(swcopy_sandbox, mode):
    """A second guest connects while the engine holds the first guest's
    copies and completes nothing: vhost's thread (the vrings, the memory
    table, the async channels of the new device) and the main thread must
    not wait for the engine.  The new guest's ports come up, and its own
    copies go to the held engine, while the first guest's are still held;
    once the engine resumes, both guests' traffic is verified and nothing
    is left in flight or abandoned."""
    sb = swcopy_sandbox(mode, ports=4, pmd_cpus=[1])
    base = baseline(sb)
    a = start_traffic(sb)
    probe = Responsiveness(sb)
    probe.start()
    try:
        held = hold_copies(sb)
        added = sb.log_count("has been added on numa node")
        b = sb.start_guest([("v2", "gen+sink"), ("v3", "loop")],
                           ["--size", 512, "--duration", 600,
                            "--wait-link", 60, "--progress", 0,
                            "--warmup", 0])
        traffic.wait_for(b, lambda: b.log_has("port(s) up"), 60, "up")
        # The moment was reached: both of its devices were added, and its
        # copies went in flight on the engine, while the engine held the
        # first guest's.
        assert sb.log_count("has been added on numa node") >= added + 2
        wait_until(lambda: sum(sum(sb.txq_inflight().get(p, {}).values())
                               for p in ("v2", "v3")) > 0, 20,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))
        assert sb.swcopy_state(ENGINE)["held"].startswith("yes")
        inflight = sb.txq_inflight()
        assert sum(inflight["v0"].values()) + sum(
            inflight["v1"].values()) >= held, (held, inflight)
    finally:
        sb.swcopy("release", ENGINE)
        probe.finish()
    traffic.wait_flowing(sb, b)
    for g in (b, a):
        res = stop_guest(g)
        assert res["reordered"] == 0 and res["rx_pkts"] > 0, res
    check_recovered(sb, base, mode)


@pytest.mark.parametrize("mode", MODES)
def test_engine_error(swcopy_sandbox, mode):
    """A copy completes with an error (dma-swcopy/fail), as a failing
    hardware engine would report it.  vhost 22.11 does not handle DMA
    errors: that copy and every later one of the engine never complete for
    it, so the guest queues that used the engine are wedged.  The switch
    takes the engine out of service (logged once), drops what is sent to a
    wedged queue (counted), resets the guest's connection, counts the
    copies it had to abandon, and the port carries verified traffic again,
    on the CPU.  The abandoned copies' mbufs are the only ones lost."""
    sb, base, g, probe = traffic_watched(swcopy_sandbox, mode)
    sb.swcopy("fail", ENGINE, 1)
    # Every port with copies on the engine after the failed one is wedged
    # and must be reset: wait until none is left, and every port whose
    # reset was logged has abandoned its copies (between its device going
    # and that count, a port shows no queue at all: a loaded machine made
    # the poll fall in that window).
    def all_reset():
        modes = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
        reset = [p for p in ("v0", "v1") if sb.abandoned().get(p)]
        logged = set(re.findall(r"\|(v\d): [rt]xq \d+ has \d+ copies in "
                                r"flight on a DMA engine out of service",
                                sb.log_text()))
        if ("on a DMA engine out of service" in modes
                or not logged <= set(reset)):
            return []
        return reset
    reset = wait_until(all_reset, 20, lambda: (
        sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
        sb.swcopy_state(ENGINE)), interval=0.2)
    # The failure happened on purpose, and was seen.
    assert "copies failed: 1 (1 on purpose)" in sb.swcopy("show", ENGINE)
    assert sb.log_count("dmadev %s taken out of service: a copy failed"
                     % ENGINE) == 1
    assert "out of service (a copy failed" in sb.appctl(
        "netdev-dpdk/dmadev-show")
    # Each wedged port was reset once and its copies abandoned.
    abandoned = sum(sb.abandoned().values())
    assert sb.log_count("resetting the vhost-user connection") == len(reset)
    for port in reset:
        assert sb.log_count("%s: registering vhost-user socket %s again "
                         "to reset" % (port, sb.sock(port))) == 1
        assert "resets for a failed DMA engine: 1" in sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get", port)
    res = stop_guest(g)
    assert res["reordered"] == 0, res
    probe.finish()

    assert_verified_on_cpu(sb)
    assert not any(n for q in sb.txq_inflight().values() for n in q.values())
    # Every mbuf is back but those of the abandoned copies, which vhost
    # 22.11 keeps for good.
    grown = sb.wait_mempools_back(base)
    leaked = sum(now - was for was, now in grown.values())
    assert leaked <= abandoned, (grown, abandoned)
    print("%s: ports reset %s, %d copies abandoned, %d mbufs not back"
          % (mode, reset, abandoned, leaked))


def test_vring_state_filter(build):
    """vhost's enables of vrings that the guest disabled, around a memory
    table change, do not reach netdev-dpdk (tests/test-vhost-vring-state.c
    drives the callback as vhost 22.11 calls it)."""
    r = subprocess.run([os.path.join(build, "tests/test-vhost-vring-state")],
                       capture_output=True, text=True, timeout=60)
    print(r.stdout)
    m = re.search(r"^(\d+) passed, (\d+) failed$", r.stdout, re.M)
    assert m and int(m.group(1)) >= 11 and m.group(2) == "0", r.stdout
    assert r.returncode == 0, r.stderr


def test_mem_table_keeps_disabled_vrings_off(swcopy_sandbox):
    """A guest whose devices have two queue pairs enables one (as a Linux
    guest with one vCPU does), then changes its memory table on the live
    devices (SET_MEM_TABLE).  vhost 24.11, with ASYNC_COPY registered,
    disables every vring before it maps the new table and enables every
    vring after it, also those of the pair the guest disabled.  The vring
    state filter keeps those from netdev-dpdk: queue 1 of each port stays
    disabled, and the switch carries verified traffic afterwards.  The
    filter counts what it kept back (vhost_async_vring_bracket), which
    shows that the moment came."""
    sb = swcopy_sandbox("defer")
    sb.set_rx_copy_mode("dma")
    g = sb.start_guest([("v0", "gen+sink", 1, 2), ("v1", "loop", 1, 2)],
                       ["--size", 512, "--duration", 600, "--wait-link", 60,
                        "--progress", 0, "--warmup", 0])
    traffic.wait_flowing(sb, g)
    one_of_two = {0: True, 1: False}

    def states():
        return parse.rxq_states(sb.appctl("dpif-netdev/pmd-rxq-show"))
    wait_until(lambda: states() == {"v0": one_of_two, "v1": one_of_two}, 10,
               lambda: sb.appctl("dpif-netdev/pmd-rxq-show"))
    bracket = sb.coverage("vhost_async_vring_bracket")
    g.grow_memory()
    # At least vhost's disable and enable of each of the two vrings of the
    # pair that the guest disabled, on each port (the counts of vhost's
    # thread reach the total through the main thread, within seconds).
    wait_until(lambda: sb.coverage("vhost_async_vring_bracket")
               >= bracket + 8, 15,
               lambda: "the filter kept back %d changes, not 8 or more"
               % (sb.coverage("vhost_async_vring_bracket") - bracket))
    after = states()
    time.sleep(1)
    later = states()
    assert after == later == {"v0": one_of_two, "v1": one_of_two}, (
        after, later)
    traffic.wait_flowing(sb, g)
    g.stop(sig=signal.SIGKILL)
    traffic.check(traffic.loop_run(sb, size=512, duration=1))


UNPOLLED = re.compile(r"port 'v1' rx queue 0.*This rx queue will not be "
                      r"polled\.")


def ring_count(sb, port, qid=0):
    """Packets in the ring of Tx queue 'qid' of 'port' (ring mode)."""
    text = sb.appctl("netdev-dpdk/vhost-copy-mode-get", port)
    m = re.search(r"^\s+txq %d: .*, (\d+) packets in ring$" % qid, text,
                  re.M)
    return int(m.group(1)) if m else 0


@pytest.mark.parametrize("mode", MODES)
def test_unpolled_rxq(swcopy_sandbox, mode):
    """Nobody polls v1's Rx queue: its one PMD is isolated by v0's
    pmd-rxq-affinity, and upstream leaves v1's queue unpolled.

    In ring the PMD that polls a port's Rx queue is the one that submits
    and retires the copies of its Tx queue, so traffic into v1 stalls: the
    ring fills (4095 packets), then every burst is a counted drop, and
    vhost-copy-mode-get shows the full ring.  v3's senders retire their
    own copies once the guest's vring is full, so v3 goes on with at most
    a vring of copies in flight; defer and auto, whose senders retire, go
    on as usual.  In every mode each frame that does not arrive is a drop
    the switch counted, and the queue drains once it is polled again."""
    sb = swcopy_sandbox(mode, pmd_cpus=[1])
    base = baseline(sb)
    pmd = sb.pmd_cpus[0]
    sb.vsctl("set", "Interface", "v0",
             "other_config:pmd-rxq-affinity=0:%d" % pmd)
    wait_until(lambda: UNPOLLED.search(open(sb.vswitchd_log).read()), 10,
               "v1's rx queue still polled")
    assert "v1" not in rxq_cores(sb) and rxq_cores(sb)["v0"] == pmd

    # v0 -> v1 only, judged as any run: whatever did not arrive must be a
    # drop that the switch counted.
    sb.appctl("dpif-netdev/pmd-stats-clear")
    g = traffic.start_held(sb, [("v0", "gen"), ("v1", "sink")],
                           ["--size", 512, "--duration", 6])
    run = {}
    finisher = threading.Thread(target=lambda: run.update(traffic.finish(
        sb, g, ("v0", "v1"), timeout=90)), daemon=True)
    finisher.start()
    traffic.wait_for(g, lambda: rx_packets(sb) > 20000, 60, "sending")
    held = {"inflight": inflight_total(sb), "ring": ring_count(sb, "v1"),
            "in_use": sum(sb.mempool_in_use().values()) - sum(base.values())}
    if mode == "ring":
        # Full and dropping, never more than it holds (an rte_ring of 4096
        # entries holds 4095).
        wait_until(lambda: ring_count(sb, "v1") == 4095, 10,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))
        drops = sb.port_stats()["v1"]["tx_dropped"]
        wait_until(lambda: sb.port_stats()["v1"]["tx_dropped"] > drops, 10,
                   "no drops counted while the ring is full")
        assert held["inflight"] == 0, held
    elif mode == "v3":
        held["inflight"] = wait_until(lambda: inflight_total(sb), 10,
                                      "no copies in flight for v1")
        assert held["inflight"] <= 1024, held
    # What reaches v1's guest meanwhile.
    sent = sb.port_stats()["v1"]["tx_packets"]
    time.sleep(1)
    held["delivered_1s"] = sb.port_stats()["v1"]["tx_packets"] - sent
    if mode == "ring":
        assert held["delivered_1s"] == 0, held
    else:
        assert held["delivered_1s"] > 0, held
    held["in_use"] = sum(sb.mempool_in_use().values()) - sum(base.values())
    # What is held is bounded by the ring and the guest's vring (1024
    # entries), whatever the traffic, plus the bursts in transit.
    assert held["in_use"] <= 4095 + 1024 + 2 * 32, held

    # Polled again: whatever is held goes out.
    sb.vsctl("remove", "Interface", "v0", "other_config",
             "pmd-rxq-affinity")
    wait_until(lambda: "v1" in rxq_cores(sb), 10, lambda: rxq_cores(sb))
    wait_until(lambda: inflight_total(sb) == 0 and
               ring_count(sb, "v1") == 0, 10,
               lambda: (inflight_total(sb), ring_count(sb, "v1")))
    finisher.join(timeout=120)
    assert run, "the run did not finish"
    traffic.check(run)
    print("%s, v1 unpolled: held %s, run: tx %d rx %d lost %d, switch "
          "dropped %d" % (mode, held, run["guest"]["tx_pkts"],
                          run["guest"]["rx_pkts"], run["guest"]["lost"],
                          run["switch_dropped"]))
    if mode == "ring":
        assert run["switch_dropped"] > 0, run
    check_recovered(sb, base, mode)
