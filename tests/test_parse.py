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

import pytest

from ovs_async import parse, upstream

pytestmark = pytest.mark.unit


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
  txq 0: 12 copies in flight, 4095 packets put aside
  txq 1: 0 copies in flight
v1: auto (from options:vhost-copy-mode)
  Rx: dma (from ovs-appctl)
  live migration: blocked: its socket is registered for async copies
  txq 0: dma, 3 switches to cpu, 2 to dma; 7 copies in flight, 0 packets put aside
  rxq 0: 5 copies in flight
available: cpu, v3, ring, defer, auto
available Rx: cpu, dma, auto
"""


PMD_STATS = """\
pmd thread numa_id 0 core_id 1:
  packets received: 16
  DMA copies submitted: 7
  DMA CPU fallbacks: 0
main thread:
  packets received: 0
  DMA copies submitted: 0
  DMA CPU fallbacks: 4
pmd thread numa_id 0 core_id 2:
  DMA CPU fallbacks: 1
"""


def test_main_thread_counters():
    assert parse.main_thread_counters(PMD_STATS) == {
        "DMA copies submitted": 0, "DMA CPU fallbacks": 4}
    assert parse.pmd_counters(PMD_STATS)["DMA CPU fallbacks"] == 5
    with pytest.raises(ValueError):
        parse.main_thread_counters(PMD_STATS.split("main thread:")[0])


def test_queue_counts():
    assert parse.txq_inflight(MODE_GET) == {"v0": {0: 12, 1: 0},
                                            "v1": {0: 7}}
    assert parse.txq_put_aside(MODE_GET) == {"v0": {0: 4095, 1: 0},
                                             "v1": {0: 0}}
    assert parse.rxq_inflight(MODE_GET) == {"v0": {}, "v1": {0: 5}}


PMD_RXQ_SHOW = """\
pmd thread numa_id 0 core_id 0:
  isolated : true
  port: v0                queue-id:  0 (enabled)   pmd usage: 12 %
  port: v1                queue-id:  1 (disabled)  pmd usage: NOT AVAIL
  overhead:  1 %
pmd thread numa_id 0 core_id 1:
  isolated : false
  port: v0                queue-id:  1 (disabled)  pmd usage:  0 %
  port: v1                queue-id:  0 (enabled)   pmd usage:  3 %
  port: v10               queue-id: 12 (enabled)   pmd usage:  0 %
  overhead:  0 %
"""


def test_rxq_states():
    assert parse.rxq_states(PMD_RXQ_SHOW) == {
        "v0": {0: True, 1: False},
        "v1": {0: True, 1: False},
        "v10": {12: True}}
    assert parse.rxq_cores(PMD_RXQ_SHOW) == {"v0": 0, "v1": 1}
    assert parse.rxq_states("") == {}


def test_migration_line():
    one_port = MODE_GET.split("v1:")[0]
    assert parse.migration_line(one_port) == \
        "blocked: its socket is registered for async copies"
    for bad in (MODE_GET, "v0: cpu\n"):
        try:
            parse.migration_line(bad)
        except ValueError:
            continue
        assert False, "no error for %r" % bad


AUTO_GET = """\
v1: Tx copy mode auto (from other_config:vhost-copy-mode)
  txq 0: cpu (switches: 1 to dma, 1 to cpu; dma backlog/drop events: 3; \
dma fell behind at 41 pkts/ms, rate now 40 pkts/ms; bursts kept off dma: \
5123); cycles/pkt cpu/dma: <=2048B 1977/losing
  txq 1: dma (switches: 2 to dma, 1 to cpu; dma backlog/drop events: 0; \
bursts kept off dma: 0; probing); cycles/pkt cpu/dma: <=128B 230/?
  Rx: auto (from options:vhost-rx-copy-mode)
  rxq 0: dma (switches: 4 to dma, 3 to cpu; dma backlog/drop events: 9; \
bursts kept off dma: 12); cycles/pkt cpu/dma: not measured yet
"""


def test_auto_queues():
    """Each queue of a port in auto: its path, switches, the engine's
    capacity when one was seen, the bursts it kept off DMA, its costs."""
    tx = parse.auto_queues(AUTO_GET)
    assert [(q["qid"], q["path"], q["to_dma"], q["to_cpu"]) for q in tx] \
        == [(0, "cpu", 1, 1), (1, "dma", 2, 1)]
    assert (tx[0]["events"], tx[0]["cap"], tx[0]["capped"]) == (3, 41, 5123)
    assert tx[0]["costs"] == {"<=2048": ("1977", "losing")}
    assert not tx[0]["probing"]
    assert (tx[1]["cap"], tx[1]["capped"], tx[1]["probing"]) == (None, 0,
                                                                 True)
    assert tx[1]["costs"] == {"<=128": ("230", "?")}
    rx = parse.auto_queues(AUTO_GET, "rxq")
    assert [(q["qid"], q["path"], q["to_dma"], q["events"], q["capped"])
            for q in rx] == [(0, "dma", 4, 9, 12)]


ABANDONED_GET = """\
v0: defer (from ovs-appctl)
  Rx: dma (from ovs-appctl)
  txq 0: 0 copies in flight, 0 packets put aside
  copies abandoned: 1280 (mbufs freed: 1024)
  rxq 0: 0 copies in flight
