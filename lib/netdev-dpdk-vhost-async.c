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

#include "netdev-dpdk-vhost-async.h"

#include <errno.h>
#include <limits.h>

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_spinlock.h>
#include <rte_vhost.h>
#include <rte_vhost_async.h>

#include "bitmap.h"
#include "coverage.h"
#include "netdev-dpdk-dma.h"
#include "netdev-dpdk-vhost-auto.h"
#include "netdev-dpdk-vhost-rx.h"
#include "netdev-dpdk-vhost-private.h"
#include "netdev-dpdk-vhost-shared.h"
#include "netdev-dpdk-vhost-tx.h"
#include "netdev-provider.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/list.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-fork-config.h"
#include "ovs-fork-testing.h"
#include "ovs-thread.h"
#include "smap.h"
#include "sset.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_vhost_async);

COVERAGE_DEFINE(vhost_async_logging_started);
COVERAGE_DEFINE(vhost_async_vring_bracket);
COVERAGE_DEFINE(vhost_async_enable_passed_over);
COVERAGE_DEFINE(vhost_async_stale_closed);
COVERAGE_DEFINE(vhost_async_held_lost);

/* Coverage of events seen on vhost's threads (its message and reconnection
 * threads, which run our callbacks).  COVERAGE_INC adds to a per-thread
 * count that only coverage_clear(), which OVS's poll loop calls, adds to
 * the totals that coverage/show and coverage/read-counter print: vhost's
 * threads never run it, so their counts would never be seen.  Such events
 * count here instead (vhost_thread_count()), and the main thread adds
 * them to their coverage counters (flush_vhost_thread_counts()) when it
 * next refreshes a port's status or statistics, which the event asks
 * for. */
struct vhost_thread_counter {
    atomic_uint32_t pending;
    void (*add)(unsigned int n);    /* COVERAGE_ADD of the counter. */
};

#define VHOST_THREAD_COUNTER(COUNTER) \
    static struct vhost_thread_counter COUNTER##_vt = { 0, COUNTER##_add }
VHOST_THREAD_COUNTER(vhost_async_logging_started);
VHOST_THREAD_COUNTER(vhost_async_vring_bracket);
VHOST_THREAD_COUNTER(vhost_async_enable_passed_over);
VHOST_THREAD_COUNTER(vhost_async_stale_closed);
VHOST_THREAD_COUNTER(vhost_async_held_lost);

static struct vhost_thread_counter *const vhost_thread_counters[] = {
    &vhost_async_logging_started_vt, &vhost_async_vring_bracket_vt,
    &vhost_async_enable_passed_over_vt, &vhost_async_stale_closed_vt,
    &vhost_async_held_lost_vt,
};

/* ---- The copy modes ----------------------------------------------------- */

/* The Tx copy modes, a row each (struct copy_mode): the functions they name
 * are netdev-dpdk-vhost-tx.c's.  The README's table of copy modes says the
 * same, row for row. */
const struct copy_mode vhost_copy_modes[VHOST_COPY_N_MODES] = {
    /* Stock synchronous rte_vhost_enqueue_burst() by the sender. */
    [VHOST_COPY_CPU] = {
        .name = "cpu",
        .tx_lock = true,
        .send = vhost_tx_cpu_mode_send,
    },
    /* The sender submits to its PMD's DMA engine under the txq lock; the
     * PMD that polls the port's Rx queue polls the completions and
     * frees. */
    [VHOST_COPY_V3] = {
        .name = "v3",
        .dma = true,
        .tx_lock = true,
        .send = vhost_tx_dma_or_cpu_send,
        .rx_work = vhost_tx_rx_poll_completions,
    },
    /* Senders put mbufs into a lock-free multi-producer ring per txq; the
     * PMD that polls the port's Rx queue drains the ring, submits on its
     * engine, polls the completions and frees. */
    [VHOST_COPY_RING] = {
        .name = "ring",
        .dma = true,
        .send = vhost_tx_ring_send,
        .rx_work = vhost_tx_ring_rx_work,
        .enter = vhost_tx_ring_enter,
        .leave = vhost_tx_ring_leave,
    },
    /* The sender submits on its engine and queues a work item in its own
     * deferred work list (dpif-netdev-defer.h), which it runs after each
     * round of Rx polling until the copies have completed. */
    [VHOST_COPY_DEFER] = {
        .name = "defer",
        .dma = true,
        .tx_lock = true,
        .sender_retires = true,
        .puts_aside = true,
        .send = vhost_tx_dma_or_cpu_send,
        .enter = vhost_tx_aside_enter,
        .leave = vhost_tx_ring_leave,
    },
    /* Per Tx queue, cpu or defer, whichever costs the sending PMD fewer
     * cycles per packet (netdev-dpdk-vhost-auto.h). */
    [VHOST_COPY_AUTO] = {
        .name = "auto",
        .dma = true,
        .tx_lock = true,
        .sender_retires = true,
        .puts_aside = true,
        .send = vhost_tx_auto_send,
        .pre_send = vhost_tx_auto_pre_send,
        .enter = vhost_tx_auto_enter,
        .leave = vhost_tx_ring_leave,
        .retired = vhost_tx_auto_retired,
        .format_txq = vhost_tx_auto_format_txq,
    },
};

/* ---- The two directions ------------------------------------------------ */

struct copy_dir_info {
    const char *key;            /* Key in options and other_config. */
    const char *status_key;     /* Key in the Interface's status column. */
    const char *what;           /* "vhost copy mode", for messages. */
    const char *set_cmd;        /* ovs-appctl command that overrides. */
    int n_modes;
    const char *(*name)(int mode);
    bool (*dma)(int mode);      /* Needs async channels. */
};

static const char *
tx_mode_name(int mode)
{
    return vhost_copy_modes[mode].name;
}

static bool
tx_mode_dma(int mode)
{
    return vhost_copy_modes[mode].dma;
}

static const char *
rx_mode_name(int mode)
{
    return vhost_rx_mode_name(mode);
}

static bool
rx_mode_dma(int mode)
{
    return vhost_rx_mode_dma(mode);
}

BUILD_ASSERT_DECL(VHOST_COPY_CPU == 0 && VHOST_RX_CPU == 0);

static const struct copy_dir_info dirs[N_DIRS] = {
    [DIR_TX] = {
        .key = "vhost-copy-mode",
        .status_key = "tx-copy-mode",
        .what = "vhost copy mode",
        .set_cmd = "netdev-dpdk/vhost-copy-mode-set",
        .n_modes = VHOST_COPY_N_MODES,
        .name = tx_mode_name,
        .dma = tx_mode_dma,
    },
    [DIR_RX] = {
        .key = "vhost-rx-copy-mode",
        .status_key = "rx-copy-mode",
        .what = "vhost Rx copy mode",
        .set_cmd = "netdev-dpdk/vhost-rx-copy-mode-set",
        .n_modes = VHOST_RX_N_MODES,
        .name = rx_mode_name,
        .dma = rx_mode_dma,
    },
};

/* The directions in 'dirs_mask' (a bit per enum copy_dir). */
#define DIR_BIT(DIR) (1u << (DIR))
#define BOTH_DIRS (DIR_BIT(DIR_TX) | DIR_BIT(DIR_RX))

/* True if vring 'vr' copies in a direction of 'dirs_mask'. */
static bool
vring_in(int vr, unsigned int dirs_mask)
{
    return dirs_mask & DIR_BIT(vring_is_rx(vr) ? DIR_RX : DIR_TX);
}

static struct ovs_mutex async_mutex = OVS_MUTEX_INITIALIZER;
static struct ovs_list all_ports OVS_GUARDED_BY(async_mutex)
    = OVS_LIST_INITIALIZER(&all_ports);
/* other_config:KEY of each direction. */
static int default_mode[N_DIRS] OVS_GUARDED_BY(async_mutex) = { -1, -1 };
static char *default_value[N_DIRS] OVS_GUARDED_BY(async_mutex);

/* ASYNC_COPY cannot be combined with these vhost features. */
static bool host_iommu;
static bool host_postcopy;

/* vid -> port, for the vhost callbacks that only know the vid. */
static struct ovs_mutex vid_mutex = OVS_MUTEX_INITIALIZER;

/* Per vid, the state of each vring as the guest set it: bit VRING_ON(vr)
 * is set while it is enabled, bit VRING_BRACKET(vr) between the disable
 * and the enable of a memory table change while it is disabled (see
 * vhost_async_vring_state_changed()). */
#define MAX_VRINGS (2 * MAX_TXQ)
#define VRING_ON(VR) (2 * (VR))
#define VRING_BRACKET(VR) (2 * (VR) + 1)
static unsigned long *vring_bits[RTE_MAX_VHOST_DEVICE]
    OVS_GUARDED_BY(vid_mutex);
/* Per vid, true while vhost handles a SET_MEM_TABLE message (from its
 * pre-message call to the next message's): the vring state changes it
 * notifies meanwhile are its bracket, not the guest's. */
static bool in_mem_table[RTE_MAX_VHOST_DEVICE] OVS_GUARDED_BY(vid_mutex);
/* Per vid, when the clears of the vrings of a SET_MEM_TABLE give up. */
static long long int mem_table_deadline[RTE_MAX_VHOST_DEVICE]
    OVS_GUARDED_BY(vid_mutex);
static struct vhost_async *vid_map[RTE_MAX_VHOST_DEVICE]
    OVS_GUARDED_BY(vid_mutex);
/* The vhost-user sockets whose features rte_vhost_driver_set_features()
 * changed, so that vhost accepts dirty page logging (see
 * accept_log_all()), since they were last registered.  That call also takes
 * vhost's own virtio-net datapath away from the socket's later
 * connections: the first of them has the socket registered again (see
 * vhost_async_new_connection()). */
static struct sset stale_sockets OVS_GUARDED_BY(vid_mutex)
    = SSET_INITIALIZER(&stale_sockets);

/* Counts an event of 'c' on any thread, vhost's included (see struct
 * vhost_thread_counter), and has the main thread refresh the status of
 * 'async' (if nonnull), which adds it to its coverage counter. */
static void
vhost_thread_count(struct vhost_thread_counter *c, struct vhost_async *async)
{
    uint32_t orig;

    atomic_add_relaxed(&c->pending, 1, &orig);
    if (async) {
        netdev_change_seq_changed(async->netdev);
    }
}

void
vhost_async_held_lost(void)
{
    vhost_thread_count(&vhost_async_held_lost_vt, NULL);
}

/* On the main thread: adds the events that vhost_thread_count() counted to
 * their coverage counters. */
static void
flush_vhost_thread_counts(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(vhost_thread_counters); i++) {
        struct vhost_thread_counter *c = vhost_thread_counters[i];
        uint32_t n = atomic_exchange(&c->pending, 0);

        if (n) {
            c->add(n);
        }
    }
}

/* Forgets that 'path''s socket lost vhost's datapath: it is registered
 * anew. */
