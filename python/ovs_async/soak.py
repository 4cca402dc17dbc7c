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

"""The soak: random life-cycle events in random copy modes under
continuous verified traffic.

One sandbox (two vhost-user ports in a loop, one dma_swcopy engine, the
PMD on the last CPU) carries traffic from a guest that generates and
verifies on v0 and loops on v1, without a break.  Each cycle puts the
ports in a random copy mode and a random Rx copy mode, then causes an event
of the life-cycle matrix, half of the time with the engine held until
copies are in flight (it resumes by itself shortly after), and waits until
the guest's
traffic crosses both ports again.  Each choice is dealt from a shuffled
deck, so that a short soak covers every case: every event once every
len(events) cycles, every Tx mode once every len(MODES) cycles, every Rx
mode once every len(RX_MODES) cycles, and a hold in every other cycle that
can have one.  A guest stopped by an event
(SIGINT) or at a checkpoint reports what crossed the switch (corrupted,
duplicated, misdelivered, reordered frames); one killed (SIGKILL) reports
nothing, and its frames count as unverified.  Every 'checkpoint' cycles,
and at the end, the soak also checks that nothing is left in flight, the
mbufs in use against the baseline (leaked) and the copies abandoned.

With two engines (engines=2), two PMDs (CPU 0 and the last CPU), each with
its engine, share the work: the guest's v0 has two queues, one per PMD, so
that both PMDs send into v1's only Tx queue, and each engine event takes
one of the engines (dealt from a deck).  The event "engine-wedge" then
makes the multi-engine wedge: in auto, engine A holds copies of that
queue, the queue leaves DMA, A fails a copy and goes out of service, and
B's copies behind A's can never retire; the switch must see the wedge and
reset v1, and B must stay in service."""

import collections
import os
import random
import signal
import subprocess
import time

from ovs_async import parse, traffic
from ovs_async.modes import COPY_MODES, FIXED_ASYNC_MODES, RX_COPY_MODES
from ovs_async.sandbox import Sandbox, SandboxError
from ovs_async.watch import ANSWER_S

MODES = list(COPY_MODES)
RX_MODES = list(RX_COPY_MODES)
EVENTS = ["port-readd", "guest-kill", "guest-restart", "pmd-mask",
          "rxq-rebalance", "tx-flush", "mem-table", "packet-outs",
          "engine-abandoned", "engine-stall", "engine-fail", "none"]

# The engine events take it out of service on purpose (held past the
# clear's deadline with its guest killed, then released; held with the
# guest connected until the stall watchdog fires; a failed copy), then
# bring it back with dmadev-enable.  What they abandon is counted apart,
# and so are the mbufs of those copies that the switch frees.
ENGINE_EVENTS = {"engine-abandoned", "engine-stall", "engine-fail",
                 "engine-wedge"}

# The events of a soak with two engines: the multi-engine wedge needs them.
TWO_ENGINE_EVENTS = EVENTS + ["engine-wedge"]

# An ARP request from 198.18.0.1 for 198.18.0.2: the main thread's
# packet-outs, which the guest counts as not its own ("foreign").
ARP = ("ffffffffffff020000000001080600010800060400010200000000"
       "01c6120001000000000000c6120002")

# Copies in flight that a held event waits for (at most HOLD_WAIT_S), and
# how long after that the engine resumes by itself.
HOLD_COPIES = 64
HOLD_WAIT_S = 2.0
HOLD_RELEASE_MS = 300

# After every event both ports carry the guest's traffic again within
# FLOW_WAIT_S: the switch recovered.
FLOW_WAIT_S = 10

# Only with one of traffic.GUEST_RECONNECT_FAILED (or, at its start,
# traffic.GUEST_HANDSHAKE_FAILED) in the guest's log does the soak restart
# the guest (counted in the summary) instead of failing; traffic must flow
# after that.



