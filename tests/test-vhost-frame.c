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

/* Unit test of ovs-vhost-guest's frame format and verifier
 * (utilities/ovs-vhost-frame.c), without EAL or hugepages.
 *
 * For plain and VXLAN frames of every size from the smallest to 2100
 * bytes, and of 4096, 8999 and 9000 bytes, it builds the frame and checks
 * that its destination accepts it, another port reports it misdelivered,
 * and that each damage ovs-vhost-guest(8) lists is detected and counted
 * as it says: every single-byte change (at every offset: two values, and
 * all 255 in the headers, for a set of sizes) as corrupted, never as
 * foreign or as a valid frame, truncation, padding, a
 * frame of a stream that does not exist or of a sequence number not sent
 * yet, duplicates, reordering, frames that are not ours at all, and
 * late warm-up probes.  It also checks that every IPv4 address is in
 * 198.18.0.0/15.  Exits 1 on the first failure, naming it. */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_ether.h>

#include "utilities/ovs-vhost-frame.h"

#define N_PORTS 3
#define SIZES_UP_TO 2100

static const unsigned int flip_sizes[] = {
    0 /* smallest */, 1 /* smallest + 1 */, 127, 128, 512, 1000, 1518,
    2098, 9000
};
static const unsigned int big_sizes[] = { 4096, 8999, 9000 };

static uint8_t buf[FRAME_MAX + 64];
static uint8_t good[FRAME_MAX + 64];
static uint64_t n_checks, n_flips;

/* The streams of the test: one per (source, destination) pair, queue 0. */
struct test_stream {
    unsigned int src, dst;
    uint32_t wire_id;
    uint64_t next_seq;
    uint8_t tmpl[FRAME_VXLAN_HDR_LEN];
};
static struct test_stream streams[N_PORTS * N_PORTS];
static unsigned int n_streams;
static struct rte_ether_addr macs[N_PORTS];

#define FAIL(...)                                       \
    do {                                                \
        fprintf(stderr, "test-vhost-frame: FAIL: ");    \
        fprintf(stderr, __VA_ARGS__);                   \
        fprintf(stderr, "\n");                          \
        exit(1);                                        \
    } while (0)

static const char *
verdict_name(enum frame_verdict v)
{
    switch (v) {
    case FRAME_OK: return "ok";
    case FRAME_MISDELIVERED: return "misdelivered";
    case FRAME_CORRUPTED: return "corrupted";
    case FRAME_FOREIGN: return "foreign";
    case FRAME_PROBE: return "probe";
    }
    return "?";
}

static int
lookup(uint32_t wire_id, void *aux, unsigned int *dst, uint64_t *next_seq)
{
    (void) aux;
    for (unsigned int i = 0; i < n_streams; i++) {
        if (streams[i].wire_id == wire_id) {
            *dst = streams[i].dst;
            *next_seq = streams[i].next_seq;
            return i;
        }
    }
    return -1;
}

static void
setup(bool vxlan)
{
    n_streams = 0;
    for (unsigned int i = 0; i < N_PORTS; i++) {
        struct rte_ether_addr mac = {
            .addr_bytes = { 0x02, 0x00, 0x00, 0x00, 0x00, i + 1 }
        };

        macs[i] = mac;
    }
    for (unsigned int src = 0; src < N_PORTS; src++) {
        for (unsigned int dst = 0; dst < N_PORTS; dst++) {
            struct test_stream *s = &streams[n_streams];

            s->src = src;
            s->dst = dst;
            s->wire_id = frame_stream_id(src, 0, dst);
            s->next_seq = UINT64_C(1) << 40;
            frame_template(s->tmpl, vxlan, &macs[dst], &macs[src], src, 0,
                           dst, n_streams);
            n_streams++;
        }
    }
}

/* Verifies 'len' bytes of 'buf' ('avail' of them readable) at 'port'. */
static enum frame_verdict
verify(bool vxlan, unsigned int avail, unsigned int len, unsigned int port,
       int *si, uint64_t *seq)
{
    n_checks++;
    return frame_verify(buf, avail, len, vxlan, port, lookup, NULL, si, seq);
}

static void
expect(enum frame_verdict got, enum frame_verdict want, const char *what,
       bool vxlan, unsigned int len)
{
    if (got != want) {
        FAIL("%s, %s frame of %u bytes: %s, expected %s", what,
             vxlan ? "VXLAN" : "plain", len, verdict_name(got),
             verdict_name(want));
    }
}

static void
check_addresses(bool vxlan, unsigned int len)
{
    unsigned int ips[2] = { FRAME_OFS_IP, FRAME_OFS_IN_IP };

    for (unsigned int i = 0; i < (vxlan ? 2 : 1); i++) {
        for (unsigned int a = 12; a <= 16; a += 4) {
            uint32_t ip = frame_get_be32(good + ips[i] + a);

            if ((ip & 0xfffe0000) != 0xc6120000) {
                FAIL("%s frame of %u bytes: IPv4 address %08"PRIx32" is "
                     "not in 198.18.0.0/15", vxlan ? "VXLAN" : "plain",
                     len, ip);
            }
        }
    }
}

