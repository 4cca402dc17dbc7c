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

#include "ovs-vhost-frame.h"

#include <netinet/in.h>
#include <stdlib.h>

#include <rte_common.h>
#include <rte_cpuflags.h>
#include <rte_ether.h>
#include <rte_net_crc.h>
#include <rte_vect.h>

static inline void
frame_put_be32(uint8_t *p, uint32_t v)
{
    frame_put_be16(p, v >> 16);
    frame_put_be16(p + 2, v);
}

static inline void
frame_put_be64(uint8_t *p, uint64_t v)
{
    frame_put_be32(p, v >> 32);
    frame_put_be32(p + 4, v);
}

static inline uint64_t
frame_get_be64(const uint8_t *p)
{
    return ((uint64_t) frame_get_be32(p) << 32) | frame_get_be32(p + 4);
}

/* Payload fill table, a power of 2 of 64-bit words. */
#define PATTERN_WORDS 4096
static uint64_t pattern[PATTERN_WORDS];

/* Mixes 'x' into a well-spread 64-bit value (a bijection). */
static inline uint64_t
mix64(uint64_t x)
{
    x ^= x >> 31;
    x *= UINT64_C(0x7fb5d329728ea185);
    x ^= x >> 27;
    x *= UINT64_C(0x81dadef4bc2dd44d);
    x ^= x >> 33;
    return x;
}

/* Picks the fastest CRC-32 implementation of rte_net_crc.  Its AVX512
 * (VPCLMULQDQ) variant is about twice as fast as the SSE4.2 (PCLMULQDQ)
 * one, but DPDK only selects it while the "max SIMD bitwidth" is 512,
 * which by default it is not.  Raising that limit for good would also
 * switch other DPDK code paths, so raise it only while the CRC handler is
 * chosen, and only if the user did not set it with
 * --force-max-simd-bitwidth (then the call below fails harmlessly). */
static void
crc_init(void)
{
    uint16_t old = rte_vect_get_max_simd_bitwidth();

    if (!old) {
        /* No EAL (the unit test): EAL's default. */
        old = RTE_VECT_DEFAULT_SIMD_BITWIDTH;
    }
    if (old < RTE_VECT_SIMD_512
        && rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512F) > 0
        && rte_cpu_get_flag_enabled(RTE_CPUFLAG_VPCLMULQDQ) > 0
        && !rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_512)) {
        rte_net_crc_set_alg(RTE_NET_CRC_AVX512);
        rte_vect_set_max_simd_bitwidth(old);
    } else {
        rte_net_crc_set_alg(old >= RTE_VECT_SIMD_512 ? RTE_NET_CRC_AVX512
                            : RTE_NET_CRC_SSE42);
    }
}

static inline uint32_t frame_crc(const uint8_t *frame, uint32_t len);

/* Fills the payload fill table from a fixed xorshift64 sequence, so that
 * it is the same in every run. */
bool
frame_init(bool fast_crc)
{
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);

    for (unsigned int i = 0; i < PATTERN_WORDS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pattern[i] = x;
    }
    if (fast_crc) {
        crc_init();
    }
    /* The check value of CRC-32 (IEEE 802.3). */
    return frame_crc((const uint8_t *) "123456789", 9) == 0xcbf43926;
}

/* Fills 'n' bytes at 'p' with bytes derived from 'key', a hash of
 * (stream, sequence): word i is pattern[(start + i) % size] ^ key, where
 * 'start' also comes from 'key'.  This costs far less than running a
 * generator per byte, yet every frame gets different contents. */
static inline void
fill_payload(uint8_t *p, unsigned int n, uint64_t key)
{
    unsigned int start = key >> 52;
    unsigned int i, w;

    for (i = 0, w = start; i + 8 <= n; i += 8, w++) {
        uint64_t word = pattern[w & (PATTERN_WORDS - 1)] ^ key;

        memcpy(p + i, &word, 8);
    }
    if (i < n) {
        uint64_t word = pattern[w & (PATTERN_WORDS - 1)] ^ key;

        memcpy(p + i, &word, n - i);
    }
}

/* Returns the IPv4 header checksum of the 20-byte header at 'ip', whose
 * checksum field must be zero. */
