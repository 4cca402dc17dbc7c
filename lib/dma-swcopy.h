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

#ifndef DMA_SWCOPY_H
#define DMA_SWCOPY_H 1

#include <stdbool.h>
#include <stdint.h>

/* dma_swcopy: a software DMA engine as a DPDK dmadev.
 *
 * A DPDK 22.11 vdev driver, "dma_swcopy", whose instances
 * ("--vdev=dma_swcopy0,lcore=1", "--vdev=dma_swcopy1", ...) are dmadevs
 * with one mem-to-mem vchan.  Copies are done by one worker thread per
 * instance, pinned to a CPU of its own, so that the thread that submits
 * copies pays about what a hardware engine (Intel DSA) costs it:
 * descriptors go into a single-producer/single-consumer ring that is
 * published with one store per batch, and completions come back as one
 * index that the submitter reads with one load.  No per-copy atomics.
 *
 * Devargs:
 *
 *     lcore=N   Pin the worker to CPU N (a CPU number as the kernel counts
 *               them, not an EAL lcore id).  Without it, the worker takes a
 *               CPU that no EAL lcore uses (or, when EAL uses every CPU, the
 *               last CPU, with a warning).
 *
 * Semantics that differ from a hardware engine, see
 * Documentation/dma-swcopy.md:
 *
 *   - IOVA as VA only: addresses are dereferenced as virtual addresses;
 *     the driver refuses to probe when EAL runs with --iova-mode=pa.
 *
 *   - Errors: a copy of length 0 or above DMA_SWCOPY_MAX_LEN is reported
 *     as failed with RTE_DMA_STATUS_INVALID_LENGTH, a copy from or to
 *     address 0 as failed with RTE_DMA_STATUS_INVALID_SRC_ADDR or
 *     RTE_DMA_STATUS_INVALID_DST_ADDR.  Other invalid addresses are NOT
 *     detected: the worker faults like any memcpy() would.
 *
 *   - rte_dma_stop() is a fence: when it returns, the worker has executed
 *     every copy that was submitted (at full speed, whatever delay was
 *     asked), or, if the engine is held, dropped them, and it starts no
 *     copy until the next rte_dma_start(), which resets the ring.
 *     Completions of what it executed can still be collected while the
 *     device is stopped.  Copies enqueued but never submitted are
 *     discarded by stop.
 *
 *   - An idle engine parks its worker in the kernel: a stopped device
 *     costs nothing, a started idle one wakes about 1000 times a second.
 *
 * Linking: with a static library and no --whole-archive (ovs-vswitchd),
 * the object that holds the driver's registration constructor is only
 * linked when something references it.  A program that wants the driver
 * calls dma_swcopy_register() before rte_eal_init(); that both pulls the
 * object in and registers the driver (it is idempotent, and the
 * constructor calls it too). */

/* The vdev driver name. */
#define DMA_SWCOPY_DRIVER_NAME "dma_swcopy"

/* Ring sizes accepted by rte_dma_vchan_setup() (nb_desc, a power of 2). */
#define DMA_SWCOPY_MIN_DESC 32
#define DMA_SWCOPY_MAX_DESC 8192

/* Longest copy.  Longer ones (and zero-length ones) fail with
 * RTE_DMA_STATUS_INVALID_LENGTH.  struct rte_dma_info has no field for it. */
#define DMA_SWCOPY_MAX_LEN (16u * 1024 * 1024)

/* Fault injection, for tests and for reproducing problems.
 *
 * Each call names an instance by its dmadev name ("dma_swcopy0") and
 * returns 0, or -ENODEV if no dma_swcopy instance has that name.  They may
 * be called from any thread, at any time after the device was probed.
 *
 *   hold      the worker stops executing copies: those already submitted
 *             and those submitted later stay in flight (the submitter sees
 *             no completions) until dma_swcopy_release(), or until
 *             'release_after_ms' have passed if it is not 0 (whether or
 *             not the engine has work then).  Stopping or closing a held
 *             device drops the copies it holds, as resetting a hung
 *             hardware engine does: they are never executed and never
 *             reported complete.  The hold ends with the stop.
 *   fail      the next 'n' copies complete with an error status
 *             (RTE_DMA_STATUS_ERROR_UNKNOWN) and copy nothing, as a failing
 *             hardware engine reports them; 0 cancels.
 *   delay     each copy takes at least 'us' microseconds (and progress is
 *             published after each copy); 0 turns it off. */
struct dma_swcopy_state {
    int cpu;                    /* Worker CPU. */
    bool started;               /* Between rte_dma_start() and stop. */
    bool held;
    uint32_t release_in_ms;     /* A timed hold's time left, else 0. */
    uint32_t fail_left;         /* Copies still to fail on purpose. */
    uint32_t delay_us;
    uint64_t submitted;         /* Copies submitted to the worker. */
    uint64_t executed;          /* Copies the worker executed or failed. */
    uint64_t completed;         /* Completions reported to the submitter,
                                 * failed ones included (as rte_dma_stats
                                 * counts them). */
    uint64_t failed;            /* Copies that completed with an error. */
    uint64_t injected;          /* Of those, failed by dma_swcopy_fail(). */
    uint64_t holds;             /* Holds so far. */
    uint64_t stop_executed;     /* Copies a stop executed (not held). */
    uint64_t stop_dropped;      /* Copies a stop of a held engine dropped:
                                 * never executed, never completed. */
};

int dma_swcopy_hold(const char *name, uint32_t release_after_ms);
int dma_swcopy_release(const char *name);
int dma_swcopy_fail(const char *name, uint32_t n);
int dma_swcopy_delay(const char *name, uint32_t us);
int dma_swcopy_get_state(const char *name, struct dma_swcopy_state *);

/* The copies that a stopped instance will never report complete.
 *
 * Calls 'cb' once for each copy that instance 'name' was given and has not
 * reported complete through rte_dma_completed() or
 * rte_dma_completed_status(), oldest first: those a stop of a held engine
 * dropped, those behind a failed copy, and those executed but not reported
 * yet.  Their descriptors stay intact from the stop until the next
 * rte_dma_start(), which forgets them.  Returns how many copies there
 * were, -ENODEV if no dma_swcopy instance has that name, or -EBUSY if it is
 * started.
 *
 * The caller makes sure that no thread uses the device meanwhile (no copy,
 * submit or completion call), and that nothing will ask for these
 * completions any more: then the engine never touches the memory these
 * copies name, and their owner may take it back.  (vhost never hands back
 * the mbuf of a dequeue copy that its engine did not report complete:
 * netdev-dpdk-dma.c frees those when it restarts the engine.) */
typedef void dma_swcopy_copy_cb(void *aux, uint64_t src, uint64_t dst,
                                uint32_t len);
int dma_swcopy_unreported(const char *name, dma_swcopy_copy_cb *cb,
                          void *aux);

/* Registers the "dma_swcopy" vdev driver with DPDK's vdev bus.  Must be
 * called before rte_eal_init() probes devices; calling it again is
 * harmless. */
void dma_swcopy_register(void);

#endif /* dma-swcopy.h */
