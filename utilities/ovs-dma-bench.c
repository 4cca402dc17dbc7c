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

/* ovs-dma-bench: what a DPDK dmadev costs the thread that submits copies.
 *
 * For every dmadev that EAL probed, and for each copy size and batch size,
 * it measures from the submitting thread, with rte_rdtsc():
 *
 *   - lockstep: enqueue a batch of copies, submit, then poll
 *     rte_dma_completed() until the whole batch is back; repeat.  Reports
 *     submit cycles per copy (the rte_dma_copy() calls plus
 *     rte_dma_submit()), completion cycles per copy (the
 *     rte_dma_completed() calls that returned completions; empty polls are
 *     waiting, not cost) and the rate.  Cycle costs are averaged over
 *     batches without the 5% highest and lowest, so that batches hit by
 *     preemption or interrupts do not dominate (medians would not do:
 *     some virtual TSCs only move in steps of tens of cycles).
 *
 *   - pipelined: keep the ring full (enqueue a batch whenever the burst
 *     capacity allows, collect whatever is complete): the engine's
 *     throughput, and the submitter's cycles per copy at that rate.
 *
 * Each measurement is cut into slices; throughputs are reported for the
 * best and the median slice.  Plus a single-core memcpy() (and
 * rte_memcpy()) baseline at each size on the same buffers, and a
 * cache-line ping-pong between the benchmark CPU and another one (the
 * cost of one cross-CPU handoff, the unit an engine's cost is made of; a
 * high value also reveals CPUs shared with other busy threads).  Devices
 * are started one at a time, so engine threads of other devices do not
 * compete.
 *
 * Usage: ovs-dma-bench [EAL options] [-- options]; see --help. */

#include <config.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_dmadev.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>

#include "dma-swcopy.h"
#include "util.h"

#define MAX_LIST 16
#define MAX_DEVS 16
#define MAX_SIZE (1024 * 1024)

struct options {
    unsigned int sizes[MAX_LIST];
    unsigned int n_sizes;
    unsigned int batches[MAX_LIST];
    unsigned int n_batches;
    double duration;            /* Seconds per measurement. */
    unsigned int slices;        /* Each measurement is cut in 'slices'. */
    unsigned int ring;          /* Descriptors per vchan. */
    unsigned int buffers;       /* Source and destination buffers. */
    const char *json;
    bool rm_runtime_dir;
    int pingpong_cpu;           /* -1: pick one outside EAL's lcores. */
};

/* One (device, size, batch) measurement. */
struct result {
    unsigned int size;
    unsigned int batch;

    /* Lockstep, per copy, over batches: trimmed mean (the 5% highest and
     * lowest batches dropped), median and plain mean. */
    double ls_submit;
    double ls_cpl;              /* Productive rte_dma_completed() calls. */
    double ls_total;
    double ls_submit_med;
    double ls_cpl_med;
    double ls_submit_mean;
    double ls_cpl_mean;
    double ls_empty_poll;       /* Mean per empty rte_dma_completed(). */
    double ls_mops;             /* Median over slices. */

    /* Pipelined: submitter cycles per copy (median over slices) and
     * throughput (best and median slice). */
    double pl_cyc;
    double pl_mops_best;
    double pl_mops_med;

    uint64_t errors;            /* Failed enqueues or completions. */
};

struct baseline {
    unsigned int size;
    double memcpy_best;         /* Mcopies/s, best and median slice. */
    double memcpy_med;
    double rte_memcpy_best;
    double rte_memcpy_med;
};

static uint64_t rdtsc_overhead;
static uint64_t tsc_hz;

