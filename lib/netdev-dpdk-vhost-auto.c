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

#include "netdev-dpdk-vhost-auto.h"

#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>

#include "openvswitch/vlog.h"
#include "ovs-fork-config.h"
#include "smap.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_vhost_auto);

/* A cost that means "this path is losing packets or falling behind". */
#define COST_BAD (UINT32_MAX / 2)

/* Bursts of a probe of the other path. */
#define PROBE_BURSTS 16

/* Bursts between probes: at first, and the most after probes that keep
 * losing. */
#define PROBE_INTERVAL_MIN 4096
#define PROBE_INTERVAL_MAX (256 * 1024)

/* Consecutive bursts in which the other path must be cheaper by more than
 * 1/8 before the queue switches. */
#define SWITCH_VOTES 8

/* Retired DMA copies folded into the retire cost at a time. */
#define RETIRE_FOLD_PKTS 64

/* other_config:vhost-copy-auto-threshold, 0 if unset (learn). */
static atomic_uint32_t threshold = 0;

#define THRESHOLD_MIN 64
#define THRESHOLD_MAX 65535

static const char *const path_names[VHOST_AUTO_N_PATHS] = {
    [VHOST_AUTO_CPU] = "cpu",
    [VHOST_AUTO_DMA] = "dma",
};

static const uint32_t class_max[VHOST_AUTO_N_CLASSES] = {
    128, 256, 512, 1024, 2048, UINT32_MAX
};

const char *
vhost_auto_path_name(enum vhost_auto_path path)
{
    return path < VHOST_AUTO_N_PATHS ? path_names[path] : "unknown";
}

/* Applies other_config:vhost-copy-auto-threshold.  A bad value is logged
 * once and changes nothing (ovs-fork-config.h). */
void
vhost_auto_set_config(const struct smap *ovs_other_config)
{
    static struct fork_uint_key key = {
        .name = "vhost-copy-auto-threshold", .what = "a frame size",
        .min = THRESHOLD_MIN, .max = THRESHOLD_MAX, .zero_ok = true,
        .suffix = " bytes (or 0 to learn)",
    };
    uint32_t cur;
    unsigned int thr;

    atomic_read_relaxed(&threshold, &cur);
    if (fork_uint_key_read(&key, ovs_other_config, 0, cur, &thr)
        && thr != cur) {
        atomic_store_relaxed(&threshold, thr);
        if (thr) {
            VLOG_INFO("vhost copy mode auto: DMA for frames of %u bytes and "
                      "more (pinned threshold)", thr);
        } else {
            VLOG_INFO("vhost copy mode auto: learning the copy path from "
                      "measured costs");
        }
    }
}

uint32_t
vhost_auto_threshold(void)
{
    uint32_t thr;

    atomic_read_relaxed(&threshold, &thr);
    return thr;
}

void
vhost_auto_reset(struct vhost_auto *a, uint32_t backlog_max)
{
    a->backlog_max = MAX(backlog_max, 4);
    a->size_ewma = 0;
    a->bursts = 0;
    a->probe_interval = PROBE_INTERVAL_MIN;
    a->probe_left = 0;
    a->votes = 0;
    a->skip_sample = false;
    a->probe_pending = false;
    a->leaving = false;
    atomic_init(&a->path, VHOST_AUTO_CPU);
    for (int p = 0; p < VHOST_AUTO_N_PATHS; p++) {
        for (int c = 0; c < VHOST_AUTO_N_CLASSES; c++) {
            atomic_init(&a->cost[p][c], 0);
        }
        atomic_init(&a->switches[p], 0);
    }
    a->retire_cost = 0;
    a->now = 0;
    a->rate_start = 0;
    a->rate_pkts = 0;
    a->rate = 0;
    for (int c = 0; c < VHOST_AUTO_N_CLASSES; c++) {
        a->dma_cap[c] = 0;
        a->dma_cap_tsc[c] = 0;
    }
    atomic_init(&a->saturated, 0);
    atomic_init(&a->capped, 0);
    atomic_init(&a->cap_shown, 0);
    atomic_init(&a->rate_shown, 0);
    atomic_init(&a->retire_cycles, 0);
    atomic_init(&a->retire_pkts, 0);
    a->retire_seen[0] = a->retire_seen[1] = 0;
}