static void
forget_stale_socket(const char *path)
{
    ovs_mutex_lock(&vid_mutex);
    sset_find_and_delete(&stale_sockets, path);
    ovs_mutex_unlock(&vid_mutex);
}

/* Life-cycle trouble (engines that do not complete). */
static struct vlog_rate_limit lc_rl = VLOG_RATE_LIMIT_INIT(1, 5);

static void vhost_async_unixctl_init(void);
static char *iface_error(const char *name);

static bool
mode_from_string(enum copy_dir dir, const char *s, int *mode)
{
    for (int i = 0; i < dirs[dir].n_modes; i++) {
        if (s && !strcmp(s, dirs[dir].name(i))) {
            *mode = i;
            return true;
        }
    }
    return false;
}

/* The names of the modes of 'dir', in table order, separated by 'sep'. */
static char *
mode_names_joined(enum copy_dir dir, const char *sep)
{
    struct ds ds = DS_EMPTY_INITIALIZER;

    for (int i = 0; i < dirs[dir].n_modes; i++) {
        ds_put_format(&ds, "%s%s", i ? sep : "", dirs[dir].name(i));
    }
    return ds_steal_cstr(&ds);
}

/* "cpu, v3, ...", for messages. */
static const char *
mode_list(enum copy_dir dir)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;
    static char *lists[N_DIRS];

    if (ovsthread_once_start(&once)) {
        for (int d = 0; d < N_DIRS; d++) {
            lists[d] = mode_names_joined(d, ", ");
        }
        ovsthread_once_done(&once);
    }
    return lists[dir];
}

/* The mode of 'dir' in use. */
static int
applied_mode(const struct vhost_async *async, enum copy_dir dir)
{
    return dir == DIR_TX ? get_mode(async) : get_rx_mode(async);
}

/* The mode of 'dir' that the configuration asks for: the appctl override,
 * else the port's option, else other_config's default, else cpu. */
static int
requested_mode(const struct vhost_async *async, enum copy_dir dir)
    OVS_REQUIRES(async_mutex)
{
    const struct mode_request *req = &async->req[dir];

    if (async->server || async->migrating) {
        return 0;
    }
    return (req->override_mode >= 0 ? req->override_mode
            : req->option_mode >= 0 ? req->option_mode
            : default_mode[dir] >= 0 ? default_mode[dir]
            : 0);
}

/* Where the requested mode of 'dir' comes from, as "options:KEY". */
static void
put_requested_source(struct ds *s, const struct vhost_async *async,
                     enum copy_dir dir)
    OVS_REQUIRES(async_mutex)
{
    const struct mode_request *req = &async->req[dir];

    if (async->migrating) {
        ds_put_cstr(s, "netdev-dpdk/vhost-migrate-prepare");
    } else if (req->override_mode >= 0) {
        ds_put_cstr(s, "ovs-appctl");
    } else if (req->option_mode >= 0) {
        ds_put_format(s, "options:%s", dirs[dir].key);
    } else if (default_mode[dir] >= 0) {
        ds_put_format(s, "other_config:%s", dirs[dir].key);
    } else {
        ds_put_cstr(s, "default");
    }
}

/* True if the configuration asks 'async' to copy on DMA engines in either
 * direction. */
static bool
wants_dma(const struct vhost_async *async)
    OVS_REQUIRES(async_mutex)
{
    for (int d = 0; d < N_DIRS; d++) {
        if (dirs[d].dma(requested_mode(async, d))) {
            return true;
        }
    }
    return false;
}

/* True if a mode that the configuration asks 'async' for is not the one in
 * use. */
static bool
mode_changed(const struct vhost_async *async)
    OVS_REQUIRES(async_mutex)
{
    for (int d = 0; d < N_DIRS; d++) {
        if (requested_mode(async, d) != applied_mode(async, d)) {
            return true;
        }
    }
    return false;
}

/* Returns NULL if 'async' may use async copies, else why not. */
static const char *
async_refused(void)
{
    if (host_iommu) {
        return "vhost-iommu-support is enabled and vhost async copies "
               "cannot be combined with IOMMU support";
    }
    if (host_postcopy) {
        return "vhost-postcopy-support is enabled and vhost async copies "
               "cannot be combined with postcopy live migration";
    }
    return NULL;
}

static unsigned int engine_users(int16_t dma);

void
vhost_async_init(bool iommu, bool postcopy)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        vhost_tx_init();
        vhost_rx_init();
        netdev_dpdk_dma_set_users_cb(engine_users);
        fork_iface_error_register(iface_error);
        ovsthread_once_done(&once);
    }
    host_iommu = iommu;
    host_postcopy = postcopy;
    netdev_dpdk_dma_init();
    vhost_async_unixctl_init();
}

/* Requests a reconfiguration of every port whose requested mode differs
 * from the one in use. */
static void
request_reconfigure_changed(void)
    OVS_REQUIRES(async_mutex)
{
    struct vhost_async *async;

    LIST_FOR_EACH (async, node, &all_ports) {
        if (mode_changed(async)) {
            netdev_request_reconfigure(async->netdev);
        }
    }
}

/* The error of 'value', not a mode of 'dir', in column 'key' ("options"),
 * for the log and the Interface's error column. */
static char *
mode_value_error(enum copy_dir dir, const char *key, const char *value)
{
    return xasprintf("invalid %s:%s \"%s\" (expected one of: %s); keeping "
                     "the current %s", key, dirs[dir].key, value,
                     mode_list(dir), dirs[dir].what);
}

/* Parses 'value' of 'key' (of 'dir') for 'what'; returns the mode, -1 if
 * unset, or -2 (after logging an error) if invalid. */
static int
parse_mode_value(enum copy_dir dir, const char *value, const char *key,
                 const char *what)
{
    int mode;

    if (!value || !value[0]) {
        return -1;
    }
    if (!mode_from_string(dir, value, &mode)) {
        char *error = mode_value_error(dir, key, value);

        VLOG_ERR("%s: %s", what, error);
        free(error);
        return -2;
    }
    return mode;
}

/* The port named 'name', or NULL. */
static struct vhost_async *
find_port(const char *name)
    OVS_REQUIRES(async_mutex)
{
    struct vhost_async *async;

    LIST_FOR_EACH (async, node, &all_ports) {
        if (!strcmp(async->name, name)) {
            return async;
        }
    }
    return NULL;
}

/* The Interface 'error' column of port 'name' (fork_iface_error()): the
 * copy mode options that it has, or the defaults that it takes, that are
 * not valid.  Like the log, it says that nothing changed for them. */
static char *
iface_error(const char *name)
{
    struct ds error = DS_EMPTY_INITIALIZER;
    struct vhost_async *async;

    ovs_mutex_lock(&async_mutex);
    async = find_port(name);
    for (int d = 0; async && !async->server && d < N_DIRS; d++) {
        const char *option = async->req[d].option_value;
        bool own = option && option[0];
        const char *value = own ? option : default_value[d];
        int mode;

        if (value && value[0] && !mode_from_string(d, value, &mode)) {
            char *msg = mode_value_error(d, own ? "options"
                                         : "Open_vSwitch other_config",
                                         value);

            ds_put_format(&error, "%s%s", error.length ? "; " : "", msg);
            free(msg);
        }
    }
    ovs_mutex_unlock(&async_mutex);
    if (!error.length) {
        ds_destroy(&error);
        return NULL;
    }
    return ds_steal_cstr(&error);
}

/* other_config:vhost-copy-mode and vhost-rx-copy-mode, the defaults of
 * every vhost port.  Called on every pass of the main loop. */
void
vhost_async_set_default(const struct smap *ovs_other_config)
{
    static uint64_t engines_seen;
    uint64_t engines;

    vhost_auto_set_config(ovs_other_config);
    netdev_dpdk_dma_set_config(ovs_other_config);
    ovs_mutex_lock(&async_mutex);
    engines = netdev_dpdk_dma_service_changes();
    if (engines != engines_seen) {
        struct vhost_async *async;

        /* Every port's status column shows the engines in service. */
        engines_seen = engines;
        LIST_FOR_EACH (async, node, &all_ports) {
            netdev_change_seq_changed(async->netdev);
        }
    }
    for (int d = 0; d < N_DIRS; d++) {
        const char *value = smap_get(ovs_other_config, dirs[d].key);
        int mode;

        if (nullable_string_is_equal(value, default_value[d])) {
            continue;
        }
        mode = parse_mode_value(d, value, "other_config", "Open_vSwitch");
        free(default_value[d]);
        default_value[d] = nullable_xstrdup(value);
        if (mode != -2 && mode != default_mode[d]) {
            default_mode[d] = mode;
            VLOG_INFO("Default %s set to %s", dirs[d].what,
                      mode >= 0 ? dirs[d].name(mode) : "cpu (unset)");
            request_reconfigure_changed();
        }
    }
    ovs_mutex_unlock(&async_mutex);
}

struct vhost_async *
vhost_async_create(struct netdev *netdev)
{
    struct vhost_async *async = xzalloc(sizeof *async);

    async->netdev = netdev;
    async->name = xstrdup(netdev_get_name(netdev));
    async->server = !strcmp(netdev_get_type(netdev), "dpdkvhostuser");
    for (int d = 0; d < N_DIRS; d++) {
        async->req[d].override_mode = -1;
        async->req[d].option_mode = -1;
    }
    async->rx = vhost_rx_create(async->name);
    atomic_init(&async->rx_mode, VHOST_RX_CPU);
    ovs_mutex_init(&async->lc_mutex);
    atomic_init(&async->mode, VHOST_COPY_CPU);
    atomic_init(&async->vid, -1);
    atomic_init(&async->reset_requested, false);
    atomic_init(&async->tx.held_until, 0);
    async->channel = xcalloc(2 * MAX_TXQ, sizeof *async->channel);
    async->tx.txqs = xzalloc_cacheline(MAX_TXQ * sizeof *async->tx.txqs);
    for (int i = 0; i < MAX_TXQ; i++) {
        atomic_init(&async->tx.txqs[i].copies.inflight, 0);
        atomic_init(&async->tx.txqs[i].copies.dma_mask, 0);
        atomic_init(&async->tx.txqs[i].orphaned, false);
        atomic_init(&async->tx.txqs[i].tx_lock, NULL);
        rte_spinlock_init(&async->tx.txqs[i].vq_lock);
        atomic_init(&async->tx.txqs[i].held.head, 0);
        atomic_init(&async->tx.txqs[i].held.tail, 0);
        atomic_init(&async->tx.txqs[i].held.lost, false);
    }

    ovs_mutex_lock(&async_mutex);
    ovs_list_push_back(&all_ports, &async->node);
    ovs_mutex_unlock(&async_mutex);
    return async;
}

/* Destroys 'async' after the vhost driver of its port was unregistered
 * (so no vhost callback can refer to it any more) and no PMD uses it. */
