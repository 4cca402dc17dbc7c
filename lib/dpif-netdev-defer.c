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

#include <limits.h>
#include <string.h>

#ifdef DPDK_NETDEV
#include <rte_cycles.h>
#endif

#include "openvswitch/vlog.h"
#include "ovs-fork-config.h"
#include "ovs-thread.h"
#include "smap.h"
#include "timeval.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(dpif_netdev_defer);

/* other_config:pmd-defer-recheck-max (in microseconds, as upstream's
 * pmd-sleep-max): default and upper bound. */
#define RECHECK_MAX_US_DEFAULT 20
#define RECHECK_MAX_US_LIMIT 1000

/* The bound on the interval between re-checks of an item. */
static atomic_uint recheck_max = RECHECK_MAX_US_DEFAULT;

/* other_config:pmd-defer-max-items: the items a list holds at most. */
static atomic_uint max_items_cfg = DP_DEFER_MAX_ITEMS;

/* The calling thread's current list, set by its PMD thread. */
DEFINE_STATIC_PER_THREAD_DATA(struct dp_defer *, current_defer, NULL);

/* Accounting of threads without a list (the main thread). */
static struct dp_defer other_threads;
static struct ovs_mutex other_mutex = OVS_MUTEX_INITIALIZER;

/* Registered counters (dp_defer_counter_register()). */
static struct ovs_mutex counters_mutex = OVS_MUTEX_INITIALIZER;
static const char *counter_labels[DP_DEFER_MAX_COUNTERS];
static atomic_int n_counters = 0;

/* A cheap monotonic clock: the TSC where DPDK provides it, else
 * microseconds. */
static uint64_t
dp_defer_ticks(void)
{
#ifdef DPDK_NETDEV
    return rte_get_tsc_cycles();
#else
    return time_usec();
#endif
}

static double
dp_defer_ticks_per_us(void)
{
#ifdef DPDK_NETDEV
    uint64_t hz = rte_get_tsc_hz();

    return hz ? hz / 1e6 : 1.0;
#else
    return 1.0;
#endif
}

static inline void
dp_defer_count(struct dp_defer *defer, int stat, uint64_t n)
{
    uint64_t v;

    /* Only the owning thread writes, so no read-modify-write atomics. */
    atomic_read_relaxed(&defer->counters[stat], &v);
    atomic_store_relaxed(&defer->counters[stat], v + n);
}

/* Applies other_config:pmd-defer-max-items. */
static void
dp_defer_set_max_items(const struct smap *other_config)
{
    static struct fork_uint_key key = {
        .name = "pmd-defer-max-items", .what = "a number",
        .min = 1, .max = DP_DEFER_MAX_ITEMS,
    };
    unsigned int cur, n;

    atomic_read_relaxed(&max_items_cfg, &cur);
    if (fork_uint_key_read(&key, other_config, DP_DEFER_MAX_ITEMS, cur, &n)
        && n != cur) {
        atomic_store_relaxed(&max_items_cfg, n);
        VLOG_INFO("Deferred work lists hold at most %u items.", n);
    }
}

/* Applies other_config:pmd-defer-max-items and pmd-defer-recheck-max (or
 * its deprecated name pmd-defer-recheck-max-us, if only that is set).  A
 * bad value is logged once and changes nothing (ovs-fork-config.h). */
void
dp_defer_set_config(const struct smap *other_config)
{
    static struct fork_uint_key key = {
        .name = "pmd-defer-recheck-max", .what = "a number of microseconds",
        .min = 0, .max = RECHECK_MAX_US_LIMIT,
    };
    static struct fork_uint_key deprecated = {
        .name = "pmd-defer-recheck-max-us",
        .what = "a number of microseconds",
        .min = 0, .max = RECHECK_MAX_US_LIMIT,
    };
    struct fork_uint_key *k = &key;
    unsigned int cur, us;

    dp_defer_set_max_items(other_config);
    if (!smap_get(other_config, key.name)
        && smap_get(other_config, deprecated.name)) {
        VLOG_WARN_ONCE("other_config:%s is deprecated; use %s instead.",
                       deprecated.name, key.name);
        k = &deprecated;
    }
    atomic_read_relaxed(&recheck_max, &cur);
    if (fork_uint_key_read(k, other_config, RECHECK_MAX_US_DEFAULT, cur,
                           &us)
        && us != cur) {
        atomic_store_relaxed(&recheck_max, us);
        VLOG_INFO("Deferred work re-checks at most %u us apart%s.", us,
                  us ? "" : " (on every PMD iteration)");
    }
}

