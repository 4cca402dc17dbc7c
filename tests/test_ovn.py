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

"""OVN in control of the fork's switch (python/ovs_async/ovn.py): its
databases, ovn-northd and ovn-controller, with the sandbox's br0 as the
chassis's integration bridge.  A logical switch has two logical ports,
bound to two QEMU VMs on dpdkvhostuserclient ports by
external_ids:iface-id.  The VMs have no address until OVN's native DHCP
gives them one: ovn-controller answers their DHCP requests itself, as a
packet-in and then a packet-out that ovs-vswitchd's main thread sends into
the guest's port, in that port's Tx copy mode.  ACLs with allow-related
put conntrack in the path (and drop what they do not allow).  Every Tx
copy mode is tested with Rx on the engine: DHCP again, ping, and a file
transfer that vm-a checks against vm-b's MD5; then the Tx mode changes
under a TCP stream while the main thread is watched."""

import re

import pytest

from ovs_async import parse
from ovs_async.modes import ASYNC_MODES, COPY_MODES
from ovs_async.ovn import OVN, central_version
from ovs_async.vm import VM, missing_tools
from ovs_async.wait import wait_until
from ovs_async.watch import Responsiveness

from test_vm import FILE_KB, fetch_verified

LS = "ls0"
# Logical port: (sandbox port, MAC (python/ovs_async/vm.py's for that
# port), address that OVN's DHCP gives it).
LSPS = {"vm-a": ("v0", "02:00:00:00:01:01", "198.18.0.11"),
        "vm-b": ("v1", "02:00:00:00:01:02", "198.18.0.12")}
CIDR = "198.18.0.0/24"
ROUTER = "198.18.0.1"
SERVER_MAC = "02:00:00:00:00:fe"
# Ports that the to-lport ACLs let into a VM: vm-b's HTTP server (8080)
# and iperf3 (5201).  Its second HTTP server (8081) gets nothing new.
ALLOWED = "icmp4 || tcp.dst == 8080 || tcp.dst == 5201"


def configure_nb(ovn):
    """The logical switch, its two ports with DHCP, and the ACLs."""
    ovn.nbctl("ls-add", LS)
    dhcp = ovn.nbctl("dhcp-options-create", CIDR).strip()
    if not dhcp:
        dhcp = ovn.nbctl("--bare", "--columns=_uuid", "find",
                         "DHCP_Options", "cidr=\"%s\"" % CIDR).strip()
    ovn.nbctl("dhcp-options-set-options", dhcp, "lease_time=3600",
              "router=" + ROUTER, "server_id=" + ROUTER,
              "server_mac=" + SERVER_MAC)
    for lsp, (_, mac, addr) in LSPS.items():
        ovn.nbctl("lsp-add", LS, lsp)
        ovn.nbctl("lsp-set-addresses", lsp, "%s %s" % (mac, addr))
        ovn.nbctl("lsp-set-port-security", lsp, "%s %s" % (mac, addr))
        ovn.nbctl("lsp-set-dhcpv4-options", lsp, dhcp)
    ovn.nbctl("acl-add", LS, "from-lport", "1002", "ip4", "allow-related")
    ovn.nbctl("acl-add", LS, "to-lport", "1002", "ip4 && (%s)" % ALLOWED,
              "allow-related")
    ovn.nbctl("acl-add", LS, "to-lport", "1001", "ip4", "drop")


def set_modes(sb, mode, rx_mode="dma"):
    """The copy modes of every port, as an OVN chassis sets them: the
    Open_vSwitch table's defaults (the ports that a cloud's agents create
    carry no options of ours)."""
    sb.vsctl("set", "Open_vSwitch", ".",
             "other_config:vhost-copy-mode=" + mode,
             "other_config:vhost-rx-copy-mode=" + rx_mode)
    wait_until(lambda: (sb.copy_mode("v0") == sb.copy_mode("v1") == mode
                        and sb.rx_copy_mode("v0") == sb.rx_copy_mode("v1")
                        == rx_mode), 30,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))


class Deployment(object):
    def __init__(self, sb, ovn, a, b):
        self.sb, self.ovn, self.a, self.b = sb, ovn, a, b


@pytest.fixture(scope="module")
def deployment(module_sandbox_factory):
    missing = missing_tools()
    assert not missing, "missing %s (the test command installs them)" % (
        missing)
    assert central_version(), "ovn-central is not installed (the test " \
        "command installs it)"
    # auto pinned to DMA, so that every mode but cpu gives the engine
    # copies.
    sb = module_sandbox_factory(
        ports=2, dma=1, dma_driver="dma_swcopy", topology="none",
        other_config={"vhost-copy-auto-threshold": "64",
                      "vhost-copy-mode": "defer",
                      "vhost-rx-copy-mode": "dma"})
    ovn = OVN(sb, log=print)
    vms = []
    try:
        ovn.start()
        configure_nb(ovn)
        for lsp, (port, _, _) in LSPS.items():
            sb.vsctl("set", "Interface", port,
                     "external_ids:iface-id=" + lsp)
        for lsp, (port, _, _) in LSPS.items():
            vms.append(VM(sb, port, "dhcp", name=lsp))
        for vm in vms:
            vm.wait_ready()
            ovn.wait_up(vm.name)
        yield Deployment(sb, ovn, *vms)
    finally:
        for vm in vms:
            vm.stop()
        ovn.stop()


