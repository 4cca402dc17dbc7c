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
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            start = time.time()
            try:
                r = subprocess.run(
                    [self.sb._bin("utilities/ovs-appctl"), "--timeout=%d"
                     % (ANSWER_S * 4), "--target=" + self.sb.ctl_path(),
                     "version"], capture_output=True, text=True,
                    env=self.sb.env, timeout=ANSWER_S * 4)
                if r.returncode and not self._done.is_set():
                    self.failures.append(r.stderr.strip())
            except subprocess.TimeoutExpired:
                self.failures.append("no answer in %d s" % (ANSWER_S * 4))
            self.worst = max(self.worst, time.time() - start)
            self.count += 1
            time.sleep(0.05)

    def finish(self):
        """Stops watching; raises SandboxError if the main thread failed to
        answer, or took ANSWER_S or longer."""
        self._done.set()
        self.join(timeout=ANSWER_S * 5)
        if not self.count:
            raise SandboxError("the main thread was never asked")
        if self.failures:
            raise SandboxError("ovs-appctl version failed: %s"
                               % self.failures)
        if self.worst >= ANSWER_S:
            raise SandboxError("main thread blocked %.1f s" % self.worst)