static inline uint16_t
ipv4_csum(const uint8_t *ip)
{
    uint32_t sum = 0;

    for (unsigned int i = 0; i < 20; i += 2) {
        sum += frame_get_be16(ip + i);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return ~sum & 0xffff;
}

static inline uint32_t
frame_crc(const uint8_t *frame, uint32_t len)
{
    return rte_net_crc_calc(frame, len, RTE_NET_CRC32_ETH);
}

static uint32_t
ipv4_addr(unsigned int a, unsigned int b, unsigned int c, unsigned int d)
{
    return ((uint32_t) a << 24) | ((uint32_t) b << 16) | (c << 8) | d;
}

/* Writes Ethernet + IPv4 + UDP headers at 'p' with zero lengths and
 * checksums; frame_build() fills those in per frame. */
static void
put_eth_ip_udp(uint8_t *p, const struct rte_ether_addr *dst_mac,
               const struct rte_ether_addr *src_mac, uint32_t src_ip,
               uint32_t dst_ip, uint16_t sport, uint16_t dport)
{
    memcpy(p, dst_mac, RTE_ETHER_ADDR_LEN);
    memcpy(p + 6, src_mac, RTE_ETHER_ADDR_LEN);
    frame_put_be16(p + 12, RTE_ETHER_TYPE_IPV4);

    p += 14;
    memset(p, 0, 20);
    p[0] = 0x45;                /* Version 4, 5 words. */
    frame_put_be16(p + 6, 0x4000);  /* Don't fragment. */
    p[8] = 64;                  /* TTL. */
    p[9] = IPPROTO_UDP;
    frame_put_be32(p + 12, src_ip);
    frame_put_be32(p + 16, dst_ip);

    p += 20;
    frame_put_be16(p, sport);
    frame_put_be16(p + 2, dport);
    frame_put_be16(p + 4, 0);   /* Length, set per frame. */
    frame_put_be16(p + 6, 0);   /* No UDP checksum. */
}

/* The outer (or only) Ethernet destination is the sink port's MAC, so that
 * a switch can forward by MAC; the source is the generating port's MAC.
 * Addresses, all in the benchmarking range 198.18.0.0/15 (RFC 2544):
 *   inner/plain IPv4 198.18.<src+1>.<queue+1> -> 198.18.<dst+1>.254,
 *   UDP source port 10000 + stream index -> 5001,
 *   VXLAN outer IPv4 198.19.0.<src+1> -> 198.19.0.<dst+1>,
 *   outer UDP source port 49152 + stream index % 16384 -> 4789. */
void
frame_template(uint8_t *tmpl, bool vxlan,
               const struct rte_ether_addr *dst_mac,
               const struct rte_ether_addr *src_mac,
               unsigned int src, unsigned int queue, unsigned int dst,
               unsigned int index)
{
    uint32_t ip_src = ipv4_addr(198, 18, src + 1, queue + 1);
    uint32_t ip_dst = ipv4_addr(198, 18, dst + 1, 254);
    uint16_t sport = 10000 + index;

    memset(tmpl, 0, frame_hdr_len(vxlan));
    if (!vxlan) {
        put_eth_ip_udp(tmpl, dst_mac, src_mac, ip_src, ip_dst, sport,
                       FRAME_UDP_DPORT);
    } else {
        struct rte_ether_addr in_src = {
            .addr_bytes = { 0x02, 0x01, 0, 0, queue, src + 1 }
        };
        struct rte_ether_addr in_dst = {
            .addr_bytes = { 0x02, 0x01, 0, 0, 0, dst + 1 }
        };

        put_eth_ip_udp(tmpl, dst_mac, src_mac,
                       ipv4_addr(198, 19, 0, src + 1),
                       ipv4_addr(198, 19, 0, dst + 1),
                       49152 + index % 16384, FRAME_VXLAN_DPORT);
        frame_put_be32(tmpl + FRAME_PLAIN_HDR_LEN, 0x08000000);
        frame_put_be32(tmpl + FRAME_PLAIN_HDR_LEN + 4,
                       FRAME_VXLAN_VNI << 8);
        put_eth_ip_udp(tmpl + FRAME_OFS_IN_ETH, &in_dst, &in_src, ip_src,
                       ip_dst, sport, FRAME_UDP_DPORT);
    }
}

/* frame_build() with 'magic' in the payload header, which the CRC covers:
 * a frame whose magic is damaged into the probe's fails its CRC. */
static void
frame_build__(uint8_t *buf, const uint8_t *tmpl, bool vxlan,
              uint32_t wire_id, uint64_t seq, unsigned int len,
              uint32_t magic)
{
    unsigned int hdr_len = frame_hdr_len(vxlan);
    uint8_t *ph = buf + hdr_len;

    memcpy(buf, tmpl, hdr_len);
    frame_put_be16(buf + FRAME_OFS_IP + 2, len - FRAME_OFS_IP);
    frame_put_be16(buf + FRAME_OFS_IP + 10, ipv4_csum(buf + FRAME_OFS_IP));
    frame_put_be16(buf + FRAME_OFS_UDP + 4, len - FRAME_OFS_UDP);
    if (vxlan) {
        frame_put_be16(buf + FRAME_OFS_IN_IP + 2, len - FRAME_OFS_IN_IP);
        frame_put_be16(buf + FRAME_OFS_IN_IP + 10,
                       ipv4_csum(buf + FRAME_OFS_IN_IP));
        frame_put_be16(buf + FRAME_OFS_IN_UDP + 4, len - FRAME_OFS_IN_UDP);
    }

    frame_put_be32(ph + FRAME_PH_OFS_MAGIC, magic);
    frame_put_be32(ph + FRAME_PH_OFS_STREAM, wire_id);
    frame_put_be64(ph + FRAME_PH_OFS_SEQ, seq);
    frame_put_be16(ph + FRAME_PH_OFS_LEN, len);
    frame_put_be32(ph + FRAME_PH_OFS_CRC, 0);
    fill_payload(ph + FRAME_PH_LEN, len - hdr_len - FRAME_PH_LEN,
                 mix64(((uint64_t) wire_id << 40) ^ seq));
    frame_put_be32(ph + FRAME_PH_OFS_CRC, frame_crc(buf, len));
}

void
frame_build(uint8_t *buf, const uint8_t *tmpl, bool vxlan, uint32_t wire_id,
            uint64_t seq, unsigned int len)
{
    frame_build__(buf, tmpl, vxlan, wire_id, seq, len, FRAME_PH_MAGIC);
}

void
frame_build_probe(uint8_t *buf, const uint8_t *tmpl, bool vxlan,
                  uint32_t wire_id, unsigned int len)
{
    frame_build__(buf, tmpl, vxlan, wire_id, 0, len, FRAME_PH_PROBE_MAGIC);
}

/* True if the (possibly truncated) frame at 'data' looks like one of ours
 * by its headers: IPv4, UDP, our destination port.  Tells damaged frames
 * of ours from frames that someone else sent. */
static bool
looks_like_ours(const uint8_t *data, unsigned int avail, bool vxlan)
{
    return (avail >= FRAME_PLAIN_HDR_LEN
            && frame_get_be16(data + 12) == RTE_ETHER_TYPE_IPV4
            && data[FRAME_OFS_IP] == 0x45
            && data[FRAME_OFS_IP + 9] == IPPROTO_UDP
            && frame_get_be16(data + FRAME_OFS_UDP + 2)
               == (vxlan ? FRAME_VXLAN_DPORT : FRAME_UDP_DPORT));
}

enum frame_verdict
frame_verify(uint8_t *data, unsigned int avail, unsigned int len, bool vxlan,
             unsigned int port, frame_lookup_cb *lookup, void *aux,
             int *stream, uint64_t *seq)
{
    unsigned int hdr_len = frame_hdr_len(vxlan);
    uint8_t *ph = data + hdr_len;
    uint64_t next_seq = 0;
    unsigned int dst = 0;
    uint32_t magic, crc;
    bool probe;

    *stream = -1;
    *seq = 0;
    if (avail >= 14 && frame_get_be16(data + 12) == FRAME_HELLO_ETHERTYPE) {
        return FRAME_PROBE;
    }
    magic = avail >= hdr_len + FRAME_PH_LEN
            ? frame_get_be32(ph + FRAME_PH_OFS_MAGIC) : 0;
    probe = magic == FRAME_PH_PROBE_MAGIC;
    if (avail < len || len < hdr_len + FRAME_PH_LEN
        || (magic != FRAME_PH_MAGIC && !probe)) {
        return looks_like_ours(data, avail, vxlan) ? FRAME_CORRUPTED
                                                   : FRAME_FOREIGN;
    }

    *stream = lookup(frame_get_be32(ph + FRAME_PH_OFS_STREAM), aux, &dst,
                     &next_seq);
    *seq = frame_get_be64(ph + FRAME_PH_OFS_SEQ);
    crc = frame_get_be32(ph + FRAME_PH_OFS_CRC);

    /* The frame is ours to scribble on: the CRC covers it with a zero CRC
     * field. */
    frame_put_be32(ph + FRAME_PH_OFS_CRC, 0);
    if (frame_get_be16(ph + FRAME_PH_OFS_LEN) != len
        || frame_crc(data, len) != crc || *stream < 0
        || (!probe && *seq >= next_seq)) {
        return FRAME_CORRUPTED;
    }
    if (probe) {
        return FRAME_PROBE;
    }
    return dst == port ? FRAME_OK : FRAME_MISDELIVERED;
}

bool
frame_rx_record(struct frame_rx *st, unsigned int queue, uint64_t seq,
                unsigned int len)
{
    uint64_t *queue_top = &st->queue_top[RTE_MIN(queue,
                                                  FRAME_RX_QUEUES - 1)];
    uint64_t word = seq / 64;
    uint64_t bit = UINT64_C(1) << (seq % 64);

    st->rx++;
    st->bytes += len;
    if (word >= st->n_words) {
        uint64_t grown = RTE_MAX(st->n_words * 2, word + 1);
        uint64_t n = RTE_MAX(grown, (uint64_t) 1024);
        uint64_t *seen = realloc(st->seen, n * sizeof *seen);

        if (!seen) {
            return false;
        }
        memset(seen + st->n_words, 0, (n - st->n_words) * sizeof *seen);
        st->seen = seen;
        st->n_words = n;
    }
    if (st->seen[word] & bit) {
        st->duplicates++;
        return true;
    }
    st->seen[word] |= bit;
    st->distinct++;
    if (seq + 1 < *queue_top) {
        st->reordered++;
    } else {
        if (seq + 1 < st->top) {
            st->requeued++;
        }
        *queue_top = seq + 1;
    }
    st->top = RTE_MAX(st->top, seq + 1);
    return true;
}

void
frame_rx_destroy(struct frame_rx *st)
{
    free(st->seen);
    memset(st, 0, sizeof *st);
}
