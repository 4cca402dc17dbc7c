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

"""A private Open vSwitch (DPDK, netdev datapath) with vhost-user guests.

The sandbox runs its own ovsdb-server and ovs-vswitchd from the fork's
build tree, in a private run/log/db directory, with N dpdkvhostuserclient
ports, and starts ovs-vhost-guest processes facing those ports.  It is
what the demo, the tests and the benchmark use.

It only ever signals processes it started itself (by their pid), and
removes its sockets and the DPDK runtime directories of the file prefixes
it chose, also after a failure, Ctrl-C or SIGTERM.
"""

import atexit
import json
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from ovs_async import parse
from ovs_async.wait import wait_until


# The fork's source tree (this module is python/ovs_async/sandbox.py).
SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class SandboxError(Exception):
    """A sandbox could not be set up or a command in it failed."""


def build_dir():
    """The upstream build tree of the fork (OVS_ASYNC_BUILD or _build/)."""
    d = os.environ.get("OVS_ASYNC_BUILD")
    if not d:
        d = os.path.join(SRCDIR, "_build", "openvswitch")
    if not os.path.exists(os.path.join(d, "vswitchd", "ovs-vswitchd")):
        raise SandboxError("%s has no built ovs-vswitchd: run "
                           "'./ovs-fork build' first" % d)
    return d


def upstream_version(build=None):
    """The version of upstream Open vSwitch in build tree 'build' (the
    fork's by default): "3.5.0"."""
    with open(os.path.join(build or build_dir(), "configure.ac")) as f:
        m = re.search(r"^AC_INIT\(openvswitch, *([0-9.]+)", f.read(), re.M)
    if not m:
        raise SandboxError("no upstream version in %s/configure.ac"
                           % (build or build_dir()))
    return m.group(1)


def fork_define(name):
    """The string that lib/ovs-fork.h, the fork's identity, defines as
    'name'."""
    with open(os.path.join(SRCDIR, "lib", "ovs-fork.h")) as f:
        m = re.search(r'^#define %s "(.+)"$' % name, f.read(), re.M)
    if not m:
        raise SandboxError("lib/ovs-fork.h defines no %s" % name)
    return m.group(1)


def fork_build_id():
    """What the build appends to the version for HEAD's commit
    (build-aux/ovs-fork-build-id): ".N.gSHA"."""
    script = os.path.join(SRCDIR, "build-aux", "ovs-fork-build-id")
    p = subprocess.run([script], capture_output=True, text=True)
    if p.returncode:
        raise SandboxError("ovs-fork-build-id: " + p.stderr.strip())
    return p.stdout.strip()


def fork_version(build=None):
    """The fork's version for HEAD's commit: upstream's with the suffix of
    lib/ovs-fork.h and the commit, as every program of a build of HEAD
    says it ("3.5.0+async.412.g42942ea1b2")."""
    return (upstream_version(build) + fork_define("OVS_FORK_VERSION_SUFFIX")
            + fork_build_id())


def dpdk_pmd_dir():
    """(directory, ABI) of the installed DPDK's drivers, which EAL loads
    as plugins: ("/usr/lib/x86_64-linux-gnu/dpdk/pmds-25.0", "25.0") for
    Debian 13's DPDK 24.11."""
    dirs = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/dpdk/pmds-*"))
    if not dirs:
        raise SandboxError("no DPDK drivers in /usr/lib/x86_64-linux-gnu/"
                           "dpdk: apt-get install dpdk")
    return dirs[-1], dirs[-1].rsplit("pmds-", 1)[1]


def dpdk_driver(name):
    """The shared object of DPDK driver 'name' ("net_virtio")."""
    pmd_dir, abi = dpdk_pmd_dir()
    return os.path.join(pmd_dir, "librte_%s.so.%s" % (name, abi))


