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

#ifndef NETDEV_DPDK_DMA_H
#define NETDEV_DPDK_DMA_H 1

#include <stdbool.h>
#include <stdint.h>

/* DMA engines (DPDK dmadevs) for vhost async copies, one per PMD thread.
 *
 * Every dmadev that DPDK probed (DSA/IOAT PCI devices, or vdevs such as
 * dma_skeleton and dma_swcopy given in other_config:dpdk-extra) is in the
 * pool.  A PMD thread takes one when it attaches to DPDK, preferring its
 * own NUMA node, configures it with one mem-to-mem vchan and registers it
 * with vhost; it gives it back when it detaches.  A thread without one
 * copies on the CPU.
 *
 * "ovs-appctl netdev-dpdk/dmadev-show" lists the pool. */

/* The vchan every dmadev is used through. */
#define NETDEV_DPDK_DMA_VCHAN 0

/* Largest dmadev id vhost accepts (RTE_DMADEV_DEFAULT_MAX is 64). */
#define NETDEV_DPDK_DMA_MAX_DEVS 64

void netdev_dpdk_dma_init(void);

void netdev_dpdk_dma_thread_attach(unsigned core_id);
void netdev_dpdk_dma_thread_detach(void);

/* Returns the dmadev of the calling thread, or -1 if it has none or its
 * dmadev was taken out of service. */
int16_t netdev_dpdk_dma_get(void);

/* Takes the dmadevs in 'mask' (a bit per dmadev id) out of service,
 * logging 'why' once per dmadev, and fences them: when this returns, each
 * one has been stopped (rte_dma_stop()), so that it finishes or drops the
 * copies it holds and starts none afterwards; a copy it did not complete
 * can then never land in guest memory that vhost unmaps.  Their owners
 * copy on the CPU until "ovs-appctl netdev-dpdk/dmadev-enable" restarts
 * an engine, which it refuses while ports still count copies on it. */
void netdev_dpdk_dma_retire(uint64_t mask, const char *why);

struct smap;

/* Applies other_config:dma-stall-timeout (ms, default 1000, 0: off): an
 * engine with copies outstanding that completes none for that long is
 * taken out of service by the health watch, and fenced. */
void netdev_dpdk_dma_set_config(const struct smap *ovs_other_config);

/* The dmadevs in 'mask' that have copies they did not execute yet (or a
 * failed one not collected). */
uint64_t netdev_dpdk_dma_busy(uint64_t mask);

/* The dmadevs in 'mask' that, within 'ms' milliseconds, completed (or
 * failed) every copy submitted to them before the call: they no longer
 * hold any copy that was in flight then. */
uint64_t netdev_dpdk_dma_caught_up(uint64_t mask, int ms);

/* The completions the dmadevs in 'mask' reported so far, in all. */
uint64_t netdev_dpdk_dma_reported(uint64_t mask);

/* Tells the pool how many copies of vhost ports are still in flight on a
 * dmadev, for dmadev-enable. */
void netdev_dpdk_dma_set_users_cb(unsigned int (*)(int16_t id));

/* The dmadevs out of service, a bit per id.  An engine whose vchan halts on
 * an error (a failed copy) is taken out of service by a health watch that
 * looks every 100 ms. */
uint64_t netdev_dpdk_dma_retired(void);

/* Appends to 'names' (if nonnull) the engines that PMD threads copy on now
 * (owned, set up and in service), separated by ", ", and returns how
 * many.  Takes the pool's mutex, which the pool holds while it asks the
 * copy modes about their copies (netdev_dpdk_dma_set_users_cb()): the
 * caller holds none of theirs. */
struct ds;
int netdev_dpdk_dma_in_service(struct ds *names);

/* A number that changes whenever netdev_dpdk_dma_in_service() may say
 * something else.  Any thread. */
uint64_t netdev_dpdk_dma_service_changes(void);

#endif /* netdev-dpdk-dma.h */
