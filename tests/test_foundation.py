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

"""End-to-end: the fork forwards vhost-user traffic and every byte of it
is verified by ovs-vhost-guest (CRC over each whole frame, per-stream
sequence numbers)."""

import os
import re
import signal
import subprocess
import time

import pytest

from ovs_async import traffic
from ovs_async.sandbox import (Sandbox, SandboxError, fork_define,
                               fork_version, upstream_version)
from ovs_async.wait import wait_until
from ovs_async.watch import ANSWER_S, Responsiveness, late_answer_state

from conftest import TOP


def test_one_version_identity(build, sandbox):
    """Every program, the Python library and its tools, the man pages, the
    startup log and OpenFlow's description name the same version, and it
    names the build's commit: HEAD's (the build unpacks again when HEAD
    moves)."""
    want = fork_version(build)
    if os.path.exists(os.path.join(TOP, ".git")):
        assert re.fullmatch(r"3\.5\.0\+async\.\d+\.g[0-9a-f]{10}",
                            want), want
        head = subprocess.run(["git", "-c", "safe.directory=" + TOP, "-C",
                               TOP, "rev-parse", "--short=10", "HEAD"],
                              capture_output=True, text=True,
                              check=True).stdout.strip()
        assert want.endswith(".g" + head), (want, head)
    else:
        # A source tarball: no commit to name.
        assert want == "3.5.0+async", want

    def out(*argv, **kw):
        return subprocess.run(argv, capture_output=True, text=True,
                              check=True, **kw).stdout

    seen = {}
    for prog in ["vswitchd/ovs-vswitchd", "ovsdb/ovsdb-server",
                 "ovsdb/ovsdb-tool", "utilities/ovs-vsctl",
                 "utilities/ovs-ofctl", "utilities/ovs-appctl",
                 "utilities/ovs-dpctl", "utilities/ovs-vhost-guest"]:
        first = out(os.path.join(build, prog), "--version").splitlines()[0]
        seen[prog] = first.split()[-1]
    # Shell and Python tools built from .in files (@VERSION@).
    seen["ovs-ctl"] = out(os.path.join(build, "utilities/ovs-ctl"),
                          "--version").splitlines()[0].split()[-1]
    seen["ovs-dpctl-top"] = out(
        "/usr/bin/python3", os.path.join(build, "utilities/ovs-dpctl-top"),
        "--version").split()[-1]
    # The Python library, which every Python daemon's "version" reports.
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    seen["python ovs.version"] = out(
        "/usr/bin/python3", "-c",
        "import ovs.version; print(ovs.version.VERSION)", env=env).strip()
    # Man pages: .TH's version field.
    for page in ["vswitchd/ovs-vswitchd.8", "utilities/ovs-vsctl.8",
                 "vswitchd/ovs-vswitchd.conf.db.5",
                 "utilities/ovs-vhost-guest.8"]:
        with open(os.path.join(build, page)) as f:
            th = [line for line in f if line.startswith(".TH")][0]
        m = re.search(r'\b(3\.[15]\.0[^"\s]*)', th)
        seen[page] = m and m.group(1)
    # The running switch: its startup log, "version" and OpenFlow's
    # software description.
    seen["ovs-appctl version"] = sandbox.appctl("version").split()[-1]
    with open(sandbox.vswitchd_log) as f:
        log = f.read()
    started = re.search(r"ovs-vswitchd \(Open vSwitch\) (\S+)", log)
    seen["ovs-vswitchd.log"] = started and started.group(1)
    desc = sandbox.ofctl("dump-desc", "br0")
    seen["OpenFlow sw_desc"] = re.search(r"Software: (\S+)", desc).group(1)
    wrong = {k: v for k, v in seen.items() if v != want}
    assert not wrong, "not %s: %s" % (want, wrong)


