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

"""The soak (utilities/ovs-async-soak, "make soak"), 24 cycles: every
life-cycle event twice, in random order and random copy modes, under
continuous verified traffic, half of them with copies held in flight on
purpose, each followed by the guest's traffic crossing both ports
again.  Then the engine events with two engines, one per PMD thread, the
multi-engine wedge among them."""

import json
import os
import subprocess
import sys

from conftest import TOP
from ovs_async import soak

# Every event twice.
EVENTS = soak.EVENTS
ROUNDS = 2
CYCLES = ROUNDS * len(EVENTS)


def run_soak(tmp_path, events, cycles, checkpoint, *args):
    """Runs utilities/ovs-async-soak; returns its exit and its summary,
    which says it ended without an error."""
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable,
                        os.path.join(TOP, "utilities", "ovs-async-soak"),
                        "--cycles", str(cycles),
                        "--checkpoint", str(checkpoint),
                        "--events", ",".join(events),
                        "--json", str(out)] + list(args),
                       capture_output=True, text=True, timeout=1800)
    print(r.stdout[-3000:], r.stderr[-3000:])
    s = json.loads(out.read_text())
    assert s["error"] is None, s["error"]
    return r, s


def test_soak(build, tmp_path):
    r, s = run_soak(tmp_path, EVENTS, CYCLES, len(EVENTS))
    assert s["cycles"] == CYCLES and s["checkpoints"] == ROUNDS, s
    # Every kind of event and every mode happened, and copies were in
    # flight for the held ones (the dangerous moment was reached).
    assert s["events"] == {e: ROUNDS for e in EVENTS}, s["events"]
    assert set(s["modes"]) == set(soak.MODES), s
    assert set(s["rx_modes"]) == set(soak.RX_MODES), s
    assert s["held_events"] >= 5 and s["max_copies_held"] >= 64, s
    assert s["frames_verified"] > 0, s
    for key in ("corrupted", "duplicates", "misdelivered", "reordered"):
        assert s[key] == 0, (key, s)
    # Only the engines taken out of service on purpose abandon copies, and
    # the switch frees their mbufs (Rx ones when the engine comes back).
    assert s["engine_restarts"] > 0, s
    assert s["abandoned_copies"] <= s["abandoned_on_purpose"], s
    assert s["leaked_mbufs"] == 0, s
    assert 0 < s["packet_outs_received"] <= s["packet_outs"], s
    assert s["vswitchd_alive"], s
    assert r.returncode == 0, r.stdout[-2000:]
    assert "verdict: ok" in r.stdout


def test_soak_two_engines(build, tmp_path):
    """Two PMDs, each with its engine, both sending into v1's only Tx
    queue: every engine event once per engine (dealt from a deck), the
    multi-engine wedge among them.  The switch sees each wedge and resets
    v1 with the other engine still in service; the copies each event
    strands are on the engine it holds or fails; nothing is corrupted and
    every mbuf comes back.  An engine that a clear fenced beside the
    event's own (busy, it may have held copies of the vring) is brought
    back too, and counted.  v1 is deleted and added again: every PMD is
    isolated by the soak's affinities, so the port must come back with
    its own, or nobody polls it."""
    events = sorted(soak.ENGINE_EVENTS | {"port-readd"})
    cycles = 2 * len(events)
    r, s = run_soak(tmp_path, events, cycles, cycles, "--engines", "2")
    assert s["cycles"] == cycles, s
    assert s["events"] == {e: 2 for e in events}, s["events"]
    # Each engine event took its engine out of service, and it came back.
    assert s["engine_restarts"] == (2 * len(soak.ENGINE_EVENTS)
                                    + s["engines_fenced_too"]), s
    assert s["abandoned_on_purpose"] > 0, s
    assert s["frames_verified"] > 0, s
    for key in ("corrupted", "duplicates", "misdelivered", "reordered"):
        assert s[key] == 0, (key, s)
    assert s["abandoned_copies"] <= s["abandoned_on_purpose"], s
    assert s["leaked_mbufs"] == 0, s
    assert s["vswitchd_alive"], s
    assert r.returncode == 0, r.stdout[-2000:]
    assert "verdict: ok" in r.stdout
