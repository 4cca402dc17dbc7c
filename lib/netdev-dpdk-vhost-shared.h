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

#ifndef NETDEV_DPDK_VHOST_SHARED_H
#define NETDEV_DPDK_VHOST_SHARED_H 1

/* What the vhost copy modes of both directions share: vring numbering, the
 * count of a vring's copies in flight, and statistics.  Tx lives in
 * netdev-dpdk-vhost-tx.c, Rx in netdev-dpdk-vhost-rx.c. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ovs-atomic.h"
#include "util.h"

struct netdev_custom_stats;

/* vhost vring index of Tx queue 'qid' (the guest's Rx virtqueue) and of
 * Rx queue 'qid' (the guest's Tx virtqueue). */
#define TXQ_VRING(QID) ((QID) * 2)
#define RXQ_VRING(QID) ((QID) * 2 + 1)

/* True if vhost vring 'vring' is an Rx queue's. */
static inline bool
vring_is_rx(int vring)
{
    return vring % 2;
}

/* The Tx or Rx queue of vhost vring 'vring'. */
static inline int
vring_qid(int vring)
{
    return vring / 2;
}

/* Runs the statement that follows once for each dmadev id in 'MASK' (a
 * bit per id), lowest first, with 'DMA' set to it. */
#define VHOST_FOR_EACH_DMA(DMA, MASK)                                   \
    for (uint64_t dma_map__ = (MASK);                                   \
         dma_map__ && ((DMA) = rightmost_1bit_idx(dma_map__), true);    \
         dma_map__ = zero_rightmost_1bit(dma_map__))

/* Copies of one vring in flight on DMA engines. */
struct vhost_vq_copies {
    atomic_int inflight;            /* Submitted, not yet taken back. */
    atomic_uint64_t dma_mask;       /* dmadevs that may hold them. */
};

/* Counters of the copy modes, added to and read from any thread. */
static inline void
vhost_stat_add(atomic_uint64_t *counter, uint64_t n)
{
    uint64_t orig;

    atomic_add_relaxed(counter, n, &orig);
}

static inline uint64_t
vhost_stat_get(const atomic_uint64_t *counter)
{
    uint64_t v;

    atomic_read_relaxed(CONST_CAST(atomic_uint64_t *, counter), &v);
    return v;
}

/* Interface statistics of the copy modes ("ovs_async_..."), appended to
 * those a port already has (defined in netdev-dpdk-vhost-rx.c). */
struct vhost_stat_value {
    const char *name;
    uint64_t value;
};

void vhost_stats_append(struct netdev_custom_stats *,
                        const struct vhost_stat_value *, size_t n);

#endif /* netdev-dpdk-vhost-shared.h */
