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
"""Sanitizer reports of the processes that the tests start.

On the sanitizer build ("make check-sanitize" sets OVS_ASYNC_SANITIZE),
every process the tests start (ovs-vswitchd, ovsdb-server, the guests)
writes its AddressSanitizer and UndefinedBehaviorSanitizer reports to
files in one folder, and the test during which one appeared fails
(tests/conftest.py).  Leak checking is off: ovs-vswitchd does not free
everything at exit, by design."""

import glob
import itertools
import os
import re
import tempfile

# GCC's UndefinedBehaviorSanitizer, which shares AddressSanitizer's runtime
# here, ignores log_path and writes its reports to standard error.  The
# sandboxes keep each process's standard error in their log folders
# (ovs-vswitchd.out, ovsdb-server.out, guestN.log): what a report there
# says is copied to the reports' folder as a report of its own.
STDERR_FILES = ("*.out", "guest*.log")
STDERR_REPORT = re.compile(r"runtime error:|ERROR: AddressSanitizer")


class Reports(object):
    """The sanitizer reports in folder 'san_dir': those the sanitizers
    wrote there, and those collect_stderr() copied there.  A report that
    was taken is renamed *.seen."""

    def __init__(self, san_dir):
        self.dir = san_dir
        self.read_upto = {}         # How far each stderr file was read.
        self.seq = itertools.count()

    def collect_stderr(self, sb):
        """Copies the reports that appeared in the standard error of the
        processes of sandbox 'sb' since the last call."""
        if not sb.dir or not os.path.isdir(sb.logdir):
            return
        for pattern in STDERR_FILES:
            for path in sorted(glob.glob(os.path.join(sb.logdir, pattern))):
                with open(path, errors="replace") as f:
                    f.seek(self.read_upto.get(path, 0))
                    text = f.read()
                    self.read_upto[path] = f.tell()
                lines = text.splitlines()
                starts = [i for i, line in enumerate(lines)
                          if STDERR_REPORT.search(line)]
                for i in starts:
                    report = "\n".join(lines[i:i + 40])
                    name = "stderr-san.%s.%d" % (os.path.basename(path),
                                                 next(self.seq))
                    with open(os.path.join(self.dir, name), "w") as out:
                        out.write("%s:\n%s\n" % (path, report))

    def unseen(self):
        """The paths of the reports not taken yet."""
        return [path for path in sorted(glob.glob(os.path.join(self.dir,
                                                               "*san.*")))
                if not path.endswith(".seen")]

    def take(self):
        """Returns the reports not taken yet ("PATH:\\nTEXT" each, cut at
        6000 characters) and marks them taken."""
        reports = []
        for path in self.unseen():
            with open(path, errors="replace") as f:
                reports.append("%s:\n%s" % (path, f.read()[:6000]))
            os.rename(path, path + ".seen")
        return reports


def from_environment():
    """On the sanitizer build (OVS_ASYNC_SANITIZE set), makes the reports'
    folder, points the sanitizers of every process started from now on to
    it (ASAN_OPTIONS, UBSAN_OPTIONS) and returns its Reports; otherwise
    returns None."""
    if not os.environ.get("OVS_ASYNC_SANITIZE"):
        return None
    san_dir = tempfile.mkdtemp(prefix="ovs-async-san-")
    # log_exe_name puts the program's name in each report's file name:
    # asan.ovs-vhost-guest.1234 rather than asan.1234.
    os.environ["ASAN_OPTIONS"] = ("detect_leaks=0:log_exe_name=1:"
                                  "log_path=%s/asan" % san_dir)
    os.environ["UBSAN_OPTIONS"] = ("print_stacktrace=1:log_exe_name=1:"
                                   "log_path=%s/ubsan" % san_dir)
    return Reports(san_dir)
