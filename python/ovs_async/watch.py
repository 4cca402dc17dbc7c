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
event: it must answer a 'version' request (what 'ovs-appctl version' sends)
within ANSWER_S throughout (a bound on blocking, not a speed test)."""

import os
import socket
import subprocess
import threading
import time

from ovs_async.sandbox import SandboxError
from ovs_async.unixctl import Unixctl, UnixctlError

# The bound, in seconds.
ANSWER_S = 5.0

# Linux x86-64 system call numbers that a late answer's parties sit in.
SYSCALLS = {0: "read", 1: "write", 7: "poll", 35: "nanosleep", 42: "connect",
            44: "sendto", 45: "recvfrom", 59: "execve", 61: "wait4",
            202: "futex", 230: "clock_nanosleep", 232: "epoll_wait",
            271: "ppoll", 281: "epoll_pwait"}


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as e:
        return "(%s)" % (e.strerror or e)


def task_state(path):
    """One line on the task (a process or thread) at /proc path 'path':
    its state, the CPU it last ran on, the CPU time it used so far, its
    context switches and the system call it sits in.  Reads /proc only:
    the task is not stopped."""
    stat = _read(path + "/stat")
    if ")" not in stat:
        return "%s: %s" % (path, stat)
    comm = stat[stat.find("(") + 1:stat.rfind(")")]
    f = stat[stat.rfind(")") + 2:].split()
    hz = os.sysconf("SC_CLK_TCK")
    status = dict(line.split(":\t", 1) for line in
                  _read(path + "/status").splitlines() if ":\t" in line)
    call = _read(path + "/syscall").split()
    if call and call[0].isdigit():
        nr = int(call[0])
        call = SYSCALLS.get(nr, "syscall %d" % nr)
    else:
        call = " ".join(call[:1]) or "?"
    return ("%s %s: state %s, cpu %s, %.2f s user %.2f s system, "
            "%s voluntary %s involuntary switches, in %s (%s)"
            % (os.path.basename(path), comm, f[0], f[36],
               int(f[11]) / hz, int(f[12]) / hz,
               status.get("voluntary_ctxt_switches", "?"),
               status.get("nonvoluntary_ctxt_switches", "?"), call,
               _read(path + "/wchan") or "-"))


def late_answer_state(sb, client):
    """What the parties of a late answer are doing, without stopping any
    of them: the client (its task's /proc path), the switch's main
    thread, the switch's control socket's queue of connections not yet
    accepted, and the machine's runnable load.  Returns the text (also
    kept in the log folder as ovs-vswitchd.late-answer)."""
    lines = ["client:      " + task_state(client)]
    pid = sb.procs["ovs-vswitchd"].pid
    lines.append("main thread: " + task_state("/proc/%d/task/%d"
                                                % (pid, pid)))
    try:
        # The switch has a network namespace of its own.
        listeners = subprocess.run(
            ["nsenter", "--net=/proc/%d/ns/net" % pid, "ss", "-xlH"],
            capture_output=True, text=True, timeout=10).stdout
        # Netid State Recv-Q (connections waiting for accept()) Send-Q
        # (backlog) Local-Address...
        mine = [f for f in (line.split() for line in listeners.splitlines())
                if len(f) > 4 and f[4] == sb.ctl_path()]
        lines.append("listener:    %s connections not accepted, backlog %s"
                     % (mine[0][2], mine[0][3]) if mine else
                     "listener:    not found")
    except (OSError, subprocess.SubprocessError) as e:
        lines.append("listener:    ss failed: %s" % e)
    lines.append("load:        %s; cpu pressure %s"
                 % (_read("/proc/loadavg"),
                    _read("/proc/pressure/cpu").splitlines()[0]))
    try:
        lines.append(subprocess.run(
            ["ps", "-eLo", "pid,tid,psr,stat,ni,pcpu,wchan:20,comm",
             "--sort=-pcpu"], capture_output=True, text=True,
            timeout=10).stdout.rstrip())
    except (OSError, subprocess.SubprocessError) as e:
        lines.append("ps failed: %s" % e)
    text = "\n".join(lines)
    if sb.dir and os.path.isdir(sb.logdir):
        with open(os.path.join(sb.logdir, "ovs-vswitchd.late-answer"),
                  "a") as f:
            f.write(text + "\n\n")
    return text


class Responsiveness(threading.Thread):
    """Asks the switch for its version back to back, as 'ovs-appctl
    version' does but from this process, on a new connection each time,
    and records the slowest answer (or that one never came).  A client
    process of its own would add its start and its exit to the time, and
    both can take seconds on a loaded machine: an ovs-appctl of the
    sanitizer build was once seen 5 s late in the middle of its exit
    (state D, tearing down its address space), after its answer."""

    def __init__(self, sb):
        super().__init__(daemon=True)
        self.sb = sb
        self.worst = 0.0
        self.failures = []
        self.count = 0
        # The switch's thread stacks, taken the first time an answer is
        # late (None: never late).
        self.stacks = None
        # What this thread, the main thread and the machine did then, and
        # this thread again once the stacks were taken.
        self.late = None
        self._done = threading.Event()

    def _ask(self):
        """One question.  Returns the seconds that taking the stacks
        stopped the switch for, which are not the switch's."""
        paused = 0.0
        start = time.time()
        try:
            conn = Unixctl(self.sb.ctl_path(), timeout=ANSWER_S)
        except UnixctlError as e:
            if not self._done.is_set():
                self.failures.append(str(e))
            return paused
        try:
            conn.send("version")
            try:
                error, _ = conn.reply()
            except socket.timeout:
                # Late now: where everyone is, is what a failure must
                # show.
                if self.stacks is None:
                    me = "/proc/self/task/%d" % threading.get_native_id()
                    self.late = late_answer_state(self.sb, me)
                    taken = time.time()
                    self.stacks = self.sb.thread_stacks(
                        "ovs-vswitchd.blocked-stacks") or ""
                    paused = time.time() - taken
                    self.late += ("\nafter %.1f s of taking stacks, "
                                  "client: %s" % (paused, task_state(me)))
                conn.sock.settimeout(max(
                    1, ANSWER_S * 4 - (time.time() - start - paused)))
                error, _ = conn.reply()
            if error:
                self.failures.append(error)
        except socket.timeout:
            self.failures.append("no answer in %d s" % (ANSWER_S * 4))
        except UnixctlError as e:
            if not self._done.is_set():
                self.failures.append(str(e))
        finally:
            conn.close()
        self.worst = max(self.worst, time.time() - start - paused)
        return paused

    def run(self):
        while not self._done.is_set():
            self._ask()
            self.count += 1
            time.sleep(0.05)

    def finish(self):
        """Stops watching; raises SandboxError if the main thread failed to
        answer, or took ANSWER_S or longer."""
        self._done.set()
        self.join(timeout=ANSWER_S * 5)
        if not self.count:
            raise SandboxError("the main thread was never asked")
        where = ("\nwhen the answer was late:\n%s"
                 "\nits threads, taken while it was blocked:\n%s"
                 % ("\n".join(self.late.splitlines()[:4]
                               + self.late.splitlines()[-1:]),
                    self.stacks or "(gdb not installed)")
                 if self.late else "")
        if self.failures:
            raise SandboxError("asking for the version failed: %s%s"
                               % (self.failures, where))
        if self.worst >= ANSWER_S:
            raise SandboxError("main thread blocked %.1f s%s"
                               % (self.worst, where))
