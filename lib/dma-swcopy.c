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

/* For CPU sets, pthread_*_np() and sched_getaffinity() when built outside
 * Open vSwitch (OVS's config.h already defines it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "dma-swcopy.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_dmadev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_kvargs.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "dma-swcopy-abi.h"

/* Design.
 *
 * Each instance has one vchan whose descriptors live in a power-of-2 ring.
 * Three parties touch the instance, and each field belongs to one writer:
 *
 *   - The submitter (the thread calling rte_dma_copy() and friends; the
 *     dmadev API forbids concurrent fast-path calls on one device) owns
 *     'struct swcopy_sub': its ring indices and statistics.  It writes
 *     descriptors, and publishes a batch with ONE release store of 'tail'.
 *
 *   - The worker thread reads 'tail' with an acquire load, executes the
 *     descriptors in order, writes a descriptor's 'status' only when the
 *     copy fails, and publishes its progress with ONE release store of
 *     'progress' (completion index and cumulative error count in one
 *     64-bit word) per batch of at most SWCOPY_BATCH_MAX descriptors.
 *
 *   - The control thread (configure, start, stop, close) owns
 *     'struct swcopy_ctl' and talks to the worker through a command word.
 *
 * rte_dma_completed() loads 'progress' once (acquire).  If the error count
 * did not move since it last looked, every descriptor up to the completion
 * index succeeded and it only does arithmetic; otherwise it scans the
 * statuses of the range it returns to find the first failure.
 *
 * Indices are free-running uint16_t counters.  65536 is a multiple of every
 * ring size, so 'idx & mask' is the slot and the counter itself is the
 * ring_idx that the dmadev API returns. */

/* Worker tuning. */
#define SWCOPY_BATCH_MAX 64         /* Publish progress at least this often. */
#define SWCOPY_SPIN_POLLS 1024      /* Empty polls before pausing. */
#define SWCOPY_PAUSE_US 100         /* Idle time polled with rte_pause(). */
#define SWCOPY_NAP_UNTIL_US 10000   /* Idle time spent in growing naps. */
#define SWCOPY_NAP_MIN_NS 1000      /* First nap. */
#define SWCOPY_NAP_MAX_NS 50000     /* Longest nap. */
#define SWCOPY_PARK_MIN_NS 1000000  /* First park without a kick. */
#define SWCOPY_PARK_MAX_NS 32000000 /* Longest park without a kick. */
#define SWCOPY_TIMER_SLACK_NS 1000  /* So that naps are about as asked. */

/* 'hold_until' of a hold without a time limit. */
#define SWCOPY_HOLD_FOREVER UINT64_MAX

/* Command word: command in the low 2 bits, sequence number above them, so
 * that the worker sees every change even if it misses an intermediate one
 * (stop then start before the worker looked). */
#define SWCOPY_CMD_RUN 0
#define SWCOPY_CMD_STOP 1
#define SWCOPY_CMD_EXIT 2
#define SWCOPY_CMD(CTL) ((CTL) & 3)

/* A descriptor: 32 bytes, two per cache line, never across lines. */
struct swcopy_desc {
    uint64_t src;
    uint64_t dst;
    union {
        struct {
            uint32_t len;
            uint32_t status;    /* 0, or a failed op's status code. */
        };
        uint64_t len_status;    /* Both, to write them with one store. */
    };
    uint64_t pad;
};

/* Value of 'len_status' for length 'LEN' and status 0. */
#if RTE_BYTE_ORDER == RTE_LITTLE_ENDIAN
#define SWCOPY_LEN_STATUS(LEN) ((uint64_t) (LEN))
#else
#define SWCOPY_LEN_STATUS(LEN) ((uint64_t) (LEN) << 32)
#endif

_Static_assert(sizeof(struct swcopy_desc) == 32, "descriptor size");
#define SWCOPY_DESC_PER_LINE (RTE_CACHE_LINE_SIZE / sizeof(struct swcopy_desc))
_Static_assert(RTE_CACHE_LINE_SIZE % sizeof(struct swcopy_desc) == 0,
               "descriptors must not straddle cache lines");
_Static_assert(RTE_DMA_STATUS_SUCCESSFUL == 0, "status 0 means success");
_Static_assert(UINT16_MAX + 1 >= DMA_SWCOPY_MAX_DESC * 2,
               "ring indices must not alias");

/* Submitter-private state: the fast path touches only this cache line,
 * the descriptors, 'tail' and 'progress'. */
struct swcopy_sub {
    struct swcopy_desc *ring;
    uint16_t mask;
    uint16_t nb_desc;
    uint16_t write_idx;     /* ring_idx of the next copy. */
    uint16_t submit_idx;    /* Last value stored into 'tail'. */
    uint16_t read_idx;      /* ring_idx of the next completion to report. */
    bool started;           /* Written by start/stop. */
    uint32_t nerr_seen;     /* Failed ops already reported. */
    uint64_t submitted;     /* Statistics, read by other threads. */
    uint64_t completed;
    uint64_t errors;
};

/* Written by the submitter, read by the worker. */
struct swcopy_doorbell {
    uint16_t tail;          /* Descriptors published (free-running). */
    uint32_t sleeping;      /* Futex word: 1 while the worker is parked. */
};

/* Written by the worker, read by the submitter. */
struct swcopy_progress {
    uint64_t word;          /* Completion index | error count << 32. */
};

/* Written by the worker, read by dump. */
struct swcopy_wstats {
    uint64_t copies;
    uint64_t bytes;
    uint64_t failed;
    uint64_t batches;
    uint64_t naps;
    uint64_t parks;
    uint64_t stop_executed; /* Copies executed by a stop, at full speed. */
    uint64_t stop_dropped;  /* Copies a stop of a held engine dropped. */
};

/* Fault injection (dma_swcopy_hold() and friends): written by any control
 * thread, read by the worker once per batch. */
struct swcopy_fault {
    uint64_t hold_until;    /* TSC at which a hold ends: 0 if not held,
                             * SWCOPY_HOLD_FOREVER until released.  One
                             * word, so that a hold's expiry and a new
                             * hold cannot race. */
    uint32_t fail_left;     /* Next copies to fail; the worker decrements. */
    uint32_t delay_us;      /* Least time per copy. */
    uint64_t injected;      /* Copies failed on purpose (worker). */
    uint64_t holds;         /* Holds so far (control). */
};

/* Control state: written by the control thread (and 'ack' by the
 * worker), read by the worker only when 'cmd' changes. */
struct swcopy_ctl {
    uint32_t cmd;           /* Futex word: SWCOPY_CMD_* | seq << 2. */
    uint32_t ack;           /* Last 'cmd' the worker completed. */
    uint32_t seq;
    struct swcopy_desc *ring;
    uint16_t mask;
    uint16_t nb_desc;
    bool thread_running;
    pthread_t thread;
    int cpu;                /* Worker CPU. */
    bool cpu_given;         /* From the lcore= devarg. */
    int16_t dev_id;
    char name[RTE_DEV_NAME_MAX_LEN];
    struct rte_dma_stats base;  /* Subtracted from the counters (reset). */
};

