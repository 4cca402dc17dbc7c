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

#include "netdev-dpdk-vhost-rx.h"

#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_spinlock.h>
#include <rte_vhost.h>
#include <rte_vhost_async.h>

#include "dpif-netdev-defer.h"
#include "netdev-dpdk-dma.h"
#include "netdev-dpdk-vhost-auto.h"
#include "netdev-provider.h"
#include "openvswitch/vlog.h"
#include "ovs-thread.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_vhost_rx);

/* Same limit as netdev-dpdk's OVS_VHOST_MAX_QUEUE_NUM. */
#define MAX_RXQ 1024

/* The most copies of one Rx queue in flight.  vhost keeps the mbufs of
 * copies that an engine never completes, and cannot be asked for them, so
 * this is also the most mbufs an Rx queue can lose to a failed engine
 * (vhost's own bound is the vring's size); 8 bursts keep an engine busy.
 * A queue at this bound has an engine that falls behind it: for 'auto',
 * DMA is losing there. */
#define RX_INFLIGHT_MAX 256

/* What a copy mode of vhost-user Rx is, in one row. */
struct rx_copy_mode {
    const char *name;
    bool dma;                   /* Copies go to DMA engines: the device
                                 * needs async channels. */
};

static const struct rx_copy_mode rx_copy_modes[VHOST_RX_N_MODES] = {
    /* Stock synchronous rte_vhost_dequeue_burst() by the polling PMD. */
    [VHOST_RX_CPU] = { .name = "cpu" },
    /* The polling PMD submits on its engine and receives what completed. */
    [VHOST_RX_DMA] = { .name = "dma", .dma = true },
    /* Per Rx queue, cpu or dma, whichever costs the PMD fewer cycles per
     * packet (netdev-dpdk-vhost-auto.h). */
    [VHOST_RX_AUTO] = { .name = "auto", .dma = true },
};

/* Per Rx queue state.  The PMD thread that polls the queue writes it; the
 * life-cycle paths (clears) change 'copies' and the stash too, the former
 * with atomic operations, the latter under 'stash_lock'.
 *
 * 'lock' keeps the guest's order between a clear and the PMD: the PMD
 * holds it while it receives (a try-lock: if a clear holds it, the queue
 * has nothing for the PMD now), a clear while it completes the queue's
 * copies and stashes their packets.  So a clear's packets are either all
 * older than what the PMD receives after it (they wait in the stash,
 * which the PMD empties first) or all newer.  Lock order: vhost's queue
 * lock, then 'lock' (the PMD only try-locks vhost's). */
struct vhost_rxq {
    PADDED_MEMBERS(CACHE_LINE_SIZE,
        rte_spinlock_t lock;
        struct vhost_vq_copies copies;
        atomic_bool stashed;        /* 'n_stash' is nonzero. */
        uint32_t last_avg;          /* Average frame size of the last
                                     * burst, for 'auto'. */
        atomic_uint64_t submitted;  /* Packets handed to a DMA engine. */
        atomic_uint64_t completed;  /* Packets whose copy completed. */
        atomic_uint64_t cpu_copies; /* Copied on the CPU in an async mode
                                     * for want of a dmadev. */
        atomic_uint64_t auto_cpu;   /* Copied on the CPU by choice of
                                     * 'auto'. */
    );
    PADDED_MEMBERS(CACHE_LINE_SIZE,
        rte_spinlock_t stash_lock;
        struct rte_mbuf **stash;    /* Packets a clear completed, in the
                                     * guest's order, from 'stash_ofs'. */
        uint32_t n_stash;
        uint32_t stash_ofs;
        uint32_t stash_size;
    );
};

struct vhost_rx {
    char *name;
    struct vhost_rxq *rxqs;         /* MAX_RXQ entries. */
    struct vhost_auto *autos;       /* MAX_RXQ entries, once 'auto' is
                                     * used; written by each queue's PMD. */
    atomic_uint64_t dropped;        /* Stashed packets of a device that
                                     * went away. */
};

