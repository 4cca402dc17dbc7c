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

#ifndef DPIF_NETDEV_DEFER_H
#define DPIF_NETDEV_DEFER_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openvswitch/dynamic-string.h"
#include "ovs-atomic.h"

struct smap;

/* Per-PMD deferred work list ("work defer").
 *
 * A PMD thread that starts work it cannot finish at once (for example a
 * packet copy handed to a DMA engine) records a work item in its own list
 * instead of waiting for it.  The PMD runs its list after each round of Rx
 * polling, and drains it before RCU quiescing for a reload and before it
 * exits.  An item whose work is still in flight stays queued.
 *
 * A thread without a list (the main thread, which sends OpenFlow
 * packet-outs), or whose list is full, gets false from dp_defer_submit():
 * the work is never run inline, since the caller may hold a lock the work
 * takes, and must not spin on a DMA engine.  The caller arranges for the
 * work to be retired by other means (the netdev layer has other pollers).
 * other_config:pmd-defer-max-items bounds the items of each list (default
 * and at most DP_DEFER_MAX_ITEMS), to fill one on purpose.
 *
 * A drain waits only for the units this thread submitted, and at most
 * DP_DEFER_DRAIN_MAX_MS: an engine that stops completing must not hold a
 * PMD reload (and the main thread waiting for it) forever.  The callbacks
 * of what is left were told (drain == true) that this thread may stop
 * polling their work; the netdev layer then retires it by other means.
 * There is no cross-thread handoff: only the owning thread touches its
 * list.
 *
 * Adaptive re-checks.  Re-checking work that is still in flight costs
 * cycles; leaving finished work unretired costs latency and ring space.
 * Each submission of 'n' units (packets) is timestamped, and when the
 * callback reports units retired, the list learns the work's completion
 * latency (submit to retire, an EWMA).  An item is then re-checked when its
 * oldest unretired submission is expected to be done, and never later than
 * other_config:pmd-defer-recheck-max after the last check (0 re-checks
 * on every iteration).
 *
 * The netdev layer does not know about PMD threads or dpif-netdev: it only
 * calls dp_defer_submit() with a callback that retires finished work and
 * says whether any remains ("work pending").  dpif-netdev makes a PMD's
 * list the calling thread's current list with dp_defer_set_current().
 */

/* Retires what is finished of the work of ('aux', 'qid') and stores the
 * number of units retired in '*n_retired'; returns true if work is still in
 * flight and the item must stay queued.  If 'drain' is true, the caller is
 * about to reload or exit: the callback should poll harder, and if it
 * returns true, arrange for the rest to be retired without this thread,
 * since the drain may give up (DP_DEFER_DRAIN_MAX_MS). */
typedef bool dp_defer_work_cb(void *aux, int qid, bool drain,
                              uint32_t *n_retired);

enum dp_defer_stat {
    DP_DEFER_QUEUED,        /* Items added to the list. */
    DP_DEFER_COMPLETED,     /* Items whose work finished. */
    DP_DEFER_RECHECKS,      /* Runs of items still in flight. */
    DP_DEFER_REFUSED,       /* Items refused because the list was full. */
    DP_DEFER_LEFT,          /* Items a drain gave up on (time bound). */

    /* Completion latency of submissions, in ticks (dp_defer_ticks()). */
    DP_DEFER_LAT_SUM,       /* Sum over retired submissions. */
    DP_DEFER_LAT_N,         /* Number of retired submissions. */

    /* Sleeps (pmd-maxsleep) that began while the thread's DMA engine still
     * had copies of it in flight (dp_defer_set_inflight_probe()), and those
     * copies.  The list keeps a thread awake while its work is in flight:
     * these say whether anything slips past it. */
    DP_DEFER_SLEEPS_INFLIGHT,
    DP_DEFER_SLEEP_COPIES,
    DP_DEFER_N_STATS
};

/* Counters of other modules, kept per thread beside the list's own and
 * printed after them by "pmd-stats-show" and "pmd-perf-show": work that a
 * PMD thread does for a netdev, such as the DMA copies of the vhost copy
 * modes.  A module registers each of its counters once, before PMD threads
 * count, and counts on the calling thread with dp_defer_counter_add(). */
#define DP_DEFER_MAX_COUNTERS 12
#define DP_DEFER_N_COUNTERS (DP_DEFER_N_STATS + DP_DEFER_MAX_COUNTERS)

int dp_defer_counter_register(const char *label);
void dp_defer_counter_add(int counter, uint64_t n);

/* Submissions of an item not yet retired, oldest first. */
#define DP_DEFER_MAX_BATCHES 4

struct dp_defer_batch {
    uint64_t ticks;            /* When submitted. */
    uint32_t n;                /* Units not yet retired. */
};

struct dp_defer_item {
    dp_defer_work_cb *cb;
    void *aux;
    int qid;
    uint8_t n_batches;
    struct dp_defer_batch batches[DP_DEFER_MAX_BATCHES];
    uint64_t next_check;       /* Ticks when the item is due. */
};

#define DP_DEFER_MAX_ITEMS 256

/* Longest a drain waits for work in flight. */
#define DP_DEFER_DRAIN_MAX_MS 100

struct dp_defer {
    struct dp_defer_item items[DP_DEFER_MAX_ITEMS];
    size_t n_items;
    size_t max_items;          /* Capacity in use, <= DP_DEFER_MAX_ITEMS. */
    bool keep_awake;           /* Work in flight outside the list. */
    uint64_t latency;          /* Completion latency EWMA, in ticks. */

    /* Statistics, written only by the owning thread: enum dp_defer_stat,
     * then the registered counters. */
    atomic_uint64_t counters[DP_DEFER_N_COUNTERS];
    uint64_t zero[DP_DEFER_N_COUNTERS];   /* Values at the last clear. */
    atomic_uint64_t latency_max;       /* Since the last clear, in ticks. */
    atomic_uint64_t latency_ewma;      /* Copy of 'latency' for readers. */
};

void dp_defer_set_config(const struct smap *other_config);

void dp_defer_init(struct dp_defer *, size_t max_items);

void dp_defer_set_current(struct dp_defer *);
/* Queues ('cb', 'aux', 'qid'), with 'n' more units in flight, in the
 * calling thread's list.  Returns false, doing nothing, if the thread has
 * no list or it is full. */
bool dp_defer_submit(dp_defer_work_cb *, void *aux, int qid, uint32_t n);
/* True if the calling thread has a list (a PMD thread). */
bool dp_defer_has_list(void);
void dp_defer_keep_awake(void);

size_t dp_defer_run(struct dp_defer *);
void dp_defer_drain(struct dp_defer *);

/* Tells the lists how to count the copies in flight on the calling
 * thread's DMA engine (netdev-dpdk-dma.h), for DP_DEFER_SLEEPS_INFLIGHT. */
void dp_defer_set_inflight_probe(uint64_t (*)(void));
void dp_defer_sleeping(struct dp_defer *);

/* Returns true if the owning PMD may sleep now (pmd-maxsleep): nothing is
 * deferred and nobody called dp_defer_keep_awake() since the last call.
 * The caller sleeps if it returns true. */
static inline bool
dp_defer_may_sleep(struct dp_defer *defer)
{
    bool awake = defer->keep_awake;

    defer->keep_awake = false;
    if (defer->n_items || awake) {
        return false;
    }
    dp_defer_sleeping(defer);
    return true;
}

void dp_defer_clear_stats(struct dp_defer *);
void dp_defer_format_stats(struct ds *, const struct dp_defer *);
void dp_defer_clear_other_stats(void);

#endif /* dpif-netdev-defer.h */
