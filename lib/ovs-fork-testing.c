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

#include "ovs-fork-testing.h"

#include "ovs-atomic.h"

static atomic_bool enabled = false;

void
ovs_fork_testing_enable(void)
{
    atomic_store_relaxed(&enabled, true);
}

bool
ovs_fork_testing_enabled(void)
{
    bool on;

    atomic_read_relaxed(&enabled, &on);
    return on;
}
