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

#ifndef DMA_SWCOPY_CTL_H
#define DMA_SWCOPY_CTL_H 1

/* ovs-appctl commands that drive the fault injection of the dma_swcopy
 * engines (dma-swcopy.h), a testing facility:
 *
 *     dma-swcopy/hold NAME [MS]   stop executing copies (for MS ms)
 *     dma-swcopy/release NAME     execute them again
 *     dma-swcopy/fail NAME N      fail the next N copies
 *     dma-swcopy/delay NAME US    make each copy take US microseconds
 *     dma-swcopy/show [NAME]      state and counters */
void dma_swcopy_ctl_init(void);

#endif /* dma-swcopy-ctl.h */
