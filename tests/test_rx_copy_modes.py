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

"""End-to-end: vhost Rx copy modes (cpu, dma, auto), the copies of the
guest's packets out of its memory, in every Tx copy mode.

Every run is verified byte for byte by ovs-vhost-guest, and every mbuf must
come back to its mempool once traffic stops.  The life-cycle events with Rx
copies held are in test_lifecycle.py."""

import re
import time

import pytest

from conftest import pairwise
from ovs_async import parse, traffic
from ovs_async.modes import COPY_MODES, RX_COPY_MODES
from ovs_async.wait import wait_until


@pytest.fixture(scope="module")
def rx_sandbox(module_sandbox_factory):
    return module_sandbox_factory(ports=2, mtu=9000, dma=1,
                                  dma_driver="dma_swcopy")


def rx_counters(sb):
    return {k: v for k, v in sb.pmd_counters().items() if " Rx " in k}


# Every mode with every size, and each of them with one and two queues
# (conftest.pairwise).
@pytest.mark.parametrize("mode,size,queues",
                         pairwise(COPY_MODES, [64, 1518, 9000], [1, 2]))
def test_rx_dma_verified(rx_sandbox, mode, size, queues):
    """Rx on the engine, with every Tx copy mode: all verified, and every
    packet the switch received went through the engine."""
    sb = rx_sandbox
    sb.set_copy_mode(mode)
    sb.set_rx_copy_mode("dma")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    run = traffic.loop_run(sb, size=size, duration=1.5, queues=queues)
    traffic.check(run)
    counters = sb.pmd_counters()
    assert counters["DMA Rx copies submitted"] > 0, counters
    assert counters["DMA Rx copies completed"] > 0, counters
    assert counters["DMA Rx CPU fallbacks"] == 0, counters
    assert counters["auto mode Rx CPU copies"] == 0, counters
    if mode == "cpu":
        assert counters.get("DMA copies submitted", 0) == 0, counters
    else:
        assert counters["DMA copies submitted"] > 0, counters
    assert sb.vswitchd_alive()


def test_rx_dma_every_packet_through_the_engine(rx_sandbox):
    """Every packet the PMD received from the guests was copied by the
    engine: the Rx DMA copies completed equal the packets received."""
    sb = rx_sandbox
    sb.set_copy_mode("defer")
    sb.set_rx_copy_mode("dma")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=1518, duration=1.5))
    received = parse.rx_packets(sb.appctl("dpif-netdev/pmd-stats-show"))
    counters = rx_counters(sb)
    assert received > 0
    assert counters["DMA Rx copies completed"] == received, (received,
                                                             counters)
    assert counters["DMA Rx copies submitted"] == received, (received,
                                                             counters)


def test_rx_auto_verified(rx_sandbox):
    """'auto' pinned to DMA by the threshold takes every frame of 64 B and
    more to the engine; unpinned, it chooses per queue and stays
    verified."""
    sb = rx_sandbox
    sb.set_copy_mode("cpu")
    sb.set_rx_copy_mode("auto")
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-copy-auto-threshold=64")
    try:
        sb.appctl("dpif-netdev/pmd-stats-clear")
        traffic.check(traffic.loop_run(sb, size=512, duration=1.5))
        counters = rx_counters(sb)
        assert counters["DMA Rx copies completed"] > 0, counters
        assert counters["auto mode Rx CPU copies"] == 0, counters
        out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v0")
        assert re.search(r"^  rxq 0: dma \(switches", out, re.M), out
    finally:
        sb.vsctl("remove", "Open_vSwitch", ".", "other_config",
                 "vhost-copy-auto-threshold")
    for size in (64, 1518):
        traffic.check(traffic.loop_run(sb, size=size, duration=1.5))
    stats = sb.custom_stats("v0")
    assert "ovs_async_rx_auto_switches_to_cpu" in stats, stats