def dpdk_drivers():
    """Folders of DPDK drivers for EAL to load ("-d"), from
    OVS_ASYNC_DPDK_DRIVERS: the bench bundle's, on a machine that may have
    no DPDK installed."""
    d = os.environ.get("OVS_ASYNC_DPDK_DRIVERS")
    return [d] if d else []


def _meminfo():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0])
    return info


def hugetlbfs_mounted():
    with open("/proc/mounts") as f:
        return any(line.split()[2] == "hugetlbfs" for line in f)


def ensure_hugepages(mbytes=4096):
    """Makes 'mbytes' of free 2 MB hugepages available, as root.

    Returns None on success, else a sentence that says why not."""
    info = _meminfo()
    page_kb = info.get("Hugepagesize", 2048)
    want = mbytes * 1024 // page_kb
    free = info.get("HugePages_Free", 0)
    if free < want:
        total = info.get("HugePages_Total", 0) + want - free
        try:
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write("%d\n" % total)
        except OSError as e:
            return "cannot allocate hugepages (%s)" % e.strerror
        free = _meminfo().get("HugePages_Free", 0)
        if free < want:
            return ("only %d of %d hugepages could be allocated"
                    % (free, want))
    if not hugetlbfs_mounted():
        os.makedirs("/dev/hugepages", exist_ok=True)
        r = subprocess.run(["mount", "-t", "hugetlbfs", "nodev",
                            "/dev/hugepages"], capture_output=True,
                           text=True)
        if r.returncode:
            return "cannot mount hugetlbfs: %s" % r.stderr.strip()
    return None


