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

/* The vring_state_changed filter of lib/netdev-dpdk-vhost-async.c, fed the
 * calls that DPDK 22.11's vhost makes: what a guest does, and the bracket
 * of disables and enables of every vring around a memory table change of a
 * device registered with ASYNC_COPY (vhost_user_set_mem_table()).  A guest
 * that uses one of its two queue pairs has vrings 2 and 3 disabled; the
 * bracket must not reach netdev-dpdk for them.  No guest we have can keep
 * vrings disabled across a live SET_MEM_TABLE (virtio-user re-enables
 * every vring it paused), so this drives the callback directly. */

#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "netdev-dpdk-vhost-async.h"

static int passed, failed;

static void
check(bool ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    if (ok) {
        passed++;
    } else {
        failed++;
    }
}

/* Calls the filter for 'vrings' (a bit per vring) in order; returns a bit
 * per vring that was forwarded. */
static unsigned int
notify(int vid, unsigned int vrings, int enable)
{
    unsigned int forwarded = 0;

    for (int vr = 0; vr < 8; vr++) {
        if (vrings & (1u << vr)
            && vhost_async_vring_state_changed(vid, vr, enable)) {
            forwarded |= 1u << vr;
        }
    }
    return forwarded;
}

/* vhost's bracket around a memory table change, on 'n' vrings: returns
 * the vrings whose disable and enable both reached netdev-dpdk. */
/* vhost-user's message header as the protocol lays it out. */
struct msg {
    uint32_t request;
    uint32_t flags;
    uint32_t size;
    uint32_t payload[2];
};

/* vhost is about to handle message 'request' (5: SET_MEM_TABLE, 1:
 * GET_FEATURES). */
static void
message(int vid, uint32_t request)
{
    struct msg msg = { .request = request };

    check(vhost_async_pre_message(vid, &msg) == VHOST_ASYNC_MSG_PASS,
          "vhost handles the message itself");
}

/* vhost's handling of SET_MEM_TABLE on a device registered with
 * ASYNC_COPY: every one of 'n' vrings disabled and enabled again, then the
 * next message. */
static unsigned int
mem_table_bracket(int vid, int n)
{
    unsigned int all = (1u << n) - 1;
    unsigned int off, on;

    message(vid, 5);
    off = notify(vid, all, 0);
    on = notify(vid, all, 1);
    message(vid, 1);
    return off & on;
}

int
main(void)
{
    const int vid = 7;

    check(notify(vid, 0x3, 1) == 0x3,
          "the guest enables vrings 0 and 1: forwarded");
    check(mem_table_bracket(vid, 4) == 0x3,
          "a memory table change on 4 vrings: only the bracket of the "
          "enabled vrings 0 and 1 is forwarded, vrings 2 and 3 stay "
          "disabled");
    check(notify(vid, 0xc, 1) == 0xc,
          "the guest enables vrings 2 and 3 afterwards: forwarded");
    check(notify(vid, 0x8, 0) == 0x8,
          "the guest disables vring 3: forwarded");
    check(mem_table_bracket(vid, 4) == 0x7,
          "another memory table change: vrings 0-2 cycle, vring 3 stays "
          "disabled");
    check(notify(vid, 0x8, 1) == 0x8,
          "the guest enables vring 3 again: forwarded");
    check(notify(vid, 0x1, 0) == 0x1 && notify(vid, 0x1, 1) == 0x1,
          "the guest pauses vring 0 and resumes it: both forwarded");
    check(notify(vid, 0x2, 0) == 0x2 && mem_table_bracket(vid, 2) == 0x1
          && notify(vid, 0x2, 1) == 0x2,
          "virtio-user's own pause around its new memory table: the guest's "
          "disable and enable of vring 1 are forwarded, vhost's bracket for "
          "it is not");

    check(notify(vid, 0xc, 0) == 0xc,
          "outside a memory table change, the guest disables vrings 2 and "
          "3 (they are disabled already): forwarded");

    vhost_async_destroy_device(NULL, vid);
    check(notify(vid, 0x3, 1) == 0x3 && notify(vid, 0xc, 0) == 0xc,
          "after a reset, the guest boots with one queue pair of two: it "
          "enables vrings 0 and 1, and its disable of vrings 2 and 3, which "
          "it never enabled, is forwarded");
    vhost_async_destroy_device(NULL, vid);
    check(mem_table_bracket(vid, 2) == 0,
          "after the device went away every vring is disabled again");
    check(notify(vid, 0x1, 1) == 0x1 && notify(9, 0x1, 1) == 0x1,
          "a new connection enables vring 0; another vid is independent");
    check(notify(-1, 0x1, 0) == 0x1 && vhost_async_vring_state_changed(
              vid, 60000, 0),
          "out-of-range vids and vrings are forwarded untouched");

    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
