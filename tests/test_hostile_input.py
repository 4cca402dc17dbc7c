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

"""Hostile control input: every ovs-appctl command of ovs-vswitchd, stock
and ours, and every configuration key of ours, with arguments no operator
should type.  The switch must never die, and bad values change nothing."""

import re

from ovs_async import traffic
from ovs_async.unixctl import Unixctl, UnixctlError
from ovs_async.wait import wait_until


# Commands whose purpose is to stop or cripple the switch, or that would
# pause it until told otherwise: not fuzzed.
SKIP = {"exit", "vlog/close", "vlog/reopen", "dpctl/add-dp", "dpctl/del-dp",
        "revalidator/pause", "upcall/disable-megaflows",
        "upcall/disable-ufid", "dpif/set-dp-features",
        # Upstream's testing aids of --enable-dummy (the sandbox runs with
        # it for ours): time/stop freezes the switch's clock.
        "time/stop", "time/warp",
        # Upstream 3.1 never answers it where the openvswitch kernel
        # module is not loaded (dpif_netlink_unixctl_dispatch_mode()
        # returns without a reply): the client waits for good.
        "dpif-netlink/dispatch-mode"}
SKIP_PREFIXES = ("netdev-dummy/", "dpif-dummy/")

HOSTILE = ["", "nosuch", "v2", "-1", "-99999999999999999999",
           "99999999999999999999", "4294967296", "%s%n%x%p", "x" * 3000,
           "0x", "1e9", "../../etc/passwd"]


def commands(sb):
    text = sb.appctl("list-commands")
    return sorted({line.split()[0] for line in text.splitlines()[1:]
                   if line.strip()})