static void
usage(const char *prog)
{
    printf("%s: measure what DPDK dmadevs cost the submitting thread\n"
           "usage: %s [EAL options] [-- options]\n"
           "\n"
           "Benchmarks every dmadev that EAL probes, one at a time, plus a\n"
           "single-core memcpy baseline.  Run the benchmark thread and each\n"
           "engine on different CPUs, e.g. on a 2-CPU machine:\n"
           "  %s -l 1 --no-pci --in-memory --iova-mode=va \\\n"
           "      --file-prefix=bench --vdev=dma_swcopy0,lcore=0 \\\n"
           "      --vdev=dma_skeleton0,lcore=0 -- --json out.json\n"
           "\n"
           "Options:\n"
           "  --sizes LIST       copy sizes in bytes (default 64,1518,4096)\n"
           "  --batches LIST     batch sizes (default 1,8,32)\n"
           "  --duration SECS    time per measurement (default 1)\n"
           "  --slices N         cut each measurement into N slices and\n"
           "                     report the median and best one (default\n"
           "                     10)\n"
           "  --ring N           descriptors per vchan, power of 2\n"
           "                     (default 1024)\n"
           "  --buffers N        source/destination buffers cycled through\n"
           "                     (default 256)\n"
           "  --json FILE        also write the results as JSON to FILE\n"
           "  --pingpong-cpu N   CPU for the cache-line ping-pong that\n"
           "                     calibrates cross-CPU latency (default:\n"
           "                     the first CPU no EAL lcore uses)\n"
           "  --rm-runtime-dir   remove EAL's runtime directory\n"
           "                     (/var/run/dpdk/PREFIX) at exit\n"
           "  -h, --help         this help\n"
           "\n"
           "Cycles are TSC cycles measured with rte_rdtsc() around the\n"
           "calls, minus the cost of rte_rdtsc() itself.  Exit status: 0 ok,\n"
           "1 run time error, 2 bad options.\n", prog, prog, prog);
}

static bool
parse_uint(const char *s, unsigned int min, unsigned int max,
           unsigned int *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool
parse_list(const char *arg, unsigned int min, unsigned int max,
           unsigned int *list, unsigned int *n)
{
    char *copy = xstrdup(arg);
    char *save = NULL;
    char *tok;
    bool ok = true;

    *n = 0;
    for (tok = strtok_r(copy, ",", &save); tok && ok;
         tok = strtok_r(NULL, ",", &save)) {
        ok = *n < MAX_LIST && parse_uint(tok, min, max, &list[(*n)++]);
    }
    free(copy);
    return ok && *n > 0;
}

static void
bad_option(const char *prog, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s (see --help)\n", prog, msg,
            arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static void
parse_options(int argc, char *argv[], const char *prog, struct options *o)
{
    enum {
        OPT_SIZES = 256, OPT_BATCHES, OPT_DURATION, OPT_SLICES, OPT_RING,
        OPT_BUFFERS, OPT_JSON, OPT_RM_RUNTIME_DIR, OPT_PINGPONG_CPU,
    };
    static const struct option long_options[] = {
        { "sizes", required_argument, NULL, OPT_SIZES },
        { "batches", required_argument, NULL, OPT_BATCHES },
        { "duration", required_argument, NULL, OPT_DURATION },
        { "slices", required_argument, NULL, OPT_SLICES },
        { "ring", required_argument, NULL, OPT_RING },
        { "buffers", required_argument, NULL, OPT_BUFFERS },
        { "json", required_argument, NULL, OPT_JSON },
        { "rm-runtime-dir", no_argument, NULL, OPT_RM_RUNTIME_DIR },
        { "pingpong-cpu", required_argument, NULL, OPT_PINGPONG_CPU },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        char *end;

        switch (c) {
        case OPT_SIZES:
            if (!parse_list(optarg, 1, MAX_SIZE, o->sizes, &o->n_sizes)) {
                bad_option(prog, "bad --sizes (1 to 1048576, comma "
                           "separated)", optarg);
            }
            break;
        case OPT_BATCHES:
            if (!parse_list(optarg, 1, 4096, o->batches, &o->n_batches)) {
                bad_option(prog, "bad --batches (1 to 4096, comma "
                           "separated)", optarg);
            }
            break;
        case OPT_DURATION:
            errno = 0;
            o->duration = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->duration > 0)
                || o->duration > 3600) {
                bad_option(prog, "bad --duration (seconds, > 0)", optarg);
            }
            break;
        case OPT_SLICES:
            if (!parse_uint(optarg, 1, 1000, &o->slices)) {
                bad_option(prog, "bad --slices (1 to 1000)", optarg);
            }
            break;
        case OPT_RING:
            if (!parse_uint(optarg, 1, 65536, &o->ring)
                || (o->ring & (o->ring - 1))) {
                bad_option(prog, "bad --ring (a power of 2)", optarg);
            }
            break;
        case OPT_BUFFERS:
            if (!parse_uint(optarg, 1, 1 << 20, &o->buffers)) {
                bad_option(prog, "bad --buffers", optarg);
            }
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case OPT_RM_RUNTIME_DIR:
            o->rm_runtime_dir = true;
            break;
        case OPT_PINGPONG_CPU: {
            unsigned int cpu;

            if (!parse_uint(optarg, 0, CPU_SETSIZE - 1, &cpu)) {
                bad_option(prog, "bad --pingpong-cpu", optarg);
            }
            o->pingpong_cpu = cpu;
            break;
        }
        case 'h':
            usage(prog);
            exit(0);
        case ':':
            bad_option(prog, "option needs an argument", argv[optind - 1]);
            break;
        default:
            bad_option(prog, "unknown option", argv[optind - 1]);
            break;
        }
    }
    if (optind < argc) {
        bad_option(prog, "unexpected argument", argv[optind]);
    }
}