/* Per PMD thread counters (dp_defer_counter_register()). */
static int pmd_rx_submitted = -1;
static int pmd_rx_completed = -1;
static int pmd_rx_cpu_fallbacks = -1;
static int pmd_rx_auto_cpu = -1;

void
vhost_rx_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        pmd_rx_submitted = dp_defer_counter_register(
            "DMA Rx copies submitted");
        pmd_rx_completed = dp_defer_counter_register(
            "DMA Rx copies completed");
        pmd_rx_cpu_fallbacks = dp_defer_counter_register(
            "DMA Rx CPU fallbacks");
        pmd_rx_auto_cpu = dp_defer_counter_register(
            "auto mode Rx CPU copies");
        ovsthread_once_done(&once);
    }
}

const char *
vhost_rx_mode_name(enum vhost_rx_mode mode)
{
    return mode < VHOST_RX_N_MODES ? rx_copy_modes[mode].name : "unknown";
}

bool
vhost_rx_mode_from_string(const char *s, enum vhost_rx_mode *mode)
{
    for (int i = 0; i < VHOST_RX_N_MODES; i++) {
        if (s && !strcmp(s, rx_copy_modes[i].name)) {
            *mode = i;
            return true;
        }
    }
    return false;
}

bool
vhost_rx_mode_dma(enum vhost_rx_mode mode)
{
    return mode < VHOST_RX_N_MODES && rx_copy_modes[mode].dma;
}

struct vhost_rx *
vhost_rx_create(const char *port_name)
{
    struct vhost_rx *rx = xzalloc(sizeof *rx);

    rx->name = xstrdup(port_name);
    rx->rxqs = xzalloc_cacheline(MAX_RXQ * sizeof *rx->rxqs);
    for (int i = 0; i < MAX_RXQ; i++) {
        struct vhost_rxq *q = &rx->rxqs[i];

        atomic_init(&q->copies.inflight, 0);
        atomic_init(&q->copies.dma_mask, 0);
        atomic_init(&q->stashed, false);
        atomic_init(&q->submitted, 0);
        atomic_init(&q->completed, 0);
        atomic_init(&q->cpu_copies, 0);
        atomic_init(&q->auto_cpu, 0);
        rte_spinlock_init(&q->lock);
        rte_spinlock_init(&q->stash_lock);
    }
    atomic_init(&rx->dropped, 0);
    return rx;
}

static uint32_t
drop_stash(struct vhost_rx *rx, struct vhost_rxq *q)
{
    uint32_t n;

    rte_spinlock_lock(&q->stash_lock);
    n = q->n_stash;
    if (n) {
        rte_pktmbuf_free_bulk(q->stash + q->stash_ofs, n);
        q->n_stash = q->stash_ofs = 0;
        atomic_store_relaxed(&q->stashed, false);
        vhost_stat_add(&rx->dropped, n);
    }
    rte_spinlock_unlock(&q->stash_lock);
    return n;
}

void
vhost_rx_destroy(struct vhost_rx *rx)
{
    if (!rx) {
        return;
    }
    for (int i = 0; i < MAX_RXQ; i++) {
        drop_stash(rx, &rx->rxqs[i]);
        free(rx->rxqs[i].stash);
    }
    free_cacheline(rx->rxqs);
    free_cacheline(rx->autos);
    free(rx->name);
    free(rx);
}

void
vhost_rx_enter(struct vhost_rx *rx, enum vhost_rx_mode mode, bool again)
{
    if (mode == VHOST_RX_AUTO && !again) {
        if (!rx->autos) {
            rx->autos = xzalloc_cacheline(MAX_RXQ * sizeof *rx->autos);
        }
        for (int qid = 0; qid < MAX_RXQ; qid++) {
            vhost_auto_reset(&rx->autos[qid], RX_INFLIGHT_MAX);
        }
    }
}

struct vhost_vq_copies *
vhost_rx_copies(struct vhost_rx *rx, int qid)
{
    return qid >= 0 && qid < MAX_RXQ ? &rx->rxqs[qid].copies : NULL;
}