static int
size_class(uint32_t size)
{
    int c = 0;

    while (size > class_max[c]) {
        c++;
    }
    return c;
}

static uint32_t
get_cost(const struct vhost_auto *a, enum vhost_auto_path path, int cls)
{
    uint32_t v;

    atomic_read_relaxed(&CONST_CAST(struct vhost_auto *, a)->cost[path][cls],
                        &v);
    return v;
}

static void
counter_inc(atomic_uint64_t *counter)
{
    uint64_t orig;

    atomic_add_relaxed(counter, 1, &orig);
}

/* TSC cycles per ms, computed once (every thread computes the same). */
static uint64_t
tsc_per_ms(void)
{
    static atomic_uint64_t cached = 0;
    uint64_t per_ms;

    atomic_read_relaxed(&cached, &per_ms);
    if (OVS_UNLIKELY(!per_ms)) {
        per_ms = MAX(rte_get_tsc_hz() / 1000, 1);
        atomic_store_relaxed(&cached, per_ms);
    }
    return per_ms;
}

/* Whether the DMA engine fell behind this queue, for frames of class
 * 'cls', at about its present rate not long ago: at the capacity it showed
 * then, or with 'margin' (for a queue that left DMA) at half of it.  The
 * rate at which an engine fell behind only bounds its capacity from above,
 * and a queue's measured rate moves by a quarter from one millisecond to
 * the next on a busy machine: a return at 7/8 of it fell behind again. */
static bool
dma_over_cap(struct vhost_auto *a, int cls, bool margin)
{
    uint64_t cap = a->dma_cap[cls];

    if (!cap) {
        return false;
    }
    if (a->now - a->dma_cap_tsc[cls] > VHOST_AUTO_CAP_TTL_MS * tsc_per_ms()) {
        /* Long ago: the engine may serve this rate now. */
        a->dma_cap[cls] = 0;
        atomic_store_relaxed(&a->cap_shown, 0);
        return false;
    }
    return (margin ? (uint64_t) a->rate * 2 >= cap
            : (uint64_t) a->rate >= cap);
}

static enum vhost_auto_path
choose__(struct vhost_auto *a, enum vhost_auto_path cur, int cls)
{
    enum vhost_auto_path other = !cur;
    uint32_t c_cur, c_oth;

    c_cur = get_cost(a, cur, cls);
    c_oth = get_cost(a, other, cls);

    if (c_cur >= COST_BAD && c_oth < COST_BAD) {
        /* Losing packets or falling behind: leave now (the caller may
         * need a few bursts to do so), and probe again later. */
        if (!a->leaving) {
            /* An engine that cannot keep up costs packets and a drain on
             * every probe: back off faster than from a path that is only
             * more expensive. */
            a->leaving = true;
            a->probe_interval = MIN(a->probe_interval * 4,
                                    PROBE_INTERVAL_MAX);
        }
        a->probe_left = 0;
        a->votes = 0;
        return other;
    }
    if (!c_cur) {
        /* Measure the path in use first. */
        return cur;
    }
    if (a->probe_left) {
        if (--a->probe_left) {
            return cur;
        }
        /* The probe is over: keep the probed path only if it won. */
        a->votes = 0;
        if (c_oth && c_cur > c_oth) {
            a->probe_interval = MIN(a->probe_interval * 2,
                                    PROBE_INTERVAL_MAX);
            return other;
        }
        /* The probe interval stays: a path that wins a probe and then
         * falls behind still backs off. */
        return cur;
    }
    if (!c_oth || ++a->bursts >= a->probe_interval) {
        a->bursts = 0;
        a->probe_pending = true;
        return other;
    }
    if ((uint64_t) c_oth * 8 < (uint64_t) c_cur * 7) {
        if (++a->votes >= SWITCH_VOTES) {
            a->votes = 0;
            return other;
        }
    } else {
        a->votes = 0;
    }
    return cur;
}

