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

#ifndef NETDEV_DPDK_VHOST_PRIVATE_H
#define NETDEV_DPDK_VHOST_PRIVATE_H 1

/* What netdev-dpdk-vhost-async.c (configuration, mode tables, device
 * life cycle, statistics, appctl) and netdev-dpdk-vhost-tx.c (Tx queues
 * and the send path) share: a port's state, struct vhost_async, and what
 * a copy mode is, struct copy_mode.  Rx has its own module with its own
 * opaque state (netdev-dpdk-vhost-rx.h); what both directions share is in
 * netdev-dpdk-vhost-shared.h.  Not for any other file. */

#include <stdbool.h>
#include <stdint.h>

#include <rte_atomic.h>

#include "netdev-dpdk-dma.h"
#include "netdev-dpdk-vhost-rx.h"
#include "netdev-dpdk-vhost-shared.h"
#include "netdev-dpdk-vhost-tx.h"
#include "openvswitch/list.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "util.h"

struct ds;
struct netdev;
struct rte_mbuf;
struct vhost_async;

/* Same limit as netdev-dpdk's OVS_VHOST_MAX_QUEUE_NUM. */
#define MAX_TXQ 1024

/* Packets taken per poll of completions or of a ring. */
#define POLL_BURST 64

/* Entries of each Tx queue ring in 'ring' mode, and of the ring of
 * packets that senders in 'defer' and 'auto' put aside while the queue's
 * lock is taken (a power of 2). */
#define RING_SIZE 4096

/* How long a control-path drain waits for a DMA engine before giving up
 * (copies still in flight then belong to vhost until the device goes). */
#define DRAIN_TIMEOUT_MS 2000

/* Longest a sender without a deferred work list (the main thread) waits
 * for a Tx queue lock before it drops its packets (counted): the lock's
 * holder is a PMD thread in the middle of a burst, or vhost-txq-hold. */
#define TXQ_LOCK_WAIT_MAX_MS 100

/* Longest netdev-dpdk/vhost-txq-hold holds a port's Tx queue locks. */
#define TXQ_HOLD_MAX_MS (10 * 60 * 1000)

/* Enqueue retries of packets taken from a ring in 'ring' mode. */
#define VHOST_ASYNC_RING_RETRIES 8

/* ---- The copy modes ----------------------------------------------------- */

/* Copy modes of vhost-user Tx (guest Rx): who copies packets into guest
 * memory, and where completions are polled and mbufs freed.  Each mode is
 * one row of vhost_copy_modes[] (netdev-dpdk-vhost-async.c), which names it
 * and says what it does. */
enum vhost_copy_mode {
    VHOST_COPY_CPU,
    VHOST_COPY_V3,
    VHOST_COPY_RING,
    VHOST_COPY_DEFER,
    VHOST_COPY_AUTO,
    VHOST_COPY_N_MODES
};

/* Sends 'cnt' packets on Tx queue 'qid' of device 'vid' and takes
 * ownership of all of them.  Returns the number it could not send (freed)
 * and stores the number handed to DMA in '*n_dma'. */
typedef int send_func(struct vhost_async *, int vid, int qid,
                      struct rte_mbuf **pkts, int cnt, int max_retries,
                      int *retries, int *n_dma);

/* What a copy mode is, in one row: who copies packets into guest memory,
 * who polls the completions and frees the mbufs, and what a port needs
 * while it uses the mode.  The README's table of copy modes says the same,
 * field for field. */
struct copy_mode {
    const char *name;
    bool dma;               /* Copies go to DMA engines: the device needs
                             * async channels. */
    bool tx_lock;           /* 'send' runs under the txq lock; else it is
                             * lock-free and 'rx_work' does the rest. */
    bool sender_retires;    /* The sender queues what it handed to DMA in
                             * its own deferred work list, which retires
                             * it; else 'rx_work' retires it. */
    bool puts_aside;        /* A sender that finds the txq lock taken does
                             * not wait: it puts its packets into the
                             * queue's ring and queues a work item; the
                             * lock's next holder sends them first. */

    send_func *send;

    /* In a 'puts_aside' mode, runs under the txq lock before the sender
     * sends what waits in the queue's ring and then 'pkts'.  Returns true
     * if it took care of 'pkts' itself (put aside, or dropped), with the
     * number it did not send in '*unsent'.  NULL if none. */
    bool (*pre_send)(struct vhost_async *, const struct copy_mode *,
                     int vid, int qid, struct rte_mbuf **pkts, int cnt,
                     int *unsent);

    /* The Tx work of the PMD that polls Rx queue 'qid' of the port, before
     * it receives.  NULL if none. */
    void (*rx_work)(struct vhost_async *, int vid, int qid);

    /* From the port's reconfiguration, while no PMD uses it.  'enter' runs
     * whenever the port is to use the mode ('again' is false when it
     * switches to it) and returns false if it cannot; 'leave' runs when
     * the port switches away, once nothing is in flight.  NULL if there
     * is nothing to do. */
    bool (*enter)(struct vhost_async *, int n_txq, bool again);
    void (*leave)(struct vhost_async *, int vid);

    /* Told what it cost a sender to retire 'n' copies of Tx queue 'qid'
     * from its deferred work list.  NULL if the mode does not weigh it. */
    void (*retired)(struct vhost_async *, int qid, uint64_t cycles,
                    uint32_t n);

    /* Appends the mode's own state of Tx queue 'qid' to the output of
     * vhost-copy-mode-get.  NULL if none. */
    void (*format_txq)(struct ds *, const struct vhost_async *, int qid);
};