/* Copies in the benchmark cycle through 'n' source and destination
 * buffers, 'stride' bytes apart. */
struct buffers {
    uint8_t *src;
    uint8_t *dst;
    unsigned int n;
    size_t stride;
};

static inline rte_iova_t
buf_src(const struct buffers *b, unsigned int i)
{
    /* IOVA as VA: the address is the IOVA. */
    return (rte_iova_t) (uintptr_t) (b->src + (size_t) (i % b->n) * b->stride);
}

static inline rte_iova_t
buf_dst(const struct buffers *b, unsigned int i)
{
    return (rte_iova_t) (uintptr_t) (b->dst + (size_t) (i % b->n) * b->stride);
}

static void
measure_rdtsc_overhead(void)
{
    uint64_t best = UINT64_MAX;
    int i;

    for (i = 0; i < 100000; i++) {
        uint64_t t0 = rte_rdtsc();
        uint64_t t1 = rte_rdtsc();

        best = RTE_MIN(best, t1 - t0);
    }
    rdtsc_overhead = best;
}

static inline uint64_t
elapsed(uint64_t t0, uint64_t t1)
{
    uint64_t d = t1 - t0;

    return d > rdtsc_overhead ? d - rdtsc_overhead : 0;
}

/* Collects everything still outstanding (after an error or at the end). */
static void
drain(int16_t dev, uint64_t *outstanding, uint64_t *errors)
{
    uint64_t deadline = rte_rdtsc() + 5 * tsc_hz;

    while (*outstanding && rte_rdtsc() < deadline) {
        enum rte_dma_status_code st[64];
        uint16_t n, i;

        n = rte_dma_completed_status(dev, 0, RTE_MIN(*outstanding,
                                                     (uint64_t) 64),
                                     NULL, st);
        for (i = 0; i < n; i++) {
            *errors += st[i] != RTE_DMA_STATUS_SUCCESSFUL;
        }
        *outstanding -= n;
    }
    if (*outstanding) {
        fprintf(stderr, "dmadev %d: %"PRIu64" copies never completed\n",
                dev, *outstanding);
        *errors += *outstanding;
    }
}

static int
cmp_double(const void *a_, const void *b_)
{
    const double *a = a_, *b = b_;

    return *a < *b ? -1 : *a > *b;
}

/* Returns the median of the 'n' values in 'v' (reorders them). */
static double
median(double *v, size_t n)
{
    if (!n) {
        return 0;
    }
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Returns the mean of the 'n' values in 'v' without the 'trim' lowest and
 * 'trim' highest fractions (reorders them). */
static double
trimmed_mean(double *v, size_t n, double trim)
{
    size_t cut = n * trim, i;
    double sum = 0;

    if (!n) {
        return 0;
    }
    qsort(v, n, sizeof *v, cmp_double);
    for (i = cut; i < n - cut; i++) {
        sum += v[i];
    }
    return sum / (n - 2 * cut);
}

static double
max_of(const double *v, size_t n)
{
    double m = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        m = RTE_MAX(m, v[i]);
    }
    return m;
}

/* Per-batch samples of the lockstep loop. */
#define MAX_SAMPLES (1u << 21)

/* Fraction of the highest and of the lowest samples left out of cycle
 * averages: preemption and interrupts hit a few batches very hard. */
#define TRIM 0.05