/* An instance's state.  Each part that another thread writes sits on its
 * own pair of cache lines: x86 CPUs prefetch the adjacent line of a
 * 128-byte pair, which would otherwise make the submitter's private line
 * bounce whenever the worker polls the doorbell next to it.  (The dmadev's
 * private data, only cache-line aligned, holds a pointer to it.) */
#define SWCOPY_SEPARATE __rte_aligned(2 * RTE_CACHE_LINE_SIZE)
struct swcopy_dev {
    struct swcopy_sub sub SWCOPY_SEPARATE;
    struct swcopy_doorbell bell SWCOPY_SEPARATE;
    struct swcopy_progress prog SWCOPY_SEPARATE;
    struct swcopy_wstats ws SWCOPY_SEPARATE;
    struct swcopy_fault fault SWCOPY_SEPARATE;
    struct swcopy_ctl ctl SWCOPY_SEPARATE;
};

_Static_assert(sizeof(struct swcopy_sub) <= RTE_CACHE_LINE_SIZE,
               "submitter state must fit one cache line");

static int swcopy_logtype = -1;
static cpu_set_t swcopy_initial_cpus;   /* Process affinity at startup. */
static bool swcopy_initial_cpus_valid;
static unsigned int swcopy_auto_instances;

static void swcopy_log(uint32_t level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void
swcopy_log(uint32_t level, const char *format, ...)
{
    char msg[512];
    va_list args;

    va_start(args, format);
    vsnprintf(msg, sizeof msg, format, args);
    va_end(args);
    rte_log(level, swcopy_logtype >= 0 ? swcopy_logtype : RTE_LOGTYPE_USER1,
            "dma_swcopy: %s\n", msg);
}

#define SWCOPY_ERR(...) swcopy_log(RTE_LOG_ERR, __VA_ARGS__)
#define SWCOPY_WARN(...) swcopy_log(RTE_LOG_WARNING, __VA_ARGS__)
#define SWCOPY_INFO(...) swcopy_log(RTE_LOG_INFO, __VA_ARGS__)

/* Futexes (process-private). */

static void
swcopy_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {
        .tv_sec = timeout_ns / 1000000000,
        .tv_nsec = timeout_ns % 1000000000,
    };

    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val,
            timeout_ns ? &ts : NULL, NULL, 0);
}

static void
swcopy_futex_wake(uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void
swcopy_sleep_ns(long ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000,
                           .tv_nsec = ns % 1000000000 };

    nanosleep(&ts, NULL);
}

/* Fast path (submitter thread). */

/* Wakes a parked worker.  Rare: only after an idle period of more than
 * SWCOPY_NAP_UNTIL_US. */
static void __rte_noinline
swcopy_kick(struct swcopy_dev *sw)
{
    if (__atomic_exchange_n(&sw->bell.sleeping, 0, __ATOMIC_RELAXED)) {
        swcopy_futex_wake(&sw->bell.sleeping);
    }
}

static inline void
swcopy_publish(struct swcopy_dev *sw)
{
    struct swcopy_sub *sub = &sw->sub;
    uint16_t n = sub->write_idx - sub->submit_idx;

    if (n) {
        sub->submit_idx = sub->write_idx;
        __atomic_store_n(&sw->bell.tail, sub->write_idx, __ATOMIC_RELEASE);
        __atomic_store_n(&sub->submitted, sub->submitted + n,
                         __ATOMIC_RELAXED);
        /* A worker parks only after a long idle period.  If it parks right
         * while this store is in flight and this load misses it, it wakes
         * up by itself within SWCOPY_PARK_MAX_NS. */
        if (unlikely(__atomic_load_n(&sw->bell.sleeping, __ATOMIC_RELAXED))) {
            swcopy_kick(sw);
        }
    }
}

/* rte_dma_copy() with RTE_DMA_OP_FLAG_SUBMIT, once the descriptor is
 * written.  Out of line, so that swcopy_copy() needs no stack frame. */
static int __rte_noinline
swcopy_copy_submit(struct swcopy_dev *sw)
{
    swcopy_publish(sw);
    return (uint16_t) (sw->sub.write_idx - 1);
}

static int
swcopy_copy(void *dev_private, uint16_t vchan, rte_iova_t src,
            rte_iova_t dst, uint32_t length, uint64_t flags)
{
    struct swcopy_dev *sw = dev_private;
    struct swcopy_sub *sub = &sw->sub;
    uint16_t idx = sub->write_idx;
    struct swcopy_desc *d;

    if (unlikely(!__atomic_load_n(&sub->started, __ATOMIC_RELAXED)
                 || vchan != 0)) {
        return -EINVAL;
    }
    if (unlikely((uint16_t) (idx - sub->read_idx) >= sub->nb_desc)) {
        return -ENOSPC;
    }

    /* Few stores: each one takes a store buffer entry, and the worker's
     * reads of the descriptor lines make them slow to commit. */
    d = &sub->ring[idx & sub->mask];
    d->src = src;
    d->dst = dst;
    d->len_status = SWCOPY_LEN_STATUS(length);
    sub->write_idx = idx + 1;

    if (flags & RTE_DMA_OP_FLAG_SUBMIT) {
        return swcopy_copy_submit(sw);
    }
    return idx;
}

static int
swcopy_submit(void *dev_private, uint16_t vchan)
{
    struct swcopy_dev *sw = dev_private;

    if (unlikely(!__atomic_load_n(&sw->sub.started, __ATOMIC_RELAXED)
                 || vchan != 0)) {
        return -EINVAL;
    }
    swcopy_publish(sw);
    return 0;
}

/* Returns how many ops are complete and not yet reported, at most 'max',
 * and whether some of them may have failed. */
static inline uint16_t
swcopy_ready(struct swcopy_dev *sw, uint16_t max, uint32_t *nerr)
{
    uint64_t word = __atomic_load_n(&sw->prog.word, __ATOMIC_ACQUIRE);
    uint16_t avail = (uint16_t) word - sw->sub.read_idx;

    *nerr = word >> 32;
    return RTE_MIN(avail, max);
}

static inline void
swcopy_consume(struct swcopy_sub *sub, uint16_t n, uint16_t *last_idx)
{
    sub->read_idx += n;
    *last_idx = sub->read_idx - 1;
    if (n) {
        __atomic_store_n(&sub->completed, sub->completed + n,
                         __ATOMIC_RELAXED);
    }
}

static uint16_t
swcopy_completed(void *dev_private, uint16_t vchan, const uint16_t nb_cpls,
                 uint16_t *last_idx, bool *has_error)
{
    struct swcopy_dev *sw = dev_private;
    struct swcopy_sub *sub = &sw->sub;
    uint32_t nerr;
    uint16_t n;

    *has_error = false;
    if (unlikely(vchan != 0)) {
        *last_idx = sub->read_idx - 1;
        return 0;
    }

    n = swcopy_ready(sw, nb_cpls, &nerr);
    if (unlikely(nerr != sub->nerr_seen)) {
        /* Some op in [read_idx, completion index) failed: report the ops
         * before the first failure and leave that one for
         * rte_dma_completed_status(). */
        uint16_t i;

        for (i = 0; i < n; i++) {
            if (sub->ring[(uint16_t) (sub->read_idx + i) & sub->mask].status) {
                *has_error = true;
                n = i;
                break;
            }
        }
    }
    swcopy_consume(sub, n, last_idx);
    return n;
}

