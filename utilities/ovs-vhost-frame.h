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

#ifndef OVS_VHOST_FRAME_H
#define OVS_VHOST_FRAME_H 1

/* The wire format of ovs-vhost-guest's frames and their verification: how
 * a generator builds a frame, how a sink tells whether a received frame is
 * intact, and how it accounts for each stream's sequence numbers.  See
 * "Frame format" in ovs-vhost-guest(8).  Needs no EAL: the unit test
 * tests/test-vhost-frame.c runs it on its own. */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct rte_ether_addr;

#define FRAME_MIN 64
#define FRAME_MAX 9000

/* Header offsets. */
#define FRAME_OFS_IP 14
#define FRAME_OFS_UDP 34
#define FRAME_OFS_IN_ETH 50     /* VXLAN only: inner Ethernet header. */
#define FRAME_OFS_IN_IP 64
#define FRAME_OFS_IN_UDP 84
#define FRAME_PLAIN_HDR_LEN 42  /* Eth + IPv4 + UDP. */
#define FRAME_VXLAN_HDR_LEN 92  /* Outer Eth/IPv4/UDP/VXLAN + inner. */

/* The payload header, right after the headers, all fields big-endian. */
#define FRAME_PH_LEN 22
#define FRAME_PH_MAGIC 0x4f564731u          /* "OVG1". */
#define FRAME_PH_PROBE_MAGIC 0x4f564750u    /* "OVGP": warm-up probe. */
#define FRAME_PH_OFS_MAGIC 0
#define FRAME_PH_OFS_STREAM 4
#define FRAME_PH_OFS_SEQ 8
#define FRAME_PH_OFS_LEN 16
#define FRAME_PH_OFS_CRC 18

#define FRAME_HELLO_ETHERTYPE 0x88b5    /* Warm-up MAC announcements. */
#define FRAME_UDP_DPORT 5001            /* Destination port of our UDP. */
#define FRAME_VXLAN_DPORT 4789
#define FRAME_VXLAN_VNI 100

/* Byte-order helpers that tolerate any alignment. */
static inline void
frame_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

static inline uint16_t
frame_get_be16(const uint8_t *p)
{
    return (p[0] << 8) | p[1];
}

static inline uint32_t
frame_get_be32(const uint8_t *p)
{
    return ((uint32_t) frame_get_be16(p) << 16) | frame_get_be16(p + 2);
}

/* The stream id carried in frames: (source port, queue, destination). */
static inline uint32_t
frame_stream_id(unsigned int src, unsigned int queue, unsigned int dst)
{
    return (src << 16) | (queue << 8) | dst;
}

/* Fills the payload pattern; with 'fast_crc', picks the fastest CRC-32
 * implementation of the CPU (needs DPDK's CPU flags, not EAL).  Returns
 * false if the CRC implementation fails its self-test. */
bool frame_init(bool fast_crc);

/* Length of the headers before the payload header. */
static inline unsigned int
frame_hdr_len(bool vxlan)
{
    return vxlan ? FRAME_VXLAN_HDR_LEN : FRAME_PLAIN_HDR_LEN;
}

/* The smallest frame of the format. */
static inline unsigned int
frame_min_len(bool vxlan)
{
    unsigned int n = frame_hdr_len(vxlan) + FRAME_PH_LEN;

    return n > FRAME_MIN ? n : FRAME_MIN;
}

/* Writes into 'tmpl' (frame_hdr_len(vxlan) bytes) the headers of the
 * stream from port 'src', queue 'queue', to port 'dst', whose MACs are
 * 'src_mac' and 'dst_mac'; 'index' numbers the stream.  Lengths and
 * checksums are left for frame_build(). */
void frame_template(uint8_t *tmpl, bool vxlan,
                    const struct rte_ether_addr *dst_mac,
                    const struct rte_ether_addr *src_mac,
                    unsigned int src, unsigned int queue, unsigned int dst,
                    unsigned int index);

/* Writes the complete 'len'-byte frame with sequence number 'seq' of the
 * stream 'wire_id', whose headers are 'tmpl', into 'buf'. */
void frame_build(uint8_t *buf, const uint8_t *tmpl, bool vxlan,
                 uint32_t wire_id, uint64_t seq, unsigned int len);

/* Builds a warm-up probe: a frame of the stream with the probe magic. */
void frame_build_probe(uint8_t *buf, const uint8_t *tmpl, bool vxlan,
                       uint32_t wire_id, unsigned int len);

enum frame_verdict {
    FRAME_OK,               /* Intact, of a stream that sent it, for this
                             * port. */
    FRAME_MISDELIVERED,     /* Intact, for another port. */
    FRAME_CORRUPTED,        /* Ours (by its payload header or by its
                             * headers), but damaged. */
    FRAME_FOREIGN,          /* Not ours at all: neither. */
    FRAME_PROBE,            /* An intact warm-up probe or hello. */
};

/* What the sink knows of a stream, by its wire id: its index (or -1 if
 * there is no such stream), its destination port and how many sequence
 * numbers it has used so far. */
typedef int frame_lookup_cb(uint32_t wire_id, void *aux, unsigned int *dst,
                            uint64_t *next_seq);

/* Verifies the frame at 'data', received by port 'port': 'avail' bytes of
 * it are at 'data', its length is 'len'.  Zeroes its CRC field in place.
 * Stores the stream's index (or -1) in '*stream' and the sequence number
 * in '*seq' when the verdict is FRAME_OK or FRAME_MISDELIVERED, and the
 * stream its damaged header names (or -1) when FRAME_CORRUPTED. */
enum frame_verdict frame_verify(uint8_t *data, unsigned int avail,
                                unsigned int len, bool vxlan,
                                unsigned int port, frame_lookup_cb *,
                                void *aux, int *stream, uint64_t *seq);

/* Receive queues of a port that the order of a stream is kept for; higher
 * queues share the last one's. */
#define FRAME_RX_QUEUES 8

/* What one receiving port saw of one stream. */
struct frame_rx {
    uint64_t *seen;             /* Bitmap of received sequence numbers. */
    uint64_t n_words;           /* Size of 'seen' in 64-bit words. */
    uint64_t top;               /* Highest sequence seen + 1, 0 if none. */
    uint64_t queue_top[FRAME_RX_QUEUES];  /* The same, per receive queue. */
    uint64_t rx;                /* Valid frames, duplicates included. */
    uint64_t bytes;
    uint64_t distinct;
    uint64_t duplicates;
    uint64_t reordered;         /* New, but below the highest sequence seen
                                 * on the same receive queue. */
    uint64_t requeued;          /* New, below the highest seen on another
                                 * queue only: the stream moved to another
                                 * queue (its sender changed Tx queue), and
                                 * the receiver read them in another order
                                 * than they were filled. */
    uint64_t corrupted;
};

/* Accounts a valid frame of 'len' bytes with sequence number 'seq',
 * received on queue 'queue': a number seen before is a duplicate; a new
 * one below the highest seen on the same queue is reordered, below the
 * highest seen on other queues only, requeued.  Returns false if the bitmap
 * could not grow (the frame then counts as received, not as distinct). */
bool frame_rx_record(struct frame_rx *, unsigned int queue, uint64_t seq,
                     unsigned int len);

void frame_rx_destroy(struct frame_rx *);

#endif /* ovs-vhost-frame.h */
