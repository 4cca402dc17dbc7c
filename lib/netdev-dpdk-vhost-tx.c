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

#include <config.h>

#include "netdev-dpdk-vhost-tx.h"

#include <limits.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_spinlock.h>
#include <rte_vhost.h>
#include <rte_vhost_async.h>

#include "coverage.h"
#include "dpif-netdev-defer.h"
#include "netdev-dpdk-dma.h"
#include "netdev-dpdk-vhost-async.h"
#include "netdev-dpdk-vhost-auto.h"
#include "netdev-dpdk-vhost-private.h"
#include "netdev-dpdk-vhost-shared.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "timeval.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_vhost_tx);

COVERAGE_DEFINE(vhost_async_tx_contention);
COVERAGE_DEFINE(vhost_async_tx_deferred);
COVERAGE_DEFINE(vhost_async_auto_leaving);
COVERAGE_DEFINE(vhost_async_tx_no_list);
COVERAGE_DEFINE(vhost_async_lock_wait_drop);
COVERAGE_DEFINE(vhost_async_swept);
COVERAGE_DEFINE(vhost_async_cpu_wait);
COVERAGE_DEFINE(vhost_async_poll_busy);

/* Per PMD thread counters, printed by "pmd-stats-show" and "pmd-perf-show"
 * (dp_defer_counter_register()).  There is no "in flight" per thread: a
 * thread may retire copies that another one submitted (v3, ring, a shared
 * txq); vhost-copy-mode-get and dmadev-show have the copies in flight per
 * queue and per engine. */
static int pmd_dma_submitted = -1;      /* Packets handed to DMA. */
static int pmd_dma_completed = -1;      /* Retired (copy done, mbuf freed)
                                         * by this thread. */
static int pmd_cpu_fallbacks = -1;      /* Copied on the CPU in an async
                                         * mode for want of a dmadev. */
static int pmd_auto_cpu_copies = -1;    /* Copied on the CPU by choice of
                                         * 'auto'. */
static int pmd_put_aside = -1;          /* Put aside, the txq lock taken. */

/* Packets put aside that stay there (the queue's lock never free). */
static struct vlog_rate_limit lc_rl = VLOG_RATE_LIMIT_INIT(1, 5);

void
vhost_tx_init(void)
{
    pmd_dma_submitted = dp_defer_counter_register("DMA copies submitted");
    pmd_dma_completed = dp_defer_counter_register("DMA copies completed");
    pmd_cpu_fallbacks = dp_defer_counter_register("DMA CPU fallbacks");
    pmd_auto_cpu_copies = dp_defer_counter_register("auto mode CPU copies");
    pmd_put_aside = dp_defer_counter_register(
        "DMA Tx packets put aside, txq locked");
}

/* ---- Tx queues: the copies in flight ------------------------------------ */

/* The most packets vhost takes in one submit (its MAX_PKT_BURST). */
#define HELD_BURST 32

/* Gives Tx queue 'txq' room to track the copies in flight of a vring of
 * 'vring_size' descriptors.  Only while no sender can submit into the
 * queue's vring (its async channel is not registered yet). */
void
vhost_tx_held_init(struct vhost_async_txq *txq, uint16_t vring_size)
{
    struct vhost_held *h = &txq->held;
    uint32_t head, tail;
    uint32_t n;

    atomic_read_relaxed(&h->head, &head);
    atomic_read_relaxed(&h->tail, &tail);
    if ((int32_t) (tail - head) > 0) {
        /* Copies of an earlier device are still tracked: they will be
         * freed with that device's queues (reset_queues()). */
        return;
    }
    n = 1u << log_2_ceil(MAX(vring_size, 1) + HELD_BURST);
    if (!h->slots || h->mask + 1 < n) {
        free(h->slots);
        h->slots = xcalloc(n, sizeof *h->slots);
        h->mask = n - 1;
    }
    atomic_store_relaxed(&h->head, 0);
    atomic_store_relaxed(&h->tail, 0);
    atomic_store_relaxed(&h->lost, false);
}

static void
held_lose(struct vhost_held *h)
{
    bool was = atomic_exchange(&h->lost, true);

    if (!was) {
        vhost_async_held_lost();
    }
}

/* Before a submit of 'pkts[0..cnt-1]' (at most HELD_BURST): writes them
 * past the tail, where a poller may find them as soon as vhost has them.
 * The caller serializes the queue's senders. */
static void
held_push(struct vhost_held *h, struct rte_mbuf **pkts, int cnt)
{
    uint32_t head, tail;
    bool lost;

    atomic_read_relaxed(&h->lost, &lost);
    if (!h->slots || lost) {
        return;
    }
    atomic_read_relaxed(&h->tail, &tail);
    atomic_read_explicit(&h->head, &head, memory_order_acquire);
    if ((int32_t) (tail - head) + cnt > (int32_t) (h->mask + 1)) {
        held_lose(h);
        return;
    }
    for (int i = 0; i < cnt; i++) {
        h->slots[(tail + i) & h->mask] = pkts[i];
    }
}

/* After that submit: vhost took the first 'n' of them. */
static void
held_commit(struct vhost_held *h, int n)
{
    uint32_t tail;

    if (h->slots && n) {
        atomic_read_relaxed(&h->tail, &tail);
        atomic_store_explicit(&h->tail, tail + n, memory_order_release);
    }
}

/* vhost returned 'pkts[0..n-1]': they leave the head.  The caller holds
 * vhost_tx_vq_lock(). */
void
vhost_tx_held_pop(struct vhost_held *h, struct rte_mbuf **pkts, uint16_t n)
{
    uint32_t head;
    bool lost;

    atomic_read_relaxed(&h->lost, &lost);
    if (!h->slots || lost || !n) {
        return;
    }
    atomic_read_relaxed(&h->head, &head);
    for (int i = 0; i < n; i++) {
        if (h->slots[(head + i) & h->mask] != pkts[i]) {
            held_lose(h);
            return;
        }
    }
    atomic_store_explicit(&h->head, head + n, memory_order_release);
}

