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

"""A Tx queue whose lock another thread holds.

netdev-dpdk/vhost-txq-hold makes the senders of one port find its Tx queue
locks taken, as if other PMD threads held them, for a bounded time.  One
PMD thread serves two guest pairs (v0 <-> v1 and v2 <-> v3, each paced)
and v1's queue is held: a sender in 'v3' waits for the lock and
so stops the other pair too, a sender in 'defer' or 'auto' puts v1's
packets aside and goes on serving v2 <-> v3.  Each case checks that the
hold was in force (the other pair stalled, or packets were put aside
while it flowed), then that every frame of both pairs was verified and
none reordered, that nothing stays aside, and that the mempools are back
to their baseline.  No assertion bounds a time or a rate: the hold lasts
seconds, and what is compared is traffic during it against none."""

import threading
import time

import pytest

from ovs_async import parse, traffic
from ovs_async.wait import wait_until
from ovs_async.watch import Responsiveness


# How the sender of each async mode with a Tx queue lock meets a taken one
# (vhost_copy_modes[]: 'puts_aside').  'ring' takes no lock, and 'cpu' is stock
# OVS's send, which the hold does not reach.
WAITS = ("v3",)
PUTS_ASIDE = ("defer", "auto")

HOLD_MS = 2000

# Frames per second of each pair's generator: a hold puts aside about
# RATE * HOLD_MS / 1000 of v0's frames, well within the queue's ring
# (4096 entries) and the guest's virtqueue.
RATE = 400

# ... and enough to overflow the ring well within a longer hold.
OVERFLOW_RATE = 6000
OVERFLOW_HOLD_MS = 4000

PUT_ASIDE_COUNTER = "DMA Tx packets put aside, txq locked"


def put_aside(sb, port="v1"):
    """Packets put aside on the Tx queues of 'port' now."""
    return sum(parse.txq_put_aside(
        sb.appctl("netdev-dpdk/vhost-copy-mode-get", port)).get(port,
                                                                {}).values())


class PairsRun(threading.Thread):
    """Both guest pairs, paced, verified by traffic.finish() in the
    background while the test holds a queue."""

    def __init__(self, sb, rate, duration):
        super().__init__(daemon=True)
        self.sb = sb
        self.duration = duration
        self.guests = [
            traffic.start_held(
                sb, [("v%d" % (2 * p), "gen+sink"),
                     ("v%d" % (2 * p + 1), "loop")],
                ["--size", 512, "--duration", duration, "--rate", rate,
                 "--idle-sleep", 50], name="pair%d" % p)
            for p in (0, 1)]
        self.result = None
        self.error = None

    def run(self):
        try:
            self.result = traffic.finish(self.sb, self.guests,
                                         ("v0", "v1", "v2", "v3"),
                                         timeout=self.duration + 90)
        except Exception as e:       # Reported by done().
            self.error = e

    def wait_flowing(self):
        """Waits until both pairs carry traffic."""
        start = self.sb.port_stats()

        def flowing():
            now = self.sb.port_stats()
            return all(now.get(p, {}).get("tx_packets", 0)
                       >= start.get(p, {}).get("tx_packets", 0) + 64
                       for p in ("v1", "v3"))
        wait_until(flowing, 90, "the pairs carry no traffic", interval=0.1)

    def done(self):
        """Waits for the run; returns its result, checked: every frame
        verified (or dropped and counted by the switch) and none
        reordered."""
        self.join(timeout=self.duration + 200)
        if self.error:
            raise self.error
        assert self.result is not None, "the run did not end"
        run = traffic.check(self.result)
        assert run["guest"]["reordered"] == 0, run["guest"]
        return run


def tx_packets(sb, port):
    return sb.port_stats()[port]["tx_packets"]


def end_checks(sb, base, mode):
    """Nothing left aside or in flight, the PMD counter and the interface
    statistic agree with the mode, mempools at baseline."""
    wait_until(lambda: put_aside(sb) == 0, 10,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.1)
    wait_until(lambda: not any(sum(q.values())
                               for q in sb.txq_inflight().values()),
               10, lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.1)
    assert sb.wait_mempools_back(base) == {}
    with open(sb.vswitchd_log) as f:
        log = f.read()
    assert "abandoned" not in log
    if mode in PUTS_ASIDE:
        # Interface statistics refresh every 5 s.
        stat = wait_until(
            lambda: sb.custom_stats("v1").get("ovs_async_tx_put_aside", 0),
            15, lambda: sb.custom_stats("v1"), interval=0.5)
        return stat
    assert sb.custom_stats("v1").get("ovs_async_tx_put_aside", 0) == 0
    return 0


