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

#include "dpif-netdev-defer.h"

#include <string.h>

#include "ovs-thread.h"
#include "util.h"

/* The calling thread's current list, set by its PMD thread. */
DEFINE_STATIC_PER_THREAD_DATA(struct dp_defer *, current_defer, NULL);

/* Accounting of threads without a list (the main thread). */
static struct dp_defer other_threads;
static struct ovs_mutex other_mutex = OVS_MUTEX_INITIALIZER;

static inline void
dp_defer_count(struct dp_defer *defer, enum dp_defer_stat stat, uint64_t n)
{
    uint64_t v;

    /* Only the owning thread writes, so no read-modify-write atomics. */
    atomic_read_relaxed(&defer->counters[stat], &v);
    atomic_store_relaxed(&defer->counters[stat], v + n);
}

void
dp_defer_init(struct dp_defer *defer, size_t max_items)
{
    memset(defer, 0, sizeof *defer);
    defer->max_items = MAX(1, MIN(max_items, DP_DEFER_MAX_ITEMS));
    for (int i = 0; i < DP_DEFER_N_STATS; i++) {
        atomic_init(&defer->counters[i], 0);
    }
}

/* Makes 'defer' (or no list, if NULL) the list of the calling thread. */
void
dp_defer_set_current(struct dp_defer *defer)
{
    *current_defer_get() = defer;
}

/* Runs ('cb', 'aux', 'qid') until it has nothing in flight. */
static void
dp_defer_run_inline(dp_defer_work_cb *cb, void *aux, int qid)
{
    while (cb(aux, qid, false)) {
        continue;
    }
}

/* Records that the calling thread has work in flight for ('aux', 'qid')
 * that 'cb' retires.  The item goes to the thread's current list, once per
 * ('cb', 'aux', 'qid'); without a current list, the work is run inline. */
void
dp_defer_submit(dp_defer_work_cb *cb, void *aux, int qid)
{
    struct dp_defer *defer = *current_defer_get();
    struct dp_defer_item *item;

    if (!defer) {
        dp_defer_run_inline(cb, aux, qid);
        return;
    }

    for (size_t i = 0; i < defer->n_items; i++) {
        item = &defer->items[i];
        if (item->aux == aux && item->qid == qid && item->cb == cb) {
            return;
        }
    }

    if (defer->n_items >= defer->max_items) {
        /* Full: process the list inline, then, if it is still full, the new
         * item's work as well. */
        dp_defer_count(defer, DP_DEFER_INLINE, 1);
        dp_defer_run(defer);
        if (defer->n_items >= defer->max_items) {
            dp_defer_run_inline(cb, aux, qid);
            return;
        }
    }

    item = &defer->items[defer->n_items++];
    item->cb = cb;
    item->aux = aux;
    item->qid = qid;
    dp_defer_count(defer, DP_DEFER_QUEUED, 1);
}

/* Adds 'n' to counter 'stat' of the calling thread's list (or of the
 * threads without one). */
void
dp_defer_account(enum dp_defer_stat stat, uint64_t n)
{
    struct dp_defer *defer = *current_defer_get();

    if (OVS_LIKELY(defer)) {
        dp_defer_count(defer, stat, n);
    } else {
        ovs_mutex_lock(&other_mutex);
        dp_defer_count(&other_threads, stat, n);
        ovs_mutex_unlock(&other_mutex);
    }
}

static size_t
dp_defer_run__(struct dp_defer *defer, bool drain)
{
    size_t n_done = 0;
    size_t n_left = 0;
    size_t n = defer->n_items;

    /* Callbacks may submit new items (appended after 'n'); they are run on
     * the next round. */
    for (size_t i = 0; i < n; i++) {
        struct dp_defer_item item = defer->items[i];

        if (item.cb(item.aux, item.qid, drain)) {
            defer->items[n_left++] = item;
        } else {
            n_done++;
        }
    }
    if (n_left != n) {
        memmove(&defer->items[n_left], &defer->items[n],
                (defer->n_items - n) * sizeof defer->items[0]);
    }
    defer->n_items -= n - n_left;

    dp_defer_count(defer, DP_DEFER_COMPLETED, n_done);
    dp_defer_count(defer, DP_DEFER_RECHECKS, n_left);
    return n_done;
}

/* Runs every item once; items still in flight stay queued.  Returns the
 * number of items completed. */
size_t
dp_defer_run(struct dp_defer *defer)
{
    return defer->n_items ? dp_defer_run__(defer, false) : 0;
}

/* Runs the list until it is empty, asking every callback to finish. */
void
dp_defer_drain(struct dp_defer *defer)
{
    while (defer->n_items) {
        dp_defer_run__(defer, true);
    }
}

void
dp_defer_get_stats(const struct dp_defer *defer,
                   uint64_t stats[DP_DEFER_N_STATS])
{
    for (int i = 0; i < DP_DEFER_N_STATS; i++) {
        uint64_t v;

        atomic_read_relaxed(&CONST_CAST(struct dp_defer *, defer)
                            ->counters[i], &v);
        stats[i] = v > defer->zero[i] ? v - defer->zero[i] : 0;
    }
}

/* Clears the statistics of 'defer' as seen by dp_defer_get_stats().  May be
 * called from any thread. */
void
dp_defer_clear_stats(struct dp_defer *defer)
{
    for (int i = 0; i < DP_DEFER_N_STATS; i++) {
        atomic_read_relaxed(&defer->counters[i], &defer->zero[i]);
    }
}

/* Formats the statistics of 'defer', or of the threads without a list if
 * 'defer' is NULL, as lines of "pmd-stats-show". */
void
dp_defer_format_stats(struct ds *reply, const struct dp_defer *defer)
{
    uint64_t s[DP_DEFER_N_STATS];
    uint64_t done;

    if (defer) {
        dp_defer_get_stats(defer, s);
    } else {
        ovs_mutex_lock(&other_mutex);
        dp_defer_get_stats(&other_threads, s);
        ovs_mutex_unlock(&other_mutex);
    }
    if (defer) {
        ds_put_format(reply,
                      "  deferred work items queued: %"PRIu64"\n"
                      "  deferred work items completed: %"PRIu64"\n"
                      "  deferred work re-checks in flight: %"PRIu64"\n"
                      "  deferred work inline runs (list full): %"PRIu64"\n",
                      s[DP_DEFER_QUEUED], s[DP_DEFER_COMPLETED],
                      s[DP_DEFER_RECHECKS], s[DP_DEFER_INLINE]);
    }
    done = s[DP_DEFER_DMA_COMPLETED];
    ds_put_format(reply,
                  "  DMA copies submitted: %"PRIu64"\n"
                  "  DMA copies completed: %"PRIu64"\n"
                  "  DMA copies in flight: %"PRIu64"\n"
                  "  DMA CPU fallbacks: %"PRIu64"\n",
                  s[DP_DEFER_DMA_SUBMITTED], done,
                  s[DP_DEFER_DMA_SUBMITTED] > done
                  ? s[DP_DEFER_DMA_SUBMITTED] - done : 0,
                  s[DP_DEFER_CPU_COPIES]);
}

/* Clears the accounting of the threads without a list. */
void
dp_defer_clear_other_stats(void)
{
    ovs_mutex_lock(&other_mutex);
    dp_defer_clear_stats(&other_threads);
    ovs_mutex_unlock(&other_mutex);
}