void
vhost_async_destroy(struct vhost_async *async)
{
    if (!async) {
        return;
    }
    ovs_mutex_lock(&vid_mutex);
    for (int i = 0; i < RTE_MAX_VHOST_DEVICE; i++) {
        if (vid_map[i] == async) {
            vid_map[i] = NULL;
        }
    }
    ovs_mutex_unlock(&vid_mutex);

    ovs_mutex_lock(&async_mutex);
    ovs_list_remove(&async->node);
    ovs_mutex_unlock(&async_mutex);

    vhost_tx_free_rings(async);
    for (int i = 0; i < MAX_TXQ; i++) {
        free(async->tx.txqs[i].held.slots);
    }
    ovs_mutex_destroy(&async->lc_mutex);
    free(async->channel);
    free_cacheline(async->tx.txqs);
    free_cacheline(async->tx.autos);
    for (int d = 0; d < N_DIRS; d++) {
        free(async->req[d].option_value);
    }
    vhost_rx_destroy(async->rx);
    free(async->vhost_id);
    free(async->name);
    free(async);
}

bool
vhost_async_set_config(struct vhost_async *async, const struct smap *args)
{
    bool changed = false, seen = false;

    ovs_mutex_lock(&async_mutex);
    for (int d = 0; d < N_DIRS; d++) {
        struct mode_request *req = &async->req[d];
        const char *value = smap_get(args, dirs[d].key);
        int mode;

        if (nullable_string_is_equal(value, req->option_value)) {
            continue;
        }
        mode = parse_mode_value(d, value, "options", async->name);
        free(req->option_value);
        req->option_value = nullable_xstrdup(value);
        if (mode != -2) {
            /* A new value in the database is newer intent than an earlier
             * ovs-appctl override. */
            req->option_mode = mode;
            req->override_mode = -1;
            seen = true;
        }
    }
    changed = seen && mode_changed(async);
    ovs_mutex_unlock(&async_mutex);
    if (changed) {
        netdev_request_reconfigure(async->netdev);
    }
    return changed;
}

uint64_t
vhost_async_driver_flags(struct vhost_async *async, uint64_t flags)
{
    bool wants;

    ovs_mutex_lock(&async_mutex);
    wants = wants_dma(async);
    ovs_mutex_unlock(&async_mutex);

    if (!wants
        || flags & (RTE_VHOST_USER_IOMMU_SUPPORT
                    | RTE_VHOST_USER_POSTCOPY_SUPPORT)) {
        async->async_registered = false;
        return 0;
    }
    async->async_registered = true;
    return RTE_VHOST_USER_ASYNC_COPY;
}

/* Returns true if the client socket 'vhost_id' of the port, registered
 * with 'driver_flags', must be unregistered now, so that the port's
 * reconfiguration registers it again: to reset a device whose queues are
 * wedged behind a failed DMA engine, or to add ASYNC_COPY for an async
 * mode.  Says why in the log; the guest sees its link go down and up. */
bool
vhost_async_must_reregister(struct vhost_async *async, const char *vhost_id,
                            uint64_t driver_flags)
{
    const char *why = NULL;
    bool reset, relog;

    reset = atomic_exchange(&async->reset_requested, false);
    relog = atomic_exchange(&async->relog_reset, false);
    if (vhost_id) {
        ovs_mutex_lock(&async_mutex);
        if (!async->vhost_id || strcmp(async->vhost_id, vhost_id)) {
            free(async->vhost_id);
            async->vhost_id = xstrdup(vhost_id);
        }
        ovs_mutex_unlock(&async_mutex);
    }
    if (!vhost_id || !(driver_flags & RTE_VHOST_USER_CLIENT)) {
        if (vhost_id) {
            /* Registered next, anew. */
            forget_stale_socket(vhost_id);
        }
        return false;
    }
    if (reset && get_vid(async) < 0) {
        /* The device went away since the reset was asked for: its
         * connection is closing, or the guest reset the device (whose next
         * new_device asks again if vhost kept its stale async state).
         * Unregistering now would race with vhost's teardown of the
         * connection, which DPDK does not handle: the socket's reconnection
         * outlives its unregistration, and the socket then has two
         * connections, which the guest refuses. */
        VLOG_INFO("%s: no reset of the vhost-user connection: its device "
                  "went away", async->name);
        reset = false;
    }
    if (reset) {
        why = "to reset the device, whose copies on a DMA engine out of "
              "service can never complete";
        vhost_stat_add(&async->tx.stats.resets, 1);
    } else if (relog) {
        why = "so that its connection gets vhost's datapath back";
    } else if (!(driver_flags & RTE_VHOST_USER_ASYNC_COPY)
               && !async_refused()) {
        bool wants;

        ovs_mutex_lock(&async_mutex);
        wants = wants_dma(async);
        ovs_mutex_unlock(&async_mutex);
        if (wants) {
            why = "to enable async copies";
        }
    } else if (driver_flags & RTE_VHOST_USER_ASYNC_COPY) {
        bool migrating;

        ovs_mutex_lock(&async_mutex);
        migrating = async->migrating;
        ovs_mutex_unlock(&async_mutex);
        if (migrating) {
            why = "without async copies, so that it offers dirty page "
                  "logging for live migration";
        }
    }
    if (why) {
        VLOG_INFO("%s: registering vhost-user socket %s again %s; the guest "
                  "sees its link go down and up again", async->name,
                  vhost_id, why);
        forget_stale_socket(vhost_id);
    }
    return why != NULL;
}

/* ---- Completions -------------------------------------------------------- */

/* "txq 3" or "rxq 3", for messages. */
static const char *
vq_name(int vring, char buf[16])
{
    snprintf(buf, 16, "%s %d", vring_is_rx(vring) ? "rxq" : "txq",
             vring_qid(vring));
    return buf;
}

/* The copies in flight of vring 'vring': a Tx queue's (even) or an Rx
 * queue's (odd). */
static struct vhost_vq_copies *
vq_copies(struct vhost_async *async, int vring)
{
    return (vring_is_rx(vring) ? vhost_rx_copies(async->rx, vring_qid(vring))
            : &async->tx.txqs[vring_qid(vring)].copies);
}

/* The copies in flight, in every port, of the vrings that dmadev 'dma'
 * may hold copies of (for netdev-dpdk/dmadev-enable). */
static unsigned int
engine_users(int16_t dma)
{
    const uint64_t bit = UINT64_C(1) << dma;
    struct vhost_async *async;
    unsigned int n = 0;

    ovs_mutex_lock(&async_mutex);
    LIST_FOR_EACH (async, node, &all_ports) {
        for (int vr = 0; vr < MAX_VRINGS; vr++) {
            struct vhost_vq_copies *copies = vq_copies(async, vr);
            uint64_t mask;

            atomic_read_relaxed(&copies->dma_mask, &mask);
            if (mask & bit) {
                n += MAX(copies_inflight(copies), 0);
            }
        }
    }
    ovs_mutex_unlock(&async_mutex);
    return n;
}

/* Packets of vring 'vring' in flight as vhost counts them, or our own
 * count where vhost cannot tell (no channel, or its lock busy).  vhost's
 * count is exact even while a sender is between its submit and updating
 * 'inflight'. */
static int
vq_inflight(struct vhost_async *async, int vid, int vring, bool locked)
{
    int n = -1;

    if (locked) {
        n = rte_vhost_async_get_inflight_thread_unsafe(vid, vring);
    }
    if (n < 0 && async->channel[vring]) {
        n = rte_vhost_async_get_inflight(vid, vring);
    }
    return n >= 0 ? n : copies_inflight(vq_copies(async, vring));
}

/* Asks for the device of 'async' to be reset (once): vring 'vring' of it
 * is wedged. */
void
vhost_async_request_reset(struct vhost_async *async, int vring)
{
    bool was;

    was = atomic_exchange(&async->reset_requested, true);
    if (!was) {
        char name[16];

        VLOG_ERR("%s: %s has %d copies in flight on a DMA engine out of "
                 "service, which vhost cannot retire: dropping its packets "
                 "and resetting the vhost-user connection", async->name,
                 vq_name(vring, name), copies_inflight(vq_copies(async,
                                                                 vring)));
        netdev_request_reconfigure(async->netdev);
    }
}

/* Takes back 'n' copies of vring 'vring' that a clear completed: a Tx
 * queue's packets are in the guest now, an Rx queue's wait in its stash
 * for the PMD that polls it. */
static void
cleared(struct vhost_async *async, int vring, struct rte_mbuf **pkts,
        uint16_t n)
{
    if (vring_is_rx(vring)) {
        vhost_rx_stash(async->rx, vring_qid(vring), pkts, n);
    } else {
        vhost_tx_retire(async, &async->tx.txqs[vring_qid(vring)], pkts, n);
    }
}

/* Clears vring 'vring' until nothing is in flight, from the control path
 * or a vhost callback.  'locked' says that the caller holds vhost's queue
 * lock (the _thread_unsafe variants apply).  Returns false if the engines
 * did not finish by 'deadline' (msec), or at once if every engine that
 * holds the copies is out of service and has no completion left to give:
 * a fenced engine's last completions are still taken. */
static bool
clear_vq__(struct vhost_async *async, int vid, int vring, bool locked,
           long long int deadline)
{
    struct vhost_vq_copies *copies = vq_copies(async, vring);

    while (vq_inflight(async, vid, vring, locked) > 0) {
        uint32_t n_cleared = 0;
        uint64_t engines, reported;
        int16_t dma;

        atomic_read_relaxed(&copies->dma_mask, &engines);
        reported = netdev_dpdk_dma_reported(engines);
        VHOST_FOR_EACH_DMA (dma, engines) {
            struct rte_mbuf *pkts[POLL_BURST];
            uint16_t n = UINT16_MAX;

            /* A Tx vring's completion pollers hold its lock for one call
             * at most (see vhost_tx_vq_lock()); an Rx vring's are held off by
             * the caller (vhost_rx_lock()). */
            if (!vring_is_rx(vring)) {
                vhost_tx_vq_lock(async, vring_qid(vring));
            }
            if (locked) {
                n = rte_vhost_clear_queue_thread_unsafe(
                    vid, vring, pkts, POLL_BURST, dma,
                    NETDEV_DPDK_DMA_VCHAN);
            }
            if (n == UINT16_MAX) {
                /* Not locked after all (or not asked to be): the locking
                 * variant, which only gives up while another thread holds
                 * the queue for a moment. */
                locked = false;
                n = rte_vhost_clear_queue(vid, vring, pkts, POLL_BURST, dma,
                                          NETDEV_DPDK_DMA_VCHAN);
            }
            if (!vring_is_rx(vring)) {
                vhost_tx_held_pop(&async->tx.txqs[vring_qid(vring)].held,
                                  pkts, n);
                vhost_tx_vq_unlock(async, vring_qid(vring));
            }
            cleared(async, vring, pkts, n);
            n_cleared += n;
        }
        if (engines_dead(copies)) {
            /* Stopped engines only give what they finished: take it, then
             * stop.  (A pass may take only completions of the engine's
             * other queues, which come first.) */
            if (!n_cleared
                && netdev_dpdk_dma_reported(engines) == reported) {
                return false;
            }
        } else if (time_msec() > deadline) {
            return false;
        }
    }
    if (!vring_is_rx(vring)) {
        atomic_store_relaxed(&async->tx.txqs[vring_qid(vring)].orphaned,
                             false);
    }
    return true;
}