/* Builds the frame of stream 'si' with sequence 'seq' and 'len' bytes into
 * 'good', and copies it into 'buf'. */
static void
build(bool vxlan, unsigned int si, uint64_t seq, unsigned int len)
{
    const struct test_stream *s = &streams[si];

    frame_build(good, s->tmpl, vxlan, s->wire_id, seq, len);
    memcpy(buf, good, len);
}

static void
restore(unsigned int len)
{
    memcpy(buf, good, len);
}

/* The frame in 'good' must pass at its destination, be misdelivered
 * elsewhere, and report its stream and sequence number. */
static void
check_intact(bool vxlan, unsigned int si, uint64_t seq, unsigned int len)
{
    uint64_t got_seq;
    int got_si;

    for (unsigned int port = 0; port < N_PORTS; port++) {
        restore(len);
        expect(verify(vxlan, len, len, port, &got_si, &got_seq),
               port == streams[si].dst ? FRAME_OK : FRAME_MISDELIVERED,
               "intact frame", vxlan, len);
        if (got_si != (int) si || got_seq != seq) {
            FAIL("intact frame of %u bytes: stream %d seq %"PRIu64", "
                 "expected %u and %"PRIu64, len, got_si, got_seq, si, seq);
        }
    }
}

/* Every single-byte change of the frame in 'good' is detected as
 * corruption: it leaves intact either the headers by which a sink knows a
 * frame of ours or the payload header, so it is never foreign. */
static void
check_flips(bool vxlan, unsigned int si, unsigned int len)
{
    unsigned int dst = streams[si].dst;
    unsigned int all_values = frame_hdr_len(vxlan) + FRAME_PH_LEN;
    uint64_t seq;
    int got_si;

    for (unsigned int ofs = 0; ofs < len; ofs++) {
        unsigned int n_values = ofs < all_values ? 255 : 2;

        for (unsigned int k = 0; k < n_values; k++) {
            uint8_t x = n_values == 255 ? k + 1
                        : k ? 1 << (ofs % 8) : 0xff;
            enum frame_verdict v;

            restore(len);
            buf[ofs] ^= x;
            v = verify(vxlan, len, len, dst, &got_si, &seq);
            n_flips++;
            if (v != FRAME_CORRUPTED) {
                FAIL("%s frame of %u bytes, byte %u ^ 0x%02x: %s, "
                     "expected corrupted", vxlan ? "VXLAN" : "plain", len,
                     ofs, x, verdict_name(v));
            }
        }
    }
}

/* A frame cut short, a frame with bytes added, and one of which only part
 * could be read are corrupted. */
static void
check_lengths(bool vxlan, unsigned int si, unsigned int len)
{
    unsigned int dst = streams[si].dst;
    unsigned int cuts[] = { 1, 4, len - frame_min_len(vxlan) };
    uint64_t seq;
    int got_si;

    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        if (!cuts[i] || cuts[i] >= len) {
            continue;
        }
        restore(len);
        expect(verify(vxlan, len - cuts[i], len - cuts[i], dst, &got_si,
                      &seq), FRAME_CORRUPTED, "truncated", vxlan, len);
        restore(len);
        expect(verify(vxlan, len - cuts[i], len, dst, &got_si, &seq),
               FRAME_CORRUPTED, "partly readable", vxlan, len);
    }
    for (unsigned int pad = 1; pad <= 64; pad *= 4) {
        restore(len);
        memset(buf + len, 0, pad);
        expect(verify(vxlan, len + pad, len + pad, dst, &got_si, &seq),
               FRAME_CORRUPTED, "padded", vxlan, len);
    }
}

/* Frames of streams or sequence numbers that were never sent. */
static void
check_unsent(bool vxlan)
{
    unsigned int len = 256;
    struct test_stream ghost = streams[1];
    uint64_t seq;
    int got_si;

    ghost.wire_id = frame_stream_id(7, 3, 9);
    frame_build(good, ghost.tmpl, vxlan, ghost.wire_id, 5, len);
    restore(len);
    expect(verify(vxlan, len, len, ghost.dst, &got_si, &seq),
           FRAME_CORRUPTED, "unknown stream", vxlan, len);

    build(vxlan, 1, streams[1].next_seq, len);
    expect(verify(vxlan, len, len, streams[1].dst, &got_si, &seq),
           FRAME_CORRUPTED, "sequence number not sent yet", vxlan, len);
    if (got_si != 1) {
        FAIL("a damaged frame of a known stream names stream %d", got_si);
    }
}