static uint16_t
swcopy_completed_status(void *dev_private, uint16_t vchan,
                        const uint16_t nb_cpls, uint16_t *last_idx,
                        enum rte_dma_status_code *status)
{
    struct swcopy_dev *sw = dev_private;
    struct swcopy_sub *sub = &sw->sub;
    uint32_t nerr;
    uint16_t i, n;

    if (unlikely(vchan != 0)) {
        *last_idx = sub->read_idx - 1;
        return 0;
    }

    n = swcopy_ready(sw, nb_cpls, &nerr);
    if (likely(nerr == sub->nerr_seen)) {
        for (i = 0; i < n; i++) {
            status[i] = RTE_DMA_STATUS_SUCCESSFUL;
        }
    } else {
        uint32_t errs = 0;

        for (i = 0; i < n; i++) {
            uint32_t st;

            st = sub->ring[(uint16_t) (sub->read_idx + i) & sub->mask].status;
            status[i] = st;
            errs += st != 0;
        }
        if (errs) {
            /* Read by vchan_status from other threads. */
            __atomic_store_n(&sub->nerr_seen, sub->nerr_seen + errs,
                             __ATOMIC_RELAXED);
            __atomic_store_n(&sub->errors, sub->errors + errs,
                             __ATOMIC_RELAXED);
        }
    }
    swcopy_consume(sub, n, last_idx);
    return n;
}

static uint16_t
swcopy_burst_capacity(const void *dev_private, uint16_t vchan)
{
    const struct swcopy_dev *sw = dev_private;
    const struct swcopy_sub *sub = &sw->sub;

    if (!__atomic_load_n(&sub->started, __ATOMIC_RELAXED) || vchan != 0) {
        return 0;
    }
    return sub->nb_desc - (uint16_t) (sub->write_idx - sub->read_idx);
}

/* Worker thread. */

/* Executes up to SWCOPY_BATCH_MAX descriptors from 'done' and publishes
 * the progress.  Returns the new completion index. */
/* Takes one of the copies that dma_swcopy_fail() asked to fail.  Returns
 * true if the caller's copy must fail. */
