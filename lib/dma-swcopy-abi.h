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

#ifndef DMA_SWCOPY_ABI_H
#define DMA_SWCOPY_ABI_H 1

/* Mirror of the DPDK 22.11 and 24.11 driver-side ABI that dma-swcopy.c
 * needs.
 *
 * Debian's libdpdk-dev installs only the application-side headers of DPDK
 * 22.11 and 24.11: rte_dmadev_pmd.h, dev_driver.h and bus_vdev_driver.h
 * are missing, although the shared libraries export the symbols a driver
 * needs with version INTERNAL.  This header declares structures with the
 * same memory layout as DPDK's internal ones, under our own names, plus
 * prototypes of the internal functions written against those structures.
 *
 * The layouts were written by reading, at tag v22.11.11 (commit
 * ff0626010952913655a6df4c4e12fc386bea7fe4, the version Debian 12 ships;
 * identical at v22.11, commit f262f16087ea6a77357a915cf4c0d10ddc7b6562),
 * and read again at tag v24.11.6 (Debian 13 ships 24.11.8, whose
 * libdpdk-dev still lacks these headers): the structures below are the
 * same there; only the public struct rte_dma_conf grew (see the checks):
 *
 *     lib/dmadev/rte_dmadev_pmd.h      struct rte_dma_dev_ops,
 *                                      struct rte_dma_dev_data,
 *                                      enum rte_dma_dev_state,
 *                                      struct rte_dma_dev,
 *                                      rte_dma_pmd_allocate/release()
 *     lib/eal/include/dev_driver.h     struct rte_driver, struct rte_device
 *     drivers/bus/vdev/bus_vdev_driver.h
 *                                      struct rte_vdev_device,
 *                                      struct rte_vdev_driver,
 *                                      rte_vdev_probe_t, rte_vdev_remove_t,
 *                                      RTE_VDEV_DRV_NEED_IOVA_AS_VA,
 *                                      rte_vdev_register/unregister()
 *
 * This is DPDK's internal ABI, which may change in any DPDK release
 * (including within an LTS branch in theory): it MUST be checked against
 * the sources whenever the DPDK version changes.  The static assertions
 * below pin what can be checked at compile time; dma-swcopy.c checks the
 * rest at probe time against DPDK's public accessors and refuses to probe
 * on a mismatch. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_common.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_dmadev.h>
#include <rte_os.h>
#include <rte_version.h>

#define SWCOPY_DPDK_22_11 \
    (RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) \
     && RTE_VERSION < RTE_VERSION_NUM(22, 12, 0, 0))
#define SWCOPY_DPDK_24_11 \
    (RTE_VERSION >= RTE_VERSION_NUM(24, 11, 0, 0) \
     && RTE_VERSION < RTE_VERSION_NUM(24, 12, 0, 0))
#if !SWCOPY_DPDK_22_11 && !SWCOPY_DPDK_24_11
#error "dma-swcopy-abi.h mirrors DPDK 22.11 and 24.11 internals."
#endif

/* ------------------------------------------------------------------------
 * lib/eal/include/dev_driver.h
 * ------------------------------------------------------------------------ */

/* Mirrors struct rte_driver. */
struct swcopy_dpdk_driver {
    RTE_TAILQ_ENTRY(swcopy_dpdk_driver) next;
    const char *name;
    const char *alias;
};

/* Mirrors struct rte_device.  DPDK's public API only has an incomplete
 * 'struct rte_device' plus accessors (rte_dev_name() etc.); the driver
 * needs the full layout because struct rte_vdev_device embeds it. */
struct swcopy_dpdk_device {
    RTE_TAILQ_ENTRY(swcopy_dpdk_device) next;
    const char *name;
    const char *bus_info;
    const struct swcopy_dpdk_driver *driver;
    const struct rte_bus *bus;
    int numa_node;
    struct rte_devargs *devargs;
};

/* ------------------------------------------------------------------------
 * drivers/bus/vdev/bus_vdev_driver.h
 * ------------------------------------------------------------------------ */

/* Mirrors struct rte_vdev_device. */
struct swcopy_dpdk_vdev_device {
    RTE_TAILQ_ENTRY(swcopy_dpdk_vdev_device) next;
    struct swcopy_dpdk_device device;
};

