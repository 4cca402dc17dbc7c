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

#include "dma-swcopy-ctl.h"

#include <errno.h>
#include <inttypes.h>

#include <rte_dmadev.h>

#include "dma-swcopy.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/vlog.h"
#include "ovs-fork-testing.h"
#include "ovs-thread.h"
#include "unixctl.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(dma_swcopy_ctl);

/* Upper bounds of the numeric arguments. */
#define HOLD_MAX_MS (10 * 60 * 1000)
#define FAIL_MAX 1000000000
#define DELAY_MAX_US 1000000

/* Parses argv[i] as a number from 0 to 'max' for 'what'.  On error, replies
 * to 'conn' and returns false. */
static bool
parse_arg(struct unixctl_conn *conn, const char *arg, const char *what,
          unsigned int max, unsigned int *value)
{
    if (!str_to_uint(arg, 10, value) || *value > max) {
        struct ds reply = DS_EMPTY_INITIALIZER;

        ds_put_format(&reply, "invalid %s \"%.32s%s\" (expected a number "
                      "from 0 to %u)", what, arg,
                      strlen(arg) > 32 ? "..." : "", max);
        unixctl_command_reply_error(conn, ds_cstr(&reply));
        ds_destroy(&reply);
        return false;
    }
    return true;
}

/* Replies to 'conn' after an engine call that returned 'err'. */
static void
reply(struct unixctl_conn *conn, const char *name, int err, const char *what)
{
    struct ds ds = DS_EMPTY_INITIALIZER;

    if (err == -ENODEV) {
        ds_put_format(&ds, "%.64s%s: no such dma_swcopy engine "
                      "(see dma-swcopy/show)", name,
                      strlen(name) > 64 ? "..." : "");
        unixctl_command_reply_error(conn, ds_cstr(&ds));
    } else if (err) {
        ds_put_format(&ds, "%s: %s", name, ovs_strerror(-err));
        unixctl_command_reply_error(conn, ds_cstr(&ds));
    } else {
        VLOG_INFO("%s: %s", name, what);
        ds_put_format(&ds, "%s: %s", name, what);
        unixctl_command_reply(conn, ds_cstr(&ds));
    }
    ds_destroy(&ds);
}

static void
hold_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
         void *aux OVS_UNUSED)
{
    unsigned int ms = 0;
    char *what;

    if (argc > 2 && !parse_arg(conn, argv[2], "release time (ms)",
                               HOLD_MAX_MS, &ms)) {
        return;
    }
    what = ms ? xasprintf("held, copies stay in flight for %u ms", ms)
              : xstrdup("held, copies stay in flight until released");
    reply(conn, argv[1], dma_swcopy_hold(argv[1], ms), what);
    free(what);
}

static void
release_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED,
            const char *argv[], void *aux OVS_UNUSED)
{
    reply(conn, argv[1], dma_swcopy_release(argv[1]), "released");
}

static void
fail_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED, const char *argv[],
         void *aux OVS_UNUSED)
{
    unsigned int n;
    char *what;

    if (!parse_arg(conn, argv[2], "number of copies", FAIL_MAX, &n)) {
        return;
    }
    what = xasprintf("the next %u copies fail", n);
    reply(conn, argv[1], dma_swcopy_fail(argv[1], n), what);
    free(what);
}

static void
delay_cmd(struct unixctl_conn *conn, int argc OVS_UNUSED, const char *argv[],
          void *aux OVS_UNUSED)
{
    unsigned int us;
    char *what;

    if (!parse_arg(conn, argv[2], "delay (us)", DELAY_MAX_US, &us)) {
        return;
    }
    what = us ? xasprintf("each copy takes at least %u us", us)
              : xstrdup("copy delay off");
    reply(conn, argv[1], dma_swcopy_delay(argv[1], us), what);
    free(what);
}

static void
format_engine(struct ds *ds, const char *name,
              const struct dma_swcopy_state *st)
{
    ds_put_format(ds, "%s:\n  worker: cpu %d, %s\n", name, st->cpu,
                  st->started ? "started" : "stopped");
    ds_put_format(ds, "  held: %s", st->held ? "yes" : "no");
    if (st->held && st->release_in_ms) {
        ds_put_format(ds, " (released in %"PRIu32" ms)", st->release_in_ms);
    }
    ds_put_format(ds, "\n  fail next: %"PRIu32"\n  delay: %"PRIu32" us\n"
                  "  copies submitted: %"PRIu64"\n"
                  "  copies executed: %"PRIu64"\n"
                  "  copies completed: %"PRIu64"\n"
                  "  copies failed: %"PRIu64" (%"PRIu64" on purpose)\n"
                  "  copies in flight: %"PRIu64"\n"
                  "  holds: %"PRIu64"\n"
                  "  copies executed by a stop: %"PRIu64"\n"
                  "  copies dropped by a stop: %"PRIu64"\n",
                  st->fail_left, st->delay_us, st->submitted, st->executed,
                  st->completed, st->failed, st->injected,
                  st->submitted > st->completed + st->stop_dropped
                  ? st->submitted - st->completed - st->stop_dropped : 0,
                  st->holds,
                  st->stop_executed, st->stop_dropped);
}

static void
show_cmd(struct unixctl_conn *conn, int argc, const char *argv[],
         void *aux OVS_UNUSED)
{
    struct ds ds = DS_EMPTY_INITIALIZER;
    struct dma_swcopy_state st;
    int n = 0;

    if (argc > 1) {
        int err = dma_swcopy_get_state(argv[1], &st);

        if (err) {
            reply(conn, argv[1], err, NULL);
            ds_destroy(&ds);
            return;
        }
        format_engine(&ds, argv[1], &st);
    } else {
        int16_t id;

        RTE_DMA_FOREACH_DEV (id) {
            struct rte_dma_info info;

            if (!rte_dma_info_get(id, &info) && info.dev_name
                && !dma_swcopy_get_state(info.dev_name, &st)) {
                format_engine(&ds, info.dev_name, &st);
                n++;
            }
        }
        if (!n) {
            ds_put_cstr(&ds, "No dma_swcopy engines.  Add one to "
                        "other_config:dpdk-extra, e.g. "
                        "--vdev=dma_swcopy0,lcore=0.\n");
        }
    }
    unixctl_command_reply(conn, ds_cstr(&ds));
    ds_destroy(&ds);
}

void
dma_swcopy_ctl_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;

    if (ovsthread_once_start(&once)) {
        /* Fault injection is a testing aid (--enable-dummy). */
        if (ovs_fork_testing_enabled()) {
            unixctl_command_register("dma-swcopy/hold",
                                     "engine [release-ms]", 1, 2, hold_cmd,
                                     NULL);
            unixctl_command_register("dma-swcopy/release", "engine", 1, 1,
                                     release_cmd, NULL);
            unixctl_command_register("dma-swcopy/fail", "engine n-copies",
                                     2, 2, fail_cmd, NULL);
            unixctl_command_register("dma-swcopy/delay", "engine us", 2, 2,
                                     delay_cmd, NULL);
        }
        unixctl_command_register("dma-swcopy/show", "[engine]", 0, 1,
                                 show_cmd, NULL);
        ovsthread_once_done(&once);
    }
}
