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

import functools
import os
import re
import shutil
import sys

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "python"))

from ovs_async import sanitize  # noqa: E402
from ovs_async.sandbox import Sandbox, build_dir  # noqa: E402


# The sanitizer build's reports (python/ovs_async/sanitize.py): None on
# the normal build.
SANITIZER = sanitize.from_environment()

# The sandboxes running now.
LIVE_SANDBOXES = []


@pytest.fixture(autouse=True)
def sanitizer_reports():
    """Fails the test if a sanitizer reported anything meanwhile."""
    yield
    if not SANITIZER:
        return
    for sb in list(LIVE_SANDBOXES):
        SANITIZER.collect_stderr(sb)
    reports = SANITIZER.take()
    assert not reports, "sanitizer reports:\n" + "\n".join(reports)


def pytest_sessionfinish(session):
    """Reports that no test took (those of module sandboxes, read as they
    stopped after their last test) fail the run."""
    if not SANITIZER:
        return
    paths = SANITIZER.unseen()
    for path in paths:
        with open(path, errors="replace") as f:
            print("\nsanitizer report after the last test of its sandbox, "
                  "%s:\n%s" % (path, f.read()[:6000]))
    if paths:
        session.exitstatus = 1


@pytest.fixture(scope="session")
def build():
    return build_dir()


def dump_stacks(sb):
    """Prints the stacks of the sandbox's ovs-vswitchd if it still runs: a
    test that failed on a switch that hangs shows where (a CI run keeps
    only its output)."""
    stacks = sb.thread_stacks()
    if stacks:
        print("ovs-vswitchd's threads when the test failed:\n%s"
              % "\n".join(stacks.splitlines()[:600]))


class Sandboxes(object):
    """Starts sandboxes for a fixture and stops them at its end, keeping
    (and naming) their logs if a test failed meanwhile."""

    def __init__(self):
        self.made = []

    def make(self, **kwargs):
        kwargs.setdefault("log", print)
        kwargs.setdefault("keep", True)
        sb = Sandbox(**kwargs)
        self.made.append(sb)
        LIVE_SANDBOXES.append(sb)
        sb.start()
        return sb

    def stop(self, failed):
        for sb in self.made:
            if failed:
                dump_stacks(sb)
            # The logs are read for sanitizer reports before they go, and
            # stay if there was one: the test fails for it afterwards.
            sb.keep = True
            sb.stop()
            LIVE_SANDBOXES.remove(sb)
            if SANITIZER:
                SANITIZER.collect_stderr(sb)
                failed = failed or bool(SANITIZER.unseen())
            if sb.dir and not failed:
                shutil.rmtree(sb.dir, ignore_errors=True)
            elif sb.dir:
                print("sandbox logs kept in %s" % sb.dir)


@pytest.fixture
def sandbox_factory(request):
    """Returns a function that starts a sandbox, stopped after the test.

    The sandbox keeps its logs (and names them) when the test failed."""
    sandboxes = Sandboxes()
    yield sandboxes.make
    failed = getattr(request.node, "rep_call", None)
    sandboxes.stop(failed is None or failed.failed)


@pytest.fixture(scope="module")
def module_sandbox_factory(request):
    """sandbox_factory for the sandboxes that the tests of a module share:
    they keep their logs if any test of the module failed."""
    sandboxes = Sandboxes()
    failed_before = request.session.testsfailed
    yield sandboxes.make
    sandboxes.stop(request.session.testsfailed > failed_before)


@pytest.fixture
def sandbox(sandbox_factory):
    return sandbox_factory(ports=2)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def make_swcopy_sandbox(factory, mode, **kwargs):
    """A sandbox made by 'factory' whose engines are dma_swcopy (1 of them
    and 2 ports unless 'kwargs' say otherwise), in Tx copy mode 'mode'.
    'auto' is pinned to DMA (other_config:vhost-copy-auto-threshold=64:
    every frame of 64 B or more goes to the engine), so that a test that
    holds copies in flight has them in every mode."""
    other = dict(kwargs.pop("other_config", {}))
    if mode == "auto":
        other.setdefault("vhost-copy-auto-threshold", "64")
    kwargs.setdefault("ports", 2)
    kwargs.setdefault("dma", 1)
    sb = factory(dma_driver="dma_swcopy", other_config=other, **kwargs)
    sb.set_copy_mode(mode)
    return sb


@pytest.fixture
def swcopy_sandbox(sandbox_factory):
    """swcopy_sandbox(mode, **kwargs): make_swcopy_sandbox() with the
    test's sandbox factory."""
    return functools.partial(make_swcopy_sandbox, sandbox_factory)


def shared_txq_sandbox(swcopy_sandbox, dma):
    """A sandbox in auto, pinned to DMA, where two PMDs (cores 0 and 1)
    both send into v1's only Tx queue: they poll v0's two Rx queues (a
    guest with two queues on v0), and the PMD on core 1 polls v1's.
    'dma' engines (dma_swcopy)."""
    sb = swcopy_sandbox("auto", dma=dma, pmd_cpus=[0, 1])
    sb.vsctl("set", "Interface", "v0",
             "other_config:pmd-rxq-affinity=0:0,1:1")
    sb.vsctl("set", "Interface", "v1", "other_config:pmd-rxq-affinity=0:1")
    return sb