void
dp_defer_init(struct dp_defer *defer, size_t max_items)
{
    memset(defer, 0, sizeof *defer);
    defer->max_items = MAX(1, MIN(max_items, DP_DEFER_MAX_ITEMS));
    for (int i = 0; i < DP_DEFER_N_COUNTERS; i++) {
        atomic_init(&defer->counters[i], 0);
    }
    atomic_init(&defer->latency_max, 0);
    atomic_init(&defer->latency_ewma, 0);
}

/* Makes 'defer' (or no list, if NULL) the list of the calling thread. */
void
dp_defer_set_current(struct dp_defer *defer)
{
    *current_defer_get() = defer;
}

/* Copies in flight on the calling thread's DMA engine. */
static uint64_t (*inflight_probe)(void);

void
dp_defer_set_inflight_probe(uint64_t (*probe)(void))
{
    inflight_probe = probe;
}

/* The owning thread is about to sleep: counts it if its engine still has
 * copies of it in flight. */
void
dp_defer_sleeping(struct dp_defer *defer)
{
    uint64_t n = inflight_probe ? inflight_probe() : 0;

    if (n) {
        dp_defer_count(defer, DP_DEFER_SLEEPS_INFLIGHT, 1);
        dp_defer_count(defer, DP_DEFER_SLEEP_COPIES, n);
    }
}

bool
dp_defer_has_list(void)
{
    return *current_defer_get() != NULL;
}

static void
item_add_batch(struct dp_defer_item *item, uint64_t now, uint32_t n)
{
    if (item->n_batches < DP_DEFER_MAX_BATCHES) {
        struct dp_defer_batch *b = &item->batches[item->n_batches++];

        b->ticks = now;
        b->n = n;
    } else {
        /* Full: the newest batch absorbs the units (their latency is then
         * measured a little long). */
        item->batches[DP_DEFER_MAX_BATCHES - 1].n += n;
    }
}

/* When an item whose oldest unretired submission was at 'oldest' is next
 * worth checking.  The check is aimed a little before the expected
 * completion, so that checking late cannot inflate the latency learned. */
static uint64_t
next_check(const struct dp_defer *defer, uint64_t oldest, uint64_t now,
           uint64_t max_ticks)
{
    uint64_t due;

    if (!max_ticks) {
        return now;
    }
    due = oldest + defer->latency / 4 * 3;
    if (due <= now) {
        /* Overdue: back off by a fraction of the latency. */
        due = now + defer->latency / 4;
    }
    return MIN(due, now + max_ticks);
}

/* The configured bound on re-check intervals, in ticks. */
static uint64_t
recheck_max_ticks(void)
{
    unsigned int us;

    atomic_read_relaxed(&recheck_max, &us);
    return us * dp_defer_ticks_per_us();
}

/* Records that the calling thread has work in flight for ('aux', 'qid')
 * that 'cb' retires: 'n' more units (0: no units to time, but work that
 * 'cb' must be run for).  The item goes to the thread's current list, once
 * per ('cb', 'aux', 'qid').  Returns false, doing nothing, if the thread
 * has no current list or it is full: the work is never run here. */
bool
dp_defer_submit(dp_defer_work_cb *cb, void *aux, int qid, uint32_t n)
{
    struct dp_defer *defer = *current_defer_get();
    struct dp_defer_item *item;
    unsigned int cfg;
    uint64_t now;

    if (!defer) {
        return false;
    }

    now = dp_defer_ticks();
    for (size_t i = 0; i < defer->n_items; i++) {
        item = &defer->items[i];
        if (item->aux == aux && item->qid == qid && item->cb == cb) {
            if (n) {
                item_add_batch(item, now, n);
            }
            return true;
        }
    }

    atomic_read_relaxed(&max_items_cfg, &cfg);
    if (defer->n_items >= MIN(defer->max_items, cfg)) {
        /* Full: run the items that are due, to retire what is done and make
         * room (their callbacks only try-lock outside a drain).  The new
         * item's work is never run here: the caller may hold a lock that
         * the work takes. */
        dp_defer_run(defer);
        if (defer->n_items >= MIN(defer->max_items, cfg)) {
            dp_defer_count(defer, DP_DEFER_REFUSED, 1);
            return false;
        }
    }

    item = &defer->items[defer->n_items++];
    item->cb = cb;
    item->aux = aux;
    item->qid = qid;
    item->n_batches = 0;
    if (n) {
        item_add_batch(item, now, n);
    }
    item->next_check = next_check(defer, now, now, recheck_max_ticks());
    dp_defer_count(defer, DP_DEFER_QUEUED, 1);
    return true;
}

