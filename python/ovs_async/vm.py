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

"""Real guests: QEMU virtual machines with the Linux virtio-net driver on
the dpdkvhostuserclient ports of a sandbox.

image() builds, once per kernel, a boot image from Debian packages: the
kernel of linux-image-amd64 and an initramfs with its virtio modules,
busybox-static, ethtool and iperf3 (with the libraries they load).  VM
runs one qemu-system-x86_64 (TCG: a nested Linux guest does not boot
under KVM here; guest memory in a shared memfd; QEMU the vhost-user
server on the sandbox's socket of the port) and drives the guest's shell
through its serial console: run() sends a command line and returns its
output, and raises VMError if it fails.  Each VM has a QMP socket
(qmp()); a VM started with 'incoming' waits for a live migration, which
migrate() of the source sends it: the guest then runs, and answers on its
console, in the destination's QEMU."""

import glob
import hashlib
import json
import lzma
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from ovs_async.sandbox import SandboxError

# Guest modules, in load order.
MODULES = ["virtio_ring", "virtio", "virtio_pci_modern_dev",
           "virtio_pci_legacy_dev", "virtio_pci", "failover",
           "net_failover", "virtio_net"]
# Programs of the image besides busybox, and where they go.
PROGRAMS = ["/usr/sbin/ethtool", "/usr/bin/iperf3"]
# Libraries that glibc loads at run time, which ldd does not list: Debian
# 13's iperf3 aborts at the end of a test ("libgcc_s.so.1 must be
# installed for pthread_cancel to work") without this one.
DLOPENED = ["libgcc_s.so.1"]
PACKAGES = ["qemu-system-x86", "linux-image-amd64", "busybox-static",
            "ethtool", "iperf3"]

CACHE = os.path.join(tempfile.gettempdir(), "ovs-async-vm")

# The guest's /init: modules, the address from the kernel command line
# (vm_ip=ADDR/LEN, or vm_ip=dhcp: none until VM.dhcp() asks for one), then
# a shell loop on the console that runs each line it reads and prints a
# marker with the status.
INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /www
dmesg -n 1
for m in %(modules)s; do insmod /modules/$m.ko || echo "insmod $m failed"; done
ip=$(sed -n 's/.*vm_ip=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
ip link set lo up
ip link set eth0 up
[ "$ip" = dhcp ] || ip addr add $ip dev eth0
stty -echo 2>/dev/null
echo VM-READY
while IFS= read -r line; do
    eval "$line"
    echo "@@rc=$?@@"
done
poweroff -f
"""

# busybox udhcpc's script (VM.dhcp()): the lease's address and router.
DHCP_SCRIPT = """#!/bin/busybox sh
case "$1" in
deconfig) ip -4 addr flush dev "$interface" ;;
bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -z "$router" ] || ip route replace default via "${router%% *}" ;;
esac
exit 0
"""


class VMError(SandboxError):
    pass


def kernel_version():
    """The newest kernel that has both an image in /boot and modules."""
    found = []
    for path in glob.glob("/boot/vmlinuz-*"):
        ver = path[len("/boot/vmlinuz-"):]
        if os.path.isdir(os.path.join("/lib/modules", ver)):
            found.append(ver)
    if not found:
        raise VMError("no kernel in /boot with modules in /lib/modules: "
                      "apt-get install %s" % " ".join(PACKAGES))
    return sorted(found, key=lambda v: [int(x) if x.isdigit() else x
                                        for x in re.split(r"[.-]", v)])[-1]


def missing_tools():
    tools = ["/usr/bin/qemu-system-x86_64", "/bin/busybox"] + PROGRAMS
    return [t for t in tools if not os.access(t, os.X_OK)]


def _libraries(program):
    """The shared objects that 'program' loads, by their absolute paths,
    the dynamic loader included."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True,
                         check=True).stdout
    libs = re.findall(r"=> (/\S+)", out)
    libs += re.findall(r"^\s*(/\S+ld-linux\S*)", out, re.M)
    return libs


def _module(kver, name):
    """The file of module 'name' of kernel 'kver', or None if the kernel
    has it built in (Debian 13's has virtio and virtio_pci built in,
    Debian 12's has them as modules)."""
    for ext in (".ko", ".ko.xz"):
        hits = glob.glob(os.path.join("/lib/modules", kver, "kernel", "**",
                                      name + ext), recursive=True)
        if hits:
            return hits[0]
    try:
        with open(os.path.join("/lib/modules", kver,
                               "modules.builtin")) as f:
            if any(os.path.basename(line.strip()) == name + ".ko"
                   for line in f):
                return None
    except OSError:
        pass
    raise VMError("kernel %s has no module %s" % (kver, name))


