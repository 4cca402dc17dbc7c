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

"""One verified traffic run through a sandbox, with the PMD's view of it.

Used by the demo, the tests and the benchmark, so that all of them measure
and judge a run the same way."""

import time

from ovs_async.sandbox import SandboxError


HOLD = 120   # Seconds a held guest waits for the harness at most.

# A verified run ends draining once nothing arrived for this long
# (ovs-vhost-guest --drain-idle): at full load the switch drops, and
# counts, part of what the guest sends, so not every frame comes back,
# and draining would otherwise last its whole second.  A frame that the
# switch keeps for longer than this counts as lost, uncounted.
DRAIN_IDLE = 0.5


def loop_run(sb, pair=0, size=64, duration=3.0, queues=1, extra=()):
    """Runs ovs-vhost-guest on ports v(2*pair) (gen+sink) and v(2*pair+1)
    (loop) of a loop-topology sandbox: every frame crosses the switch
    twice and comes back to be verified.  size None leaves the frame
    sizes to 'extra' (--sizes, --size-steps, --imix).

    Returns a dict: the guest's JSON result ("guest"), the PMD perf stats
    over the run ("pmds"), the frames the switch dropped and counted
    ("switch_dropped") and a one-word verdict."""
    a, b = "v%d" % (2 * pair), "v%d" % (2 * pair + 1)
    size_args = ["--size", size] if size else []
    extra = list(extra)
    if "--drain" not in extra and "--drain-idle" not in extra:
        extra += ["--drain-idle", DRAIN_IDLE]
    g = start_held(sb, [(a, "gen+sink", queues), (b, "loop", queues)],
                   size_args + ["--duration", duration] + extra)
    return finish(sb, g, (a, b), timeout=duration + 90)


def start_held(sb, ports, args, name=None, cpu=None):
    """Starts a guest that waits for finish() before and after its run."""
    return sb.start_guest(ports, list(args) + ["--hold", HOLD], name=name,
                          cpu=cpu)


def wait_for(guest, cond, timeout, what):
    deadline = time.time() + timeout
    while not cond():
        if not guest.running():
            raise SandboxError("guest %s exited before it was %s; its log "
                               "ends with:\n%s" % (guest.name, what,
                                                   guest.log_tail()))
        if time.time() > deadline:
            what = what() if callable(what) else what
            guest.stop()
            raise SandboxError("guest %s not %s within %d s"
                               % (guest.name, what, timeout))
        time.sleep(0.02)


def wait_flowing(sb, guest, packets=1000, timeout=60):
    """Waits until 'guest' has every port up and the switch has sent
    'packets' more packets into each of its ports: traffic flows through
    the whole loop, the guest's start-up (vhost-user negotiation, memory
    table changes) is over, and the switch's Tx queues into the guest,
    where copies go in flight, are busy."""
    def sent():
        stats = sb.port_stats()
        return {p: stats.get(p, {}).get("tx_packets", 0)
                for p in guest.ports}

    start = sent()
    wait_for(guest, lambda: guest.log_has("port(s) up"), timeout, "up")
    wait_for(guest, lambda: all(n >= start[p] + packets
                                for p, n in sent().items()),
             timeout, lambda: "sent %d packets on each of %s (%s -> %s)"
             % (packets, ", ".join(guest.ports), start, sent()))


# Counters of a guest's JSON result that add up over guests.
SUMMED = ("tx_pkts", "rx_pkts", "lost", "corrupted", "reordered",
          "requeued", "duplicates", "misdelivered", "foreign", "loop_pkts",
          "loop_dropped", "tx_bytes", "rx_bytes", "tx_mpps", "mpps", "gbps")


def merge_results(results):
    """One result for guests that ran side by side: counters and rates
    summed, ports and streams concatenated."""
    res = dict(results[0])
    for key in SUMMED:
        res[key] = sum(r.get(key, 0) for r in results)
    for key in ("ports", "streams"):
        res[key] = [x for r in results for x in r.get(key, [])]
    return res


