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

"""Live migration of a QEMU guest whose port copies with DMA engines, with
QMP's "migrate" alone, as libvirt and Nova drive it: no step of ours.

vm-a (v0) and vm-b are QEMU guests with Linux's virtio-net on one bridge
(NORMAL: MAC learning).  While vm-b migrates, vm-a pings it twenty times a
second and fetches a file from it (a TCP stream, checked by MD5).  In one
sandbox, in turn:

1. the control: vm-b on v1, in Tx and Rx copy mode cpu, migrates to v2
   (cpu);
2. v2 goes to Tx defer and Rx dma, and vm-b, now on v2, copies with the
   engine; a migration to v3 starts slowly (QEMU's max-bandwidth) and is
   cancelled once the switch says that dirty page logging is on: v2
   copies with the engine again, and traffic stays verified;
3. the engine holding copies of v2 when the migration starts, and
   resuming by itself within a clear's deadline of the start of logging:
   vm-b migrates from v2 to v3 (defer and dma).  The copies in flight
   finish before logging begins, none is abandoned, and v3 copies with the
   engine once vm-b runs there;
4. vm-b migrates back to v2, whose socket lost vhost's datapath for its
   later connections when logging changed its features: the switch
   registers it again for the destination's connection, and v2 copies
   with the engine once vm-b runs there.

Downtime (QEMU's), pings lost and the longest time without a reply of the
control and of the async migration are printed: evidence for the closing
note, and the async migration's downtime is bounded generously by the
control's, measured in the same run (the guests run under emulation)."""

import os
import re
import time

from ovs_async.vm import VM, missing_tools
from ovs_async.wait import wait_until


ENGINE = "dma_swcopy0"
MAC_B = "02:00:00:00:01:02"
FILE_KB = 4096

# The pings of vm-a during a migration: interval (s) and count.
PING_INTERVAL = 0.05
PINGS = 400

# How long after QEMU is expected to set its log base the engine resumes:
# well within the 2 s deadline of the clear that logging begins with.
HOLD_MARGIN_S = 0.7


def connections(sb, port):
    """How often the switch connected to 'port''s socket."""
    with open(sb.vswitchd_log) as f:
        return f.read().count("(%s) connected" % sb.sock(port))


def md5(vm, path):
    return vm.run("md5sum %s" % path)[1].split()[0]


def ping_report(text):
    """(sent, received, longest run of pings without a reply) from
    busybox ping's output."""
    seqs = sorted({int(s) for s in re.findall(r"seq=(\d+)", text)})
    m = re.search(r"(\d+) packets transmitted, (\d+) packets received",
                  text)
    assert m, text[-2000:]
    sent, received = int(m.group(1)), int(m.group(2))
    gaps = [b - a - 1 for a, b in zip([-1] + seqs, seqs + [sent])]
    return sent, received, max(gaps)


def destination(sb, b, port, name, uri):
    """A QEMU waiting on 'port' for vm-b's migration to 'uri', once the
    switch connected to it."""
    before = connections(sb, port)
    dst = VM(sb, port, b.ip, name=name, mac=MAC_B, incoming=uri)
    wait_until(lambda: connections(sb, port) > before, 30,
               "the switch did not connect to %s" % name)
    # QEMU listens for the migration once its devices are up.
    wait_until(lambda: os.path.exists(uri.split(":", 1)[1]), 30,
               "%s does not listen on %s" % (name, uri))
    return dst


def start_load(a, b):
    """vm-a's pings of vm-b and its fetch of vm-b's file, in the
    background."""
    a.run("rm -f /tmp/ping.txt /tmp/got")
    a.run("ping -i %g -c %d %s > /tmp/ping.txt 2>&1 &"
          % (PING_INTERVAL, PINGS, b.addr))
    a.run("wget -q -O /tmp/got http://%s:8080/f > /tmp/wget.txt 2>&1 &"
          % b.addr)


def end_load(a, want):
    """Waits for vm-a's pings and fetch; checks the file; returns the
    pings' (sent, received, longest gap)."""
    a.run("wait", timeout=PINGS * PING_INTERVAL + 120)
    text = a.run("cat /tmp/ping.txt")[1]
    sent, received, gap = ping_report(text)
    assert received > 0 and gap < sent, (sent, received, gap)
    last = max(int(s) for s in re.findall(r"seq=(\d+)", text))
    assert last >= sent - 10, "pings stopped at %d of %d" % (last, sent)
    assert md5(a, "/tmp/got") == want, a.run("cat /tmp/wget.txt")[1]
    return sent, received, gap


def wait_migrated(b, dst, timeout=120):
    """Waits until the migration that 'b' began completes; returns QMP's
    final query-migrate, once the source QEMU ended."""
    info = wait_until(lambda: (lambda i: i if i.get("status") in (
        "completed", "failed", "cancelled") else None)(
            b.qmp("query-migrate")), timeout,
        lambda: b.qmp("query-migrate"), interval=0.1)
    assert info["status"] == "completed", info
    assert b.qmp("query-status")["status"] == "postmigrate"
    assert dst.qmp("query-status")["status"] == "running"
    b.stop()
    return info


