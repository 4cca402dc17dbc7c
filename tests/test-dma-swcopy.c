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

/* Functional test of the dma_swcopy dmadev driver (lib/dma-swcopy.c),
 * through DPDK's public dmadev API only.
 *
 * Usage: test-dma-swcopy [EAL arguments]
 *
 * Without arguments it runs EAL with --no-huge, IOVA as VA, a private
 * --file-prefix (removed at exit) and two instances, dma_swcopy0 and
 * dma_swcopy1.  With arguments they are passed to EAL as they are and
 * the test uses the first two dma_swcopy devices it finds (the second is
 * optional).  DMA_SWCOPY_TEST_SEED=N fixes the random seed.
 *
 * Prints one line per check and ends with "N passed, M failed"; exits 1
 * if any check failed. */

#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_dmadev.h>
#include <rte_eal.h>

#include "dma-swcopy.h"

#define MAX_COPY (64 * 1024)    /* Largest random copy. */
#define GUARD 64                /* Bytes around each buffer, checked. */
#define SLOT_SIZE (MAX_COPY + 2 * GUARD)
#define WAIT_NS 5000000000LL    /* Longest wait for completions. */

static int n_passed;
static int n_failed;
static uint64_t rng_state;

static void check(bool ok, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void
check(bool ok, const char *format, ...)
{
    va_list args;

    printf("%s - ", ok ? "ok  " : "FAIL");
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    putchar('\n');
    fflush(stdout);
    if (ok) {
        n_passed++;
    } else {
        n_failed++;
    }
}

static uint64_t
rnd(void)
{
    /* xorshift64*. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static uint32_t
rnd_range(uint32_t lo, uint32_t hi)
{
    return lo + rnd() % (hi - lo + 1);
}

static void
fill_random(uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t v = rnd();

        memcpy(p, &v, 8);
        p += 8;
        n -= 8;
    }
    while (n--) {
        *p++ = rnd();
    }
}

static long long
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static rte_iova_t
iova(const void *p)
{
    /* dma_swcopy runs with IOVA as VA. */
    return (rte_iova_t) (uintptr_t) p;
}

/* Collects 'n' successful completions with rte_dma_completed(), up to
 * WAIT_NS.  Returns how many it got; '*last' is the last index seen and
 * '*error' whether an error was reported. */
static unsigned int
wait_completed(int16_t dev, unsigned int n, uint16_t *last, bool *error)
{
    long long deadline = now_ns() + WAIT_NS;
    unsigned int got = 0;

    *error = false;
    while (got < n && now_ns() < deadline) {
        uint16_t want = RTE_MIN(n - got, (unsigned int) UINT16_MAX);
        bool err = false;
        uint16_t k;

        k = rte_dma_completed(dev, 0, want, last, &err);
        got += k;
        if (err) {
            *error = true;
            break;
        }
    }
    return got;
}

/* Waits until 'n' ops (failed or not) have completed, with
 * rte_dma_completed_status(). */
static unsigned int
wait_completed_status(int16_t dev, unsigned int n, uint16_t *last,
                      enum rte_dma_status_code *status)
{
    long long deadline = now_ns() + WAIT_NS;
    unsigned int got = 0;

    while (got < n && now_ns() < deadline) {
        got += rte_dma_completed_status(dev, 0, n - got, last,
                                        &status[got]);
    }
    return got;
}

static int
setup_dev(int16_t dev, uint16_t nb_desc)
{
    struct rte_dma_conf conf = { .nb_vchans = 1 };
    struct rte_dma_vchan_conf vconf = {
        .direction = RTE_DMA_DIR_MEM_TO_MEM,
        .nb_desc = nb_desc,
    };
    int error;

    error = rte_dma_configure(dev, &conf);
    if (!error) {
        error = rte_dma_vchan_setup(dev, 0, &vconf);
    }
    if (!error) {
        error = rte_dma_start(dev);
    }
    return error;
}

/* Test buffers: 'n' source and destination slots. */
struct slots {
    uint8_t *src;
    uint8_t *dst;
    unsigned int n;
};

static bool
slots_init(struct slots *s, unsigned int n)
{
    s->n = n;
    s->src = malloc((size_t) n * SLOT_SIZE);
    s->dst = malloc((size_t) n * SLOT_SIZE);
    return s->src && s->dst;
}

static void
slots_free(struct slots *s)
{
    free(s->src);
    free(s->dst);
}

/* An op of the random test: copy 'len' bytes from offset 'soff' of a
 * source slot to offset 'doff' of the destination slot. */
struct op {
    unsigned int slot;
    uint32_t soff;
    uint32_t doff;
    uint32_t len;
};

static void
op_prepare(struct slots *s, struct op *op, unsigned int slot,
           uint32_t max_len)
{
    uint8_t *src = s->src + (size_t) slot * SLOT_SIZE;
    uint8_t *dst = s->dst + (size_t) slot * SLOT_SIZE;

    op->slot = slot;
    op->len = rnd_range(1, max_len);
    op->soff = GUARD + rnd_range(0, GUARD - 1);
    op->doff = GUARD + rnd_range(0, GUARD - 1);
    op->soff = RTE_MIN(op->soff, SLOT_SIZE - op->len);
    op->doff = RTE_MIN(op->doff, SLOT_SIZE - op->len);
    fill_random(src + op->soff, op->len);
    memset(dst, 0xa5, SLOT_SIZE);
}

/* Returns true if the op's copy is exact and touched nothing else. */
static bool
op_verify(const struct slots *s, const struct op *op)
{
    const uint8_t *src = s->src + (size_t) op->slot * SLOT_SIZE;
    const uint8_t *dst = s->dst + (size_t) op->slot * SLOT_SIZE;
    size_t i;

    if (memcmp(src + op->soff, dst + op->doff, op->len)) {
        return false;
    }
    for (i = 0; i < op->doff; i++) {
        if (dst[i] != 0xa5) {
            return false;
        }
    }
    for (i = op->doff + op->len; i < SLOT_SIZE; i++) {
        if (dst[i] != 0xa5) {
            return false;
        }
    }
    return true;
}

static int
op_copy(int16_t dev, const struct slots *s, const struct op *op,
        uint64_t flags)
{
    const uint8_t *src = s->src + (size_t) op->slot * SLOT_SIZE;
    uint8_t *dst = s->dst + (size_t) op->slot * SLOT_SIZE;

    return rte_dma_copy(dev, 0, iova(src + op->soff), iova(dst + op->doff),
                        op->len, flags);
}

static void
test_info(int16_t dev)
{
    struct rte_dma_info info;
    int error = rte_dma_info_get(dev, &info);

    check(!error, "info_get returns 0 (%d)", error);
    check(info.dev_capa & RTE_DMA_CAPA_MEM_TO_MEM
          && info.dev_capa & RTE_DMA_CAPA_SVA
          && info.dev_capa & RTE_DMA_CAPA_OPS_COPY
          && !(info.dev_capa & RTE_DMA_CAPA_SILENT),
          "capabilities are mem2mem, sva, copy (0x%"PRIx64")",
          info.dev_capa);
    check(info.max_vchans == 1 && info.min_desc == DMA_SWCOPY_MIN_DESC
          && info.max_desc == DMA_SWCOPY_MAX_DESC,
          "max_vchans 1, desc %u..%u", info.min_desc, info.max_desc);
    check(info.dev_name && !strncmp(info.dev_name, "dma_swcopy", 10),
          "device name %s", info.dev_name ? info.dev_name : "(null)");
}

static void
test_invalid_config(int16_t dev)
{
    struct rte_dma_conf conf = { .nb_vchans = 2 };
    struct rte_dma_vchan_conf vconf = {
        .direction = RTE_DMA_DIR_MEM_TO_MEM,
    };
    static const uint16_t bad_desc[] = { 0, 3, 16, 48, 16384, 65535 };
    enum rte_dma_status_code st;
    bool err;
    uint16_t last;
    size_t i;
    int r;

    r = rte_dma_start(dev);
    check(r < 0, "start before configure refused (%d)", r);
    r = rte_dma_configure(dev, &conf);
    check(r < 0, "configure with nb_vchans 2 refused (%d)", r);
    conf.nb_vchans = 0;
    r = rte_dma_configure(dev, &conf);
    check(r < 0, "configure with nb_vchans 0 refused (%d)", r);
    conf.nb_vchans = 1;
    conf.enable_silent = true;
    r = rte_dma_configure(dev, &conf);
    check(r < 0, "configure with silent mode refused (%d)", r);
    conf.enable_silent = false;
    r = rte_dma_configure(dev, &conf);
    check(r == 0, "configure with nb_vchans 1 accepted (%d)", r);

    r = rte_dma_start(dev);
    check(r < 0, "start before vchan setup refused (%d)", r);

    for (i = 0; i < RTE_DIM(bad_desc); i++) {
        vconf.nb_desc = bad_desc[i];
        r = rte_dma_vchan_setup(dev, 0, &vconf);
        check(r < 0, "vchan setup with nb_desc %u refused (%d)",
              bad_desc[i], r);
    }
    vconf.nb_desc = 64;
    vconf.direction = RTE_DMA_DIR_MEM_TO_DEV;
    vconf.dst_port.port_type = RTE_DMA_PORT_PCIE;
    r = rte_dma_vchan_setup(dev, 0, &vconf);
    check(r < 0, "vchan setup MEM_TO_DEV refused (%d)", r);
    vconf.direction = RTE_DMA_DIR_DEV_TO_MEM;
    vconf.dst_port.port_type = RTE_DMA_PORT_NONE;
    vconf.src_port.port_type = RTE_DMA_PORT_PCIE;
    r = rte_dma_vchan_setup(dev, 0, &vconf);
    check(r < 0, "vchan setup DEV_TO_MEM refused (%d)", r);
    vconf.direction = RTE_DMA_DIR_MEM_TO_MEM;
    vconf.src_port.port_type = RTE_DMA_PORT_NONE;
    r = rte_dma_vchan_setup(dev, 1, &vconf);
    check(r < 0, "vchan setup of vchan 1 refused (%d)", r);
    r = rte_dma_vchan_setup(dev, 0, &vconf);
    check(r == 0, "vchan setup nb_desc 64 accepted (%d)", r);

    /* Configured and set up, but not started. */
    {
        static uint8_t a[64], b[64];

        r = rte_dma_copy(dev, 0, iova(a), iova(b), sizeof a,
                         RTE_DMA_OP_FLAG_SUBMIT);
        check(r < 0, "copy on a device not started refused (%d)", r);
        r = rte_dma_submit(dev, 0);
        check(r < 0, "submit on a device not started refused (%d)", r);
        check(rte_dma_burst_capacity(dev, 0) == 0,
              "burst capacity of a device not started is 0");
        check(rte_dma_completed(dev, 0, 32, &last, &err) == 0 && !err,
              "completed on a device not started returns 0");
        check(rte_dma_completed_status(dev, 0, 1, &last, &st) == 0,
              "completed_status on a device not started returns 0");
    }
}

/* Single copies, with the submit flag and with an explicit submit. */
static void
test_single(int16_t dev, struct slots *s)
{
    enum rte_dma_status_code st;
    struct op op;
    uint16_t last = 0;
    unsigned int n;
    bool err;
    int idx;

    op_prepare(s, &op, 0, 1500);
    idx = op_copy(dev, s, &op, RTE_DMA_OP_FLAG_SUBMIT);
    check(idx == 0, "first copy after start has ring_idx 0 (%d)", idx);
    n = wait_completed(dev, 1, &last, &err);
    check(n == 1 && !err && last == 0,
          "single copy with SUBMIT flag completes (last_idx %u)", last);
    check(op_verify(s, &op), "single copy data correct (%u bytes)", op.len);
    last = 0xbeef;
    n = rte_dma_completed(dev, 0, 8, &last, &err);
    check(n == 0 && !err && last == 0,
          "completed with nothing new returns 0 and last_idx 0 (%u)",
          last);
    last = 0xbeef;
    check(rte_dma_completed_status(dev, 0, 1, &last, &st) == 0
          && last == 0,
          "completed_status with nothing new returns 0 and last_idx 0");

    op_prepare(s, &op, 1, 64);
    idx = op_copy(dev, s, &op, 0);
    check(idx == 1, "second copy has ring_idx 1 (%d)", idx);
    usleep(20000);
    check(rte_dma_completed(dev, 0, 8, &last, &err) == 0,
          "copy without submit is not executed");
    check(rte_dma_submit(dev, 0) == 0, "explicit submit returns 0");
    n = wait_completed(dev, 1, &last, &err);
    check(n == 1 && last == 1,
          "copy completes after explicit submit (last_idx %u)", last);
    check(op_verify(s, &op), "explicit-submit copy data correct");
}

/* Many copies of random sizes (1 B .. 64 KiB), random offsets and random
 * contents, in random batches, verified byte for byte. */
static void
test_random(int16_t dev, struct slots *s, unsigned int total,
            uint16_t nb_desc, bool use_status)
{
    struct op *ops = calloc(nb_desc, sizeof *ops);
    enum rte_dma_status_code *st = calloc(nb_desc, sizeof *st);
    unsigned int enq = 0, done = 0, bad_data = 0, bad_idx = 0, bad_st = 0;
    unsigned int flag_submits = 0, explicit_submits = 0;
    long long deadline = now_ns() + 60 * 1000000000LL;
    uint16_t base = 0, expect_idx = 0;
    int enq_errors = 0;

    while (done < total && now_ns() < deadline) {
        unsigned int cap = rte_dma_burst_capacity(dev, 0);
        unsigned int batch = rnd_range(1, 48);
        uint16_t last = 0;
        unsigned int i, n;

        batch = RTE_MIN(batch, cap);
        batch = RTE_MIN(batch, total - enq);
        for (i = 0; i < batch; i++) {
            struct op *op = &ops[(enq + i) % nb_desc];
            bool submit_flag = i == batch - 1 && (rnd() & 1);
            int idx;

            op_prepare(s, op, (enq + i) % nb_desc, MAX_COPY);
            idx = op_copy(dev, s, op,
                          submit_flag ? RTE_DMA_OP_FLAG_SUBMIT : 0);
            if (!enq && !i && idx >= 0) {
                /* ring_idx continues from earlier tests. */
                base = expect_idx = idx;
            }
            if (idx != (uint16_t) (base + enq + i)) {
                enq_errors++;
            }
            if (submit_flag) {
                flag_submits++;
            } else if (i == batch - 1) {
                rte_dma_submit(dev, 0);
                explicit_submits++;
            }
        }
        enq += batch;

        if (use_status) {
            n = rte_dma_completed_status(dev, 0, rnd_range(1, nb_desc),
                                         &last, st);
            for (i = 0; i < n; i++) {
                bad_st += st[i] != RTE_DMA_STATUS_SUCCESSFUL;
            }
        } else {
            bool err = false;

            n = rte_dma_completed(dev, 0, rnd_range(1, nb_desc), &last,
                                  &err);
            bad_st += err;
        }
        for (i = 0; i < n; i++) {
            const struct op *op = &ops[(done + i) % nb_desc];

            bad_data += !op_verify(s, op);
        }
        if (n) {
            expect_idx += n;
            bad_idx += last != (uint16_t) (expect_idx - 1);
        }
        done += n;
    }
    check(done == total && !enq_errors,
          "random test (%s, ring %u): %u copies enqueued and completed "
          "(%d bad ring_idx at enqueue)",
          use_status ? "completed_status" : "completed", nb_desc, done,
          enq_errors);
    check(!bad_data, "random test: every byte verified, %u bad copies",
          bad_data);
    check(!bad_idx && !bad_st,
          "random test: last_idx consistent (%u bad), no errors (%u)",
          bad_idx, bad_st);
    check(flag_submits && explicit_submits,
          "random test used both submit styles (%u flag, %u explicit)",
          flag_submits, explicit_submits);
    free(ops);
    free(st);
}

/* Ring wrap-around, including the wrap of the uint16_t ring_idx: many
 * times the ring size of small copies. */
static void
test_wrap(int16_t dev, uint16_t nb_desc)
{
    const unsigned int total = 3 * 65536 + 1234;
    uint8_t *src = malloc((size_t) nb_desc * 64);
    uint8_t *dst = malloc((size_t) nb_desc * 64);
    unsigned int enq = 0, done = 0, bad = 0, bad_idx = 0;
    long long deadline = now_ns() + 60 * 1000000000LL;
    uint16_t base = 0, last;

    while (done < total && now_ns() < deadline) {
        unsigned int cap = rte_dma_burst_capacity(dev, 0);
        unsigned int i, n;
        bool err;

        cap = RTE_MIN(cap, total - enq);
        for (i = 0; i < cap; i++) {
            unsigned int slot = (enq + i) % nb_desc;
            uint32_t v = enq + i;
            int idx;

            memcpy(src + slot * 64, &v, sizeof v);
            idx = rte_dma_copy(dev, 0, iova(src + slot * 64),
                               iova(dst + slot * 64), 64, 0);
            if (!v && idx >= 0) {
                base = idx;     /* ring_idx continues from earlier tests. */
            }
            bad_idx += idx != (uint16_t) (base + v);
        }
        enq += cap;
        rte_dma_submit(dev, 0);

        n = rte_dma_completed(dev, 0, nb_desc, &last, &err);
        for (i = 0; i < n; i++) {
            unsigned int slot = (done + i) % nb_desc;
            uint32_t v;

            memcpy(&v, dst + slot * 64, sizeof v);
            bad += v != done + i;
        }
        done += n;
        if (n && last != (uint16_t) (base + done - 1)) {
            bad_idx++;
        }
    }
    check(done == total && !bad && !bad_idx,
          "wrap-around: %u copies through a %u-entry ring (%.0f times "
          "the ring, %u ring_idx wraps), %u bad data, %u bad idx",
          done, nb_desc, (double) done / nb_desc, done / 65536, bad,
          bad_idx);
    free(src);
    free(dst);
}

/* Ring full: capacity falls by one per copy, then -ENOSPC. */
static void
test_full(int16_t dev, uint16_t nb_desc)
{
    static uint8_t src[64], dst[64];
    uint16_t cap0 = rte_dma_burst_capacity(dev, 0);
    unsigned int i, dec_ok = 0;
    uint16_t last;
    bool err;
    int r;

    check(cap0 == nb_desc, "empty ring: burst capacity %u (ring %u)", cap0,
          nb_desc);
    for (i = 0; i < nb_desc; i++) {
        r = rte_dma_copy(dev, 0, iova(src), iova(dst), sizeof src, 0);
        if (r >= 0 && rte_dma_burst_capacity(dev, 0) == cap0 - i - 1) {
            dec_ok++;
        }
    }
    check(dec_ok == nb_desc, "capacity falls by one per copy (%u of %u)",
          dec_ok, nb_desc);
    check(rte_dma_burst_capacity(dev, 0) == 0, "full ring: capacity 0");
    r = rte_dma_copy(dev, 0, iova(src), iova(dst), sizeof src, 0);
    check(r == -ENOSPC, "copy into a full ring returns -ENOSPC (%d)", r);
    rte_dma_submit(dev, 0);
    r = rte_dma_copy(dev, 0, iova(src), iova(dst), sizeof src, 0);
    check(r == -ENOSPC, "still -ENOSPC until completions are collected "
          "(%d)", r);
    check(wait_completed(dev, nb_desc, &last, &err) == nb_desc && !err,
          "full ring completes");
    check(rte_dma_burst_capacity(dev, 0) == nb_desc,
          "capacity back to %u after collecting", nb_desc);
}

/* Invalid lengths and NULL addresses are reported as failed ops. */
static void
test_errors(int16_t dev)
{
    enum { N = 16 };
    static uint8_t src[N][256], dst[N][256];
    enum rte_dma_status_code st[N];
    struct rte_dma_stats before, after;
    enum rte_dma_vchan_status vst;
    uint16_t first_idx = 0, last = 0;
    unsigned int i, got, count, count2;
    bool err = false;

    rte_dma_stats_get(dev, 0, &before);
    memset(dst, 0, sizeof dst);
    for (i = 0; i < N; i++) {
        uint32_t len = sizeof src[i];
        rte_iova_t s = iova(src[i]);
        int idx;

        memset(src[i], i + 1, sizeof src[i]);
        if (i == 5) {
            len = 0;
        } else if (i == 9) {
            len = DMA_SWCOPY_MAX_LEN + 1;
        } else if (i == 12) {
            s = 0;
        }
        idx = rte_dma_copy(dev, 0, s, iova(dst[i]), len, 0);
        if (i == 0) {
            first_idx = idx;
        }
    }
    rte_dma_submit(dev, 0);
    usleep(20000);

    count = wait_completed(dev, N, &last, &err);
    check(count == 5 && err && last == (uint16_t) (first_idx + 4),
          "completed stops before the zero-length op: %u ok, has_error %d,"
          " last_idx %u", count, err, (uint16_t) (last - first_idx));
    for (i = 0; i < 3; i++) {
        err = false;
        if (rte_dma_completed(dev, 0, N, &last, &err) != 0 || !err
            || last != (uint16_t) (first_idx + 4)) {
            break;
        }
    }
    check(i == 3, "completed keeps returning 0 with has_error until the "
          "failed op is collected");
    check(rte_dma_vchan_status(dev, 0, &vst) == 0
          && vst == RTE_DMA_VCHAN_HALTED_ERROR,
          "vchan halted on error while a failed op is not collected");
    got = rte_dma_completed_status(dev, 0, 1, &last, st);
    check(got == 1 && st[0] == RTE_DMA_STATUS_INVALID_LENGTH
          && last == (uint16_t) (first_idx + 5),
          "completed_status reports the zero-length op as "
          "INVALID_LENGTH (status %d)", st[0]);
    count2 = wait_completed(dev, N, &last, &err);
    check(count2 == 3 && err,
          "completed returns the 3 ops up to the oversized op (%u)",
          count2);
    got = wait_completed_status(dev, N - 5 - 1 - 3, &last, st);
    check(got == 7 && st[0] == RTE_DMA_STATUS_INVALID_LENGTH
          && st[3] == RTE_DMA_STATUS_INVALID_SRC_ADDR
          && st[1] == RTE_DMA_STATUS_SUCCESSFUL
          && st[6] == RTE_DMA_STATUS_SUCCESSFUL
          && last == (uint16_t) (first_idx + N - 1),
          "completed_status returns the remaining 7 ops: oversized "
          "INVALID_LENGTH, NULL source INVALID_SRC_ADDR, others "
          "successful");
    for (i = 0; i < N; i++) {
        bool copied = dst[i][0] == i + 1 && dst[i][255] == i + 1;
        bool failed = i == 5 || i == 9 || i == 12;

        if (copied == failed) {
            break;
        }
    }
    check(i == N, "failed ops copied nothing, the others copied");
    rte_dma_stats_get(dev, 0, &after);
    check(after.submitted - before.submitted == N
          && after.completed - before.completed == N
          && after.errors - before.errors == 3,
          "stats: +%"PRIu64" submitted, +%"PRIu64" completed, +%"PRIu64
          " errors (want 16, 16, 3)", after.submitted - before.submitted,
          after.completed - before.completed,
          after.errors - before.errors);
    err = false;
    check(rte_dma_completed(dev, 0, N, &last, &err) == 0 && !err,
          "no error reported once all failures were collected");
    check(rte_dma_vchan_status(dev, 0, &vst) == 0
          && vst == RTE_DMA_VCHAN_IDLE,
          "vchan idle once all failures were collected");
}

/* Stop with copies pending: stop waits until the worker has executed
 * every submitted copy; completions can be collected while stopped; copies
 * that were never submitted are discarded; start resets ring_idx. */
static void
test_stop_restart(int16_t dev, struct slots *s)
{
    enum { N = 48 };
    struct op ops[N];
    struct op unsub;
    struct rte_dma_stats before, after;
    enum rte_dma_vchan_status vst;
    unsigned int i, ok = 0;
    uint16_t last = 0;
    bool err;
    int r, idx;

    rte_dma_stats_get(dev, 0, &before);
    for (i = 0; i < N; i++) {
        op_prepare(s, &ops[i], i, MAX_COPY);
        ops[i].len = MAX_COPY;
        ops[i].soff = ops[i].doff = GUARD;
        fill_random(s->src + (size_t) i * SLOT_SIZE + GUARD, MAX_COPY);
        op_copy(dev, s, &ops[i], 0);
    }
    rte_dma_submit(dev, 0);
    op_prepare(s, &unsub, N, 1000);
    op_copy(dev, s, &unsub, 0);      /* Never submitted. */

    r = rte_dma_stop(dev);
    check(r == 0, "stop with %d x 64 KiB copies in flight returns 0", N);
    for (i = 0; i < N; i++) {
        ok += op_verify(s, &ops[i]);
    }
    check(ok == N, "stop waited for all %d submitted copies (%u done)", N,
          ok);
    check(rte_dma_vchan_status(dev, 0, &vst) == 0
          && vst == RTE_DMA_VCHAN_IDLE, "vchan idle after stop");
    r = rte_dma_copy(dev, 0, iova(s->src), iova(s->dst), 64,
                     RTE_DMA_OP_FLAG_SUBMIT);
    check(r < 0, "copy on a stopped device refused (%d)", r);
    check(rte_dma_burst_capacity(dev, 0) == 0,
          "burst capacity of a stopped device is 0");
    check(rte_dma_completed(dev, 0, 64, &last, &err) == N && !err,
          "the %d completions can be collected after stop", N);
    usleep(20000);
    check(!memcmp(s->dst + (size_t) N * SLOT_SIZE,
                  s->dst + (size_t) N * SLOT_SIZE + 1, SLOT_SIZE - 1)
          && s->dst[(size_t) N * SLOT_SIZE] == 0xa5,
          "copy enqueued without submit was discarded by stop");
    rte_dma_stats_get(dev, 0, &after);
    check(after.submitted - before.submitted == N
          && after.completed - before.completed == N,
          "stats count the %d submitted copies only", N);

    r = rte_dma_start(dev);
    check(r == 0, "restart after stop (%d)", r);
    op_prepare(s, &ops[0], 0, 4000);
    idx = op_copy(dev, s, &ops[0], RTE_DMA_OP_FLAG_SUBMIT);
    check(idx == 0, "ring_idx restarts at 0 after stop/start (%d)", idx);
    check(wait_completed(dev, 1, &last, &err) == 1 && last == 0
          && op_verify(s, &ops[0]), "copy after restart works");
}

/* After a long idle period the worker parks; the next copy must wake it
 * promptly. */
static void
test_idle_wakeup(int16_t dev, struct slots *s)
{
    char *dump = NULL;
    size_t dump_len = 0;
    unsigned long long parks = 0;
    long long t0, dt;
    struct op op;
    uint16_t last;
    bool err;
    FILE *f;
    char *p;

    usleep(200000);
    op_prepare(s, &op, 0, 1500);
    t0 = now_ns();
    op_copy(dev, s, &op, RTE_DMA_OP_FLAG_SUBMIT);
    check(wait_completed(dev, 1, &last, &err) == 1 && op_verify(s, &op),
          "copy after 200 ms idle completes");
    dt = now_ns() - t0;
    check(dt < 100 * 1000000LL, "... within %.1f us (limit 100 ms)",
          dt / 1e3);

    f = open_memstream(&dump, &dump_len);
    check(f && rte_dma_dump(dev, f) == 0, "rte_dma_dump returns 0");
    if (f) {
        fclose(f);
    }
    p = dump ? strstr(dump, "parks ") : NULL;
    if (p) {
        parks = strtoull(p + 6, NULL, 10);
    }
    check(parks > 0, "worker parked while idle (%llu parks)", parks);
    free(dump);
}

#define TASK_DIR "/proc/self/task"

/* Returns the CPU time (user + system, in clock ticks) of this process's
 * thread named 'name', or -1 if there is none. */
static long long
thread_cpu_ticks(const char *name)
{
    struct dirent *de;
    long long ticks = -1;
    DIR *d;

    d = opendir(TASK_DIR);
    while (d && (de = readdir(d)) && ticks < 0) {
        char path[300], buf[1024];
        unsigned long long ut, st;
        FILE *f;
        char *p;

        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        f = fopen(path, "r");
        if (!f) {
            continue;
        }
        if (fgets(buf, sizeof buf, f)) {
            /* "tid (comm) state ..." with utime and stime the 14th and
             * 15th fields. */
            p = strrchr(buf, ')');
            if (p && !strncmp(strchr(buf, '(') + 1, name, strlen(name))
                && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                          "%*u %llu %llu", &ut, &st) == 2) {
                ticks = ut + st;
            }
        }
        fclose(f);
    }
    if (d) {
        closedir(d);
    }
    return ticks;
}

