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

"""End-to-end: the 'auto' copy mode, adaptive completion polling, and
PMD sleep (pmd-maxsleep) with copies in flight.

Every run is verified frame by frame by ovs-vhost-guest; these tests are
functional (no speed thresholds), so that they hold on an oversubscribed
2-core machine."""


import threading
import time

import pytest

from conftest import shared_txq_sandbox
from ovs_async import parse, traffic
from ovs_async.wait import wait_until


ENGINE = "dma_swcopy0"


def auto_queues(sb, port, kind="txq"):
    queues = parse.auto_queues(
        sb.appctl("netdev-dpdk/vhost-copy-mode-get", port), kind)
    assert queues, sb.appctl("netdev-dpdk/vhost-copy-mode-get", port)
    return queues


def test_auto_pinned_threshold_switches_both_ways(sandbox_factory):
    """With the threshold pinned at 512 B, frames of 64 B, then 1518 B,
    then 64 B in one run: every queue moves to DMA and back to the CPU,
    and the guest sees every frame, in order."""
    sb = sandbox_factory(ports=2, mtu=9000, dma=1, dma_driver="dma_swcopy",
                         other_config={"vhost-copy-auto-threshold": "512"})
    sb.set_copy_mode("auto")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    run = traffic.loop_run(sb, size=None, duration=6,
                           extra=["--size-steps", "64,1518,64"])
    traffic.check(run)
    assert run["guest"]["reordered"] == 0, run["guest"]
    for port in ("v0", "v1"):
        q = auto_queues(sb, port)[0]
        assert q["to_dma"] >= 1 and q["to_cpu"] >= 1, q["text"]
        assert q["path"] == "cpu", q["text"]
        assert "pinned threshold 512 B" in q["text"], q["text"]
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA CPU fallbacks"] == 0, counters
    assert counters["auto mode CPU copies"] > 0, counters


def test_auto_learns_unpinned(sandbox_factory):
    """Unpinned, auto measures both paths for the traffic's frame size and
    keeps the cheaper (or leaves a DMA engine that falls behind)."""
    sb = sandbox_factory(ports=2, mtu=9000, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("auto")
    for size in (64, 1518):
        run = traffic.loop_run(sb, size=size, duration=3)
        traffic.check(run)
        assert run["guest"]["reordered"] == 0, run["guest"]
        for port in ("v0", "v1"):
            q = auto_queues(sb, port)[0]
            print("%d B %s: %s" % (size, port, q["text"]))
            assert q["to_dma"] >= 1, q["text"]      # It probed DMA.
            cls = "<=128" if size == 64 else "<=2048"
            cpu, dma = q["costs"][cls]
            assert cpu not in ("?", "losing"), q["text"]
            assert dma != "?", q["text"]
            if q["probing"]:
                continue
            # Outside a probe, the path in use is not the one that lost
            # by more than the hysteresis margin (1/8).
            if dma == "losing":
                assert q["path"] == "cpu", q["text"]
            elif int(dma) * 8 < int(cpu) * 7 * 0.9:
                assert q["path"] == "dma", q["text"]
            elif int(cpu) * 8 < int(dma) * 7 * 0.9:
                assert q["path"] == "cpu", q["text"]
    stats = sb.custom_stats("v0")
    assert "ovs_async_auto_switches_to_dma" in stats, stats


def test_auto_bad_threshold_changes_nothing(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1,
                         other_config={"vhost-copy-auto-threshold": "1024"})
    sb.set_copy_mode("auto")
    for bad in ("32", "big", "-5", "70000"):
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:vhost-copy-auto-threshold=%s" % bad)
        sb.wait_log('vhost-copy-auto-threshold "%s" is not a frame size'
                 % bad)
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
    q = auto_queues(sb, "v0")[0]
    assert "pinned threshold 1024 B" in q["text"], q["text"]
    assert q["path"] == "cpu" and q["to_dma"] == 0, q["text"]
    # Back to learning.
    sb.vsctl("remove", "Open_vSwitch", ".", "other_config",
             "vhost-copy-auto-threshold")
    sb.wait_log("learning the copy path from measured costs")
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "v0", "automatic")
    assert r.returncode != 0 and "cpu, v3, ring, defer, auto" in r.stderr