/* Lockstep: enqueue 'batch' copies, submit, poll until all are back. */
static void
bench_lockstep(int16_t dev, const struct buffers *b, unsigned int size,
               unsigned int batch, const struct options *o, struct result *r)
{
    double *sub = xmalloc(MAX_SAMPLES * sizeof *sub);
    double *cpl = xmalloc(MAX_SAMPLES * sizeof *cpl);
    double *tot = xmalloc(MAX_SAMPLES * sizeof *tot);
    double slice_mops[1000];
    uint64_t sub_sum = 0, cpl_sum = 0, empty_cyc = 0, empty_calls = 0;
    uint64_t copies = 0, errors = 0;
    unsigned int next = 0, slice;
    size_t n_samples = 0;
    bool failed = false;

    for (slice = 0; slice < o->slices && !failed; slice++) {
        uint64_t start = rte_rdtsc();
        uint64_t end = start + o->duration / o->slices * tsc_hz;
        uint64_t slice_copies = 0;

        while (rte_rdtsc() < end) {
            uint64_t t0, t1, bsub, bcpl = 0, outstanding;
            unsigned int i, got = 0;
            bool err = false;

            t0 = rte_rdtsc();
            for (i = 0; i < batch; i++) {
                if (rte_dma_copy(dev, 0, buf_src(b, next), buf_dst(b, next),
                                 size, 0) < 0) {
                    break;
                }
                next++;
            }
            rte_dma_submit(dev, 0);
            t1 = rte_rdtsc();
            bsub = elapsed(t0, t1);
            if (i < batch) {
                outstanding = i;
                errors++;
                drain(dev, &outstanding, &errors);
                failed = true;
                break;
            }

            while (got < batch) {
                uint16_t n;

                t0 = rte_rdtsc();
                n = rte_dma_completed(dev, 0, batch - got, NULL, &err);
                t1 = rte_rdtsc();
                if (n) {
                    bcpl += elapsed(t0, t1);
                } else {
                    empty_cyc += elapsed(t0, t1);
                    empty_calls++;
                }
                got += n;
                if (err) {
                    outstanding = batch - got;
                    drain(dev, &outstanding, &errors);
                    failed = true;
                    break;
                }
            }
            if (failed) {
                break;
            }
            slice_copies += batch;
            sub_sum += bsub;
            cpl_sum += bcpl;
            if (n_samples < MAX_SAMPLES) {
                sub[n_samples] = (double) bsub / batch;
                cpl[n_samples] = (double) bcpl / batch;
                tot[n_samples] = (double) (bsub + bcpl) / batch;
                n_samples++;
            }
        }
        copies += slice_copies;
        slice_mops[slice] = slice_copies
                            / ((double) (rte_rdtsc() - start) / tsc_hz) / 1e6;
    }

    r->ls_submit = trimmed_mean(sub, n_samples, TRIM);
    r->ls_cpl = trimmed_mean(cpl, n_samples, TRIM);
    r->ls_total = trimmed_mean(tot, n_samples, TRIM);
    r->ls_submit_med = median(sub, n_samples);
    r->ls_cpl_med = median(cpl, n_samples);
    r->ls_submit_mean = copies ? (double) sub_sum / copies : 0;
    r->ls_cpl_mean = copies ? (double) cpl_sum / copies : 0;
    r->ls_empty_poll = empty_calls ? (double) empty_cyc / empty_calls : 0;
    r->ls_mops = median(slice_mops, slice);
    r->errors += errors;
    free(sub);
    free(cpl);
    free(tot);
}

/* Pipelined: keep the ring full, collect whatever is complete. */
static void
bench_pipelined(int16_t dev, const struct buffers *b, unsigned int size,
                unsigned int batch, const struct options *o,
                struct result *r)
{
    double slice_mops[1000], slice_cyc[1000];
    uint64_t outstanding = 0, errors = 0;
    unsigned int next = 0, slice;
    bool failed = false;

    for (slice = 0; slice < o->slices && !failed; slice++) {
        uint64_t start = rte_rdtsc();
        uint64_t end = start + o->duration / o->slices * tsc_hz;
        uint64_t cyc = 0, copies = 0;

        while (rte_rdtsc() < end) {
            uint64_t t0, t1;
            bool err = false;
            uint16_t n;

            if (rte_dma_burst_capacity(dev, 0) >= batch) {
                unsigned int i;

                t0 = rte_rdtsc();
                for (i = 0; i < batch; i++) {
                    if (rte_dma_copy(dev, 0, buf_src(b, next),
                                     buf_dst(b, next), size, 0) < 0) {
                        break;
                    }
                    next++;
                }
                rte_dma_submit(dev, 0);
                t1 = rte_rdtsc();
                cyc += elapsed(t0, t1);
                outstanding += i;
                if (i < batch) {
                    errors++;
                    failed = true;
                    break;
                }
            }

            t0 = rte_rdtsc();
            n = rte_dma_completed(dev, 0, RTE_MAX(batch, 64u), NULL, &err);
            t1 = rte_rdtsc();
            if (n) {
                cyc += elapsed(t0, t1);
            }
            outstanding -= n;
            copies += n;
            if (err) {
                failed = true;
                break;
            }
        }
        slice_mops[slice] = copies
                            / ((double) (rte_rdtsc() - start) / tsc_hz) / 1e6;
        slice_cyc[slice] = copies ? (double) cyc / copies : 0;
    }
    drain(dev, &outstanding, &errors);

