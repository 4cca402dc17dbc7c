# Utilities of the async vhost fork.
#
# Linked into the upstream tree as utilities/async.mk and included by
# utilities/automake.mk (patches/0006).

# ovs-vhost-guest: DPDK virtio-user guests that generate, loop and verify
# traffic through vhost-user ports.  It only needs DPDK, which configure
# --with-dpdk already put into CFLAGS and LIBS.
if DPDK_NETDEV
bin_PROGRAMS += utilities/ovs-vhost-guest
utilities_ovs_vhost_guest_SOURCES = utilities/ovs-vhost-guest.c
utilities_ovs_vhost_guest_LDADD = -lm
man_MANS += utilities/ovs-vhost-guest.8
EXTRA_DIST += utilities/ovs-vhost-guest.8
endif