/* Adds 'n' to counter 'stat' of the calling thread's list (or of the
 * threads without one). */
/* Registers a counter that every thread keeps with its list, printed as
 * "  LABEL: N" after the list's own lines.  'label' must stay valid.
 * Returns the counter for dp_defer_counter_add(), or -1 if there are too
 * many (logged; such a counter counts nothing). */
int
dp_defer_counter_register(const char *label)
{
    int n;

    ovs_mutex_lock(&counters_mutex);
    atomic_read_relaxed(&n_counters, &n);
    if (n < DP_DEFER_MAX_COUNTERS) {
        counter_labels[n] = label;
        atomic_store_explicit(&n_counters, n + 1, memory_order_release);
    } else {
        VLOG_ERR("cannot register PMD counter \"%s\": %d counters already",
                 label, DP_DEFER_MAX_COUNTERS);
        n = -1;
    }
    ovs_mutex_unlock(&counters_mutex);
    return n;
}

/* Adds 'n' to registered 'counter' of the calling thread's list (or of the
 * threads without a list). */
void
dp_defer_counter_add(int counter, uint64_t n)
{
    struct dp_defer *defer = *current_defer_get();
    int stat;

    if (OVS_UNLIKELY(counter < 0 || counter >= DP_DEFER_MAX_COUNTERS)) {
        return;
    }
    stat = DP_DEFER_N_STATS + counter;
    if (OVS_LIKELY(defer)) {
        dp_defer_count(defer, stat, n);
    } else {
        ovs_mutex_lock(&other_mutex);
        dp_defer_count(&other_threads, stat, n);
        ovs_mutex_unlock(&other_mutex);
    }
}

/* Says that the calling thread has work in flight that it will finish in
 * a later iteration without a list item (for example completions it polls
 * with its Rx queues), so that it must not sleep before its next
 * iteration. */
void
dp_defer_keep_awake(void)
{
    struct dp_defer *defer = *current_defer_get();

    if (defer) {
        defer->keep_awake = true;
    }
}

/* Learns the latency of the 'n' oldest units of 'item', retired at 'now'. */
static void
item_retire(struct dp_defer *defer, struct dp_defer_item *item,
            uint32_t n, uint64_t now)
{
    uint64_t max, sum = 0, cnt = 0;
    size_t i = 0;

    for (; n && i < item->n_batches; i++) {
        struct dp_defer_batch *b = &item->batches[i];

        if (n < b->n) {
            b->n -= n;
            break;
        }
        n -= b->n;
        if (now > b->ticks) {
            uint64_t lat = now - b->ticks;

            sum += lat;
            cnt++;
            defer->latency = defer->latency
                             ? defer->latency - defer->latency / 8 + lat / 8
                             : lat;
            atomic_read_relaxed(&defer->latency_max, &max);
            if (lat > max) {
                atomic_store_relaxed(&defer->latency_max, lat);
            }
        }
    }
    if (i) {
        item->n_batches -= i;
        memmove(item->batches, &item->batches[i],
                item->n_batches * sizeof item->batches[0]);
        atomic_store_relaxed(&defer->latency_ewma, defer->latency);
        dp_defer_count(defer, DP_DEFER_LAT_SUM, sum);
        dp_defer_count(defer, DP_DEFER_LAT_N, cnt);
    }
}

