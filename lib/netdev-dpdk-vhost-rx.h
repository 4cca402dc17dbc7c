/*
 * Copyright (c) 2026 The Open vSwitch async vhost fork authors.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at:
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

#ifndef NETDEV_DPDK_VHOST_RX_H
#define NETDEV_DPDK_VHOST_RX_H 1

#include <stdbool.h>
#include <stdint.h>

#include "netdev-dpdk-vhost-shared.h"
#include "openvswitch/dynamic-string.h"
#include "ovs-atomic.h"
#include "util.h"

struct netdev_custom_stats;
struct rte_mbuf;
struct rte_mempool;

/* Copy modes of vhost-user Rx (the guest's Tx, vhost's dequeue): who copies
 * the packets out of guest memory.
 *
 * In 'dma' the PMD thread that polls an Rx queue submits the copies of the
 * guest's next packets to its DMA engine and receives those whose copies
 * completed (DPDK's rte_vhost_async_try_dequeue_burst()), in the guest's
 * order: completions are polled by that same PMD, which owns the queue.
 * Its only lock keeps a clear out (vhost_rx_lock(), which the PMD
 * try-locks), and the stash that a clear fills has a lock of its own.
 * 'auto' chooses per Rx queue between the CPU and 'dma' by what each costs
 * the PMD per packet, with the policy of netdev-dpdk-vhost-auto.h.
 *
 * A queue that leaves DMA (a mode change, a thread without an engine,
 * 'auto' choosing the CPU) first receives what it has in flight, and only
 * then copies on the CPU, so that the guest's packets keep their order.
 *
 * The life cycle (async channels, clears before vhost unmaps guest memory)
 * is netdev-dpdk-vhost-async.c's: a clear finishes the copies of a queue
 * and keeps their packets in the queue's stash, which the next dequeue
 * delivers first, or drops them (counted) when the device goes away. */

enum vhost_rx_mode {
    VHOST_RX_CPU,
    VHOST_RX_DMA,
    VHOST_RX_AUTO,
    VHOST_RX_N_MODES
};

const char *vhost_rx_mode_name(enum vhost_rx_mode);
bool vhost_rx_mode_from_string(const char *, enum vhost_rx_mode *);
/* True if 'mode' copies on DMA engines: the device needs async channels on
 * its guest Tx vrings. */
bool vhost_rx_mode_dma(enum vhost_rx_mode);

/* Per-port state of the Rx copy modes. */
struct vhost_rx;

struct vhost_rx *vhost_rx_create(const char *port_name);
void vhost_rx_destroy(struct vhost_rx *);

/* From the port's reconfiguration, while no PMD uses it: the port is to
 * use 'mode' ('again' is false when it switches to it). */
void vhost_rx_enter(struct vhost_rx *, enum vhost_rx_mode, bool again);

/* Receives up to 'count' packets from Rx queue 'qid' of device 'vid' in
 * 'mode', into mbufs of 'mp'.  Called only by the PMD thread that polls
 * the queue.  'mode' is VHOST_RX_CPU while the device has no async
 * channels. */
uint16_t vhost_rx_dequeue(struct vhost_rx *, enum vhost_rx_mode, int vid,
                          int qid, struct rte_mempool *mp,
                          struct rte_mbuf **pkts, uint16_t count);

/* The copies of Rx queue 'qid', for the life-cycle paths. */
struct vhost_vq_copies *vhost_rx_copies(struct vhost_rx *, int qid);

/* A clear of Rx queue 'qid' holds the queue's lock while it completes its
 * copies and stashes their packets, so that they keep their order with
 * what the PMD receives. */
void vhost_rx_lock(struct vhost_rx *, int qid);
void vhost_rx_unlock(struct vhost_rx *, int qid);

/* Keeps 'n' packets that a clear of Rx queue 'qid' completed, for its next
 * dequeue. */
void vhost_rx_stash(struct vhost_rx *, int qid, struct rte_mbuf **pkts,
                    uint16_t n);

/* The device went away: drops (and counts) what the stashes hold and
 * forgets the copies in flight. */
void vhost_rx_reset(struct vhost_rx *);

/* Packets in the stash of Rx queue 'qid'. */
uint32_t vhost_rx_stashed(const struct vhost_rx *, int qid);

/* Statistics: the port's rx_dropped, custom statistics, and the mode's
 * state of Rx queue 'qid' for vhost-copy-mode-get. */
uint64_t vhost_rx_dropped(const struct vhost_rx *);
void vhost_rx_get_custom_stats(const struct vhost_rx *,
                               struct netdev_custom_stats *);
void vhost_rx_format_rxq(struct ds *, const struct vhost_rx *,
                         enum vhost_rx_mode, int qid);

/* Registers the per-PMD counters of Rx copies (once). */
void vhost_rx_init(void);

#endif /* netdev-dpdk-vhost-rx.h */
