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

"""Parsers of ovs-vswitchd's text outputs (pmd-stats-show, pmd-perf-show,
pmd-rxq-show, dpctl/show -s, vhost-copy-mode-get, dmadev-show,
get-mempool-info, dma-swcopy/show): each takes the text and returns
plain data.  Sandbox's methods of the same names run the command."""

import re

def pmd_counters(text):
    """Sums over all threads of the counter lines of pmd-stats-show
    that the fork adds: "DMA ...", "deferred work ..." and "auto mode
    CPU copies"."""
    sums = {}
    for m in re.finditer(r"^\s+(DMA [^:]+|deferred work [^:]+|"
                         r"auto mode (?:Rx )?CPU copies): (\d+)$", text,
                         re.M):
        sums[m.group(1)] = sums.get(m.group(1), 0) + int(m.group(2))
    # "sleeps begun with DMA copies in flight: N (M copies)"
    for m in re.finditer(r"^\s+sleeps begun with DMA copies in flight: "
                         r"(\d+) \((\d+) copies\)$", text, re.M):
        for key, value in (("sleeps with copies in flight", m.group(1)),
                           ("copies in flight at sleeps", m.group(2))):
            sums[key] = sums.get(key, 0) + int(value)
    return sums


def sections(text, header):
    """Splits 'text' at the lines that match the regular expression
    'header' and yields (the header's match, the lines up to the next
    header) for each.  Lines before the first header are ignored."""
    match, lines = None, []
    for line in text.splitlines():
        m = re.match(header, line)
        if m:
            if match:
                yield match, lines
            match, lines = m, []
        elif match:
            lines.append(line)
    if match:
        yield match, lines


PMD_HEADER = r"pmd thread numa_id (\S+) core_id (\d+):"


def main_thread_counters(text):
    """pmd_counters() of pmd-stats-show's "main thread:" section alone:
    what the main thread sent (OpenFlow packet-outs and resumed
    packet-ins, traffic of the LOCAL port) and how it copied it."""
    for m, lines in sections(text, r"(main thread|%s)" % PMD_HEADER):
        if m.group(1) == "main thread":
            return pmd_counters("\n".join(lines))
    raise ValueError("no main thread in pmd-stats-show:\n%s" % text)

# pmd-perf-show's fields: (key, regular expression, conversion of each of
# its groups).
PERF_FIELDS = (
    (("rx_packets", "kpps", "cycles_per_pkt"),
     r"\s+Rx packets:\s+(\d+)\s+\(([\d.]+) Kpps, ([\d.]+) cycles/pkt\)",
     (int, float, float)),
    (("tx_packets",), r"\s+Tx packets:\s+(\d+)", (int,)),
    (("pkts_per_batch",), r"\s+Tx batches:\s+\d+\s+\(([\d.]+) pkts/batch",
     (float,)),
    (("busy_pct",), r"\s+- busy iterations:\s+\d+\s+\(\s*([\d.]+) %",
     (float,)),
    (("sleep_us",), r"\s+Sleep time \(us\):\s+(\d+)", (int,)),
    (("latency_us", "latency_n"),
     r"\s+deferred completion latency: avg ([\d.]+) us,"
     r".*\((\d+) submissions\)", (float, int)),
)


def pmd_perf(text):
    """Parses 'dpif-netdev/pmd-perf-show' into {core_id: {...}}."""
    pmds = {}
    for header, lines in sections(text, PMD_HEADER):
        cur = pmds.setdefault(int(header.group(2)), {
            "rx_packets": 0, "kpps": 0.0, "cycles_per_pkt": 0.0,
            "tx_packets": 0, "pkts_per_batch": 0.0,
            "busy_pct": 0.0, "sleep_us": 0, "latency_us": 0.0,
            "latency_n": 0})
        for line in lines:
            for keys, regex, types in PERF_FIELDS:
                m = re.match(regex, line)
                if m:
                    for key, convert, value in zip(keys, types, m.groups()):
                        cur[key] = convert(value)
    return pmds