    r->pl_cyc = median(slice_cyc, slice);
    r->pl_mops_best = max_of(slice_mops, slice);
    r->pl_mops_med = median(slice_mops, slice);
    r->errors += errors;
}

static void
bench_memcpy(const struct buffers *b, unsigned int size,
             const struct options *o, bool use_rte, double *best,
             double *med)
{
    double slice_mops[1000];
    uint64_t copies = 0;
    unsigned int slice;

    for (slice = 0; slice < o->slices; slice++) {
        uint64_t start = rte_rdtsc();
        uint64_t end = start + o->duration / o->slices * tsc_hz;
        uint64_t n = 0, t;

        do {
            unsigned int i;

            for (i = 0; i < 64; i++, copies++, n++) {
                void *dst = (void *) (uintptr_t) buf_dst(b, copies);
                const void *src = (const void *) (uintptr_t) buf_src(b,
                                                                     copies);

                if (use_rte) {
                    rte_memcpy(dst, src, size);
                } else {
                    memcpy(dst, src, size);
                }
            }
            /* Keep the compiler from dropping or merging the copies. */
            __asm__ volatile("" ::: "memory");
            t = rte_rdtsc();
        } while (t < end);
        slice_mops[slice] = n / ((double) (t - start) / tsc_hz) / 1e6;
    }
    *best = max_of(slice_mops, o->slices);
    *med = median(slice_mops, o->slices);
}

/* Cache-line ping-pong between the benchmark thread and a thread on
 * another CPU: the round trip is about two cross-CPU cache misses, the
 * unit that an engine's cost to the submitter is made of. */
struct pingpong {
    volatile uint64_t ping __rte_aligned(2 * RTE_CACHE_LINE_SIZE);
    volatile uint64_t pong __rte_aligned(2 * RTE_CACHE_LINE_SIZE);
    uint64_t rounds;
};

static void *
pingpong_peer(void *pp_)
{
    struct pingpong *pp = pp_;
    uint64_t i;

    for (i = 1; i <= pp->rounds; i++) {
        while (pp->ping != i) {
            continue;
        }
        pp->pong = i;
    }
    return NULL;
}

/* Returns the median round trip in cycles, or 0 if it cannot run. */
static double
pingpong(int cpu)
{
    enum { ROUNDS = 100000 };
    static struct pingpong pp;
    double *rtt;
    pthread_attr_t attr;
    pthread_t thread;
    cpu_set_t cpus;
    double result;
    uint64_t i;

    if (cpu < 0) {
        return 0;
    }
    rtt = xmalloc(ROUNDS * sizeof *rtt);
    pp.ping = pp.pong = 0;
    pp.rounds = ROUNDS;
    CPU_ZERO(&cpus);
    CPU_SET(cpu, &cpus);
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
    if (!rtt || pthread_create(&thread, &attr, pingpong_peer, &pp)) {
        pthread_attr_destroy(&attr);
        free(rtt);
        return 0;
    }
    pthread_attr_destroy(&attr);
    for (i = 1; i <= ROUNDS; i++) {
        uint64_t t0 = rte_rdtsc();

        pp.ping = i;
        while (pp.pong != i) {
            continue;
        }
        rtt[i - 1] = rte_rdtsc() - t0;
    }
    pthread_join(thread, NULL);
    result = median(rtt, ROUNDS);
    free(rtt);
    return result;
}

/* Returns the first CPU that no EAL lcore runs on, or -1. */
static int
first_non_eal_cpu(void)
{
    unsigned int lcore;
    cpu_set_t eal;
    int cpu;

    CPU_ZERO(&eal);
    for (lcore = 0; lcore < RTE_MAX_LCORE; lcore++) {
        if (rte_eal_lcore_role(lcore) != ROLE_OFF) {
            rte_cpuset_t set = rte_lcore_cpuset(lcore);

            CPU_OR(&eal, &eal, &set);
        }
    }
    for (cpu = 0; cpu < CPU_SETSIZE && cpu < sysconf(_SC_NPROCESSORS_ONLN);
         cpu++) {
        if (!CPU_ISSET(cpu, &eal)) {
            return cpu;
        }
    }
    return -1;
}