static bool
clear_vq(struct vhost_async *async, int vid, int vring, bool locked,
         long long int deadline)
{
    bool done;

    if (!vring_is_rx(vring)) {
        return clear_vq__(async, vid, vring, locked, deadline);
    }
    vhost_rx_lock(async->rx, vring_qid(vring));
    done = clear_vq__(async, vid, vring, locked, deadline);
    vhost_rx_unlock(async->rx, vring_qid(vring));
    return done;
}

/* How long stuck_engines() gives an engine that is still busy to complete
 * what it holds. */
#define CAUGHT_UP_MS 10

/* The engines that may hold copies of 'copies': those a clear that gave
 * up must fence.  They are those that are out of service already or still
 * busy (all of them if none is: the copies are somewhere), but not those
 * that complete, within CAUGHT_UP_MS, every copy they were given so far:
 * the vring's copies on such an engine are done, only not returned yet,
 * behind another engine's (vhost returns a vring's copies in order). */
static uint64_t
stuck_engines(const struct vhost_vq_copies *copies)
{
    uint64_t mask, retired, stuck;

    atomic_read_relaxed(&CONST_CAST(struct vhost_vq_copies *, copies)
                        ->dma_mask, &mask);
    retired = mask & netdev_dpdk_dma_retired();
    stuck = netdev_dpdk_dma_busy(mask) | retired;
    if (!stuck) {
        stuck = mask;
    }
    return stuck & ~netdev_dpdk_dma_caught_up(stuck & ~retired,
                                              CAUGHT_UP_MS);
}

/* Clears vring 'vring' as clear_vq() does, for an event after which vhost
 * may unmap the memory the copies write (or the guest reuse it): if the
 * engines do not finish by 'deadline', fences them (they finish or drop
 * what they hold, and run no copy afterwards) and takes what they
 * finished.  Returns the copies still in flight then (logged), which can
 * never complete, and adds the engines it fenced for them to '*stuckp' if
 * 'stuckp' is not NULL. */
static int
clear_vq_fenced(struct vhost_async *async, int vid, int vring, bool locked,
                long long int deadline, const char *why, uint64_t *stuckp)
{
    uint64_t stuck;
    char name[16];
    int left;

    if (clear_vq(async, vid, vring, locked, deadline)) {
        return 0;
    }
    stuck = stuck_engines(vq_copies(async, vring));
    netdev_dpdk_dma_retire(stuck, "it did not complete copies in time "
                           "before vhost-user memory went away");
    clear_vq(async, vid, vring, locked, deadline);
    left = MAX(vq_inflight(async, vid, vring, locked), 0);
    if (left) {
        VLOG_ERR("%s: %d copies of %s still in flight %d ms after %s: the "
                 "DMA engine did not complete them and was stopped",
                 async->name, left, vq_name(vring, name), DRAIN_TIMEOUT_MS,
                 why);
        if (stuckp) {
            *stuckp |= stuck;
        }
    }
    return left;
}

/* Clears every vring of 'async' of the directions in 'dirs_mask', all by
 * one deadline.  If 'fence', the device's memory goes away next: engines
 * that did not finish in time are fenced first (clear_vq_fenced()).
 * Returns the number of copies still in flight then (logged), else 0, and
 * the dmadevs that may hold them in '*stuck' if not NULL. */
static int
clear_all(struct vhost_async *async, int vid, unsigned int dirs_mask,
          const char *why, bool fence, uint64_t *stuck)
{
    long long int deadline = time_msec() + DRAIN_TIMEOUT_MS;
    int left = 0;

    for (int vr = 0; vr < MAX_VRINGS; vr++) {
        struct vhost_vq_copies *copies = vq_copies(async, vr);

        if (!vring_in(vr, dirs_mask)
            || (copies_inflight(copies) <= 0 && !async->channel[vr])) {
            continue;
        }
        if (fence) {
            left += clear_vq_fenced(async, vid, vr, false, deadline, why,
                                    stuck);
        } else if (!clear_vq(async, vid, vr, false, deadline)) {
            int n = vq_inflight(async, vid, vr, false);
            char name[16];

            VLOG_ERR("%s: %d copies of %s still in flight %d ms after %s: "
                     "the DMA engine does not complete them", async->name, n,
                     vq_name(vr, name), DRAIN_TIMEOUT_MS, why);
            left += MAX(n, 0);
            if (stuck) {
                /* Not an engine that completed all it had: its copies of
                 * this vring may be done, only unreturned behind another
                 * engine's (vhost returns them in order). */
                *stuck |= stuck_engines(copies);
            }
        }
    }
    return left;
}

/* Forgets the copies of every queue, whose device goes away: 'left' copies
 * on the dmadevs in 'stuck' were never completed.  They are counted as
 * abandoned, and the dmadevs go out of service: vhost (22.11 and 24.11)
 * cannot cancel a copy, and keeps pointers into the device's freed state
 * for each copy until its dmadev completes it.  What the clears completed
 * of the guest's packets is dropped. */
static void
reset_queues(struct vhost_async *async, int left, uint64_t stuck)
{
    if (left > 0) {
        int freed = 0;

        vhost_stat_add(&async->tx.stats.abandoned, left);
        netdev_dpdk_dma_retire(stuck, "it did not complete copies of a "
                               "vhost device that went away");
        for (int qid = 0; qid < MAX_TXQ; qid++) {
            freed += vhost_tx_held_release(&async->tx.txqs[qid], left - freed);
        }
        vhost_stat_add(&async->tx.stats.abandoned_freed, freed);
        VLOG_ERR("%s: %d DMA copies abandoned: their engine must not "
                 "complete them any more; the mbufs of %d of them were "
                 "freed, vhost keeps those of the other %d (until "
                 "netdev-dpdk/dmadev-enable, for an engine that can tell "
                 "which they are)", async->name, left, freed, left - freed);
    } else {
        for (int qid = 0; qid < MAX_TXQ; qid++) {
            vhost_tx_held_release(&async->tx.txqs[qid], 0);
        }
    }
    for (int qid = 0; qid < MAX_TXQ; qid++) {
        atomic_store_relaxed(&async->tx.txqs[qid].copies.inflight, 0);
        atomic_store_relaxed(&async->tx.txqs[qid].copies.dma_mask, 0);
        atomic_store_relaxed(&async->tx.txqs[qid].orphaned, false);
    }
    vhost_rx_reset(async->rx);
    /* The device that a reset was for is gone. */
    atomic_store_relaxed(&async->reset_requested, false);
}

/* ---- Receiving ---------------------------------------------------------- */

/* Rx queues copy in netdev-dpdk-vhost-rx.c: this picks the mode. */
uint16_t
vhost_async_dequeue(struct vhost_async *async, int vid, int qid,
                    struct rte_mempool *mp, struct rte_mbuf **pkts,
                    uint16_t count)
{
    enum vhost_rx_mode mode = get_rx_mode(async);
    uint16_t n;

    if (OVS_UNLIKELY(mode != VHOST_RX_CPU)
        && OVS_UNLIKELY(get_vid(async) != vid || qid >= MAX_TXQ
                        || !async->channel[RXQ_VRING(qid)]
                        || logging_on(async))) {
        /* A new device whose async channels are not registered yet (or a
         * device going away), or dirty page logging: nothing of it is in
         * flight. */
        mode = VHOST_RX_CPU;
    }
    n = vhost_rx_dequeue(async->rx, mode, vid, qid, mp, pkts, count);
    if (OVS_UNLIKELY(!n) && mode != VHOST_RX_CPU) {
        struct vhost_vq_copies *copies = vhost_rx_copies(async->rx, qid);

        if (copies_inflight(copies) > 0 && engines_dead(copies)) {
            /* The guest's packets behind copies that only engines out of
             * service hold can never be received: its transmit queue is
             * stuck until the device is reset, as a wedged Tx queue's. */
            vhost_async_request_reset(async, RXQ_VRING(qid));
        }
    }
    return n;
}

/* ---- Device life cycle -------------------------------------------------- */

/* Registers ('on') or unregisters the async channel of every vring of the
 * directions in 'dirs_mask': the guest's Rx vrings for Tx, its Tx vrings
 * for Rx.  Returns false if some channel could not be changed. */
static bool
set_channels(struct vhost_async *async, int vid, unsigned int dirs_mask,
             bool on, bool locked)
{
    int n_vrings = rte_vhost_get_vring_num(vid);
    bool ok = true;

    for (int vr = 0; vr < n_vrings && vr < MAX_VRINGS; vr++) {
        int err;

        if (!vring_in(vr, dirs_mask) || async->channel[vr] == on
            || (on && logging_on(async))) {
            continue;
        }
        if (on) {
            struct rte_vhost_vring vring;

            if (!vring_is_rx(vr)
                && !rte_vhost_get_vhost_vring(vid, vr, &vring)) {
                /* No sender submits into it before the channel is up. */
                vhost_tx_held_init(&async->tx.txqs[vring_qid(vr)], vring.size);
            }
            err = locked
                  ? rte_vhost_async_channel_register_thread_unsafe(vid, vr)
                  : rte_vhost_async_channel_register(vid, vr);
        } else {
            err = locked
                  ? rte_vhost_async_channel_unregister_thread_unsafe(vid, vr)
                  : rte_vhost_async_channel_unregister(vid, vr);
        }
        if (err) {
            VLOG_ERR("%s: could not %sregister the async channel of vring "
                     "%d", async->name, on ? "" : "un", vr);
            ok = false;
        } else if (on && !locked && logging_on(async)) {
            /* Dirty page logging began while this thread (not vhost's)
             * registered it: logging_start() did not see it, and no
             * sender may copy with it. */
            rte_vhost_async_channel_unregister(vid, vr);
        } else {
            async->channel[vr] = on;
        }
    }
    return ok;
}

/* vhost-user messages, as the protocol numbers and lays them out: the
 * header, then (for SET_VRING_ENABLE) the vring state, or (for
 * GET_FEATURES and SET_FEATURES) a 64-bit value, unaligned. */
#define VHOST_USER_GET_FEATURES 1
#define VHOST_USER_SET_FEATURES 2
#define VHOST_USER_SET_MEM_TABLE 5
#define VHOST_USER_SET_LOG_BASE 6
#define VHOST_USER_SET_VRING_ENABLE 18
#define VHOST_USER_NEED_REPLY (1u << 3)     /* In 'flags'. */
struct vhost_user_vring_state_msg {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
    uint32_t index;             /* The vring. */
    uint32_t num;               /* 1: enable, 0: disable. */
};
#define VHOST_USER_PAYLOAD offsetof(struct vhost_user_vring_state_msg, index)
#define LOG_ALL (UINT64_C(1) << VHOST_F_LOG_ALL)

