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

#ifndef OVS_FORK_TESTING_H
#define OVS_FORK_TESTING_H 1

#include <stdbool.h>

/* The fork's testing aids: ovs-appctl commands that put the datapath in
 * states a real system reaches only by bad luck (dma-swcopy/hold, fail and
 * delay, netdev-dpdk/vhost-txq-hold and -release).  A production switch
 * does not offer them: like upstream's time/warp, they are registered only
 * when ovs-vswitchd runs with --enable-dummy, which calls
 * ovs_fork_testing_enable() (patches/0013) before DPDK starts. */
void ovs_fork_testing_enable(void);
bool ovs_fork_testing_enabled(void);

#endif /* ovs-fork-testing.h */