/* A started but idle engine must cost (almost) no CPU. */
static void
test_idle_cost(int16_t dev)
{
    struct rte_dma_info info;
    long long t0, t1;
    long hz = sysconf(_SC_CLK_TCK);
    char name[16];

    rte_dma_info_get(dev, &info);
    snprintf(name, sizeof name, "%.15s", info.dev_name);
    usleep(100000);
    t0 = thread_cpu_ticks(name);
    sleep(2);
    t1 = thread_cpu_ticks(name);
    check(t0 >= 0 && t1 >= 0 && (t1 - t0) * 100.0 / (2 * hz) < 2.0,
          "idle worker thread %s used %.1f%% of a CPU over 2 s (limit 2%%)",
          name, t0 >= 0 ? (t1 - t0) * 100.0 / (2 * hz) : -1.0);
}

static void
test_reconfigure(int16_t dev, struct slots *s)
{
    struct rte_dma_vchan_conf vconf = {
        .direction = RTE_DMA_DIR_MEM_TO_MEM,
        .nb_desc = 32,
    };
    struct rte_dma_conf conf = { .nb_vchans = 1 };
    int r;

    r = rte_dma_vchan_setup(dev, 0, &vconf);
    check(r < 0, "vchan setup while started refused (%d)", r);
    rte_dma_stop(dev);
    r = rte_dma_configure(dev, &conf);
    check(r == 0, "reconfigure while stopped (%d)", r);
    r = rte_dma_vchan_setup(dev, 0, &vconf);
    check(r == 0, "vchan setup with 32 descriptors while stopped (%d)", r);
    r = rte_dma_start(dev);
    check(r == 0, "start after reconfigure (%d)", r);
    check(rte_dma_burst_capacity(dev, 0) == 32, "capacity is now 32");
    test_random(dev, s, 2000, 32, false);
}

