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
 *   - rte_dma_stop() waits until the worker has executed every copy that
 *     was submitted; completions can still be collected while the device
 *     is stopped, until the next rte_dma_start() resets the ring.  Copies
 *     enqueued but never submitted are discarded by stop.
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

/* Registers the "dma_swcopy" vdev driver with DPDK's vdev bus.  Must be
 * called before rte_eal_init() probes devices; calling it again is
 * harmless. */
void dma_swcopy_register(void);

#endif /* dma-swcopy.h */