/* The device of 'txq' is gone, and with it every copy that vhost still
 * held for it: its fenced engines will never complete them, and vhost will
 * never return their mbufs.  Frees those mbufs (if they are no more than
 * the 'abandoned' copies the clears counted, of all the device's vrings)
 * and returns how many, and starts the tracking again for the next
 * device. */
int
vhost_tx_held_release(struct vhost_async_txq *txq, int abandoned)
{
    struct vhost_held *h = &txq->held;
    uint32_t head, tail;
    int n = 0;
    bool lost;

    atomic_read_relaxed(&h->lost, &lost);
    atomic_read_relaxed(&h->head, &head);
    atomic_read_relaxed(&h->tail, &tail);
    if (h->slots && !lost && (int32_t) (tail - head) > 0) {
        n = tail - head;
        if (n > abandoned) {
            /* More than vhost held: out of step, so free nothing. */
            vhost_async_held_lost();
            n = 0;
        }
        for (int i = 0; i < n; i++) {
            rte_pktmbuf_free(h->slots[(head + i) & h->mask]);
        }
    }
    atomic_store_relaxed(&h->head, tail);
    atomic_store_relaxed(&h->lost, false);
    return n;
}

void
vhost_tx_retire(struct vhost_async *async, struct vhost_async_txq *txq,
                struct rte_mbuf **pkts, uint16_t n)
{
    if (n) {
        int orig;

        atomic_sub_relaxed(&txq->copies.inflight, n, &orig);
        vhost_stat_add(&async->tx.stats.completed, n);
        dp_defer_counter_add(pmd_dma_completed, n);
        rte_pktmbuf_free_bulk(pkts, n);
    }
}

/* The lock of Tx queue 'qid''s vring, taken around vhost's completion
 * polls and clears of it.  Threads that do not hold the txq lock poll
 * completions (the deferred work of every PMD that submitted on the
 * queue, the PMD that polls the port's Rx queue in 'v3' and 'ring' modes),
 * and vhost 24.11 no longer serializes them: it takes its vring lock
 * shared for those calls (exclusive only for a submit), and they are not
 * thread safe (22.11 took it exclusive).  Two polls at once corrupt the
 * vring's async state and, with it, vhost's memory.  A PMD holds it only
 * for a poll, which does not wait for vhost's lock: a clear by vhost's
 * thread, which holds vhost's lock, may wait for it. */
void
vhost_tx_vq_lock(struct vhost_async *async, int qid)
{
    rte_spinlock_lock(&async->tx.txqs[qid].vq_lock);
}

void
vhost_tx_vq_unlock(struct vhost_async *async, int qid)
{
    rte_spinlock_unlock(&async->tx.txqs[qid].vq_lock);
}

/* Polls the completions of Tx queue 'qid' on dmadev 'dma'.  Returns 0 if
 * another thread is in the vring (as vhost 22.11 did): it polls. */
static uint16_t
poll_dma(struct vhost_async *async, int vid, int qid, int16_t dma)
{
    struct vhost_async_txq *txq = &async->tx.txqs[qid];
    struct rte_mbuf *pkts[POLL_BURST];
    uint16_t n;

    if (!rte_spinlock_trylock(&txq->vq_lock)) {
        COVERAGE_INC(vhost_async_poll_busy);
        return 0;
    }
    n = rte_vhost_poll_enqueue_completed(vid, TXQ_VRING(qid), pkts,
                                         POLL_BURST, dma,
                                         NETDEV_DPDK_DMA_VCHAN);
    vhost_tx_held_pop(&txq->held, pkts, n);
    rte_spinlock_unlock(&txq->vq_lock);
    vhost_tx_retire(async, txq, pkts, n);
    return n;
}

/* Polls the completions of Tx queue 'qid' on every dmadev that may hold
 * its copies.  Returns the number of packets retired. */
static uint32_t
poll_all(struct vhost_async *async, int vid, int qid)
{
    uint32_t n = 0;
    uint64_t mask;
    int16_t dma;

    atomic_read_relaxed(&async->tx.txqs[qid].copies.dma_mask, &mask);
    VHOST_FOR_EACH_DMA (dma, mask) {
        n += poll_dma(async, vid, qid, dma);
    }
    return n;
}

int
vhost_tx_inflight(struct vhost_async *async, int qid)
{
    int n;

    atomic_read_relaxed(&async->tx.txqs[qid].copies.inflight, &n);
    return n;
}

bool
vhost_tx_engines_dead(struct vhost_async *async, int qid)
{
    return engines_dead(&async->tx.txqs[qid].copies);
}

/* True if Tx queue 'qid' is wedged: copies of it in flight may sit on a
 * dmadev out of service, and the queue's other engines (if any) retired
 * nothing just now.  Such copies never complete, and a queue retires in
 * order, so nothing sent to it after them ever reaches the guest: the
 * device must be reset (requested here).  The caller serializes the
 * queue's senders. */
static bool
txq_wedged(struct vhost_async *async, int vid, int qid)
{
    uint64_t mask;

    atomic_read_relaxed(&async->tx.txqs[qid].copies.dma_mask, &mask);
    if (OVS_LIKELY(!(mask & netdev_dpdk_dma_retired()))
        || vhost_tx_inflight(async, qid) <= 0
        || (!vhost_tx_engines_dead(async, qid) && poll_all(async, vid, qid))) {
        return false;
    }
    vhost_async_request_reset(async, TXQ_VRING(qid));
    return true;
}

/* Drops 'cnt' packets for a wedged Tx queue.  Returns 'cnt'. */
static int
drop_wedged(struct vhost_async *async, struct rte_mbuf **pkts, int cnt)
{
    vhost_stat_add(&async->tx.stats.wedged, cnt);
    rte_pktmbuf_free_bulk(pkts, cnt);
    return cnt;
}

/* How long 'auto' waits for a queue's copies before it moves the queue to
 * the CPU, where it cannot put packets aside instead (while it sends what
 * was aside: else it tries again with the next burst). */
#define AUTO_DRAIN_US 2000

/* ---- Sending ------------------------------------------------------------ */