def migrate(b, dst, uri):
    b.qmp("migrate", uri=uri)
    return wait_migrated(b, dst)


def report(what, info, pings):
    sent, received, gap = pings
    print("%s: QEMU total %d ms, downtime %d ms, %d MB RAM sent; pings "
          "every %g s: %d sent, %d lost, longest gap %d pings (%.2f s)"
          % (what, info.get("total-time", -1), info.get("downtime", -1),
             info.get("ram", {}).get("transferred", 0) >> 20,
             PING_INTERVAL, sent, sent - received, gap,
             gap * PING_INTERVAL))


# The statistics column is refreshed every 5 s.
STATS_S = 6


def port_copies(sb, a, b, port, settle=False):
    """vm-a pings vm-b; returns how the copies of 'port' (vm-b's) changed
    meanwhile: {statistic: increase} of its Tx and Rx submitted to the
    engine and copied on the CPU for want of one.  With 'settle', the
    statistics column is refreshed first, so that the increase includes
    nothing from before the call."""
    keys = ("ovs_async_tx_submitted", "ovs_async_rx_submitted",
            "ovs_async_tx_cpu_fallbacks", "ovs_async_rx_cpu_fallbacks")
    if settle:
        time.sleep(STATS_S)
    before = sb.custom_stats(port)
    a.run("ping -c 10 -i 0.1 -W 5 %s" % b.addr, timeout=60)
    time.sleep(STATS_S)
    after = sb.custom_stats(port)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def dma_traffic(sb, a, b, port):
    """vm-a reaches vm-b, and vm-b's port copied that with the engine in
    both directions."""
    d = port_copies(sb, a, b, port)
    assert d["ovs_async_tx_submitted"] > 0, d
    assert d["ovs_async_rx_submitted"] > 0, d