static inline int
rxq_inflight(struct vhost_rxq *q)
{
    int n;

    atomic_read_relaxed(&q->copies.inflight, &n);
    return n;
}

static inline void
rxq_inflight_add(struct vhost_rxq *q, int delta)
{
    int orig;

    if (delta) {
        atomic_add_relaxed(&q->copies.inflight, delta, &orig);
    }
}

void
vhost_rx_stash(struct vhost_rx *rx, int qid, struct rte_mbuf **pkts,
               uint16_t n)
{
    struct vhost_rxq *q;

    if (!n || qid < 0 || qid >= MAX_RXQ) {
        return;
    }
    q = &rx->rxqs[qid];
    rxq_inflight_add(q, -(int) n);
    vhost_stat_add(&q->completed, n);

    rte_spinlock_lock(&q->stash_lock);
    if (q->stash_ofs + q->n_stash + n > q->stash_size) {
        if (q->n_stash) {
            memmove(q->stash, q->stash + q->stash_ofs,
                    q->n_stash * sizeof *q->stash);
        }
        q->stash_ofs = 0;
        if (q->n_stash + n > q->stash_size) {
            q->stash_size = MAX(2 * q->stash_size, q->n_stash + n);
            q->stash = xrealloc(q->stash, q->stash_size * sizeof *q->stash);
        }
    }
    memcpy(q->stash + q->stash_ofs + q->n_stash, pkts, n * sizeof *pkts);
    q->n_stash += n;
    atomic_store_relaxed(&q->stashed, true);
    rte_spinlock_unlock(&q->stash_lock);
}

uint32_t
vhost_rx_stashed(const struct vhost_rx *rx, int qid)
{
    struct vhost_rxq *q = &CONST_CAST(struct vhost_rx *, rx)->rxqs[qid];
    uint32_t n;

    rte_spinlock_lock(&q->stash_lock);
    n = q->n_stash;
    rte_spinlock_unlock(&q->stash_lock);
    return n;
}

/* Takes up to 'count' packets out of the stash of 'q'. */
static uint16_t
take_stash(struct vhost_rxq *q, struct rte_mbuf **pkts, uint16_t count)
{
    uint16_t n;

    rte_spinlock_lock(&q->stash_lock);
    n = MIN(count, q->n_stash);
    if (n) {
        memcpy(pkts, q->stash + q->stash_ofs, n * sizeof *pkts);
    }
    q->stash_ofs += n;
    q->n_stash -= n;
    if (!q->n_stash) {
        q->stash_ofs = 0;
        atomic_store_relaxed(&q->stashed, false);
    }
    rte_spinlock_unlock(&q->stash_lock);
    return n;
}

void
vhost_rx_reset(struct vhost_rx *rx)
{
    uint32_t dropped = 0;

    for (int qid = 0; qid < MAX_RXQ; qid++) {
        struct vhost_rxq *q = &rx->rxqs[qid];

        dropped += drop_stash(rx, q);
        atomic_store_relaxed(&q->copies.inflight, 0);
        atomic_store_relaxed(&q->copies.dma_mask, 0);
    }
    if (dropped) {
        VLOG_WARN("%s: dropped %"PRIu32" packets received from the guest "
                  "by DMA copies that completed as its device went away",
                  rx->name, dropped);
    }
}

/* Takes back what completed of the copies of Rx queue 'qid' on every
 * dmadev that may hold them but 'skip' (-1: none), without submitting new
 * ones.  Returns the number of packets stored in 'pkts'. */
static uint16_t
harvest(struct vhost_rxq *q, int vid, int qid, int16_t skip,
        struct rte_mbuf **pkts, uint16_t count)
{
    uint16_t n = 0;
    uint64_t mask;
    int16_t dma;

