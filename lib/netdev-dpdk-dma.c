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

#include <rte_dev.h>
#include <rte_dmadev.h>
#include <rte_errno.h>
#include <rte_vhost_async.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-numa.h"
#include "ovs-thread.h"
#include "unixctl.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(netdev_dpdk_dma);

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

/* How often the health watch looks at the engines in use. */
#define DMA_WATCH_INTERVAL_MS 100

static void dma_watch_start(void);

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
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    *thread_dma_get() = -1;
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
            VLOG_ERR("dmadev %s taken out of service: %s; its PMD thread "
                     "copies on the CPU from now on", d->name, why);
        }
    }
    ovs_mutex_unlock(&dma_mutex);
}

/* vhost 22.11 does not handle DMA errors: it only calls rte_dma_completed(),
 * which stops at the first failed copy until rte_dma_completed_status()
 * collects it, so neither that copy nor any later one of the engine ever
 * completes for vhost.  A vchan that says it halted on an error is taken
 * out of service at once; its queues then reset their devices (see
 * netdev-dpdk-vhost-async.c). */
static void
dma_watch_run(void)
{
    uint64_t halted = 0;

    ovs_mutex_lock(&dma_mutex);
    for (int i = 0; i < n_dma_devs; i++) {
        struct dma_dev *d = &dma_devs[i];
        enum rte_dma_vchan_status st;

        if (d->ready && !d->retired
            && !rte_dma_vchan_status(d->id, NETDEV_DPDK_DMA_VCHAN, &st)
            && st == RTE_DMA_VCHAN_HALTED_ERROR) {
            halted |= UINT64_C(1) << d->id;
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    netdev_dpdk_dma_retire(halted, "a copy failed, and vhost does not "
                           "handle DMA errors: that copy and every later "
                           "one on this engine never complete");
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
        if (d->retired) {
            ds_put_format(&reply, "  state: out of service (%s)\n",
                          d->retired_why);
        }
        if (d->ready && !rte_dma_stats_get(d->id, NETDEV_DPDK_DMA_VCHAN,
                                           &st)) {
            /* 'completed' includes the failed ones (rte_dma_stats). */
            uint64_t done = st.completed;

            ds_put_format(&reply, "  ring size: %"PRIu16"\n"
                          "  copies submitted: %"PRIu64"\n"
                          "  copies completed: %"PRIu64"\n"
                          "  copies failed: %"PRIu64"\n"
                          "  copies in flight: %"PRIu64"\n",
                          d->nb_desc, st.submitted, st.completed, st.errors,
                          st.submitted > done ? st.submitted - done : 0);
        } else {
            ds_put_cstr(&reply, "  copies submitted: 0\n");
        }
    }
    ovs_mutex_unlock(&dma_mutex);
    unixctl_command_reply(conn, ds_cstr(&reply));
    ds_destroy(&reply);
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
        dma_swcopy_ctl_init();
        ovsthread_once_done(&once);
    }
}
