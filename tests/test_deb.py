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

"""The fork's Debian package ("make deb", utilities/ovs-async-deb), its
whole life on this machine: built, installed with apt next to Debian's
stock openvswitch-switch, selected as the ovs-vswitchd alternative,
started with Debian's own ovs-ctl, a vhost-user port in defer mode on the
dma_swcopy engine, stopped, removed, and the stock binary selected again.

It changes the machine (it is for CI's fresh machines and developers who
run the suite as root): it needs one without openvswitch-switch, installs
it and purges at the end what it installed.  Debian's database directories
(/etc/openvswitch, and /var/lib/openvswitch that holds conf.db, which a
purge leaves behind) are set aside for the test and put back after it,
so that the test starts from an empty database.  Package scripts must not start
services meanwhile, so a policy-rc.d forbids it for the test's duration.
Where the kernel has loadable modules but no openvswitch module (the
userspace datapath needs none), ovs-ctl runs in a mount namespace where
/sys/module/openvswitch exists, since it would otherwise refuse to start
ovs-vswitchd."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from ovs_async.sandbox import dpdk_pmd_dir, fork_version, upstream_version
from ovs_async.wait import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEB = os.path.join(ROOT, "utilities", "ovs-async-deb")
PACKAGE = "openvswitch-switch-async"
FORK_VSWITCHD = "/usr/lib/openvswitch-switch-async/ovs-vswitchd-async"
STOCK_VSWITCHD = "/usr/lib/openvswitch-switch/ovs-vswitchd"
OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
POLICY = "/usr/sbin/policy-rc.d"
DBDIRS = ["/etc/openvswitch", "/var/lib/openvswitch"]
SOCK = "/tmp/ovs-async-deb-test.sock"
LOG = "/var/log/openvswitch/ovs-vswitchd.log"


def log_tail(lines=40):
    """The end of the started switch's log, for a failure's message."""
    try:
        with open(LOG, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(no %s: %s)" % (LOG, e)


def sh(cmd, check=True, timeout=600):
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                       timeout=timeout,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if check and p.returncode:
        raise AssertionError("%s: rc %d\n%s\n%s" % (cmd, p.returncode,
                                                    p.stdout[-3000:],
                                                    p.stderr[-3000:]))
    return p.stdout


def installed():
    out = sh("dpkg-query -W -f='${Package} ${Status}\\n'")
    return {l.split()[0] for l in out.splitlines()
            if l.endswith("install ok installed")}


def alternative():
    out = sh("update-alternatives --query ovs-vswitchd", check=False)
    m = re.search(r"^Value: (\S+)", out, re.M)
    return m.group(1) if m else None


def ovs_ctl(args, net=False):
    """Debian's ovs-ctl; in a namespace that shows an openvswitch module
    where the kernel has modules but not that one.  With 'net', in a
    network namespace of its own, which the daemons it starts keep: the
    userspace datapath's tap devices (ovs-netdev, one per bridge) must not
    meet those of the machine's own Open vSwitch, which an OVS-DPDK host
    runs."""
    cmd = "%s %s" % (OVS_CTL, args)
    if (os.path.exists("/proc/modules")
            and not os.path.exists("/sys/module/openvswitch")):
        cmd = ("unshare --mount --propagation private sh -c "
               "'mount -t tmpfs none /sys/module && "
               "mkdir /sys/module/openvswitch && exec %s'" % cmd)
    if net:
        cmd = "unshare --net -- " + cmd
    return sh(cmd)


@pytest.fixture
def machine():
    if os.geteuid() != 0:
        pytest.fail("the package test runs as root (CI does)")
    before = installed()
    for pkg in (PACKAGE, "openvswitch-switch"):
        if pkg in before:
            pytest.fail("the package test needs a machine without %s (it "
                        "installs and purges it)" % pkg)
    saved = {}
    for d in DBDIRS:
        if os.path.exists(d):
            saved[d] = tempfile.mkdtemp(prefix="ovs-async-deb-db-")
            shutil.move(d, saved[d])
    with open(POLICY, "w") as f:
        f.write("#!/bin/sh\n# tests/test_deb.py: no service starts.\n"
                "exit 101\n")
    os.chmod(POLICY, 0o755)
    try:
        yield before
    finally:
        sh("%s stop" % OVS_CTL, check=False)
        added = sorted(installed() - before)
        if added:
            sh("apt-get purge -y -q %s" % " ".join(added), check=False)
        os.unlink(POLICY)
        if os.path.exists(SOCK):
            os.unlink(SOCK)
        for d in DBDIRS:
            shutil.rmtree(d, ignore_errors=True)
            if d in saved:
                shutil.move(os.path.join(saved[d], os.path.basename(d)), d)
                os.rmdir(saved[d])


def test_deb_install_select_run_remove(machine, tmp_path):
    # 1. Build the package.
    out = sh("%s %s --out %s" % (sys.executable, DEB, tmp_path))
    deb = out.strip().splitlines()[-1]
    assert deb.endswith("_amd64.deb") and os.path.exists(deb), out
    control = sh("dpkg-deb -f %s" % deb)
    # DPDK's libraries by its ABI: 23 for 22.11, 25 for 24.11.
    abi = dpdk_pmd_dir()[1].split(".")[0]
    # Its version names the commit, and it takes any Debian revision of
    # the same upstream Open vSwitch (security updates), not the next one.
    assert sh("dpkg-deb -f %s Version" % deb).strip() == fork_version() + "-1"
    uv = upstream_version()
    for dep in ["openvswitch-switch (>= %s), openvswitch-switch (<< %s.1~)"
                % (uv, uv)] + [
            "librte-%s%s" % (lib, abi)
            for lib in ("vhost", "dmadev", "dma-idxd", "dma-ioat")]:
        assert dep in control, control
    files = sh("dpkg-deb -c %s" % deb)
    for path in (FORK_VSWITCHD, "/usr/bin/ovs-vhost-guest",
                 "/usr/share/man/man8/ovs-vswitchd-async.8.gz",
                 "/usr/share/man/man5/ovs-vswitchd-async.conf.db.5.gz",
                 "/usr/share/doc/openvswitch-switch-async/dsa.md"):
        assert "." + path in files, files

    # 2. Stock openvswitch-switch, then the package, with apt (whose
    # package lists a fresh root, or machine, may not have yet).
    if "Candidate: (none)" in sh("apt-cache policy openvswitch-switch") \
            or not sh("apt-cache policy openvswitch-switch").strip():
        sh("apt-get update -q")
    sh("apt-get install -y -q --no-install-recommends openvswitch-switch")
    assert alternative() == STOCK_VSWITCHD
    assert "+async" not in sh("ovs-vswitchd --version")
    sh("apt-get install -y -q --no-install-recommends %s" % deb)
    assert PACKAGE in installed()
    # The installed pages point to each other, not to the stock pages,
    # which lack the fork's commands and keys.
    page8 = sh("zcat /usr/share/man/man8/ovs-vswitchd-async.8.gz")
    assert r"ovs\-vswitchd\-async.conf.db\fR(5)" in page8
    assert r"ovs\-vswitchd.conf.db\fR(5)" not in page8
    assert "vhost-copy-mode-set" in page8
    page5 = sh("zcat /usr/share/man/man5/ovs-vswitchd-async.conf.db.5.gz")
    assert "ovs-vswitchd-async(8)" in page5
    assert "ovs-vswitchd(8)" not in page5
    assert "pmd-defer-recheck-max" in page5
    # Installed below the stock binary's priority: nothing changes yet.
    assert alternative() == STOCK_VSWITCHD

    # 3. Select the fork.
    sh("update-alternatives --set ovs-vswitchd %s" % FORK_VSWITCHD)
    assert alternative() == FORK_VSWITCHD
    assert fork_version() in sh("ovs-vswitchd --version")

    # 4. Start with Debian's own ovs-ctl: the database first, DPDK
    # configured, then ovs-vswitchd.
    ovs_ctl("--no-ovs-vswitchd --system-id=random --no-record-hostname "
            "start")
    extra = ("--no-pci --no-huge --legacy-mem -m 1024 --iova-mode=va "
             "--file-prefix=ovs-async-deb --vdev=dma_swcopy0,lcore=0")
    sh("ovs-vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true "
       "other_config:dpdk-extra='%s' other_config:pmd-cpu-mask=0x2" % extra)
    ovs_ctl("--no-ovsdb-server --no-mlockall --system-id=random "
            "--no-record-hostname start", net=True)

    # 5. The running switch is the fork.
    assert fork_version() in sh("ovs-appctl version")
    assert sh("ovs-vsctl get Open_vSwitch . dpdk_initialized").strip() \
        == "true"

    # 6. A vhost-user port in defer mode, on the dma_swcopy engine.
    sh("ovs-vsctl add-br br0 -- set bridge br0 datapath_type=netdev")
    sh("ovs-vsctl add-port br0 v0 -- set Interface v0 "
       "type=dpdkvhostuserclient options:vhost-server-path=%s "
       "options:vhost-copy-mode=defer" % SOCK)
    wait_until(lambda: re.search(r"^v0: defer", sh(
        "ovs-appctl netdev-dpdk/vhost-copy-mode-get"), re.M), 30,
        lambda: "%s\n%s" % (sh("ovs-appctl netdev-dpdk/vhost-copy-mode-get"),
                            log_tail()))
    dmadevs = sh("ovs-appctl netdev-dpdk/dmadev-show")
    assert re.search(r"dmadev dma_swcopy0 .*\n.*\n.*pmd core 1$", dmadevs,
                     re.M), dmadevs

    # 7. Stop.
    ovs_ctl("stop")
    wait_until(lambda: not os.path.exists("/var/run/openvswitch/"
                                          "ovs-vswitchd.pid"), 10,
               "ovs-vswitchd's pidfile is still there")
    r = subprocess.run(["ovs-appctl", "version"], capture_output=True)
    assert r.returncode != 0, r

    # 8. Remove: the stock binary is selected again.
    sh("apt-get remove -y -q %s" % PACKAGE)
    assert PACKAGE not in installed()
    assert alternative() == STOCK_VSWITCHD
    assert "+async" not in sh("ovs-vswitchd --version")

    # 9. A DPDK host: openvswitch-switch-dpdk's binary is selected when the
    # package is installed, then the fork's.  Removing the package selects
    # the -dpdk binary again, not the stock one of higher priority, whose
    # datapath has no DPDK ports.
    sh("apt-get install -y -q --no-install-recommends "
       "openvswitch-switch-dpdk")
    dpdk = [p for p in sh("update-alternatives --list ovs-vswitchd").split()
            if p.endswith("-dpdk")]
    assert len(dpdk) == 1, dpdk
    sh("update-alternatives --set ovs-vswitchd %s" % dpdk[0])
    sh("apt-get install -y -q --no-install-recommends %s" % deb)
    assert alternative() == dpdk[0]
    sh("update-alternatives --set ovs-vswitchd %s" % FORK_VSWITCHD)
    assert alternative() == FORK_VSWITCHD
    sh("apt-get remove -y -q %s" % PACKAGE)
    assert PACKAGE not in installed()
    assert alternative() == dpdk[0]
    assert not os.path.exists("/var/lib/%s" % PACKAGE)