/* The table of the Tx copy modes, a row per enum vhost_copy_mode
 * (netdev-dpdk-vhost-async.c). */
extern const struct copy_mode vhost_copy_modes[VHOST_COPY_N_MODES];

/* ---- A port ----------------------------------------------------------- */

/* A vhost port copies in two directions, each with its own table of modes
 * and its own configuration: Tx, into the guest (vhost_copy_modes[]), and
 * Rx, out of the guest (netdev-dpdk-vhost-rx.h).  Mode 0 of each is the
 * CPU's. */
enum copy_dir {
    DIR_TX,
    DIR_RX,
    N_DIRS
};

/* A port's requested mode of one direction, by source (-1: not set). */
struct mode_request {
    int override_mode;          /* ovs-appctl. */
    int option_mode;            /* options:KEY. */
    char *option_value;         /* Last value seen, to spot changes. */
};

struct vhost_async {
    struct ovs_list node;           /* In 'all_ports', under async_mutex. */
    struct netdev *netdev;
    char *name;
    bool server;                    /* A dpdkvhostuser (server-mode) port:
                                     * copies on the CPU only (it has no
                                     * options, so only appctl and the
                                     * default may ask otherwise). */

    /* Requested modes, per direction.  Under async_mutex. */
    struct mode_request req[N_DIRS];
    bool migrating;                 /* netdev-dpdk/vhost-migrate-prepare:
                                     * copies on the CPU and the socket
                                     * registered without ASYNC_COPY, which
                                     * dirty page logging needs.  Under
                                     * async_mutex. */
    atomic_bool logging;            /* The guest's QEMU turned dirty page
                                     * logging on (live migration): the
                                     * async channels are off, and both
                                     * directions copy on the CPU, which
                                     * logs what it writes (see
                                     * logging_start()). */
    atomic_bool relog_reset;        /* A reset asked for a connection that
                                     * lacks vhost's own datapath (see
                                     * 'stale_sockets'). */

    /* Serializes the life-cycle paths that clear queues and touch the
     * rings: reconfigure (main thread) and destroy_device (vhost's thread
     * or, for a port being deleted, the main thread). */
    struct ovs_mutex lc_mutex;

    /* Applied by vhost_async_reconfigure() while no PMD uses the port. */
    atomic_int mode;                /* enum vhost_copy_mode in use. */
    atomic_int rx_mode;             /* enum vhost_rx_mode in use. */
    atomic_int vid;                 /* Device for the PMDs, -1 if none. */
    bool async_registered;          /* Driver registered with ASYNC_COPY. */
    atomic_bool reset_requested;    /* A queue is wedged (see
                                     * vhost_async_request_reset()): the
                                     * next reconfiguration reconnects the
                                     * device. */
    bool refused_logged[N_DIRS];
    bool *channel;                  /* Per vring: async channel registered. */
    char *vhost_id;                 /* Its socket's path, once registered.
                                     * Under async_mutex. */

    struct vhost_tx tx;             /* Tx queues (netdev-dpdk-vhost-tx.h). */
    struct vhost_rx *rx;            /* Rx queues (netdev-dpdk-vhost-rx.h). */
};

static inline int
read_mode(const atomic_int *mode_)
{
    int mode;

    atomic_read_relaxed(CONST_CAST(atomic_int *, mode_), &mode);
    return mode;
}

static inline enum vhost_copy_mode
get_mode(const struct vhost_async *async)
{
    return read_mode(&async->mode);
}

static inline const struct copy_mode *
mode_of(const struct vhost_async *async)
{
    return &vhost_copy_modes[get_mode(async)];
}

static inline enum vhost_rx_mode
get_rx_mode(const struct vhost_async *async)
{
    return read_mode(&async->rx_mode);
}

static inline int
get_vid(const struct vhost_async *async)
{
    int vid;

    atomic_read_relaxed(&CONST_CAST(struct vhost_async *, async)->vid, &vid);
    return vid;
}

/* Whether dirty page logging is on (see logging_start()).  The data path
 * reads it after the vring's 'channel', in that order (the compiler
 * barrier, and x86, which does not reorder loads with loads): a sender
 * that finds a channel that the main thread registered while
 * logging_start() ran finds logging on. */
static inline bool
logging_on(const struct vhost_async *async)
{
    bool logging;

    rte_compiler_barrier();
    atomic_read_relaxed(&CONST_CAST(struct vhost_async *, async)->logging,
                        &logging);
    return logging;
}

static inline int
copies_inflight(const struct vhost_vq_copies *copies)
{
    int n;

    atomic_read_relaxed(&CONST_CAST(struct vhost_vq_copies *, copies)
                        ->inflight, &n);
    return n;
}

/* True if every dmadev that may hold 'copies' is out of service: what is in
 * flight can never complete. */
static inline bool
engines_dead(const struct vhost_vq_copies *copies)
{
    uint64_t mask;

    atomic_read_relaxed(&CONST_CAST(struct vhost_vq_copies *, copies)
                        ->dma_mask, &mask);
    return mask && !(mask & ~netdev_dpdk_dma_retired());
}

/* From netdev-dpdk-vhost-async.c, for the send path: asks for the device
 * of 'async' to be reset (once), since vring 'vring' of it is wedged; and
 * counts, from any thread, that a Tx queue's tracking of the mbufs in
 * flight fell out of step with vhost (see struct vhost_held). */
void vhost_async_request_reset(struct vhost_async *, int vring);
void vhost_async_held_lost(void);

#endif /* netdev-dpdk-vhost-private.h */