v1: defer (from ovs-appctl)
  Rx: cpu (from default)
  txq 0: 0 copies in flight, 0 packets put aside
available: cpu, v3, ring, defer, auto
available Rx: cpu, dma, auto
"""


DMADEV_SHOW = """\
dmadev dma_swcopy0 (id 0):
  numa_id: 0
  owner: pmd core 1
  ring size: 4096
  copies submitted: 286243
  copies completed: 285731
  copies failed: 0
  copies in flight: 0
  copies lost by restarts: 512 (mbufs of Rx copies freed: 500)
dmadev dma_swcopy1 (id 1):
  numa_id: 0
  owner: free
  ring size: 4096
  copies submitted: 10
  copies completed: 10
  copies failed: 0
  copies in flight: 0
  copies lost by restarts: 12 (mbufs of Rx copies freed: 3)
dmadev dma_swcopy2 (id 2):
  numa_id: 0
  owner: free
  copies submitted: 0
"""


def test_rx_mbufs_freed():
    """The mbufs of Rx copies freed by engine restarts, over every engine,
    and the engines' names."""
    assert parse.rx_mbufs_freed(DMADEV_SHOW) == 503
    assert parse.rx_mbufs_freed(DMADEV_SHOW.replace(
        "  copies lost by restarts: 12 (mbufs of Rx copies freed: 3)\n",
        "")) == 500
    assert parse.dmadevs(DMADEV_SHOW) == ["dma_swcopy0", "dma_swcopy1",
                                          "dma_swcopy2"]


def test_engines():
    """Each engine's copies in flight and whether it is out of service."""
    text = DMADEV_SHOW.replace(
        "  owner: free\n  ring size: 4096\n  copies submitted: 10\n",
        "  owner: free\n  state: out of service (a copy failed), stopped; "
        "\"ovs-appctl netdev-dpdk/dmadev-enable dma_swcopy1\" brings it "
        "back once no port has copies on it\n  ring size: 4096\n"
        "  copies submitted: 10\n").replace(
        "  copies completed: 285731\n  copies failed: 0\n"
        "  copies in flight: 0\n", "  copies completed: 285731\n"
        "  copies failed: 0\n  copies in flight: 512\n")
    assert parse.engines(text) == {
        "dma_swcopy0": {"in_flight": 512, "out_of_service": False},
        "dma_swcopy1": {"in_flight": 0, "out_of_service": True},
        "dma_swcopy2": {"in_flight": 0, "out_of_service": False}}


def test_resets():
    """The connections reset for a failed engine, over every port."""
    assert parse.resets(MODE_GET) == 0
    assert parse.resets("v0: defer\n  resets for a failed DMA engine: 2\n"
                        "v1: cpu\n  resets for a failed DMA engine: 1\n") \
        == 3


def test_abandoned_and_freed():
    """The copies abandoned of each port, and how many of their mbufs the
    switch freed (0 for a port with none)."""
    assert parse.abandoned(ABANDONED_GET) == {"v0": 1280, "v1": 0}
    assert parse.abandoned_freed(ABANDONED_GET) == {"v0": 1024, "v1": 0}


RECHECKED = """\
    4: OVS-DPDK - ping vhost-user ports                ok
    5: OVS-DPDK - ping vhost-user-client ports         FAILED (system-dpdk.at:223)
    6: OVS-DPDK - Ingress policing create delete phy port skipped (system-dpdk.at:244)

## ------------- ##
## Test results. ##
## ------------- ##

ERROR: 2 tests were run,
1 failed unexpectedly.
    5: OVS-DPDK - ping vhost-user-client ports         ok

## ------------- ##
## Test results. ##
## ------------- ##

1 test was successful.
"""


def test_rechecked():
    """RECHECK=yes output: the first run's results, and the rerun's over
    them."""
    first, final = upstream.rechecked(RECHECKED)
    assert upstream.by_status(first, "FAILED") == {
        5: "OVS-DPDK - ping vhost-user-client ports"}
    assert upstream.by_status(final, "FAILED") == {}
    assert final[5][1] == "ok" and final[4][1] == "ok"
    assert final[6][1] == "skipped"
    # Without a rerun, both are the run's own.
    once = RECHECKED[:RECHECKED.find("ERROR")]
    assert upstream.rechecked(once)[0] == upstream.rechecked(once)[1]