def test_bug_address_is_the_forks(build):
    """configure's bug-report address, which "configure --help" and a
    failing testsuite print, is the fork's, never upstream's list."""
    want = fork_define("OVS_FORK_BUGREPORT")
    assert "openvswitch.org" not in want
    seen = {}
    with open(os.path.join(build, "config.h")) as f:
        m = re.search(r'^#define PACKAGE_BUGREPORT "(.*)"$', f.read(), re.M)
    seen["config.h"] = m and m.group(1)
    with open(os.path.join(build, "package.m4")) as f:
        m = re.search(r"AT_PACKAGE_BUGREPORT\], \[(.*)\]\)", f.read())
    seen["package.m4"] = m and m.group(1)
    with open(os.path.join(build, "tests", "testsuite"),
              errors="replace") as f:
        m = re.search(r"^\s+To: <(.*)>$", f.read(), re.M)
    seen["testsuite"] = m and m.group(1)
    for tree in (build, TOP):
        helptext = subprocess.run([os.path.join(tree, "configure"), "--help"],
                                  capture_output=True, text=True,
                                  check=True).stdout
        m = re.search(r"^Report bugs to <(.*)>\.$", helptext, re.M)
        seen[os.path.relpath(tree, TOP) + "/configure"] = m and m.group(1)
    wrong = {k: v for k, v in seen.items() if v != want}
    assert not wrong, "not %r: %s" % (want, wrong)