enum vhost_auto_path
vhost_auto_choose(struct vhost_auto *a, uint32_t avg_size)
{
    enum vhost_auto_path cur = vhost_auto_path(a);
    enum vhost_auto_path path;
    uint32_t thr = vhost_auto_threshold();
    int cls;

    a->size_ewma = (a->size_ewma
                    ? a->size_ewma - a->size_ewma / 8 + avg_size * 2
                    : avg_size * 16);
    a->probe_pending = false;

    if (thr) {
        /* Pinned: DMA at and above the threshold, CPU below 7/8 of it. */
        uint32_t size = a->size_ewma / 16;

        a->probe_left = 0;
        return (size >= thr ? VHOST_AUTO_DMA
                : size < thr - thr / 8 ? VHOST_AUTO_CPU
                : cur);
    }

    cls = size_class(a->size_ewma / 16);
    path = choose__(a, cur, cls);
    if (path == VHOST_AUTO_DMA
        && dma_over_cap(a, cls, cur != VHOST_AUTO_DMA)) {
        /* The engine fell behind this rate not long ago: going back to it
         * would cost the guest packets again.  A probe waits for its next
         * turn. */
        a->probe_pending = false;
        a->probe_left = 0;
        a->votes = 0;
        a->bursts = 0;
        counter_inc(&a->capped);
        return VHOST_AUTO_CPU;
    }
    return path;
}

void
vhost_auto_switched(struct vhost_auto *a, enum vhost_auto_path path)
{
    int cls = size_class(a->size_ewma / 16);

    if (get_cost(a, path, cls) >= COST_BAD) {
        /* Measure it afresh. */
        atomic_store_relaxed(&a->cost[path][cls], 0);
    }
    atomic_store_relaxed(&a->path, path);
    counter_inc(&a->switches[path]);
    a->leaving = false;
    a->probe_left = a->probe_pending ? PROBE_BURSTS : 0;
    a->probe_pending = false;
    a->skip_sample = true;
    a->bursts = 0;
}

void
vhost_auto_retired(struct vhost_auto *a, uint64_t cycles, uint32_t n)
{
    uint64_t orig;

    atomic_add_relaxed(&a->retire_cycles, cycles, &orig);
    atomic_add_relaxed(&a->retire_pkts, n, &orig);
}

/* Folds what retiring DMA copies cost since the last call into
 * 'retire_cost'; returns it. */
static uint32_t
fold_retire_cost(struct vhost_auto *a)
{
    uint64_t cycles, pkts;
    uint32_t cost = a->retire_cost;

    atomic_read_relaxed(&a->retire_pkts, &pkts);
    if (pkts - a->retire_seen[1] >= RETIRE_FOLD_PKTS) {
        uint32_t sample;

        atomic_read_relaxed(&a->retire_cycles, &cycles);
        sample = (cycles - a->retire_seen[0]) / (pkts - a->retire_seen[1]);
        a->retire_seen[0] = cycles;
        a->retire_seen[1] = pkts;
        cost = cost ? cost - cost / 4 + sample / 4 : sample;
        a->retire_cost = cost;
    }
    return cost;
}

/* Counts 'cnt' packets at TSC 'now' into the queue's rate, in packets per
 * ms over windows of at least 1 ms. */
static void
update_rate(struct vhost_auto *a, uint64_t now, int cnt)
{
    uint64_t per_ms = tsc_per_ms();

    a->now = now;
    if (!a->rate_start || now < a->rate_start) {
        a->rate_start = now;
        a->rate_pkts = 0;
    }
    a->rate_pkts += MAX(cnt, 0);
    if (now - a->rate_start >= per_ms) {
        uint64_t sample = (uint64_t) a->rate_pkts * per_ms
                          / (now - a->rate_start);

        sample = MIN(sample, UINT32_MAX / 4);
        a->rate = a->rate ? (3 * (uint64_t) a->rate + sample) / 4 : sample;
        a->rate_start = now;
        a->rate_pkts = 0;
        atomic_store_relaxed(&a->rate_shown, a->rate);
    }
}

