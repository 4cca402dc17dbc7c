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

#include "ovs-fork-config.h"

#include <stdlib.h>

#include "openvswitch/vlog.h"
#include "smap.h"
#include "util.h"

VLOG_DEFINE_THIS_MODULE(ovs_fork_config);

/* Reads 'key' from 'cfg'.  Returns true, with the key's value (or 'dflt'
 * if it has none) in '*value', if its value changed since the last call
 * and is valid.  Returns false if it did not change, or if the new value
 * is not valid: that is logged, naming 'cur', the value in use, as kept. */
bool
fork_uint_key_read(struct fork_uint_key *key, const struct smap *cfg,
                   unsigned int dflt, unsigned int cur, unsigned int *value)
{
    const char *s = smap_get(cfg, key->name);
    unsigned int n;

    if (s && !s[0]) {
        s = NULL;
    }
    if (nullable_string_is_equal(s, key->last)) {
        return false;
    }
    free(key->last);
    key->last = nullable_xstrdup(s);

    if (!s) {
        *value = dflt;
        return true;
    }
    if (!str_to_uint(s, 10, &n)
        || ((n < key->min || n > key->max) && !(n == 0 && key->zero_ok))) {
        VLOG_ERR("other_config:%s \"%s\" is not %s from %u to %u%s; "
                 "keeping %u", key->name, s, key->what, key->min, key->max,
                 key->suffix ? key->suffix : "", cur);
        return false;
    }
    *value = n;
    return true;
}

static char *(*iface_error_cb)(const char *iface_name);

void
fork_iface_error_register(char *(*cb)(const char *iface_name))
{
    iface_error_cb = cb;
}

/* Returns the error of the fork's options of interface 'iface_name', to be
 * freed by the caller, or NULL if there is none. */
char *
fork_iface_error(const char *iface_name)
{
    return iface_error_cb ? iface_error_cb(iface_name) : NULL;
}
