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

"""Upstream's autotest suites run on the fork's tree: running them,
reading their per-test results, the logs of failed tests, and the list of
known failures (tests that fail on stock Open vSwitch here too).

Used by tests/test_upstream.py (the subset CI runs) and by
utilities/ovs-upstream-check ("./ovs-fork test --full")."""

import os
import re
import signal
import subprocess
import threading

RESULT_RE = re.compile(r"^\s*(\d+): (.+?)\s+(ok|skipped|FAILED|expected "
                       r"failure|UNEXPECTED PASS)\b", re.M)


def run_suite(build, target, flags, log_path, timeout, extra=(),
              echo=None, env=None, netns=False):
    """Runs 'make -C build target TESTSUITEFLAGS=flags', writes its output
    to 'log_path' and returns (returncode, output).  With 'echo', every
    line of output is also passed to it as it comes; 'env' adds to the
    environment.  With 'netns', in a network namespace of its own (its
    loopback up): the system tests' userspace datapaths make tap devices
    (ovs-netdev, one per bridge) that would meet those of the machine's own
    Open vSwitch, which an OVS-DPDK host runs."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    argv = ["make", "-C", build, target, "PYTHON3=/usr/bin/python3",
            "TESTSUITEFLAGS=" + flags] + list(extra)
    if netns:
        argv = ["unshare", "--net", "--", "sh", "-c",
                'ip link set lo up && exec "$@"', "sh"] + argv
    lines = []
    with open(log_path, "w") as log:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             start_new_session=True,
                             env=dict(os.environ, **(env or {})))
        expired = []

        def kill():
            expired.append(True)
            os.killpg(p.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            for line in p.stdout:
                log.write(line)
                lines.append(line)
                if echo:
                    echo(line.rstrip("\n"))
            rc = p.wait()
        finally:
            timer.cancel()
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    if expired:
        raise subprocess.TimeoutExpired(argv, timeout, "".join(lines))
    return rc, "".join(lines)


def results(out):
    """Per-test outcome of an autotest run's output: {number: (title,
    status)}."""
    return {int(m.group(1)): (m.group(2).strip(), m.group(3))
            for m in RESULT_RE.finditer(out)}


def rechecked(out):
    """For the output of a run with RECHECK=yes (the testsuite run again
    with --recheck on what failed): (the results of the first run, the
    results with the rerun's over them)."""
    end = out.find("## Test results. ##")
    first = results(out if end < 0 else out[:end])
    return first, results(out)


def by_status(res, status):
    return {n: t for n, (t, s) in res.items() if s == status}


def summary(out):
    """The testsuite's own summary lines ("ERROR: 2523 tests were run, ..."
    or "All 2523 tests were successful."), joined on one line."""
    start = out.rfind("## Test results. ##")
    if start < 0:
        return ""
    keep = []
    for line in out[start:].splitlines()[1:]:
        line = line.strip()
        if line.startswith("##"):
            if keep:
                break
        elif line:
            keep.append(line)
    return " ".join(keep)


def failure_details(build, suite, numbers, lines=60):
    """The end of the testsuite.log of each failed test of 'suite' (autotest
    keeps the directories of failed tests) and the warnings and errors of
    its ovs-vswitchd.log: for a test that failed in OVS_VSWITCHD_STOP,
    the log lines that were not allowed are among them."""
    details = []
    top = os.path.join(build, "tests", suite + ".dir")
    for number in numbers:
        # Autotest pads the directory names to the width of the largest
        # test number.
        names = [d for d in os.listdir(top) if d.isdigit()
                 and int(d) == int(number)] if os.path.isdir(top) else []
        log = os.path.join(top, names[0] if names else str(number),
                           suite + ".log")
        try:
            with open(log) as f:
                tail = f.read().splitlines()[-lines:]
        except OSError as e:
            tail = ["(%s)" % e]
        try:
            with open(os.path.join(os.path.dirname(log),
                                   "ovs-vswitchd.log")) as f:
                tail += ["ovs-vswitchd.log:"] + [
                    line.rstrip() for line in f
                    if re.search(r"\|(WARN|ERR|EMER)\|", line)]
        except OSError:
            pass
        details.append("== %s ==\n%s" % (log, "\n".join(tail)))
    return "\n".join(details)


class KnownFailuresError(Exception):
    pass


def load_known_failures(path):
    """Reads the known-failures file: one test a line, "NUMBER | TITLE |
    REASON", '#' starts a comment.  Returns {number: (title, reason)}."""
    known = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split("|")]
            if (len(fields) != 3 or not fields[0].isdigit()
                    or not fields[1] or not fields[2]):
                raise KnownFailuresError(
                    "%s:%d: expected \"NUMBER | TITLE | REASON\""
                    % (path, lineno))
            known[int(fields[0])] = (fields[1], fields[2])
    return known


def check_known(known, listing):
    """Checks each known failure against the testsuite's own listing
    ({number: title}, from "testsuite --list"): a known failure whose
    number now names another test would hide a real one."""
    wrong = []
    for number, (title, _) in sorted(known.items()):
        if listing.get(number) != title:
            wrong.append("%d is \"%s\" in this testsuite, not \"%s\""
                         % (number, listing.get(number, "no test"), title))
    return wrong


def listing(testsuite):
    """{number: title} of every test of an autotest suite."""
    out = subprocess.run([testsuite, "--list"], capture_output=True,
                         text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+): \S+:\d+\s+(.+?)\s*$", line)
        if m:
            res[int(m.group(1))] = m.group(2)
    return res
