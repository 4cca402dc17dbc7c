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

"""Fixtures of the fork's end-to-end suite.

DPDK tests never skip: when the machine cannot run them (no hugepages and
--no-huge failing, testpmd missing, nothing built), they fail."""

import os
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "python"))

from ovs_async.sandbox import Sandbox, build_dir  # noqa: E402


@pytest.fixture(scope="session")
def build():
    return build_dir()


@pytest.fixture
def sandbox_factory(request):
    """Returns a function that starts a sandbox, stopped after the test.

    The sandbox keeps its logs (and names them) when the test failed."""
    made = []

    def make(**kwargs):
        kwargs.setdefault("log", print)
        kwargs.setdefault("keep", True)
        sb = Sandbox(**kwargs)
        made.append(sb)
        sb.start()
        return sb

    yield make
    failed = getattr(request.node, "rep_call", None)
    failed = failed is None or failed.failed
    for sb in made:
        if not failed:
            sb.keep = False
        sb.stop()
        if failed and sb.dir:
            print("sandbox logs kept in %s" % sb.dir)


@pytest.fixture
def sandbox(sandbox_factory):
    return sandbox_factory(ports=2)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