static uint64_t
msg_u64(const void *msg)
{
    uint64_t value;

    memcpy(&value, (const char *) msg + VHOST_USER_PAYLOAD, sizeof value);
    return value;
}

/* ---- Dirty page logging (live migration) ---------------------------------
 *
 * vhost logs the guest memory that its CPU paths write (enqueue, dequeue,
 * used rings) when the guest's QEMU turns VHOST_F_LOG_ALL on, and logs
 * nothing that its async paths write.  So it withdraws VHOST_F_LOG_ALL
 * from a socket registered for async copies, and QEMU then refuses to
 * migrate the guest.  Here the port offers it all the same, and when
 * QEMU turns logging on (SET_LOG_BASE, then SET_FEATURES with
 * VHOST_F_LOG_ALL), it finishes the copies in flight and takes its async
 * channels down before vhost handles the message, so that every later
 * write is the CPU's, logged; when logging ends (SET_FEATURES without it:
 * the migration was cancelled or failed), it brings the channels back.
 * No re-registration, no link flap.  vhost handles both messages with
 * every queue lock of the device held, so no copy is submitted or polled
 * meanwhile, and a submit into a vring without a channel fails without
 * copying. */

/* The features of the vhost-user socket of 'vid', and its path, or false
 * if vhost does not know them. */
static bool
socket_features(int vid, char *path, size_t size, uint64_t *features)
{
    return (!rte_vhost_get_ifname(vid, path, size)
            && !rte_vhost_driver_get_features(path, features));
}

/* GET_FEATURES: answers, in 'msg', with the socket's features plus
 * VHOST_F_LOG_ALL, if vhost withdrew it (a socket registered for async
 * copies).  QEMU reads them when it connects, and blocks the migration of
 * a guest whose backend lacks it.  Returns true if it answered. */
static bool
offer_log_all(int vid, void *msg)
{
    struct vhost_user_vring_state_msg *hdr = msg;
    uint64_t features;
    char path[PATH_MAX];

    if (!socket_features(vid, path, sizeof path, &features)
        || features & LOG_ALL) {
        return false;
    }
    features |= LOG_ALL;
    memcpy((char *) msg + VHOST_USER_PAYLOAD, &features, sizeof features);
    hdr->size = sizeof features;
    return true;
}

/* SET_FEATURES with VHOST_F_LOG_ALL: vhost accepts only features of the
 * socket, so the socket gets it back.  rte_vhost_driver_set_features()
 * also takes vhost's own virtio-net datapath away from the socket's later
 * connections (not from this one): see 'stale_sockets'.  Not under
 * vid_mutex: vhost takes its global lock here, and holds it while it
 * destroys a device (rte_vhost_driver_unregister()), whose callback takes
 * vid_mutex. */
static void
accept_log_all(int vid)
{
    uint64_t features;
    char path[PATH_MAX];
    int err;

    if (!socket_features(vid, path, sizeof path, &features)
        || features & LOG_ALL) {
        return;
    }
    err = rte_vhost_driver_set_features(path, features | LOG_ALL);
    if (err) {
        VLOG_ERR("%s: cannot accept dirty page logging for live "
                 "migration: vhost refused the features", path);
        return;
    }
    ovs_mutex_lock(&vid_mutex);
    sset_add(&stale_sockets, path);
    ovs_mutex_unlock(&vid_mutex);
}

/* The Tx and Rx directions whose copy modes want async channels. */
static unsigned int
dirs_wanting_dma(const struct vhost_async *async)
{
    return ((mode_of(async)->dma ? DIR_BIT(DIR_TX) : 0)
            | (vhost_rx_mode_dma(get_rx_mode(async)) ? DIR_BIT(DIR_RX) : 0));
}

/* Dirty page logging begins on device 'vid' of 'async' ('why': the
 * message).  Called before vhost handles the message, with every queue
 * lock of the device held.  Senders see logging on from now (or find the
 * channel gone), the copies in flight are finished (or their engines
 * fenced), and the channels are unregistered, so that vhost's CPU paths,
 * which log, write everything from now on. */
static void
logging_start(struct vhost_async *async, int vid, const char *why)
    OVS_REQUIRES(vid_mutex)
{
    long long int deadline = time_msec() + DRAIN_TIMEOUT_MS;
    int inflight = 0, left = 0;

    if (logging_on(async)) {
        return;
    }
    atomic_store(&async->logging, true);
    for (int vr = 0; vr < MAX_VRINGS; vr++) {
        if (async->channel[vr]) {
            inflight += MAX(vq_inflight(async, vid, vr, true), 0);
            left += clear_vq_fenced(async, vid, vr, true, deadline, why,
                                    NULL);
        }
    }
    set_channels(async, vid, BOTH_DIRS, false, true);
    vhost_thread_count(&vhost_async_logging_started_vt, async);
    VLOG_INFO("%s: dirty page logging for live migration (%s): %d copies "
              "in flight finished; copying on the CPU, which logs what it "
              "writes, until logging ends", async->name, why,
              inflight - left);
    if (left) {
        VLOG_ERR("%s: %d copies that their engine did not finish stay in "
                 "flight: their vrings copy nothing until they are reset",
                 async->name, left);
    }
}

/* Dirty page logging ends (SET_FEATURES without VHOST_F_LOG_ALL): the
 * port's copy modes get their channels back.  With every queue lock of
 * the device held. */
static void
logging_stop(struct vhost_async *async, int vid)
    OVS_REQUIRES(vid_mutex)
{
    if (!logging_on(async)) {
        return;
    }
    atomic_store(&async->logging, false);
    set_channels(async, vid, dirs_wanting_dma(async), true, true);
    VLOG_INFO("%s: dirty page logging ended: copying in its copy modes "
              "again", async->name);
}

/* Runs in vhost's message thread before vhost handles each message of a
 * connection, from its first, with the device's queue locks held for the
 * messages that change vrings.  It offers and follows dirty page logging
 * (GET_FEATURES, SET_LOG_BASE, SET_FEATURES: see "Dirty page logging"
 * above), marks the span of a SET_MEM_TABLE (see
 * vhost_async_vring_state_changed()), and it handles the guest's
 * SET_VRING_ENABLE of a guest Rx vring with copies in flight, as
 * Linux's virtio-net sends them when it changes its queue count
 * (ethtool -L): QEMU then disables the queue pairs it drops and enables
 * every one it keeps, those already enabled too.
 *
 * - A disable: the copies are finished now, while the vring is enabled.
 *   vhost 22.11 completes copies of a disabled vring without giving their
 *   buffers back to the guest, which then never gets them back, and the
 *   queue is dead once the guest enables it again.
 * - An enable: vhost (22.11 and 24.11) refuses to enable a vring with
 *   copies in flight.  An enable of an enabled vring changes nothing, so it is
 *   passed over, and vhost tells the guest that it succeeded.  A disabled
 *   vring with copies in flight (after a clear that gave up on an engine)
 *   is cleared first.
 * - An enable of a vring whose async state vhost kept from the device's
 *   previous life (a guest reset: vhost keeps 'vq->async' for as long as
 *   copies of it are in flight), with copies in flight that no channel of
 *   ours owns: they were abandoned on an engine out of service and never
 *   retire.  vhost refuses the enable, and a guest that asked for a reply
 *   (QEMU does) keeps its connection and a vring that vhost refuses to
 *   enable for good: the guest cannot receive.  (vhost 22.11 closed the
 *   connection on that refusal; 24.11 does only for a message without a
 *   reply.)  So the connection is closed, which frees that state: the
 *   client port connects again, and QEMU reconnects to a server port
 *   with its "reconnect" option. */
enum vhost_async_msg_verdict
vhost_async_pre_message(int vid, void *msg_)
{
    const struct vhost_user_vring_state_msg *msg = msg_;
    bool enable_msg = msg->request == VHOST_USER_SET_VRING_ENABLE;
    uint32_t vring = enable_msg ? msg->index : UINT32_MAX;
    enum vhost_async_msg_verdict verdict = VHOST_ASYNC_MSG_PASS;
    bool log_all = false;
    struct vhost_async *async;

    if (vid < 0 || vid >= RTE_MAX_VHOST_DEVICE) {
        return VHOST_ASYNC_MSG_PASS;
    }
    if (msg->request == VHOST_USER_GET_FEATURES) {
        return (offer_log_all(vid, msg_) ? VHOST_ASYNC_MSG_REPLY
                : VHOST_ASYNC_MSG_PASS);
    } else if (msg->request == VHOST_USER_SET_FEATURES
               && msg->size >= sizeof(uint64_t)) {
        log_all = msg_u64(msg_) & LOG_ALL;
        if (log_all) {
            accept_log_all(vid);
        }
    }
    ovs_mutex_lock(&vid_mutex);
    in_mem_table[vid] = msg->request == VHOST_USER_SET_MEM_TABLE;
    if (in_mem_table[vid]) {
        /* vhost clears every vring next, one by one: one deadline for
         * them all. */
        mem_table_deadline[vid] = time_msec() + DRAIN_TIMEOUT_MS;
    }
    async = vid_map[vid];
    if (async && (msg->request == VHOST_USER_SET_LOG_BASE || log_all)) {
        logging_start(async, vid, msg->request == VHOST_USER_SET_LOG_BASE
                      ? "the guest's QEMU set its log base"
                      : "the guest's QEMU turned VHOST_F_LOG_ALL on");
    } else if (async && msg->request == VHOST_USER_SET_FEATURES) {
        logging_stop(async, vid);
    }
    if (enable_msg && vring < MAX_VRINGS
        && async && async->channel[vring]
        && vq_inflight(async, vid, vring, true) > 0) {
        if (msg->num && vring_bits[vid]
            && bitmap_is_set(vring_bits[vid], VRING_ON(vring))) {
            vhost_thread_count(&vhost_async_enable_passed_over_vt, async);
            VLOG_DBG("%s: vring %"PRIu32" is enabled already: passing over "
                     "its enable, with copies in flight", async->name,
                     vring);
            verdict = VHOST_ASYNC_MSG_DONE;
        } else {
            clear_vq_fenced(async, vid, vring, true,
                            time_msec() + DRAIN_TIMEOUT_MS,
                            msg->num ? "the guest asked to enable its vring"
                            : "the guest asked to disable its vring",
                            NULL);
        }
    } else if (enable_msg && msg->num && vring < MAX_VRINGS
               && !(async && async->channel[vring])
               && rte_vhost_async_get_inflight_thread_unsafe(vid, vring) > 0) {
        char ifname[PATH_MAX];

        if (rte_vhost_get_ifname(vid, ifname, sizeof ifname)) {
            snprintf(ifname, sizeof ifname, "vid %d", vid);
        }
        vhost_thread_count(&vhost_async_stale_closed_vt, async);
        VLOG_ERR("%s: the guest enables vring %"PRIu32", where vhost kept "
                 "the async state of DMA copies abandoned before the device "
                 "was reset: closing the vhost-user connection, so that its "
                 "next one starts clean", ifname, vring);
        verdict = VHOST_ASYNC_MSG_CLOSE;
    }
    ovs_mutex_unlock(&vid_mutex);
    return verdict;
}

