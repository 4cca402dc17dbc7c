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

"""Upstream's own testsuites, run on the fork's tree with the harness
fixes of patches/000[1-5]: "make check-dpdk" and the datapath part of
"make check".  They must pass, and check-dpdk may skip only the tests that
need a physical NIC or AVX512."""

import os
import re
import subprocess

from ovs_async.sandbox import ensure_hugepages

# Tests that cannot run on a VM without a DPDK-bound NIC or AVX512.
ALLOWED_SKIPS = re.compile(r"phy port|add standard DPDK port|MFEX")


def run_suite(build, target, flags, logname, timeout):
    r = subprocess.run(
        ["make", "-C", build, target, "PYTHON3=/usr/bin/python3",
         "TESTSUITEFLAGS=" + flags],
        capture_output=True, text=True, timeout=timeout)
    out = r.stdout + r.stderr
    os.makedirs(os.path.join(build, "..", "logs"), exist_ok=True)
    with open(os.path.join(build, "..", "logs", logname), "w") as f:
        f.write(out)
    return r.returncode, out


def results(out):
    """Per-test outcome from an autotest run's output: {title: status}."""
    res = {}
    for line in out.splitlines():
        m = re.match(r"\s*\d+: (.+?)\s+(ok|skipped|FAILED|expected "
                     r"failure)\b", line)
        if m:
            res[m.group(1).strip()] = m.group(2)
    return res


def failure_details(build, suite, out, lines=60):
    """The end of the testsuite.log of each failed test of 'suite' (autotest
    keeps the directories of failed tests) and the warnings and errors of
    its ovs-vswitchd.log: for a test that failed in OVS_VSWITCHD_STOP,
    the log lines that were not allowed are among them."""
    details = []
    for m in re.finditer(r"^\s*(\d+): .*FAILED", out, re.M):
        # Autotest pads the directory names to the width of the largest
        # test number.
        top = os.path.join(build, "tests", suite + ".dir")
        names = [d for d in os.listdir(top) if d.isdigit()
                 and int(d) == int(m.group(1))] if os.path.isdir(top) else []
        log = os.path.join(top, names[0] if names else m.group(1),
                           suite + ".log")
        try:
            with open(log) as f:
                tail = f.read().splitlines()[-lines:]
            with open(os.path.join(os.path.dirname(log),
                                   "ovs-vswitchd.log")) as f:
                tail += ["ovs-vswitchd.log:"] + [
                    line.rstrip() for line in f
                    if re.search(r"\|(WARN|ERR|EMER)\|", line)]
        except OSError as e:
            tail = ["(%s)" % e]
        details.append("== %s ==\n%s" % (log, "\n".join(tail)))
    return "\n".join(details)


def test_check_dpdk(build):
    why = ensure_hugepages()
    assert why is None, "check-dpdk needs hugepages, but " + why
    rc, out = run_suite(build, "check-dpdk", "-j1", "check-dpdk.log", 1800)
    res = results(out)
    failed = [t for t, s in res.items() if s == "FAILED"]
    skipped = [t for t, s in res.items() if s == "skipped"]
    ok = [t for t, s in res.items() if s == "ok"]
    print("check-dpdk: %d ok, %d skipped, %d failed" % (
        len(ok), len(skipped), len(failed)))
    assert not failed and rc == 0, "%s\n%s" % (
        out[-3000:], failure_details(build, "system-dpdk-testsuite", out))
    unexpected = [t for t in skipped if not ALLOWED_SKIPS.search(t)]
    assert not unexpected, "skipped but should run here: %s" % unexpected
    assert len(ok) >= 16, res


def test_check_datapath_subset(build):
    flags = "-j2 -k dpif-netdev -k pmd -k dpdk"
    rc, out = run_suite(build, "check", flags, "check-datapath.log", 2400)
    res = results(out)
    failed = [t for t, s in res.items() if s == "FAILED"]
    ok = [t for t, s in res.items() if s == "ok"]
    print("make check %s: %d ok, %d failed, %d total" % (
        flags, len(ok), len(failed), len(res)))
    assert not failed and rc == 0, "%s\n%s" % (
        out[-3000:], failure_details(build, "testsuite", out))
    assert len(ok) >= 19, res