/* Why packets wait in a Tx queue's ring (set_aside()). */
enum aside_why {
    ASIDE_LOCKED,       /* The sender found the queue's lock taken. */
    ASIDE_LEAVING,      /* 'auto' leaves DMA: copies still in flight. */
    ASIDE_NO_LIST,      /* A sender without a deferred work list (the main
                         * thread) found copies in flight. */
};
static int set_aside(struct vhost_async *, int qid, struct rte_mbuf **pkts,
                     int cnt, enum aside_why);

/* Copies 'cnt' packets on the CPU into Tx queue 'qid', which may have an
 * async channel: first waits until none of its copies is in flight, since
 * vhost would otherwise deliver out of order.  The caller serializes the
 * senders of the queue.  Returns the number of packets not sent; frees all
 * packets. */
static int
cpu_send(struct vhost_async *async, int vid, int qid,
         struct rte_mbuf **pkts, int cnt, int max_retries, int *retries,
         bool chosen)
{
    int sent = 0;

    if (vhost_tx_inflight(async, qid) > 0) {
        long long int deadline = time_msec() + 1;

        COVERAGE_INC(vhost_async_cpu_wait);
        do {
            poll_all(async, vid, qid);
        } while (vhost_tx_inflight(async, qid) > 0 && time_msec() <= deadline);
    }
    if (!vhost_tx_inflight(async, qid)) {
        /* A completion poller of another thread may still come into the
         * vring, but with nothing left to complete vhost returns before
         * it touches the vring. */
        do {
            int n = rte_vhost_enqueue_burst(vid, TXQ_VRING(qid),
                                            pkts + sent, cnt - sent);
            if (!n) {
                break;
            }
            sent += n;
        } while (sent < cnt && (*retries)++ < max_retries);
    }
    if (sent) {
        if (chosen) {
            vhost_stat_add(&async->tx.stats.auto_cpu, sent);
            dp_defer_counter_add(pmd_auto_cpu_copies, sent);
        } else {
            vhost_stat_add(&async->tx.stats.cpu_copies, sent);
            dp_defer_counter_add(pmd_cpu_fallbacks, sent);
        }
    }
    rte_pktmbuf_free_bulk(pkts, cnt);
    return cnt - sent;
}

/* 'cpu' mode (and a sender that came before the device's async channels,
 * whatever the mode).  The caller holds the txq lock. */
int
vhost_tx_cpu_mode_send(struct vhost_async *async, int vid, int qid,
                       struct rte_mbuf **pkts, int cnt, int max_retries,
                       int *retries, int *n_dma)
{
    *n_dma = 0;
    return cpu_send(async, vid, qid, pkts, cnt, max_retries, retries, false);
}

/* The calling thread's dmadev for Tx queue 'qid', or -1 if the thread has
 * none or the queue's vring has no async channel: vhost refused to register
 * it (see vhost_async_new_device()), and copies submitted into that vring
 * could never be retired.  Then the queue copies on the CPU. */
static int16_t
txq_engine(const struct vhost_async *async, int qid)
{
    if (OVS_UNLIKELY(!async->channel[TXQ_VRING(qid)])
        || OVS_UNLIKELY(logging_on(async))) {
        return -1;
    }
    return netdev_dpdk_dma_get();
}

/* Submits 'cnt' packets of Tx queue 'qid' to dmadev 'dma'.  Returns the
 * number not taken by vhost (freed here). */
static int
dma_send(struct vhost_async *async, int vid, int qid, int16_t dma,
         struct rte_mbuf **pkts, int cnt, int max_retries, int *retries)
{
    struct vhost_async_txq *txq = &async->tx.txqs[qid];
    uint64_t bit = UINT64_C(1) << dma;
    uint64_t mask;
    int sent = 0;

    atomic_read_relaxed(&txq->copies.dma_mask, &mask);
    if (OVS_UNLIKELY(!(mask & bit))) {
        atomic_or_relaxed(&txq->copies.dma_mask, bit, &mask);
    }

    for (;;) {
        int burst = MIN(cnt - sent, HELD_BURST);
        int n;

        held_push(&txq->held, pkts + sent, burst);
        n = rte_vhost_submit_enqueue_burst(vid, TXQ_VRING(qid), pkts + sent,
                                           burst, dma,
                                           NETDEV_DPDK_DMA_VCHAN);
        held_commit(&txq->held, n);
        if (n) {
            int orig;

            atomic_add_relaxed(&txq->copies.inflight, n, &orig);
            sent += n;
        }
        if (sent == cnt) {
            break;
        }
        if (n == burst) {
            continue;           /* vhost took the whole burst: the next. */
        }
        if ((*retries)++ >= max_retries) {
            break;
        }
        /* The vring or the engine is full: completions make room. */
        if (!poll_dma(async, vid, qid, dma) && !n) {
            break;
        }
    }
    if (sent) {
        vhost_stat_add(&async->tx.stats.submitted, sent);
        dp_defer_counter_add(pmd_dma_submitted, sent);
    }
    if (sent < cnt) {
        rte_pktmbuf_free_bulk(pkts + sent, cnt - sent);
    }
    return cnt - sent;
}

/* 'v3' and 'defer' modes, and the consumer of a ring: sends on the calling
 * thread's dmadev, or on the CPU if it has none.  Stores the number of
 * packets handed to DMA in '*n_dma'.  The caller serializes the queue's
 * senders. */
int
vhost_tx_dma_or_cpu_send(struct vhost_async *async, int vid, int qid,
                         struct rte_mbuf **pkts, int cnt, int max_retries,
                         int *retries, int *n_dma)
{
    int16_t dma = txq_engine(async, qid);
    int dropped;

    if (dma < 0) {
        *n_dma = 0;
        return cpu_send(async, vid, qid, pkts, cnt, max_retries, retries,
                        false);
    }
    dropped = dma_send(async, vid, qid, dma, pkts, cnt, max_retries,
                       retries);
    *n_dma = cnt - dropped;
    return dropped;
}

/* Polls until nothing of Tx queue 'qid' is in flight, for at most
 * AUTO_DRAIN_US.  Returns true if nothing is. */
