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

#include "netdev-dpdk-dma.h"

#include "dma-swcopy.h"
#include "dma-swcopy-ctl.h"

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_dmadev.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_vhost_async.h>
#include "coverage.h"

#include "dpif-netdev-defer.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-fork-config.h"
#include "ovs-numa.h"
#include "ovs-rcu.h"
#include "ovs-thread.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_dma);

COVERAGE_DEFINE(dma_mbufs_reclaimed);

/* Descriptors per vchan we ask for (clamped to what the device allows). */
#define DMA_RING_SIZE 4096

struct dma_dev {
    int16_t id;
    char name[RTE_DEV_NAME_MAX_LEN];
    int numa_id;
    int owner;                  /* Core id of the owning PMD, or -1. */
    bool ready;                 /* Configured, started, known to vhost. */
    bool failed;                /* Setup failed; never handed out. */
    bool retired;               /* Out of service (see 'retired_devs'). */
    const char *retired_why;    /* Why it is, if 'retired'. */
    bool stopped;               /* Fenced: rte_dma_stop() returned. */
    int stop_error;             /* What rte_dma_stop() said, if it failed. */
    uint64_t lost;              /* Copies it never completed, in the stats
                                 * of its past lives (dmadev-enable). */
    uint64_t reclaimed;         /* Mbufs of those copies freed by its
                                 * restarts (dma_reclaim_mbufs()). */
    bool reclaim_done;          /* dma_reclaim_mbufs() ran since the last
                                 * start: not again, not twice a free. */
    uint64_t seen_completed;    /* Health watch: completions when it last
                                 * looked, and when they last moved (or the
                                 * engine had nothing to do). */
    long long int progress_ms;
    unsigned int n_stalls;      /* Times it went out of service for that. */
    uint16_t nb_desc;
};

static struct ovs_mutex dma_mutex = OVS_MUTEX_INITIALIZER;
static struct dma_dev dma_devs[NETDEV_DPDK_DMA_MAX_DEVS]
    OVS_GUARDED_BY(dma_mutex);
static int n_dma_devs OVS_GUARDED_BY(dma_mutex);
static bool dma_scanned OVS_GUARDED_BY(dma_mutex);

/* The dmadev of the calling thread, -1 if none. */
DEFINE_STATIC_PER_THREAD_DATA(int, thread_dma, -1);

/* dmadevs taken out of service, a bit per id: read on every burst. */
static atomic_uint64_t retired_devs = 0;

/* Changes of the engines that PMD threads copy on (an engine taken, given
 * back, out of service, back in service), for whoever shows them. */
static atomic_uint64_t service_changes = 0;

static void
service_changed(void)
{
    uint64_t orig;

    atomic_add_relaxed(&service_changes, 1, &orig);
}

/* Per dmadev id, its 'lost' for threads that do not hold dma_mutex. */
static atomic_uint64_t dma_lost[NETDEV_DPDK_DMA_MAX_DEVS];

/* How often the health watch looks at the engines in use. */
#define DMA_WATCH_INTERVAL_MS 100

/* How long dmadev-enable waits for its test copy. */
#define DMA_TEST_COPY_MS 100

/* other_config:dma-stall-timeout: an engine with copies outstanding that
 * completes none for this long goes out of service (0: never). */
#define DMA_STALL_TIMEOUT_DEFAULT_MS 1000
#define DMA_STALL_TIMEOUT_MAX_MS 3600000
static atomic_uint stall_timeout_ms = DMA_STALL_TIMEOUT_DEFAULT_MS;

static void dma_watch_start(void);

/* Copies of vhost ports still in flight on a dmadev, as the copy modes
 * count them (netdev_dpdk_dma_set_users_cb()). */
static unsigned int (*dma_users_cb)(int16_t id);