static bool
swcopy_take_failure(struct swcopy_dev *sw)
{
    uint32_t left = __atomic_load_n(&sw->fault.fail_left, __ATOMIC_RELAXED);

    while (left) {
        if (__atomic_compare_exchange_n(&sw->fault.fail_left, &left,
                                        left - 1, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            return true;
        }
    }
    return false;
}

/* Whether a hold (dma_swcopy_hold()) whose end is 'until' is in force. */
static inline bool
swcopy_hold_active(uint64_t until)
{
    return until && (until == SWCOPY_HOLD_FOREVER || rte_rdtsc() < until);
}

/* Whether the worker must not execute copies now.  A timed hold ends by
 * itself: nobody needs to notice its expiry, the worker busy or not. */
static bool
swcopy_held(const struct swcopy_dev *sw)
{
    return swcopy_hold_active(__atomic_load_n(&sw->fault.hold_until,
                                              __ATOMIC_ACQUIRE));
}

static uint16_t
swcopy_run_batch(struct swcopy_dev *sw, struct swcopy_desc *ring,
                 uint16_t mask, uint16_t done, uint16_t tail, uint32_t *nerrp,
                 bool stopping)
{
    uint16_t n = RTE_MIN((uint16_t) (tail - done), SWCOPY_BATCH_MAX);
    uint32_t delay_us = (stopping ? 0
                         : __atomic_load_n(&sw->fault.delay_us,
                                           __ATOMIC_RELAXED));
    bool faults = (delay_us
                   || __atomic_load_n(&sw->fault.fail_left, __ATOMIC_RELAXED));
    uint32_t nerr = *nerrp;
    uint32_t failed = 0;
    uint32_t injected = 0;
    uint64_t bytes = 0;
    uint16_t i;

    if (unlikely(faults)) {
        /* One copy at a time, each one published on its own. */
        n = 1;
        if (delay_us) {
            swcopy_sleep_ns(delay_us * 1000L);
        }
    }

    /* The submitter just wrote these lines: start fetching them all. */
    for (i = 0; i < n; i += SWCOPY_DESC_PER_LINE) {
        rte_prefetch0(&ring[(uint16_t) (done + i) & mask]);
    }
    for (i = 0; i < n; i++) {
        struct swcopy_desc *d = &ring[(uint16_t) (done + i) & mask];
        uint32_t len = d->len;
        void *dst = (void *) (uintptr_t) d->dst;
        const void *src = (const void *) (uintptr_t) d->src;

        if (unlikely(faults) && swcopy_take_failure(sw)) {
            d->status = RTE_DMA_STATUS_ERROR_UNKNOWN;
            failed++;
            injected++;
        } else if (likely(len - 1 < DMA_SWCOPY_MAX_LEN && src && dst)) {
            memcpy(dst, src, len);
            bytes += len;
        } else {
            d->status = (len - 1 >= DMA_SWCOPY_MAX_LEN
                         ? RTE_DMA_STATUS_INVALID_LENGTH
                         : !src ? RTE_DMA_STATUS_INVALID_SRC_ADDR
                         : RTE_DMA_STATUS_INVALID_DST_ADDR);
            failed++;
        }
    }
    done += n;
    nerr += failed;
    __atomic_store_n(&sw->prog.word, ((uint64_t) nerr << 32) | done,
                     __ATOMIC_RELEASE);
    *nerrp = nerr;

    __atomic_store_n(&sw->ws.copies, sw->ws.copies + n, __ATOMIC_RELAXED);
    __atomic_store_n(&sw->ws.bytes, sw->ws.bytes + bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&sw->ws.batches, sw->ws.batches + 1, __ATOMIC_RELAXED);
    if (failed) {
        __atomic_store_n(&sw->ws.failed, sw->ws.failed + failed,
                         __ATOMIC_RELAXED);
    }
    if (injected) {
        __atomic_store_n(&sw->fault.injected, sw->fault.injected + injected,
                         __ATOMIC_RELAXED);
    }
    return done;
}

/* The worker's part of a stop: executes or drops what was submitted and
 * not executed yet, from 'done' on. */
static void
swcopy_stop_pending(struct swcopy_dev *sw, struct swcopy_desc *ring,
                    uint16_t mask, uint16_t done, uint32_t *nerr)
{
    bool held = swcopy_held(sw);
    uint64_t n = 0;
    uint16_t tail;

    while ((tail = __atomic_load_n(&sw->bell.tail, __ATOMIC_ACQUIRE))
           != done) {
        uint16_t next = (held ? tail
                         : swcopy_run_batch(sw, ring, mask, done, tail, nerr,
                                            true));

        n += (uint16_t) (next - done);
        done = next;
    }
    if (held) {
        __atomic_store_n(&sw->ws.stop_dropped, sw->ws.stop_dropped + n,
                         __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(&sw->ws.stop_executed, sw->ws.stop_executed + n,
                         __ATOMIC_RELAXED);
    }
    if (n) {
        SWCOPY_INFO("%s: stopped; %"PRIu64" copies in flight %s",
                    sw->ctl.name, n, held ? "dropped, never executed"
                    : "executed at once");
    }
}

static void *
swcopy_worker_main(void *sw_)
{
    struct swcopy_dev *sw = sw_;
    uint64_t hz = rte_get_tsc_hz();
    uint64_t pause_cycles = hz / 1000000 * SWCOPY_PAUSE_US;
    uint64_t nap_cycles = hz / 1000000 * SWCOPY_NAP_UNTIL_US;
    struct swcopy_desc *ring = NULL;
    uint32_t empty_polls = 0;
    uint64_t idle_start = 0;
    long nap_ns = SWCOPY_NAP_MIN_NS;
    uint64_t park_ns = SWCOPY_PARK_MIN_NS;
    uint32_t seen_cmd = 0;          /* Never a valid command word. */
    uint32_t nerr = 0;
    uint16_t mask = 0;
    uint16_t done = 0;

    prctl(PR_SET_TIMERSLACK, (unsigned long) SWCOPY_TIMER_SLACK_NS, 0, 0, 0);

    for (;;) {
        uint32_t cmd = __atomic_load_n(&sw->ctl.cmd, __ATOMIC_ACQUIRE);
        uint16_t tail;
        uint64_t idle;

        if (unlikely(cmd != seen_cmd)) {
            /* Start, stop or close.  While the worker was stopped, start or
             * vchan setup may have replaced the ring and reset the indices:
             * reload them. */
            uint64_t word = __atomic_load_n(&sw->prog.word, __ATOMIC_RELAXED);

            ring = sw->ctl.ring;
            mask = sw->ctl.mask;
            done = word;
            nerr = word >> 32;
            seen_cmd = cmd;
            empty_polls = 0;
            nap_ns = SWCOPY_NAP_MIN_NS;
            park_ns = SWCOPY_PARK_MIN_NS;

            if (SWCOPY_CMD(cmd) == SWCOPY_CMD_RUN) {
                __atomic_store_n(&sw->ctl.ack, cmd, __ATOMIC_RELEASE);
                continue;
            }

            /* Stop or exit: the engine is fenced.  A held engine (a hung
             * one, as tests make it) drops what it holds: those copies are
             * never executed and never reported complete.  Otherwise what
             * was submitted is executed now, without any delay asked by
             * dma_swcopy_delay().  Either way, nothing runs afterwards
             * until the next start, which resets the ring. */
            swcopy_stop_pending(sw, ring, mask, done, &nerr);
            __atomic_store_n(&sw->fault.hold_until, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&sw->ctl.ack, cmd, __ATOMIC_RELEASE);
            if (SWCOPY_CMD(cmd) == SWCOPY_CMD_EXIT) {
                break;
            }
            while (__atomic_load_n(&sw->ctl.cmd, __ATOMIC_ACQUIRE) == cmd) {
                swcopy_futex_wait(&sw->ctl.cmd, cmd, 0);
            }
            continue;
        }

        tail = __atomic_load_n(&sw->bell.tail, __ATOMIC_ACQUIRE);
        if (tail != done && unlikely(swcopy_held(sw))) {
            /* Held: the copies stay in flight.  Commands still work. */
            swcopy_sleep_ns(SWCOPY_NAP_MAX_NS);
            continue;
        }
        if (tail != done) {
            done = swcopy_run_batch(sw, ring, mask, done, tail, &nerr,
                                    false);
            empty_polls = 0;
            nap_ns = SWCOPY_NAP_MIN_NS;
            park_ns = SWCOPY_PARK_MIN_NS;
            continue;
        }

        /* Idle: spin, then pause, then nap, then park. */
        if (empty_polls < SWCOPY_SPIN_POLLS) {
            if (!empty_polls++) {
                idle_start = rte_rdtsc();
            }
            continue;
        }
        idle = rte_rdtsc() - idle_start;
        if (idle < pause_cycles) {
            rte_pause();
        } else if (idle < nap_cycles) {
            swcopy_sleep_ns(nap_ns);
            nap_ns = RTE_MIN(nap_ns * 2, SWCOPY_NAP_MAX_NS);
            __atomic_store_n(&sw->ws.naps, sw->ws.naps + 1, __ATOMIC_RELAXED);
        } else {
            /* Park until the submitter kicks or 'park_ns' passes (the
             * timeout doubles on each park, up to SWCOPY_PARK_MAX_NS, so
             * that a long idle period costs a few wakeups a second).  The
             * fence orders the store of 'sleeping' before the load of
             * 'tail'.  The submitter has no such fence (it would cost every
             * submit), so it can miss 'sleeping' if it submits within a
             * fraction of a microsecond of this check: then the copy waits
             * for the timeout. */
            __atomic_store_n(&sw->bell.sleeping, 1, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(&sw->bell.tail, __ATOMIC_ACQUIRE) == done
                && __atomic_load_n(&sw->ctl.cmd, __ATOMIC_RELAXED)
                   == seen_cmd) {
                swcopy_futex_wait(&sw->bell.sleeping, 1, park_ns);
                park_ns = RTE_MIN(park_ns * 2, SWCOPY_PARK_MAX_NS);
                __atomic_store_n(&sw->ws.parks, sw->ws.parks + 1,
                                 __ATOMIC_RELAXED);
            }
            __atomic_store_n(&sw->bell.sleeping, 0, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

/* Control path. */

/* Sends 'cmd' to the worker and waits until it has acted on it. */
static void
swcopy_command(struct swcopy_dev *sw, uint32_t cmd)
{
    uint32_t word = (++sw->ctl.seq << 2) | cmd;
    uint64_t waited_us = 0;

    __atomic_store_n(&sw->ctl.cmd, word, __ATOMIC_RELEASE);
    swcopy_futex_wake(&sw->ctl.cmd);
    swcopy_kick(sw);
    if (cmd == SWCOPY_CMD_RUN) {
        return;
    }
    while (__atomic_load_n(&sw->ctl.ack, __ATOMIC_ACQUIRE) != word) {
        swcopy_sleep_ns(10000);
        waited_us += 10;
        if (waited_us == 1000000) {
            SWCOPY_WARN("%s: worker still draining after 1 s", sw->ctl.name);
        }
    }
}

/* Empties the ring: ring_idx restarts at 0.  The worker must be stopped (or
 * not exist).  Statistics are kept. */
static void
swcopy_reset(struct swcopy_dev *sw)
{
    struct swcopy_sub *sub = &sw->sub;

    sub->ring = sw->ctl.ring;
    sub->mask = sw->ctl.mask;
    sub->nb_desc = sw->ctl.nb_desc;
    sub->write_idx = 0;
    sub->submit_idx = 0;
    sub->read_idx = 0;
    sub->nerr_seen = 0;
    __atomic_store_n(&sw->bell.tail, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sw->bell.sleeping, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sw->prog.word, 0, __ATOMIC_RELAXED);
}

/* The dmadev's private data (allocated by rte_dma_pmd_allocate(), only
 * cache-line aligned) holds a pointer to our state, which needs 128-byte
 * alignment. */
static struct swcopy_dev *
swcopy_dev_get(const struct swcopy_dpdk_dma_dev *dev)
{
    struct swcopy_dev **swp = dev->data->dev_private;

    return *swp;
}

static int
swcopy_info_get(const struct swcopy_dpdk_dma_dev *dev,
                struct rte_dma_info *info, uint32_t info_sz)
{
    if (info_sz < sizeof *info) {
        return -EINVAL;
    }
    info->dev_capa = (RTE_DMA_CAPA_MEM_TO_MEM | RTE_DMA_CAPA_SVA
                      | RTE_DMA_CAPA_OPS_COPY);
    info->max_vchans = 1;
    info->min_desc = DMA_SWCOPY_MIN_DESC;
    info->max_desc = DMA_SWCOPY_MAX_DESC;
    info->max_sges = 0;
    info->numa_node = dev->device ? dev->device->numa_node : SOCKET_ID_ANY;
    return 0;
}

static int
swcopy_configure(struct swcopy_dpdk_dma_dev *dev,
                 const struct rte_dma_conf *conf, uint32_t conf_sz)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);

    if (conf_sz < sizeof *conf) {
        return -EINVAL;
    }
    if (conf->nb_vchans != 1) {
        SWCOPY_ERR("%s: %"PRIu16" vchans requested, only 1 supported",
                   sw->ctl.name, conf->nb_vchans);
        return -EINVAL;
    }
    if (conf->enable_silent) {
        SWCOPY_ERR("%s: silent mode not supported", sw->ctl.name);
        return -EINVAL;
    }
    return 0;
}

static int
swcopy_vchan_setup(struct swcopy_dpdk_dma_dev *dev, uint16_t vchan,
                   const struct rte_dma_vchan_conf *conf, uint32_t conf_sz)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);
    struct swcopy_desc *ring;
    uint16_t nb = conf->nb_desc;

    if (conf_sz < sizeof *conf || vchan != 0) {
        return -EINVAL;
    }
    if (conf->direction != RTE_DMA_DIR_MEM_TO_MEM) {
        SWCOPY_ERR("%s: only mem-to-mem copies are supported", sw->ctl.name);
        return -EINVAL;
    }
    if (nb < DMA_SWCOPY_MIN_DESC || nb > DMA_SWCOPY_MAX_DESC
        || (nb & (nb - 1))) {
        SWCOPY_ERR("%s: nb_desc %"PRIu16" is not a power of 2 in [%d, %d]",
                   sw->ctl.name, nb, DMA_SWCOPY_MIN_DESC,
                   DMA_SWCOPY_MAX_DESC);
        return -EINVAL;
    }

    ring = rte_zmalloc_socket("dma_swcopy_ring", nb * sizeof *ring,
                              RTE_CACHE_LINE_SIZE, dev->data->numa_node);
    if (!ring) {
        SWCOPY_ERR("%s: cannot allocate %"PRIu16" descriptors",
                   sw->ctl.name, nb);
        return -ENOMEM;
    }
    rte_free(sw->ctl.ring);
    sw->ctl.ring = ring;
    sw->ctl.mask = nb - 1;
    sw->ctl.nb_desc = nb;
    swcopy_reset(sw);
    return 0;
}

static int
swcopy_start_thread(struct swcopy_dev *sw)
{
    pthread_attr_t attr;
    cpu_set_t cpus;
    char tname[16];
    int error;

    CPU_ZERO(&cpus);
    CPU_SET(sw->ctl.cpu, &cpus);
    pthread_attr_init(&attr);
    error = pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
    if (!error) {
        error = pthread_create(&sw->ctl.thread, &attr, swcopy_worker_main,
                               sw);
    }
    pthread_attr_destroy(&attr);
    if (error) {
        SWCOPY_ERR("%s: cannot start worker thread on CPU %d (%s)",
                   sw->ctl.name, sw->ctl.cpu, rte_strerror(error));
        return -error;
    }
    snprintf(tname, sizeof tname, "%.15s", sw->ctl.name);
    pthread_setname_np(sw->ctl.thread, tname);
    sw->ctl.thread_running = true;
    return 0;
}

static int
swcopy_start(struct swcopy_dpdk_dma_dev *dev)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);

    if (!sw->ctl.ring) {
        SWCOPY_ERR("%s: vchan 0 not set up", sw->ctl.name);
        return -EINVAL;
    }

    /* The worker is stopped or does not exist yet. */
    swcopy_reset(sw);
    if (!sw->ctl.thread_running) {
        int error;

        __atomic_store_n(&sw->ctl.cmd, (++sw->ctl.seq << 2) | SWCOPY_CMD_RUN,
                         __ATOMIC_RELEASE);
        error = swcopy_start_thread(sw);
        if (error) {
            return error;
        }
    } else {
        swcopy_command(sw, SWCOPY_CMD_RUN);
    }
    __atomic_store_n(&sw->sub.started, true, __ATOMIC_RELEASE);
    return 0;
}