static void
test_stats_reset(int16_t dev)
{
    struct rte_dma_stats st;

    check(rte_dma_stats_reset(dev, RTE_DMA_ALL_VCHAN) == 0,
          "stats reset returns 0");
    check(rte_dma_stats_get(dev, RTE_DMA_ALL_VCHAN, &st) == 0
          && !st.submitted && !st.completed && !st.errors,
          "stats are 0 after reset");
    check(rte_dma_stats_get(dev, 1, &st) < 0, "stats of vchan 1 refused");
}

static void
test_close(int16_t dev)
{
    static uint8_t a[64], b[64];
    int r;

    r = rte_dma_close(dev);
    check(r < 0, "close while started refused (%d)", r);
    r = rte_dma_stop(dev);
    check(r == 0, "stop (%d)", r);
    r = rte_dma_close(dev);
    check(r == 0, "close (%d)", r);
    check(!rte_dma_is_valid(dev), "device is gone after close");
    r = rte_dma_copy(dev, 0, iova(a), iova(b), sizeof a, 0);
    check(r < 0, "copy on a closed device refused (%d)", r);
}

/* A second instance, with its own worker, used after the first one; it is
 * left started: rte_eal_cleanup() must stop and remove it. */
static void
test_second_instance(int16_t dev0, int16_t dev1, struct slots *s)
{
    struct slots s1;

    if (dev1 < 0) {
        printf("skip - no second dma_swcopy instance\n");
        return;
    }
    check(setup_dev(dev1, 256) == 0, "second instance started");
    if (!slots_init(&s1, 256)) {
        check(false, "allocating buffers");
        return;
    }
    test_random(dev1, &s1, 2000, 256, true);
    test_random(dev0, s, 2000, 256, false);
    slots_free(&s1);
}