static enum rte_vhost_msg_result
vhost_async_pre_msg(int vid, void *msg_)
{
    struct vhost_user_vring_state_msg *msg = msg_;

    switch (vhost_async_pre_message(vid, msg)) {
    case VHOST_ASYNC_MSG_DONE:
        return RTE_VHOST_MSG_RESULT_OK;
    case VHOST_ASYNC_MSG_REPLY:
        return RTE_VHOST_MSG_RESULT_REPLY;
    case VHOST_ASYNC_MSG_CLOSE:
        /* vhost closes the connection after a failed message only if it
         * owes the guest no reply. */
        msg->flags &= ~VHOST_USER_NEED_REPLY;
        return RTE_VHOST_MSG_RESULT_ERR;
    case VHOST_ASYNC_MSG_PASS:
    default:
        return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
    }
}

static const struct rte_vhost_user_extern_ops vhost_async_extern_ops = {
    .pre_msg_handle = vhost_async_pre_msg,
};

/* A vhost-user connection, before its first message: the pre-message
 * handler watches it from its first GET_FEATURES on. */
int
vhost_async_new_connection(int vid)
{
    struct vhost_async *async;
    char path[PATH_MAX];
    bool stale;

    if (vid < 0 || vid >= RTE_MAX_VHOST_DEVICE) {
        return 0;
    }
    if (rte_vhost_extern_callback_register(vid, &vhost_async_extern_ops,
                                           NULL)) {
        VLOG_WARN("cannot watch the vhost-user messages of device %d: its "
                  "guest cannot be live-migrated while it copies with DMA, "
                  "and a guest that enables a vring with copies in flight "
                  "would lose its connection", vid);
    }
    if (rte_vhost_get_ifname(vid, path, sizeof path)) {
        return 0;
    }
    ovs_mutex_lock(&vid_mutex);
    stale = sset_contains(&stale_sockets, path);
    ovs_mutex_unlock(&vid_mutex);
    if (!stale) {
        return 0;
    }
    /* vhost's datapath is not there for this connection: nothing could
     * cross it.  The socket is registered again, before the guest's
     * device starts. */
    ovs_mutex_lock(&async_mutex);
    LIST_FOR_EACH (async, node, &all_ports) {
        if (async->vhost_id && !strcmp(async->vhost_id, path)) {
            VLOG_WARN("%s: dirty page logging for a live migration changed "
                      "the features of its vhost-user socket, which took "
                      "vhost's datapath away from its later connections: "
                      "registering it again", async->name);
            atomic_store(&async->relog_reset, true);
            netdev_request_reconfigure(async->netdev);
        }
    }
    ovs_mutex_unlock(&async_mutex);
    return 0;
}

void
vhost_async_new_device(struct vhost_async *async, int vid)
{
    if (vid < 0 || vid >= RTE_MAX_VHOST_DEVICE) {
        return;
    }
    ovs_mutex_lock(&vid_mutex);
    vid_map[vid] = async;
    ovs_mutex_unlock(&vid_mutex);

    atomic_store(&async->logging, false);

    memset(async->channel, 0, MAX_VRINGS * sizeof *async->channel);
    if (!set_channels(async, vid, dirs_wanting_dma(async), true, false)) {
        /* vhost keeps a vring's async state across a device reset (the
         * guest rebooted) for as long as copies of it are in flight, and
         * copies abandoned on an engine out of service stay in flight for
         * good.  Copies submitted into that state would wait behind them
         * forever: the vrings without a channel copy on the CPU (see
         * txq_engine() and vhost_async_dequeue()), and the connection is
         * reset, which frees that state.  (A guest that enables such a
         * vring has its connection closed before this, see
         * vhost_async_pre_message(), but a guest without protocol
         * features never does.) */
        VLOG_ERR("%s: vhost kept the async state of a vring whose copies "
                 "were abandoned before the device was reset: copying on "
                 "the CPU, and resetting the vhost-user connection",
                 async->name);
        /* The device first: vhost_async_must_reregister() does not reset
         * a device that is gone. */
        atomic_store_relaxed(&async->vid, vid);
        atomic_store(&async->reset_requested, true);
        netdev_request_reconfigure(async->netdev);
    }
    atomic_store_relaxed(&async->vid, vid);
}

/* Called when the port's device is going away, before the PMDs quiesce:
 * their deferred work stops polling the device. */
void
vhost_async_device_gone(struct vhost_async *async)
{
    atomic_store_relaxed(&async->vid, -1);
}

/* Called when the port's device goes away, after no PMD can use it any
 * more and before vhost unmaps the guest's memory. */
void
vhost_async_destroy_device(struct vhost_async *async, int vid)
{
    uint64_t stuck = 0;
    int left;

    if (vid < 0 || vid >= RTE_MAX_VHOST_DEVICE) {
        return;
    }
    ovs_mutex_lock(&vid_mutex);
    /* The vid's next connection (or life, after a reset) starts with every
     * vring disabled. */
    free(vring_bits[vid]);
    vring_bits[vid] = NULL;
    in_mem_table[vid] = false;
    if (!async) {
        /* The port is being deleted: netdev-dpdk took it off its list
         * before unregistering its socket, and no PMD polls it any more,
         * but copies of any mode may still be in flight. */
        async = vid_map[vid];
    }
    ovs_mutex_unlock(&vid_mutex);
    if (!async) {
        return;
    }
    atomic_store_relaxed(&async->vid, -1);

    ovs_mutex_lock(&async->lc_mutex);
    left = clear_all(async, vid, BOTH_DIRS, "the device went away", true,
                     &stuck);
    reset_queues(async, left, stuck);
    for (int i = 0; i < MAX_TXQ; i++) {
        struct rte_ring *ring = async->tx.txqs[i].ring;
        void *pkt;

        while (ring && !rte_ring_sc_dequeue(ring, &pkt)) {
            rte_pktmbuf_free(pkt);
            vhost_stat_add(&async->tx.stats.tx_failed, 1);
        }
    }
    /* A device reset (a guest that reboots) keeps the connection and
     * vhost's async channels, which the next new_device could not
     * register again: unregister them, now that nothing is in flight.  A
     * connection that closes takes them with it anyway. */
    if (!left) {
        set_channels(async, vid, BOTH_DIRS, false, false);
    }
    memset(async->channel, 0, MAX_VRINGS * sizeof *async->channel);
    atomic_store(&async->logging, false);
    ovs_mutex_unlock(&async->lc_mutex);

    ovs_mutex_lock(&vid_mutex);
    if (vid_map[vid] == async) {
        vid_map[vid] = NULL;
    }
    ovs_mutex_unlock(&vid_mutex);
}

/* From vhost's vring_state_changed callback, before netdev-dpdk handles
 * it.  Returns false if netdev-dpdk must ignore the call.
 *
 * vhost notifies real state changes only, with one exception: around a
 * memory table change (SET_MEM_TABLE) of a device registered with
 * ASYNC_COPY, it disables every vring (so that DMA stops) and then enables
 * every vring, also those the guest had disabled.  Forwarded, those
 * enables would make netdev-dpdk send to and poll queues the guest does
 * not use.  So while vhost handles a SET_MEM_TABLE (marked by
 * vhost_async_pre_message()), the disable of a vring that is disabled is
 * not forwarded, and neither is the enable after it.  Outside it every
 * change is: a guest that boots with fewer queue pairs than it has
 * disables vrings it never enabled, and netdev-dpdk must know.
 *
 * When a guest Rx vring is disabled (also before guest memory is
 * remapped), vhost holds the queue locks so that the copies in flight can
 * be finished before it goes on. */
bool
vhost_async_vring_state_changed(int vid, uint16_t vring, int enable)
{
    struct vhost_async *async;
    unsigned long *bits;
    bool forward = true;

    if (vid < 0 || vid >= RTE_MAX_VHOST_DEVICE || vring >= MAX_VRINGS) {
        return true;
    }
    ovs_mutex_lock(&vid_mutex);
    bits = vring_bits[vid];
    if (!bits) {
        bits = vring_bits[vid] = bitmap_allocate(2 * MAX_VRINGS);
    }
    if (!enable) {
        if (in_mem_table[vid] && !bitmap_is_set(bits, VRING_ON(vring))) {
            bitmap_set1(bits, VRING_BRACKET(vring));
            forward = false;
        }
        bitmap_set0(bits, VRING_ON(vring));
    } else if (bitmap_is_set(bits, VRING_BRACKET(vring))) {
        bitmap_set0(bits, VRING_BRACKET(vring));
        forward = !in_mem_table[vid];
        if (forward) {
            bitmap_set1(bits, VRING_ON(vring));
        }
    } else {
        bitmap_set1(bits, VRING_ON(vring));
    }

    async = vid_map[vid];
    if (!enable && async && vq_inflight(async, vid, vring, true) > 0) {
        clear_vq_fenced(async, vid, vring, true,
                        (in_mem_table[vid] ? mem_table_deadline[vid]
                         : time_msec() + DRAIN_TIMEOUT_MS),
                        in_mem_table[vid] ? "a memory table change"
                        : "the guest disabled its vring", NULL);
    }

    if (!forward) {
        vhost_thread_count(&vhost_async_vring_bracket_vt, async);
        VLOG_DBG("vid %d: vring %"PRIu16" is disabled: the %s around a "
                 "memory table change is not the guest's", vid, vring,
                 enable ? "enable" : "disable");
    }
    ovs_mutex_unlock(&vid_mutex);
    return forward;
}

/* The mode of 'dir' that the port is to use: the requested one, or 'cur'
 * (logged once) if it cannot be used. */
static int
mode_to_apply(struct vhost_async *async, enum copy_dir dir, int cur)
{
    const char *why;
    int req;

    ovs_mutex_lock(&async_mutex);
    req = requested_mode(async, dir);
    ovs_mutex_unlock(&async_mutex);

    why = dirs[dir].dma(req) ? async_refused() : NULL;
    if (!why && dirs[dir].dma(req) && !async->async_registered) {
        why = "its vhost-user socket is not registered for async copies";
    }
    if (why) {
        if (!async->refused_logged[dir]) {
            VLOG_ERR("%s: cannot use %s %s: %s; keeping %s", async->name,
                     dirs[dir].what, dirs[dir].name(req), why,
                     dirs[dir].name(cur));
            async->refused_logged[dir] = true;
        }
        return cur;
    }
    async->refused_logged[dir] = false;
    return req;
}

