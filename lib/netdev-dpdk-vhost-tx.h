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

#ifndef NETDEV_DPDK_VHOST_TX_H
#define NETDEV_DPDK_VHOST_TX_H 1

/* vhost-user Tx (the guest's Rx, vhost's enqueue): the Tx queues' state
 * and the send path of every Tx copy mode, in netdev-dpdk-vhost-tx.c.
 * A packet goes vhost_async_send() -> (put aside, when the queue's lock
 * is taken: set_aside() -> the PMD's deferred work, defer_work() ->
 * send_put_aside()) -> locked_send() -> send_from_ring() -> the mode's
 * 'send'; its copy is retired by the sender's deferred work ('defer',
 * 'auto'), or by the PMD that polls the port's Rx queue ('v3', 'ring':
 * vhost_async_rx_hook()).  The mode table that names these functions, and
 * the life cycle that clears and resets the queues, are
 * netdev-dpdk-vhost-async.c's.  Documentation/internals.md follows a
 * packet through them. */

#include <stdbool.h>
#include <stdint.h>

#include <rte_spinlock.h>

#include "netdev-dpdk-vhost-shared.h"
#include "ovs-atomic.h"
#include "util.h"

struct copy_mode;
struct ds;
struct netdev_custom_stats;
struct rte_mbuf;
struct rte_ring;
struct vhost_async;
struct vhost_auto;

/* The mbufs that vhost holds for the copies in flight of one Tx vring, in
 * the order in which it submitted them, which is the order in which it
 * returns them (vhost returns a vring's completed copies from its first in
 * flight on).  vhost has no call that cancels a copy and hands its mbuf
 * back: when a device goes away with copies that their fenced engine will
 * never complete, these are the only pointers to their mbufs left, and
 * reset_queues() frees them.
 *
 * 'slots' has room for a vring's copies in flight plus one submit burst.
 * Its senders, serialized by the txq lock, write a burst's mbufs past
 * 'tail' before they submit it (vhost may return them to a poller as soon
 * as it has them) and then move 'tail' past those vhost took.  Completion
 * pollers, serialized by vhost_tx_vq_lock(), move 'head' past those vhost
 * returned, and check that they are the same mbufs; if they ever are not,
 * 'lost' stops the tracking for good and nothing is freed (a leak, never a
 * double free). */
struct vhost_held {
    struct rte_mbuf **slots;        /* NULL: not tracked. */
    uint32_t mask;                  /* Slots - 1 (a power of 2 minus 1). */
    atomic_uint32_t head;           /* Next to be returned. */
    atomic_uint32_t tail;           /* One past the last submitted. */
    atomic_bool lost;               /* Out of step with vhost: untracked. */
};

/* Per Tx queue state, one cache line each, written by PMD threads. */
struct vhost_async_txq {
    PADDED_MEMBERS(CACHE_LINE_SIZE,
        struct vhost_vq_copies copies;  /* Packets submitted, not yet
                                         * retired. */
        atomic_bool orphaned;       /* A PMD's drain left copies in flight
                                     * that no list polls: the next sender
                                     * polls every dmadev of the queue. */
        struct rte_ring *ring;      /* 'ring' mode: packets to submit;
                                     * 'puts_aside' modes: packets of
                                     * senders that found the lock taken. */
        ATOMIC(rte_spinlock_t *) tx_lock;   /* The queue's lock, for the
                                             * work items of those senders. */
        rte_spinlock_t vq_lock;     /* See vhost_tx_vq_lock(). */
        struct vhost_held held;     /* The mbufs of the copies in flight,
                                     * in vhost's order (see held_push()). */
        /* Under the queue's lock: */
        bool leaving;               /* 'auto' leaves DMA: what is aside, and
                                     * every new packet behind it, waits for
                                     * the copies in flight. */
        bool flushing;              /* Sending what was put aside. */
    );
};

/* Counters of a port's Tx queues (ovs_async_tx_* in its statistics), and
 * of the resets of its connection, for a Tx or an Rx queue. */
struct vhost_async_stats {
    atomic_uint64_t submitted;      /* Packets handed to a DMA engine. */
    atomic_uint64_t completed;      /* Packets whose copy completed. */
    atomic_uint64_t cpu_copies;     /* Packets copied on the CPU for want
                                     * of a dmadev. */
    atomic_uint64_t auto_cpu;       /* Packets 'auto' chose to copy on the
                                     * CPU. */
    atomic_uint64_t ring_full;      /* 'ring' mode drops, ring full. */
    atomic_uint64_t put_aside;      /* Packets put aside by a sender that
                                     * found the txq lock taken. */
    atomic_uint64_t held_back;      /* Packets that waited in the ring for
                                     * copies in flight ('auto' leaving DMA,
                                     * a sender without a work list). */
    atomic_uint64_t lock_drops;     /* Drops of a sender without a work list
                                     * that waited too long for a txq lock
                                     * (vhost-txq-hold). */
    atomic_uint64_t tx_failed;      /* Other async drops (vring full, device
                                     * gone, engine stuck). */
    atomic_uint64_t abandoned;      /* Copies a clear gave up on (engine
                                     * stuck). */
    atomic_uint64_t abandoned_freed;    /* Of those, the Tx copies whose
                                         * mbufs were freed (vhost keeps
                                         * the Rx copies' mbufs). */
    atomic_uint64_t wedged;         /* Drops of a queue whose copies sit on
                                     * a dmadev out of service. */
    atomic_uint64_t resets;         /* Connections reset for that. */
};