static bool
auto_drain(struct vhost_async *async, int vid, int qid)
{
    uint64_t deadline = rte_get_timer_cycles()
                        + rte_get_timer_hz() / 1000000 * AUTO_DRAIN_US;

    while (vhost_tx_inflight(async, qid) > 0) {
        poll_all(async, vid, qid);
        if (rte_get_timer_cycles() > deadline) {
            return vhost_tx_inflight(async, qid) <= 0;
        }
    }
    return true;
}

/* 'auto' mode: sends a burst on the path that the queue's policy chooses,
 * and tells the policy what it cost.  The caller holds the txq lock. */
int
vhost_tx_auto_send(struct vhost_async *async, int vid, int qid,
                   struct rte_mbuf **pkts, int cnt, int max_retries,
                   int *retries, int *n_dma)
{
    struct vhost_auto *a = &async->tx.autos[qid];
    int16_t dma = txq_engine(async, qid);
    enum vhost_auto_path cur, path;
    uint64_t bytes = 0;
    uint64_t start;
    uint32_t avg;
    int dropped;

    for (int i = 0; i < cnt; i++) {
        bytes += rte_pktmbuf_pkt_len(pkts[i]);
    }
    avg = bytes / cnt;

    if (dma < 0) {
        /* This thread has no engine: a fallback, which must not change the
         * queue's choice for the threads that have one. */
        *n_dma = 0;
        return cpu_send(async, vid, qid, pkts, cnt, max_retries, retries,
                        false);
    }
    cur = vhost_auto_path(a);
    path = vhost_auto_choose(a, avg);
    if (path != cur && path == VHOST_AUTO_CPU
        && vhost_tx_inflight(async, qid) > 0) {
        /* To the CPU only once the queue's copies are done, so that the
         * guest sees the queue's packets in order.  An engine that falls
         * behind may take a long time: rather than wait, and send on DMA
         * meanwhile, the queue puts packets aside until then. */
        struct vhost_async_txq *txq = &async->tx.txqs[qid];

        poll_all(async, vid, qid);
        if (vhost_tx_inflight(async, qid) > 0 && txq->ring && !txq->flushing) {
            txq->leaving = true;
            *n_dma = 0;
            return cnt - set_aside(async, qid, pkts, cnt, ASIDE_LEAVING);
        }
        if (!auto_drain(async, vid, qid)) {
            path = cur;
        }
    }
    if (path != cur) {
        vhost_auto_switched(a, path);
    }

    start = rte_get_tsc_cycles();
    if (path == VHOST_AUTO_DMA) {
        dropped = dma_send(async, vid, qid, dma, pkts, cnt, max_retries,
                           retries);
        *n_dma = cnt - dropped;
    } else {
        dropped = cpu_send(async, vid, qid, pkts, cnt, max_retries,
                           retries, true);
        *n_dma = 0;
    }
    vhost_auto_record(a, path, start, rte_get_tsc_cycles() - start, cnt,
                      cnt - dropped, vhost_tx_inflight(async, qid));
    return dropped;
}

bool
vhost_tx_auto_enter(struct vhost_async *async, int n_txq, bool again)
{
    if (!again) {
        if (!async->tx.autos) {
            async->tx.autos = xzalloc_cacheline(MAX_TXQ
                                                * sizeof *async->tx.autos);
        }
        for (int qid = 0; qid < MAX_TXQ; qid++) {
            vhost_auto_reset(&async->tx.autos[qid], VHOST_AUTO_BACKLOG_MAX);
        }
    }
    return vhost_tx_aside_enter(async, n_txq, again);
}

void
vhost_tx_auto_retired(struct vhost_async *async, int qid, uint64_t cycles,
                      uint32_t n)
{
    if (async->tx.autos) {
        vhost_auto_retired(&async->tx.autos[qid], cycles, n);
    }
}

void
vhost_tx_auto_format_txq(struct ds *reply, const struct vhost_async *async,
                         int qid)
{
    if (async->tx.autos) {
        vhost_auto_format(reply, &async->tx.autos[qid]);
        ds_put_cstr(reply, "; ");
    }
}

static bool send_put_aside(struct vhost_async *, const struct copy_mode *,
                           int vid, int qid, bool drain);
static bool defer_work(void *aux, int qid, bool drain, uint32_t *n_retired);

/* Leaves Tx queue 'qid' of 'async' to the port's sweepers (sweep_port()):
 * its copies in flight if 'orphaned' (no deferred work list polls them),
 * and whatever waits in its ring. */
static void
leave_to_sweepers(struct vhost_async *async, int qid, bool orphaned)
{
    if (orphaned) {
        /* After the copies were counted (see sweep_orphaned()). */
        atomic_store(&async->tx.txqs[qid].orphaned, true);
    }
    atomic_store_relaxed(&async->tx.sweep, true);
}

/* Queues the deferred work of Tx queue 'qid' in the calling thread's list,
 * 'n' more copies in flight.  A thread without a list (or whose list is
 * full) leaves the queue to the sweepers: the work is never run inline,
 * since the caller may hold a lock it takes. */
static void
defer_or_sweep(struct vhost_async *async, int qid, uint32_t n)
{
    if (!dp_defer_submit(defer_work, async, qid, n)) {
        COVERAGE_INC(vhost_async_tx_no_list);
        leave_to_sweepers(async, qid, n > 0);
    }
}

/* True if senders put packets aside on Tx queue 'qid' that wait for its
 * lock. */
static inline bool
has_put_aside(const struct vhost_async *async, int qid)
{
    const struct rte_ring *ring = async->tx.txqs[qid].ring;

    return ring && !rte_ring_empty(ring);
}

/* The deferred work of a PMD that submitted on Tx queue 'qid', or put
 * packets aside there. */