class Soak(object):
    def __init__(self, cycles=1000, checkpoint=50, seed=None, size=512,
                 log=print, events=None, engines=1):
        if not isinstance(cycles, int) or cycles < 1:
            raise SandboxError("cycles must be a positive number, not %r"
                               % (cycles,))
        if not isinstance(checkpoint, int) or checkpoint < 1:
            raise SandboxError("checkpoint must be a positive number, not "
                               "%r" % (checkpoint,))
        if engines not in (1, 2):
            raise SandboxError("engines must be 1 or 2, not %r"
                               % (engines,))
        known = TWO_ENGINE_EVENTS if engines == 2 else EVENTS
        events = list(events) if events is not None else list(known)
        unknown = sorted(set(events) - set(known))
        if not events or unknown:
            raise SandboxError("events must be some of %s, not %r"
                               % (", ".join(known), unknown or events))
        self.events = events
        self.engines = ["dma_swcopy%d" % i for i in range(engines)]
        self.cycles = cycles
        self.checkpoint = checkpoint
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.size = size
        self.log = log
        self.sb = None
        self.guest = None
        self.segments = 0
        self.mode = "cpu"
        self.rx_mode = "cpu"
        self.flush = 0
        self.pmd_mask = None
        self.decks = {}
        self.summary = {
            "seed": self.seed, "cycles": 0, "events": collections.Counter(),
            "modes": collections.Counter(),
            "rx_modes": collections.Counter(), "held_events": 0,
            "max_copies_held": 0, "checkpoints": 0, "frames_verified": 0,
            "frames_sent": 0, "frames_lost_counted": 0,
            "guests_killed": 0, "corrupted": 0,
            "duplicates": 0, "misdelivered": 0, "reordered": 0,
            "requeued": 0, "leaked_mbufs": 0, "abandoned_copies": 0,
            "abandoned_on_purpose": 0, "freed_on_purpose": 0,
            "engine_restarts": 0, "engines_fenced_too": 0,
            "packet_outs": 0, "packet_outs_received": 0,
            "worst_answer_s": 0.0, "vswitchd_alive": True, "elapsed_s": 0,
            "guest_reconnect_failures": 0,
        }

    # ---- set-up -------------------------------------------------------

    def start(self):
        pmd = (os.cpu_count() or 1) - 1
        two = len(self.engines) == 2
        # The event "pmd-mask" goes to the second mask and back to the
        # first, the soak's own: with one engine it adds CPU 0 for a
        # moment; with two (a PMD on each CPU) it takes CPU 0's away.
        if two:
            self.pmd_mask = ((1 << pmd) | 1, 1 << pmd)
        else:
            self.pmd_mask = (1 << pmd, (1 << pmd) | 1) if pmd else (1, 1)
        if two and not pmd:
            raise SandboxError("a soak with two engines needs two CPUs")
        self.sb = Sandbox(ports=2, dma=len(self.engines),
                          dma_driver="dma_swcopy",
                          pmd_cpus=[0, pmd] if two else [pmd], guest_cpu=0,
                          log=self.log,
                          other_config={
                              "vhost-copy-auto-threshold": "64"})
        self.sb.start()
        # With two engines, v0's queues on both PMDs and v1's on the last
        # one: both PMDs send into v1's only Tx queue.  Every PMD is then
        # isolated, so a port added again must bring its affinity along,
        # or nobody polls it.
        self.affinity = ({"v0": "0:0,1:%d" % pmd, "v1": "0:%d" % pmd}
                         if two else {})
        for port, affinity in self.affinity.items():
            self.sb.vsctl("set", "Interface", port,
                          "other_config:pmd-rxq-affinity=%s" % affinity)
        # Every vhost-user message in the log: a failure's log must show
        # the whole handshake of each connection.
        self.sb.appctl("vlog/disable-rate-limit", "dpdk")
        # A verified run at rest sets the mempool baseline.
        run = traffic.loop_run(self.sb, size=self.size, duration=1)
        if run["verdict"] != "verified":
            raise SandboxError("the baseline run failed: %r" % (run,))
        self.base = self.sb.mempool_in_use()
        self.start_traffic()

    def start_traffic(self):
        for attempt in (1, 2):
            self.segments += 1
            self.guest = self.sb.start_guest(
                [("v0", "gen+sink", len(self.engines)), ("v1", "loop")],
                ["--size", self.size, "--duration", 100000, "--wait-link",
                 60, "--progress", 0, "--warmup", 0],
                name="soak%d" % self.segments)
            # Signals of later events must find it up: during its start-up
            # one would end it without a result.
            deadline = time.time() + 60
            while not self.guest.log_has("generating"):
                if not self.guest.running() or time.time() > deadline:
                    break
                time.sleep(0.05)
            else:
                return
            if attempt == 1 and traffic.handshake_failed(self.guest):
                # Only this, from the guest's DPDK virtio-user: the switch
                # (busy resetting a port) broke its connection during the
                # guest's first handshake.
                self.summary["guest_reconnect_failures"] += 1
                self.trace("guest %s failed its first handshake; starting "
                           "another" % self.guest.name)
                self.guest.stop(sig=signal.SIGKILL)
                continue
            raise SandboxError("guest %s did not start: %s" % (
                self.guest.name, self.guest.log_tail()))

    def end_traffic(self, kill=False):
        """Ends the guest: killed, or stopped and its result counted."""
        s = self.summary
        if kill:
            self.guest.stop(sig=signal.SIGKILL)
            s["guests_killed"] += 1
            return
        self.guest.proc.send_signal(signal.SIGINT)
        res = self.guest.wait(timeout=60)
        s["frames_verified"] += res["rx_pkts"]
        s["frames_sent"] += res["tx_pkts"]
        s["frames_lost_counted"] += res["lost"]
        s["packet_outs_received"] += res["foreign"]
        for key in ("corrupted", "duplicates", "misdelivered", "reordered",
                    "requeued"):
            s[key] += res[key]

    def stop(self):
        if self.sb:
            self.sb.stop()

    # ---- checks -------------------------------------------------------

    def answer_time(self):
        start = time.time()
        r = self.sb.appctl_result("version")
        took = time.time() - start
        self.summary["worst_answer_s"] = max(self.summary["worst_answer_s"],
                                             took)
        if r.returncode or took > ANSWER_S:
            raise SandboxError("ovs-vswitchd did not answer within %.0f s "
                               "(%.1f s, rc %d)" % (ANSWER_S, took,
                                                    r.returncode))

    def in_flight(self):
        """Copies in flight, into and out of the guest."""
        return (sum(sum(q.values()) for q in self.sb.txq_inflight().values())
                + sum(sum(q.values())
                      for q in self.sb.rxq_inflight().values()))

    def checkpoint_now(self):
        """Stops traffic and checks what crossed the switch and what is
        left behind, then starts traffic again."""
        s = self.summary
        self.end_traffic()
        s["checkpoints"] += 1
        deadline = time.time() + 10
        while self.in_flight() and time.time() < deadline:
            time.sleep(0.1)
        grown = self.sb.wait_mempools_back(self.base)
        s["leaked_mbufs"] = sum(now - was for was, now in grown.values())
        s["abandoned_copies"] = sum(self.sb.abandoned().values())
        s["vswitchd_alive"] = self.sb.vswitchd_alive()
        self.log("soak: checkpoint %d after %d cycles: %d frames verified "
                 "(%d corrupted, %d reordered), %d mbufs leaked, %d copies "
                 "abandoned" % (s["checkpoints"], s["cycles"],
                                s["frames_verified"], s["corrupted"],
                                s["reordered"], s["leaked_mbufs"],
                                s["abandoned_copies"]))
        if not s["vswitchd_alive"]:
            raise SandboxError("ovs-vswitchd died")
        self.start_traffic()

    # ---- events -------------------------------------------------------

    def hold(self):
        """Holds the engine until copies are in flight (or a bound);
        returns how many were."""
        # Timed from the start: if the soak itself stalls here (an appctl
        # call that waits for a busy main thread), the hold still ends,
        # and the health watch does not take the engine out of service
        # for a hold nobody meant to last.
        for engine in self.engines:
            self.sb.swcopy("hold", engine,
                           int(HOLD_WAIT_S * 1000) + HOLD_RELEASE_MS)
        deadline = time.time() + HOLD_WAIT_S
        n = self.in_flight()
        while n < HOLD_COPIES and time.time() < deadline:
            time.sleep(0.02)
            n = self.in_flight()
        for engine in self.engines:
            self.sb.swcopy("hold", engine, HOLD_RELEASE_MS)
        return n

    def trace(self, text):
        """Notes 'text' in soak.log, next to ovs-vswitchd.log and on its
        clock (UTC), so that a failure's log says which event it was."""
        with open(os.path.join(self.sb.logdir, "soak.log"), "a") as f:
            f.write("%s|soak|%s\n" % (time.strftime(
                "%Y-%m-%dT%H:%M:%S", time.gmtime()), text))

    def port_rx(self):
        stats = self.sb.port_stats()
        return [stats.get(p, {}).get("rx_packets", 0) for p in ("v0", "v1")]

    def wait_flowing(self, what):
        """Waits until the switch receives the guest's traffic on both v0
        (generated) and v1 (looped back) again after event 'what'."""
        for attempt in (1, 2):
            deadline = time.time() + FLOW_WAIT_S
            before = self.port_rx()
            while time.time() < deadline:
                time.sleep(0.1)
                now = self.port_rx()
                if all(n > b for n, b in zip(now, before)):
                    return
                # A port re-added restarts its counters.
                before = [min(n, b) for n, b in zip(now, before)]
            if attempt == 1 and traffic.reconnect_failed(self.guest):
                self.summary["guest_reconnect_failures"] += 1
                self.trace("the guest's virtio-user did not reconnect "
                           "after %s; restarting the guest" % what)
                self.end_traffic(kill=True)
                self.start_traffic()
                continue
            raise SandboxError("soak: after %s, the guest's traffic did not "
                               "cross v0 and v1 again within %d s"
                               % (what, FLOW_WAIT_S))

    def wait(self, cond, timeout, what):
        deadline = time.time() + timeout
        while not cond():
            if time.time() > deadline:
                if callable(what):
                    what = what()
                raise SandboxError("soak: %s within %d s" % (what, timeout))
            time.sleep(0.1)

    def engine_event(self, name):
        """Takes an engine out of service on purpose, then brings it back
        (netdev-dpdk/dmadev-enable) once the queues behind it are reset."""
        sb = self.sb
        engine = self.deal("engine", self.engines)
        out = "dmadev %s taken out of service" % engine
        before = sb.log_count(out)
        others = {e: sb.log_count("dmadev %s taken out of service" % e)
                  for e in self.engines if e != engine}
        abandoned = sum(sb.abandoned().values())
        freed = (sum(sb.abandoned_freed().values())
                 + parse.rx_mbufs_freed(sb.appctl("netdev-dpdk/dmadev-show")))
        if name == "engine-fail":
            sb.swcopy("fail", engine, 1)
        elif name == "engine-wedge":
            self.wedge(engine)
        else:
            if name == "engine-stall":
                sb.vsctl("set", "Open_vSwitch", ".",
                         "other_config:dma-stall-timeout=300")
            sb.swcopy("hold", engine)
            # The copies that the event strands must be on 'engine': with
            # two engines, the other one's complete as usual.
            deadline = time.time() + HOLD_WAIT_S
            while (self.engine_in_flight(engine) < HOLD_COPIES
                   and time.time() < deadline):
                time.sleep(0.02)
            if not self.engine_in_flight(engine):
                raise SandboxError("soak: %s: no copy in flight on %s "
                                   "held for %.0f s (Tx %s, Rx %s)"
                                   % (name, engine, HOLD_WAIT_S, self.mode,
                                      self.rx_mode))
            if name == "engine-abandoned":
                self.end_traffic(kill=True)
        self.wait(lambda: sb.log_count(out) > before, 15,
                  lambda: "%s: %s did not go out of service "
                  "(Tx %s, Rx %s, %d copies in flight)"
                  % (name, engine, self.mode, self.rx_mode,
                     self.in_flight()))
        sb.swcopy("release", engine)
        if name == "engine-wedge":
            self.wait(lambda: self.v1_resets() > self.resets_before, 15,
                      lambda: "engine-wedge: v1 was never reset: %s"
                      % sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v1"))
            sb.vsctl("set", "Open_vSwitch", ".",
                     "other_config:vhost-copy-auto-threshold=64")
            for other, n in others.items():
                if sb.log_count("dmadev %s taken out of service" % other) > n:
                    raise SandboxError("engine-wedge: %s, which completed "
                                       "all it had, went out of service "
                                       "too" % other)
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:dma-stall-timeout=60000")

        # A clear that gave up also fences the other engine if it was busy
        # and did not catch up at once (stuck_engines(): it may hold copies
        # of that vring), as on a machine where the engines' threads share
        # a CPU with busy guests.  An operator brings back every engine
        # that dmadev-show says is out of service; so does the soak, the
        # event's own first.  That one comes back only once no port has
        # copies on it, i.e. after the clears that waited for it, which may
        # have fenced the other engine meanwhile: so look again after each.
        fenced = []
        down = [engine]
        while down:
            for e in down:
                def enabled(e=e):
                    r = sb.appctl_result("netdev-dpdk/dmadev-enable", e)
                    return r.returncode == 0
                self.wait(enabled, 30, "dmadev-enable %s did not succeed"
                          % e)
            fenced += down
            down = sorted(e for e, st in self.engine_states().items()
                          if st["out_of_service"])
            if len(fenced) > 2 * len(self.engines):
                raise SandboxError("soak: %s: engines still out of service "
                                   "after %s came back: %s"
                                   % (name, ", ".join(fenced),
                                      ", ".join(down)))
        if len(fenced) > 1:
            self.trace("%s also took %s out of service"
                       % (name, ", ".join(fenced[1:])))
        self.summary["engines_fenced_too"] += len(fenced) - 1
        self.summary["engine_restarts"] += len(fenced)
        self.summary["abandoned_on_purpose"] += (
            sum(sb.abandoned().values()) - abandoned)
        self.summary["freed_on_purpose"] += (
            sum(sb.abandoned_freed().values())
            + parse.rx_mbufs_freed(sb.appctl("netdev-dpdk/dmadev-show"))
            - freed)
        if name == "engine-abandoned":
            self.start_traffic()

    def save_state(self, name):
        """The queues' and the engines' state, as the switch tells it, in
        file 'name' of the log directory (what it can answer within
        appctl's timeout)."""
        with open(os.path.join(self.sb.logdir, name), "w") as f:
            for cmd in ("netdev-dpdk/vhost-copy-mode-get",
                        "netdev-dpdk/dmadev-show",
                        "dpif-netdev/pmd-rxq-show"):
                r = self.sb.appctl_result(cmd)
                f.write("$ ovs-appctl %s\n%s%s\n"
                        % (cmd, r.stdout, r.stderr))

    def engine_states(self):
        return parse.engines(self.sb.appctl("netdev-dpdk/dmadev-show"))

    def engine_in_flight(self, engine):
        """Copies that 'engine' holds."""
        return self.engine_states().get(engine, {}).get("in_flight", 0)

    def v1_resets(self):
        return parse.resets(self.sb.appctl("netdev-dpdk/vhost-copy-mode-get",
                                           "v1"))

    def wedge(self, engine):
        """The multi-engine wedge: 'engine' holds copies of v1's only Tx
        queue, which both PMDs fill in auto; the queue leaves DMA (the
        threshold goes up), then 'engine' fails a copy, so the other
        engine's copies behind its own never retire."""
        sb = self.sb
        self.resets_before = self.v1_resets()

        def v1_inflight():
            return sum(sb.txq_inflight().get("v1", {}).values())
        sb.swcopy("hold", engine)
        deadline = time.time() + HOLD_WAIT_S
        while v1_inflight() < 16 and time.time() < deadline:
            time.sleep(0.02)
        if not v1_inflight():
            raise SandboxError("soak: engine-wedge: no copy of v1 in flight "
                               "with %s held for %.0f s"
                               % (engine, HOLD_WAIT_S))
        leaving = sb.coverage("vhost_async_auto_leaving")
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:vhost-copy-auto-threshold=4096")
        self.wait(lambda: sb.coverage("vhost_async_auto_leaving") > leaving,
                  10, "engine-wedge: v1's queue did not leave DMA")
        # The first copy that it executes fails.
        sb.swcopy("fail", engine, 1)
        sb.swcopy("release", engine)

    def event(self, name):
        sb = self.sb
        if name in ENGINE_EVENTS:
            self.engine_event(name)
        elif name == "packet-outs":
            for port in (1, 2):
                for _ in range(10):
                    sb.ofctl("packet-out", "br0", "in_port=controller "
                             "packet=%s actions=output:%d" % (ARP, port))
            self.summary["packet_outs"] += 20
            # The guest counts them in its result: end it now, before a
            # later event kills it without one, and start another.
            time.sleep(0.5)
            self.end_traffic()
            self.start_traffic()
        elif name == "port-readd":
            # Added with its copy modes in one transaction, as an operator
            # or a cloud controller adds a port.
            affinity = self.affinity.get("v1")
            sb.del_port("v1")
            sb.add_port("v1", ofport=2,
                        options={"vhost-copy-mode": self.mode,
                                 "vhost-rx-copy-mode": self.rx_mode},
                        other_config=({"pmd-rxq-affinity": affinity}
                                      if affinity else None))
            sb.set_topology("loop")
        elif name in ("guest-kill", "guest-restart"):
            # Every vring of the guest goes down, then comes back.
            self.end_traffic(kill=name == "guest-kill")
            self.start_traffic()
        elif name == "mem-table":
            # A new memory table on the live device (SET_MEM_TABLE).
            self.guest.proc.send_signal(signal.SIGUSR2)
        elif name == "pmd-mask":
            usual, other = self.pmd_mask
            for mask in (other, usual):
                sb.vsctl("set", "Open_vSwitch", ".",
                         "other_config:pmd-cpu-mask=0x%x" % mask)
                time.sleep(0.2)
        elif name == "rxq-rebalance":
            sb.appctl("dpif-netdev/pmd-rxq-rebalance")
        elif name == "tx-flush":
            self.flush = 50 - self.flush
            sb.vsctl("set", "Open_vSwitch", ".",
                     "other_config:tx-flush-interval=%d" % self.flush)

    def deal(self, deck, cards):
        """The next card of 'deck', a shuffled copy of 'cards' dealt again
        once it is used up: each card comes once every len(cards)
        draws."""
        if not self.decks.get(deck):
            self.decks[deck] = self.rng.sample(list(cards), len(cards))
        return self.decks[deck].pop()

    def cycle(self):
        s = self.summary
        mode = self.deal("mode", MODES)
        rx_mode = self.deal("rx_mode", RX_MODES)
        name = self.deal("event", self.events)
        if name == "engine-wedge":
            # The wedge is that of a Tx queue that auto moves off DMA, fed
            # by both PMDs: with Rx on the CPU, a held engine does not
            # also stop the guest's packets that PMD receives.
            mode, rx_mode = "auto", "cpu"
        elif (name in ENGINE_EVENTS and mode not in FIXED_ASYNC_MODES
                and rx_mode != "dma"):
            # Only a fixed DMA mode is sure to give the engine copies to
            # hold or fail: "cpu" gives it none, and "auto" may be on the
            # CPU at that moment.  The event needs them, so one direction
            # goes to DMA for it.
            mode = self.rng.choice(FIXED_ASYNC_MODES)
        # The engine events hold the engine themselves, and copies on the
        # CPU both ways have nothing to hold: only the other cycles draw.
        held = (name not in ENGINE_EVENTS
                and (mode != "cpu" or rx_mode != "cpu")
                and self.deal("held", (True, False)))
        if held:
            n = self.hold()
            s["held_events"] += 1
            s["max_copies_held"] = max(s["max_copies_held"], n)
        if mode != self.mode:
            self.mode = mode
            self.sb.set_copy_mode(mode)
        if rx_mode != self.rx_mode:
            self.rx_mode = rx_mode
            self.sb.set_rx_copy_mode(rx_mode)
        self.trace("cycle %d: Tx %s, Rx %s, %s%s"
                   % (s["cycles"] + 1, mode, rx_mode, name,
                      ", copies held" if held else ""))
        self.event(name)
        self.wait_flowing(name)
        s["events"][name] += 1
        s["modes"][mode] += 1
        s["rx_modes"][rx_mode] += 1
        self.answer_time()
        time.sleep(0.2)
        s["cycles"] += 1

    def run(self):
        self.log("soak: %d cycles, seed %d" % (self.cycles, self.seed))
        start = time.time()
        try:
            self.start()
            for i in range(self.cycles):
                self.cycle()
                if (i + 1) % self.checkpoint == 0 or i + 1 == self.cycles:
                    self.checkpoint_now()
        except Exception:
            # Where the switch is, before anything else asks it for
            # something: a call that timed out may have found its main
            # thread blocked, which the next call could end.
            if self.sb and self.sb.vswitchd_alive():
                self.trace("failed: thread stacks in failure.stacks")
                self.sb.thread_stacks("failure.stacks")
                try:
                    self.save_state("failure.state")
                except (SandboxError, subprocess.SubprocessError, OSError):
                    pass
            raise
        finally:
            for engine in self.engines:
                try:
                    self.sb.appctl_result("dma-swcopy/release", engine)
                except (SandboxError, subprocess.SubprocessError,
                        AttributeError):
                    pass
            self.summary["elapsed_s"] = round(time.time() - start)
        self.summary["events"] = dict(self.summary["events"])
        self.summary["modes"] = dict(self.summary["modes"])
        self.summary["rx_modes"] = dict(self.summary["rx_modes"])
        return self.summary

    def failures(self):
        """What the summary says went wrong (empty if nothing)."""
        s = self.summary
        bad = ["%s: %d" % (k, s[k])
               for k in ("corrupted", "duplicates", "misdelivered",
                         "reordered")
               if s[k]]
        # Only the engine events abandon copies, and the switch frees their
        # mbufs: those of Tx copies when their device goes away, those of
        # Rx copies (vhost keeps them) when dmadev-enable brings their
        # engine back.  No mbuf may be missing.
        if s["abandoned_copies"] > s["abandoned_on_purpose"]:
            bad.append("abandoned_copies: %d, %d of them on purpose"
                       % (s["abandoned_copies"], s["abandoned_on_purpose"]))
        if s["leaked_mbufs"]:
            bad.append("leaked_mbufs: %d (%d copies abandoned on purpose, "
                       "the mbufs of %d freed)"
                       % (s["leaked_mbufs"], s["abandoned_on_purpose"],
                          s["freed_on_purpose"]))
        if s["packet_outs_received"] > s["packet_outs"]:
            bad.append("packet-outs received: %d of %d sent"
                       % (s["packet_outs_received"], s["packet_outs"]))
        if not s["vswitchd_alive"]:
            bad.append("ovs-vswitchd died")
        return bad