/* Asks for a reset of the device of 'async' if a vring of the directions
 * in 'dirs_mask' has copies in flight that only engines out of service
 * hold. */
static void
reset_dead_vring(struct vhost_async *async, unsigned int dirs_mask)
{
    for (int vr = 0; vr < MAX_VRINGS; vr++) {
        struct vhost_vq_copies *copies = vq_copies(async, vr);

        if (vring_in(vr, dirs_mask) && copies_inflight(copies) > 0
            && engines_dead(copies)) {
            vhost_async_request_reset(async, vr);
            return;
        }
    }
}

/* Switches the port to 'req' of 'dir' from 'cur', once nothing of the
 * direction is in flight and its channels are as 'req' needs.  Returns
 * false if it cannot yet (logged; the switch is tried again at the next
 * reconfiguration, requested here).  Copies an engine does not complete
 * keep the old mode: in the guest's queue, the CPU's copies would overtake
 * them. */
static bool
switch_ready(struct vhost_async *async, int vid, enum copy_dir dir, int cur,
             int req)
{
    uint64_t stuck = 0;

    if (vid < 0) {
        return true;
    }
    if (clear_all(async, vid, DIR_BIT(dir), "a copy mode change", false,
                  &stuck)) {
        if (stuck & netdev_dpdk_dma_retired()) {
            reset_dead_vring(async, DIR_BIT(dir));
        }
        VLOG_WARN_RL(&lc_rl, "%s: keeping %s %s while copies are in flight; "
                     "trying %s again", async->name, dirs[dir].what,
                     dirs[dir].name(cur), dirs[dir].name(req));
        netdev_request_reconfigure(async->netdev);
        return false;
    }
    if (!dirs[dir].dma(req)
        && !set_channels(async, vid, DIR_BIT(dir), false, false)) {
        VLOG_WARN_RL(&lc_rl, "%s: keeping %s %s: its async channels cannot "
                     "be unregistered; trying %s again", async->name,
                     dirs[dir].what, dirs[dir].name(cur),
                     dirs[dir].name(req));
        netdev_request_reconfigure(async->netdev);
        return false;
    }
    return true;
}

static void
reconfigure_tx(struct vhost_async *async, int vid, int n_txq)
    OVS_REQUIRES(async->lc_mutex)
{
    enum vhost_copy_mode cur = get_mode(async);
    enum vhost_copy_mode req = mode_to_apply(async, DIR_TX, cur);

    async->tx.n_txq = MIN(n_txq, MAX_TXQ);
    if (req == cur) {
        if (vhost_copy_modes[cur].enter) {
            vhost_copy_modes[cur].enter(async, n_txq, true);
        }
        if (vhost_copy_modes[cur].dma && vid >= 0) {
            set_channels(async, vid, DIR_BIT(DIR_TX), true, false);
        }
        return;
    }

    /* No PMD uses the port now. */
    if (!switch_ready(async, vid, DIR_TX, cur, req)) {
        return;
    }
    if (vhost_copy_modes[cur].leave) {
        vhost_copy_modes[cur].leave(async, vid);
    }
    if (vhost_copy_modes[req].enter
        && !vhost_copy_modes[req].enter(async, n_txq, false)) {
        VLOG_ERR("%s: cannot use vhost copy mode %s; using %s",
                 async->name, vhost_copy_modes[req].name,
                 vhost_copy_modes[VHOST_COPY_CPU].name);
        req = VHOST_COPY_CPU;
    }
    if (vid >= 0 && vhost_copy_modes[req].dma) {
        set_channels(async, vid, DIR_BIT(DIR_TX), true, false);
    }
    atomic_store_relaxed(&async->mode, req);
    VLOG_INFO("%s: vhost copy mode changed from %s to %s", async->name,
              vhost_copy_modes[cur].name, vhost_copy_modes[req].name);
}

/* A queue that leaves DMA for the CPU has its copies cleared here: the
 * clear keeps their packets in the queue's stash, which the next dequeue
 * delivers first. */
static void
reconfigure_rx(struct vhost_async *async, int vid)
    OVS_REQUIRES(async->lc_mutex)
{
    enum vhost_rx_mode cur = get_rx_mode(async);
    enum vhost_rx_mode req = mode_to_apply(async, DIR_RX, cur);

    if (req == cur) {
        vhost_rx_enter(async->rx, cur, true);
        if (vhost_rx_mode_dma(cur) && vid >= 0) {
            set_channels(async, vid, DIR_BIT(DIR_RX), true, false);
        }
        return;
    }

    /* No PMD polls the port's Rx queues now. */
    if (!switch_ready(async, vid, DIR_RX, cur, req)) {
        return;
    }
    vhost_rx_enter(async->rx, req, false);
    if (vid >= 0 && vhost_rx_mode_dma(req)) {
        set_channels(async, vid, DIR_BIT(DIR_RX), true, false);
    }
    atomic_store_relaxed(&async->rx_mode, req);
    VLOG_INFO("%s: vhost Rx copy mode changed from %s to %s", async->name,
              vhost_rx_mode_name(cur), vhost_rx_mode_name(req));
}

void
vhost_async_reconfigure(struct vhost_async *async, int vid, int n_txq)
{
    ovs_mutex_lock(&async->lc_mutex);
    reconfigure_tx(async, vid, n_txq);
    reconfigure_rx(async, vid);
    ovs_mutex_unlock(&async->lc_mutex);
    /* The Interface's status column shows the modes. */
    netdev_change_seq_changed(async->netdev);
}

/* ---- Statistics --------------------------------------------------------- */

/* Drops that the send path did not report to its caller (those of the
 * ring consumer and of clearing queues). */
uint64_t
vhost_async_tx_dropped(const struct vhost_async *async)
{
    return vhost_stat_get(&async->tx.stats.tx_failed);
}

uint64_t
vhost_async_rx_dropped(const struct vhost_async *async)
{
    return vhost_rx_dropped(async->rx);
}

void
vhost_async_get_custom_stats(const struct vhost_async *async,
                             struct netdev_custom_stats *stats)
{
    flush_vhost_thread_counts();
    vhost_tx_get_custom_stats(async, stats);
    vhost_rx_get_custom_stats(async->rx, stats);
}

/* ---- ovs-appctl --------------------------------------------------------- */

/* The port named 'name', or NULL after replying an error to 'conn'. */
static struct vhost_async *
find_port_or_reply(struct unixctl_conn *conn, const char *name)
    OVS_REQUIRES(async_mutex)
{
    struct vhost_async *async = find_port(name);

    if (!async) {
        char *msg = xasprintf("%s is not a vhost-user port of a DPDK "
                              "datapath", name);

        unixctl_command_reply_error(conn, msg);
        free(msg);
    }
    return async;
}

/* "netdev-dpdk/vhost-copy-mode-set" and "vhost-rx-copy-mode-set", with the
 * direction as 'aux'. */
static void
mode_set(struct unixctl_conn *conn, int argc, const char *argv[],
         void *aux)
{
    const struct copy_dir_info *info = aux;
    enum copy_dir dir = info - dirs;
    const char *mode_arg = argv[argc - 1];
    struct vhost_async *async;
    struct ds reply = DS_EMPTY_INITIALIZER;
    const char *why;
    int mode;

    if (!mode_from_string(dir, mode_arg, &mode)) {
        ds_put_format(&reply, "unknown %s \"%s\" (expected one of: %s)",
                      info->what, mode_arg, mode_list(dir));
        goto error;
    }
    why = info->dma(mode) ? async_refused() : NULL;
    if (why) {
        ds_put_format(&reply, "cannot use %s %s: %s", info->what, mode_arg,
                      why);
        goto error;
    }

    ovs_mutex_lock(&async_mutex);
    if (argc == 3) {
        async = find_port_or_reply(conn, argv[1]);
        if (!async) {
            ovs_mutex_unlock(&async_mutex);
            ds_destroy(&reply);
            return;
        }
        if (async->server && info->dma(mode)) {
            ds_put_format(&reply, "%s is a dpdkvhostuser (server-mode) "
                          "port, which copies on the CPU: %s %s needs a "
                          "dpdkvhostuserclient port", async->name,
                          info->what, mode_arg);
            ovs_mutex_unlock(&async_mutex);
            goto error;
        }
        async->req[dir].override_mode = mode;
        netdev_request_reconfigure(async->netdev);
        ds_put_format(&reply, "%s: %s set to %s", async->name, info->what,
                      mode_arg);
    } else {
        int n = 0, skipped = 0;

        LIST_FOR_EACH (async, node, &all_ports) {
            if (async->server && info->dma(mode)) {
                skipped++;
                continue;
            }
            async->req[dir].override_mode = mode;
            netdev_request_reconfigure(async->netdev);
            n++;
        }
        ds_put_format(&reply, "%s set to %s on %d port%s", info->what,
                      mode_arg, n, n == 1 ? "" : "s");
        if (skipped) {
            ds_put_format(&reply, " (not on %d dpdkvhostuser port%s, which "
                          "copy on the CPU)", skipped,
                          skipped == 1 ? "" : "s");
        }
    }
    ovs_mutex_unlock(&async_mutex);
    unixctl_command_reply(conn, ds_cstr(&reply));
    ds_destroy(&reply);
    return;

error:
    unixctl_command_reply_error(conn, ds_cstr(&reply));
    ds_destroy(&reply);
}

/* "defer (from options:vhost-copy-mode)", the mode of 'dir' in use. */
static void
put_mode(struct ds *reply, const struct vhost_async *async,
         enum copy_dir dir)
    OVS_REQUIRES(async_mutex)
{
    int cur = applied_mode(async, dir);
    int req = requested_mode(async, dir);

    ds_put_cstr(reply, dirs[dir].name(cur));
    if (req != cur) {
        ds_put_format(reply, " (requested %s, not applied)",
                      dirs[dir].name(req));
    }
    ds_put_cstr(reply, " (from ");
    put_requested_source(reply, async, dir);
    ds_put_cstr(reply, ")\n");
}

/* Whether the port can be live-migrated now: QEMU migrates a guest only if
 * the port offers dirty page logging (VHOST_F_LOG_ALL), which vhost
 * withdraws from a socket registered with ASYNC_COPY. */
static const char *
migration_state(const struct vhost_async *async)
    OVS_REQUIRES(async_mutex)
{
    if (async->async_registered) {
        return (async->migrating
                ? "being prepared (its socket is registered again without "
                  "async copies)"
                : logging_on(async)
                ? "in progress: dirty page logging is on, copies on the "
                  "CPU until it ends"
                : "possible: while QEMU logs dirty pages, the port copies "
                  "on the CPU");
    } else if (async->migrating) {
        return (get_vid(async) >= 0
                ? "ready (prepared; guest connected)"
                : "prepared, waiting for the guest to connect");
    }
    return "possible (no async copies registered)";
}

/* "  no engine: ..." where 'async' has a mode of 'dir' that copies on DMA
 * engines and no PMD thread has one in service ('n_engines'). */