static bool
defer_work(void *aux, int qid, bool drain, uint32_t *n_retired)
{
    struct vhost_async *async = aux;
    const struct copy_mode *mode = mode_of(async);
    int vid = get_vid(async);
    bool waiting = false;
    uint64_t start = 0;
    int16_t dma;

    *n_retired = 0;
    if (vid < 0) {
        /* The device went away and destroy_device() cleared everything,
         * what was put aside included (freed, and counted as Tx
         * failures). */
        return false;
    }
    if (mode->puts_aside && OVS_UNLIKELY(has_put_aside(async, qid))) {
        waiting = !send_put_aside(async, mode, vid, qid, drain);
    }
    if (vhost_tx_inflight(async, qid) <= 0) {
        return waiting;
    }
    if (mode->retired) {
        /* The mode weighs what retiring DMA copies costs. */
        start = rte_get_tsc_cycles();
    }
    dma = netdev_dpdk_dma_get();
    if (drain || dma < 0) {
        *n_retired = poll_all(async, vid, qid);
    } else {
        *n_retired = poll_dma(async, vid, qid, dma);
    }
    if (mode->retired && *n_retired) {
        mode->retired(async, qid, rte_get_tsc_cycles() - start, *n_retired);
    }
    if (vhost_tx_inflight(async, qid) <= 0) {
        return waiting;
    }
    if (OVS_UNLIKELY(vhost_tx_engines_dead(async, qid))) {
        /* Nothing will come back: reset the device, even if nothing is
         * sent to the queue any more. */
        vhost_async_request_reset(async, TXQ_VRING(qid));
    }
    if (drain) {
        /* The drain is bounded: if it gives up, the queue's next sender
         * (or the port's Rx poller) polls what this thread leaves
         * behind. */
        leave_to_sweepers(async, qid, true);
    }
    return true;
}

/* Polls every dmadev of Tx queue 'qid' if a PMD's drain left copies there
 * that no deferred work list polls any more.  Called by a sender, which
 * holds the queue's lock, or by a sweeper (sweep_port()), which does not:
 * the polls themselves are serialized by vhost_tx_vq_lock(). */
static inline void
sweep_orphaned(struct vhost_async *async, int vid, int qid)
{
    bool orphaned;

    atomic_read_relaxed(&async->tx.txqs[qid].orphaned, &orphaned);
    if (OVS_UNLIKELY(orphaned)) {
        poll_all(async, vid, qid);
        if (vhost_tx_inflight(async, qid) <= 0) {
            /* A drain may leave copies here between that test and the
             * exchange, from another thread.  It counted them before it
             * set the flag (leave_to_sweepers()), and the exchange reads
             * its store: the count is then seen, and the flag restored. */
            atomic_exchange(&async->tx.txqs[qid].orphaned, false);
            if (vhost_tx_inflight(async, qid) > 0) {
                atomic_store(&async->tx.txqs[qid].orphaned, true);
            }
        }
    }
}

/* 'ring' mode: lock-free, into the queue's ring, which vhost_tx_ring_rx_work()
 * drains. */
int
vhost_tx_ring_send(struct vhost_async *async, int vid OVS_UNUSED, int qid,
                   struct rte_mbuf **pkts, int cnt, int max_retries OVS_UNUSED,
                   int *retries OVS_UNUSED, int *n_dma)
{
    struct rte_ring *ring = async->tx.txqs[qid].ring;
    unsigned int n = 0;

    *n_dma = 0;
    if (OVS_LIKELY(ring)) {
        n = rte_ring_mp_enqueue_burst(ring, (void **) pkts, cnt, NULL);
    }
    if (n < cnt) {
        vhost_stat_add(&async->tx.stats.ring_full, cnt - n);
        rte_pktmbuf_free_bulk(pkts + n, cnt - n);
    }
    return cnt - n;
}

bool
vhost_async_active(const struct vhost_async *async)
{
    return mode_of(async)->dma;
}

/* True while netdev-dpdk/vhost-txq-hold has the senders of 'async' find its
 * Tx queue locks taken. */
static inline bool
txqs_held(struct vhost_async *async)
{
    long long int until;

    atomic_read_relaxed(&async->tx.held_until, &until);
    if (OVS_LIKELY(!until)) {
        return false;
    }
    if (time_msec() < until) {
        return true;
    }
    /* Expired (unless a new hold came meanwhile). */
    atomic_compare_exchange_strong(&async->tx.held_until, &until, 0);
    return false;
}

/* Takes Tx queue lock 'tx_lock' of 'async' if it is free. */
static inline bool
txq_trylock(struct vhost_async *async, rte_spinlock_t *tx_lock)
{
    return !txqs_held(async) && rte_spinlock_trylock(tx_lock);
}

/* Waits for Tx queue lock 'tx_lock' of 'async', which another thread holds,
 * and takes it.  A thread without a deferred work list (the main thread)
 * gives up after TXQ_LOCK_WAIT_MAX_MS: then returns false. */
static bool
txq_lock(struct vhost_async *async, rte_spinlock_t *tx_lock)
{
    long long int deadline = LLONG_MAX;

    COVERAGE_INC(vhost_async_tx_contention);
    if (!dp_defer_has_list()) {
        deadline = time_msec() + TXQ_LOCK_WAIT_MAX_MS;
    }
    while (!txq_trylock(async, tx_lock)) {
        if (deadline != LLONG_MAX && time_msec() > deadline) {
            COVERAGE_INC(vhost_async_lock_wait_drop);
            return false;
        }
        rte_pause();
    }
    return true;
}

/* Sends up to 'max_bursts' bursts from the ring of Tx queue 'qid' with
 * 'send'.  The caller serializes the ring's consumers.  The packets were
 * counted as sent when they went into the ring, so those that cannot be
 * sent now are counted as async drops.  Returns the number handed to DMA. */
static int
send_from_ring(struct vhost_async *async, int vid, int qid, send_func *send,
               int max_bursts)
{
    struct rte_ring *ring = async->tx.txqs[qid].ring;
    int n_dma = 0;

    for (int i = 0; ring && i < max_bursts; i++) {
        struct rte_mbuf *pkts[POLL_BURST];
        int lost, retries = 0, n;

        n = rte_ring_sc_dequeue_burst(ring, (void **) pkts, POLL_BURST,
                                      NULL);
        if (!n) {
            break;
        }
        if (OVS_UNLIKELY(txq_wedged(async, vid, qid))) {
            lost = drop_wedged(async, pkts, n);
        } else {
            int dma = 0;

            lost = send(async, vid, qid, pkts, n, VHOST_ASYNC_RING_RETRIES,
                        &retries, &dma);
            n_dma += dma;
        }
        if (lost) {
            vhost_stat_add(&async->tx.stats.tx_failed, lost);
        }
    }
    return n_dma;
}