def main_thread_cpu_copies(sb):
    """Packets that the main thread copied on the CPU into ports in an
    async mode (it has no engine)."""
    c = parse.main_thread_counters(sb.appctl("dpif-netdev/pmd-stats-show"))
    return c["DMA CPU fallbacks"] + c["auto mode CPU copies"]


def dhcp_all(d, mode):
    """Both VMs ask OVN's DHCP for their addresses; checks that each got
    the one its logical port has.  ovn-controller answers each request
    through a paused packet-in that it resumes (NXT_RESUME), and the
    switch's main thread executes the rest of the pipeline, sending the
    reply into the guest's port.  In an async Tx 'mode' where the sender
    copies, the main thread's counters show those packets (an offer and an
    ack per VM), which it copies on the CPU for want of an engine; in
    "ring" it only queues them for the PMD that consumes the ring."""
    before = main_thread_cpu_copies(d.sb)
    for vm in (d.a, d.b):
        addr = vm.dhcp()
        assert addr == LSPS[vm.name][2], (vm.name, addr)
    if mode in ASYNC_MODES and mode != "ring":
        sent = main_thread_cpu_copies(d.sb) - before
        assert sent >= 4, d.sb.appctl("dpif-netdev/pmd-stats-show")


@pytest.fixture(scope="module")
def served(deployment):
    """The VMs have their addresses from OVN, and vm-b serves its file
    (8080), a second server that the ACLs keep closed (8081) and iperf3."""
    d = deployment
    dhcp_all(d, "defer")
    d.b.run("dd if=/dev/urandom of=/www/f bs=1024 count=%d 2>/dev/null"
            % FILE_KB)
    for port in (8080, 8081):
        d.b.run("httpd -p %d -h /www" % port)
    d.b.run("iperf3 -s -D")
    return d


def test_ovn_dhcp_conntrack_and_acls(served):
    """The addresses came from OVN's DHCP (ovn-controller's packet-outs,
    sent by the switch's main thread into the guests' ports in defer with
    Rx dma, the chassis's defaults); traffic goes through conntrack, whose entries the switch
    shows; and what no ACL allows does not arrive."""
    d = served
    sb = d.sb
    assert d.ovn.nbctl("get", "Logical_Switch_Port", "vm-a",
                       "up").strip() == "true"
    fetch_verified(d.a, d.b)
    ct = sb.appctl("dpctl/dump-conntrack")
    assert re.search(r"tcp,orig=\(src=%s,dst=%s,sport=\d+,dport=8080"
                     % (re.escape(d.a.addr), re.escape(d.b.addr)), ct), ct
    # The control: vm-b itself reaches its second server.
    d.b.run("wget -q -O /dev/null -T 5 http://127.0.0.1:8081/f", timeout=30)
    status, out = d.a.run("wget -q -O /dev/null -T 3 http://%s:8081/f"
                          % d.b.addr, timeout=30, check=False)
    assert status != 0, "the drop ACL let vm-a reach port 8081: %s" % out


@pytest.mark.parametrize("mode", list(COPY_MODES))
def test_ovn_traffic(served, mode):
    """In each Tx copy mode, with Rx on the engine: the VMs get their
    addresses from OVN's DHCP again, ping each other, and vm-a fetches
    vm-b's file, verified.  The engine's counters show that both
    directions used it."""
    d = served
    sb = d.sb
    set_modes(sb, mode)
    sb.clear_pmd_stats()
    dhcp_all(d, mode)
    d.a.run("ping -c 3 -W 5 %s" % d.b.addr, timeout=30)
    fetch_verified(d.a, d.b)
    counters = sb.pmd_counters()
    print("OVN, Tx %s, Rx dma: DMA copies %d, Rx DMA copies %d" % (
        mode, counters["DMA copies submitted"],
        counters["DMA Rx copies completed"]))
    assert counters["DMA Rx copies completed"] > 0, counters
    if mode in ASYNC_MODES:
        assert counters["DMA copies submitted"] > 0, counters
    else:
        assert counters["DMA copies submitted"] == 0, counters


def test_ovn_mode_switch_during_stream(served):
    """A TCP stream from vm-a to vm-b while the Tx copy mode of both ports
    goes through every mode: the main thread answers throughout, the
    stream ends well, and a verified transfer follows."""
    d = served
    sb = d.sb
    set_modes(sb, "cpu")
    d.a.run("iperf3 -c %s -t 12 -f m > /tmp/stream.log 2>&1 &" % d.b.addr)
    rx = sb.port_stats()["v1"]["tx_packets"]
    wait_until(lambda: sb.port_stats()["v1"]["tx_packets"] > rx + 500, 30,
               lambda: "no stream: %s" % sb.port_stats())
    probe = Responsiveness(sb)
    probe.start()
    try:
        for mode in list(COPY_MODES)[1:] + ["cpu", "defer"]:
            set_modes(sb, mode)
    finally:
        probe.finish()
    wait_until(lambda: "receiver" in d.a.run("cat /tmp/stream.log")[1],
               60, lambda: d.a.run("cat /tmp/stream.log")[1])
    out = d.a.run("cat /tmp/stream.log")[1]
    m = re.search(r"([\d.]+) Mbits/sec.*receiver", out)
    assert m and float(m.group(1)) > 0, out
    print("OVN, modes switched under a TCP stream: %s Mbit/s, main "
          "thread's slowest answer %.2f s" % (m.group(1), probe.worst))
    fetch_verified(d.a, d.b)