def port_stats(text):
    """Live per-port counters from 'dpctl/show -s': {name: {...}}; {} for
    a port whose counters cannot be read (a vhost-user port without a
    guest)."""
    # dpctl prints that error without ending its line: the next port's
    # header follows on the same line.
    text = re.sub(r"(could not retrieve stats \([^)]*\))", "\\1\n", text)
    stats = {}
    for header, lines in sections(text, r"\s+port \d+: (\S+)"):
        cur = stats.setdefault(header.group(1), {})
        for line in lines:
            m = re.match(r"\s+(RX|TX) packets:(\d+) errors:(\S+) "
                         r"dropped:(\d+)", line)
            if m:
                d = m.group(1).lower()
                cur[d + "_packets"] = int(m.group(2))
                cur[d + "_dropped"] = int(m.group(4))
    return stats


def copy_modes_by_port(text):
    """vhost-copy-mode-get of every port: {port: [its lines]}, the
    "available:" line left out."""
    ports = {}
    for header, lines in sections(text, r"(available[^:]*|\S+): "):
        if not header.group(1).startswith("available"):
            ports.setdefault(header.group(1), []).extend(lines)
    return ports


def queue_counts(text, kind, what):
    """{port: {queue: count}} of the 'kind' ("txq" or "rxq") lines of
    vhost-copy-mode-get, which reads the counters at once (interface
    statistics lag 5 s): the number before 'what' on each line, 0 on a
    line without it."""
    ports = {}
    for port, lines in copy_modes_by_port(text).items():
        ports[port] = {}
        for line in lines:
            m = re.match(r"\s+%s (\d+): " % kind, line)
            if m:
                n = re.search(r"(-?\d+) %s" % what, line)
                ports[port][int(m.group(1))] = int(n.group(1)) if n else 0
    return ports


def queue_inflight(text, kind):
    """{port: {queue: copies in flight}} from vhost-copy-mode-get."""
    return queue_counts(text, kind, "copies in flight")


def txq_inflight(text):
    """{port: {txq: copies in flight}} from vhost-copy-mode-get."""
    return queue_inflight(text, "txq")


def txq_put_aside(text):
    """{port: {txq: packets put aside}} from
    vhost-copy-mode-get ('defer' and 'auto')."""
    return queue_counts(text, "txq", "packets put aside")


def rxq_inflight(text):
    """{port: {rxq: copies in flight}} from vhost-copy-mode-get."""
    return queue_inflight(text, "rxq")


def rx_copy_mode(text):
    """The Rx copy mode in use, from vhost-copy-mode-get of one port."""
    m = re.search(r"^\s+Rx: (\S+)", text, re.M)
    return m.group(1) if m else None


def abandoned(text):
    """{port: copies abandoned} from vhost-copy-mode-get."""
    out = {}
    for port, lines in copy_modes_by_port(text).items():
        out[port] = 0
        for line in lines:
            m = re.match(r"\s+copies abandoned: (\d+)", line)
            if m:
                out[port] = int(m.group(1))
    return out


def abandoned_freed(text):
    """{port: mbufs freed of its abandoned copies} from
    vhost-copy-mode-get (those of Tx copies, once their engine stopped)."""
    out = {}
    for port, lines in copy_modes_by_port(text).items():
        out[port] = 0
        for line in lines:
            m = re.match(r"\s+copies abandoned: \d+ \(mbufs freed: (\d+)\)",
                         line)
            if m:
                out[port] = int(m.group(1))
    return out


def mempool_in_use(text):
    """{mempool name: mbufs in use} from netdev-dpdk/get-mempool-info.

    DPDK's dump has no in-use line: an mbuf is in use unless it is in
    the common pool or in a per-lcore cache."""
    result = {}
    for header, lines in sections(text, r"mempool <([^>]+)>"):
        size, common, cached = None, None, 0
        for line in lines:
            m = re.match(r"\s+(size|common_pool_count|cache_count\[\d+\])"
                         r"=(\d+)$", line)
            if not m:
                continue
            key, value = m.group(1), int(m.group(2))
            if key == "size":
                size = value
            elif key == "common_pool_count":
                common = value
            else:
                cached += value
        if size is None or common is None:
            raise ValueError("cannot parse mempool %s in:\n%s"
                             % (header.group(1), text[:2000]))
        result[header.group(1)] = size - common - cached
    return result


