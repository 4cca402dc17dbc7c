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

"""The suite's collection of sanitizer reports written to standard error
(GCC's UndefinedBehaviorSanitizer ignores log_path): each report in a
sandbox's *.out or guest log becomes one report file, once."""

import os
import types

import pytest

from ovs_async import sanitize

pytestmark = pytest.mark.unit

UB = ("lib/netdev-dpdk-vhost-rx.c:264:9: runtime error: null pointer "
      "passed as argument 1, which is declared to never be null\n"
      "    #0 0x55b37212178b in vhost_rx_stash "
      "lib/netdev-dpdk-vhost-rx.c:264\n")
ASAN = ("==123==ERROR: AddressSanitizer: heap-use-after-free on address "
        "0x602000000010\n    #0 0x1 in f x.c:1\n")


def test_stderr_reports_collected_once(tmp_path):
    san = tmp_path / "san"
    san.mkdir()
    logdir = tmp_path / "sb" / "log"
    logdir.mkdir(parents=True)
    reports = sanitize.Reports(str(san))
    sb = types.SimpleNamespace(dir=str(tmp_path / "sb"), logdir=str(logdir))

    (logdir / "ovs-vswitchd.out").write_text("opened log file\n" + UB)
    (logdir / "guest1.log").write_text("guest: 100 frames verified\n")
    (logdir / "ovs-vswitchd.log").write_text("runtime error: not stderr\n")
    reports.collect_stderr(sb)
    found = reports.unseen()
    assert len(found) == 1, found
    with open(found[0]) as f:
        text = f.read()
    assert "vhost_rx_stash" in text and "ovs-vswitchd.out" in text, text
    os.rename(found[0], found[0] + ".seen")

    # Nothing new: nothing collected.  Then one report more in each file.
    reports.collect_stderr(sb)
    assert reports.unseen() == []
    with open(logdir / "ovs-vswitchd.out", "a") as f:
        f.write(ASAN)
    with open(logdir / "guest1.log", "a") as f:
        f.write(UB)
    reports.collect_stderr(sb)
    found = reports.unseen()
    assert len(found) == 2, found
    texts = [open(p).read() for p in found]
    assert any("heap-use-after-free" in t for t in texts), texts
    assert any("guest1.log" in t and "runtime error" in t for t in texts)