/* Sends 'cnt' packets on Tx queue 'qid' in 'mode', whose lock the caller
 * holds: first what senders put aside while the lock was taken, so that
 * each sender's packets stay in order, then 'pkts'.  Returns the number of
 * 'pkts' dropped and stores the number of packets handed to DMA in
 * '*n_dma'. */
static int
locked_send(struct vhost_async *async, const struct copy_mode *mode,
            int vid, int qid, struct rte_mbuf **pkts, int cnt,
            int max_retries, int *retries, int *n_dma)
{
    int dropped = 0;

    *n_dma = 0;
    if (mode->dma) {
        sweep_orphaned(async, vid, qid);
    }
    if (mode->puts_aside && async->tx.txqs[qid].ring) {
        struct vhost_async_txq *txq = &async->tx.txqs[qid];

        if (mode->pre_send
            && mode->pre_send(async, mode, vid, qid, pkts, cnt, &dropped)) {
            return dropped;
        }
        if (cnt && !dp_defer_has_list() && vhost_tx_inflight(async, qid) > 0) {
            /* A sender without a work list (the main thread: OpenFlow
             * packet-outs) has no engine and must not wait for one: its
             * packets wait in the ring for the copies in flight, and the
             * queue's next sender or the sweepers send them. */
            COVERAGE_ADD(vhost_async_tx_no_list, cnt);
            return cnt - set_aside(async, qid, pkts, cnt, ASIDE_NO_LIST);
        }
        txq->flushing = true;
        *n_dma += send_from_ring(async, vid, qid, mode->send,
                                 RING_SIZE / POLL_BURST);
        txq->flushing = false;
    }
    if (!cnt) {
        return 0;
    }
    if (OVS_UNLIKELY(mode->dma && txq_wedged(async, vid, qid))) {
        dropped = drop_wedged(async, pkts, cnt);
    } else {
        int n = 0;

        dropped = mode->send(async, vid, qid, pkts, cnt, max_retries,
                             retries, &n);
        *n_dma += n;
    }
    return dropped;
}

/* 'auto''s pre_send: a queue leaving DMA (vhost_tx_auto_send() set
 * 'leaving') keeps what comes in its ring, behind its copies in flight,
 * until they are done, so that the guest sees the queue's packets in
 * order. */
bool
vhost_tx_auto_pre_send(struct vhost_async *async, const struct copy_mode *mode,
                       int vid, int qid, struct rte_mbuf **pkts, int cnt,
                       int *unsent)
{
    struct vhost_async_txq *txq = &async->tx.txqs[qid];

    if (OVS_LIKELY(!txq->leaving)) {
        return false;
    }
    if (vhost_tx_inflight(async, qid) > 0) {
        poll_all(async, vid, qid);
    }
    if (OVS_UNLIKELY(txq_wedged(async, vid, qid))) {
        /* Copies that an engine out of service holds never complete: the
         * queue would leave DMA never, and put everything aside for good.
         * Its device is reset; meanwhile what waits and what comes is
         * dropped, counted. */
        send_from_ring(async, vid, qid, mode->send, RING_SIZE / POLL_BURST);
        txq->leaving = false;
        *unsent = cnt ? drop_wedged(async, pkts, cnt) : 0;
        return true;
    }
    if (vhost_tx_inflight(async, qid) > 0) {
        /* Still leaving DMA: 'pkts' joins what waits. */
        *unsent = cnt ? cnt - set_aside(async, qid, pkts, cnt,
                                        ASIDE_LEAVING) : 0;
        return true;
    }
    txq->leaving = false;
    return false;
}

/* Remembers 'tx_lock' as the lock of Tx queue 'qid', for the work items
 * that send what is put aside there. */
static void
note_tx_lock(struct vhost_async *async, int qid, rte_spinlock_t *tx_lock)
{
    rte_spinlock_t *known;

    atomic_read_relaxed(&async->tx.txqs[qid].tx_lock, &known);
    if (OVS_UNLIKELY(known != tx_lock)) {
        atomic_store_relaxed(&async->tx.txqs[qid].tx_lock, tx_lock);
    }
}

/* A sender in a 'puts_aside' mode that found the lock 'tx_lock' of Tx queue
 * 'qid' taken: instead of waiting for it, puts what it can of 'pkts' into
 * the queue's ring, which the lock's next holder sends first, and queues a
 * work item that sends them itself if nobody else does.  Returns the number
 * of packets put aside. */
static int
put_aside(struct vhost_async *async, int qid, rte_spinlock_t *tx_lock,
          struct rte_mbuf **pkts, int cnt)
{
    if (!async->tx.txqs[qid].ring) {
        return 0;
    }
    note_tx_lock(async, qid, tx_lock);
    return set_aside(async, qid, pkts, cnt, ASIDE_LOCKED);
}

/* Puts what it can of 'pkts' into the ring of Tx queue 'qid', whose lock
 * is known (note_tx_lock()), and queues a work item that sends them if
 * nobody else does (or leaves them to the sweepers).  Unless the lock was
 * taken ('why' is ASIDE_LOCKED: the caller then waits for it), frees what
 * does not fit.  Returns the number of packets put aside. */
static int
set_aside(struct vhost_async *async, int qid, struct rte_mbuf **pkts,
          int cnt, enum aside_why why)
{
    unsigned int n = rte_ring_mp_enqueue_burst(async->tx.txqs[qid].ring,
                                               (void **) pkts, cnt, NULL);

    if (n) {
        switch (why) {
        case ASIDE_LOCKED:
            COVERAGE_ADD(vhost_async_tx_deferred, n);
            vhost_stat_add(&async->tx.stats.put_aside, n);
            dp_defer_counter_add(pmd_put_aside, n);
            break;
        case ASIDE_LEAVING:
            COVERAGE_ADD(vhost_async_auto_leaving, n);
            vhost_stat_add(&async->tx.stats.held_back, n);
            break;
        case ASIDE_NO_LIST:
            vhost_stat_add(&async->tx.stats.held_back, n);
            break;
        }
        defer_or_sweep(async, qid, 0);
    }
    if (why != ASIDE_LOCKED && n < cnt) {
        rte_pktmbuf_free_bulk(pkts + n, cnt - n);
    }
    return n;
}