    atomic_read_relaxed(&q->copies.dma_mask, &mask);
    if (skip >= 0) {
        mask &= ~(UINT64_C(1) << skip);
    }
    VHOST_FOR_EACH_DMA (dma, mask) {
        if (n >= count) {
            break;
        }
        n += rte_vhost_clear_queue(vid, RXQ_VRING(qid), pkts + n, count - n,
                                   dma, NETDEV_DPDK_DMA_VCHAN);
    }
    if (n) {
        rxq_inflight_add(q, -(int) n);
        vhost_stat_add(&q->completed, n);
        dp_defer_counter_add(pmd_rx_completed, n);
    }
    return n;
}

static uint32_t
avg_size(struct rte_mbuf **pkts, uint16_t n)
{
    uint64_t bytes = 0;

    for (int i = 0; i < n; i++) {
        bytes += rte_pktmbuf_pkt_len(pkts[i]);
    }
    return n ? bytes / n : 0;
}

/* Submits the copies of the guest's next packets on 'dma' and receives
 * those whose copies completed. */
static uint16_t
dma_dequeue(struct vhost_rxq *q, int vid, int qid, int16_t dma,
            struct rte_mempool *mp, struct rte_mbuf **pkts, uint16_t count)
{
    uint64_t bit = UINT64_C(1) << dma;
    int before = rxq_inflight(q);
    int nr_inflight = -1;
    uint16_t n = 0;
    uint64_t mask;

    atomic_read_relaxed(&q->copies.dma_mask, &mask);
    if (OVS_UNLIKELY(mask != bit)) {
        if (before > 0 && mask & ~bit) {
            /* The queue moved from another PMD, whose engine may still
             * hold copies of it. */
            n = harvest(q, vid, qid, dma, pkts, count);
            before = rxq_inflight(q);
            atomic_read_relaxed(&q->copies.dma_mask, &mask);
        }
        if (before <= 0) {
            mask = 0;
        }
        atomic_store_relaxed(&q->copies.dma_mask, mask | bit);
    }
    if (n < count && before >= RX_INFLIGHT_MAX) {
        /* Enough copies in flight to keep an engine busy: take what
         * completed and submit nothing more until some have. */
        n += harvest(q, vid, qid, -1, pkts + n, count - n);
    } else if (n < count) {
        uint16_t got;

        got = rte_vhost_async_try_dequeue_burst(vid, RXQ_VRING(qid), mp,
                                                pkts + n, count - n,
                                                &nr_inflight, dma,
                                                NETDEV_DPDK_DMA_VCHAN);
        if (nr_inflight >= 0) {
            int submitted = nr_inflight - before + got;

            rxq_inflight_add(q, nr_inflight - before);
            if (submitted > 0) {
                vhost_stat_add(&q->submitted, submitted);
                dp_defer_counter_add(pmd_rx_submitted, submitted);
            }
        }
        if (got) {
            vhost_stat_add(&q->completed, got);
            dp_defer_counter_add(pmd_rx_completed, got);
        }
        n += got;
    }
    return n;
}

/* Copies on the CPU, counting the packets in 'counter' and the calling
 * PMD's 'pmd_counter' unless 'counter' is NULL (the 'cpu' mode). */
static uint16_t
cpu_dequeue(int vid, int qid, struct rte_mempool *mp,
            struct rte_mbuf **pkts, uint16_t count,
            atomic_uint64_t *counter, int pmd_counter)
{
    uint16_t n = rte_vhost_dequeue_burst(vid, RXQ_VRING(qid), mp, pkts,
                                         count);

    if (n && counter) {
        vhost_stat_add(counter, n);
        dp_defer_counter_add(pmd_counter, n);
    }
    return n;
}

void
vhost_rx_lock(struct vhost_rx *rx, int qid)
{
    if (qid >= 0 && qid < MAX_RXQ) {
        rte_spinlock_lock(&rx->rxqs[qid].lock);
    }
}

void
vhost_rx_unlock(struct vhost_rx *rx, int qid)
{
    if (qid >= 0 && qid < MAX_RXQ) {
        rte_spinlock_unlock(&rx->rxqs[qid].lock);
    }
}

