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

"""The vhost copy modes, in the order of ovs-vswitchd's table of modes
(vhost_copy_modes[] in lib/netdev-dpdk-vhost-async.c), which
"netdev-dpdk/vhost-copy-mode-get" prints on its "available:" line
(tests/test_copy_modes.py checks that they agree), and the Rx copy modes
(rx_copy_modes[] in lib/netdev-dpdk-vhost-rx.c, its "available Rx:"
line)."""

COPY_MODES = ("cpu", "v3", "ring", "defer", "auto")

# The modes that copy with DMA engines.
ASYNC_MODES = tuple(m for m in COPY_MODES if m != "cpu")

# The modes that always copy with DMA engines ("auto" chooses per queue).
FIXED_ASYNC_MODES = tuple(m for m in ASYNC_MODES if m != "auto")

# Rx (the guest's Tx, vhost dequeue).
RX_COPY_MODES = ("cpu", "dma", "auto")

RX_ASYNC_MODES = tuple(m for m in RX_COPY_MODES if m != "cpu")
