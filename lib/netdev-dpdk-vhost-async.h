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

#ifndef NETDEV_DPDK_VHOST_ASYNC_H
#define NETDEV_DPDK_VHOST_ASYNC_H 1

#include <stdbool.h>
#include <stdint.h>

#include <rte_spinlock.h>

struct netdev;
struct netdev_custom_stats;
struct rte_mbuf;
struct rte_mempool;
struct smap;

/* Per-port async state, owned by a netdev_dpdk vhost port. */
struct vhost_async;

void vhost_async_init(bool iommu, bool postcopy);
void vhost_async_set_default(const struct smap *ovs_other_config);

struct vhost_async *vhost_async_create(struct netdev *);
void vhost_async_destroy(struct vhost_async *);

/* Configuration, from the port's set_config (options:vhost-copy-mode and
 * options:vhost-rx-copy-mode).
 * Requests a reconfiguration of the port if its mode must change, and
 * then returns true. */
bool vhost_async_set_config(struct vhost_async *, const struct smap *args);

/* Driver registration.  vhost_async_driver_flags() returns the extra
 * rte_vhost_driver_register() flags for 'flags' (ASYNC_COPY when the port
 * may use async copies).  vhost_async_must_reregister() says whether the
 * port's registered client socket must be unregistered, so that the
 * caller registers it again (a mode that needs ASYNC_COPY, a device to
 * reset). */
uint64_t vhost_async_driver_flags(struct vhost_async *, uint64_t flags);
bool vhost_async_must_reregister(struct vhost_async *, const char *vhost_id,
                                 uint64_t driver_flags);

/* Applies the requested copy mode while no PMD uses the port (from the
 * port's reconfigure): drains or clears what is in flight first. */
void vhost_async_reconfigure(struct vhost_async *, int vid, int n_txq);

/* vhost callbacks. */
int vhost_async_new_connection(int vid);
void vhost_async_new_device(struct vhost_async *, int vid);
void vhost_async_device_gone(struct vhost_async *);
/* vhost_async_destroy_device() with a NULL port looks the device up by
 * its vid: for a port that netdev-dpdk is deleting. */
void vhost_async_destroy_device(struct vhost_async *, int vid);
/* Returns false if netdev-dpdk must ignore this vring_state_changed call:
 * vhost's enable of a vring the guest disabled, around a memory table
 * change. */
bool vhost_async_vring_state_changed(int vid, uint16_t vring, int enable);

/* vhost's pre-message handler of a connection, registered by
 * vhost_async_new_connection() for as long as the connection lasts: 'msg'
 * is the vhost-user message that vhost is about to handle. */
enum vhost_async_msg_verdict {
    VHOST_ASYNC_MSG_PASS,       /* vhost handles the message. */
    VHOST_ASYNC_MSG_DONE,       /* vhost must not handle it: it would
                                 * change nothing and fail. */
    VHOST_ASYNC_MSG_CLOSE,      /* vhost must close the connection. */
    VHOST_ASYNC_MSG_REPLY,      /* vhost must send 'msg', which now holds
                                 * the reply, and not handle it. */
};
enum vhost_async_msg_verdict vhost_async_pre_message(int vid, void *msg);

/* Datapath.  vhost_async_active() says whether the send path must go
 * through vhost_async_send() instead of rte_vhost_enqueue_burst(). */
bool vhost_async_active(const struct vhost_async *);

/* Sends 'cnt' packets on txq 'qid' (vhost vring 2 * 'qid') of device
 * 'vid'.  Takes ownership of all of them.  'tx_lock' is the txq lock of
 * the port (taken here when the mode needs it).  Returns the number of
 * packets it could not send (already freed), for the caller's drop
 * counters, and the number of enqueue retries in '*retries'. */
int vhost_async_send(struct vhost_async *, int vid, int qid,
                     struct rte_mbuf **pkts, int cnt, int max_retries,
                     int *retries, rte_spinlock_t *tx_lock);

/* Called by the PMD that polls rxq 'qid' of the port before it receives:
 * runs the Tx work that the mode assigns to the Rx side (v3, ring). */
void vhost_async_rx_hook(struct vhost_async *, int vid, int qid);

/* Receives up to 'count' packets from Rx queue 'qid' of device 'vid' into
 * mbufs of 'mp', in the port's Rx copy mode (netdev-dpdk-vhost-rx.h),
 * instead of rte_vhost_dequeue_burst().  Called only by the PMD that polls
 * the queue. */
uint16_t vhost_async_dequeue(struct vhost_async *, int vid, int qid,
                             struct rte_mempool *mp, struct rte_mbuf **pkts,
                             uint16_t count);

/* Interface statistics.  vhost_async_tx_dropped() is what the async path
 * dropped (and freed) on its own, for the port's tx_dropped, and
 * vhost_async_rx_dropped() what it dropped of the guest's packets, for its
 * rx_dropped. */
uint64_t vhost_async_tx_dropped(const struct vhost_async *);
uint64_t vhost_async_rx_dropped(const struct vhost_async *);
void vhost_async_get_custom_stats(const struct vhost_async *,
                                  struct netdev_custom_stats *);

/* Adds the port's copy modes to its Interface 'status' column: per
 * direction the mode in use ("tx-copy-mode", "rx-copy-mode") and the one
 * configured, with where it comes from ("tx-copy-mode-configured", ...),
 * the DMA engines that PMD threads copy on ("dma-engines"), whether the
 * guest's dirty page logging is on and whether the port can be migrated
 * live now.  Called with the device's mutex held. */
void vhost_async_get_status(struct vhost_async *, struct smap *status);

#endif /* netdev-dpdk-vhost-async.h */
