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

"""The copy-mode benchmark behind utilities/ovs-async-bench.

A benchmark is a list of configurations (DMA engine x PMD threads x vhost
ports x topology), each run in a sandbox of its own, and for each a matrix
of traffic cells (pattern x frame size).  Every cell runs every copy mode
'reps' times, modes interleaved (cpu, v3, ..., cpu, v3, ...) so that drift
of the machine hits every mode alike.  Every run is verified by
ovs-vhost-guest; a run that is not verified is reported as such and left
out of the medians.

Three protocols (a Load says which run):
- saturation: the generators send as fast as the switch takes frames;
- fixed: a fixed offered load, in full bursts, which every mode carries:
  the PMD's busy cycles per packet compare the modes' costs fairly;
- lossless: per mode, a binary search for the highest offered load with
  no frame lost (RFC 2544 style), below that mode's saturation rate."""

import csv
import json
import math
import os
import re
import statistics
import time

from ovs_async import parse, traffic
from ovs_async.modes import COPY_MODES, RX_COPY_MODES
from ovs_async.sandbox import Sandbox, SandboxError

MODES = list(COPY_MODES)
# A Tx copy mode alone (Rx on the CPU), or "TX/RX" with an Rx copy mode.
MODE_CHOICES = MODES + ["%s/%s" % (t, r) for t in COPY_MODES
                        for r in RX_COPY_MODES]
SIZES = [64, 114, 512, 1518, 2098]
PATTERNS = ["burst", "scatter"]
PROTOCOLS = ["saturation", "fixed", "lossless"]
# Software engines; hardware ones are named "pci:BDF[+BDF...]".
ENGINES = ["dma_swcopy", "dma_skeleton"]
TOPOLOGIES = ["loop", "fanout"]

# Ports of one ovs-vhost-guest process at most (its limit is 16).
GUEST_PORTS = 16

# Fields of a run, in CSV column order.
FIELDS = ["config", "engine", "pmds", "ports", "topology", "vxlan",
          "uplink_queues",
          "pattern", "size", "mode", "rep", "protocol", "offered_pps",
          "mpps", "tx_mpps", "gbps", "cycles_per_pkt",
          "pkts_per_batch", "pmd_busy_pct", "dma_copies", "cpu_copies",
          "rx_dma_copies",
          "completion_latency_us", "txq_waits", "put_aside", "tx_pkts",
          "rx_pkts", "switch_dropped", "lost", "verdict", "error"]

# Coverage counters of a sender meeting a taken Tx queue lock: it waited
# for it (stock OVS's send in 'cpu', ours in the async modes), or put its
# packets aside ('defer', 'auto').
WAIT_COUNTERS = ("vhost_tx_contention", "vhost_async_tx_contention")
PUT_ASIDE_COUNTER = "vhost_async_tx_deferred"