/* Mirror rte_vdev_probe_t and rte_vdev_remove_t (function types, not
 * pointer types, as in DPDK). */
typedef int (swcopy_dpdk_vdev_probe_t)(struct swcopy_dpdk_vdev_device *);
typedef int (swcopy_dpdk_vdev_remove_t)(struct swcopy_dpdk_vdev_device *);
typedef int (swcopy_dpdk_vdev_dma_map_t)(struct swcopy_dpdk_vdev_device *,
                                         void *addr, uint64_t iova,
                                         size_t len);
typedef int (swcopy_dpdk_vdev_dma_unmap_t)(struct swcopy_dpdk_vdev_device *,
                                           void *addr, uint64_t iova,
                                           size_t len);

/* Mirrors struct rte_vdev_driver. */
struct swcopy_dpdk_vdev_driver {
    RTE_TAILQ_ENTRY(swcopy_dpdk_vdev_driver) next;
    struct swcopy_dpdk_driver driver;
    swcopy_dpdk_vdev_probe_t *probe;
    swcopy_dpdk_vdev_remove_t *remove;
    swcopy_dpdk_vdev_dma_map_t *dma_map;
    swcopy_dpdk_vdev_dma_unmap_t *dma_unmap;
    uint32_t drv_flags;
};

/* Mirrors RTE_VDEV_DRV_NEED_IOVA_AS_VA. */
#define SWCOPY_DPDK_VDEV_DRV_NEED_IOVA_AS_VA 0x0001

/* Internal (version INTERNAL) functions of librte_bus_vdev. */
void rte_vdev_register(struct swcopy_dpdk_vdev_driver *);
void rte_vdev_unregister(struct swcopy_dpdk_vdev_driver *);

/* ------------------------------------------------------------------------
 * lib/dmadev/rte_dmadev_pmd.h
 * ------------------------------------------------------------------------ */

struct swcopy_dpdk_dma_dev;

/* Mirrors struct rte_dma_dev_ops (and the rte_dma_*_t typedefs of its
 * members, in the same order). */
struct swcopy_dpdk_dma_dev_ops {
    int (*dev_info_get)(const struct swcopy_dpdk_dma_dev *,
                        struct rte_dma_info *, uint32_t info_sz);
    int (*dev_configure)(struct swcopy_dpdk_dma_dev *,
                         const struct rte_dma_conf *, uint32_t conf_sz);
    int (*dev_start)(struct swcopy_dpdk_dma_dev *);
    int (*dev_stop)(struct swcopy_dpdk_dma_dev *);
    int (*dev_close)(struct swcopy_dpdk_dma_dev *);

    int (*vchan_setup)(struct swcopy_dpdk_dma_dev *, uint16_t vchan,
                       const struct rte_dma_vchan_conf *, uint32_t conf_sz);

    int (*stats_get)(const struct swcopy_dpdk_dma_dev *, uint16_t vchan,
                     struct rte_dma_stats *, uint32_t stats_sz);
    int (*stats_reset)(struct swcopy_dpdk_dma_dev *, uint16_t vchan);

    int (*vchan_status)(const struct swcopy_dpdk_dma_dev *, uint16_t vchan,
                        enum rte_dma_vchan_status *);
    int (*dev_dump)(const struct swcopy_dpdk_dma_dev *, FILE *);
};

/* Mirrors struct rte_dma_dev_data (lives in a memzone shared between
 * processes). */
struct swcopy_dpdk_dma_dev_data {
    char dev_name[RTE_DEV_NAME_MAX_LEN];
    int16_t dev_id;
    int16_t numa_node;
    void *dev_private;
    struct rte_dma_conf dev_conf;
    __extension__ uint8_t dev_started : 1;
    uint64_t reserved[2];
} __rte_cache_aligned;

/* Mirrors enum rte_dma_dev_state. */
enum swcopy_dpdk_dma_dev_state {
    SWCOPY_DPDK_DMA_DEV_UNUSED = 0,
    SWCOPY_DPDK_DMA_DEV_REGISTERED,
    SWCOPY_DPDK_DMA_DEV_READY,
};

/* Mirrors struct rte_dma_dev.  'device' points to the struct rte_device
 * embedded in the driver's bus device (for a vdev, the 'device' member of
 * struct rte_vdev_device); rte_dma_info_get() reads its numa_node. */
