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

"""What the switch says about the copy modes where an operator's
monitoring looks, in the Interface table: a bad copy mode in its 'error'
column, and each direction's copy mode, the DMA engines and the state of
dirty page logging and live migration in its 'status' column."""

from ovs_async import traffic
from ovs_async.wait import wait_until

ENGINE = "dma_swcopy0"

TX_MODES = "cpu, v3, ring, defer, auto"
RX_MODES = "cpu, dma, auto"


def bad_tx(where, value):
    return ('invalid %s:vhost-copy-mode "%s" (expected one of: %s); '
            "keeping the current vhost copy mode" % (where, value, TX_MODES))


def bad_rx(where, value):
    return ('invalid %s:vhost-rx-copy-mode "%s" (expected one of: %s); '
            "keeping the current vhost Rx copy mode"
            % (where, value, RX_MODES))


def wait_errors(sb, expected):
    """Waits until the error column of each port is what 'expected'
    ({port: message or None}) says."""
    wait_until(lambda: all(sb.iface(p, "error") == e
                           for p, e in expected.items()), 15,
               lambda: "error columns: %s, expected %s"
               % ({p: sb.iface(p, "error") for p in expected}, expected),
               interval=0.2)


def test_bad_copy_mode_in_error_column(sandbox_factory):
    """A bad options:vhost-copy-mode fills the port's error column, as a
    bad upstream option does, and changes nothing else: the port stays in
    the datapath with its OpenFlow port, keeps its copy mode and carries
    verified traffic on the engine.  A bad default in other_config shows on
    each port that takes it, after the port's own error.  Good values
    clear the column."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.vsctl("set", "Interface", "v0", "options:vhost-copy-mode=defer")
    wait_until(lambda: sb.copy_mode("v0") == "defer", 20, "v0 not in defer")
    wait_errors(sb, {"v0": None, "v1": None})
    ofport = sb.iface("v0", "ofport")

    sb.vsctl("set", "Interface", "v0", "options:vhost-copy-mode=warp")
    wait_errors(sb, {"v0": bad_tx("options", "warp"), "v1": None})
    assert sb.iface("v0", "ofport") == ofport
    assert sb.copy_mode("v0") == "defer"
    sb.clear_pmd_stats()
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
    assert sb.pmd_counters()["DMA copies submitted"] > 0

    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-rx-copy-mode=bogus")
    rx = bad_rx("Open_vSwitch other_config", "bogus")
    wait_errors(sb, {"v0": bad_tx("options", "warp") + "; " + rx, "v1": rx})
    assert sb.rx_copy_mode("v0") == "cpu" and sb.rx_copy_mode("v1") == "cpu"

    sb.vsctl("set", "Interface", "v0", "options:vhost-copy-mode=ring")
    sb.vsctl("remove", "Open_vSwitch", ".", "other_config",
             "vhost-rx-copy-mode")
    wait_errors(sb, {"v0": None, "v1": None})
    wait_until(lambda: sb.copy_mode("v0") == "ring", 20, "v0 not in ring")
    assert sb.iface("v0", "ofport") == ofport
    traffic.check(traffic.loop_run(sb, size=512, duration=1))


def test_status_column_shows_copy_modes(sandbox_factory):
    """The status column of a connected port in Tx defer (by appctl) and Rx
    dma (by its option) says so, names the engine, says that dirty page
    logging is off and how it live-migrates; a port in cpu says
    that it can migrate.  When the engine goes out of service (a failed
    copy), every port's status says that no engine copies and
    vhost-copy-mode-get says that the port copies on the CPU; when it is
    back, both say so again.  Upstream's keys stay."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("defer", "v0")
    sb.vsctl("set", "Interface", "v0", "options:vhost-rx-copy-mode=dma")
    wait_until(lambda: sb.rx_copy_mode("v0") == "dma", 20, "v0 Rx not dma")
    g = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                       ["--size", 512, "--duration", 600, "--wait-link", 60,
                        "--progress", 0, "--warmup", 0])
    traffic.wait_flowing(sb, g)

    def status(port, **want):
        st = sb.iface(port, "status")
        return st if all(st.get(k.replace("_", "-")) == v
                         for k, v in want.items()) else None

    def wait_status(port, **want):
        return wait_until(lambda: status(port, **want), 20,
                          lambda: "%s status: %s" % (port,
                                                     sb.iface(port,
                                                              "status")),
                          interval=0.5)

    try:
        st = wait_status("v0", tx_copy_mode="defer", rx_copy_mode="dma",
                         dma_engines=ENGINE, dirty_page_logging="off")
        assert st["tx-copy-mode-configured"] == "defer (from ovs-appctl)"
        assert st["rx-copy-mode-configured"] == \
            "dma (from options:vhost-rx-copy-mode)"
        assert st["live-migration"].startswith(
            "possible: while QEMU logs dirty pages"), st
        assert st["status"] == "connected" and st["mode"] == "client", st
        st = wait_status("v1", tx_copy_mode="cpu", rx_copy_mode="cpu")
        assert st["tx-copy-mode-configured"] == "cpu (from default)", st
        assert st["live-migration"].startswith("possible"), st
        assert "no engine" not in sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get", "v0")

        sb.swcopy("fail", ENGINE, 1)
        wait_until(lambda: "out of service" in sb.appctl(
            "netdev-dpdk/dmadev-show"), 20, "the engine stayed in service")
        for port in ("v0", "v1"):
            wait_status(port, dma_engines="none: copies on the CPU")
        out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "v0")
        assert out.count("no engine: copies on the CPU") == 2, out
        assert "no engine" not in sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get", "v1")

        def enabled():
            r = sb.appctl_result("netdev-dpdk/dmadev-enable", ENGINE)
            return r.returncode == 0
        wait_until(enabled, 30, lambda: sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get"), interval=0.5)
        wait_status("v0", dma_engines=ENGINE, tx_copy_mode="defer",
                    rx_copy_mode="dma")
        assert "no engine" not in sb.appctl(
            "netdev-dpdk/vhost-copy-mode-get", "v0")
    finally:
        g.stop()
