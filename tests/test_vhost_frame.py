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

"""The guest's frame format and verifier (utilities/ovs-vhost-frame.c),
unit-tested without EAL or hugepages by tests/test-vhost-frame.c: every
damage that ovs-vhost-guest(8) lists must be detected and counted as it
says."""

import os
import re
import subprocess

import pytest

pytestmark = pytest.mark.unit


def test_frame_verifier(build):
    r = subprocess.run([os.path.join(build, "tests/test-vhost-frame")],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    m = re.search(r"ok: (\d+) frame sizes \(plain and VXLAN\), (\d+) "
                  r"verifications, (\d+) single-byte changes detected",
                  r.stdout)
    assert m, r.stdout
    sizes, checks, flips = map(int, m.groups())
    # Every size from the smallest to 2100 B and three large ones, for
    # both formats; at least two changes of every byte of 9 sizes each.
    assert sizes >= (2100 - 64 + 1) + (2100 - 114 + 1) + 6, m.group(0)
    assert flips >= 2 * 2 * (9000 + 2098 + 1518 + 1000 + 512), m.group(0)
    assert checks > flips
