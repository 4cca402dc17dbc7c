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

#ifndef NETDEV_DPDK_VHOST_AUTO_H
#define NETDEV_DPDK_VHOST_AUTO_H 1

#include <stdbool.h>
#include <stdint.h>

#include "openvswitch/dynamic-string.h"
#include "ovs-atomic.h"
#include "util.h"

struct smap;

/* The 'auto' vhost copy mode's policy: per queue, Tx or Rx, whether a
 * burst is copied on the CPU or handed to the PMD's DMA engine (a Tx burst
 * then retired the 'defer' way, an Rx burst dequeued asynchronously).
 *
 * It learns, per frame size class, what each path costs the sending PMD
 * in cycles per delivered packet (submit plus retire for DMA), and keeps
 * the cheaper one, with a margin and a number of consecutive confirmations
 * before it switches (hysteresis).  It probes the path not in use now and
 * then, backing off while that path keeps losing.  A DMA engine that falls
 * behind (the queue's copies in flight pass a backlog limit) or drops
 * makes DMA lose at once.  The packet rate at which it did so is kept, per
 * frame size class, as the engine's capacity for the queue: for a while
 * (VHOST_AUTO_CAP_TTL_MS) the queue leaves DMA when its rate reaches that
 * capacity, and does not go back to DMA, probes included, at half of it
 * or more; an engine that cannot keep up costs the guest packets on every
 * return.  other_config:vhost-copy-auto-threshold pins the choice to the
 * frame size instead: DMA at and above the threshold.
 *
 * The caller serializes the users of a queue (a Tx queue's senders by its
 * txq lock in netdev-dpdk-vhost-tx.c, an Rx queue's by the PMD that
 * polls it in netdev-dpdk-vhost-rx.c) and performs the switch: in-flight
 * copies are retired before a queue goes back to the CPU, so that order
 * within the queue is kept.  Statistics and the path in use may be read
 * from any thread. */

enum vhost_auto_path {
    VHOST_AUTO_CPU,
    VHOST_AUTO_DMA,
    VHOST_AUTO_N_PATHS
};

/* Frame size classes: up to 128, 256, 512, 1024, 2048 bytes, and more. */
#define VHOST_AUTO_N_CLASSES 6

struct vhost_auto {
    /* Written by the queue's user (see above). */
    uint32_t size_ewma;             /* Average frame size, bytes * 16. */
    uint32_t bursts;                /* Bursts since the last probe. */
    uint32_t probe_interval;        /* Bursts between probes (backs off). */
    uint16_t probe_left;            /* Bursts left in the current probe. */
    uint8_t votes;                  /* Consecutive votes for the other path. */
    bool skip_sample;               /* First burst after a switch. */
    bool probe_pending;             /* choose() asked for a probe. */
    bool leaving;                   /* Leaving a losing path. */
    uint64_t retire_seen[2];        /* 'retire_cycles', 'retire_pkts' as of
                                     * the last fold-in. */
    uint32_t retire_cost;           /* DMA retire cycles per packet. */
    uint64_t now;                   /* TSC of the last recorded burst. */
    uint64_t rate_start;            /* TSC at the start of the rate window. */
    uint32_t rate_pkts;             /* Packets in the rate window. */
    uint32_t rate;                  /* Packets per ms, averaged; 0 unknown. */
    uint32_t dma_cap[VHOST_AUTO_N_CLASSES];
                                    /* Rate at which DMA fell behind, 0 if
                                     * none is known. */
    uint64_t dma_cap_tsc[VHOST_AUTO_N_CLASSES];   /* When it did. */
    uint32_t backlog_max;           /* DMA copies in flight at which DMA
                                     * is losing (vhost_auto_reset()). */

    /* Readable by any thread. */
    atomic_int path;                /* enum vhost_auto_path in use. */
    atomic_uint32_t cost[VHOST_AUTO_N_PATHS][VHOST_AUTO_N_CLASSES];
                                    /* Cycles per packet, 0 if unknown. */
    atomic_uint64_t switches[VHOST_AUTO_N_PATHS];   /* Switches to path. */
    atomic_uint64_t saturated;      /* DMA backlog or drop events. */
    atomic_uint64_t capped;         /* Bursts kept off DMA by its capacity. */
    atomic_uint32_t cap_shown;      /* Capacity of the class in use, packets
                                     * per ms, 0 if none (for display). */
    atomic_uint32_t rate_shown;     /* 'rate', for display. */

    /* Cost of retiring DMA copies, added by whichever PMD retires them. */
    atomic_uint64_t retire_cycles;
    atomic_uint64_t retire_pkts;
};

/* Backlog of a Tx queue's DMA copies at which DMA is losing. */
#define VHOST_AUTO_BACKLOG_MAX 512

/* How long a DMA engine's capacity, once seen, keeps a queue off DMA. */
#define VHOST_AUTO_CAP_TTL_MS 10000

void vhost_auto_set_config(const struct smap *ovs_other_config);
uint32_t vhost_auto_threshold(void);

/* Resets 'a' for a queue whose DMA path is losing once 'backlog_max'
 * copies are in flight: VHOST_AUTO_BACKLOG_MAX for a Tx queue, the most
 * copies that the queue keeps in flight for one that keeps fewer (an Rx
 * queue at its cap submits nothing until its engine catches up). */
void vhost_auto_reset(struct vhost_auto *, uint32_t backlog_max);

/* Returns the path for a burst of frames of average size 'avg_size' (the
 * caller switches the queue to it, if it can, and says so with
 * vhost_auto_switched()). */
enum vhost_auto_path vhost_auto_choose(struct vhost_auto *,
                                       uint32_t avg_size);

/* Records a burst, after vhost_auto_choose(), sent on 'path' (the one in
 * use after the caller's switch, if any) at TSC 'now': 'cycles' spent by
 * the sender on 'cnt' packets of which 'delivered' were taken, leaving
 * 'backlog' DMA copies in flight.  A dequeue that found no completed copy
 * records 'cnt' 0 with its backlog. */
void vhost_auto_record(struct vhost_auto *, enum vhost_auto_path path,
                       uint64_t now, uint64_t cycles, int cnt,
                       int delivered, int backlog);

/* Tells that the queue switched to 'path'. */
void vhost_auto_switched(struct vhost_auto *, enum vhost_auto_path path);

/* Adds the cost of retiring 'n' DMA copies (any thread). */
void vhost_auto_retired(struct vhost_auto *, uint64_t cycles, uint32_t n);

static inline enum vhost_auto_path
vhost_auto_path(const struct vhost_auto *a)
{
    int path;

    atomic_read_relaxed(&CONST_CAST(struct vhost_auto *, a)->path, &path);
    return path;
}

const char *vhost_auto_path_name(enum vhost_auto_path);
uint64_t vhost_auto_switches(const struct vhost_auto *,
                             enum vhost_auto_path to);
uint64_t vhost_auto_capped(const struct vhost_auto *);
void vhost_auto_format(struct ds *, const struct vhost_auto *);

#endif /* netdev-dpdk-vhost-auto.h */
