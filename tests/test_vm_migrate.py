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

"""Live migration of a QEMU guest whose port copies with DMA engines.

vm-a (v0) and vm-b (v1) are QEMU guests with Linux's virtio-net on one
bridge (NORMAL: MAC learning), every port in Tx copy mode defer and Rx
copy mode dma.  The orchestrator's workflow of README.md, step by step:

1. QEMU refuses to migrate vm-b while v1 is registered for async copies
   (no dirty page logging): checked, with QEMU's own words;
2. netdev-dpdk/vhost-migrate-prepare v1, then wait for "live migration:
   ready";
   a migration that fails (nobody listens where it goes) leaves vm-b
   running on v1, and vhost-migrate-done puts v1 back in its copy modes
   (checked, then prepared again);
3. a destination QEMU for vm-b waits on v2 (defer, no preparation), and
   vm-b migrates to it through a unix socket while vm-a pings it twenty
   times a second;
4. the source QEMU ends, and its port is put back in its copy modes
   (vhost-migrate-done).

Then vm-b answers from the destination, a file it serves is fetched and
compared byte for byte (MD5) through v2's DMA copies, and nothing is in
flight or abandoned.  The pings lost and the longest time without a reply
are printed (evidence for the closing note, not assertions: the guests run
under emulation)."""

import os
import re
import time

import pytest

from ovs_async.vm import VM, VMError, missing_tools
from ovs_async.wait import wait_until


MAC_B = "02:00:00:00:01:02"
FILE_KB = 2048

# The pings of vm-a during the migration: interval (s) and count.
PING_INTERVAL = 0.05
PINGS = 400


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


def prepare(sb):
    """The orchestrator's step 2 for vm-b's port."""
    sb.appctl("netdev-dpdk/vhost-migrate-prepare", "v1")
    wait_until(lambda: sb.migration_line("v1").startswith("ready"), 60,
               lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
               interval=0.2)


def test_live_migration_of_async_port(sandbox_factory):
    missing = missing_tools()
    assert not missing, "missing %s (the test command installs them)" % (
        missing)
    sb = sandbox_factory(ports=3, dma=1, dma_driver="dma_swcopy",
                         topology=["actions=NORMAL"])
    sb.set_copy_mode("defer")
    sb.set_rx_copy_mode("dma")
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

        # 1. The async port offers no dirty page logging: QEMU refuses.
        assert sb.migration_line("v1").startswith("blocked")
        uri = "unix:" + os.path.join(sb.rundir, "migrate.sock")
        with pytest.raises(VMError, match="VHOST_F_LOG_ALL"):
            b.migrate(uri)
        assert b.qmp("query-status")["status"] == "running"

        # 2. Prepared: the guest reconnects without async copies.
        prepare(sb)
        a.run("ping -c 3 -W 5 %s" % b.addr, timeout=30)
        # A migration that fails: the guest stays, and so does the port
        # once its copy modes are back.
        with pytest.raises(VMError, match="migration failed|Failed to conn"):
            b.migrate("unix:" + os.path.join(sb.rundir, "nobody.sock"))
        assert b.qmp("query-status")["status"] == "running"
        sb.appctl("netdev-dpdk/vhost-migrate-done", "v1")
        wait_until(lambda: sb.migration_line("v1").startswith("blocked")
                   and sb.copy_mode("v1") == "defer"
                   and sb.rx_copy_mode("v1") == "dma", 60,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"),
                   interval=0.2)
        sb.clear_pmd_stats()
        a.run("ping -c 3 -W 5 %s" % b.addr, timeout=30)
        assert sb.pmd_counters()["DMA Rx copies submitted"] > 0
        prepare(sb)

        # 3. The destination, on a port in defer, and the migration
        # under pings.
        before = connections(sb, "v2")
        dst = VM(sb, "v2", "198.18.0.2/24", name="vm-b-dst", mac=MAC_B,
                 incoming=uri)
        vms.append(dst)
        wait_until(lambda: connections(sb, "v2") > before, 30,
                   "the switch did not connect to the destination")
        assert sb.copy_mode("v2") == "defer"
        a.run("ping -i %g -c %d %s > /tmp/ping.txt 2>&1 &"
              % (PING_INTERVAL, PINGS, b.addr))
        time.sleep(2)
        info = b.migrate(uri)
        assert b.qmp("query-status")["status"] == "postmigrate"
        assert dst.qmp("query-status")["status"] == "running"

        # 4. The source ends; its port gets its copy modes back.
        b.stop()
        sb.appctl("netdev-dpdk/vhost-migrate-done", "v1")
        wait_until(lambda: sb.copy_mode("v1") == "defer", 30,
                   lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))

        # The guest answers on the destination's console, its pings come
        # back from v2, and its file crosses v2's DMA copies intact.
        assert dst.run("cat /proc/uptime")[0] == 0
        a.run("wait", timeout=PINGS * PING_INTERVAL + 60)
        text = a.run("cat /tmp/ping.txt")[1]
        sent, received, gap = ping_report(text)
        assert received > 0 and gap < sent, (sent, received, gap)
        last = max(int(s) for s in re.findall(r"seq=(\d+)", text))
        assert last >= sent - 10, "pings stopped at %d of %d" % (last, sent)
        sb.clear_pmd_stats()
        a.run("rm -f /tmp/got; wget -q -O /tmp/got http://%s:8080/f"
              % b.addr, timeout=120)
        assert md5(a, "/tmp/got") == want
        assert md5(dst, "/www/f") == want
        counters = sb.pmd_counters()
        assert counters["DMA copies submitted"] > 0, counters
        assert counters["DMA Rx copies submitted"] > 0, counters
        assert counters["DMA CPU fallbacks"] == 0, counters
        out = sb.appctl("dpctl/show", "-s")
        stats = sb.port_stats()
        assert stats.get("v2", {}).get("tx_packets", 0) > 0, out

        wait_until(lambda: not any(sum(q.values())
                                   for q in sb.txq_inflight().values()),
                   10, lambda: sb.appctl("netdev-dpdk/vhost-copy-mode-get"))
        assert not any(sb.abandoned().values()), sb.abandoned()
        print("live migration: QEMU total %d ms, downtime %d ms, %d MB RAM "
              "sent; pings every %g s: %d sent, %d lost, longest gap %d "
              "pings (%.2f s)"
              % (info.get("total-time", -1), info.get("downtime", -1),
                 info.get("ram", {}).get("transferred", 0) >> 20,
                 PING_INTERVAL, sent, sent - received, gap,
                 gap * PING_INTERVAL))
    finally:
        for vm in vms:
            vm.stop()