@pytest.mark.parametrize("mode", WAITS + PUTS_ASIDE)
def test_held_txq(swcopy_sandbox, mode):
    sb = swcopy_sandbox(mode, ports=4, pmd_cpus=[1])
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    base = sb.mempool_in_use()

    run = PairsRun(sb, RATE, duration=8)
    run.start()
    run.wait_flowing()
    sb.clear_pmd_stats()
    out = sb.appctl("netdev-dpdk/vhost-txq-hold", "v1", str(HOLD_MS))
    assert out.strip() == "v1: Tx queue locks held for %d ms" % HOLD_MS
    # Well inside the hold: the PMD has met v1's taken lock by now.
    time.sleep(0.3)
    v3_before, aside_before = tx_packets(sb, "v3"), put_aside(sb)
    time.sleep(1.0)
    v3_during, aside_during = tx_packets(sb, "v3") - v3_before, put_aside(sb)
    counters = sb.pmd_counters()
    print("%s, 0.3-1.3 s into the hold: %d frames to v3, put aside on v1: "
          "%d, then %d" % (mode, v3_during, aside_before, aside_during))

    if mode in WAITS:
        # The only PMD waits for v1's lock: v2 <-> v3 stalls with it.
        assert v3_during == 0, v3_during
        assert aside_before == aside_during == 0
        assert counters.get(PUT_ASIDE_COUNTER, 0) == 0, counters
    else:
        # v1's packets go aside, and the PMD goes on with v2 <-> v3.
        assert v3_during > 0
        assert 0 < aside_before < aside_during, (aside_before, aside_during)
        assert counters[PUT_ASIDE_COUNTER] >= aside_during, counters

    result = run.done()
    assert result["guest"]["rx_pkts"] > 0
    stat = end_checks(sb, base, mode)
    if mode in PUTS_ASIDE:
        assert stat >= aside_during
        # After the hold, v1's queue got everything that was aside.
        assert sb.pmd_counters()[PUT_ASIDE_COUNTER] >= aside_during


def test_held_txq_ring_overflows(swcopy_sandbox):
    """More than the ring holds arrives during the hold: the ring fills,
    the sender then waits for the lock (as 'v3' would), and resumes in
    order once the hold ends."""
    sb = swcopy_sandbox("defer", ports=4, pmd_cpus=[1])
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    base = sb.mempool_in_use()
    waits = sb.coverage("vhost_async_tx_contention")

    run = PairsRun(sb, OVERFLOW_RATE, duration=10)
    run.start()
    run.wait_flowing()
    sb.appctl("netdev-dpdk/vhost-txq-hold", "v1", str(OVERFLOW_HOLD_MS))
    # The ring holds 4095 packets; the sender waits once it is full.
    full = wait_until(lambda: (lambda n: n if n >= 4095 else 0)(
        put_aside(sb)), OVERFLOW_HOLD_MS / 1000.0,
        lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
        interval=0.05)
    v3_before = tx_packets(sb, "v3")
    time.sleep(0.3)
    assert tx_packets(sb, "v3") == v3_before, "the PMD did not wait"
    result = run.done()
    assert full == 4095
    print("ring overflow: %d packets put aside, then the sender waited"
          % full)
    assert result["guest"]["rx_pkts"] > 0
    # Counted as a wait (coverage is summed once a second).
    wait_until(lambda: sb.coverage("vhost_async_tx_contention") > waits,
               10, "the sender's wait was not counted", interval=0.2)
    end_checks(sb, base, "defer")


def test_reload_during_hold(swcopy_sandbox):
    """The PMD reloads (a second PMD comes and goes) while packets are
    aside: its drain gives up on the taken lock after a bounded wait and
    leaves them for the queue's next sender, which sends them in order."""
    sb = swcopy_sandbox("defer", ports=4, pmd_cpus=[1])
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    base = sb.mempool_in_use()

    run = PairsRun(sb, RATE, duration=10)
    run.start()
    run.wait_flowing()
    probe = Responsiveness(sb)
    probe.start()
    sb.appctl("netdev-dpdk/vhost-txq-hold", "v1", "4000")
    try:
        wait_until(lambda: put_aside(sb) > 0, 3, "nothing put aside",
                   interval=0.05)
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:pmd-cpu-mask=0x3")
        wait_until(lambda: len(sb.pmd_perf()) == 2, 10,
                   "no second PMD thread", interval=0.1)
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:pmd-cpu-mask=0x2")
        wait_until(lambda: len(sb.pmd_perf()) == 1, 10,
                   "the second PMD thread stays", interval=0.1)
    finally:
        probe.finish()

    def gave_up():
        with open(sb.vswitchd_log) as f:
            return "packets put aside stay there for the queue's next " \
                   "sender" in f.read()
    wait_until(gave_up, 10, "no drain met the held lock", interval=0.2)
    run.done()
    end_checks(sb, base, "defer")


def test_hold_release(swcopy_sandbox):
    """A hold without a time lasts until released; bad input is refused
    and changes nothing."""
    sb = swcopy_sandbox("defer", ports=4, pmd_cpus=[1])
    for args, err in [
            (["nosuch"], "nosuch is not a vhost-user port"),
            (["v1", "-1"], "invalid release time"),
            (["v1", "600001"], "invalid release time"),
            (["v1", "1e3"], "invalid release time"),
            (["v1", "x" * 100], "invalid release time")]:
        r = sb.appctl_result("netdev-dpdk/vhost-txq-hold", *args)
        assert r.returncode != 0 and err in r.stderr, (args, r.stderr)
    r = sb.appctl_result("netdev-dpdk/vhost-txq-release", "nosuch")
    assert r.returncode != 0 and "not a vhost-user port" in r.stderr
    # Nothing was held by the refused commands.
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    assert sb.pmd_counters().get(PUT_ASIDE_COUNTER, 0) == 0

    run = PairsRun(sb, RATE, duration=4)
    run.start()
    run.wait_flowing()
    assert sb.appctl("netdev-dpdk/vhost-txq-hold", "v1").strip() \
        == "v1: Tx queue locks held until released"
    wait_until(lambda: put_aside(sb) > 0, 5, "nothing put aside",
               interval=0.05)
    # Still held well past the bounded holds of the other tests.
    time.sleep(1)
    assert put_aside(sb) > 0
    assert sb.appctl("netdev-dpdk/vhost-txq-release", "v1").strip() \
        == "v1: Tx queue locks released"
    run.done()
    wait_until(lambda: put_aside(sb) == 0, 10, "packets stay aside",
               interval=0.1)