static void
dma_scan(void)
    OVS_REQUIRES(dma_mutex)
{
    int16_t id;

    if (dma_scanned) {
        return;
    }
    dma_scanned = true;

    RTE_DMA_FOREACH_DEV (id) {
        struct rte_dma_info info;
        struct dma_dev *d;

        if (n_dma_devs >= NETDEV_DPDK_DMA_MAX_DEVS
            || id >= NETDEV_DPDK_DMA_MAX_DEVS) {
            VLOG_WARN("dmadev %d ignored: vhost supports only %d dmadevs",
                      id, NETDEV_DPDK_DMA_MAX_DEVS);
            continue;
        }
        if (rte_dma_info_get(id, &info)) {
            VLOG_WARN("dmadev %d ignored: cannot get its info", id);
            continue;
        }
        d = &dma_devs[n_dma_devs++];
        memset(d, 0, sizeof *d);
        d->id = id;
        ovs_strlcpy(d->name, info.dev_name ? info.dev_name : "?",
                    sizeof d->name);
        d->numa_id = info.numa_node >= 0 ? info.numa_node : 0;
        d->owner = -1;
        VLOG_INFO("dmadev %s (id %d) on NUMA node %d available for vhost "
                  "async copies", d->name, id, d->numa_id);
    }
    if (!n_dma_devs) {
        VLOG_INFO("No dmadevs: vhost async copies are done on the CPU");
    }
}

/* Configures 'd' with one mem-to-mem vchan, starts it and registers it
 * with vhost.  Returns 0 or an errno-style value. */
static int
dma_setup(struct dma_dev *d)
    OVS_REQUIRES(dma_mutex)
{
    struct rte_dma_conf conf = { .nb_vchans = 1 };
    struct rte_dma_vchan_conf vconf = {
        .direction = RTE_DMA_DIR_MEM_TO_MEM,
    };
    struct rte_dma_info info;
    uint32_t nb_desc;
    int err;

    err = rte_dma_info_get(d->id, &info);
    if (err) {
        goto fail;
    }
    if (!(info.dev_capa & RTE_DMA_CAPA_MEM_TO_MEM)) {
        VLOG_WARN("dmadev %s cannot copy memory to memory; not used",
                  d->name);
        err = -ENOTSUP;
        goto out;
    }
    nb_desc = MIN(MAX(DMA_RING_SIZE, info.min_desc), info.max_desc);
    vconf.nb_desc = nb_desc;

    err = rte_dma_configure(d->id, &conf);
    if (!err) {
        err = rte_dma_vchan_setup(d->id, NETDEV_DPDK_DMA_VCHAN, &vconf);
    }
    if (!err) {
        err = rte_dma_start(d->id);
    }
    if (!err) {
        err = rte_vhost_async_dma_configure(d->id, NETDEV_DPDK_DMA_VCHAN);
    }
    if (err) {
        goto fail;
    }
    d->nb_desc = nb_desc;
    d->ready = true;
    dma_watch_start();
    return 0;

fail:
    VLOG_ERR("dmadev %s could not be set up for vhost async copies (%s); "
             "not used", d->name, rte_strerror(-err));
out:
    d->failed = true;
    return err;
}

/* Warns if a dma_swcopy worker runs on 'core_id', a PMD thread's core:
 * two busy pollers on one CPU starve each other. */
static void
dma_check_swcopy_cpus(unsigned core_id)
    OVS_REQUIRES(dma_mutex)
{
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_swcopy_state st;

        if (!dma_swcopy_get_state(dma_devs[i].name, &st)
            && st.cpu == (int) core_id) {
            VLOG_WARN("dmadev %s: its dma_swcopy worker runs on CPU %u, "
                      "which is also a PMD thread's core: both poll and "
                      "starve each other; give the engine a CPU of its own "
                      "(--vdev=%s,lcore=N) or change pmd-cpu-mask",
                      dma_devs[i].name, core_id, dma_devs[i].name);
        }
    }
}

/* Called by a PMD thread when it attaches to DPDK: takes a free dmadev,
 * preferring the thread's NUMA node. */