static int16_t
find_swcopy(int16_t start)
{
    int16_t id;

    for (id = rte_dma_next_dev(start); id >= 0;
         id = rte_dma_next_dev(id + 1)) {
        struct rte_dma_info info;

        if (!rte_dma_info_get(id, &info) && info.dev_name
            && !strncmp(info.dev_name, DMA_SWCOPY_DRIVER_NAME,
                        strlen(DMA_SWCOPY_DRIVER_NAME))) {
            return id;
        }
    }
    return -1;
}

static void
remove_runtime_dir(const char *prefix)
{
    char dir[256];
    struct dirent *de;
    DIR *d;

    snprintf(dir, sizeof dir, "/var/run/dpdk/%s", prefix);
    d = opendir(dir);
    if (!d) {
        return;
    }
    while ((de = readdir(d))) {
        char path[600];

        if (de->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

int
main(int argc, char *argv[])
{
    char prefix[64], prefix_arg[80], vdev0[64];
    char *def_argv[16];
    char **eal_argv = argv;
    int eal_argc = argc;
    const char *seed_env = getenv("DMA_SWCOPY_TEST_SEED");
    int16_t dev, dev1;
    struct slots s;
    int r;

    dma_swcopy_register();

    rng_state = seed_env ? strtoull(seed_env, NULL, 0)
                         : (uint64_t) now_ns() ^ ((uint64_t) getpid() << 32);
    if (!rng_state) {
        rng_state = 1;
    }
    printf("seed %"PRIu64" (set DMA_SWCOPY_TEST_SEED to repeat)\n",
           rng_state);

    snprintf(prefix, sizeof prefix, "test-dma-swcopy-%d", (int) getpid());
    if (argc <= 1) {
        int n = 0;

        snprintf(prefix_arg, sizeof prefix_arg, "--file-prefix=%s", prefix);
        snprintf(vdev0, sizeof vdev0, "--vdev=dma_swcopy0,lcore=%d",
                 sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0);
        def_argv[n++] = argv[0];
        def_argv[n++] = "-l";
        def_argv[n++] = "0";
        def_argv[n++] = "--no-pci";
        def_argv[n++] = "--no-huge";
        def_argv[n++] = "-m";
        def_argv[n++] = "256";
        def_argv[n++] = "--iova-mode=va";
        def_argv[n++] = prefix_arg;
        def_argv[n++] = vdev0;
        def_argv[n++] = "--vdev=dma_swcopy1";
        def_argv[n] = NULL;
        eal_argv = def_argv;
        eal_argc = n;
    }

    r = rte_eal_init(eal_argc, eal_argv);
    if (r < 0) {
        fprintf(stderr, "rte_eal_init failed\n");
        check(false, "EAL initialization");
        printf("%d passed, %d failed\n", n_passed, n_failed);
        return 1;
    }

    dev = find_swcopy(0);
    check(dev >= 0, "a dma_swcopy dmadev was probed (id %d)", dev);
    if (dev < 0 || !slots_init(&s, 256)) {
        goto out;
    }
    dev1 = find_swcopy(dev + 1);

    test_info(dev);
    test_invalid_config(dev);
    check(setup_dev(dev, 256) == 0, "configure, setup 256 descriptors, "
          "start");
    test_single(dev, &s);
    test_random(dev, &s, 5000, 256, false);
    test_random(dev, &s, 3000, 256, true);
    test_wrap(dev, 256);
    test_full(dev, 256);
    test_errors(dev);
    test_stop_restart(dev, &s);
    test_idle_wakeup(dev, &s);
    test_idle_cost(dev);
    test_reconfigure(dev, &s);
    test_wrap(dev, 32);
    test_stats_reset(dev);
    test_second_instance(dev, dev1, &s);
    test_close(dev);
    slots_free(&s);

out:
    r = rte_eal_cleanup();
    check(r == 0, "EAL cleanup (removes the second instance) (%d)", r);
    if (argc <= 1) {
        remove_runtime_dir(prefix);
    }
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
