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

"""The parsers of the switch's text outputs, on outputs as the switch
prints them, including their odd corners."""

from ovs_async import parse


DPCTL_SHOW = """\
netdev@ovs-netdev:
  lookups: hit:1498 missed:0 lost:0
  flows: 2
  port 2: v0 (dpdkvhostuserclient: configured_rx_queues=1)
    RX packets:460 errors:? dropped:0 overruns:? frame:?
    TX packets:1886 errors:? dropped:3 aborted:? carrier:?
    collisions:?
  port 3: v1 (dpdkvhostuserclient: configured_rx_queues=1)
, could not retrieve stats (Protocol error)  port 4: v2 (dpdkvhostuserclient: configured_rx_queues=1)
    RX packets:1816 errors:? dropped:0 overruns:? frame:?
    TX packets:391 errors:? dropped:0 aborted:? carrier:?
"""


def test_port_stats_after_an_unreadable_port():
    """dpctl/show -s does not end the line of a port whose counters it
    cannot read: the next port's counters are still its own."""
    stats = parse.port_stats(DPCTL_SHOW)
    assert stats["v0"] == {"rx_packets": 460, "rx_dropped": 0,
                           "tx_packets": 1886, "tx_dropped": 3}
    assert stats["v1"] == {}
    assert stats["v2"]["tx_packets"] == 391


MODE_GET = """\
v0: defer (from ovs-appctl)
  Rx: cpu (from default)
  live migration: blocked: its socket is registered for async copies
  txq 0: 12 copies in flight, 4095 packets put aside, txq locked
  txq 1: 0 copies in flight
v1: auto (from options:vhost-copy-mode)
  Rx: dma (from ovs-appctl)
  live migration: blocked: its socket is registered for async copies
  txq 0: dma, 3 switches to cpu, 2 to dma; 7 copies in flight, 0 packets put aside, txq locked
  rxq 0: 5 copies in flight
available: cpu, v3, ring, defer, auto
available Rx: cpu, dma, auto
"""


def test_queue_counts():
    assert parse.txq_inflight(MODE_GET) == {"v0": {0: 12, 1: 0},
                                            "v1": {0: 7}}
    assert parse.txq_put_aside(MODE_GET) == {"v0": {0: 4095, 1: 0},
                                             "v1": {0: 0}}
    assert parse.rxq_inflight(MODE_GET) == {"v0": {}, "v1": {0: 5}}