void
netdev_dpdk_dma_thread_attach(unsigned core_id)
{
    int numa_id = ovs_numa_get_numa_id(core_id);
    struct dma_dev *pick = NULL;

    ovs_mutex_lock(&dma_mutex);
    dma_scan();
    dma_check_swcopy_cpus(core_id);
    for (int pass = 0; pass < 2 && !pick; pass++) {
        for (int i = 0; i < n_dma_devs; i++) {
            struct dma_dev *d = &dma_devs[i];

            if (d->owner >= 0 || d->failed || d->retired
                || (pass == 0 && d->numa_id != numa_id)) {
                continue;
            }
            if (!d->ready && dma_setup(d)) {
                continue;
            }
            pick = d;
            break;
        }
    }
    if (pick) {
        pick->owner = core_id;
        *thread_dma_get() = pick->id;
        service_changed();
        VLOG_INFO("PMD thread on core %u uses dmadev %s (id %d, NUMA node "
                  "%d%s)", core_id, pick->name, pick->id, pick->numa_id,
                  pick->numa_id == numa_id ? "" : ", remote");
    } else {
        *thread_dma_get() = -1;
        if (n_dma_devs) {
            VLOG_WARN("PMD thread on core %u has no free dmadev: its vhost "
                      "async copies are done on the CPU", core_id);
        }
    }
    ovs_mutex_unlock(&dma_mutex);
}

/* Called by a PMD thread when it detaches from DPDK, after its deferred
 * work was drained: gives its dmadev back. */