def test_rx_mode_switches_under_traffic(rx_sandbox):
    """Rx copy mode switches while the guest sends: a queue that leaves DMA
    delivers what it has in flight before it copies on the CPU, so nothing
    is lost, duplicated, corrupted or reordered."""
    sb = rx_sandbox
    sb.set_copy_mode("defer")
    sb.set_rx_copy_mode("cpu")
    baseline = sb.mempool_in_use()
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 512, "--duration", 12])
    time.sleep(1)
    for i in range(45):
        sb.appctl("netdev-dpdk/vhost-rx-copy-mode-set",
                  ("dma", "cpu", "auto")[i % 3])
        time.sleep(0.1)
    sb.set_rx_copy_mode("dma")
    res = g.wait(timeout=90)
    assert res["corrupted"] == 0 and res["duplicates"] == 0, res
    assert res["reordered"] == 0, res
    assert res["rx_pkts"] > 0
    assert sb.vswitchd_alive()
    with open(sb.vswitchd_log) as f:
        switches = f.read().count("vhost Rx copy mode changed")
    assert switches >= 20, switches
    sb.set_rx_copy_mode("cpu")
    assert sb.wait_mempools_back(baseline) == {}


def test_rx_bad_input_changes_nothing(rx_sandbox):
    sb = rx_sandbox
    sb.set_rx_copy_mode("dma")
    r = sb.appctl_result("netdev-dpdk/vhost-rx-copy-mode-set", "v0", "warp")
    assert r.returncode != 0 and "unknown vhost Rx copy mode" in r.stderr
    r = sb.appctl_result("netdev-dpdk/vhost-rx-copy-mode-set", "v0", "v3")
    assert r.returncode != 0 and "unknown vhost Rx copy mode" in r.stderr
    r = sb.appctl_result("netdev-dpdk/vhost-rx-copy-mode-set", "nosuch",
                         "cpu")
    assert r.returncode != 0 and "not a vhost-user port" in r.stderr
    assert sb.rx_copy_mode("v0") == "dma" and sb.rx_copy_mode("v1") == "dma"

    sb.vsctl("set", "Interface", "v0", "options:vhost-rx-copy-mode=warp")
    time.sleep(1)
    assert sb.rx_copy_mode("v0") == "dma"
    with open(sb.vswitchd_log) as f:
        assert 'invalid options:vhost-rx-copy-mode "warp"' in f.read()
    # A valid value in the database wins over the appctl override, and is
    # named as the source.
    sb.vsctl("set", "Interface", "v0", "options:vhost-rx-copy-mode=auto")
    wait_until(lambda: sb.rx_copy_mode("v0") == "auto", 10,
               "v0 not in Rx auto", interval=0.1)
    out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v0")
    assert "Rx: auto (from options:vhost-rx-copy-mode)" in out, out
    traffic.check(traffic.loop_run(sb, size=256, duration=1))
    sb.vsctl("remove", "Interface", "v0", "options", "vhost-rx-copy-mode")
    sb.set_rx_copy_mode("cpu")


def test_rx_modes_listed_from_the_table(sandbox):
    out = sandbox.appctl("netdev-dpdk/vhost-copy-mode-get")
    available = re.search(r"^available Rx: (.*)$", out, re.M)
    assert available, out
    assert tuple(available.group(1).split(", ")) == RX_COPY_MODES
    usage = sandbox.appctl("list-commands")
    assert "netdev-dpdk/vhost-rx-copy-mode-set [interface] %s" % "|".join(
        RX_COPY_MODES) in usage, usage


def test_rx_default_from_other_config(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy",
                         other_config={"vhost-rx-copy-mode": "dma"})
    assert sb.rx_copy_mode("v0") == "dma"
    out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v0")
    assert "Rx: dma (from other_config:vhost-rx-copy-mode)" in out, out
    # The Tx copy mode stays cpu, and the socket is registered for async
    # copies for the Rx mode alone.
    assert sb.copy_mode("v0") == "cpu"
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
    assert rx_counters(sb)["DMA Rx copies completed"] > 0
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:vhost-rx-copy-mode=cpu")
    wait_until(lambda: sb.rx_copy_mode("v0") == "cpu", 10, "v0 not in cpu",
               interval=0.1)
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=64, duration=1))
    assert rx_counters(sb).get("DMA Rx copies submitted", 0) == 0


def test_rx_no_dmadev_falls_back_to_cpu(sandbox_factory):
    """A PMD without an engine copies on the CPU, counted as fallbacks."""
    sb = sandbox_factory(ports=2, dma=0)
    sb.set_rx_copy_mode("dma")
    sb.appctl("dpif-netdev/pmd-stats-clear")
    traffic.check(traffic.loop_run(sb, size=256, duration=1))
    counters = rx_counters(sb)
    assert counters["DMA Rx copies submitted"] == 0, counters
    assert counters["DMA Rx CPU fallbacks"] > 0, counters