/* Receives a burst of Rx queue 'qid'.  Unlike Tx, whose modes differ in who
 * sends and who retires, every Rx mode is one choice per burst between two
 * paths, dma_dequeue() and cpu_dequeue(), made by the PMD that polls the
 * queue: 'cpu' takes the CPU, 'dma' the engine if the PMD has one in
 * service, 'auto' what vhost_auto_choose() says.  The choice cannot be made
 * once per device, as DPDK's vhost picks its queue ops, because it changes
 * with the PMD's engine (taken out of service, another PMD after a
 * reload) and, in 'auto', with the traffic: so the rows of rx_copy_modes[]
 * hold no functions, and this is an if/else. */
static uint16_t
dequeue__(struct vhost_rx *rx, struct vhost_rxq *q, enum vhost_rx_mode mode,
          int vid, int qid, struct rte_mempool *mp, struct rte_mbuf **pkts,
          uint16_t count)
{
    struct vhost_auto *a = NULL;
    enum vhost_auto_path path;
    int16_t dma = -1;
    uint64_t start = 0;
    uint16_t n = 0;
    bool stashed;

    /* What a clear completed comes before anything still in flight. */
    atomic_read_relaxed(&q->stashed, &stashed);
    if (OVS_UNLIKELY(stashed)) {
        n = take_stash(q, pkts, count);
        if (n == count) {
            return n;
        }
    }

    if (mode != VHOST_RX_CPU) {
        dma = netdev_dpdk_dma_get();
    }
    if (mode == VHOST_RX_AUTO && dma >= 0 && rx->autos) {
        a = &rx->autos[qid];
        path = (q->last_avg ? vhost_auto_choose(a, q->last_avg)
                : vhost_auto_path(a));
    } else {
        path = mode == VHOST_RX_CPU || dma < 0 ? VHOST_AUTO_CPU
               : VHOST_AUTO_DMA;
    }

    if (path == VHOST_AUTO_CPU && OVS_UNLIKELY(rxq_inflight(q) > 0)) {
        /* Leaving DMA: the CPU's copies must not overtake those in
         * flight. */
        n += harvest(q, vid, qid, -1, pkts + n, count - n);
        if (rxq_inflight(q) > 0) {
            dp_defer_keep_awake();
            return n;
        }
    }
    if (a && path != vhost_auto_path(a)) {
        vhost_auto_switched(a, path);
    }
    if (n == count) {
        return n;
    }

    if (a) {
        start = rte_get_tsc_cycles();
    }
    if (path == VHOST_AUTO_DMA) {
        uint16_t got = dma_dequeue(q, vid, qid, dma, mp, pkts + n,
                                   count - n);

        if (a && (got || rxq_inflight(q) >= RX_INFLIGHT_MAX)) {
            /* A burst that took nothing while the engine falls behind is
             * recorded too: that is how a stalled engine shows. */
            vhost_auto_record(a, path, start, rte_get_tsc_cycles() - start,
                              got, got, rxq_inflight(q));
        }
        if (got) {
            q->last_avg = avg_size(pkts + n, got);
        }
        n += got;
        if (rxq_inflight(q) > 0) {
            /* This thread polls these copies: it must not sleep. */
            dp_defer_keep_awake();
        }
    } else {
        atomic_uint64_t *counter = NULL;
        int pmd_counter = -1;
        uint16_t got;

        if (a) {
            counter = &q->auto_cpu;
            pmd_counter = pmd_rx_auto_cpu;
        } else if (mode != VHOST_RX_CPU) {
            counter = &q->cpu_copies;
            pmd_counter = pmd_rx_cpu_fallbacks;
        }
        got = cpu_dequeue(vid, qid, mp, pkts + n, count - n, counter,
                          pmd_counter);
        if (a && got) {
            vhost_auto_record(a, path, start, rte_get_tsc_cycles() - start,
                              got, got, 0);
        }
        if (got) {
            q->last_avg = avg_size(pkts + n, got);
        }
        n += got;
    }
    return n;
}

