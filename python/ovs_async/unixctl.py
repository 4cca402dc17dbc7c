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

"""A unixctl client on one connection, for tests that send thousands of
commands: what ovs-appctl sends (a JSON-RPC request with the command and
its arguments as strings), without a process per command."""

import json
import socket


class UnixctlError(Exception):
    """The connection failed or closed: the daemon may be gone."""


class Unixctl(object):
    def __init__(self, path, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            raise UnixctlError("cannot connect to %s: %s" % (path, e))
        self.buf = b""
        self.decoder = json.JSONDecoder()
        self.next_id = 0

    def call(self, method, *params):
        """Runs one command.  Returns (error, result): the daemon's error
        text or None, and its output or None."""
        self.send(method, *params)
        return self.reply()

    def send(self, method, *params):
        """Sends one command; reply() waits for its answer."""
        self.next_id += 1
        req = {"method": method, "params": [str(p) for p in params],
               "id": self.next_id}
        try:
            self.sock.sendall(json.dumps(req).encode())
        except OSError as e:
            raise UnixctlError("%s: %s" % (method, e))

    def reply(self):
        """Waits for the answer to the command that send() sent last:
        returns (error, result) as call() does.  Raises socket.timeout
        (and keeps what came so far) if none came within the socket's
        timeout, so that a caller may wait again."""
        try:
            while True:
                # One request at a time: the buffer holds its reply only.
                text = self.buf.decode(errors="replace").strip()
                if text:
                    try:
                        reply, end = self.decoder.raw_decode(text)
                    except ValueError:
                        reply = None
                    if reply is not None and end == len(text):
                        self.buf = b""
                        if reply.get("id") == self.next_id:
                            return reply.get("error"), reply.get("result")
                        continue
                data = self.sock.recv(65536)
                if not data:
                    raise UnixctlError("connection closed by the daemon")
                self.buf += data
        except socket.timeout:
            raise
        except OSError as e:
            raise UnixctlError("reply: %s" % e)

    def close(self):
        self.sock.close()
