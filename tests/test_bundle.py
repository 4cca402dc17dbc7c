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

"""The bench bundle ("make bench-bundle", utilities/ovs-async-bundle):
under 60 MiB, every library of every program and driver inside it as the
bundled loader resolves them, and a benchmark run from it verified on a
machine whose DPDK driver folder is empty (a mount namespace hides the
system's)."""

import csv
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from ovs_async.sandbox import dpdk_pmd_dir, fork_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "utilities", "ovs-async-bundle")


@pytest.fixture(scope="module")
def bundle():
    # Not under /tmp: EAL loads no driver from below a world-writable
    # directory.
    base = tempfile.mkdtemp(prefix="ovs-async-bundle-",
                            dir=os.path.expanduser("~"))
    out = os.path.join(base, "ovs-async-bench")
    try:
        p = subprocess.run([sys.executable, BUNDLE, "--out", out],
                           capture_output=True, text=True, timeout=600)
        print(p.stdout, p.stderr)
        assert p.returncode == 0, p.stderr
        yield out
    finally:
        shutil.rmtree(base)


def du(path):
    return sum(os.lstat(os.path.join(r, f)).st_size
               for r, _, files in os.walk(path) for f in files)


def test_bundle_is_self_contained(bundle):
    assert du(bundle) < 60 * 2**20, du(bundle)
    loader, = glob.glob(os.path.join(bundle, "lib", "ld-linux*"))
    objects = (glob.glob(os.path.join(bundle, "bin", "*"))
               + glob.glob(os.path.join(bundle, "lib", "dpdk", "*")))
    assert len(objects) >= 8 + 7, objects
    for obj in objects:
        obj = os.path.realpath(obj)
        listing = subprocess.run(
            [loader, "--inhibit-cache", "--library-path",
             os.path.join(bundle, "lib"), "--list", obj],
            capture_output=True, text=True, check=True).stdout
        resolved = re.findall(r"=> (/\S+)", listing)
        assert resolved, listing
        outside = [p for p in resolved
                   if not os.path.realpath(p).startswith(bundle + "/")]
        assert not outside, (obj, outside)
    # The programs are the fork's, run through the bundle's loader.
    version = subprocess.run(
        [os.path.join(bundle, "build", "vswitchd", "ovs-vswitchd"),
         "--version"], capture_output=True, text=True, check=True).stdout
    assert fork_version() in version, version


def test_bundle_refuses_world_writable_place(bundle, tmp_path):
    """Under /tmp DPDK would load no driver: the bundle says so at once."""
    moved = str(tmp_path / "b")
    shutil.copytree(bundle, moved, symlinks=True)
    p = subprocess.run([os.path.join(moved, "run"), "bench", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "world-writable" in p.stderr, p


def test_bench_from_bundle_without_dpdk(bundle, tmp_path):
    """Verified traffic through Tx and Rx copies on the engine, run from
    the bundle with the system's DPDK drivers hidden: EAL can only load
    the bundle's."""
    out = str(tmp_path / "results")
    script = ("mount -t tmpfs none %s && exec %s bench --modes cpu,defer/dma "
              "--sizes 512 --reps 1 --duration 1 --no-plots --out %s"
              % (dpdk_pmd_dir()[0], os.path.join(bundle, "run"), out))
    p = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        "sh", "-c", script], capture_output=True, text=True,
                       timeout=600)
    print(p.stdout[-3000:], p.stderr[-3000:])
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "runs.csv")) as f:
        rows = list(csv.DictReader(f))
    assert {r["mode"] for r in rows} == {"cpu", "defer/dma"}, rows
    for r in rows:
        assert r["verdict"] == "verified", r
    dma = [r for r in rows if r["mode"] == "defer/dma"]
    assert all(int(r["dma_copies"]) > 0 and int(r["rx_dma_copies"]) > 0
               for r in dma), dma
