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

"""Waiting for a condition, with a bound: the one polling loop of the
tests."""

import time


class WaitTimeout(AssertionError):
    pass


def wait_until(cond, timeout, what, interval=0.05, error=WaitTimeout):
    """Calls 'cond' every 'interval' seconds until it returns a true value,
    and returns that value.  After 'timeout' seconds raises 'error' with
    'what' (or what 'what()' returns, computed then)."""
    deadline = time.time() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.time() >= deadline:
            raise error(what() if callable(what) else what)
        time.sleep(interval)
