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

#ifndef OVS_FORK_CONFIG_H
#define OVS_FORK_CONFIG_H 1

#include <stdbool.h>

struct smap;

/* An unsigned key of the Open_vSwitch table's other_config, read on every
 * pass of the main thread's configuration.  Only a value that changed
 * since the last pass is looked at; a bad value is logged once, as OVS
 * logs a bad other_config value, and changes nothing.  An empty value is
 * the same as no value: the key's default.
 *
 * The error reads: other_config:NAME "VALUE" is not WHAT from MIN to
 * MAX[SUFFIX]; keeping CUR. */
struct fork_uint_key {
    const char *name;           /* "dma-stall-timeout". */
    const char *what;           /* "a number of milliseconds". */
    unsigned int min, max;      /* Valid values, bounds included... */
    bool zero_ok;               /* ...and 0 as well, if true. */
    const char *suffix;         /* Appended to the range, or NULL. */
    char *last;                 /* Value of the last pass, or NULL. */
};

bool fork_uint_key_read(struct fork_uint_key *, const struct smap *cfg,
                        unsigned int dflt, unsigned int cur,
                        unsigned int *value);

/* The Interface table's 'error' column for the fork's own options.  A bad
 * value of one of them changes nothing (the port keeps what it has, as the
 * log says), so the bridge does not fail the interface, as it does for a
 * bad upstream option; it asks here instead, on every reconfiguration,
 * what to write in the column (vswitchd/bridge.c, patches/0015).  The
 * module that owns the options registers the callback, which returns a
 * malloc()ed message or NULL.  Main thread only. */
void fork_iface_error_register(char *(*cb)(const char *iface_name));
char *fork_iface_error(const char *iface_name);

#endif /* ovs-fork-config.h */