static int
swcopy_stop(struct swcopy_dpdk_dma_dev *dev)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);
    struct swcopy_sub *sub = &sw->sub;

    __atomic_store_n(&sub->started, false, __ATOMIC_RELEASE);

    /* Copies enqueued without a submit are discarded.  The worker executes
     * or drops what was submitted (a held engine drops it), and the hold
     * ends. */
    sub->write_idx = sub->submit_idx;

    /* The worker executes what was submitted, then parks. */
    if (sw->ctl.thread_running) {
        swcopy_command(sw, SWCOPY_CMD_STOP);
    }
    return 0;
}

static int
swcopy_close(struct swcopy_dpdk_dma_dev *dev)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);

    if (sw->ctl.thread_running) {
        swcopy_command(sw, SWCOPY_CMD_EXIT);
        pthread_join(sw->ctl.thread, NULL);
        sw->ctl.thread_running = false;
    }
    rte_free(sw->ctl.ring);
    SWCOPY_INFO("%s: closed", sw->ctl.name);
    rte_free(sw);
    *(struct swcopy_dev **) dev->data->dev_private = NULL;
    return 0;
}

static void
swcopy_read_stats(const struct swcopy_dev *sw, struct rte_dma_stats *s)
{
    s->submitted = __atomic_load_n(&sw->sub.submitted, __ATOMIC_RELAXED);
    s->completed = __atomic_load_n(&sw->sub.completed, __ATOMIC_RELAXED);
    s->errors = __atomic_load_n(&sw->sub.errors, __ATOMIC_RELAXED);
}

static int
swcopy_stats_get(const struct swcopy_dpdk_dma_dev *dev, uint16_t vchan,
                 struct rte_dma_stats *stats, uint32_t stats_sz)
{
    const struct swcopy_dev *sw = swcopy_dev_get(dev);
    struct rte_dma_stats now;