uint16_t
vhost_rx_dequeue(struct vhost_rx *rx, enum vhost_rx_mode mode, int vid,
                 int qid, struct rte_mempool *mp, struct rte_mbuf **pkts,
                 uint16_t count)
{
    struct vhost_rxq *q;
    uint16_t n;

    if (OVS_UNLIKELY(qid < 0 || qid >= MAX_RXQ)) {
        return 0;
    }
    q = &rx->rxqs[qid];
    if (OVS_UNLIKELY(!rte_spinlock_trylock(&q->lock))) {
        /* A clear of this queue is under way (vhost holds the queue). */
        dp_defer_keep_awake();
        return 0;
    }
    n = dequeue__(rx, q, mode, vid, qid, mp, pkts, count);
    rte_spinlock_unlock(&q->lock);
    return n;
}

/* ---- Statistics --------------------------------------------------------- */

uint64_t
vhost_rx_dropped(const struct vhost_rx *rx)
{
    return vhost_stat_get(&rx->dropped);
}

void
vhost_rx_get_custom_stats(const struct vhost_rx *rx,
                          struct netdev_custom_stats *stats)
{
    uint64_t in_flight = 0, submitted = 0, completed = 0, cpu = 0;
    uint64_t auto_cpu = 0, to_dma = 0, to_cpu = 0, capped = 0;

    for (int i = 0; i < MAX_RXQ; i++) {
        struct vhost_rxq *q = &CONST_CAST(struct vhost_rx *, rx)->rxqs[i];

        in_flight += MAX(rxq_inflight(q), 0);
        submitted += vhost_stat_get(&q->submitted);
        completed += vhost_stat_get(&q->completed);
        cpu += vhost_stat_get(&q->cpu_copies);
        auto_cpu += vhost_stat_get(&q->auto_cpu);
        if (rx->autos) {
            to_dma += vhost_auto_switches(&rx->autos[i], VHOST_AUTO_DMA);
            to_cpu += vhost_auto_switches(&rx->autos[i], VHOST_AUTO_CPU);
            capped += vhost_auto_capped(&rx->autos[i]);
        }
    }

    const struct vhost_stat_value values[] = {
        { "ovs_async_rx_inflight", in_flight },
        { "ovs_async_rx_submitted", submitted },
        { "ovs_async_rx_completed", completed },
        { "ovs_async_rx_cpu_fallbacks", cpu },
        { "ovs_async_rx_dropped", vhost_stat_get(&rx->dropped) },
        { "ovs_async_rx_auto_cpu_copies", auto_cpu },
        { "ovs_async_rx_auto_switches_to_dma", to_dma },
        { "ovs_async_rx_auto_switches_to_cpu", to_cpu },
        { "ovs_async_rx_auto_dma_capped", capped },
    };
    vhost_stats_append(stats, values, ARRAY_SIZE(values));
}

void
vhost_stats_append(struct netdev_custom_stats *stats,
                   const struct vhost_stat_value *values, size_t n)
{
    stats->counters = xrealloc(stats->counters,
                               (stats->size + n) * sizeof *stats->counters);
    for (size_t i = 0; i < n; i++) {
        struct netdev_custom_counter *c = &stats->counters[stats->size++];

        ovs_strlcpy(c->name, values[i].name, NETDEV_CUSTOM_STATS_NAME_SIZE);
        c->value = values[i].value;
    }
}

void
vhost_rx_format_rxq(struct ds *reply, const struct vhost_rx *rx,
                    enum vhost_rx_mode mode, int qid)
{
    struct vhost_rxq *q = &CONST_CAST(struct vhost_rx *, rx)->rxqs[qid];
    uint32_t stashed = vhost_rx_stashed(rx, qid);

    ds_put_format(reply, "  rxq %d: ", qid);
    if (mode == VHOST_RX_AUTO && rx->autos) {
        vhost_auto_format(reply, &rx->autos[qid]);
        ds_put_cstr(reply, "; ");
    }
    ds_put_format(reply, "%d copies in flight", MAX(rxq_inflight(q), 0));
    if (stashed) {
        ds_put_format(reply, ", %"PRIu32" packets completed by a clear",
                      stashed);
    }
    ds_put_char(reply, '\n');
}