static int
setup_dev(int16_t dev, unsigned int ring)
{
    struct rte_dma_conf conf = { .nb_vchans = 1 };
    struct rte_dma_vchan_conf vconf = {
        .direction = RTE_DMA_DIR_MEM_TO_MEM,
        .nb_desc = ring,
    };
    struct rte_dma_info info;
    int error;

    error = rte_dma_info_get(dev, &info);
    if (error) {
        return error;
    }
    if (ring < info.min_desc || ring > info.max_desc) {
        fprintf(stderr, "%s: --ring %u outside the device's %u..%u\n",
                info.dev_name, ring, info.min_desc, info.max_desc);
        return -EINVAL;
    }
    error = rte_dma_configure(dev, &conf);
    if (!error) {
        error = rte_dma_vchan_setup(dev, 0, &vconf);
    }
    if (!error) {
        error = rte_dma_start(dev);
    }
    return error;
}

static void
print_dev_table(const char *name, const struct result *res, unsigned int n)
{
    unsigned int i;

    printf("\n%s: submitter cycles per copy (mean over batches without "
           "the 5%% highest and lowest)\n", name);
    printf("  size batch | lockstep: submit  compl  total  Mcopy/s | "
           "pipelined: cyc/copy  Mcopy/s best (median)    GB/s\n");
    for (i = 0; i < n; i++) {
        const struct result *r = &res[i];

        printf("  %4u %5u |          %6.1f %6.1f %6.1f %8.2f |"
               " %18.1f  %7.2f (%7.2f) %7.2f%s\n",
               r->size, r->batch, r->ls_submit, r->ls_cpl, r->ls_total,
               r->ls_mops, r->pl_cyc, r->pl_mops_best, r->pl_mops_med,
               r->pl_mops_best * r->size / 1e3,
               r->errors ? "  ERRORS" : "");
    }
}