static size_t
dp_defer_run__(struct dp_defer *defer, bool drain)
{
    uint64_t max_ticks = recheck_max_ticks();
    uint64_t now = dp_defer_ticks();
    size_t n_done = 0;
    size_t n_left = 0;
    size_t n_idle = 0;
    size_t n = defer->n_items;

    /* Callbacks may submit new items (appended after 'n'); they are run on
     * the next round. */
    for (size_t i = 0; i < n; i++) {
        struct dp_defer_item *item = &defer->items[i];
        uint32_t retired = 0;
        bool pending = true;

        if (drain || item->next_check <= now) {
            pending = item->cb(item->aux, item->qid, drain, &retired);
            if (retired) {
                item_retire(defer, item, retired, now);
            }
            if (drain && !item->n_batches) {
                /* What this thread submitted is retired; the rest of the
                 * work in flight belongs to other threads. */
                pending = false;
            }
            if (pending) {
                if (!retired) {
                    n_idle++;
                }
                item->next_check = next_check(
                    defer, item->n_batches ? item->batches[0].ticks : now,
                    now, max_ticks);
            }
        }
        if (pending) {
            if (n_left != i) {
                defer->items[n_left] = *item;
            }
            n_left++;
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
    dp_defer_count(defer, DP_DEFER_RECHECKS, n_idle);
    return n_done;
}

/* Runs every item that is due; items still in flight stay queued.  Returns
 * the number of items completed. */
size_t
dp_defer_run(struct dp_defer *defer)
{
    return defer->n_items ? dp_defer_run__(defer, false) : 0;
}

/* Runs the list until what this thread submitted is retired, for at most
 * DP_DEFER_DRAIN_MAX_MS; then forgets what is left (counted), which its
 * callbacks were told about. */
void
dp_defer_drain(struct dp_defer *defer)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    long long int deadline = time_msec() + DP_DEFER_DRAIN_MAX_MS;

    while (defer->n_items) {
        dp_defer_run__(defer, true);
        if (defer->n_items && time_msec() > deadline) {
            VLOG_WARN_RL(&rl, "%"PRIuSIZE" deferred work items still in "
                         "flight %d ms into a PMD reload; leaving them to "
                         "their queues' other pollers", defer->n_items,
                         DP_DEFER_DRAIN_MAX_MS);
            dp_defer_count(defer, DP_DEFER_LEFT, defer->n_items);
            defer->n_items = 0;
        }
    }
}

static void
dp_defer_get_stats(const struct dp_defer *defer,
                   uint64_t stats[DP_DEFER_N_COUNTERS])
{
    for (int i = 0; i < DP_DEFER_N_COUNTERS; i++) {
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
    for (int i = 0; i < DP_DEFER_N_COUNTERS; i++) {
        atomic_read_relaxed(&defer->counters[i], &defer->zero[i]);
    }
    atomic_store_relaxed(&defer->latency_max, 0);
}

/* Formats the statistics of 'defer', or of the threads without a list if
 * 'defer' is NULL, as lines of "pmd-stats-show" and "pmd-perf-show". */
void
dp_defer_format_stats(struct ds *reply, const struct dp_defer *defer)
{
    uint64_t s[DP_DEFER_N_COUNTERS];
    int n;

    if (defer) {
        dp_defer_get_stats(defer, s);
    } else {
        ovs_mutex_lock(&other_mutex);
        dp_defer_get_stats(&other_threads, s);
        ovs_mutex_unlock(&other_mutex);
    }
    if (defer) {
        double per_us = dp_defer_ticks_per_us();
        uint64_t max, ewma;

        atomic_read_relaxed(&CONST_CAST(struct dp_defer *, defer)
                            ->latency_max, &max);
        atomic_read_relaxed(&CONST_CAST(struct dp_defer *, defer)
                            ->latency_ewma, &ewma);
        ds_put_format(reply,
                      "  deferred work items queued: %"PRIu64"\n"
                      "  deferred work items completed: %"PRIu64"\n"
                      "  deferred work re-checks in flight: %"PRIu64"\n"
                      "  deferred work items refused (list full): %"PRIu64"\n"
                      "  deferred work left by a drain: %"PRIu64"\n",
                      s[DP_DEFER_QUEUED], s[DP_DEFER_COMPLETED],
                      s[DP_DEFER_RECHECKS], s[DP_DEFER_REFUSED],
                      s[DP_DEFER_LEFT]);
        ds_put_format(reply,
                      "  deferred completion latency: avg %.1f us, "
                      "max %.1f us, recent %.1f us (%"PRIu64" submissions)\n",
                      s[DP_DEFER_LAT_N]
                      ? s[DP_DEFER_LAT_SUM] / per_us / s[DP_DEFER_LAT_N]
                      : 0.0,
                      max / per_us, ewma / per_us, s[DP_DEFER_LAT_N]);
        ds_put_format(reply,
                      "  sleeps begun with DMA copies in flight: %"PRIu64
                      " (%"PRIu64" copies)\n",
                      s[DP_DEFER_SLEEPS_INFLIGHT], s[DP_DEFER_SLEEP_COPIES]);
    }
    atomic_read_explicit(&n_counters, &n, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        ds_put_format(reply, "  %s: %"PRIu64"\n", counter_labels[i],
                      s[DP_DEFER_N_STATS + i]);
    }
}

/* Clears the accounting of the threads without a list. */
void
dp_defer_clear_other_stats(void)
{
    ovs_mutex_lock(&other_mutex);
    dp_defer_clear_stats(&other_threads);
    ovs_mutex_unlock(&other_mutex);
}