    if (stats_sz < sizeof *stats
        || (vchan != 0 && vchan != RTE_DMA_ALL_VCHAN)) {
        return -EINVAL;
    }
    swcopy_read_stats(sw, &now);
    stats->submitted = now.submitted - sw->ctl.base.submitted;
    stats->completed = now.completed - sw->ctl.base.completed;
    stats->errors = now.errors - sw->ctl.base.errors;
    return 0;
}

static int
swcopy_stats_reset(struct swcopy_dpdk_dma_dev *dev, uint16_t vchan)
{
    struct swcopy_dev *sw = swcopy_dev_get(dev);

    if (vchan != 0 && vchan != RTE_DMA_ALL_VCHAN) {
        return -EINVAL;
    }
    /* The counters belong to the submitter thread, which may be running:
     * remember where they stand instead of writing them. */
    swcopy_read_stats(sw, &sw->ctl.base);
    return 0;
}

static int
swcopy_vchan_status(const struct swcopy_dpdk_dma_dev *dev, uint16_t vchan,
                    enum rte_dma_vchan_status *status)
{
    const struct swcopy_dev *sw = swcopy_dev_get(dev);
    uint16_t tail, done;
    uint64_t word;

    if (vchan != 0) {
        return -EINVAL;
    }
    tail = __atomic_load_n(&sw->bell.tail, __ATOMIC_ACQUIRE);
    word = __atomic_load_n(&sw->prog.word, __ATOMIC_ACQUIRE);
    done = word;
    if (word >> 32 != __atomic_load_n(&sw->sub.nerr_seen, __ATOMIC_RELAXED)) {
        /* A failed copy that rte_dma_completed_status() did not report yet:
         * rte_dma_completed() stops there, as a hardware engine's would. */
        *status = RTE_DMA_VCHAN_HALTED_ERROR;
    } else {
        *status = tail == done ? RTE_DMA_VCHAN_IDLE : RTE_DMA_VCHAN_ACTIVE;
    }
    return 0;
}

static int
swcopy_dump(const struct swcopy_dpdk_dma_dev *dev, FILE *f)
{
    const struct swcopy_dev *sw = swcopy_dev_get(dev);
    const struct swcopy_sub *sub = &sw->sub;
    uint64_t word = __atomic_load_n(&sw->prog.word, __ATOMIC_ACQUIRE);
    uint32_t cmd = __atomic_load_n(&sw->ctl.cmd, __ATOMIC_RELAXED);
    const char *state;

    if (!sw->ctl.thread_running) {
        state = "not started";
    } else if (SWCOPY_CMD(cmd) == SWCOPY_CMD_RUN) {
        state = __atomic_load_n(&sw->bell.sleeping, __ATOMIC_RELAXED)
                ? "parked (idle)" : "running";
    } else {
        state = "stopped";
    }

    fprintf(f, "  dma_swcopy:\n");
    fprintf(f, "    worker: cpu %d (%s), %s\n", sw->ctl.cpu,
            sw->ctl.cpu_given ? "lcore= devarg" : "chosen automatically",
            state);
    fprintf(f, "    ring: nb_desc %"PRIu16", write %"PRIu16", submitted %"
            PRIu16", completed %"PRIu16", reported %"PRIu16"\n",
            sub->nb_desc, sub->write_idx, sub->submit_idx, (uint16_t) word,
            sub->read_idx);
    fprintf(f, "    errors: %"PRIu32" failed ops, %"PRIu32" reported\n",
            (uint32_t) (word >> 32), sub->nerr_seen);
    fprintf(f, "    max_len: %u\n", DMA_SWCOPY_MAX_LEN);
    fprintf(f, "    fault injection: %s, fail next %"PRIu32", delay %"PRIu32
            " us, failed on purpose %"PRIu64"\n",
            swcopy_held(sw) ? "held" : "not held",
            __atomic_load_n(&sw->fault.fail_left, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->fault.delay_us, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->fault.injected, __ATOMIC_RELAXED));
    fprintf(f, "    worker stats: copies %"PRIu64", bytes %"PRIu64
            ", failed %"PRIu64", batches %"PRIu64", naps %"PRIu64
            ", parks %"PRIu64"\n",
            __atomic_load_n(&sw->ws.copies, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->ws.bytes, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->ws.failed, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->ws.batches, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->ws.naps, __ATOMIC_RELAXED),
            __atomic_load_n(&sw->ws.parks, __ATOMIC_RELAXED));
    return 0;
}

static const struct swcopy_dpdk_dma_dev_ops swcopy_ops = {
    .dev_info_get = swcopy_info_get,
    .dev_configure = swcopy_configure,
    .dev_start = swcopy_start,
    .dev_stop = swcopy_stop,
    .dev_close = swcopy_close,
    .vchan_setup = swcopy_vchan_setup,
    .stats_get = swcopy_stats_get,
    .stats_reset = swcopy_stats_reset,
    .vchan_status = swcopy_vchan_status,
    .dev_dump = swcopy_dump,
};

/* Probe and remove. */

#define SWCOPY_ARG_LCORE "lcore"

static int
swcopy_parse_cpu(const char *key, const char *value, void *cpu_)
{
    int *cpu = cpu_;
    char *end;
    long v;

    errno = 0;
    v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < 0 || v >= CPU_SETSIZE) {
        SWCOPY_ERR("invalid %s=%s (want a CPU number, 0 to %d)", key,
                   value, CPU_SETSIZE - 1);
        return -EINVAL;
    }
    *cpu = v;
    return 0;
}

/* Returns the CPUs this process may run on. */
static void
swcopy_usable_cpus(cpu_set_t *cpus)
{
    if (swcopy_initial_cpus_valid) {
        *cpus = swcopy_initial_cpus;
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        long i;

        CPU_ZERO(cpus);
        for (i = 0; i < n && i < CPU_SETSIZE; i++) {
            CPU_SET(i, cpus);
        }
    }
}

/* Returns the CPUs that EAL lcores (main, workers, service cores) run on. */
static void
swcopy_eal_cpus(cpu_set_t *cpus)
{
    unsigned int lcore;

    CPU_ZERO(cpus);
    for (lcore = 0; lcore < RTE_MAX_LCORE; lcore++) {
        if (rte_eal_lcore_role(lcore) != ROLE_OFF) {
            rte_cpuset_t set = rte_lcore_cpuset(lcore);

            CPU_OR(cpus, cpus, &set);
        }
    }
}

/* Picks the worker CPU: 'requested' if not negative, otherwise a usable CPU
 * outside EAL's, spreading instances.  Returns a negative errno value if
 * 'requested' is not usable. */