def image():
    """(kernel, initramfs) of the guest, built into CACHE once per kernel
    version and contents."""
    missing = missing_tools()
    if missing:
        raise VMError("missing %s: apt-get install %s"
                      % (", ".join(missing), " ".join(PACKAGES)))
    kver = kernel_version()
    kernel = "/boot/vmlinuz-" + kver
    # What goes into the image, so that a changed /init is never stale.
    key = hashlib.sha1(repr((INIT, DHCP_SCRIPT, MODULES, PROGRAMS,
                             DLOPENED))
                       .encode()).hexdigest()
    initrd = os.path.join(CACHE, "initrd-%s-%d.img" % (kver, os.getpid()))
    stable = os.path.join(CACHE, "initrd-%s-%s.img" % (kver, key[:12]))
    if os.path.exists(stable):
        return kernel, stable
    os.makedirs(CACHE, exist_ok=True)
    root = tempfile.mkdtemp(prefix="root-", dir=CACHE)
    try:
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev",
                  "modules", "lib64", "lib/x86_64-linux-gnu", "etc"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
        libs = set(glob.glob("/lib/x86_64-linux-gnu/" + name)[0]
                   for name in DLOPENED)
        for prog in PROGRAMS:
            shutil.copy(prog, root + prog)
            libs.update(_libraries(prog))
        for lib in sorted(libs):
            dest = root + lib
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy(lib, dest)
        modules = []
        for name in MODULES:
            src = _module(kver, name)
            if not src:
                continue
            modules.append(name)
            dest = os.path.join(root, "modules", name + ".ko")
            if src.endswith(".xz"):
                with lzma.open(src) as f, open(dest, "wb") as out:
                    out.write(f.read())
            else:
                shutil.copy(src, dest)
        with open(os.path.join(root, "init"), "w") as f:
            f.write(INIT % {"modules": " ".join(modules)})
        os.chmod(os.path.join(root, "init"), 0o755)
        with open(os.path.join(root, "bin", "dhcp-script"), "w") as f:
            f.write(DHCP_SCRIPT)
        os.chmod(os.path.join(root, "bin", "dhcp-script"), 0o755)
        files = subprocess.run(["find", "."], cwd=root, capture_output=True,
                               check=True).stdout
        with open(initrd, "wb") as out:
            subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=root,
                           input=files, stdout=out, check=True)
        os.replace(initrd, stable)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return kernel, stable