def test_live_migration_with_qmp_alone(sandbox_factory):
    missing = missing_tools()
    assert not missing, "missing %s (the test command installs them)" % (
        missing)
    sb = sandbox_factory(ports=4, dma=1, dma_driver="dma_swcopy",
                         topology=["actions=NORMAL"])
    # Every vhost-user message in the log: the test waits for one.
    sb.appctl("vlog/disable-rate-limit", "dpdk")
    sb.set_copy_mode("defer")
    sb.set_rx_copy_mode("dma")
    sb.set_copy_mode("cpu", "v1")
    sb.set_rx_copy_mode("cpu", "v1")
    sb.set_copy_mode("cpu", "v2")
    sb.set_rx_copy_mode("cpu", "v2")
    vms = []
    try:
        a = VM(sb, "v0", "198.18.0.1/24", name="vm-a")
        b = VM(sb, "v1", "198.18.0.2/24", name="vm-b", mac=MAC_B)
        vms += [a, b]
        a.wait_ready()
        b.wait_ready()
        b.run("dd if=/dev/urandom of=/www/f bs=1024 count=%d 2>/dev/null"
              % FILE_KB)
        b.run("httpd -p 8080 -h /www")
        a.run("ping -c 3 -W 5 %s" % b.addr, timeout=30)
        want = md5(b, "/www/f")

        # 1. The control: cpu to cpu.
        uri = "unix:" + os.path.join(sb.rundir, "migrate1.sock")
        dst = destination(sb, b, "v2", "vm-b2", uri)
        vms.append(dst)
        start_load(a, b)
        time.sleep(2)
        control = migrate(b, dst, uri)
        control_pings = end_load(a, want)
        b = dst

        # 2. vm-b, now on v2, copies with the engine; a migration begins
        # and is cancelled while the port logs.
        assert sb.migration_line("v2").startswith("possible")
        sb.set_copy_mode("defer", "v2")
        sb.set_rx_copy_mode("dma", "v2")
        dma_traffic(sb, a, b, "v2")
        assert sb.migration_line("v2").startswith(
            "possible: while QEMU logs dirty pages"), sb.migration_line("v2")
        uri = "unix:" + os.path.join(sb.rundir, "migrate2.sock")
        slow = destination(sb, b, "v3", "vm-b3-cancelled", uri)
        vms.append(slow)
        b.qmp("migrate-set-parameters", **{"max-bandwidth": 1 << 20})
        log_base = "(%s) read message VHOST_USER_SET_LOG_BASE" % sb.sock("v2")
        start = time.time()
        b.qmp("migrate", uri=uri)
        wait_until(lambda: sb.log_count(log_base), 60,
                   "QEMU did not set its log base", interval=0.05)
        # How long QEMU takes from "migrate" to its log base, here.
        to_log_base = time.time() - start
        wait_until(lambda: sb.migration_line("v2").startswith(
            "in progress: dirty page logging is on"), 60,
            lambda: "%s\n%s" % (sb.appctl("netdev-dpdk/vhost-copy-mode-get",
                                          "v2"), b.qmp("query-migrate")))
        assert sb.log_count("v2: dirty page logging for live migration") \
            == 1
        # Logging on: the port copies on the CPU, which logs.
        d = port_copies(sb, a, b, "v2", settle=True)
        assert d["ovs_async_tx_submitted"] == 0, d
        assert d["ovs_async_rx_submitted"] == 0, d
        assert d["ovs_async_tx_cpu_fallbacks"] > 0, d
        assert sb.migration_line("v2").startswith("in progress")
        b.qmp("migrate_cancel")
        wait_until(lambda: b.qmp("query-migrate")["status"] == "cancelled",
                   60, lambda: b.qmp("query-migrate"))
        wait_until(lambda: sb.log_count("v2: dirty page logging ended"), 30,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get",
                                     "v2"))
        assert b.qmp("query-status")["status"] == "running"
        slow.stop()
        b.qmp("migrate-set-parameters", **{"max-bandwidth": 128 << 20})
        assert sb.migration_line("v2").startswith("possible")
        dma_traffic(sb, a, b, "v2")
        a.run("rm -f /tmp/got; wget -q -O /tmp/got http://%s:8080/f"
              % b.addr, timeout=120)
        assert md5(a, "/tmp/got") == want

        # 3. The async migration, with copies in flight when it starts:
        # the engine holds them, and resumes by itself HOLD_MARGIN_S after
        # the time QEMU took to set its log base in step 2: within the 2 s
        # deadline of the clear that logging begins with, which must wait
        # for them.  (A release by appctl could wait for the main thread,
        # which the clear can hold up.)
        uri = "unix:" + os.path.join(sb.rundir, "migrate3.sock")
        dst = destination(sb, b, "v3", "vm-b3", uri)
        vms.append(dst)
        assert sb.copy_mode("v3") == "defer"
        start_load(a, b)
        # vm-b sends too: held, its packets are copies of v2 in flight
        # (vm-a's would wait on v0's Rx queue, before they reach v2).
        b.run("ping -i %g -c %d %s > /dev/null 2>&1 &"
              % (PING_INTERVAL, PINGS, a.addr))
        time.sleep(2)
        sb.swcopy("hold", ENGINE)
        held = wait_until(lambda: sum(sb.txq_inflight()["v2"].values())
                          + sum(sb.rxq_inflight()["v2"].values()), 10,
                          lambda: "no copy of v2 in flight with the engine "
                          "held: " + sb.appctl(
                              "netdev-dpdk/vhost-copy-mode-get", "v2"),
                          interval=0.02)
        sb.swcopy("hold", ENGINE,
                  int((to_log_base + HOLD_MARGIN_S) * 1000))
        b.qmp("migrate", uri=uri)
        info = wait_migrated(b, dst)
        async_pings = end_load(a, want)
        b = dst
        finished = [int(n) for n in re.findall(
            r"v2: dirty page logging for live migration \(the guest's QEMU "
            r"set its log base\): (\d+) copies in flight finished",
            sb.log_text())]
        assert len(finished) == 2 and finished[-1] > 0, (held, finished)
        assert not any(sb.abandoned().values()), sb.abandoned()
        assert sb.log_count("taken out of service") == 0
        dma_traffic(sb, a, b, "v3")
        assert md5(b, "/www/f") == want
        wait_until(lambda: not any(sum(q.values())
                                   for q in sb.txq_inflight().values()),
                   10, lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))

        # 4. Back to v2, whose socket's features logging changed, which
        # takes vhost's datapath away from its later connections: the
        # destination's connection has the socket registered again, and
        # vm-b copies with the engine on v2 once it runs there.
        registered = sb.log_count("v2: registering vhost-user socket")
        before = sb.log_count("(%s) new device" % sb.sock("v2"))
        uri = "unix:" + os.path.join(sb.rundir, "migrate4.sock")
        back = VM(sb, "v2", b.ip, name="vm-b2-back", mac=MAC_B,
                  incoming=uri)
        vms.append(back)
        wait_until(lambda: sb.log_count("v2: registering vhost-user socket")
                   > registered, 30, "v2's socket was not registered again")
        assert sb.log_count("gets vhost's datapath back") == 1
        # QEMU's first vhost-user connection broke during its
        # handshake; it listens for the migration once the next one is
        # up.
        wait_until(lambda: os.path.exists(uri.split(":", 1)[1]), 60,
                   "vm-b2-back does not listen on %s" % uri)
        assert sb.log_count("(%s) new device" % sb.sock("v2")) >= before + 2
        migrate(b, back, uri)
        b = back
        dma_traffic(sb, a, b, "v2")
        assert md5(b, "/www/f") == want

        print("logging began with %d copies of v2 in flight (%d seen "
              "before the migration), finished by the clear"
              % (finished[-1], held))
        report("control (cpu)", control, control_pings)
        report("defer/dma, copies held at the start", info, async_pings)
        # Under emulation; bounded by the control, generously.
        assert info["downtime"] <= 3 * control["downtime"] + 1000, (
            info, control)
    finally:
        for vm in vms:
            vm.stop()