/* From the deferred work list of a sender that put packets aside on Tx
 * queue 'qid': sends what is still aside if the queue's lock is free (in a
 * 'drain', once it is, for at most DP_DEFER_DRAIN_MAX_MS).  Returns false
 * if the packets must wait. */
static bool
send_put_aside(struct vhost_async *async, const struct copy_mode *mode,
               int vid, int qid, bool drain)
{
    struct vhost_async_txq *txq = &async->tx.txqs[qid];
    rte_spinlock_t *tx_lock;
    int retries = 0, n_dma;

    atomic_read_relaxed(&txq->tx_lock, &tx_lock);
    if (!txq_trylock(async, tx_lock)) {
        long long int deadline;

        if (!drain) {
            return false;
        }
        deadline = time_msec() + DP_DEFER_DRAIN_MAX_MS;
        do {
            if (time_msec() > deadline) {
                VLOG_WARN_RL(&lc_rl, "%s: txq %d: %u packets put aside stay "
                             "there for the queue's next sender: its lock "
                             "was taken for %d ms", async->name, qid,
                             rte_ring_count(txq->ring),
                             DP_DEFER_DRAIN_MAX_MS);
                return false;
            }
            rte_pause();
        } while (!txq_trylock(async, tx_lock));
    }
    locked_send(async, mode, vid, qid, NULL, 0, 0, &retries, &n_dma);
    rte_spinlock_unlock(tx_lock);
    if (n_dma) {
        defer_or_sweep(async, qid, n_dma);
    }
    /* 'auto' leaving DMA keeps packets aside until its copies are done. */
    return !has_put_aside(async, qid);
}

int
vhost_async_send(struct vhost_async *async, int vid, int qid,
                 struct rte_mbuf **pkts, int cnt, int max_retries,
                 int *retries, rte_spinlock_t *tx_lock)
{
    const struct copy_mode *mode = mode_of(async);
    int dropped, n_dma;

    *retries = 0;
    if (!cnt) {
        return 0;
    }
    if (OVS_UNLIKELY(qid >= MAX_TXQ)) {
        rte_pktmbuf_free_bulk(pkts, cnt);
        return cnt;
    }
    if (OVS_UNLIKELY(get_vid(async) != vid)) {
        /* A new device whose async channels are not registered yet (or a
         * device going away): vhost would refuse async submissions, with
         * an error log per burst.  Nothing of it is in flight: copy on the
         * CPU. */
        mode = &vhost_copy_modes[VHOST_COPY_CPU];
    }
    if (!mode->tx_lock) {
        return mode->send(async, vid, qid, pkts, cnt, max_retries, retries,
                          &n_dma);
    }

    if (OVS_UNLIKELY(!txq_trylock(async, tx_lock))) {
        /* What a sender without a work list (the main thread) puts aside
         * is sent by the port's sweepers once the lock is free. */
        int n = mode->puts_aside ? put_aside(async, qid, tx_lock, pkts, cnt)
                                 : 0;

        if (n == cnt) {
            return 0;
        }
        /* The ring is full (or there is none): wait. */
        pkts += n;
        cnt -= n;
        if (!txq_lock(async, tx_lock)) {
            vhost_stat_add(&async->tx.stats.lock_drops, cnt);
            rte_pktmbuf_free_bulk(pkts, cnt);
            return cnt;
        }
    }
    if (mode->puts_aside) {
        note_tx_lock(async, qid, tx_lock);
    }
    dropped = locked_send(async, mode, vid, qid, pkts, cnt, max_retries,
                          retries, &n_dma);
    rte_spinlock_unlock(tx_lock);

    if (n_dma && mode->sender_retires) {
        defer_or_sweep(async, qid, n_dma);
    }
    return dropped;
}

/* 'v3' and 'ring' modes: the PMD that polls the port's Rx queue 'qid'
 * retires the copies of its Tx queue 'qid'. */
void
vhost_tx_rx_poll_completions(struct vhost_async *async, int vid, int qid)
{
    if (vhost_tx_inflight(async, qid) > 0) {
        poll_all(async, vid, qid);
        if (vhost_tx_inflight(async, qid) > 0) {
            /* This thread polls these copies: it must not sleep. */
            dp_defer_keep_awake();
            if (OVS_UNLIKELY(vhost_tx_engines_dead(async, qid))) {
                vhost_async_request_reset(async, TXQ_VRING(qid));
            }
        }
    }
}

/* 'ring' mode: the PMD that polls the port's Rx queue 'qid' is the single
 * consumer of the ring of Tx queue 'qid': it submits what the senders put
 * there, then retires. */
void
vhost_tx_ring_rx_work(struct vhost_async *async, int vid, int qid)
{
    struct rte_ring *ring = async->tx.txqs[qid].ring;

    if (ring) {
        send_from_ring(async, vid, qid, vhost_tx_dma_or_cpu_send, 1);
        if (!rte_ring_empty(ring)) {
            dp_defer_keep_awake();
        }
    }
    vhost_tx_rx_poll_completions(async, vid, qid);
}

/* What no deferred work list takes care of, from the PMDs that poll the
 * port's Rx queues: copies that a drain left behind or that a thread
 * without room in its list submitted (polled here), and packets that a
 * sender without a list put aside (sent here, once the lock is free). */
static void
sweep_port(struct vhost_async *async, int vid)
{
    const struct copy_mode *mode = mode_of(async);
    bool again = false;

    if (!atomic_exchange(&async->tx.sweep, false)) {
        return;
    }
    COVERAGE_INC(vhost_async_swept);
    for (int qid = 0; qid < async->tx.n_txq; qid++) {
        bool orphaned;

        sweep_orphaned(async, vid, qid);
        atomic_read_relaxed(&async->tx.txqs[qid].orphaned, &orphaned);
        if (orphaned
            || (mode->puts_aside && has_put_aside(async, qid)
                && !send_put_aside(async, mode, vid, qid, false))) {
            again = true;
        }
    }
    if (again) {
        atomic_store_relaxed(&async->tx.sweep, true);
        dp_defer_keep_awake();
    }
}