def test_appctl_fuzz_never_kills_the_switch(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    # v2 is a vhost-user port that never had a guest (no mempool).
    sb.add_port("v2", ofport=3)
    sb.set_copy_mode("defer", "v0")
    cmds = [c for c in commands(sb)
            if c not in SKIP and not c.startswith(SKIP_PREFIXES)]
    ours = {"dma-swcopy/hold", "dma-swcopy/release", "dma-swcopy/fail",
            "dma-swcopy/delay", "dma-swcopy/show",
            "netdev-dpdk/vhost-copy-mode-set",
            "netdev-dpdk/vhost-rx-copy-mode-set",
            "netdev-dpdk/vhost-copy-mode-get", "netdev-dpdk/dmadev-show",
            "netdev-dpdk/dmadev-enable",
            "netdev-dpdk/vhost-txq-hold", "netdev-dpdk/vhost-txq-release",
            "netdev-dpdk/get-mempool-info"}
    assert ours <= set(cmds), sorted(ours - set(cmds))

    # The requests that ovs-appctl would send, on one connection (a
    # process per call took two minutes).
    calls = 0
    ctl = Unixctl(sb.ctl_path())
    try:
        for cmd in cmds:
            argsets = [[]]
            argsets += [[v] for v in HOSTILE]
            argsets += [[p, v] for p in ("v2", "dma_swcopy0")
                        for v in HOSTILE]
            argsets += [[v, v, v] for v in HOSTILE[:6]]
            for args in argsets:
                try:
                    ctl.call(cmd, *args)
                except UnixctlError as e:
                    raise AssertionError("%s %r: %s; ovs-vswitchd alive: %s"
                                         % (cmd, [a[:40] for a in args], e,
                                            sb.vswitchd_alive()))
                calls += 1
    finally:
        ctl.close()
    assert sb.vswitchd_alive()
    # The commands of ours refuse bad input with an error, not a crash.
    for args, err in [
            (["dma-swcopy/hold", "nosuch"], "no such dma_swcopy engine"),
            (["dma-swcopy/hold", "dma_swcopy0", "-1"], "invalid"),
            (["dma-swcopy/fail", "dma_swcopy0", "x" * 3000], "invalid"),
            (["dma-swcopy/delay", "dma_swcopy0", "1000001"], "invalid"),
            # "no mempool" on 3.1 (patches/0012), upstream's own "Not
            # allocated" on 3.5.
            (["netdev-dpdk/get-mempool-info", "v2"],
             ("no mempool", "Not allocated")),
            (["netdev-dpdk/dmadev-enable", "nosuch"], "no such dmadev"),
            (["netdev-dpdk/dmadev-enable", "dma_swcopy0"], "is in service"),
            (["netdev-dpdk/vhost-txq-hold", "v0", "600001"],
             "invalid release time"),
            (["netdev-dpdk/vhost-txq-hold", "nosuch"],
             "nosuch is not a vhost-user port")]:
        r = sb.appctl_result(*args)
        errs = err if isinstance(err, tuple) else (err,)
        assert r.returncode != 0 and any(e in r.stderr for e in errs), (
            args, r.stderr)
    assert calls > 1000
    # Nothing that the fuzz did stuck: engine running, modes as set.
    state = sb.swcopy_state("dma_swcopy0")
    assert state["held"] == "no" and state["fail next"] == "0", state
    assert state["delay"] == "0 us", state
    assert sb.copy_mode("v0") == "defer" and sb.copy_mode("v1") == "cpu"
    sb.del_port("v2")
    traffic.check(traffic.loop_run(sb, size=512, duration=1))


def test_bad_config_values_change_nothing(sandbox_factory):
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.set_copy_mode("defer")
    before = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
    keys = [("Open_vSwitch", ".", "other_config:vhost-copy-mode"),
            ("Open_vSwitch", ".", "other_config:vhost-copy-auto-threshold"),
            ("Open_vSwitch", ".", "other_config:pmd-defer-recheck-max"),
            ("Open_vSwitch", ".", "other_config:pmd-defer-max-items"),
            ("Open_vSwitch", ".", "other_config:dma-stall-timeout"),
            ("Interface", "v0", "options:vhost-copy-mode")]
    values = ["warp", "-1", "99999999999999999999", "%s%n", "x" * 3000,
              "1e3", "0x10"]
    for table, record, key in keys:
        for value in values:
            sb.vsctl("set", table, record, '%s="%s"' % (key, value))
            assert sb.vswitchd_alive(), (key, value[:40])
        if table == "Open_vSwitch":
            # (Removing the port's option would be a valid change: it
            # ends the appctl override.)
            sb.vsctl("remove", table, record, key.split(":")[0],
                     key.split(":")[1])
    # Each key says why it ignored a bad value.
    def unexplained():
        log = sb.log_text()
        return [key for key in ("other_config:vhost-copy-mode",
                                "other_config:vhost-copy-auto-threshold",
                                "other_config:pmd-defer-recheck-max",
                                "other_config:pmd-defer-max-items",
                                "other_config:dma-stall-timeout",
                                "options:vhost-copy-mode")
                if not (re.search(re.escape(key) + r' "[^"]*" ', log)
                        or ('invalid %s "' % key) in log)]
    wait_until(lambda: not unexplained(), 10,
               lambda: "not logged: %s" % unexplained())
    # The appctl override still rules: nothing changed.
    after = sb.appctl("netdev-dpdk/vhost-copy-mode-get")
    assert re.sub(r"\d+ copies", "", after) == re.sub(r"\d+ copies", "",
                                                        before)
    traffic.check(traffic.loop_run(sb, size=512, duration=1))


def test_server_mode_port_refuses_async_modes(sandbox_factory):
    """A dpdkvhostuser (server-mode, deprecated) port cannot register its
    socket for async copies: asking it for an async mode is an error that
    changes nothing, by appctl and by its option; the other ports still
    take the mode."""
    sb = sandbox_factory(ports=2, dma=1, dma_driver="dma_swcopy")
    sb.vsctl("add-port", "br0", "s0", "--", "set", "Interface", "s0",
             "type=dpdkvhostuser")
    r = sb.appctl_result("netdev-dpdk/vhost-copy-mode-set", "s0", "defer")
    assert r.returncode != 0, r.stdout
    assert "s0 is a dpdkvhostuser (server-mode) port" in r.stderr, r.stderr
    assert "needs a dpdkvhostuserclient port" in r.stderr, r.stderr
    out = sb.appctl("netdev-dpdk/vhost-copy-mode-set", "defer")
    assert "on 2 ports (not on 1 dpdkvhostuser port" in out, out
    r = sb.appctl_result("netdev-dpdk/vhost-rx-copy-mode-set", "s0", "dma")
    assert r.returncode != 0, r.stdout
    assert "vhost Rx copy mode dma needs a dpdkvhostuserclient" in r.stderr, \
        r.stderr
    # A server-mode port takes no options at all (upstream says so), and
    # the default of every port does not apply to it.
    sb.vsctl("set", "Interface", "s0", "options:vhost-copy-mode=ring")
    sb.vsctl("set", "Open_vSwitch", ".", "other_config:vhost-copy-mode=v3")
    def logged():
        with open(sb.vswitchd_log) as f:
            return ("s0: arguments provided to device that is not "
                    "configurable" in f.read())
    wait_until(logged, 10, "s0's options not refused", interval=0.2)
    out = sb.appctl("netdev-dpdk/vhost-copy-mode-get", "s0")
    assert out.startswith("s0: cpu (from "), out
    assert "not applied" not in out, out
    assert sb.copy_mode("v0") == sb.copy_mode("v1") == "defer"
    traffic.check(traffic.loop_run(sb, size=512, duration=1))