@pytest.mark.unit
def test_autoreconf_leaves_no_stray_file(tmp_path):
    """autoreconf (which ./ovs-fork runs in the checkout) writes only the
    files of the build system: the version and bug address that
    configure.ac reads once from lib/ovs-fork.h used to be read again
    inside autoconf's traces, whose quoting ("@:>@") had the shell write
    an empty file named "@" into the checkout."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=TOP, check=True,
                           capture_output=True).stdout.split(b"\0")
    tree = tmp_path / "tree"
    for name in filter(None, files):
        src = os.path.join(TOP, name.decode())
        dest = tree / name.decode()
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isfile(src):
            dest.write_bytes(open(src, "rb").read())
            os.chmod(dest, os.stat(src).st_mode)
    r = subprocess.run(["autoreconf", "--install", "--force"], cwd=tree,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not (tree / "@").exists(), "autoreconf wrote a file named '@'"
    r = subprocess.run(["sh", "./configure", "--version"], cwd=tree,
                       capture_output=True, text=True, check=True)
    assert r.stdout.splitlines()[0] == (
        "openvswitch-async configure %s%s"
        % (upstream_version(), fork_define("OVS_FORK_VERSION_SUFFIX"))), \
        r.stdout


@pytest.fixture(scope="module")
def jumbo_sandbox(module_sandbox_factory):
    return module_sandbox_factory(ports=2, mtu=9000)


@pytest.mark.parametrize("size", [64, 512, 1518, 9000])
def test_sizes_verified(jumbo_sandbox, size):
    run = traffic.loop_run(jumbo_sandbox, size=size, duration=2)
    traffic.check(run)
    assert run["guest"]["sizes"] == [size]
    # Both directions went through the PMD.
    assert run["pmd_rx_packets"] >= run["guest"]["rx_pkts"]


def test_two_queues(sandbox):
    run = traffic.loop_run(sandbox, size=256, duration=2, queues=2)
    traffic.check(run)
    # Both guest Tx queues carried traffic into the switch (and, verified,
    # all of it came back); with one PMD the switch itself sends on one.
    gen = [p for p in run["guest"]["ports"] if "gen" in p["role"]][0]
    assert len(gen["tx_queues"]) == 2
    assert all(n > 0 for n in gen["tx_queues"]), gen


def test_rate_in_full_bursts_with_idle_sleep(sandbox):
    """--rate releases whole bursts (the PMD's batches stay full at any
    rate) and never offers more than the rate; --idle-sleep sleeps when a
    pass found nothing to do, and every frame is still verified.  The
    control, busy polling, never sleeps."""
    rate, duration = 20000, 2
    run = traffic.check(traffic.loop_run(
        sandbox, size=256, duration=duration,
        extra=["--rate", rate, "--idle-sleep", 100]))
    g = run["guest"]
    assert g["rate"] == rate and g["idle_sleep_us"] == 100, g
    assert g["idle_sleeps"] > 0, g
    assert 0 < g["tx_pkts"] <= rate * duration + 32, g
    batches = [p["pkts_per_batch"] for p in run["pmds"].values()
               if p["tx_packets"]]
    assert batches and min(batches) >= 24, run["pmds"]

    control = traffic.check(traffic.loop_run(sandbox, size=256,
                                             duration=1))
    assert control["guest"]["idle_sleeps"] == 0, control["guest"]


def test_verifier_catches_corruption(sandbox):
    run = traffic.loop_run(sandbox, size=128, duration=1,
                           extra=["--corrupt", 100])
    assert run["guest"]["corrupted"] >= 1
    assert run["returncode"] == 1
    assert run["verdict"] == "CORRUPT"


def test_guest_starts_before_switch(sandbox_factory):
    sb = Sandbox(ports=2, log=print, keep=True)
    sb.prepare()
    try:
        g = traffic.start_held(sb, [("v0", "gen+sink"), ("v1", "loop")],
                               ["--size", 64, "--duration", 2,
                                "--wait-link", 60])
        time.sleep(2)
        assert g.running(), g.log_tail()
        sb.start()
        run = traffic.finish(sb, g, ("v0", "v1"), timeout=90)
        assert g.returncode == 0, g.log_tail()
        traffic.check(run)
        sb.keep = False
    finally:
        sb.stop()


def test_guest_starts_after_switch(sandbox):
    # The switch has been up (and retrying its vhost clients) for a while.
    time.sleep(2)
    traffic.check(traffic.loop_run(sandbox, size=64, duration=1))


def test_port_readd_under_traffic(sandbox_factory):
    sb = sandbox_factory(ports=4)
    steady = sb.start_guest([("v0", "gen+sink"), ("v1", "loop")],
                            ["--size", 512, "--duration", 8])
    victim = sb.start_guest([("v2", "gen+sink"), ("v3", "loop")],
                            ["--size", 512, "--duration", 8,
                             "--wait-link", 60])
    time.sleep(3)
    sb.del_port("v3")
    time.sleep(1.5)
    assert sb.vswitchd_alive()
    sb.add_port("v3", ofport=4)
    sb.set_topology("loop")

    def v3_rx():
        return sb.port_stats().get("v3", {}).get("rx_packets", 0)
    wait_until(v3_rx, 20, "traffic did not resume through the re-added port",
               interval=0.2)

    res = steady.wait(timeout=60)
    assert steady.returncode == 0, steady.log_tail()
    assert res["corrupted"] == 0 and res["duplicates"] == 0
    assert res["rx_pkts"] > 0
    vres = victim.wait(timeout=60)
    assert vres["corrupted"] == 0 and vres["duplicates"] == 0, vres
    assert vres["rx_pkts"] > 0
    assert sb.vswitchd_alive()


@pytest.mark.parametrize("args,message", [
    (["--size", "10"], "--size"),
    (["--size", "9001"], "--size"),
    (["--pattern", "zigzag"], "--pattern"),
    (["--port", "/tmp/x.sock,role=juggle"], "role"),
    (["--port", "/tmp/x.sock,role=gen,queues=9"], "queues"),
    (["--frobnicate"], "frobnicate"),
])
@pytest.mark.unit
def test_guest_tool_bad_options(build, args, message):
    tool = os.path.join(build, "utilities/ovs-vhost-guest")
    argv = [tool, "--no-pci", "--no-huge", "-m", "64", "--in-memory",
            "--file-prefix=badopt%d" % os.getpid(), "-l", "0", "--"]
    if args[0] != "--port":
        argv += ["--port", "/tmp/nonexistent.sock,role=gen+sink"]
    r = subprocess.run(argv + args, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Segmentation" not in r.stderr


def test_sandbox_bad_options():
    for kwargs in ({"ports": 0}, {"ports": 3}, {"pmd_cpus": [4096]},
                   {"dma": -1}, {"topology": "ring"}):
        with pytest.raises(SandboxError):
            Sandbox(**kwargs)
    r = subprocess.run([os.path.join(TOP, "utilities/ovs-async-sandbox"),
                        "--ports", "two"], capture_output=True, text=True)
    assert r.returncode == 2 and "--ports" in r.stderr
    r = subprocess.run([os.path.join(TOP, "utilities/ovs-async-sandbox"),
                        "--ports", "3", "--time", "1"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "even number of ports" in r.stderr


def test_late_answer_state(sandbox):
    """What the watch records when an answer is late names where each
    party waits: a client asleep, the main thread idle in its poll loop
    with nobody queued; then, with the switch stopped on purpose, the
    client waiting for its answer, the main thread stopped and the
    client's connection queued, not accepted."""
    sb = sandbox
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        state = wait_until(lambda: (lambda s: s if re.search(
            r"^main thread: .* in poll ", s, re.M) and re.search(
                r"^client: .* in (clock_)?nanosleep ", s, re.M) else None)(
                late_answer_state(sb, "/proc/%d" % sleeper.pid)), 30,
            lambda: "the idle main thread and the sleeping client are never "
            "seen in poll() and nanosleep():\n"
            + late_answer_state(sb, "/proc/%d" % sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert re.search(r"^client: +\d+ sleep: state S, .* in "
                     r"(clock_)?nanosleep ", state, re.M), state
    assert re.search(r"^listener: +0 connections not accepted", state,
                     re.M), state
    assert re.search(r"^load: +[\d.]+ ", state, re.M), state

    vswitchd = sb.procs["ovs-vswitchd"].pid
    os.kill(vswitchd, signal.SIGSTOP)
    try:
        client = subprocess.Popen(
            [sb._bin("utilities/ovs-appctl"), "--timeout=90",
             "--target=" + sb.ctl_path(), "version"],
            stdout=subprocess.PIPE, universal_newlines=True, env=sb.env)
        # Its connection queued, the client sends its request and waits
        # for the answer in poll().
        state = wait_until(lambda: (lambda s: s if re.search(
            r"^listener: +1 connections not accepted", s, re.M)
            and re.search(r"^client: +\d+ ovs-appctl: state S, .* in poll ",
                          s, re.M) else None)(
                late_answer_state(sb, "/proc/%d" % client.pid)), 30,
            lambda: "the client is never seen queued and waiting:\n"
            + late_answer_state(sb, "/proc/%d" % client.pid))
    finally:
        os.kill(vswitchd, signal.SIGCONT)
    assert re.search(r"^main thread: +\d+ ovs-vswitchd: state T, ", state,
                     re.M), state
    out, _ = client.communicate(timeout=30)
    assert client.returncode == 0 and "Open vSwitch" in out, out
    with open(os.path.join(sb.logdir, "ovs-vswitchd.late-answer")) as f:
        assert f.read().count("main thread: ") >= 2


def test_watch_catches_a_blocked_main_thread(sandbox):
    """The watch that the life-cycle tests and the soak run: quiet while
    the switch answers (the control), and failing, with where the main
    thread was, when the switch stops answering for longer than its bound
    (stopped on purpose with SIGSTOP)."""
    sb = sandbox
    control = Responsiveness(sb)
    control.start()
    wait_until(lambda: control.count >= 20, 30, "the watch never asked")
    control.finish()
    assert control.worst < ANSWER_S and control.late is None

    probe = Responsiveness(sb)
    probe.start()
    wait_until(lambda: probe.count >= 3, 30, "the watch never asked")
    vswitchd = sb.procs["ovs-vswitchd"].pid
    os.kill(vswitchd, signal.SIGSTOP)
    try:
        wait_until(lambda: probe.late, ANSWER_S * 3,
                   "the watch did not notice the stopped switch")
    finally:
        os.kill(vswitchd, signal.SIGCONT)
    with pytest.raises(SandboxError) as e:
        probe.finish()
    assert "main thread blocked" in str(e.value), e.value
    assert re.search(r"^main thread: +\d+ ovs-vswitchd: state T, ",
                     str(e.value), re.M), e.value


def test_no_huge(sandbox_factory):
    """Switch and guests without hugepages (memfd-backed guest memory)."""
    sb = sandbox_factory(ports=2, huge=False)
    assert not sb.huge
    for size in (64, 1518):
        traffic.check(traffic.loop_run(sb, size=size, duration=1))


@pytest.mark.parametrize("shows", [0, 3])
def test_port_deleted_after_its_stats_could_not_be_read(sandbox_factory,
                                                        shows):
    """'dpctl/show -s' on vhost-user ports without a guest cannot read
    their statistics.  Upstream 3.1's dpctl then kept a reference to each
    port's netdev (patches/0014), so a port deleted afterwards was never
    destroyed: its vhost-user socket stayed registered and connected, and
    the port re-added with the same path never got the guest.  The control,
    without 'dpctl/show -s', shows that a deleted port's absence from
    vhost-copy-mode-get is how its destruction shows."""
    sb = sandbox_factory(ports=2)

    def v1_entries():
        out = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
        return sum(1 for line in out.splitlines() if line.startswith("v1:"))
    assert v1_entries() == 1
    for _ in range(shows):
        out = sb.appctl("dpctl/show", "-s", "netdev@ovs-netdev")
        # The state this test is about: the statistics were unreadable.
        assert out.count("could not retrieve stats") == 2, out
    sb.del_port("v1")
    assert v1_entries() == 0, "the deleted port v1 was not destroyed"
    sb.add_port("v1", ofport=2)
    assert v1_entries() == 1
    assert sb.vswitchd_alive()