void
vhost_async_rx_hook(struct vhost_async *async, int vid, int qid)
{
    const struct copy_mode *mode = mode_of(async);
    bool sweep;

    if (qid >= MAX_TXQ || get_vid(async) != vid) {
        return;
    }
    atomic_read_relaxed(&async->tx.sweep, &sweep);
    if (OVS_UNLIKELY(sweep)) {
        sweep_port(async, vid);
    }
    if (mode->rx_work) {
        mode->rx_work(async, vid, qid);
    }
}

/* ---- Rings ------------------------------------------------------------- */

void
vhost_tx_free_rings(struct vhost_async *async)
{
    for (int i = 0; i < MAX_TXQ; i++) {
        struct rte_ring *ring = async->tx.txqs[i].ring;

        if (ring) {
            void *pkt;

            while (!rte_ring_sc_dequeue(ring, &pkt)) {
                rte_pktmbuf_free(pkt);
                vhost_stat_add(&async->tx.stats.tx_failed, 1);
            }
            rte_ring_free(ring);
            async->tx.txqs[i].ring = NULL;
        }
    }
}

/* Moves everything waiting in the rings of 'async' to the guest on the CPU
 * (nothing of the queue is in flight any more). */
static void
flush_rings(struct vhost_async *async, int vid)
{
    for (int qid = 0; vid >= 0 && qid < MAX_TXQ; qid++) {
        send_from_ring(async, vid, qid, vhost_tx_cpu_mode_send, INT_MAX);
    }
}

static bool
alloc_rings(struct vhost_async *async, int n_txq)
{
    static atomic_count ring_seq = ATOMIC_COUNT_INIT(0);

    for (int qid = 0; qid < n_txq && qid < MAX_TXQ; qid++) {
        char name[RTE_RING_NAMESIZE];

        if (async->tx.txqs[qid].ring) {
            continue;
        }
        snprintf(name, sizeof name, "ovs_vha_%u",
                 atomic_count_inc(&ring_seq));
        async->tx.txqs[qid].ring = rte_ring_create(name, RING_SIZE,
                                                SOCKET_ID_ANY,
                                                RING_F_SC_DEQ);
        if (!async->tx.txqs[qid].ring) {
            VLOG_ERR("%s: cannot create the Tx ring of queue %d (%s)",
                     async->name, qid, rte_strerror(rte_errno));
            return false;
        }
    }
    return true;
}

bool
vhost_tx_ring_enter(struct vhost_async *async, int n_txq, bool again)
{
    if (!alloc_rings(async, n_txq) && !again) {
        vhost_tx_free_rings(async);
        return false;
    }
    return true;
}

void
vhost_tx_ring_leave(struct vhost_async *async, int vid)
{
    flush_rings(async, vid);
    vhost_tx_free_rings(async);
}

/* 'defer' and 'auto': the rings where senders put packets aside while a
 * queue's lock is taken.  A queue without one (out of memory, logged) has
 * its senders wait for the lock. */
bool
vhost_tx_aside_enter(struct vhost_async *async, int n_txq,
                     bool again OVS_UNUSED)
{
    alloc_rings(async, n_txq);
    return true;
}

/* ---- Statistics --------------------------------------------------------- */

/* Switches of 'auto' to DMA and to the CPU, and bursts kept off DMA by an
 * engine's capacity, over all Tx queues. */
static void
auto_counts(const struct vhost_async *async, uint64_t *to_dma,
            uint64_t *to_cpu, uint64_t *capped)
{
    *to_dma = *to_cpu = *capped = 0;
    for (int i = 0; async->tx.autos && i < async->tx.n_txq; i++) {
        *to_dma += vhost_auto_switches(&async->tx.autos[i], VHOST_AUTO_DMA);
        *to_cpu += vhost_auto_switches(&async->tx.autos[i], VHOST_AUTO_CPU);
        *capped += vhost_auto_capped(&async->tx.autos[i]);
    }
}

void
vhost_tx_get_custom_stats(const struct vhost_async *async,
                          struct netdev_custom_stats *stats)
{
    const struct vhost_async_stats *st = &async->tx.stats;
    uint64_t to_dma, to_cpu, capped;
    uint64_t in_flight = 0;

    for (int i = 0; i < MAX_TXQ; i++) {
        int v = vhost_tx_inflight(CONST_CAST(struct vhost_async *, async), i);

        in_flight += MAX(v, 0);
    }
    auto_counts(async, &to_dma, &to_cpu, &capped);

    const struct vhost_stat_value values[] = {
        { "ovs_async_tx_inflight", in_flight },
        { "ovs_async_tx_submitted", vhost_stat_get(&st->submitted) },
        { "ovs_async_tx_completed", vhost_stat_get(&st->completed) },
        { "ovs_async_tx_cpu_fallbacks",
          vhost_stat_get(&st->cpu_copies) },
        { "ovs_async_tx_put_aside", vhost_stat_get(&st->put_aside) },
        { "ovs_async_tx_held_back", vhost_stat_get(&st->held_back) },
        { "ovs_async_tx_lock_wait_drops",
          vhost_stat_get(&st->lock_drops) },
        { "ovs_async_tx_ring_full_drops",
          vhost_stat_get(&st->ring_full) },
        { "ovs_async_tx_failure_drops",
          vhost_stat_get(&st->tx_failed) },
        { "ovs_async_tx_abandoned", vhost_stat_get(&st->abandoned) },
        { "ovs_async_tx_abandoned_freed",
          vhost_stat_get(&st->abandoned_freed) },
        { "ovs_async_tx_wedged_drops", vhost_stat_get(&st->wedged) },
        { "ovs_async_resets", vhost_stat_get(&st->resets) },
        { "ovs_async_auto_cpu_copies",
          vhost_stat_get(&st->auto_cpu) },
        { "ovs_async_auto_switches_to_dma", to_dma },
        { "ovs_async_auto_switches_to_cpu", to_cpu },
        { "ovs_async_auto_dma_capped", capped },
    };

    vhost_stats_append(stats, values, ARRAY_SIZE(values));
}
