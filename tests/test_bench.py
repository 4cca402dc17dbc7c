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

"""utilities/ovs-async-bench: its quick matrix runs, every run is verified,
every mode produces numbers, and its reports and plots come out."""

import csv
import os
import subprocess
import sys

import pytest

from ovs_async import bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "utilities", "ovs-async-bench")


def run_bench(*args, timeout=600):
    p = subprocess.run([sys.executable, BENCH] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=timeout)
    print(p.stdout)
    return p


def read_runs(out):
    with open(os.path.join(out, "runs.csv")) as f:
        return list(csv.DictReader(f))


def test_quick(tmp_path):
    out = str(tmp_path / "quick")
    p = run_bench("--quick", "--out", out)
    assert p.returncode == 0
    rows = read_runs(out)
    assert len(rows) == len(bench.MODES) * 2, rows
    for r in rows:
        assert r["verdict"] == "verified", r
        assert float(r["mpps"]) > 0 and float(r["cycles_per_pkt"]) > 0, r
        assert int(r["rx_pkts"]) > 0, r
        if r["mode"] == "cpu":
            assert int(r["dma_copies"]) == 0, r
        else:
            # Every async mode used the engine (auto: at least its probes).
            assert int(r["dma_copies"]) > 0, r
    assert {r["mode"] for r in rows} == set(bench.MODES)
    assert {int(r["size"]) for r in rows} == {64, 1518}

    report = open(os.path.join(out, "report.md")).read()
    assert "| traffic | cpu Mpps | v3 | ring | defer | auto |" in report
    assert "| burst 64 B |" in report and "| burst 1518 B |" in report
    assert "Runs: 10, verified: 10." in report
    png = os.path.join(out, "dma_swcopy-1pmd-loop2-burst.png")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(png) > 10000

    # The report can be rebuilt from the CSV alone, identically.
    os.rename(os.path.join(out, "report.md"),
              os.path.join(out, "report.first.md"))
    p = run_bench("--report-only", os.path.join(out, "runs.csv"),
                  "--no-plots")
    assert p.returncode == 0
    assert (open(os.path.join(out, "report.md")).read()
            == open(os.path.join(out, "report.first.md")).read())


def test_fanout_vxlan_scatter(tmp_path):
    """A generator behind an uplink, OVS forwarding VXLAN frames to three
    sink ports by MAC, the destination changing with every frame."""
    out = str(tmp_path / "fanout")
    p = run_bench("--quick", "--topology", "fanout", "--ports", "3",
                  "--vxlan", "--patterns", "scatter", "--sizes", "114",
                  "--modes", "cpu,defer", "--no-plots", "--out", out)
    assert p.returncode == 0
    rows = read_runs(out)
    assert [r["mode"] for r in rows] == ["cpu", "defer"], rows
    for r in rows:
        assert r["verdict"] == "verified", r
        assert r["topology"] == "fanout" and r["vxlan"] == "1", r
        assert int(r["rx_pkts"]) > 0, r
    assert int(rows[1]["dma_copies"]) > 0, rows[1]


def test_fixed_load_and_lossless(tmp_path):
    """--rate runs every mode at the offered load, in full bursts, and
    --lossless searches each mode's lossless rate; the report shows both
    next to the saturation tables, each with what it means."""
    out = str(tmp_path / "fixed")
    rate = 40000
    p = run_bench("--quick", "--modes", "cpu,defer", "--sizes", "512",
                  "--rate", str(rate), "--lossless", "--resolution", "25",
                  "--no-plots", "--out", out)
    assert p.returncode == 0
    rows = read_runs(out)
    by = {}
    for r in rows:
        assert r["verdict"] == "verified", r
        by.setdefault(r["protocol"], []).append(r)
    assert [r["mode"] for r in by["saturation"]] == ["cpu", "defer"]
    assert [r["mode"] for r in by["fixed"]] == ["cpu", "defer"]
    for r in by["fixed"]:
        assert int(r["offered_pps"]) == rate, r
        # The limiter never offers more than the rate (1 s of traffic,
        # plus one burst), and releases whole bursts: the PMD's batches
        # stay full.
        assert 0 < int(r["tx_pkts"]) <= rate * 1.0 + 32, r
        assert float(r["pkts_per_batch"]) >= 24, r
    for mode in ("cpu", "defer"):
        trials = [r for r in by["lossless"] if r["mode"] == mode]
        sat = [r for r in by["saturation"] if r["mode"] == mode][0]
        assert trials, mode
        # The first trial is at the saturation rate, every later one
        # below it.
        assert abs(int(trials[0]["offered_pps"])
                   - float(sat["tx_mpps"]) * 1e6) <= 1, (trials[0], sat)
        assert all(int(t["offered_pps"]) <= int(trials[0]["offered_pps"])
                   for t in trials)
    report = open(os.path.join(out, "report.md")).read()
    for text in ("#### Fixed load: %d frames per second offered" % rate,
                 "#### Lossless rate", "#### Saturation",
                 bench.MEANING["fixed"], bench.MEANING["lossless"],
                 bench.MEANING["saturation"],
                 "| traffic | cpu cycles | defer |"):
        assert text in report, text
    assert "Runs: %d, verified: %d." % (len(rows), len(rows)) in report