/* Frames that are not ours, and warm-up probes and hellos. */
static void
check_others(bool vxlan)
{
    unsigned int len = 128;
    uint64_t seq;
    int got_si;

    /* An ARP request. */
    memset(buf, 0, len);
    memset(buf, 0xff, 6);
    memcpy(buf + 6, &macs[0], 6);
    frame_put_be16(buf + 12, RTE_ETHER_TYPE_ARP);
    expect(verify(vxlan, 60, 60, 1, &got_si, &seq), FRAME_FOREIGN, "ARP",
           vxlan, 60);

    /* IPv4 TCP, with a payload that is not ours. */
    build(vxlan, 1, 0, len);
    buf[FRAME_OFS_IP + 9] = 6;
    memset(buf + frame_hdr_len(vxlan), 0x5a, FRAME_PH_LEN);
    expect(verify(vxlan, len, len, streams[1].dst, &got_si, &seq),
           FRAME_FOREIGN, "TCP", vxlan, len);

    /* A runt. */
    build(vxlan, 1, 0, len);
    expect(verify(vxlan, 10, 10, streams[1].dst, &got_si, &seq),
           FRAME_FOREIGN, "runt", vxlan, 10);

    /* A late warm-up probe, and a damaged one. */
    frame_build_probe(good, streams[1].tmpl, vxlan, streams[1].wire_id,
                      len);
    restore(len);
    expect(verify(vxlan, len, len, 0, &got_si, &seq), FRAME_PROBE,
           "probe", vxlan, len);
    restore(len);
    buf[len - 1] ^= 0x10;
    expect(verify(vxlan, len, len, 0, &got_si, &seq), FRAME_CORRUPTED,
           "damaged probe", vxlan, len);

    /* A hello. */
    memset(buf, 0, 64);
    memset(buf, 0xff, 6);
    frame_put_be16(buf + 12, FRAME_HELLO_ETHERTYPE);
    expect(verify(vxlan, 64, 64, 0, &got_si, &seq), FRAME_PROBE, "hello",
           vxlan, 64);
}

/* The per-stream accounting: distinct, duplicates, reordered. */
static void
check_accounting(void)
{
    static const uint64_t seqs[] = { 0, 1, 2, 2, 5, 3, 4, 4, 70000, 6,
                                     /* Then on queue 1, and back. */
                                     70002, 70001, 70004, 70003, 70005 };
    static const unsigned int queues[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           1, 1, 1, 0, 9 };
    struct frame_rx rx;

    memset(&rx, 0, sizeof rx);
    for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++) {
        if (!frame_rx_record(&rx, queues[i], seqs[i], 100)) {
            FAIL("frame_rx_record: out of memory");
        }
    }
    /* Distinct: 0-6, 70000-70005; duplicates: 2 and 4; reordered: 3, 4 and
     * 6 (each new but below the highest seen on queue 0), and 70001 (below
     * 70002 on queue 1); requeued: 70003 (below the highest seen, 70004, on
     * queue 1 only).  Queue 9 counts as queue 7. */
    if (rx.rx != 15 || rx.bytes != 1500 || rx.distinct != 13
        || rx.duplicates != 2 || rx.reordered != 4 || rx.requeued != 1
        || rx.top != 70006 || rx.queue_top[0] != 70004
        || rx.queue_top[1] != 70005
        || rx.queue_top[FRAME_RX_QUEUES - 1] != 70006) {
        FAIL("accounting: rx %"PRIu64" bytes %"PRIu64" distinct %"PRIu64
             " duplicates %"PRIu64" reordered %"PRIu64" requeued %"PRIu64
             " top %"PRIu64, rx.rx, rx.bytes, rx.distinct, rx.duplicates,
             rx.reordered, rx.requeued, rx.top);
    }
    frame_rx_destroy(&rx);
}

static bool
is_flip_size(bool vxlan, unsigned int len)
{
    for (size_t i = 0; i < sizeof flip_sizes / sizeof *flip_sizes; i++) {
        unsigned int n = flip_sizes[i] <= 1
                         ? frame_min_len(vxlan) + flip_sizes[i]
                         : flip_sizes[i];
        if (n == len) {
            return true;
        }
    }
    return false;
}

static void
check_size(bool vxlan, unsigned int len, unsigned int *n_sizes)
{
    unsigned int si = 1 + len % (n_streams - 1);
    uint64_t seq = len * UINT64_C(1000003);

    build(vxlan, si, seq, len);
    check_addresses(vxlan, len);
    check_intact(vxlan, si, seq, len);
    check_lengths(vxlan, si, len);
    if (is_flip_size(vxlan, len)) {
        check_flips(vxlan, si, len);
    }
    (*n_sizes)++;
}

int
main(void)
{
    unsigned int n_sizes = 0;

    if (!frame_init(true)) {
        FAIL("CRC-32 self-test");
    }
    for (int vxlan = 0; vxlan <= 1; vxlan++) {
        setup(vxlan);
        for (unsigned int len = frame_min_len(vxlan); len <= SIZES_UP_TO;
             len++) {
            check_size(vxlan, len, &n_sizes);
        }
        for (size_t i = 0; i < sizeof big_sizes / sizeof *big_sizes; i++) {
            check_size(vxlan, big_sizes[i], &n_sizes);
        }
        check_unsent(vxlan);
        check_others(vxlan);
    }
    check_accounting();
    printf("test-vhost-frame: ok: %u frame sizes (plain and VXLAN), "
           "%"PRIu64" verifications, %"PRIu64" single-byte changes "
           "detected\n", n_sizes, n_checks, n_flips);
    return 0;
}
