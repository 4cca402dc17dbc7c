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

"""OVN in control of a sandbox's switch, as an OVN deployment runs it:
the northbound and southbound databases (Debian's ovn-central schemas,
each in an ovsdb-server of its own), ovn-northd, and ovn-controller on
the sandbox's ovs-vswitchd, a chassis whose integration bridge is the
sandbox's br0 (external_ids:ovn-bridge, datapath type netdev) and whose
encapsulation IP is on the loopback.  ovn-controller then owns br0's
flows: it answers DHCP and ARP itself, through packet-ins and packet-outs
that ovs-vswitchd's main thread sends into the ports.

Debian ships ovn-controller in ovn-host, which depends on Debian's
openvswitch-switch, the package that tests/test_deb.py installs and purges
on its own.  So where ovn-controller is not installed, controller()
unpacks ovn-host's package of the same version as the installed
ovn-central (apt-get download, dpkg-deb -x) into CACHE once and runs it
from there; it needs only libraries that ovn-central's dependencies
bring."""

import glob
import os
import shutil
import subprocess
import tempfile

from ovs_async.sandbox import SandboxError, stop_process
from ovs_async.wait import wait_until

CACHE = os.path.join(tempfile.gettempdir(), "ovs-async-ovn")
SCHEMAS = "/usr/share/ovn"
CHASSIS = "hv1"


class OVNError(SandboxError):
    pass


def _run(argv, timeout=120, env=None, cwd=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       env=env, cwd=cwd)
    if r.returncode:
        raise OVNError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                               (r.stderr or r.stdout).strip()))
    return r.stdout


def central_version():
    """The version of the installed ovn-central, or None."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "ovn-central"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout else None


def controller():
    """The path of an ovn-controller of ovn-central's version."""
    if os.access("/usr/bin/ovn-controller", os.X_OK):
        return "/usr/bin/ovn-controller"
    version = central_version()
    if not version:
        raise OVNError("ovn-central is not installed (the test command "
                       "installs it)")
    dest = os.path.join(CACHE, version.replace(":", "_"))
    binary = os.path.join(dest, "usr", "bin", "ovn-controller")
    if os.access(binary, os.X_OK):
        return binary
    os.makedirs(CACHE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="unpack-", dir=CACHE)
    try:
        _run(["apt-get", "download", "-q", "ovn-host=" + version], cwd=tmp,
             timeout=300)
        debs = glob.glob(os.path.join(tmp, "ovn-host_*.deb"))
        if len(debs) != 1:
            raise OVNError("apt-get download ovn-host=%s gave %s"
                           % (version, debs))
        _run(["dpkg-deb", "-x", debs[0], os.path.join(tmp, "x")])
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(os.path.join(tmp, "x"), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _run([binary, "--version"])
    return binary


class OVN(object):
    """OVN's central and its chassis on sandbox 'sb' (started, br0 with
    its ports).  start() brings up the databases, ovn-northd and
    ovn-controller and waits until the chassis is registered; nbctl() and
    sbctl() run ovn-nbctl and ovn-sbctl against them; stop() ends what
    start() started."""

    def __init__(self, sb, log=None):
        self.sb = sb
        self.log = log or (lambda msg: None)
        self.dir = os.path.join(sb.dir, "ovn")
        self.procs = {}
        self.env = dict(sb.env)

    def sock(self, db):
        return os.path.join(self.dir, "ovn%s_db.sock" % db)

    def _spawn(self, name, argv):
        out = open(os.path.join(self.sb.logdir, name + ".out"), "w")
        self.procs[name] = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self.env, cwd=self.dir)
        out.close()

    def _daemon_args(self, name):
        return ["--pidfile=" + os.path.join(self.dir, name + ".pid"),
                "--log-file=" + os.path.join(self.sb.logdir, name + ".log"),
                "--unixctl=" + os.path.join(self.dir, name + ".ctl"),
                "-vconsole:off", "--no-chdir"]

    def _alive(self, what):
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise OVNError("%s exited (%d) while waiting for %s; see "
                               "%s" % (name, p.returncode, what,
                                       os.path.join(self.sb.logdir,
                                                    name + ".log")))

    def start(self):
        binary = controller()
        os.makedirs(self.dir, exist_ok=True)
        for db in ("nb", "sb"):
            path = os.path.join(self.dir, "ovn%s_db.db" % db)
            _run(["ovsdb-tool", "create", path,
                  os.path.join(SCHEMAS, "ovn-%s.ovsschema" % db)])
            self._spawn("ovsdb-server-" + db, [
                "ovsdb-server", path, "--remote=punix:" + self.sock(db)]
                + self._daemon_args("ovsdb-server-" + db))
        for db in ("nb", "sb"):
            wait_until(lambda: (self._alive("its databases")
                                or os.path.exists(self.sock(db))),
                       10, "no %s database socket" % db, error=OVNError)
        self.nbctl("--no-wait", "init")
        self.sbctl("init")
        self._spawn("ovn-northd", [
            "ovn-northd", "--ovnnb-db=unix:" + self.sock("nb"),
            "--ovnsb-db=unix:" + self.sock("sb")]
            + self._daemon_args("ovn-northd"))
        # The chassis, as an operator configures one.
        self.sb.vsctl("set", "Open_vSwitch", ".",
                      "external_ids:system-id=" + CHASSIS,
                      "external_ids:ovn-remote=unix:" + self.sock("sb"),
                      "external_ids:ovn-encap-type=geneve",
                      "external_ids:ovn-encap-ip=127.0.0.1",
                      "external_ids:ovn-bridge=br0",
                      "external_ids:ovn-bridge-datapath-type=netdev")
        self._spawn("ovn-controller", [
            binary, "unix:" + self.sb.db_sock]
            + self._daemon_args("ovn-controller"))
        wait_until(lambda: (self._alive("the chassis")
                            or CHASSIS in self.sbctl(
                                "--bare", "--columns=name", "list",
                                "Chassis")),
                   60, "ovn-controller did not register chassis %s"
                   % CHASSIS, error=OVNError)
        self.log("ovn: central, northd and chassis %s up (ovn-controller "
                 "%s)" % (CHASSIS, binary))
        return self

    def nbctl(self, *args, timeout=60):
        return _run(["ovn-nbctl", "--db=unix:" + self.sock("nb"),
                     "--timeout=%d" % timeout] + list(args),
                    timeout=timeout + 10, env=self.env)

    def sbctl(self, *args, timeout=60):
        return _run(["ovn-sbctl", "--db=unix:" + self.sock("sb"),
                     "--timeout=%d" % timeout] + list(args),
                    timeout=timeout + 10, env=self.env)

    def wait_up(self, lsp, timeout=60):
        """Waits until logical port 'lsp' is bound and up (its chassis
        installed its flows)."""
        self.nbctl("wait-until", "Logical_Switch_Port", lsp, "up=true",
                   timeout=timeout)

    def stop(self):
        for name in ("ovn-controller", "ovn-northd", "ovsdb-server-sb",
                     "ovsdb-server-nb"):
            stop_process(self.procs.pop(name, None))