void
vhost_auto_record(struct vhost_auto *a, enum vhost_auto_path path,
                  uint64_t now, uint64_t cycles, int cnt, int delivered,
                  int backlog)
{
    int cls = size_class(a->size_ewma / 16);
    uint32_t old = get_cost(a, path, cls);
    uint64_t sample;

    update_rate(a, now, cnt);
    if (path == VHOST_AUTO_DMA
        && (backlog >= a->backlog_max
            || (delivered < cnt && backlog >= a->backlog_max / 4))) {
        /* The engine falls behind this queue, or drops because its copies
         * in flight hold the guest's vring: DMA loses, and this rate is
         * what it can take for now.  (Drops with few copies in flight are
         * a guest that does not take its packets, as on the CPU path: the
         * engine is not charged for them.) */
        counter_inc(&a->saturated);
        atomic_store_relaxed(&a->cost[path][cls], COST_BAD);
        a->dma_cap[cls] = MAX(a->rate, 1);
        a->dma_cap_tsc[cls] = now;
        atomic_store_relaxed(&a->cap_shown, a->dma_cap[cls]);
        return;
    }
    if (a->skip_sample || !cnt) {
        /* The first burst after a switch also paid for the switch. */
        a->skip_sample = false;
        return;
    }

    sample = cycles / MAX(delivered, 1);
    if (path == VHOST_AUTO_DMA) {
        sample += fold_retire_cost(a);
    }
    if (old && old < COST_BAD) {
        /* A preempted or interrupted burst must not swing the average. */
        sample = MIN(sample, (uint64_t) old * 4);
        sample = old - old / 8 + sample / 8;
    }
    atomic_store_relaxed(&a->cost[path][cls],
                         MAX(1, MIN(sample, COST_BAD - 1)));
}

uint64_t
vhost_auto_switches(const struct vhost_auto *a, enum vhost_auto_path to)
{
    uint64_t v;

    atomic_read_relaxed(&CONST_CAST(struct vhost_auto *, a)->switches[to],
                        &v);
    return v;
}

/* Bursts that the engine's capacity kept off DMA. */
uint64_t
vhost_auto_capped(const struct vhost_auto *a)
{
    uint64_t v;

    atomic_read_relaxed(&CONST_CAST(struct vhost_auto *, a)->capped, &v);
    return v;
}

static void
format_cost(struct ds *s, uint32_t cost)
{
    if (!cost) {
        ds_put_cstr(s, "?");
    } else if (cost >= COST_BAD) {
        ds_put_cstr(s, "losing");
    } else {
        ds_put_format(s, "%"PRIu32, cost);
    }
}

/* Formats the state of one queue, without a trailing new-line. */
void
vhost_auto_format(struct ds *s, const struct vhost_auto *a)
{
    struct vhost_auto *aa = CONST_CAST(struct vhost_auto *, a);
    uint32_t thr = vhost_auto_threshold();
    uint64_t saturated, capped;
    uint32_t cap, rate;
    bool any = false;

    atomic_read_relaxed(&aa->saturated, &saturated);
    atomic_read_relaxed(&aa->capped, &capped);
    atomic_read_relaxed(&aa->cap_shown, &cap);
    atomic_read_relaxed(&aa->rate_shown, &rate);
    ds_put_format(s, "%s (switches: %"PRIu64" to dma, %"PRIu64" to cpu",
                  vhost_auto_path_name(vhost_auto_path(a)),
                  vhost_auto_switches(a, VHOST_AUTO_DMA),
                  vhost_auto_switches(a, VHOST_AUTO_CPU));
    if (thr) {
        ds_put_format(s, "; pinned threshold %"PRIu32" B)", thr);
        return;
    }
    ds_put_format(s, "; dma backlog/drop events: %"PRIu64, saturated);
    if (cap) {
        ds_put_format(s, "; dma fell behind at %"PRIu32" pkts/ms, rate now "
                      "%"PRIu32" pkts/ms", cap, rate);
    }
    ds_put_format(s, "; bursts kept off dma: %"PRIu64"%s)", capped,
                  a->probe_left ? "; probing" : "");
    ds_put_cstr(s, "; cycles/pkt cpu/dma:");
    for (int c = 0; c < VHOST_AUTO_N_CLASSES; c++) {
        uint32_t cpu = get_cost(a, VHOST_AUTO_CPU, c);
        uint32_t dma = get_cost(a, VHOST_AUTO_DMA, c);

        if (!cpu && !dma) {
            continue;
        }
        any = true;
        if (class_max[c] == UINT32_MAX) {
            ds_put_format(s, " >%"PRIu32"B ", class_max[c - 1]);
        } else {
            ds_put_format(s, " <=%"PRIu32"B ", class_max[c]);
        }
        format_cost(s, cpu);
        ds_put_char(s, '/');
        format_cost(s, dma);
    }
    if (!any) {
        ds_put_cstr(s, " not measured yet");
    }
}