class VM(object):
    """A QEMU guest on port 'port' of sandbox 'sb', at 'ip' (ADDR/LEN, or
    "dhcp": the address that dhcp() gets), with 'queues' queue pairs (the Linux driver enables as many as it has
    vCPUs, one here), on CPU 'cpu'.  A guest that reboots boots again (its
    device is reset, as a real VM's), and wait_ready() then waits for it
    again.  With 'incoming' (a QEMU migration URI, e.g. unix:PATH), QEMU
    starts the same machine and waits for the guest of another VM's
    migrate() instead of booting it: give it the source's 'mac',
    'queues' and 'mem_mb'."""

    def __init__(self, sb, port, ip, name=None, queues=1, cpu=None,
                 mac=None, mem_mb=256, incoming=None):
        self.sb = sb
        self.port = port
        self.ip = ip
        self.addr = None if ip == "dhcp" else ip.split("/")[0]
        self.name = name or "vm-" + port
        self.queues = queues
        kernel, initrd = image()
        self.log_path = os.path.join(sb.logdir, self.name + ".console")
        self.qmp_path = os.path.join(sb.rundir, self.name + ".qmp")
        self._log = open(self.log_path, "a")
        self._buf = ""
        self._cond = threading.Condition()
        mac = mac or "02:00:00:00:01:%02x" % (int(port.lstrip("v")) + 1)
        netdev = "vhost-user,id=n0,chardev=c0"
        device = "virtio-net-pci,netdev=n0,mac=%s,vectors=0,romfile=" % mac
        if queues > 1:
            netdev += ",queues=%d" % queues
            device += ",mq=on"
        argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max",
                "-smp", "1", "-m", str(mem_mb), "-nodefaults",
                "-no-user-config", "-display", "none",
                "-object", "memory-backend-memfd,id=mem,size=%dM,share=on"
                % mem_mb, "-machine", "pc,memory-backend=mem",
                "-action", "reboot=reset,panic=exit-failure",
                "-kernel", kernel, "-initrd", initrd,
                "-append", "console=ttyS0 quiet panic=-1 vm_ip=%s" % ip,
                "-chardev", "socket,id=c0,path=%s,server=on,wait=off"
                % sb.sock(port),
                "-netdev", netdev, "-device", device, "-serial", "stdio",
                "-qmp", "unix:%s,server=on,wait=off" % self.qmp_path]
        if incoming:
            argv += ["-incoming", incoming]
        cpu = sb.guest_cpu if cpu is None else cpu
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            data = self.proc.stdout.read1(65536)
            if not data:
                break
            text = data.decode(errors="replace").replace("\r", "")
            self._log.write(text)
            self._log.flush()
            with self._cond:
                self._buf += text
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def running(self):
        return self.proc.poll() is None

    def _wait_text(self, pattern, timeout):
        """Waits for 'pattern' (a regular expression) in the console output
        since the last match; returns its match and drops what came before
        and with it."""
        deadline = time.time() + timeout
        with self._cond:
            while True:
                m = re.search(pattern, self._buf)
                if m:
                    self._buf = self._buf[m.end():]
                    return m, self._buf
                left = deadline - time.time()
                if left <= 0 or (not self.running() and not m):
                    raise VMError("%s: no %r on its console within %d s; "
                                  "see %s" % (self.name, pattern, timeout,
                                              self.log_path))
                self._cond.wait(min(left, 0.5))

    def wait_ready(self, timeout=120):
        self._wait_text(r"VM-READY\n", timeout)
        return self

    def send(self, command):
        """Gives 'command' to the guest's shell without waiting for it."""
        with self._cond:
            self._buf = ""
        self.proc.stdin.write((command + "\n").encode())
        self.proc.stdin.flush()

    def run(self, command, timeout=60, check=True):
        """Runs 'command' in the guest's shell; returns (status, output)
        and raises VMError if 'check' and it failed."""
        self.send(command)
        m, _ = self._wait_text(r"@@rc=(\d+)@@\n", timeout)
        out = m.string[:m.start()]
        status = int(m.group(1))
        if check and status:
            raise VMError("%s: %r exited %d:\n%s" % (self.name, command,
                                                     status, out[-2000:]))
        return status, out

    def dhcp(self, timeout=60):
        """Asks DHCP for the guest's address (busybox udhcpc, which gives
        up after 20 tries a second apart); returns the address, now the
        VM's 'addr'."""
        self.run("udhcpc -i eth0 -f -q -n -t 20 -T 1 -s /bin/dhcp-script",
                 timeout=timeout)
        out = self.run("ip -4 -o addr show dev eth0")[1]
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/(\d+)", out)
        if not m:
            raise VMError("%s: no address after DHCP: %s" % (self.name, out))
        self.addr, self.ip = m.group(1), "%s/%s" % m.groups()
        return self.addr

    def qmp(self, command, timeout=30, **arguments):
        """Runs QMP 'command' with 'arguments' on this VM's QEMU; returns
        its "return" value, or raises VMError with QMP's error."""
        deadline = time.time() + timeout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            while True:
                try:
                    s.connect(self.qmp_path)
                    break
                except OSError as e:
                    if time.time() > deadline or not self.running():
                        raise VMError("%s: no QMP socket: %s"
                                      % (self.name, e))
                    time.sleep(0.1)
            s.settimeout(max(1.0, deadline - time.time()))
            f = s.makefile("rw")

            def call(name, args=None):
                msg = {"execute": name}
                if args:
                    msg["arguments"] = args
                f.write(json.dumps(msg) + "\n")
                f.flush()
                while True:
                    line = f.readline()
                    if not line:
                        raise VMError("%s: QMP closed during %s"
                                      % (self.name, name))
                    reply = json.loads(line)
                    if "error" in reply:
                        raise VMError("%s: QMP %s: %s" % (
                            self.name, name, reply["error"].get("desc")))
                    if "return" in reply:
                        return reply["return"]

            json.loads(f.readline())        # The greeting.
            call("qmp_capabilities")
            return call(command, arguments)

    def migrate(self, uri, timeout=120):
        """Migrates the guest live to the VM listening on 'uri'; returns
        QMP's final query-migrate (status, total-time and downtime in ms,
        RAM transferred), or raises VMError if QEMU refused or failed."""
        self.qmp("migrate", uri=uri)
        deadline = time.time() + timeout
        while True:
            info = self.qmp("query-migrate")
            status = info.get("status")
            if status == "completed":
                return info
            if status in ("failed", "cancelled"):
                raise VMError("%s: migration %s: %s" % (
                    self.name, status, info.get("error-desc", info)))
            if time.time() > deadline:
                raise VMError("%s: migration not done within %d s: %s"
                              % (self.name, timeout, info))
            time.sleep(0.1)

    def stop(self, timeout=10):
        """Ends QEMU (the guest vanishes, as a VM killed by its host)."""
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        self._log.close()