void
netdev_dpdk_dma_thread_detach(void)
{
    int id = *thread_dma_get();

    if (id < 0) {
        return;
    }
    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        if (dma_devs[i].id == id) {
            VLOG_INFO("PMD thread on core %d gave back dmadev %s",
                      dma_devs[i].owner, dma_devs[i].name);
            dma_devs[i].owner = -1;
            service_changed();
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    *thread_dma_get() = -1;
}

/* Copies in flight on the calling thread's engine: submitted, not yet
 * reported complete (nor lost to a restart). */
static uint64_t
dma_thread_inflight(void)
{
    int id = *thread_dma_get();
    struct rte_dma_stats st;
    uint64_t lost;

    if (id < 0 || rte_dma_stats_get(id, NETDEV_DPDK_DMA_VCHAN, &st)) {
        return 0;
    }
    atomic_read_relaxed(&dma_lost[id], &lost);
    return st.submitted - MIN(st.submitted, st.completed + lost);
}

int16_t
netdev_dpdk_dma_get(void)
{
    int id = *thread_dma_get();

    return id >= 0 && !(netdev_dpdk_dma_retired() & (UINT64_C(1) << id))
           ? id : -1;
}

uint64_t
netdev_dpdk_dma_retired(void)
{
    uint64_t retired;

    atomic_read_relaxed(&retired_devs, &retired);
    return retired;
}

uint64_t
netdev_dpdk_dma_service_changes(void)
{
    uint64_t n;

    atomic_read_relaxed(&service_changes, &n);
    return n;
}

int
netdev_dpdk_dma_in_service(struct ds *names)
{
    int n = 0;

    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        const struct dma_dev *d = &dma_devs[i];

        if (d->owner >= 0 && d->ready && !d->retired) {
            if (names) {
                ds_put_format(names, "%s%s", n ? ", " : "", d->name);
            }
            n++;
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    return n;
}

/* Fences 'd': once rte_dma_stop() returns, the engine has finished or
 * dropped every copy it held and starts none until it is started again.
 * Its owner may be in the middle of a burst on it: a stopped dmadev
 * refuses new copies (vhost then keeps the packets), and the engine runs
 * none that slips in. */
static void
dma_fence(struct dma_dev *d)
    OVS_REQUIRES(dma_mutex)
{
    if (d->ready && !d->stopped) {
        d->stop_error = rte_dma_stop(d->id);
        d->stopped = true;
        if (d->stop_error) {
            VLOG_ERR("dmadev %s could not be stopped (%s): the copies it "
                     "holds may still land", d->name,
                     rte_strerror(-d->stop_error));
        } else {
            VLOG_INFO("dmadev %s stopped: it runs no copy until "
                      "\"ovs-appctl netdev-dpdk/dmadev-enable %s\"",
                      d->name, d->name);
        }
    }
}

void
netdev_dpdk_dma_retire(uint64_t mask, const char *why)
{
    uint64_t orig;

    if (!mask) {
        return;
    }
    atomic_or_relaxed(&retired_devs, mask, &orig);
    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_dev *d = &dma_devs[i];

        if (mask & (UINT64_C(1) << d->id) && !d->retired) {
            d->retired = true;
            d->retired_why = why;
            service_changed();
            VLOG_ERR("dmadev %s taken out of service: %s; its PMD thread "
                     "copies on the CPU from now on", d->name, why);
        }
        if (mask & (UINT64_C(1) << d->id)) {
            dma_fence(d);
        }
    }
    ovs_mutex_unlock(&dma_mutex);
}

uint64_t
netdev_dpdk_dma_busy(uint64_t mask)
{
    uint64_t busy = 0;

    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_dev *d = &dma_devs[i];
        enum rte_dma_vchan_status st;

        if (mask & (UINT64_C(1) << d->id) && d->ready
            && !rte_dma_vchan_status(d->id, NETDEV_DPDK_DMA_VCHAN, &st)
            && st != RTE_DMA_VCHAN_IDLE) {
            busy |= UINT64_C(1) << d->id;
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    return busy;
}

uint64_t
netdev_dpdk_dma_caught_up(uint64_t mask, int ms)
{
    uint64_t target[RTE_DMADEV_DEFAULT_MAX] = { 0 };
    uint64_t pending = 0, done = 0;
    long long int deadline = time_msec() + ms;

    for (uint64_t m = mask; m; m = zero_rightmost_1bit(m)) {
        int id = rightmost_1bit_idx(m);
        struct rte_dma_stats st;

        if (id < RTE_DMADEV_DEFAULT_MAX
            && !rte_dma_stats_get(id, NETDEV_DPDK_DMA_VCHAN, &st)) {
            target[id] = st.submitted;
            pending |= UINT64_C(1) << id;
        }
    }
    for (;;) {
        for (uint64_t m = pending; m; m = zero_rightmost_1bit(m)) {
            int id = rightmost_1bit_idx(m);
            struct rte_dma_stats st;

            if (!rte_dma_stats_get(id, NETDEV_DPDK_DMA_VCHAN, &st)
                && st.completed + st.errors >= target[id]) {
                done |= UINT64_C(1) << id;
            }
        }
        pending &= ~done;
        if (!pending || time_msec() >= deadline) {
            return done;
        }
        /* Not xnanosleep(): its caller may be vhost's thread, in a vhost
         * callback, which OVS leaves RCU-quiescent between callbacks.
         * xnanosleep() would leave it registered and not quiescent, and
         * the next ovsrcu_synchronize() elsewhere (the main thread's
         * destroy_device(), inside rte_vhost_driver_unregister(), which
         * holds the lock that vhost's thread takes for its next message)
         * would wait for it for good. */
        xnanosleep_no_quiesce(100 * 1000);
    }
}

uint64_t
netdev_dpdk_dma_reported(uint64_t mask)
{
    uint64_t n = 0;

    for (; mask; mask = zero_rightmost_1bit(mask)) {
        struct rte_dma_stats st;

        if (!rte_dma_stats_get(rightmost_1bit_idx(mask),
                               NETDEV_DPDK_DMA_VCHAN, &st)) {
            n += st.completed;
        }
    }
    return n;
}

void
netdev_dpdk_dma_set_users_cb(unsigned int (*cb)(int16_t id))
{
    dma_users_cb = cb;
}

/* vhost does not handle DMA errors (22.11, nor 24.11's
 * lib/vhost/virtio_net.c): it only calls rte_dma_completed(),
 * which stops at the first failed copy until rte_dma_completed_status()
 * collects it, so neither that copy nor any later one of the engine ever
 * completes for vhost.  A vchan that says it halted on an error is taken
 * out of service at once; its queues then reset their devices (see
 * netdev-dpdk-vhost-async.c). */
/* True if 'd', which has copies it did not execute yet ('active'), has
 * completed none for the stall timeout.  An engine with nothing to do is
 * never stalled. */
static bool
dma_stalled(struct dma_dev *d, bool active, long long int now)
    OVS_REQUIRES(dma_mutex)
{
    struct rte_dma_stats st;
    unsigned int timeout;

    atomic_read_relaxed(&stall_timeout_ms, &timeout);
    if (rte_dma_stats_get(d->id, NETDEV_DPDK_DMA_VCHAN, &st)) {
        return false;
    }
    if (!active || st.completed != d->seen_completed || !timeout) {
        d->seen_completed = st.completed;
        d->progress_ms = now;
        return false;
    }
    return now - d->progress_ms >= timeout;
}

/* The health watch: an engine whose vchan halted on an error, and one that
 * completes nothing while it has copies to do (a hung device, or
 * dma_swcopy held on purpose), go out of service.  Nothing else would
 * notice the second before a clear times out, and meanwhile its queues
 * would stall. */
static void
dma_watch_run(void)
{
    /* The engines' own time: time/warp (--enable-dummy) moves time_msec()
     * by minutes at once, which would make every engine look stalled. */
    long long int now = rte_get_timer_cycles()
                        / (rte_get_timer_hz() / 1000);
    uint64_t halted = 0, stalled = 0;

    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_dev *d = &dma_devs[i];
        enum rte_dma_vchan_status st;

        if (!d->ready || d->retired
            || rte_dma_vchan_status(d->id, NETDEV_DPDK_DMA_VCHAN, &st)) {
            continue;
        }
        if (st == RTE_DMA_VCHAN_HALTED_ERROR) {
            halted |= UINT64_C(1) << d->id;
        } else if (dma_stalled(d, st == RTE_DMA_VCHAN_ACTIVE, now)) {
            d->n_stalls++;
            stalled |= UINT64_C(1) << d->id;
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    netdev_dpdk_dma_retire(halted, "a copy failed, and vhost does not "
                           "handle DMA errors: that copy and every later "
                           "one on this engine never complete");
    netdev_dpdk_dma_retire(stalled, "it completed no copy for "
                           "other_config:dma-stall-timeout with copies "
                           "outstanding");
}

/* Applies other_config:dma-stall-timeout.  A bad value is logged once and
 * changes nothing (ovs-fork-config.h). */
void
netdev_dpdk_dma_set_config(const struct smap *ovs_other_config)
{
    static struct fork_uint_key key = {
        .name = "dma-stall-timeout", .what = "a number of milliseconds",
        .min = 0, .max = DMA_STALL_TIMEOUT_MAX_MS,
    };
    unsigned int cur, ms;

    atomic_read_relaxed(&stall_timeout_ms, &cur);
    if (fork_uint_key_read(&key, ovs_other_config,
                           DMA_STALL_TIMEOUT_DEFAULT_MS, cur, &ms)
        && ms != cur) {
        atomic_store_relaxed(&stall_timeout_ms, ms);
        VLOG_INFO("DMA engines that complete nothing for %u ms with copies "
                  "outstanding go out of service%s", ms,
                  ms ? "" : " (never: 0)");
    }
}

static void *
dma_watch_main(void *arg OVS_UNUSED)
{
    for (;;) {
        dma_watch_run();
        xnanosleep(DMA_WATCH_INTERVAL_MS * 1000 * 1000);
    }
    return NULL;
}

/* Starts the health watch once some engine is in use. */
static void
dma_watch_start(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        ovs_thread_create("dma_watch", dma_watch_main, NULL);
        ovsthread_once_done(&once);
    }
}

static void
dma_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
         const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds reply = DS_EMPTY_INITIALIZER;

    ovs_mutex_lock(&dma_mutex);
    dma_scan();
    if (!n_dma_devs) {
        ds_put_cstr(&reply, "No dmadevs: vhost async copies are done on the "
                    "CPU.  Add DMA engines to other_config:dpdk-extra, e.g. "
                    "--vdev=dma_skeleton0.\n");
    }
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_dev *d = &dma_devs[i];
        struct rte_dma_stats st;

        ds_put_format(&reply, "dmadev %s (id %d):\n  numa_id: %d\n"
                      "  owner: ", d->name, d->id, d->numa_id);
        if (d->owner >= 0) {
            ds_put_format(&reply, "pmd core %d\n", d->owner);
        } else {
            ds_put_cstr(&reply, d->failed ? "unusable\n" : "free\n");
        }
        if (d->n_stalls) {
            ds_put_format(&reply, "  stalls: %u (completed nothing for "
                          "other_config:dma-stall-timeout)\n", d->n_stalls);
        }
        if (d->retired) {
            ds_put_format(&reply, "  state: out of service (%s), %s; "
                          "\"ovs-appctl netdev-dpdk/dmadev-enable %s\" "
                          "brings it back once no port has copies on it\n",
                          d->retired_why,
                          !d->stopped ? "not stopped"
                          : d->stop_error ? "could not be stopped"
                          : "stopped", d->name);
        }
        if (d->ready && !rte_dma_stats_get(d->id, NETDEV_DPDK_DMA_VCHAN,
                                           &st)) {
            /* 'completed' includes the failed ones (rte_dma_stats). */
            uint64_t done = st.completed + d->lost;

            ds_put_format(&reply, "  ring size: %"PRIu16"\n"
                          "  copies submitted: %"PRIu64"\n"
                          "  copies completed: %"PRIu64"\n"
                          "  copies failed: %"PRIu64"\n"
                          "  copies in flight: %"PRIu64"\n",
                          d->nb_desc, st.submitted, st.completed, st.errors,
                          st.submitted > done ? st.submitted - done : 0);
            if (d->lost) {
                ds_put_format(&reply, "  copies lost by restarts: %"PRIu64
                              " (mbufs of Rx copies freed: %"PRIu64")\n",
                              d->lost, d->reclaimed);
            }
        } else {
            ds_put_cstr(&reply, "  copies submitted: 0\n");
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    unixctl_command_reply(conn, ds_cstr(&reply));
    ds_destroy(&reply);
}

/* Checks engine 'id', just started, with one copy of a known pattern.
 * Returns NULL, or why it failed. */
static const char *
dma_test_copy(int16_t id)
{
    enum { LEN = 64 };
    uint8_t *buf = rte_zmalloc("ovs_dma_test", 2 * LEN, RTE_CACHE_LINE_SIZE);
    const char *why = NULL;
    long long int deadline;
    rte_iova_t iova;
    uint16_t last;
    bool error;

    if (!buf) {
        return "no memory for the test copy";
    }
    for (int i = 0; i < LEN; i++) {
        buf[i] = i ^ 0x5a;
    }
    iova = rte_malloc_virt2iova(buf);
    if (iova == RTE_BAD_IOVA
        || rte_dma_copy(id, NETDEV_DPDK_DMA_VCHAN, iova, iova + LEN, LEN,
                        RTE_DMA_OP_FLAG_SUBMIT) < 0) {
        why = "it refused the test copy";
        goto out;
    }
    deadline = time_msec() + DMA_TEST_COPY_MS;
    while (!rte_dma_completed(id, NETDEV_DPDK_DMA_VCHAN, 1, &last, &error)) {
        if (error) {
            why = "the test copy failed";
            goto out;
        }
        if (time_msec() > deadline) {
            why = "the test copy did not complete in time";
            goto out;
        }
        /* The caller is in the middle of its work: it must not quiesce. */
        xnanosleep_no_quiesce(10 * 1000);
    }
    if (memcmp(buf, buf + LEN, LEN)) {
        why = "the test copy completed with wrong data";
    }
out:
    rte_free(buf);
    return why;
}

/* ---- The mbufs of copies that an engine never completed ---------------
 *
 * vhost allocates the mbuf of each dequeue (Rx) copy, from the mempool that
 * the PMD passes, and keeps it until the copy's engine reports the copy
 * complete.  It has no call that hands back the mbufs of copies that never
 * complete, and frees its state without them when the device goes away
 * (22.11 and 24.11).  They are found again when the engine is brought back:
 * by then no vhost port has copies on it (dma_enable_check()), every thread
 * quiesced since it went out of service, so nothing asks for those
 * completions any more, and the engine, stopped, never touches the memory
 * they name.  Each copy that the engine never reported and that writes
 * into an mbuf of a mempool of ours therefore names an mbuf that nobody
 * holds.  (A Tx copy writes into guest memory, never into a mempool: the
 * mbufs it reads from are the ones that vhost_tx_held_release() frees in
 * netdev-dpdk-vhost-tx.c.)
 *
 * Only an engine that can list the copies it never reported can be asked:
 * dma_swcopy (dma_swcopy_unreported()).  A hardware engine forgets them
 * when it is stopped, and those mbufs stay lost, counted as copies lost in
 * netdev-dpdk/dmadev-show. */

struct dma_reclaim {
    uint64_t *dsts;             /* The copies' destinations, sorted. */
    size_t n_dsts, allocated;
    struct rte_mbuf **mbufs;    /* The mbufs they write into. */
    size_t n_mbufs, mbufs_allocated;
    bool hit;                   /* Some destination is in the pool. */
};

static void
dma_reclaim_add(void *r_, uint64_t src OVS_UNUSED, uint64_t dst,
                uint32_t len OVS_UNUSED)
{
    struct dma_reclaim *r = r_;

    if (r->n_dsts >= r->allocated) {
        r->dsts = x2nrealloc(r->dsts, &r->allocated, sizeof *r->dsts);
    }
    r->dsts[r->n_dsts++] = dst;
}

static int
dma_reclaim_compare(const void *a_, const void *b_)
{
    const uint64_t *a = a_, *b = b_;

    return *a < *b ? -1 : *a > *b;
}

/* Whether some destination in 'r' is in ['start', 'start' + 'len'). */
static bool
dma_reclaim_hits(const struct dma_reclaim *r, uintptr_t start, size_t len)
{
    size_t lo = 0, hi = r->n_dsts;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (r->dsts[mid] < start) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < r->n_dsts && r->dsts[lo] - start < len;
}

static void
dma_reclaim_chunk(struct rte_mempool *mp OVS_UNUSED, void *r_,
                  struct rte_mempool_memhdr *memhdr,
                  unsigned mem_idx OVS_UNUSED)
{
    struct dma_reclaim *r = r_;

    r->hit |= dma_reclaim_hits(r, (uintptr_t) memhdr->addr, memhdr->len);
}

static void
dma_reclaim_obj(struct rte_mempool *mp, void *r_, void *obj,
                unsigned obj_idx OVS_UNUSED)
{
    struct dma_reclaim *r = r_;
    struct rte_mbuf *m = obj;
    /* The mbuf's own data room, where rte_pktmbuf_init() put it. */
    char *room = (char *) m + sizeof *m + rte_pktmbuf_priv_size(mp);

    if (dma_reclaim_hits(r, (uintptr_t) room,
                         rte_pktmbuf_data_room_size(mp))) {
        if (r->n_mbufs >= r->mbufs_allocated) {
            r->mbufs = x2nrealloc(r->mbufs, &r->mbufs_allocated,
                                  sizeof *r->mbufs);
        }
        r->mbufs[r->n_mbufs++] = m;
    }
}

static void
dma_reclaim_pool(struct rte_mempool *mp, void *r_)
{
    struct dma_reclaim *r = r_;

    /* Only mbuf pools (rte_pktmbuf_pool_create()). */
    if (mp->private_data_size < sizeof(struct rte_pktmbuf_pool_private)
        || mp->elt_size < sizeof(struct rte_mbuf)) {
        return;
    }
    r->hit = false;
    rte_mempool_mem_iter(mp, dma_reclaim_chunk, r);
    if (r->hit) {
        rte_mempool_obj_iter(mp, dma_reclaim_obj, r);
    }
}

/* Engine 'd' is stopped, out of service, and no vhost port has copies on
 * it: frees the mbufs that the copies it never reported complete write
 * into, before its restart forgets them. */
static void
dma_reclaim_mbufs(struct dma_dev *d)
    OVS_REQUIRES(dma_mutex)
{
    struct dma_reclaim r;
    unsigned int freed = 0;
    int n;

    if (!d->stopped || d->stop_error || d->reclaim_done
        || rte_eal_iova_mode() != RTE_IOVA_VA) {
        return;
    }
    d->reclaim_done = true;
    memset(&r, 0, sizeof r);
    n = dma_swcopy_unreported(d->name, dma_reclaim_add, &r);
    if (n > 0) {
        qsort(r.dsts, r.n_dsts, sizeof *r.dsts, dma_reclaim_compare);
        rte_mempool_walk(dma_reclaim_pool, &r);
        for (size_t i = 0; i < r.n_mbufs; i++) {
            struct rte_mbuf *m = r.mbufs[i];

            /* vhost allocated it and handed it to nobody. */
            if (RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1) {
                rte_pktmbuf_free_seg(m);
                freed++;
            }
        }
        d->reclaimed += freed;
        COVERAGE_ADD(dma_mbufs_reclaimed, freed);
        VLOG_INFO("dmadev %s: %d copies were never completed; freed the "
                  "%u mbufs that vhost kept for those of them that copy out "
                  "of a guest", d->name, n, freed);
    }
    free(r.dsts);
    free(r.mbufs);
}

/* Why engine 'd' cannot be brought back now, or NULL. */
static char *
dma_enable_check(struct dma_dev *d)
    OVS_REQUIRES(dma_mutex)
{
    unsigned int users;

    if (!d->ready) {
        return xasprintf("dmadev %s was never set up", d->name);
    }
    if (!d->retired) {
        return xasprintf("dmadev %s is in service", d->name);
    }
    users = dma_users_cb ? dma_users_cb(d->id) : 0;
    if (users) {
        return xasprintf("%u copies of vhost ports are still in flight on "
                         "dmadev %s: their queues are reset first (see "
                         "netdev-dpdk/vhost-copy-mode-get); try again",
                         users, d->name);
    }
    return NULL;
}

/* Brings engine 'd', out of service, back: restarts it clean and checks it
 * with a test copy.  Returns NULL, or why it stays out of service.  The
 * caller made every thread quiesce since 'd' went out of service: no PMD
 * thread is in the middle of a burst on it. */
static char *
dma_enable(struct dma_dev *d)
    OVS_REQUIRES(dma_mutex)
{
    struct rte_dma_stats st;
    const char *why;
    uint64_t orig;
    char *error;

    error = dma_enable_check(d);
    if (error) {
        return error;
    }
    dma_fence(d);
    /* What it never completed stays lost, the restart forgets it: all but
     * the mbufs that vhost kept for it. */
    if (!rte_dma_stats_get(d->id, NETDEV_DPDK_DMA_VCHAN, &st)) {
        d->lost = st.submitted - MIN(st.submitted, st.completed);
        atomic_store_relaxed(&dma_lost[d->id], d->lost);
    }
    dma_reclaim_mbufs(d);
    if (rte_dma_start(d->id)) {
        return xasprintf("dmadev %s cannot be started", d->name);
    }
    d->reclaim_done = false;
    why = dma_test_copy(d->id);
    if (why) {
        rte_dma_stop(d->id);
        return xasprintf("dmadev %s stays out of service: %s", d->name, why);
    }
    d->retired = false;
    d->retired_why = NULL;
    d->stopped = false;
    d->stop_error = 0;
    atomic_and_relaxed(&retired_devs, ~(UINT64_C(1) << d->id), &orig);
    service_changed();
    VLOG_INFO("dmadev %s back in service: restarted, test copy verified",
              d->name);
    return NULL;
}

static void
dma_enable_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
               const char *argv[], void *aux OVS_UNUSED)
{
    struct dma_dev *d = NULL;
    char *error;

    ovs_mutex_lock(&dma_mutex);
    dma_scan();
    for (int i = 0; i < n_dma_devs; i++) {
        if (!strcmp(dma_devs[i].name, argv[1])) {
            d = &dma_devs[i];
        }
    }
    error = (!d ? xasprintf("%.64s: no such dmadev (see "
                            "netdev-dpdk/dmadev-show)", argv[1])
             : dma_enable_check(d));
    ovs_mutex_unlock(&dma_mutex);
    if (!error) {
        /* Out of service, no PMD thread takes it for a new burst: once
         * every thread has quiesced (not under dma_mutex, which a PMD
         * thread that starts takes), none is in an old one. */
        ovsrcu_synchronize();
        ovs_mutex_lock(&dma_mutex);
        error = dma_enable(d);
        ovs_mutex_unlock(&dma_mutex);
    }
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
    } else {
        unixctl_command_reply(conn, "in service");
    }
}

void
netdev_dpdk_dma_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        /* Our software engine registers itself before EAL probes vdevs
         * (a constructor); this reference keeps it linked in. */
        dma_swcopy_register();
        unixctl_command_register("netdev-dpdk/dmadev-show", "", 0, 0,
                                 dma_show, NULL);
        unixctl_command_register("netdev-dpdk/dmadev-enable", "dmadev", 1, 1,
                                 dma_enable_cmd, NULL);
        dp_defer_set_inflight_probe(dma_thread_inflight);
        dma_swcopy_ctl_init();
        ovsthread_once_done(&once);
    }
}
