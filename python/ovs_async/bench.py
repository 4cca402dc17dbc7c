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
out of the medians."""

import csv
import json
import os
import re
import statistics
import time

from ovs_async import parse, traffic
from ovs_async.modes import COPY_MODES
from ovs_async.sandbox import Sandbox, SandboxError

MODES = list(COPY_MODES)
SIZES = [64, 114, 512, 1518, 2098]
PATTERNS = ["burst", "scatter"]
# Software engines; hardware ones are named "pci:BDF[+BDF...]".
ENGINES = ["dma_swcopy", "dma_skeleton"]
TOPOLOGIES = ["loop", "fanout"]

# Ports of one ovs-vhost-guest process at most (its limit is 16).
GUEST_PORTS = 16

# Fields of a run, in CSV column order.
FIELDS = ["config", "engine", "pmds", "ports", "topology", "vxlan",
          "pattern", "size", "mode", "rep", "mpps", "gbps", "cycles_per_pkt",
          "pkts_per_batch", "pmd_busy_pct", "dma_copies", "cpu_copies",
          "completion_latency_us", "tx_pkts", "rx_pkts", "switch_dropped",
          "lost", "verdict", "error"]


class Config(object):
    """One sandbox: engine, PMD threads, vhost ports (loop: ports in pairs
    that forward to each other; fanout: sink ports fed by uplinks),
    topology, VXLAN frames or not, and the CPU layout."""

    def __init__(self, engine, pmds, ports, topology, vxlan, layout):
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
        return "%s-%dpmd-%s%d%s" % (engine, self.pmds, self.topology,
                                    self.ports,
                                    "-vxlan" if self.vxlan else "")

    def describe(self):
        return ("engine %s, %d PMD%s, %s topology with %d %s%s"
                % (self.engine, self.pmds, "s" if self.pmds > 1 else "",
                   self.topology, self.ports,
                   "looped ports" if self.topology == "loop"
                   else "sink ports", ", VXLAN frames" if self.vxlan else ""))

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
    if pmds >= len(cpus):
        raise SandboxError("%d PMD threads need more than the %d CPUs "
                           "available" % (pmds, len(cpus)))
    need = pmds + engine_threads + n_guests
    if len(cpus) >= need + 1:
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


def run_once(sb, cfg, pattern, size, duration):
    """One verified run of every guest of 'cfg' side by side."""
    guests = []
    ports = []
    for i, group in enumerate(cfg.groups):
        cpu = cfg.layout["guest_cpus"][i % len(cfg.layout["guest_cpus"])]
        if cfg.topology == "loop":
            spec = [(group[0], "gen+sink"), (group[1], "loop")]
            args = []
        else:
            spec = [(group[0], "gen")] + [(p, "sink") for p in group[1:]]
            args = ["--pattern", pattern]
        if cfg.vxlan:
            args.append("--vxlan")
        args += ["--size", size, "--duration", duration]
        guests.append(traffic.start_held(sb, spec, args, cpu=cpu))
        ports += group
    try:
        run = traffic.finish(sb, guests, ports, timeout=duration + 90)
    except BaseException:
        for g in guests:
            g.stop()
        raise
    return run


def measure(sb, cfg, pattern, size, mode, rep, duration):
    """Sets 'mode', runs once and returns a row of FIELDS."""
    row = {"config": cfg.name, "engine": cfg.engine, "pmds": cfg.pmds,
           "ports": cfg.ports, "topology": cfg.topology,
           "vxlan": int(cfg.vxlan), "pattern": pattern, "size": size,
           "mode": mode, "rep": rep, "error": ""}
    try:
        sb.set_copy_mode(mode)
        run = run_once(sb, cfg, pattern, size, duration)
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
        "completion_latency_us": round(sum(
            p["latency_us"] * p["latency_n"] for p in pmds) / n_lat, 1)
        if n_lat else 0.0,
        "tx_pkts": g["tx_pkts"], "rx_pkts": g["rx_pkts"],
        "switch_dropped": run["switch_dropped"], "lost": g["lost"],
        "verdict": run["verdict"]})
    return row


def run_benchmark(configs, patterns, sizes, modes, reps, duration, out_dir,
                  huge="auto", progress=print):
    """Runs the whole matrix; writes runs.csv and runs.jsonl under
    'out_dir' as it goes and returns the rows."""
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    total = (len(configs) * len(patterns) * len(sizes) * len(modes) * reps)
    done = 0
    start = time.time()
    csv_path = os.path.join(out_dir, "runs.csv")
    with open(csv_path, "w", newline="") as fcsv, \
            open(os.path.join(out_dir, "runs.jsonl"), "w") as fjson:
        writer = csv.DictWriter(fcsv, fieldnames=FIELDS)
        writer.writeheader()
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
                            for mode in modes:
                                row = measure(sb, cfg, pattern, size, mode,
                                              rep, duration)
                                rows.append(row)
                                writer.writerow(row)
                                fjson.write(json.dumps(row) + "\n")
                                fcsv.flush()
                                fjson.flush()
                                done += 1
                                eta = ((time.time() - start) / done
                                       * (total - done))
                                progress(
                                    "   [%d/%d, %.0f s left] %s %d B %-5s "
                                    "rep %d: %s Mpps, %s cyc/pkt, %s"
                                    % (done, total, eta, pattern, size, mode,
                                       rep + 1, row.get("mpps", "-"),
                                       row.get("cycles_per_pkt", "-"),
                                       row["verdict"]))
    return rows


# ---- Aggregation and reports ---------------------------------------------

def cells(rows):
    """{(config, pattern, size, mode): [verified rows]}."""
    out = {}
    for r in rows:
        key = (r["config"], r["pattern"], int(r["size"]), r["mode"])
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


def summarize(rows):
    """Per (config, pattern, size, mode): medians and ranges of Mpps,
    cycles/packet and batch size, and the median Mpps ratio to cpu."""
    c = cells(rows)
    summary = {}
    for key, runs in c.items():
        config, pattern, size, mode = key
        summary[key] = {
            "runs": len(runs),
            "mpps": stat(r["mpps"] for r in runs),
            "gbps": stat(r["gbps"] for r in runs),
            "cycles": stat(r["cycles_per_pkt"] for r in runs),
            "batch": stat(r["pkts_per_batch"] for r in runs),
            "dma": stat(r["dma_copies"] for r in runs),
            "latency": stat(r["completion_latency_us"] for r in runs),
            "dropped": stat(r["switch_dropped"] for r in runs),
        }
    for key, s in summary.items():
        cpu = summary.get(key[:3] + ("cpu",))
        s["ratio"] = (s["mpps"][0] / cpu["mpps"][0]
                      if s["mpps"] and cpu and cpu["mpps"]
                      and cpu["mpps"][0] else None)
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
            s = summary.get((config, pattern, size, m))
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


def report(rows, modes):
    """Markdown tables: throughput relative to cpu laid out like
    Intel's published comparison (rows: traffic; columns: modes), Mpps, PMD cycles per
    packet with batch sizes, and the runs that were not verified."""
    summary = summarize(rows)
    configs = []
    for r in rows:
        if r["config"] not in configs:
            configs.append(r["config"])
    out = []
    for config in configs:
        keys = sorted({(k[1], k[2]) for k in summary if k[0] == config},
                      key=lambda k: (PATTERNS.index(k[0])
                                     if k[0] in PATTERNS else 9, k[1]))
        others = [m for m in modes if m != "cpu"]
        out.append("### %s\n" % config)

        def table(title, columns, cell):
            """A table with a row per traffic cell and a column per entry
            of 'columns'; cell(summary entry, column) formats one cell."""
            out.append(title + "\n")
            out.append("| traffic | " + " | ".join(columns) + " |")
            out.append("|---|" + "---:|" * len(columns))
            for pattern, size in keys:
                line = "| %s %d B |" % (pattern, size)
                for col in columns:
                    mode = "cpu" if col == "cpu Mpps" else col
                    s = summary.get((config, pattern, size, mode))
                    line += " %s |" % (cell(s, col) if s and s["mpps"]
                                       else "n/a")
                out.append(line)
            out.append("")

        table("Throughput relative to `cpu` (median of verified runs; "
              "min-max of Mpps in brackets):", ["cpu Mpps"] + others,
              lambda s, col: ("%.3f (%.3f-%.3f)" % s["mpps"]
                              if col == "cpu Mpps"
                              else "**%s** (%.3f-%.3f)" % (
                                  _fmt(s["ratio"]), s["mpps"][1],
                                  s["mpps"][2])))
        table("PMD processing cycles per packet, median (Tx packets per "
              "batch in brackets):", modes,
              lambda s, col: "%.0f (%.1f)" % (s["cycles"][0],
                                               s["batch"][0]))
        table("DMA copies per run and deferred completion latency, median:",
              others,
              lambda s, col: "%.0f, %.0f us" % (s["dma"][0],
                                                s["latency"][0]))
        if "auto" in modes and "defer" in modes:
            out.append(auto_target(summary, config, keys))
    bad = [r for r in rows if r["verdict"] != "verified"]
    out.append("Runs: %d, verified: %d.%s" % (
        len(rows), len(rows) - len(bad),
        "" if not bad else " Not verified: " + "; ".join(
            "%s %s %s B %s rep %s: %s %s" % (
                r["config"], r["pattern"], r["size"], r["mode"],
                int(r["rep"]) + 1, r["verdict"], r.get("error", ""))
            for r in bad)))
    return "\n".join(out) + "\n", summary


def plot(summary, modes, out_dir):
    """PNG plots per configuration and pattern: throughput ratio to cpu and
    PMD cycles per packet against frame size, one line per mode.  Returns
    the files written, or raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    groups = sorted({(k[0], k[1]) for k in summary})
    for config, pattern in groups:
        sizes = sorted({k[2] for k in summary
                        if k[0] == config and k[1] == pattern})
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        for m in modes:
            xs, ratio, cyc = [], [], []
            for size in sizes:
                s = summary.get((config, pattern, size, m))
                if s and s["mpps"]:
                    xs.append(size)
                    ratio.append(s["ratio"] if s["ratio"] is not None
                                 else float("nan"))
                    cyc.append(s["cycles"][0])
            if xs:
                ax1.plot(xs, ratio, marker="o", label=m)
                ax2.plot(xs, cyc, marker="o", label=m)
        ax1.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax1.set_xlabel("frame size (B)")
        ax1.set_ylabel("throughput / cpu")
        ax1.set_title("throughput relative to cpu")
        ax2.set_xlabel("frame size (B)")
        ax2.set_ylabel("PMD cycles per packet")
        ax2.set_title("PMD processing cycles per packet")
        for ax in (ax1, ax2):
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
    """Rows of a runs.csv written by run_benchmark()."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("mpps", "gbps", "cycles_per_pkt", "pkts_per_batch",
                  "pmd_busy_pct", "completion_latency_us"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else 0.0
        for k in ("dma_copies", "cpu_copies", "switch_dropped", "lost",
                  "tx_pkts", "rx_pkts", "size", "pmds", "ports", "rep"):
            r[k] = int(float(r[k])) if r.get(k) not in (None, "") else 0
    return rows
