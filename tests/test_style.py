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

"""Our C files pass upstream's checkpatch.py ("make check-style",
utilities/ovs-check-style), and the checker finds what it must."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKER = os.path.join(TOP, "utilities", "ovs-check-style")


def check_style(build, *files):
    return subprocess.run(
        [sys.executable, CHECKER, "--checkpatch",
         os.path.join(build, "utilities", "checkpatch.py")] + list(files),
        capture_output=True, text=True, timeout=300)


def test_sources_pass_checkpatch(build):
    r = check_style(build)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    n_files = int(r.stdout.split("ovs-check-style: ")[1].split()[0])
    assert n_files >= 20, r.stdout


def test_checker_reports_findings(build, tmp_path):
    """A file with a long line, a bare allocator and strerror() fails, each
    finding with its line; the allocator waiver of the DPDK-only guest does
    not extend to other files."""
    bad = tmp_path / "bad.c"
    bad.write_text("static void\n"
                   "f(void)\n"
                   "{\n"
                   "    char *p = malloc(10);\n"
                   "    puts(strerror(1)); /* " + "y" * 60 + " */\n"
                   "}\n")
    r = check_style(build, str(bad))
    print(r.stdout, r.stderr)
    assert r.returncode == 1, r.stdout
    assert "bad.c:4: ERROR: Use xmalloc() in place of malloc()" in r.stdout
    assert "bad.c:5: ERROR: Use ovs_strerror() in place of strerror()" \
        in r.stdout
    assert "bad.c:5: WARNING: Line is 89 characters long" in r.stdout
    assert "1 file(s) checked, 3 finding(s)" in r.stdout