static int
swcopy_pick_cpu(const char *name, int requested)
{
    cpu_set_t usable, eal, spare;
    int i, n_free, pick, last = -1;

    swcopy_usable_cpus(&usable);
    swcopy_eal_cpus(&eal);

    if (requested >= 0) {
        if (!CPU_ISSET(requested, &usable)) {
            SWCOPY_ERR("%s: lcore=%d is not a CPU this process can use",
                       name, requested);
            return -EINVAL;
        }
        if (CPU_ISSET(requested, &eal)) {
            SWCOPY_WARN("%s: worker CPU %d is also used by an EAL lcore",
                        name, requested);
        }
        return requested;
    }

    CPU_ZERO(&spare);
    for (i = 0; i < CPU_SETSIZE; i++) {
        if (CPU_ISSET(i, &usable)) {
            last = i;
            if (!CPU_ISSET(i, &eal)) {
                CPU_SET(i, &spare);
            }
        }
    }
    n_free = CPU_COUNT(&spare);
    if (!n_free) {
        SWCOPY_WARN("%s: every CPU runs an EAL lcore; the worker shares the "
                    "last one, CPU %d (give lcore=N to choose)", name, last);
        return last;
    }

    pick = __atomic_fetch_add(&swcopy_auto_instances, 1, __ATOMIC_RELAXED)
           % n_free;
    for (i = 0; i < CPU_SETSIZE; i++) {
        if (CPU_ISSET(i, &spare) && !pick--) {
            break;
        }
    }
    SWCOPY_INFO("%s: worker on CPU %d, which no EAL lcore uses", name, i);
    return i;
}

/* Returns the NUMA node of 'cpu' from sysfs, or SOCKET_ID_ANY. */
static int
swcopy_cpu_node(int cpu)
{
    char path[128];
    int node;

    for (node = 0; node < RTE_MAX_NUMA_NODES; node++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/node%d",
                 cpu, node);
        if (!access(path, F_OK)) {
            return node;
        }
    }
    return SOCKET_ID_ANY;
}

static int
swcopy_probe(struct swcopy_dpdk_vdev_device *vdev)
{
    static const char *const valid_args[] = { SWCOPY_ARG_LCORE, NULL };
    const struct rte_device *rdev = (const void *) &vdev->device;
    const struct rte_devargs *devargs;
    struct swcopy_dpdk_dma_dev *dev;
    struct rte_kvargs *kvlist;
    struct rte_dma_fp_object *fp;
    struct swcopy_dev *sw;
    const char *name;
    const char *args;
    bool cpu_given;
    int cpu = -1;
    int node;
    int id;

    /* Check the mirrored rte_device layout against DPDK's accessors. */
    name = rte_dev_name(rdev);
    devargs = rte_dev_devargs(rdev);
    if (!name || name != vdev->device.name
        || devargs != vdev->device.devargs
        || rte_dev_numa_node(rdev) != vdev->device.numa_node) {
        SWCOPY_ERR("DPDK's struct rte_device does not match "
                   "dma-swcopy-abi.h; refusing to probe");
        return -EINVAL;
    }
    if (rte_eal_process_type() != RTE_PROC_PRIMARY) {
        SWCOPY_ERR("%s: secondary processes are not supported", name);
        return -ENOTSUP;
    }
    if (rte_eal_iova_mode() != RTE_IOVA_VA) {
        SWCOPY_ERR("%s: dma_swcopy needs --iova-mode=va (it copies with the "
                   "CPU, so IOVAs must be virtual addresses); not probing",
                   name);
        return -ENOTSUP;
    }

    args = devargs && devargs->args ? devargs->args : "";
    kvlist = rte_kvargs_parse(args, valid_args);
    if (!kvlist) {
        SWCOPY_ERR("%s: cannot parse arguments \"%s\" (valid: %s=N)",
                   name, args, SWCOPY_ARG_LCORE);
        return -EINVAL;
    }
    if (rte_kvargs_count(kvlist, SWCOPY_ARG_LCORE) > 1) {
        SWCOPY_ERR("%s: %s= given more than once", name, SWCOPY_ARG_LCORE);
        rte_kvargs_free(kvlist);
        return -EINVAL;
    }
    if (rte_kvargs_process(kvlist, SWCOPY_ARG_LCORE, swcopy_parse_cpu,
                           &cpu) < 0) {
        rte_kvargs_free(kvlist);
        return -EINVAL;
    }
    rte_kvargs_free(kvlist);

    cpu_given = cpu >= 0;
    cpu = swcopy_pick_cpu(name, cpu);
    if (cpu < 0) {
        return cpu;
    }
    node = swcopy_cpu_node(cpu);

    dev = rte_dma_pmd_allocate(name, node, sizeof sw);
    if (!dev) {
        SWCOPY_ERR("%s: cannot allocate dmadev", name);
        return -ENOMEM;
    }

    /* Check the mirrored rte_dma_dev layout against what the public API
     * says about the device just allocated. */
    id = rte_dma_get_dev_id_by_name(name);
    if (dev->state != SWCOPY_DPDK_DMA_DEV_REGISTERED || id < 0
        || dev->data->dev_id != id
        || strcmp(dev->data->dev_name, name)
        || dev->fp_obj != &rte_dma_fp_objs[id]
        || !dev->data->dev_private) {
        SWCOPY_ERR("DPDK's struct rte_dma_dev does not match "
                   "dma-swcopy-abi.h; refusing to probe");
        rte_dma_pmd_release(name);
        return -EINVAL;
    }

    sw = rte_zmalloc_socket("dma_swcopy", sizeof *sw,
                            alignof(struct swcopy_dev), node);
    if (!sw) {
        SWCOPY_ERR("%s: cannot allocate private data", name);
        rte_dma_pmd_release(name);
        return -ENOMEM;
    }
    *(struct swcopy_dev **) dev->data->dev_private = sw;
    sw->ctl.cpu = cpu;
    sw->ctl.cpu_given = cpu_given;
    sw->ctl.dev_id = id;
    snprintf(sw->ctl.name, sizeof sw->ctl.name, "%s", name);

    /* The vdev bus leaves a vdev's NUMA node unknown; report the worker's
     * (rte_dma_info_get() reads it from here). */
    if (node != SOCKET_ID_ANY) {
        vdev->device.numa_node = node;
    }

    dev->device = &vdev->device;
    dev->dev_ops = &swcopy_ops;
    fp = dev->fp_obj;
    fp->dev_private = sw;
    fp->copy = swcopy_copy;
    fp->submit = swcopy_submit;
    fp->completed = swcopy_completed;
    fp->completed_status = swcopy_completed_status;
    fp->burst_capacity = swcopy_burst_capacity;
    dev->state = SWCOPY_DPDK_DMA_DEV_READY;

    SWCOPY_INFO("%s: dmadev %d, worker CPU %d%s, NUMA node %d", name, id,
                cpu, sw->ctl.cpu_given ? " (lcore=)" : "", node);
    return 0;
}

static int
swcopy_remove(struct swcopy_dpdk_vdev_device *vdev)
{
    const char *name = rte_dev_name((const void *) &vdev->device);
    int id;

    if (!name) {
        return -EINVAL;
    }
    id = rte_dma_get_dev_id_by_name(name);
    if (id < 0) {
        /* Already closed by the application. */
        return 0;
    }
    if (rte_dma_fp_objs[id].dev_private) {
        const struct swcopy_dev *sw = rte_dma_fp_objs[id].dev_private;

        if (__atomic_load_n(&sw->sub.started, __ATOMIC_RELAXED)) {
            rte_dma_stop(id);
        }
    }
    return rte_dma_pmd_release(name);
}

