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

"""Watches ovs-vswitchd's main thread while a test or the soak causes an
event: it must answer 'ovs-appctl version' within ANSWER_S throughout (a
bound on blocking, not a speed test)."""

import subprocess
import threading
import time

from ovs_async.sandbox import SandboxError

# The bound, in seconds.
ANSWER_S = 5.0


class Responsiveness(threading.Thread):
    """Runs 'ovs-appctl version' back to back and records the slowest
    answer (or that one never came)."""

    def __init__(self, sb):
        super().__init__(daemon=True)
        self.sb = sb
        self.worst = 0.0
        self.failures = []
        self.count = 0
        # The switch's thread stacks, taken the first time an answer is
        # late (None: never late).
        self.stacks = None
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            start = time.time()
            # Taking the stacks stops the switch (gdb attaches to it) for
            # as long as gdb takes under load: not the switch's time.
            paused = 0.0
            proc = subprocess.Popen(
                [self.sb._bin("utilities/ovs-appctl"), "--timeout=%d"
                 % (ANSWER_S * 4), "--target=" + self.sb.ctl_path(),
                 "version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True, env=self.sb.env)
            try:
                try:
                    out, err = proc.communicate(timeout=ANSWER_S)
                except subprocess.TimeoutExpired:
                    # Blocked now: where, is what a failure must show.
                    if self.stacks is None:
                        taken = time.time()
                        self.stacks = self.sb.thread_stacks(
                            "ovs-vswitchd.blocked-stacks") or ""
                        paused = time.time() - taken
                    out, err = proc.communicate(
                        timeout=max(1, ANSWER_S * 4
                                    - (time.time() - start - paused)))
                if proc.returncode and not self._done.is_set():
                    self.failures.append(err.strip())
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                self.failures.append("no answer in %d s" % (ANSWER_S * 4))
            self.worst = max(self.worst, time.time() - start - paused)
            self.count += 1
            time.sleep(0.05)

    def finish(self):
        """Stops watching; raises SandboxError if the main thread failed to
        answer, or took ANSWER_S or longer."""
        self._done.set()
        self.join(timeout=ANSWER_S * 5)
        if not self.count:
            raise SandboxError("the main thread was never asked")
        where = ("\nits threads, taken while it was blocked:\n%s"
                 % self.stacks if self.stacks else "")
        if self.failures:
            raise SandboxError("ovs-appctl version failed: %s%s"
                               % (self.failures, where))
        if self.worst >= ANSWER_S:
            raise SandboxError("main thread blocked %.1f s%s"
                               % (self.worst, where))