def pairwise(first, second, third):
    """The (f, s, t) of a three-parameter matrix whose third parameter has
    two values, covering every pair of values of any two parameters once:
    every f with every s, with t alternating so that every f and every s
    meet both values of t.  Half of the full product, and every
    interaction of two parameters is still tested."""
    assert len(third) == 2 and len(first) > 1 and len(second) > 1
    return [(f, s, third[(i + j) % 2])
            for i, f in enumerate(first) for j, s in enumerate(second)]


# "./ovs-fork test --quick" (pytest --quick): the subset that a contributor
# runs before every commit, in a few minutes on the normal build: the unit
# tests, each Tx copy mode and each Rx copy mode verified, one life-cycle
# event with copies held, one abandoned copy released, and one real VM.
# Each pattern must select at least one test, so that the list cannot rot.
QUICK = [
    r"tests/test_parse\.py::",
    r"tests/test_style\.py::",
    r"tests/test_vhost_frame\.py::",
    r"tests/test_foundation\.py::test_(one_version_identity|"
    r"bug_address_is_the_forks|autoreconf_leaves_no_stray_file|"
    r"guest_tool_bad_options|sandbox_bad_options|"
    r"verifier_catches_corruption|late_answer_state|"
    r"watch_catches_a_blocked_main_thread)\b",
    r"tests/test_dma_swcopy\.py::test_(driver_functional|"
    r"timed_hold_ends_while_idle)\b",
    r"tests/test_copy_modes\.py::test_mode_verified\[\w+-1518-\d\]",
    r"tests/test_rx_copy_modes\.py::test_rx_dma_verified\[\w+-1518-\d\]",
    r"tests/test_rx_copy_modes\.py::test_rx_auto_verified\b",
    r"tests/test_lifecycle\.py::test_event_with_copies_held"
    r"\[defer-guest-kill-flush50\]",
    r"tests/test_fence\.py::test_release_after_abandon\[defer-port-delete\]",
    r"tests/test_vm\.py::test_vm_traffic\[defer\]",
]


# The tests that "make check" runs on the sanitizer build, and only there
# ("pytest --build-set sanitize"; the normal build runs the others,
# "--build-set normal"): the moments where memory goes away while copies
# are in flight (a device, a guest, a bridge, the switch, an engine that
# fails or never comes back), the copy-mode switches and disruptions under
# traffic, and the real guests.  Each test runs on one build only, so that
# the whole suite fits its time (README.md, "Quickstart").  Each pattern
# must select at least one test.
SANITIZER_TESTS = [
    r"tests/test_lifecycle\.py::test_event_with_copies_held"
    r"\[\w+-(port-readd|guest-kill|mem-table)-",
    r"tests/test_lifecycle\.py::test_event_with_rx_copies_held"
    r"\[\w+-(port-readd|guest-kill|mem-table)\]",
    r"tests/test_lifecycle\.py::test_(bridge_delete|shutdown)_with_copies_held",
    r"tests/test_lifecycle\.py::test_(guest_gone_with_engine_stuck|"
    r"engine_error)\b",
    r"tests/test_copy_modes\.py::test_(mode_switches|disruptions)"
    r"_under_traffic\b",
    r"tests/test_vm\.py::",
    r"tests/test_vm_migrate\.py::",
]


# The fixtures that start a switch: a test marked "unit" uses none of them.
SANDBOX_FIXTURES = {"sandbox", "sandbox_factory", "module_sandbox_factory",
                    "swcopy_sandbox"}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "unit: needs no switch (pytest -m unit runs only these)")


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true",
                     help="run only the quick subset (tests/conftest.py, "
                     "QUICK)")
    parser.addoption("--build-set", choices=["normal", "sanitize"],
                     help="run only the tests of the normal build or of "
                     "the sanitizer build (tests/conftest.py, SANITIZER_TESTS)")


def test_id(item):
    return os.path.relpath(item.fspath, TOP) + "::" + item.name


def check_patterns(items, patterns, option):
    """Fails if a pattern selects no test of its file, when that file was
    collected."""
    ids = [test_id(item) for item in items]
    unused = [p for p in patterns
              if any(re.match(p.split("::")[0] + "::", i) for i in ids)
              and not any(re.match(p, i) for i in ids)]
    if unused:
        raise pytest.UsageError("%s: no test matches %s"
                                % (option, ", ".join(unused)))


def matches(item, patterns):
    return any(re.match(p, test_id(item)) for p in patterns)


def pytest_collection_modifyitems(config, items):
    for item in items:
        started = SANDBOX_FIXTURES & set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("unit") and started:
            raise pytest.UsageError("%s is marked unit but starts a switch "
                                    "(%s)" % (test_id(item),
                                              ", ".join(sorted(started))))
    keep = items
    if config.getoption("--quick"):
        # Every pattern must select a test.
        ids = [test_id(item) for item in items]
        unused = [p for p in QUICK if not any(re.match(p, i) for i in ids)]
        if unused:
            raise pytest.UsageError("--quick: no test matches %s"
                                    % ", ".join(unused))
        keep = [item for item in keep if matches(item, QUICK)]
    build_set = config.getoption("--build-set")
    if build_set:
        check_patterns(items, SANITIZER_TESTS, "--build-set")
        keep = [item for item in keep
                if matches(item, SANITIZER_TESTS) == (build_set == "sanitize")]
    if keep is not items:
        config.hook.pytest_deselected(
            items=[item for item in items if item not in keep])
        items[:] = keep
