# Sources of the async vhost fork that go into libopenvswitch.
#
# This file lives in the fork's repository as lib/async.mk; the build links
# it (and every file it names) into the upstream tree, whose
# lib/automake.mk includes it (patches/0006).

lib_libopenvswitch_la_SOURCES += \
	lib/dpif-netdev-defer.c \
	lib/dpif-netdev-defer.h \
	lib/ovs-fork.h \
	lib/ovs-fork-config.c \
	lib/ovs-fork-config.h \
	lib/ovs-fork-testing.c \
	lib/ovs-fork-testing.h

if DPDK_NETDEV
lib_libopenvswitch_la_SOURCES += \
	lib/dma-swcopy.c \
	lib/dma-swcopy.h \
	lib/dma-swcopy-ctl.c \
	lib/dma-swcopy-ctl.h \
	lib/dma-swcopy-abi.h \
	lib/netdev-dpdk-dma.c \
	lib/netdev-dpdk-dma.h \
	lib/netdev-dpdk-vhost-async.c \
	lib/netdev-dpdk-vhost-async.h \
	lib/netdev-dpdk-vhost-auto.c \
	lib/netdev-dpdk-vhost-auto.h \
	lib/netdev-dpdk-vhost-private.h \
	lib/netdev-dpdk-vhost-rx.c \
	lib/netdev-dpdk-vhost-rx.h \
	lib/netdev-dpdk-vhost-shared.h \
	lib/netdev-dpdk-vhost-tx.c \
	lib/netdev-dpdk-vhost-tx.h

# dma_swcopy registers a vdev driver: the vdev bus library is a driver
# library, which libdpdk.pc does not list.
lib_libopenvswitch_la_LIBADD += -lrte_bus_vdev
endif

# configure.ac reads the fork's version suffix from lib/ovs-fork.h
# (patches/0006): a new suffix regenerates configure.
CONFIGURE_DEPENDENCIES = $(srcdir)/lib/ovs-fork.h