struct swcopy_dpdk_dma_dev {
    struct swcopy_dpdk_device *device;
    struct swcopy_dpdk_dma_dev_data *data;
    struct rte_dma_fp_object *fp_obj;
    const struct swcopy_dpdk_dma_dev_ops *dev_ops;
    enum swcopy_dpdk_dma_dev_state state;
    uint64_t reserved[2];
} __rte_cache_aligned;

/* Internal (version INTERNAL) functions of librte_dmadev. */
struct swcopy_dpdk_dma_dev *rte_dma_pmd_allocate(const char *name,
                                                 int numa_node,
                                                 size_t private_data_size);
int rte_dma_pmd_release(const char *name);

/* ------------------------------------------------------------------------
 * Compile-time checks.  Each size and offset below was worked out by hand
 * from the DPDK 22.11 declarations for x86_64 (LP64, 64-byte cache lines);
 * they catch accidental edits of the mirror and the few things that the
 * public headers expose.
 * ------------------------------------------------------------------------ */

_Static_assert(RTE_DEV_NAME_MAX_LEN == 64, "RTE_DEV_NAME_MAX_LEN changed");
_Static_assert(RTE_DMADEV_DEFAULT_MAX == 64, "RTE_DMADEV_DEFAULT_MAX changed");
_Static_assert(RTE_CACHE_LINE_SIZE == 64, "layouts assume 64-byte lines");
_Static_assert(sizeof(void *) == 8, "layouts assume LP64");
#if SWCOPY_DPDK_22_11
_Static_assert(sizeof(struct rte_dma_conf) == 4,
               "struct rte_dma_conf changed");
_Static_assert(sizeof(struct rte_dma_fp_object) == 128,
               "struct rte_dma_fp_object changed");
#else
/* 24.11 added 'priority' (uint16_t) after 'enable_silent' to
 * rte_dma_conf, and dropped the reserved words of rte_dma_fp_object, which
 * it aligns to one cache line: the stride of rte_dma_fp_objs[] follows the
 * type, which is public. */
_Static_assert(sizeof(struct rte_dma_conf) == 6,
               "struct rte_dma_conf changed");
_Static_assert(sizeof(struct rte_dma_fp_object) == 64,
               "struct rte_dma_fp_object changed");
#endif
_Static_assert(offsetof(struct rte_dma_fp_object, burst_capacity) == 56,
               "struct rte_dma_fp_object changed");

_Static_assert(offsetof(struct swcopy_dpdk_device, name) == 16, "rte_device");
_Static_assert(offsetof(struct swcopy_dpdk_device, numa_node) == 48,
               "rte_device");
_Static_assert(offsetof(struct swcopy_dpdk_device, devargs) == 56,
               "rte_device");
_Static_assert(sizeof(struct swcopy_dpdk_device) == 64, "rte_device");
_Static_assert(offsetof(struct swcopy_dpdk_vdev_device, device) == 16,
               "rte_vdev_device");
_Static_assert(offsetof(struct swcopy_dpdk_vdev_driver, driver) == 16,
               "rte_vdev_driver");
_Static_assert(offsetof(struct swcopy_dpdk_vdev_driver, probe) == 48,
               "rte_vdev_driver");
_Static_assert(offsetof(struct swcopy_dpdk_vdev_driver, drv_flags) == 80,
               "rte_vdev_driver");
_Static_assert(sizeof(struct swcopy_dpdk_dma_dev_ops) == 10 * sizeof(void *),
               "rte_dma_dev_ops");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev_data, dev_id) == 64,
               "rte_dma_dev_data");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev_data, dev_private) == 72,
               "rte_dma_dev_data");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev_data, dev_conf) == 80,
               "rte_dma_dev_data");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev_data, reserved) == 88,
               "rte_dma_dev_data");
_Static_assert(sizeof(struct swcopy_dpdk_dma_dev_data) == 128,
               "rte_dma_dev_data");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev, fp_obj) == 16,
               "rte_dma_dev");
_Static_assert(offsetof(struct swcopy_dpdk_dma_dev, state) == 32,
               "rte_dma_dev");
_Static_assert(sizeof(struct swcopy_dpdk_dma_dev) == 64, "rte_dma_dev");

#endif /* dma-swcopy-abi.h */