static void
put_no_engine(struct ds *reply, const struct vhost_async *async,
              enum copy_dir dir, int n_engines)
    OVS_REQUIRES(async_mutex)
{
    if (!n_engines && dirs[dir].dma(applied_mode(async, dir))) {
        ds_put_cstr(reply, "  no engine: copies on the CPU (no PMD thread "
                    "has a DMA engine in service: netdev-dpdk/dmadev-show)"
                    "\n");
    }
}

void
vhost_async_get_status(struct vhost_async *async, struct smap *status)
{
    struct ds engines = DS_EMPTY_INITIALIZER;
    uint64_t features;
    int n_engines;
    int vid;

    flush_vhost_thread_counts();
    /* The pool's mutex comes before 'async_mutex'. */
    n_engines = netdev_dpdk_dma_in_service(&engines);

    ovs_mutex_lock(&async_mutex);
    for (int d = 0; d < N_DIRS; d++) {
        struct ds s = DS_EMPTY_INITIALIZER;

        smap_add(status, dirs[d].status_key,
                 dirs[d].name(applied_mode(async, d)));
        ds_put_format(&s, "%s (from ", dirs[d].name(requested_mode(async,
                                                                   d)));
        put_requested_source(&s, async, d);
        ds_put_char(&s, ')');
        smap_add_nocopy(status, xasprintf("%s-configured",
                                          dirs[d].status_key),
                        ds_steal_cstr(&s));
    }
    smap_add(status, "dma-engines",
             n_engines ? ds_cstr(&engines) : "none: copies on the CPU");
    smap_add(status, "live-migration", migration_state(async));
    vid = get_vid(async);
    ovs_mutex_unlock(&async_mutex);
    ds_destroy(&engines);

    if (vid >= 0 && !rte_vhost_get_negotiated_features(vid, &features)) {
        smap_add(status, "dirty-page-logging",
                 RTE_VHOST_NEED_LOG(features) ? "on" : "off");
    }
}

/* The port's lines of netdev-dpdk/vhost-copy-mode-get; 'n_engines' is how
 * many DMA engines PMD threads copy on. */
static void
format_port(struct ds *reply, const struct vhost_async *async, int n_engines)
    OVS_REQUIRES(async_mutex)
{
    struct vhost_async *a = CONST_CAST(struct vhost_async *, async);
    enum vhost_copy_mode cur = get_mode(async);
    enum vhost_rx_mode rx_cur = get_rx_mode(async);
    bool rings_locked;

    ds_put_format(reply, "%s: ", async->name);
    put_mode(reply, async, DIR_TX);
    put_no_engine(reply, async, DIR_TX, n_engines);
    ds_put_cstr(reply, "  Rx: ");
    put_mode(reply, async, DIR_RX);
    put_no_engine(reply, async, DIR_RX, n_engines);
    ds_put_format(reply, "  live migration: %s\n", migration_state(async));
    rings_locked = !ovs_mutex_trylock(&a->lc_mutex);
    for (int qid = 0; qid < async->tx.n_txq; qid++) {
        int n = vhost_tx_inflight(a, qid);

        if (!vhost_copy_modes[cur].dma && !n) {
            continue;
        }
        ds_put_format(reply, "  txq %d: ", qid);
        if (vhost_copy_modes[cur].format_txq) {
            vhost_copy_modes[cur].format_txq(reply, async, qid);
        }
        ds_put_format(reply, "%d copies in flight", n);
        if (n > 0 && vhost_tx_engines_dead(a, qid)) {
            ds_put_cstr(reply, " (on a DMA engine out of service)");
        }
        /* Rings change under 'lc_mutex', which a reconfiguration may hold
         * while it waits for an engine: then skip their counts. */
        if (rings_locked && async->tx.txqs[qid].ring) {
            ds_put_format(reply, vhost_copy_modes[cur].puts_aside
                                 ? ", %u packets put aside"
                                 : ", %u packets in ring",
                          rte_ring_count(async->tx.txqs[qid].ring));
        }
        ds_put_char(reply, '\n');
    }
    if (rings_locked) {
        ovs_mutex_unlock(&a->lc_mutex);
    }
    for (int qid = 0; qid < async->tx.n_txq; qid++) {
        struct vhost_vq_copies *copies = vhost_rx_copies(a->rx, qid);

        if (vhost_rx_mode_dma(rx_cur) || copies_inflight(copies) > 0
            || vhost_rx_stashed(a->rx, qid)) {
            vhost_rx_format_rxq(reply, a->rx, rx_cur, qid);
        }
    }
    if (vhost_stat_get(&async->tx.stats.abandoned)) {
        ds_put_format(reply, "  copies abandoned: %"PRIu64" (mbufs "
                      "freed: %"PRIu64")\n",
                      vhost_stat_get(&async->tx.stats.abandoned),
                      vhost_stat_get(&async->tx.stats.abandoned_freed));
    }
    if (vhost_rx_dropped(async->rx)) {
        ds_put_format(reply, "  Rx packets dropped, their device gone: "
                      "%"PRIu64"\n", vhost_rx_dropped(async->rx));
    }
    if (vhost_stat_get(&async->tx.stats.resets)) {
        ds_put_format(reply, "  resets for a failed DMA engine: %"PRIu64
                      ", packets dropped while wedged: %"PRIu64"\n",
                      vhost_stat_get(&async->tx.stats.resets),
                      vhost_stat_get(&async->tx.stats.wedged));
    }
}

static void
mode_get(struct unixctl_conn *conn, int argc, const char *argv[],
         void *aux OVS_UNUSED)
{
    struct ds reply = DS_EMPTY_INITIALIZER;
    struct vhost_async *async;
    int n_engines;

    /* The pool's mutex comes before 'async_mutex'. */
    n_engines = netdev_dpdk_dma_in_service(NULL);

    ovs_mutex_lock(&async_mutex);
    if (argc == 2) {
        async = find_port_or_reply(conn, argv[1]);
        if (!async) {
            ovs_mutex_unlock(&async_mutex);
            return;
        }
        format_port(&reply, async, n_engines);
    } else {
        LIST_FOR_EACH (async, node, &all_ports) {
            format_port(&reply, async, n_engines);
        }
    }
    ovs_mutex_unlock(&async_mutex);
    ds_put_format(&reply, "available: %s\n", mode_list(DIR_TX));
    ds_put_format(&reply, "available Rx: %s\n", mode_list(DIR_RX));
    unixctl_command_reply(conn, ds_cstr(&reply));
    ds_destroy(&reply);
}

/* "netdev-dpdk/vhost-migrate-prepare" ('aux' true) and
 * "netdev-dpdk/vhost-migrate-done". */
static void
migrate_set(struct unixctl_conn *conn, int argc OVS_UNUSED,
            const char *argv[], void *aux)
{
    bool prepare = aux != NULL;
    struct ds reply = DS_EMPTY_INITIALIZER;
    struct vhost_async *async;

    ovs_mutex_lock(&async_mutex);
    async = find_port_or_reply(conn, argv[1]);
    if (!async) {
        ovs_mutex_unlock(&async_mutex);
        return;
    }
    if (async->server) {
        ds_put_format(&reply, "%s is a dpdkvhostuser (server-mode) port, "
                      "which copies on the CPU: nothing to %s", async->name,
                      prepare ? "prepare" : "restore");
    } else if (async->migrating == prepare) {
        ds_put_format(&reply, "%s: %s", async->name,
                      prepare ? "prepared for live migration already"
                      : "not prepared for live migration");
    } else {
        async->migrating = prepare;
        netdev_request_reconfigure(async->netdev);
        ds_put_format(&reply, "%s: %s", async->name, prepare
                      ? "preparing for live migration: copies on the CPU, "
                        "its socket registered again without async copies "
                        "(the guest reconnects); see vhost-copy-mode-get"
                      : "copy modes restored (its socket is registered for "
                        "async copies again if they need it)");
    }
    ovs_mutex_unlock(&async_mutex);
    unixctl_command_reply(conn, ds_cstr(&reply));
    ds_destroy(&reply);
}

/* netdev-dpdk/vhost-txq-hold and vhost-txq-release, a testing aid: the
 * senders of a port find its Tx queue locks taken, as if other PMD threads
 * held them, until released or for the given time. */
static void
txq_hold(struct unixctl_conn *conn, int argc, const char *argv[],
         void *aux)
{
    bool hold = aux != NULL;
    struct vhost_async *async;
    unsigned int ms = 0;
    char *msg;

    if (argc > 2 && (!str_to_uint(argv[2], 10, &ms)
                     || ms > TXQ_HOLD_MAX_MS)) {
        msg = xasprintf("invalid release time \"%.32s%s\" (expected a "
                        "number of milliseconds from 0 to %d)", argv[2],
                        strlen(argv[2]) > 32 ? "..." : "", TXQ_HOLD_MAX_MS);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return;
    }

    ovs_mutex_lock(&async_mutex);
    async = find_port_or_reply(conn, argv[1]);
    if (!async) {
        ovs_mutex_unlock(&async_mutex);
        return;
    }
    if (hold) {
        atomic_store_relaxed(&async->tx.held_until,
                             ms ? time_msec() + ms : LLONG_MAX);
        msg = ms ? xasprintf("%s: Tx queue locks held for %u ms",
                             async->name, ms)
                 : xasprintf("%s: Tx queue locks held until released",
                             async->name);
    } else {
        atomic_store_relaxed(&async->tx.held_until, 0);
        msg = xasprintf("%s: Tx queue locks released", async->name);
    }
    ovs_mutex_unlock(&async_mutex);
    VLOG_INFO("%s", msg);
    unixctl_command_reply(conn, msg);
    free(msg);
}

static void
vhost_async_unixctl_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        for (int d = 0; d < N_DIRS; d++) {
            char *names = mode_names_joined(d, "|");
            char *usage = xasprintf("[interface] %s", names);

            /* unixctl keeps the usage text. */
            unixctl_command_register(dirs[d].set_cmd, usage, 1, 2, mode_set,
                                     CONST_CAST(struct copy_dir_info *,
                                                &dirs[d]));
            free(names);
        }
        unixctl_command_register("netdev-dpdk/vhost-copy-mode-get",
                                 "[interface]", 0, 1, mode_get, NULL);
        unixctl_command_register("netdev-dpdk/vhost-migrate-prepare",
                                 "interface", 1, 1, migrate_set, &once);
        unixctl_command_register("netdev-dpdk/vhost-migrate-done",
                                 "interface", 1, 1, migrate_set, NULL);
        if (ovs_fork_testing_enabled()) {
            unixctl_command_register("netdev-dpdk/vhost-txq-hold",
                                     "interface [release-ms]", 1, 2,
                                     txq_hold, &once);
            unixctl_command_register("netdev-dpdk/vhost-txq-release",
                                     "interface", 1, 1, txq_hold, NULL);
        }
        ovsthread_once_done(&once);
    }
}