@pytest.mark.parametrize("threshold", [0, 1, 999, 50000, 99999, 100000,
                                       250000])
def test_lossless_search(threshold):
    """The search never reports a rate that lost frames, and ends within
    its resolution of the highest rate that did not."""
    tried = []

    def trial(rate):
        tried.append(rate)
        return {"verdict": "verified", "lost": 0 if rate <= threshold else 7}
    found = bench.search_lossless(trial, 100000, 0.05)
    assert found <= min(threshold, 100000)
    assert min(threshold, 100000) - found <= 5000, (found, tried)
    assert found in tried or found == 0
    assert len(tried) <= 2 + 5, tried


@pytest.mark.parametrize("args, message", [
    (["--sizes", "10"], "--sizes: 10 is outside 64..9000"),
    (["--modes", "cpu,fast"], "--modes: unknown 'fast'"),
    (["--patterns", "scatter"], "only burst applies"),
    (["--ports", "3"], "needs an even number of ports"),
    (["--vxlan", "--sizes", "64"], "at least 114 bytes"),
    (["--pmds", "64"], "need more than the"),
    (["--engines", "dma_fast"], "--engines: unknown 'dma_fast'"),
    (["--rate", "-5"], "--rate: -5 is outside 0..100000000"),
    (["--resolution", "0"], "--resolution: 0 is outside 0.1..50"),
    (["--burst", "0"], "--burst: 0 is outside 1..512"),
    (["--idle-sleep", "-1"], "--idle-sleep: -1 is outside 0..1000000"),
    (["--uplink-queues", "9"], "--uplink-queues: 9 is outside 1..8"),
    (["--uplink-queues", "2"], "only the fanout topology has uplinks"),
    (["--topology", "fanout", "--uplink-queues", "2"],
     "2 queues need as many PMD threads"),
])
def test_bad_input(tmp_path, args, message):
    out = str(tmp_path / "bad")
    p = run_bench("--quick", "--out", out, *args, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout
    assert not os.path.exists(os.path.join(out, "runs.csv"))


def test_layout():
    big = bench.plan_layout(4, 2, 4, cpus=list(range(16)))
    assert big["pmd_cpus"] == [1, 2, 3, 4]
    assert big["dma_cpus"] == [5, 6, 7, 8]
    assert big["guest_cpus"] == [9, 10]
    assert not big["shared"]
    small = bench.plan_layout(1, 1, 1, cpus=[0, 1])
    assert small["pmd_cpus"] == [1]
    assert small["dma_cpus"] == [0] and small["guest_cpus"] == [0]
    assert small["shared"]
    # A PMD thread on every CPU: the rest shares them.
    every = bench.plan_layout(2, 1, 2, cpus=[0, 1])
    assert every["pmd_cpus"] == [0, 1] and every["dma_cpus"] == [0, 1]
    assert every["guest_cpus"] == [0] and every["shared"]


def test_named_engine_without_dmadev(tmp_path):
    """A hardware engine that EAL cannot probe is an error, not a run of
    async modes that silently copy on the CPU."""
    out = str(tmp_path / "pci")
    p = run_bench("--quick", "--engines", "pci:0000:ff:1f.7", "--modes",
                  "cpu,defer", "--out", out, timeout=120)
    assert p.returncode != 0
    assert "engine pci:0000:ff:1f.7: no dmadev was probed" in p.stdout
    p = run_bench("--quick", "--engines", "pci:nonsense", "--out", out,
                  timeout=60)
    assert p.returncode != 0
    assert "'nonsense' is not a PCI address" in p.stdout