def stop_process(p, timeout=20):
    """Ends process 'p' (a Popen) if it still runs: SIGTERM, then SIGKILL
    if it has not exited within 'timeout' seconds."""
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Guest(object):
    """One ovs-vhost-guest process (it may play several guest ports)."""

    def __init__(self, sandbox, name, argv, log_path):
        self.sandbox = sandbox
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.json_path = log_path + ".json"
        self._out = open(self.json_path, "w")
        self._err = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self._out,
                                     stderr=self._err,
                                     stdin=subprocess.DEVNULL)
        self.result = None
        self.returncode = None

    def running(self):
        return self.proc.poll() is None

    def log_has(self, text):
        return self.log_count(text) > 0

    def log_count(self, text):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read().count(text)
        except OSError:
            return 0

    def grow_memory(self):
        """SIGUSR2: the guest takes 64 MB more memory, and each of its ports
        sends the switch a new memory table (SET_MEM_TABLE) on its live
        device.  Waits until vhost has answered the guest and the switch
        has logged every port's message."""
        sb = self.sandbox
        grown = self.log_count("memory grown by 64 MB")
        before = sb.log_count("read message VHOST_USER_SET_MEM_TABLE")
        self.proc.send_signal(signal.SIGUSR2)
        wait_until(lambda: self.log_count("memory grown by 64 MB") > grown,
                   60, lambda: self.log_tail(), error=SandboxError)
        # (The switch logs the last port's message a moment later.)
        wait_until(lambda: sb.log_count(
            "read message VHOST_USER_SET_MEM_TABLE")
            >= before + len(self.ports), 10,
            "the switch did not read every port's new memory table",
            error=SandboxError)

    def result_ready(self):
        """True once the guest printed its final JSON line."""
        try:
            with open(self.json_path) as f:
                return f.read().endswith("}\n")
        except OSError:
            return False

    def release(self):
        """Lets a guest started with --hold go on (SIGUSR1)."""
        if self.running():
            self.proc.send_signal(signal.SIGUSR1)

    def wait(self, timeout=None):
        """Waits for the guest; returns its final JSON (a dict)."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise SandboxError("guest %s did not finish within %s s; "
                               "see %s" % (self.name, timeout,
                                           self.log_path))
        self._out.close()
        self._err.close()
        with open(self.json_path) as f:
            text = f.read().strip()
        try:
            self.result = json.loads(text.splitlines()[-1]) if text else None
        except ValueError:
            self.result = None
        if self.result is None:
            raise SandboxError("guest %s exited %d without a result; its "
                               "log %s ends with:\n%s"
                               % (self.name, self.returncode, self.log_path,
                                  self.log_tail()))
        return self.result

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops the guest if it still runs (by its pid only)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode


class Sandbox(object):
    """A private ovsdb-server + ovs-vswitchd with vhost-user client ports.

    ports: number of dpdkvhostuserclient ports (v0, v1, ...), OpenFlow
    port numbers 1, 2, ...  pmd_cpus: CPUs for PMD threads.  dma: number
    of engine vdevs to create, of driver dma_driver (dma_skeleton or
    dma_swcopy); dma_driver "pci:BDF[+BDF...]" names hardware dmadevs,
    which EAL then probes, instead.  huge: "auto" (hugepages when they can
    be allocated, else --no-huge), True or False.  topology: "loop"
    (v0<->v1, v2<->v3, ...), "none" or a list of OpenFlow flows.
    vswitchd_args: further options of ovs-vswitchd.  testing_aids: start
    ovs-vswitchd with --enable-dummy (the default), which registers the
    fork's testing aids and time/warp."""

    def __init__(self, ports=2, pmd_cpus=(1,), dma=0, huge="auto",
                 topology="loop", mtu=None, other_config=None,
                 guest_cpu=0, name=None, log=None, keep=False,
                 dma_driver="dma_skeleton", dma_cpus=None,
                 vswitchd_args=(), testing_aids=True):
        if not isinstance(ports, int) or not 1 <= ports <= 64:
            raise SandboxError("ports must be 1 to 64, not %r" % (ports,))
        ncpu = os.cpu_count() or 1
        for cpu in list(pmd_cpus) + [guest_cpu]:
            if not isinstance(cpu, int) or not 0 <= cpu < ncpu:
                raise SandboxError("CPU %r does not exist on this machine "
                                   "(CPUs 0-%d)" % (cpu, ncpu - 1))
        if not isinstance(dma, int) or not 0 <= dma <= 16:
            raise SandboxError("dma must be 0 to 16, not %r" % (dma,))
        self.dma_pci = []
        if dma_driver.startswith("pci:"):
            # Hardware dmadevs the operator names (DSA, IOAT, ...): EAL
            # probes exactly these PCI devices.
            self.dma_pci = dma_driver[4:].split("+")
            for bdf in self.dma_pci:
                if not re.match(r"^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:"
                                r"[0-9a-fA-F]{2}\.[0-7]$", bdf):
                    raise SandboxError("%r is not a PCI address "
                                       "(DDDD:BB:DD.F)" % bdf)
        elif dma_driver not in ("dma_skeleton", "dma_swcopy"):
            raise SandboxError("unknown DMA engine %r (dma_skeleton, "
                               "dma_swcopy or pci:BDF[+BDF...])"
                               % (dma_driver,))
        if huge not in ("auto", True, False):
            raise SandboxError("huge must be auto, True or False")
        if (topology not in ("loop", "none")
                and not isinstance(topology, (list, tuple))):
            raise SandboxError("unknown topology %r (loop, none or a list "
                               "of flows)" % (topology,))
        if topology == "loop" and ports % 2:
            raise SandboxError("the loop topology needs an even number of "
                               "ports, not %d" % ports)
        self.n_ports = ports
        self.pmd_cpus = list(pmd_cpus)
        self.n_dma = dma
        self.dma_driver = dma_driver
        # Engine threads share the guests' CPU by default, away from PMDs.
        self.dma_cpus = list(dma_cpus) if dma_cpus else [guest_cpu]
        self.huge_req = huge
        self.topology = topology
        self.mtu = mtu
        self.other_config = dict(other_config or {})
        self.guest_cpu = guest_cpu
        # --enable-dummy registers the fork's testing aids (dma-swcopy/hold,
        # netdev-dpdk/vhost-txq-hold, ...) and time/warp: a sandbox is a
        # test bed.  testing_aids=False starts a switch as production does.
        self.vswitchd_args = list(vswitchd_args)
        if testing_aids and "--enable-dummy" not in self.vswitchd_args:
            self.vswitchd_args.append("--enable-dummy")
        self.log = log or (lambda msg: None)
        self.keep = keep
        self.name = name or "ovsa%d" % os.getpid()
        self.build = build_dir()
        self.huge = None
        self.dir = None
        self.procs = {}
        self.guests = []
        self.prefixes = []
        self.ports = []
        self._guest_seq = 0

    # ---- life cycle -------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        """Prepares the sandbox (if not yet) and launches the switch."""
        if self.dir is None:
            self.prepare()
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def prepare(self):
        """Chooses hugepages or --no-huge and makes the private directory.

        After this, socket paths are known and guests can start before the
        switch does."""
        atexit.register(self.stop)
        self._install_signal_handlers()
        try:
            self._prepare()
        except BaseException:
            self.stop()
            raise
        return self

    def _install_signal_handlers(self):
        def handler(signum, frame):
            raise SystemExit(128 + signum)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    signal.signal(sig, handler)
            except ValueError:
                pass            # Not the main thread.

    def _prepare(self):
        self.dir = tempfile.mkdtemp(prefix="%s." % self.name)
        for sub in ("run", "log", "db"):
            os.makedirs(os.path.join(self.dir, sub))
        self.env = dict(os.environ)
        self.env.update({
            "OVS_RUNDIR": self.rundir, "OVS_LOGDIR": self.logdir,
            "OVS_DBDIR": os.path.join(self.dir, "db"),
            "OVS_SYSCONFDIR": self.dir, "OVS_PKGDATADIR": self.build,
            "OVS_BINDIR": os.path.join(self.build, "utilities")})

        if self.huge_req in ("auto", True):
            why = ensure_hugepages()
            if why and self.huge_req is True:
                raise SandboxError("hugepages required but " + why)
            self.huge = why is None
            self.log("sandbox: %s" % ("using 2 MB hugepages" if self.huge
                                      else "no hugepages (%s): running "
                                      "with --no-huge" % why))
        else:
            self.huge = False
            self.log("sandbox: running with --no-huge")

    def _launch(self):
        db = os.path.join(self.dir, "db", "conf.db")
        self._run([self._bin("ovsdb/ovsdb-tool"), "create", db,
                   os.path.join(self.build, "vswitchd/vswitch.ovsschema")])
        self._spawn("ovsdb-server", [
            self._bin("ovsdb/ovsdb-server"), db,
            "--remote=punix:" + self.db_sock,
            "--pidfile=" + os.path.join(self.rundir, "ovsdb-server.pid"),
            "--log-file=" + os.path.join(self.logdir, "ovsdb-server.log"),
            "-vconsole:off", "--no-chdir"])
        self._wait_for(lambda: os.path.exists(self.db_sock), 10,
                       "ovsdb-server did not create its socket")
        self.vsctl("--no-wait", "init")

        prefix = self._prefix("ovs")
        extra = ["--iova-mode=va", "--file-prefix=" + prefix]
        if self.dma_pci:
            extra += ["-a " + bdf for bdf in self.dma_pci]
        else:
            extra.insert(0, "--no-pci")
        if not self.huge:
            extra += ["--no-huge", "--legacy-mem", "-m", "2048"]
        extra += ["-d " + d for d in dpdk_drivers()]
        for i in range(0 if self.dma_pci else self.n_dma):
            extra.append("--vdev=%s%d,lcore=%d" % (
                self.dma_driver, i, self.dma_cpus[i % len(self.dma_cpus)]))
        oc = {"dpdk-init": "true", "dpdk-extra": " ".join(extra),
              "pmd-cpu-mask": "0x%x" % sum(1 << c for c in self.pmd_cpus)}
        if self.vswitchd_args.count("--enable-dummy"):
            # Tests hold engines on purpose for seconds: the watchdog of
            # engines that complete nothing (default 1 s) waits a minute,
            # unless a test asks otherwise.
            oc["dma-stall-timeout"] = "60000"
        oc.update(self.other_config)
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                   *["other_config:%s=%s" % (k, json.dumps(v))
                     for k, v in oc.items()])

        # A network namespace of its own keeps the datapath's tap devices
        # (ovs-netdev, br0) apart from the host's and other sandboxes'.
        self._spawn("ovs-vswitchd", [
            "unshare", "--net", "--",
            self._bin("vswitchd/ovs-vswitchd"), "unix:" + self.db_sock,
            "--pidfile=" + os.path.join(self.rundir, "ovs-vswitchd.pid"),
            "--log-file=" + os.path.join(self.logdir, "ovs-vswitchd.log"),
            "-vconsole:off", "--no-chdir"] + self.vswitchd_args)
        # The bridge and its ports in one transaction: the switch applies
        # them in one reconfiguration, not one per port.
        args = ["--timeout=60", "add-br", "br0", "--", "set", "bridge",
                "br0", "datapath_type=netdev"]
        names = ["v%d" % i for i in range(self.n_ports)]
        for i, name in enumerate(names):
            args += ["--"] + self._port_args(name, ofport=i + 1)
        self.vsctl(*args)
        dpdk = self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized")
        if dpdk.strip() != "true":
            raise SandboxError("DPDK did not initialize; see %s"
                               % self.vswitchd_log)
        self.ports = names
        self.set_topology(self.topology)

    def stop(self):
        """Stops everything this sandbox started; safe to call twice."""
        for g in self.guests:
            g.stop()
        self.guests = []
        for name in ("ovs-vswitchd", "ovsdb-server"):
            stop_process(self.procs.pop(name, None))
        for prefix in self.prefixes:
            shutil.rmtree(os.path.join("/var/run/dpdk", prefix),
                          ignore_errors=True)
        self.prefixes = []
        if self.dir and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass

    # ---- paths and helpers ------------------------------------------------

    @property
    def rundir(self):
        return os.path.join(self.dir, "run")

    @property
    def logdir(self):
        return os.path.join(self.dir, "log")

    @property
    def db_sock(self):
        return os.path.join(self.rundir, "db.sock")

    @property
    def vswitchd_log(self):
        return os.path.join(self.logdir, "ovs-vswitchd.log")

    def sock(self, port):
        return os.path.join(self.rundir, "%s.sock" % port)

    def _bin(self, rel):
        return os.path.join(self.build, rel)

    def _prefix(self, what):
        p = "%s-%s" % (self.name, what)
        self.prefixes.append(p)
        return p

    def _spawn(self, name, argv):
        out = open(os.path.join(self.logdir, name + ".out"), "w")
        self.procs[name] = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self.env, cwd=self.dir)
        out.close()

    def _wait_for(self, cond, timeout, what):
        """wait_until() 'cond', failing at once if a process exited."""
        def done():
            if cond():
                return True
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise SandboxError("%s exited (%d) while waiting: %s"
                                       % (name, p.returncode, what))
            return False
        wait_until(done, timeout, what, error=SandboxError)

    def _run(self, argv, check=True, timeout=120):
        r = subprocess.run(argv, capture_output=True, text=True,
                           env=getattr(self, "env", None), timeout=timeout)
        if check and r.returncode:
            raise SandboxError("%s failed (%d): %s"
                               % (" ".join(argv), r.returncode,
                                  (r.stderr or r.stdout).strip()))
        return r

    def vsctl(self, *args, check=True):
        return self._run([self._bin("utilities/ovs-vsctl"),
                          "--db=unix:" + self.db_sock] + list(args),
                         check=check).stdout

    def ctl_path(self):
        """The unixctl socket of the running ovs-vswitchd."""
        return os.path.join(self.rundir, "ovs-vswitchd.%d.ctl"
                            % self.procs["ovs-vswitchd"].pid)

    def appctl_result(self, *args):
        """Runs 'ovs-appctl ARGS...' against the switch; returns the
        completed process, whatever its exit status."""
        return self._run([self._bin("utilities/ovs-appctl"), "--timeout=30",
                          "--target=" + self.ctl_path()] + list(args),
                         check=False)

    def appctl(self, *args):
        """Runs 'ovs-appctl ARGS...'; returns its output, or raises
        SandboxError if it failed."""
        r = self.appctl_result(*args)
        if r.returncode:
            raise SandboxError("ovs-appctl %s failed (%d): %s"
                               % (" ".join(args), r.returncode,
                                  (r.stderr or r.stdout).strip()))
        return r.stdout

    def ofctl(self, *args):
        return self._run([self._bin("utilities/ovs-ofctl")] + list(args),
                         ).stdout

    def set_copy_mode(self, mode, port=None):
        """Sets the vhost copy mode of 'port' (or of all ports) by appctl
        and waits until it is applied."""
        args = ["netdev-dpdk/vhost-copy-mode-set"]
        args += [port] if port else []
        self.appctl(*(args + [mode]))
        ports = [port] if port else list(self.ports)
        wait_until(lambda: all(self.copy_mode(p) == mode for p in ports), 30,
                   lambda: "copy mode %s not applied: %s" % (
                       mode, self.appctl("netdev-dpdk/vhost-copy-mode-get")),
                   interval=0.1, error=SandboxError)

    def copy_mode(self, port):
        """The copy mode in use by 'port'."""
        out = self.appctl("netdev-dpdk/vhost-copy-mode-get", port)
        return out.split(":", 1)[1].split()[0]

    def set_rx_copy_mode(self, mode, port=None):
        """Sets the vhost Rx copy mode of 'port' (or of all ports) by
        appctl and waits until it is applied."""
        args = ["netdev-dpdk/vhost-rx-copy-mode-set"]
        args += [port] if port else []
        self.appctl(*(args + [mode]))
        ports = [port] if port else list(self.ports)
        wait_until(lambda: all(self.rx_copy_mode(p) == mode for p in ports),
                   30, lambda: "Rx copy mode %s not applied: %s" % (
                       mode, self.appctl("netdev-dpdk/vhost-copy-mode-get")),
                   interval=0.1, error=SandboxError)

    def rx_copy_mode(self, port):
        """The Rx copy mode in use by 'port'."""
        return parse.rx_copy_mode(
            self.appctl("netdev-dpdk/vhost-copy-mode-get", port))

    def iface(self, port, column):
        """Column 'column' of the port's Interface record, as ovs-vsctl
        gives it in JSON: a dict for a map, None for an empty optional
        value, else the value."""
        out = json.loads(self.vsctl("--format=json", "--columns=" + column,
                                    "list", "Interface", port))
        value = out["data"][0][0]
        if isinstance(value, list) and value[0] == "map":
            return {k: v for k, v in value[1]}
        if isinstance(value, list) and value[0] == "set":
            return value[1][0] if value[1] else None
        return value

    def custom_stats(self, port):
        """The port's statistics column as a dict (refreshed every 5 s)."""
        text = self.vsctl("get", "Interface", port, "statistics").strip()
        return {k: int(v) for k, v in
                (kv.split("=") for kv in text.strip("{}").split(", ") if kv)}

    def copy_modes_by_port(self):
        """vhost-copy-mode-get of every port: {port: [its lines]}."""
        return parse.copy_modes_by_port(
            self.appctl("netdev-dpdk/vhost-copy-mode-get"))

    def txq_inflight(self):
        """{port: {txq: copies in flight}} from vhost-copy-mode-get, which
        reads the counters at once (interface statistics lag 5 s)."""
        return parse.txq_inflight(
            self.appctl("netdev-dpdk/vhost-copy-mode-get"))

    def rxq_inflight(self):
        """{port: {rxq: copies in flight}} from vhost-copy-mode-get."""
        return parse.rxq_inflight(
            self.appctl("netdev-dpdk/vhost-copy-mode-get"))

    def abandoned(self):
        """{port: copies abandoned} from vhost-copy-mode-get."""
        return parse.abandoned(self.appctl("netdev-dpdk/vhost-copy-mode-get"))

    def abandoned_freed(self):
        """{port: mbufs of abandoned copies freed} from
        vhost-copy-mode-get."""
        return parse.abandoned_freed(
            self.appctl("netdev-dpdk/vhost-copy-mode-get"))

    def swcopy(self, cmd, *args):
        """Runs 'ovs-appctl dma-swcopy/CMD ARGS...'; returns its output."""
        return self.appctl("dma-swcopy/" + cmd, *[str(a) for a in args])

    def swcopy_state(self, engine):
        """dma-swcopy/show ENGINE as a dict of its 'key: value' lines."""
        return parse.key_values(self.swcopy("show", engine))

    def migration_line(self, port):
        """The live migration state that vhost-copy-mode-get says of
        'port'."""
        return parse.migration_line(
            self.appctl("netdev-dpdk/vhost-copy-mode-get", port))

    def log_text(self):
        """ovs-vswitchd's log so far."""
        with open(self.vswitchd_log) as f:
            return f.read()

    def log_count(self, text):
        """How often 'text' occurs in ovs-vswitchd's log so far."""
        return self.log_text().count(text)

    def wait_log(self, text, timeout=10):
        """Waits until ovs-vswitchd logs 'text'."""
        wait_until(lambda: text in self.log_text(), timeout,
                   "%r not logged" % text, interval=0.1)

    def vswitchd_alive(self):
        p = self.procs.get("ovs-vswitchd")
        return p is not None and p.poll() is None

    def thread_stacks(self, name="ovs-vswitchd.stacks"):
        """The stack of every thread of ovs-vswitchd, if it runs and gdb is
        installed (else None), also kept in the log folder as 'name': where
        a switch that stopped answering hangs."""
        if not self.vswitchd_alive() or not shutil.which("gdb"):
            return None
        try:
            out = subprocess.run(
                ["gdb", "-p", str(self.procs["ovs-vswitchd"].pid), "-batch",
                 "-nx", "-ex", "set pagination off",
                 "-ex", "thread apply all bt 25"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                universal_newlines=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return "gdb failed: %s" % e
        if self.dir and os.path.isdir(self.logdir):
            with open(os.path.join(self.logdir, name), "w") as f:
                f.write(out)
        return "\n".join(line for line in out.splitlines()
                         if line.startswith(("Thread ", "#")))

    # ---- ports, flows -----------------------------------------------------

    def _port_args(self, name, ofport=None, options=None, other_config=None):
        """ovs-vsctl's arguments that add vhost-user client port 'name'."""
        args = ["add-port", "br0", name, "--", "set", "Interface", name,
                "type=dpdkvhostuserclient",
                "options:vhost-server-path=%s" % self.sock(name)]
        if ofport:
            args.append("ofport_request=%d" % ofport)
        if self.mtu:
            args.append("mtu_request=%d" % self.mtu)
        for k, v in (options or {}).items():
            args.append("options:%s=%s" % (k, v))
        for k, v in (other_config or {}).items():
            args.append("other_config:%s=%s" % (k, v))
        return args

    def add_port(self, name, ofport=None, options=None, other_config=None):
        self.vsctl("--timeout=30",
                   *self._port_args(name, ofport, options, other_config))
        if name not in self.ports:
            self.ports.append(name)

    def del_port(self, name):
        self.vsctl("--timeout=30", "del-port", "br0", name)
        self.ports.remove(name)

    def set_topology(self, topology):
        """Replaces the bridge's flows, in one OpenFlow exchange."""
        if topology == "none":
            flows = []
        elif topology == "loop":
            flows = []
            for i in range(0, self.n_ports, 2):
                flows.append("in_port=%d,actions=output:%d" % (i + 1, i + 2))
                flows.append("in_port=%d,actions=output:%d" % (i + 2, i + 1))
        else:
            flows = list(topology)
        path = os.path.join(self.dir, "flows.txt")
        with open(path, "w") as f:
            f.write("".join(flow + "\n" for flow in flows))
        self.ofctl("replace-flows", "br0", path)

    # ---- guests -----------------------------------------------------------

    def guest_binary(self):
        return self._bin("utilities/ovs-vhost-guest")

    def guest_eal(self, prefix, cpu=None):
        cpu = self.guest_cpu if cpu is None else cpu
        eal = ["--no-pci", "--single-file-segments", "--iova-mode=va",
               "--file-prefix=" + prefix, "-l", str(cpu)]
        if self.huge:
            eal += ["--in-memory"]
        else:
            eal += ["--no-huge", "-m", "1024"]
        for d in dpdk_drivers():
            eal += ["-d", d]
        return eal

    def start_guest(self, ports, args=(), name=None, cpu=None):
        """Starts one ovs-vhost-guest process.

        ports: list of (port_name, role), (port_name, role, queues) or
        (port_name, role, queues, max_queues) (a device with max_queues
        queue pairs, of which the guest enables 'queues');
        args: further options of the tool (--size, --duration, ...);
        cpu: the CPU it runs on (default: the sandbox's guest_cpu)."""
        self._guest_seq += 1
        name = name or "guest%d" % self._guest_seq
        argv = [self.guest_binary()] + self.guest_eal(self._prefix(name),
                                                      cpu)
        argv.append("--")
        for p in ports:
            port, role = p[0], p[1]
            queues = p[2] if len(p) > 2 else 1
            argv += ["--port", "%s,role=%s,queues=%d"
                     % (self.sock(port), role, queues)]
            if len(p) > 3:
                argv[-1] += ",max-queues=%d" % p[3]
        argv += [str(a) for a in args]
        g = Guest(self, name, argv, os.path.join(self.logdir,
                                                 name + ".log"))
        g.ports = [p[0] for p in ports]
        self.guests.append(g)
        return g

    # ---- statistics -------------------------------------------------------

    def clear_pmd_stats(self):
        self.appctl("dpif-netdev/pmd-stats-clear")

    def pmd_counters(self):
        """Sums over all threads of the counter lines of pmd-stats-show
        that the fork adds."""
        return parse.pmd_counters(self.appctl("dpif-netdev/pmd-stats-show"))

    def pmd_perf(self):
        """dpif-netdev/pmd-perf-show as {core_id: {...}}."""
        return parse.pmd_perf(self.appctl("dpif-netdev/pmd-perf-show"))

    def coverage(self, name):
        """The total of coverage counter 'name' (threads add their counts
        to it once a second)."""
        return int(self.appctl("coverage/read-counter", name).strip())

    def port_stats(self):
        """Live per-port counters from 'dpctl/show -s': {name: {...}}."""
        return parse.port_stats(self.appctl("dpctl/show", "-s",
                                            "netdev@ovs-netdev"))

    def wait_mempools_back(self, baseline, timeout=10):
        """Waits until every mempool's in-use count is back to 'baseline'
        (a mempool_in_use() result); returns {name: (baseline, now)} for
        those that are not."""
        deadline = time.time() + timeout
        while True:
            now = self.mempool_in_use()
            grown = {k: (baseline.get(k, 0), v) for k, v in now.items()
                     if v > baseline.get(k, 0)}
            if not grown or time.time() > deadline:
                return grown
            time.sleep(0.2)

    def mempool_in_use(self):
        """{mempool name: mbufs in use} from
        netdev-dpdk/get-mempool-info."""
        return parse.mempool_in_use(
            self.appctl("netdev-dpdk/get-mempool-info"))