def test_adaptive_rechecks(sandbox_factory):
    """Re-checks of copies still in flight: on every PMD iteration with
    pmd-defer-recheck-max=0, far fewer per copy with the adaptive
    cadence; the completion latency is shown either way."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy",
                         other_config={"pmd-defer-recheck-max": "0"})
    sb.set_copy_mode("defer")
    per_copy = {}
    for bound in ("0", "20"):
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:pmd-defer-recheck-max=%s" % bound)
        sb.wait_log("Deferred work re-checks at most %s us apart" % bound)
        run = traffic.loop_run(sb, size=512, duration=2)
        traffic.check(run)
        c = sb.pmd_counters()
        assert c["DMA copies submitted"] > 0, c
        assert c["DMA copies completed"] == c["DMA copies submitted"], c
        per_copy[bound] = (c["deferred work re-checks in flight"]
                           / c["DMA copies submitted"])
        assert max(p["latency_us"] for p in sb.pmd_perf().values()) > 0
    print("re-checks per copy:", per_copy)
    assert per_copy["20"] < per_copy["0"] / 2, per_copy

    # A bad bound is refused and changes nothing.
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:pmd-defer-recheck-max=5000")
    sb.wait_log('pmd-defer-recheck-max "5000" is not a number of '
             'microseconds from 0 to 1000; keeping 20')

    # The deprecated name still applies when the new one is not set, with
    # a warning; the new name wins when both are.
    sb.vsctl("remove", "Open_vSwitch", ".", "other_config",
             "pmd-defer-recheck-max")
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:pmd-defer-recheck-max-us=7")
    sb.wait_log("Deferred work re-checks at most 7 us apart")
    sb.wait_log("other_config:pmd-defer-recheck-max-us is deprecated; use "
             "pmd-defer-recheck-max instead")
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:pmd-defer-recheck-max=9")
    sb.wait_log("Deferred work re-checks at most 9 us apart")


# Seconds of each run of test_pmd_sleep_does_not_delay_completions.
SLEEP_RUN_S = 4


def test_pmd_sleep_does_not_delay_completions(sandbox_factory):
    """pmd-maxsleep lets an idle PMD sleep up to 10 ms; at a low packet rate
    it sleeps most of the time.  A PMD with copies in flight must not: the
    switch counts the sleeps that begin while the PMD's engine still has
    copies in flight ("sleeps begun with DMA copies in flight" in
    pmd-stats-show), and that count must be 0 while the PMD did sleep over
    a third of the run.  That is the property; the completion latency
    against a control in the same run (pmd-maxsleep=0) is printed only: it
    is mostly how soon the engine thread gets CPU0 from the busy-polling
    guest, and an idle engine thread parks and takes a wake-up to start,
    which on a loaded machine varies several-fold."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    for mode in ("defer", "auto"):
        if mode == "auto":
            sb.vsctl("set", "Open_vSwitch", ".",
                     "other_config:vhost-copy-auto-threshold=64")
        sb.set_copy_mode(mode)
        lat = {}
        for maxsleep in (0, 10000):
            sb.vsctl("set", "Open_vSwitch", ".",
                     "other_config:pmd-maxsleep=%d" % maxsleep)
            sb.clear_pmd_stats()
            run = traffic.loop_run(sb, size=512, duration=SLEEP_RUN_S,
                                   extra=["--rate", 2000])
            traffic.check(run)
            assert run["guest"]["lost"] == 0, run["guest"]
            c = sb.pmd_counters()
            assert c["DMA copies submitted"] > 1000, c
            assert c["DMA copies completed"] == c["DMA copies submitted"], c
            pmds = sb.pmd_perf().values()
            slept = sum(p["sleep_us"] for p in pmds)
            if maxsleep:
                # The PMD did sleep, over a third of the run, but never
                # with copies in flight.
                assert slept > SLEEP_RUN_S * 1e6 / 3, slept
                assert c["sleeps with copies in flight"] == 0, c
            else:
                assert slept == 0, slept
            avg = [p["latency_us"] for p in pmds if p["latency_n"]]
            assert len(avg) == 1, pmds
            lat[maxsleep] = avg[0]
        print("%s: completion latency, never sleeping %.0f us, sleeping "
              "%.0f us" % (mode, lat[0], lat[10000]))


def test_pmd_without_engine_keeps_the_queues_choice(swcopy_sandbox):
    """Two PMDs send into v1's only txq; only one has a DMA engine.  With
    the choice pinned to DMA, the engine-less PMD's CPU copies are
    fallbacks and must not move the shared queue to the CPU."""
    sb = shared_txq_sandbox(swcopy_sandbox, dma=1)
    sb.clear_pmd_stats()
    g = traffic.start_held(sb, [("v0", "gen+sink", 2), ("v1", "loop", 1)],
                           ["--size", 256, "--duration", 2])
    run = traffic.finish(sb, g, ("v0", "v1"), timeout=90)
    traffic.check(run)
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert counters["DMA CPU fallbacks"] > 0, counters
    q = auto_queues(sb, "v1")[0]
    assert q["path"] == "dma" and q["to_cpu"] == 0, q


# How long test_auto_keeps_off_an_engine_that_fell_behind watches each
# queue after it left DMA.
KEPT_OFF_S = 3