class Config(object):
    """One sandbox: engine, PMD threads, vhost ports (loop: ports in pairs
    that forward to each other; fanout: sink ports fed by uplinks),
    topology, VXLAN frames or not, the CPU layout, and (fanout) the queues
    of each uplink, each polled by another PMD thread, so that that many
    PMD threads send into every sink's Tx queue, as behind a NIC with RSS
    queues."""

    def __init__(self, engine, pmds, ports, topology, vxlan, layout,
                 uplink_queues=1):
        if uplink_queues > 1 and topology != "fanout":
            raise SandboxError("uplink queues need the fanout topology")
        self.uplink_queues = uplink_queues
        self.engine = engine
        self.pmds = pmds
        self.ports = ports
        self.topology = topology
        self.vxlan = vxlan
        self.layout = layout
        if topology == "loop":
            self.groups = [["v%d" % (2 * i), "v%d" % (2 * i + 1)]
                           for i in range(ports // 2)]
        else:
            # Each guest: one uplink (gen) and up to 15 sinks.
            self.groups = []
            n = 0
            left = ports
            while left:
                k = min(left, GUEST_PORTS - 1)
                self.groups.append(["v%d" % i for i in range(n, n + k + 1)])
                n += k + 1
                left -= k
        self.n_vhost = sum(len(g) for g in self.groups)

    @property
    def name(self):
        engine = re.sub(r"[^A-Za-z0-9_.]", "_", self.engine)
        return "%s-%dpmd-%s%d%s%s" % (
            engine, self.pmds, self.topology, self.ports,
            "-vxlan" if self.vxlan else "",
            "-q%d" % self.uplink_queues if self.uplink_queues > 1 else "")

    def describe(self):
        return ("engine %s, %d PMD%s, %s topology with %d %s%s"
                % (self.engine, self.pmds, "s" if self.pmds > 1 else "",
                   self.topology, self.ports,
                   "looped ports" if self.topology == "loop"
                   else "sink ports", ", VXLAN frames" if self.vxlan else "")
                + (", %d queues per uplink, each on its own PMD thread"
                   % self.uplink_queues if self.uplink_queues > 1 else ""))

    def pin_uplinks(self, sb):
        """Gives each queue of every uplink a PMD thread of its own; the
        PMD threads still poll the sinks' queues too (with isolation, the
        sinks' Rx queues would have no PMD thread, and in 'v3' and 'ring'
        nobody would retire their copies)."""
        if self.uplink_queues < 2:
            return
        sb.vsctl("set", "Open_vSwitch", ".",
                 "other_config:pmd-rxq-assign=group",
                 "other_config:pmd-rxq-isolate=false")
        cpus = self.layout["pmd_cpus"]
        affinity = ",".join("%d:%d" % (q, cpus[q % len(cpus)])
                            for q in range(self.uplink_queues))
        for group in self.groups:
            sb.vsctl("set", "Interface", group[0],
                     "other_config:pmd-rxq-affinity=%s" % affinity)

    def flows(self):
        """OpenFlow flows of the topology."""
        flows = []
        if self.topology == "loop":
            for a, b in self.groups:
                pa, pb = int(a[1:]) + 1, int(b[1:]) + 1
                flows.append("in_port=%d,actions=output:%d" % (pa, pb))
                flows.append("in_port=%d,actions=output:%d" % (pb, pa))
            return flows
        for group in self.groups:
            uplink = int(group[0][1:]) + 1
            # The guest gives its port i the MAC 02:00:00:00:00:<i+1>;
            # VXLAN frames carry it as the outer destination.
            for i, port in enumerate(group[1:], start=1):
                flows.append("in_port=%d,dl_dst=02:00:00:00:00:%02x,"
                             "actions=output:%d"
                             % (uplink, i + 1, int(port[1:]) + 1))
        return flows


def plan_layout(pmds, n_guests, engine_threads, cpus=None):
    """Chooses CPUs for PMDs, DMA engine threads and guests: separate
    cores where there are enough (one left for ovs-vswitchd's main thread
    and ovsdb), else PMDs on cores of their own and the rest sharing.
    Returns a dict with the choice and a line that says it."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if pmds > len(cpus):
        raise SandboxError("%d PMD threads need more than the %d CPUs "
                           "available" % (pmds, len(cpus)))
    need = pmds + engine_threads + n_guests
    if pmds == len(cpus):
        # A PMD on every CPU: the rest shares them with the PMDs.
        pmd_cpus = cpus
        dma_cpus = [cpus[i % len(cpus)] for i in range(engine_threads)]
        guest_cpus = [cpus[i % len(cpus)] for i in range(n_guests)]
        shared = True
    elif len(cpus) >= need + 1:
        rest = cpus[1:]
        pmd_cpus = rest[:pmds]
        dma_cpus = rest[pmds:pmds + engine_threads]
        guest_cpus = rest[pmds + engine_threads:need]
        shared = False
    else:
        pmd_cpus = cpus[len(cpus) - pmds:]
        others = cpus[:len(cpus) - pmds]
        dma_cpus = [others[i % len(others)] for i in range(engine_threads)]
        guest_cpus = [others[i % len(others)] for i in range(n_guests)]
        shared = True
    line = ("%d CPUs: PMDs on %s, DMA engine threads on %s, guests on %s%s"
            % (len(cpus), pmd_cpus, dma_cpus or "-", guest_cpus,
               " (sharing: not enough CPUs to give each its own)"
               if shared else " (each on its own core)"))
    return {"pmd_cpus": pmd_cpus, "dma_cpus": dma_cpus,
            "guest_cpus": guest_cpus, "shared": shared, "line": line}


class Load(object):
    """How the guests offer traffic: 'rate' frames per second in all (0:
    saturation only; else also a fixed-load run at that rate), whether to
    search each mode's lossless rate (to 'resolution', a fraction of its
    saturation rate), the burst size and the guests' --idle-sleep."""

    def __init__(self, rate=0, lossless=False, resolution=0.05, burst=32,
                 idle_sleep=50):
        self.rate = rate
        self.lossless = lossless
        self.resolution = resolution
        self.burst = burst
        self.idle_sleep = idle_sleep

    def describe(self):
        parts = ["bursts of %d" % self.burst,
                 "guests sleep %d us when idle" % self.idle_sleep
                 if self.idle_sleep else "guests busy-poll", "saturation"]
        if self.rate:
            parts.append("fixed load of %d pps" % self.rate)
        if self.lossless:
            parts.append("lossless rate to %g %%" % (100 * self.resolution))
        return ", ".join(parts)


def run_once(sb, cfg, pattern, size, duration, load=None, rate=0):
    """One verified run of every guest of 'cfg' side by side, offering
    'rate' frames per second in all (0: as fast as they can)."""
    load = load or Load()
    guests = []
    ports = []
    for i, group in enumerate(cfg.groups):
        cpu = cfg.layout["guest_cpus"][i % len(cfg.layout["guest_cpus"])]
        if cfg.topology == "loop":
            spec = [(group[0], "gen+sink"), (group[1], "loop")]
            args = []
        else:
            spec = ([(group[0], "gen", cfg.uplink_queues)]
                    + [(p, "sink") for p in group[1:]])
            args = ["--pattern", pattern]
        if cfg.vxlan:
            args.append("--vxlan")
        args += ["--size", size, "--duration", duration, "--burst",
                 load.burst, "--idle-sleep", load.idle_sleep]
        if rate:
            args += ["--rate", max(1, rate // len(cfg.groups))]
        guests.append(traffic.start_held(sb, spec, args, cpu=cpu))
        ports += group
    try:
        run = traffic.finish(sb, guests, ports, timeout=duration + 90)
    except BaseException:
        for g in guests:
            g.stop()
        raise
    return run


def split_mode(mode):
    """'defer/dma' -> ('defer', 'dma'): a Tx copy mode and, after a slash,
    an Rx copy mode (cpu if none)."""
    tx, _, rx = mode.partition("/")
    return tx, rx or "cpu"


def measure(sb, cfg, pattern, size, mode, rep, duration, load=None,
            protocol="saturation", rate=0):
    """Sets 'mode', runs once under 'protocol' at 'rate' and returns a row
    of FIELDS."""
    row = {"config": cfg.name, "engine": cfg.engine, "pmds": cfg.pmds,
           "ports": cfg.ports, "topology": cfg.topology,
           "vxlan": int(cfg.vxlan), "uplink_queues": cfg.uplink_queues,
           "pattern": pattern, "size": size,
           "mode": mode, "rep": rep, "protocol": protocol,
           "offered_pps": rate, "error": ""}
    try:
        tx_mode, rx_mode = split_mode(mode)
        sb.set_copy_mode(tx_mode)
        sb.set_rx_copy_mode(rx_mode)
        waits = sum(sb.coverage(c) for c in WAIT_COUNTERS)
        aside = sb.coverage(PUT_ASIDE_COUNTER)
        run = run_once(sb, cfg, pattern, size, duration, load, rate)
        # Threads add their coverage counts to the totals once a second.
        time.sleep(1.1)
        waits = sum(sb.coverage(c) for c in WAIT_COUNTERS) - waits
        aside = sb.coverage(PUT_ASIDE_COUNTER) - aside
    except SandboxError as e:
        row.update({"verdict": "ERROR", "error": str(e).splitlines()[0]})
        return row
    g = run["guest"]
    pmds = run["pmds"].values()
    tx = sum(p["tx_packets"] for p in pmds)
    n_lat = sum(p["latency_n"] for p in pmds)
    counters = sb.pmd_counters()
    row.update({
        "mpps": round(g["mpps"], 4), "gbps": round(g["gbps"], 3),
        "cycles_per_pkt": round(run["cycles_per_pkt"], 1),
        "pkts_per_batch": round(sum(p["pkts_per_batch"] * p["tx_packets"]
                                    for p in pmds) / tx, 1) if tx else 0.0,
        "pmd_busy_pct": round(statistics.mean(p["busy_pct"] for p in pmds),
                              1) if pmds else 0.0,
        "dma_copies": counters.get("DMA copies submitted", 0),
        "cpu_copies": (counters.get("DMA CPU fallbacks", 0)
                       + counters.get("auto mode CPU copies", 0)),
        "rx_dma_copies": counters.get("DMA Rx copies completed", 0),
        "completion_latency_us": round(sum(
            p["latency_us"] * p["latency_n"] for p in pmds) / n_lat, 1)
        if n_lat else 0.0,
        "txq_waits": waits, "put_aside": aside,
        "tx_pkts": g["tx_pkts"], "rx_pkts": g["rx_pkts"],
        "switch_dropped": run["switch_dropped"], "lost": g["lost"],
        "verdict": run["verdict"], "tx_mpps": g["tx_mpps"]})
    return row


def lossless(row):
    """Whether a run carried its offered load with no frame lost."""
    return row["verdict"] == "verified" and int(row["lost"]) == 0


def search_lossless(trial, saturation_pps, resolution):
    """The highest rate at which trial(rate) returns a lossless row: a
    binary search between 0 and 'saturation_pps' (the rate the generators
    reached at full speed), ended when the interval is narrower than
    'resolution' times 'saturation_pps'.  Returns the rate (0 if even the
    lowest rate tried lost frames)."""
    lo, hi = 0, int(saturation_pps)
    if hi <= 0:
        return 0
    if lossless(trial(hi)):
        return hi
    step = max(1, int(resolution * saturation_pps))
    while hi - lo > step:
        mid = (lo + hi) // 2
        if lossless(trial(mid)):
            lo = mid
        else:
            hi = mid
    return lo


def run_benchmark(configs, patterns, sizes, modes, reps, duration, out_dir,
                  huge="auto", progress=print, load=None):
    """Runs the whole matrix under the protocols of 'load'; writes
    runs.csv and runs.jsonl under 'out_dir' as it goes and returns the
    rows."""
    load = load or Load()
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    # Runs per mode and repetition of a cell; a lossless search takes one
    # run at the saturation rate and then halves the interval.
    per_cell = 1 + (1 if load.rate else 0)
    if load.lossless:
        per_cell += 1 + math.ceil(math.log2(1 / load.resolution))
    total = (len(configs) * len(patterns) * len(sizes) * len(modes) * reps
             * per_cell)
    done = 0
    start = time.time()
    csv_path = os.path.join(out_dir, "runs.csv")
    with open(csv_path, "w", newline="") as fcsv, \
            open(os.path.join(out_dir, "runs.jsonl"), "w") as fjson:
        writer = csv.DictWriter(fcsv, fieldnames=FIELDS,
                                extrasaction="ignore")
        writer.writeheader()

        def record(row):
            nonlocal done, total
            rows.append(row)
            writer.writerow(row)
            fjson.write(json.dumps(row) + "\n")
            fcsv.flush()
            fjson.flush()
            done += 1
            total = max(total, done)
            eta = (time.time() - start) / done * (total - done)
            progress("   [%d/%d, %.0f s left] %s %d B %-5s rep %d %s%s: %s "
                     "Mpps, %s cyc/pkt, %s lost, %s"
                     % (done, total, eta, row["pattern"], row["size"],
                        row["mode"], row["rep"] + 1, row["protocol"],
                        " %d pps" % row["offered_pps"]
                        if row["offered_pps"] else "",
                        row.get("mpps", "-"), row.get("cycles_per_pkt", "-"),
                        row.get("lost", "-"), row["verdict"]))
            return row

        for cfg in configs:
            progress("== %s" % cfg.describe())
            progress("   %s" % cfg.layout["line"])
            mtu = 9000 if max(sizes) > 1500 else None
            with Sandbox(ports=cfg.n_vhost, pmd_cpus=cfg.layout["pmd_cpus"],
                         dma=cfg.pmds, dma_driver=cfg.engine,
                         dma_cpus=cfg.layout["dma_cpus"] or None,
                         guest_cpu=cfg.layout["guest_cpus"][0],
                         topology=cfg.flows(), mtu=mtu, huge=huge,
                         name="ovsbench%d" % os.getpid()) as sb:
                progress("   %s" % ("2 MB hugepages" if sb.huge
                                    else "no hugepages (--no-huge)"))
                cfg.pin_uplinks(sb)
                engines = len(parse.dmadevs(sb.appctl(
                    "netdev-dpdk/dmadev-show")))
                if not engines:
                    raise SandboxError(
                        "engine %s: no dmadev was probed (see %s); the "
                        "async modes would only copy on the CPU"
                        % (cfg.engine, sb.vswitchd_log))
                if engines < cfg.pmds:
                    progress("   warning: %d dmadevs for %d PMD threads: "
                             "%d PMDs copy on the CPU"
                             % (engines, cfg.pmds, cfg.pmds - engines))
                for pattern in patterns:
                    for size in sizes:
                        for rep in range(reps):
                            run_cell(sb, cfg, pattern, size, modes, rep,
                                     duration, load, record)
    return rows


def run_cell(sb, cfg, pattern, size, modes, rep, duration, load, record):
    """One repetition of a traffic cell: every mode at saturation, then at
    the fixed load, modes interleaved; then each mode's lossless search
    below its own saturation rate."""
    saturated = {}
    for mode in modes:
        saturated[mode] = record(measure(sb, cfg, pattern, size, mode, rep,
                                         duration, load))
    if load.rate:
        for mode in modes:
            record(measure(sb, cfg, pattern, size, mode, rep, duration, load,
                           "fixed", load.rate))
    if load.lossless:
        for mode in modes:
            sat = saturated[mode]
            if sat["verdict"] != "verified":
                continue
            search_lossless(
                lambda rate, mode=mode: record(measure(
                    sb, cfg, pattern, size, mode, rep, duration, load,
                    "lossless", rate)),
                sat["tx_mpps"] * 1e6, load.resolution)


# ---- Aggregation and reports ---------------------------------------------

def cells(rows):
    """{(config, protocol, pattern, size, mode): [verified rows]}."""
    out = {}
    for r in rows:
        key = (r["config"], r["protocol"], r["pattern"], int(r["size"]),
               r["mode"])
        out.setdefault(key, [])
        if r["verdict"] == "verified":
            out[key].append(r)
    return out


def stat(values):
    """(median, min, max) of 'values', or None."""
    values = [float(v) for v in values]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def lossless_rates(rows):
    """{(config, pattern, size, mode): [the lossless rate of each
    repetition]}: the highest offered load of its lossless search that
    lost nothing, 0 if every trial lost frames."""
    best = {}
    for r in rows:
        if r["protocol"] != "lossless":
            continue
        key = (r["config"], r["pattern"], int(r["size"]), r["mode"])
        reps = best.setdefault(key, {})
        rate = int(r["offered_pps"]) if lossless(r) else 0
        reps[int(r["rep"])] = max(reps.get(int(r["rep"]), 0), rate)
    return {k: [v[rep] for rep in sorted(v)] for k, v in best.items()}


# What each protocol compares, as a ratio to cpu: (metric, higher is
# better).
METRIC = {"saturation": "mpps", "fixed": "cycles", "lossless": "lossless"}


def summarize(rows):
    """Per (config, protocol, pattern, size, mode): medians and ranges of
    Mpps, cycles/packet, batch size and loss, the lossless rate, and the
    ratio of the protocol's metric (METRIC) to cpu's."""
    summary = {}
    for key, runs in cells(rows).items():
        tx = sum(int(r["tx_pkts"]) for r in runs)
        summary[key] = {
            "runs": len(runs),
            "mpps": stat(r["mpps"] for r in runs),
            "gbps": stat(r["gbps"] for r in runs),
            "cycles": stat(r["cycles_per_pkt"] for r in runs),
            "batch": stat(r["pkts_per_batch"] for r in runs),
            "dma": stat(r["dma_copies"] for r in runs),
            "latency": stat(r["completion_latency_us"] for r in runs),
            "dropped": stat(r["switch_dropped"] for r in runs),
            # Per 1000 frames sent.
            "waits": stat(1000.0 * r["txq_waits"] / max(1, r["tx_pkts"])
                          for r in runs),
            "put_aside": stat(1000.0 * r["put_aside"] / max(1, r["tx_pkts"])
                              for r in runs),
            "loss_pct": (100.0 * sum(int(r["lost"]) for r in runs) / tx
                         if tx else None),
            "lossless": None,
        }
    for (config, pattern, size, mode), rates in lossless_rates(rows).items():
        key = (config, "lossless", pattern, size, mode)
        summary.setdefault(key, {"runs": 0, "mpps": None})
        summary[key]["lossless"] = stat(rates)
    for key, s in summary.items():
        metric = METRIC[key[1]]
        cpu = summary.get(key[:4] + ("cpu",))
        mine = s.get(metric)
        ref = cpu.get(metric) if cpu else None
        s["ratio"] = (mine[0] / ref[0] if mine and ref and ref[0]
                      else None)
    return summary


def _fmt(v, f="%.2f"):
    return f % v if v is not None else "n/a"


def auto_target(summary, config, keys):
    """A table of auto against its target: at least 0.95 x the better of
    cpu and defer in every cell, and at least cpu at 64-256 B."""
    out = ["`auto` against its target (median Mpps; >= 0.95 x max(cpu, "
           "defer), and >= 1.0 x cpu at 64-256 B):\n",
           "| traffic | auto / max(cpu, defer) | auto / cpu | target |",
           "|---|---:|---:|---|"]
    for pattern, size in keys:
        med = {}
        for m in ("cpu", "defer", "auto"):
            s = summary.get((config, "saturation", pattern, size, m))
            med[m] = s["mpps"][0] if s and s["mpps"] else None
        if None in med.values() or not med["cpu"]:
            out.append("| %s %d B | n/a | n/a | n/a |" % (pattern, size))
            continue
        best = med["auto"] / max(med["cpu"], med["defer"])
        vs_cpu = med["auto"] / med["cpu"]
        met = best >= 0.95 and (size > 256 or vs_cpu >= 1.0)
        out.append("| %s %d B | %.3f | %.3f | %s |" % (
            pattern, size, best, vs_cpu, "met" if met else "missed"))
    return "\n".join(out) + "\n"


# One sentence per protocol on what it measures on a small machine.
MEANING = {
    "fixed": "Every mode carries the same offered load, so the PMD's busy "
             "cycles per packet compare what each copy strategy costs the "
             "PMD; on a 2-CPU machine this is the fair view of the offload, "
             "with the guests sleeping when idle so that the engine thread "
             "sharing their CPU runs promptly.",
    "lossless": "The highest offered load that a mode carried without "
                "losing a frame (binary search below its own saturation "
                "rate); on a 2-CPU machine it is bounded by the guest and "
                "the engine thread sharing one CPU as much as by the PMD.",
    "saturation": "The generators send as fast as the switch takes frames; "
                  "on a 2-CPU machine this measures how the PMD, the guest "
                  "and the engine thread share the CPUs (an engine starved "
                  "by a busy guest), not the offload itself.",
}


def report(rows, modes):
    """Markdown: per configuration, the fixed-load PMD cycles per packet,
    the lossless rates and the saturation tables (throughput relative to
    cpu laid out like Intel's published comparison, Mpps, PMD cycles per
    packet with batch sizes, DMA copies), then the runs that were not
    verified."""
    summary = summarize(rows)
    configs = []
    for r in rows:
        if r["config"] not in configs:
            configs.append(r["config"])
    out = []
    others = [m for m in modes if m != "cpu"]
    for config in configs:
        out.append("### %s\n" % config)

        def keys_of(protocol):
            return sorted({(k[2], k[3]) for k in summary
                           if k[0] == config and k[1] == protocol},
                          key=lambda k: (PATTERNS.index(k[0])
                                         if k[0] in PATTERNS else 9, k[1]))

        def table(protocol, title, columns, cell, metric="mpps"):
            """A table with a row per traffic cell and a column per entry
            of 'columns'; cell(summary entry, column) formats one cell."""
            out.append(title + "\n")
            out.append("| traffic | " + " | ".join(columns) + " |")
            out.append("|---|" + "---:|" * len(columns))
            for pattern, size in keys_of(protocol):
                line = "| %s %d B |" % (pattern, size)
                for col in columns:
                    mode = col.split()[0]
                    s = summary.get((config, protocol, pattern, size, mode))
                    line += " %s |" % (cell(s, col) if s and s.get(metric)
                                       else "n/a")
                out.append(line)
            out.append("")

        fixed = [r for r in rows if r["config"] == config
                 and r["protocol"] == "fixed"]
        if fixed:
            out.append("#### Fixed load: %d frames per second offered, in "
                       "bursts\n" % int(fixed[0]["offered_pps"]))
            out.append(MEANING["fixed"] + "\n")
            table("fixed", "PMD busy cycles per packet, median (ratio to "
                  "`cpu` in bold; frames lost in brackets):",
                  ["cpu cycles"] + others,
                  lambda s, col: ("%.0f (%s %% lost)" % (
                      s["cycles"][0], _fmt(s["loss_pct"], "%.3f"))
                      if col == "cpu cycles" else "%.0f **%s** (%s %% lost)"
                      % (s["cycles"][0], _fmt(s["ratio"]),
                         _fmt(s["loss_pct"], "%.3f"))), "cycles")
        if any(k[0] == config and k[1] == "lossless" for k in summary):
            out.append("#### Lossless rate\n")
            out.append(MEANING["lossless"] + "\n")
            table("lossless", "Highest rate with 0 frames lost, median Mpps "
                  "offered (ratio to `cpu` in bold):", ["cpu Mpps"] + others,
                  lambda s, col: ("%.3f" % (s["lossless"][0] / 1e6)
                                  if col == "cpu Mpps" else "%.3f **%s**" % (
                                      s["lossless"][0] / 1e6,
                                      _fmt(s["ratio"]))), "lossless")
        if not keys_of("saturation"):
            continue
        out.append("#### Saturation\n")
        out.append(MEANING["saturation"] + "\n")
        table("saturation", "Throughput relative to `cpu` (median of "
              "verified runs; min-max of Mpps in brackets):",
              ["cpu Mpps"] + others,
              lambda s, col: ("%.3f (%.3f-%.3f)" % s["mpps"]
                              if col == "cpu Mpps"
                              else "**%s** (%.3f-%.3f)" % (
                                  _fmt(s["ratio"]), s["mpps"][1],
                                  s["mpps"][2])))
        table("saturation", "PMD processing cycles per packet, median (Tx "
              "packets per batch in brackets):", modes,
              lambda s, col: "%.0f (%.1f)" % (s["cycles"][0],
                                               s["batch"][0]))
        table("saturation", "DMA copies per run and deferred completion "
              "latency, median:", others,
              lambda s, col: "%.0f, %.0f us" % (s["dma"][0],
                                                s["latency"][0]))
        if any(int(r.get("uplink_queues") or 1) > 1 for r in rows
               if r["config"] == config):
            for protocol in ("fixed", "saturation"):
                if keys_of(protocol):
                    table(protocol, "Tx queue locks found taken (%s), per "
                          "1000 frames sent, median: waits for the lock / "
                          "packets put aside instead:" % protocol, modes,
                          lambda s, col: "%.1f / %.1f" % (
                              s["waits"][0], s["put_aside"][0]), "waits")
        if "auto" in modes and "defer" in modes:
            out.append(auto_target(summary, config, keys_of("saturation")))
    bad = [r for r in rows if r["verdict"] != "verified"]
    out.append("Runs: %d, verified: %d.%s" % (
        len(rows), len(rows) - len(bad),
        "" if not bad else " Not verified: " + "; ".join(
            "%s %s %s B %s rep %s %s: %s %s" % (
                r["config"], r["pattern"], r["size"], r["mode"],
                int(r["rep"]) + 1, r["protocol"], r["verdict"],
                r.get("error", ""))
            for r in bad)))
    return "\n".join(out) + "\n", summary


# The panels of a plot: (protocol, summary field, y label, title).
PANELS = [
    ("saturation", "ratio", "throughput / cpu",
     "saturation throughput relative to cpu"),
    ("fixed", "cycles", "PMD busy cycles per packet",
     "PMD cycles per packet at the fixed load"),
    ("saturation", "cycles", "PMD busy cycles per packet",
     "PMD cycles per packet at saturation"),
    ("lossless", "ratio", "lossless rate / cpu",
     "lossless rate relative to cpu"),
]


def plot(summary, modes, out_dir):
    """PNG plots per configuration and pattern, one line per mode against
    frame size: saturation throughput relative to cpu, PMD cycles per
    packet (at the fixed load if there is one, else at saturation) and the
    lossless rate relative to cpu if it was searched.  Returns the files
    written, or raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    groups = sorted({(k[0], k[2]) for k in summary})
    for config, pattern in groups:
        have = {k[1] for k in summary if k[0] == config and k[2] == pattern}
        panels = [p for p in PANELS if p[0] in have]
        if "fixed" in have:
            panels = [p for p in panels
                      if p[:2] != ("saturation", "cycles")]
        fig, axes = plt.subplots(1, len(panels),
                                 figsize=(5.5 * len(panels), 4))
        axes = axes if len(panels) > 1 else [axes]
        for ax, (protocol, field, ylabel, title) in zip(axes, panels):
            sizes = sorted({k[3] for k in summary if k[0] == config
                            and k[1] == protocol and k[2] == pattern})
            for m in modes:
                xs, ys = [], []
                for size in sizes:
                    s = summary.get((config, protocol, pattern, size, m))
                    v = s.get(field) if s else None
                    if v is not None:
                        xs.append(size)
                        ys.append(v[0] if isinstance(v, tuple) else v)
                if xs:
                    ax.plot(xs, ys, marker="o", label=m)
            if field == "ratio":
                ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
            ax.set_xlabel("frame size (B)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.suptitle("%s, %s traffic" % (config, pattern))
        fig.tight_layout()
        path = os.path.join(out_dir, "%s-%s.png" % (config, pattern))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    return files


def load_rows(path):
    """Rows of a runs.csv written by run_benchmark() (runs before the
    protocols existed are saturation runs)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["protocol"] = r.get("protocol") or "saturation"
        for k in ("mpps", "tx_mpps", "gbps", "cycles_per_pkt",
                  "pkts_per_batch", "pmd_busy_pct", "completion_latency_us"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else 0.0
        for k in ("dma_copies", "cpu_copies", "switch_dropped", "lost",
                  "tx_pkts", "rx_pkts", "size", "pmds", "ports", "rep",
                  "offered_pps", "txq_waits", "put_aside"):
            r[k] = int(float(r[k])) if r.get(k) not in (None, "") else 0
    return rows