static struct swcopy_dpdk_vdev_driver swcopy_vdev_driver = {
    .driver = {
        .name = DMA_SWCOPY_DRIVER_NAME,
    },
    .probe = swcopy_probe,
    .remove = swcopy_remove,
    .drv_flags = SWCOPY_DPDK_VDEV_DRV_NEED_IOVA_AS_VA,
};

/* For dpdk-pmdinfo, as RTE_PMD_REGISTER_VDEV and
 * RTE_PMD_REGISTER_PARAM_STRING would do. */
RTE_PMD_EXPORT_NAME(dma_swcopy, __COUNTER__);
RTE_PMD_REGISTER_PARAM_STRING(dma_swcopy, SWCOPY_ARG_LCORE "=<cpu>");

/* Fault injection. */

/* Returns the instance named 'name', or NULL if there is no dma_swcopy
 * instance of that name. */
static struct swcopy_dev *
swcopy_find(const char *name)
{
    int id = name ? rte_dma_get_dev_id_by_name(name) : -1;

    if (id < 0 || id >= RTE_DMADEV_DEFAULT_MAX
        || rte_dma_fp_objs[id].copy != swcopy_copy) {
        return NULL;
    }
    return rte_dma_fp_objs[id].dev_private;
}

int
dma_swcopy_hold(const char *name, uint32_t release_after_ms)
{
    struct swcopy_dev *sw = swcopy_find(name);
    uint64_t until;

    if (!sw) {
        return -ENODEV;
    }
    until = (release_after_ms
             ? rte_rdtsc() + rte_get_tsc_hz() / 1000 * release_after_ms
             : SWCOPY_HOLD_FOREVER);
    if (!swcopy_hold_active(__atomic_exchange_n(&sw->fault.hold_until, until,
                                                __ATOMIC_ACQ_REL))) {
        __atomic_fetch_add(&sw->fault.holds, 1, __ATOMIC_RELAXED);
    }
    SWCOPY_INFO("%s: held%s", sw->ctl.name,
                release_after_ms ? " (timed)" : "");
    return 0;
}

int
dma_swcopy_release(const char *name)
{
    struct swcopy_dev *sw = swcopy_find(name);

    if (!sw) {
        return -ENODEV;
    }
    __atomic_store_n(&sw->fault.hold_until, 0, __ATOMIC_RELEASE);
    swcopy_kick(sw);
    SWCOPY_INFO("%s: released", sw->ctl.name);
    return 0;
}

int
dma_swcopy_fail(const char *name, uint32_t n)
{
    struct swcopy_dev *sw = swcopy_find(name);

    if (!sw) {
        return -ENODEV;
    }
    __atomic_store_n(&sw->fault.fail_left, n, __ATOMIC_RELAXED);
    SWCOPY_INFO("%s: the next %"PRIu32" copies fail", sw->ctl.name, n);
    return 0;
}

int
dma_swcopy_delay(const char *name, uint32_t us)
{
    struct swcopy_dev *sw = swcopy_find(name);

    if (!sw) {
        return -ENODEV;
    }
    __atomic_store_n(&sw->fault.delay_us, us, __ATOMIC_RELAXED);
    SWCOPY_INFO("%s: each copy takes at least %"PRIu32" us", sw->ctl.name,
                us);
    return 0;
}

int
dma_swcopy_get_state(const char *name, struct dma_swcopy_state *st)
{
    struct swcopy_dev *sw = swcopy_find(name);
    uint64_t until, now;

    if (!sw) {
        return -ENODEV;
    }
    memset(st, 0, sizeof *st);
    st->cpu = sw->ctl.cpu;
    st->started = __atomic_load_n(&sw->sub.started, __ATOMIC_RELAXED);
    until = __atomic_load_n(&sw->fault.hold_until, __ATOMIC_ACQUIRE);
    now = rte_rdtsc();
    st->held = swcopy_hold_active(until);
    if (st->held && until != SWCOPY_HOLD_FOREVER) {
        st->release_in_ms = (until - now) / (rte_get_tsc_hz() / 1000);
    }
    st->fail_left = __atomic_load_n(&sw->fault.fail_left, __ATOMIC_RELAXED);
    st->delay_us = __atomic_load_n(&sw->fault.delay_us, __ATOMIC_RELAXED);
    st->submitted = __atomic_load_n(&sw->sub.submitted, __ATOMIC_RELAXED);
    st->executed = __atomic_load_n(&sw->ws.copies, __ATOMIC_RELAXED);
    st->completed = __atomic_load_n(&sw->sub.completed, __ATOMIC_RELAXED);
    st->failed = __atomic_load_n(&sw->ws.failed, __ATOMIC_RELAXED);
    st->injected = __atomic_load_n(&sw->fault.injected, __ATOMIC_RELAXED);
    st->holds = __atomic_load_n(&sw->fault.holds, __ATOMIC_RELAXED);
    st->stop_executed = __atomic_load_n(&sw->ws.stop_executed,
                                        __ATOMIC_RELAXED);
    st->stop_dropped = __atomic_load_n(&sw->ws.stop_dropped,
                                       __ATOMIC_RELAXED);
    return 0;
}

int
dma_swcopy_unreported(const char *name, dma_swcopy_copy_cb *cb, void *aux)
{
    struct swcopy_dev *sw = swcopy_find(name);
    const struct swcopy_sub *sub;
    uint16_t idx, tail;

    if (!sw) {
        return -ENODEV;
    }
    sub = &sw->sub;
    if (__atomic_load_n(&sub->started, __ATOMIC_ACQUIRE)
        || (sw->ctl.thread_running
            && __atomic_load_n(&sw->ctl.ack, __ATOMIC_ACQUIRE)
               != __atomic_load_n(&sw->ctl.cmd, __ATOMIC_RELAXED))) {
        return -EBUSY;
    }
    if (!sub->ring) {
        return 0;
    }
    /* Submitted copies whose completion was not reported, from the next
     * one to report.  The submitter keeps fewer than 'nb_desc' between
     * them (swcopy_copy()), so no descriptor was reused. */
    tail = __atomic_load_n(&sw->bell.tail, __ATOMIC_ACQUIRE);
    for (idx = sub->read_idx; idx != tail; idx++) {
        const struct swcopy_desc *d = &sub->ring[idx & sub->mask];

        cb(aux, d->src, d->dst, d->len);
    }
    return (uint16_t) (tail - sub->read_idx);
}

void
dma_swcopy_register(void)
{
    static bool registered;

    if (__atomic_exchange_n(&registered, true, __ATOMIC_ACQ_REL)) {
        return;
    }
    if (!sched_getaffinity(0, sizeof swcopy_initial_cpus,
                           &swcopy_initial_cpus)
        && CPU_COUNT(&swcopy_initial_cpus)) {
        swcopy_initial_cpus_valid = true;
    }
    swcopy_logtype = rte_log_register_type_and_pick_level("pmd.dma.swcopy",
                                                          RTE_LOG_INFO);
    rte_vdev_register(&swcopy_vdev_driver);
}

RTE_INIT(dma_swcopy_init)
{
    dma_swcopy_register();
}