static void
write_json(FILE *f, const struct options *o,
           char names[][RTE_DEV_NAME_MAX_LEN], struct result *res[],
           unsigned int n_devs, unsigned int n_res,
           const struct baseline *base, int bench_cpu, double pp_before,
           double pp_after)
{
    unsigned int d, i;

    fprintf(f, "{\n  \"tsc_hz\": %"PRIu64",\n  \"rdtsc_overhead\": %"PRIu64
            ",\n  \"duration_s\": %g,\n  \"slices\": %u,\n"
            "  \"ring\": %u,\n  \"buffers\": %u,\n"
            "  \"bench_cpu\": %d,\n  \"pingpong_cpu\": %d,\n"
            "  \"pingpong_rtt_before\": %.0f,\n"
            "  \"pingpong_rtt_after\": %.0f,\n  \"devices\": [\n", tsc_hz,
            rdtsc_overhead, o->duration, o->slices, o->ring, o->buffers,
            bench_cpu, o->pingpong_cpu, pp_before, pp_after);
    for (d = 0; d < n_devs; d++) {
        fprintf(f, "    {\"name\": \"%s\", \"results\": [\n", names[d]);
        for (i = 0; i < n_res; i++) {
            const struct result *r = &res[d][i];

            fprintf(f, "      {\"size\": %u, \"batch\": %u, "
                    "\"lockstep\": {\"submit_cycles\": %.2f, "
                    "\"completion_cycles\": %.2f, "
                    "\"total_cycles\": %.2f, "
                    "\"submit_cycles_median\": %.2f, "
                    "\"completion_cycles_median\": %.2f, "
                    "\"submit_cycles_mean\": %.2f, "
                    "\"completion_cycles_mean\": %.2f, "
                    "\"empty_poll_cycles\": %.2f, "
                    "\"mcopies_per_s\": %.3f}, "
                    "\"pipelined\": {\"cycles_per_copy\": %.2f, "
                    "\"mcopies_per_s_best\": %.3f, "
                    "\"mcopies_per_s_median\": %.3f, "
                    "\"gbytes_per_s_best\": %.3f}, "
                    "\"errors\": %"PRIu64"}%s\n",
                    r->size, r->batch, r->ls_submit, r->ls_cpl,
                    r->ls_total, r->ls_submit_med, r->ls_cpl_med,
                    r->ls_submit_mean, r->ls_cpl_mean,
                    r->ls_empty_poll, r->ls_mops, r->pl_cyc,
                    r->pl_mops_best, r->pl_mops_med,
                    r->pl_mops_best * r->size / 1e3, r->errors,
                    i + 1 < n_res ? "," : "");
        }
        fprintf(f, "    ]}%s\n", d + 1 < n_devs ? "," : "");
    }
    fprintf(f, "  ],\n  \"baseline\": [\n");
    for (i = 0; i < o->n_sizes; i++) {
        fprintf(f, "    {\"size\": %u, \"memcpy_mcopies_per_s_best\": %.3f, "
                "\"memcpy_mcopies_per_s_median\": %.3f, "
                "\"memcpy_gbytes_per_s_best\": %.3f, "
                "\"rte_memcpy_mcopies_per_s_best\": %.3f, "
                "\"rte_memcpy_mcopies_per_s_median\": %.3f}%s\n",
                base[i].size, base[i].memcpy_best, base[i].memcpy_med,
                base[i].memcpy_best * base[i].size / 1e3,
                base[i].rte_memcpy_best, base[i].rte_memcpy_med,
                i + 1 < o->n_sizes ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

static void
remove_dir(const char *dir)
{
    struct dirent *de;
    DIR *d = opendir(dir);

    if (!d) {
        return;
    }
    while ((de = readdir(d))) {
        char path[1024];

        if (de->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    closedir(d);
    rmdir(dir);
}

int
main(int argc, char *argv[])
{
    struct options o = {
        .sizes = { 64, 1518, 4096 },
        .n_sizes = 3,
        .batches = { 1, 8, 32 },
        .n_batches = 3,
        .duration = 1.0,
        .slices = 10,
        .ring = 1024,
        .buffers = 256,
        .pingpong_cpu = -1,
    };
    static char names[MAX_DEVS][RTE_DEV_NAME_MAX_LEN];
    struct result *res[MAX_DEVS];
    struct baseline base[MAX_LIST];
    const char *prog = argv[0];
    char runtime_dir[512] = "";
    unsigned int n_devs = 0, n_res, i, j, max_size = 0;
    double pp_before, pp_after;
    struct buffers b;
    int16_t dev;
    int sep, rc = 0;
    int bench_cpu;

    /* Options after "--" are ours: parse them before starting EAL, so that
     * bad options and --help leave no EAL state behind. */
    for (sep = 1; sep < argc && strcmp(argv[sep], "--"); sep++) {
        if (!strcmp(argv[sep], "-h") || !strcmp(argv[sep], "--help")) {
            usage(prog);
            return 0;
        }
    }
    if (sep < argc) {
        char **app_argv = xcalloc(argc - sep + 1, sizeof *app_argv);

        app_argv[0] = argv[0];
        for (i = sep + 1; i < (unsigned int) argc; i++) {
            app_argv[i - sep] = argv[i];
        }
        parse_options(argc - sep, app_argv, prog, &o);
        free(app_argv);
    }

    dma_swcopy_register();
    if (rte_eal_init(sep, argv) < 0) {
        fprintf(stderr, "%s: EAL initialization failed (bad EAL options? "
                "see --help)\n", prog);
        return 2;
    }
    if (o.rm_runtime_dir) {
        snprintf(runtime_dir, sizeof runtime_dir, "%s",
                 rte_eal_get_runtime_dir());
    }

    tsc_hz = rte_get_tsc_hz();
    measure_rdtsc_overhead();
    for (i = 0; i < o.n_sizes; i++) {
        max_size = RTE_MAX(max_size, o.sizes[i]);
    }
    b.n = o.buffers;
    b.stride = RTE_ALIGN_CEIL(max_size, 64);
    b.src = rte_malloc("bench_src", b.n * b.stride, 4096);
    b.dst = rte_malloc("bench_dst", b.n * b.stride, 4096);
    if (!b.src || !b.dst) {
        fprintf(stderr, "%s: cannot allocate 2 x %zu bytes of buffers\n",
                prog, b.n * b.stride);
        rc = 1;
        goto out;
    }
    memset(b.src, 0x5a, b.n * b.stride);
    memset(b.dst, 0, b.n * b.stride);

    bench_cpu = sched_getcpu();
    if (o.pingpong_cpu < 0) {
        o.pingpong_cpu = first_non_eal_cpu();
    }
    pp_before = pingpong(o.pingpong_cpu);
    printf("ovs-dma-bench: benchmark thread on CPU %d, TSC %.3f GHz, rdtsc "
           "overhead %"PRIu64" cycles (subtracted), %.2f s per measurement "
           "in %u slices, ring %u, %u buffers %zu bytes apart\n",
           bench_cpu, tsc_hz / 1e9, rdtsc_overhead, o.duration, o.slices,
           o.ring, b.n, b.stride);
    if (pp_before) {
        printf("cache-line ping-pong CPU %d <-> CPU %d: %.0f cycles round "
               "trip (median)\n", bench_cpu, o.pingpong_cpu, pp_before);
    }

    n_res = o.n_sizes * o.n_batches;
    RTE_DMA_FOREACH_DEV (dev) {
        struct rte_dma_info info;
        struct result *r;
        int error;

        if (n_devs >= MAX_DEVS) {
            break;
        }
        if (rte_dma_info_get(dev, &info)) {
            continue;
        }
        snprintf(names[n_devs], sizeof names[n_devs], "%s", info.dev_name);
        error = setup_dev(dev, o.ring);
        if (error) {
            fprintf(stderr, "%s: cannot set up %s (%s)\n", prog,
                    names[n_devs], ovs_strerror(-error));
            rc = 1;
            continue;
        }

        r = res[n_devs] = xcalloc(n_res, sizeof *r);
        for (i = 0; i < o.n_sizes; i++) {
            for (j = 0; j < o.n_batches; j++) {
                struct result *x = &r[i * o.n_batches + j];

                x->size = o.sizes[i];
                x->batch = RTE_MIN(o.batches[j], o.ring);
                bench_lockstep(dev, &b, x->size, x->batch, &o, x);
                bench_pipelined(dev, &b, x->size, x->batch, &o, x);
                if (x->errors) {
                    rc = 1;
                }
            }
        }
        rte_dma_stop(dev);
        print_dev_table(names[n_devs], r, n_res);
        n_devs++;
    }
    if (!n_devs) {
        fprintf(stderr, "%s: no dmadev found (give --vdev=dma_swcopy0 or "
                "--vdev=dma_skeleton0 to EAL)\n", prog);
        rc = 1;
    }

    printf("\nsingle-core baseline on the benchmark thread (same "
           "buffers), Mcopy/s best (median)\n");
    printf("  size |   memcpy: Mcopy/s           GB/s  cyc/copy | "
           "rte_memcpy: Mcopy/s\n");
    for (i = 0; i < o.n_sizes; i++) {
        struct baseline *x = &base[i];

        x->size = o.sizes[i];
        bench_memcpy(&b, x->size, &o, false, &x->memcpy_best,
                     &x->memcpy_med);
        bench_memcpy(&b, x->size, &o, true, &x->rte_memcpy_best,
                     &x->rte_memcpy_med);
        printf("  %4u |  %7.2f (%7.2f) %7.2f %9.1f |     %7.2f (%7.2f)\n",
               x->size, x->memcpy_best, x->memcpy_med,
               x->memcpy_best * x->size / 1e3, tsc_hz / 1e6 / x->memcpy_best,
               x->rte_memcpy_best, x->rte_memcpy_med);
    }

    if (n_devs) {
        printf("\nengine throughput (pipelined, largest batch) vs memcpy, "
               "best slices (median slices)\n");
        for (i = 0; i < n_devs; i++) {
            for (j = 0; j < o.n_sizes; j++) {
                const struct result *x = &res[i][j * o.n_batches
                                                  + o.n_batches - 1];

                printf("  %-16s %4u B batch %2u: %6.2f Mcopy/s %6.2f GB/s "
                       "= %5.1f%% (%5.1f%%) of memcpy\n", names[i], x->size,
                       x->batch, x->pl_mops_best,
                       x->pl_mops_best * x->size / 1e3,
                       100.0 * x->pl_mops_best / base[j].memcpy_best,
                       100.0 * x->pl_mops_med / base[j].memcpy_med);
            }
        }
    }

    pp_after = pingpong(o.pingpong_cpu);
    if (pp_after) {
        printf("\ncache-line ping-pong CPU %d <-> CPU %d after the run: %.0f "
               "cycles round trip (median)\n", bench_cpu, o.pingpong_cpu,
               pp_after);
    }

    if (o.json) {
        FILE *f = fopen(o.json, "w");

        if (!f) {
            fprintf(stderr, "%s: %s: %s\n", prog, o.json, ovs_strerror(errno));
            rc = 1;
        } else {
            write_json(f, &o, names, res, n_devs, n_res, base, bench_cpu,
                       pp_before, pp_after);
            fclose(f);
        }
    }

out:
    /* Every device is stopped by now. */
    RTE_DMA_FOREACH_DEV (dev) {
        rte_dma_close(dev);
    }
    rte_free(b.src);
    rte_free(b.dst);
    for (i = 0; i < n_devs; i++) {
        free(res[i]);
    }
    rte_eal_cleanup();
    if (runtime_dir[0]) {
        remove_dir(runtime_dir);
    }
    return rc;
}