@pytest.mark.parametrize("kind", ["txq", "rxq"])
def test_auto_keeps_off_an_engine_that_fell_behind(sandbox_factory, kind):
    """An engine slowed on purpose (dma-swcopy/delay, 200 us a copy: about
    5 copies per ms) under 40 frames per ms of 1518 B: in the queues where
    auto tries DMA (v0's and v1's Tx queues, or their Rx queues), the
    engine falls behind and the queue leaves DMA.  While the rate stays,
    the queue must not go back to DMA, probes included: every return
    costs the guest a backlog of copies.  Without the memory of the
    engine's capacity it probed again a fraction of a second later (4096
    bursts, then 4 times as many) and won the probe, whose 16 bursts are
    too few to fall behind.  Every frame is verified."""
    sb = sandbox_factory(ports=2, mtu=9000, dma=1, dma_driver="dma_swcopy")
    if kind == "txq":
        sb.set_copy_mode("auto")
    else:
        sb.set_rx_copy_mode("auto")
    sb.swcopy("delay", ENGINE, 200)
    result = {}

    def run():
        result["run"] = traffic.loop_run(
            sb, size=1518, duration=16,
            extra=["--rate", 40000, "--burst", 1])
    t = threading.Thread(target=run)
    t.start()
    try:
        # Each queue from the moment it is seen to have left DMA with the
        # engine's capacity remembered (polled every 0.2 s), for
        # KEPT_OFF_S: well within the memory's VHOST_AUTO_CAP_TTL_MS
        # (10 s), after which a queue may probe DMA again by design.  (One
        # queue may leave DMA seconds before the other: at the warm-up's
        # first frames, say.)
        first, later, since = {}, {}, {}

        def each_kept_off():
            now = time.time()
            for p in ("v0", "v1"):
                if p in later:
                    continue
                q = auto_queues(sb, p, kind)[0]
                if p not in first:
                    if q["cap"] and q["path"] == "cpu":
                        first[p], since[p] = q, now
                elif now - since[p] >= KEPT_OFF_S:
                    later[p] = q
            return len(later) == 2
        wait_until(each_kept_off, 30,
                   lambda: "no queue left DMA and stayed off (%s): %s"
                   % (sorted(first), sb.appctl(
                       "netdev-dpdk/vhost-copy-mode-get")), interval=0.2)
        for port in ("v0", "v1"):
            print("%s %s: %s, then %s" % (port, kind, first[port]["text"],
                                          later[port]["text"]))
            assert later[port]["to_dma"] == first[port]["to_dma"], \
                later[port]
            assert later[port]["capped"] > first[port]["capped"], \
                later[port]
            assert later[port]["path"] == "cpu", later[port]
        # The interface statistics say it too (refreshed every 5 s).
        key = ("ovs_async_auto_dma_capped" if kind == "txq"
               else "ovs_async_rx_auto_dma_capped")
        wait_until(lambda: sb.custom_stats("v1").get(key, 0) > 0, 8,
                   lambda: "%s: %s" % (key, sb.custom_stats("v1")),
                   interval=0.5)
    finally:
        t.join(120)
    assert first["v0"]["events"] > 0 and first["v1"]["events"] > 0, first
    if kind == "txq":
        # The queues left DMA without waiting for the engine: what came
        # meanwhile waited aside for the copies in flight.
        assert sb.coverage("vhost_async_auto_leaving") > 0
    traffic.check(result["run"])
    assert result["run"]["guest"]["reordered"] == 0, result["run"]["guest"]


def test_auto_does_not_charge_the_engine_for_a_slow_guest(sandbox_factory):
    """A guest that takes none of its packets: the guest on v0 waits,
    connected, before its run (--hold) and polls nothing, so v0's vring
    fills and the switch drops, and counts, what else it sends there.  On
    auto's DMA path, with few copies in flight, those drops are the
    guest's doing, not the engine's: auto must not record the engine as
    fallen behind (a DMA backlog/drop event, and a capacity that keeps
    later bursts off DMA), as it does not charge the CPU path for the same
    drops.  The state is made on purpose: copies were submitted to v0 and
    v0 dropped.  auto learns here (a pinned threshold records nothing)."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("auto")
    idle = ["--warmup", 0, "--wait-link", 60, "--progress", 0]
    slow = sb.start_guest([("v0", "gen+sink")],
                          ["--hold", 120, "--duration", 1] + idle)
    traffic.wait_for(slow, lambda: slow.log_has("waiting for SIGUSR1"), 60,
                     "waiting")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    dropped = sb.port_stats()["v0"]["tx_dropped"]
    # v1's frames go to v0 (the loop topology): none comes back.
    gen = sb.start_guest([("v1", "gen+sink")],
                         ["--size", 1518, "--rate", 20000, "--duration", 4]
                         + idle)
    gen.wait(timeout=90)
    now = sb.port_stats()["v0"]["tx_dropped"]
    slow.stop()
    counters = sb.pmd_counters()
    assert counters["DMA copies submitted"] > 0, counters
    assert now > dropped + 1000, (dropped, now)
    q = auto_queues(sb, "v0")[0]
    print(q["text"])
    assert q["events"] == 0 and not q["cap"], q["text"]