/* A port's Tx queues, in its struct vhost_async. */
struct vhost_tx {
    struct vhost_async_txq *txqs;   /* MAX_TXQ entries. */
    struct vhost_auto *autos;       /* MAX_TXQ entries, once 'auto' is used;
                                     * under the txq locks. */
    int n_txq;                      /* Tx queues, as of the last
                                     * reconfiguration. */
    atomic_llong held_until;        /* netdev-dpdk/vhost-txq-hold: senders
                                     * find the Tx queue locks taken until
                                     * this time (msec), if nonzero. */
    atomic_bool sweep;              /* Some Tx queue has copies or packets
                                     * aside that no deferred work list
                                     * takes care of: the PMDs that poll the
                                     * port's Rx queues do (sweep_port()). */
    struct vhost_async_stats stats;
};

/* The functions that the rows of vhost_copy_modes[] name (see struct
 * copy_mode). */
int vhost_tx_cpu_mode_send(struct vhost_async *, int vid, int qid,
                           struct rte_mbuf **pkts, int cnt,
                           int max_retries, int *retries, int *n_dma);
int vhost_tx_dma_or_cpu_send(struct vhost_async *, int vid, int qid,
                             struct rte_mbuf **pkts, int cnt,
                             int max_retries, int *retries, int *n_dma);
int vhost_tx_ring_send(struct vhost_async *, int vid, int qid,
                       struct rte_mbuf **pkts, int cnt, int max_retries,
                       int *retries, int *n_dma);
int vhost_tx_auto_send(struct vhost_async *, int vid, int qid,
                       struct rte_mbuf **pkts, int cnt, int max_retries,
                       int *retries, int *n_dma);
bool vhost_tx_auto_pre_send(struct vhost_async *, const struct copy_mode *,
                            int vid, int qid, struct rte_mbuf **pkts,
                            int cnt, int *unsent);
void vhost_tx_rx_poll_completions(struct vhost_async *, int vid, int qid);
void vhost_tx_ring_rx_work(struct vhost_async *, int vid, int qid);
bool vhost_tx_ring_enter(struct vhost_async *, int n_txq, bool again);
void vhost_tx_ring_leave(struct vhost_async *, int vid);
bool vhost_tx_aside_enter(struct vhost_async *, int n_txq, bool again);
bool vhost_tx_auto_enter(struct vhost_async *, int n_txq, bool again);
void vhost_tx_auto_retired(struct vhost_async *, int qid, uint64_t cycles,
                           uint32_t n);
void vhost_tx_auto_format_txq(struct ds *, const struct vhost_async *,
                              int qid);

/* For the life cycle: the mbufs of the copies in flight of a Tx queue
 * (struct vhost_held), the retiring of 'n' completed copies, the lock of
 * the queue's vring (see vhost_tx_vq_lock()), its copies in flight, and
 * whether only engines out of service hold them. */
void vhost_tx_held_init(struct vhost_async_txq *, uint16_t vring_size);
void vhost_tx_held_pop(struct vhost_held *, struct rte_mbuf **pkts,
                       uint16_t n);
int vhost_tx_held_release(struct vhost_async_txq *, int abandoned);
void vhost_tx_retire(struct vhost_async *, struct vhost_async_txq *,
                     struct rte_mbuf **pkts, uint16_t n);
void vhost_tx_vq_lock(struct vhost_async *, int qid);
void vhost_tx_vq_unlock(struct vhost_async *, int qid);
int vhost_tx_inflight(struct vhost_async *, int qid);
bool vhost_tx_engines_dead(struct vhost_async *, int qid);

/* Appends the interface statistics of the Tx queues of 'async'
 * (ovs_async_tx_..., ovs_async_auto_..., ovs_async_resets). */
void vhost_tx_get_custom_stats(const struct vhost_async *,
                               struct netdev_custom_stats *);

/* Registers the per-PMD counters of Tx copies (once). */
void vhost_tx_init(void);

/* Frees the rings of every Tx queue of 'async' and the packets in them
 * (counted as dropped). */
void vhost_tx_free_rings(struct vhost_async *);

#endif /* netdev-dpdk-vhost-tx.h */