def finish(sb, guest, ports, timeout):
    """Runs a guest started by start_held() (or a list of them, side by
    side) and judges the run over 'ports'.

    The counters of a vhost port can only be read while its guest is
    connected, and the guest connects before its warm-up: the held guest
    waits until the harness has read them after the warm-up, and again
    after its result, so that the difference is exactly the run's."""
    guests = list(guest) if isinstance(guest, (list, tuple)) else [guest]
    for g in guests:
        wait_for(g, lambda g=g: g.log_has("ready; waiting"), 120, "ready")
    before = {}

    def readable():
        before.update(sb.port_stats())
        return all("tx_dropped" in before.get(p, {}) for p in ports)
    wait_for(guests[0], readable, 30, "connected to every port")
    sb.clear_pmd_stats()
    for g in guests:
        g.release()
    for g in guests:
        wait_for(g, g.result_ready, timeout, "done")
    after = sb.port_stats()
    pmds = sb.pmd_perf()
    for g in guests:
        g.release()
    results = [g.wait(timeout=30) for g in guests]
    res = merge_results(results)
    returncode = next((g.returncode for g in guests if g.returncode), 0)
    dropped = 0
    for port in ports:
        for key in ("tx_dropped", "rx_dropped"):
            if key not in after.get(port, {}) or \
                    key not in before.get(port, {}):
                raise SandboxError("counters of %s unreadable: %s / %s"
                                   % (port, before.get(port),
                                      after.get(port)))
            dropped += after[port][key] - before[port][key]
    return summarize(res, pmds, dropped, returncode)


def summarize(res, pmds, dropped, returncode):
    rx = sum(p["rx_packets"] for p in pmds.values())
    cycles = (sum(p["cycles_per_pkt"] * p["rx_packets"]
                  for p in pmds.values()) / rx) if rx else 0.0
    accounted = res["lost"] - dropped - res.get("loop_dropped", 0)
    if res["corrupted"] or res["duplicates"] or res.get("misdelivered"):
        verdict = "CORRUPT"
    elif returncode != 0:
        verdict = "FAILED"
    elif accounted != 0:
        verdict = "UNCOUNTED-LOSS"
    elif res["rx_pkts"] == 0:
        verdict = "NO-TRAFFIC"
    else:
        verdict = "verified"
    return {"guest": res, "pmds": pmds, "switch_dropped": dropped,
            "uncounted_loss": accounted, "pmd_rx_packets": rx,
            "cycles_per_pkt": cycles, "verdict": verdict,
            "returncode": returncode}


# What the guests' virtio-user driver (DPDK 22.11, vhost-user server
# mode) logs when it fails to take the switch's new connection after the
# switch registered a port's socket again (a port re-added, a reset, a
# migration's preparation): its interrupt handling or the handshake
# breaks, and its port stays down for good, whatever the switch does.
GUEST_RECONNECT_FAILED = (
    "virtio_user_dev_delayed_disconnect_handler(): interrupt unregister "
    "failed",
    "virtio_user_dev_server_reconnect(): get_features failed")


# What the guest's DPDK 22.11 virtio-user logs when the switch's connection
# to its server socket broke during the first handshake: the guest exits.
GUEST_HANDSHAKE_FAILED = (
    "virtio_user_dev_init(): Failed to get device features",
    "cannot create net_virtio_user")


def handshake_failed(guest):
    """True if 'guest' logged that its virtio-user failed its first
    handshake with the switch."""
    return any(guest.log_has(text) for text in GUEST_HANDSHAKE_FAILED)


def reconnect_failed(guest):
    """True if 'guest' logged that its virtio-user did not reconnect."""
    return any(guest.log_has(text) for text in GUEST_RECONNECT_FAILED)


def check(run, others=0):
    """Raises SandboxError unless 'run' (a loop_run() or finish() result)
    is verified: no frame corrupted, duplicated or misdelivered, every
    frame that did not come back dropped and counted by the switch or a
    loop port, traffic received, and the guest exited 0.  Returns 'run'.

    others: frames that the test itself sent into the ports meanwhile
    (OpenFlow packet-outs): the switch may have counted up to that many
    drops more than the guest lost."""
    if run["verdict"] == "UNCOUNTED-LOSS" and -others <= \
            run["uncounted_loss"] < 0:
        return run
    if run["verdict"] != "verified":
        g = run["guest"]
        raise SandboxError(
            "traffic not verified (%s): tx %d rx %d lost %d (switch "
            "dropped %d, loop dropped %d, not counted %d) corrupted %d "
            "duplicates %d misdelivered %d, guest exit status %d"
            % (run["verdict"], g["tx_pkts"], g["rx_pkts"], g["lost"],
               run["switch_dropped"], g.get("loop_dropped", 0),
               run["uncounted_loss"], g["corrupted"], g["duplicates"],
               g.get("misdelivered", 0), run["returncode"]))
    return run