def key_values(text):
    """The 'key: value' lines after the first line of 'text' (for example
    dma-swcopy/show ENGINE) as a dict."""
    state = {}
    for line in text.splitlines()[1:]:
        key, _, value = line.strip().partition(": ")
        state[key] = value
    return state


def auto_queues(text, kind="txq"):
    """vhost-copy-mode-get PORT of a port in mode auto: one dict per Tx
    queue, or per Rx queue with 'kind' "rxq" (path, switches, probing,
    costs per size class, DMA backlog/drop events, bursts kept off DMA by
    the engine's capacity, the capacity seen if any)."""
    queues = []
    for m in re.finditer(r"^  %s (\d+): (cpu|dma) \(switches: (\d+) to dma, "
                         r"(\d+) to cpu(.*)$" % kind, text, re.M):
        rest = m.group(5)
        events = re.search(r"dma backlog/drop events: (\d+)", rest)
        capped = re.search(r"bursts kept off dma: (\d+)", rest)
        cap = re.search(r"dma fell behind at (\d+) pkts/ms", rest)
        q = {"qid": int(m.group(1)), "path": m.group(2),
             "to_dma": int(m.group(3)), "to_cpu": int(m.group(4)),
             "probing": "probing" in rest, "text": m.group(0),
             "events": int(events.group(1)) if events else 0,
             "capped": int(capped.group(1)) if capped else 0,
             "cap": int(cap.group(1)) if cap else None,
             "costs": {}}
        for c in re.finditer(r"(<=|>)(\d+)B (\d+|\?|losing)/(\d+|\?|losing)",
                             m.group(5)):
            q["costs"][c.group(1) + c.group(2)] = (c.group(3), c.group(4))
        queues.append(q)
    return queues


def rx_packets(text):
    """Packets received by all threads, from pmd-stats-show."""
    return sum(int(n) for n in re.findall(r"^\s+packets received: (\d+)$",
                                          text, re.M))


def rxq_cores(text):
    """{port: core} of the Rx queues (queue 0) in pmd-rxq-show."""
    cores = {}
    for header, lines in sections(text, PMD_HEADER):
        for line in lines:
            m = re.match(r"\s*port: (\S+)\s+queue-id:\s+0\b", line)
            if m:
                cores[m.group(1)] = int(header.group(2))
    return cores


def rxq_states(text):
    """{port: {queue id: enabled?}} of the Rx queues in pmd-rxq-show, over
    every PMD thread."""
    states = {}
    for port, qid, state in re.findall(
            r"^\s*port: (\S+)\s+queue-id:\s+(\d+) \((enabled|disabled)\)",
            text, re.M):
        states.setdefault(port, {})[int(qid)] = state == "enabled"
    return states


def migration_line(text):
    """The state after "live migration: " in vhost-copy-mode-get PORT,
    which has one such line; ValueError if it has none or several."""
    states = re.findall(r"^\s*live migration: (.*)$", text, re.M)
    if len(states) != 1:
        raise ValueError("%d \"live migration:\" lines in %r"
                         % (len(states), text))
    return states[0]


def dmadevs(text):
    """The names of the engines in dmadev-show."""
    return re.findall(r"^dmadev (\S+)", text, re.M)


def engines(text):
    """dmadev-show as {engine: {"in_flight": copies it holds (0 where it
    shows none), "out_of_service": bool}}."""
    res = {}
    for m, lines in sections(text, r"dmadev (\S+) \(id \d+\):"):
        body = "\n".join(lines)
        n = re.search(r"^  copies in flight: (\d+)$", body, re.M)
        res[m.group(1)] = {
            "in_flight": int(n.group(1)) if n else 0,
            "out_of_service": bool(re.search(r"^  state: out of service",
                                             body, re.M))}
    return res


def rx_mbufs_freed(text):
    """The mbufs of Rx copies that restarts of engines freed, summed over
    the engines of dmadev-show (the engine keeps no such line before its
    first restart that lost copies)."""
    return sum(int(n) for n in re.findall(
        r"^  copies lost by restarts: \d+ \(mbufs of Rx copies freed: "
        r"(\d+)\)$", text, re.M))


def resets(text):
    """The vhost-user connections reset for a failed DMA engine, summed
    over the ports of vhost-copy-mode-get."""
    return sum(int(n) for n in re.findall(
        r"resets for a failed DMA engine: (\d+)", text))
