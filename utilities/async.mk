# Utilities of the async vhost fork.
#
# Linked into the upstream tree as utilities/async.mk and included by
# utilities/automake.mk (patches/0006).

# ovs-vhost-guest: DPDK virtio-user guests that generate, loop and verify
# traffic through vhost-user ports.  It only needs DPDK, which configure
# --with-dpdk already put into CFLAGS and LIBS.
if DPDK_NETDEV
bin_PROGRAMS += utilities/ovs-vhost-guest
utilities_ovs_vhost_guest_SOURCES = \
	utilities/ovs-vhost-guest.c \
	utilities/ovs-vhost-frame.c \
	utilities/ovs-vhost-frame.h
utilities_ovs_vhost_guest_LDADD = -lm
# The virtio-user driver calls our bind() (ovs-vhost-guest.c, listen_ports()).
utilities_ovs_vhost_guest_LDFLAGS = -Wl,--export-dynamic-symbol=bind
man_MANS += utilities/ovs-vhost-guest.8
EXTRA_DIST += utilities/ovs-vhost-guest.8.in
CLEANFILES += utilities/ovs-vhost-guest.8

# ovs-dma-bench: submitter-side cost and throughput of dmadevs (our
# dma_swcopy, dma_skeleton, or any the operator names).
bin_PROGRAMS += utilities/ovs-dma-bench
utilities_ovs_dma_bench_SOURCES = utilities/ovs-dma-bench.c
utilities_ovs_dma_bench_LDADD = lib/libopenvswitch.la

# Functional test of the dma_swcopy driver through the dmadev API (run by
# tests/test_dma_swcopy.py, also under ASan).
noinst_PROGRAMS += tests/test-dma-swcopy
tests_test_dma_swcopy_SOURCES = tests/test-dma-swcopy.c
tests_test_dma_swcopy_LDADD = lib/libopenvswitch.la

# The guest's frame format and verifier, without EAL (run by
# tests/test_vhost_frame.py).
noinst_PROGRAMS += tests/test-vhost-frame
tests_test_vhost_frame_SOURCES = \
	tests/test-vhost-frame.c \
	utilities/ovs-vhost-frame.c \
	utilities/ovs-vhost-frame.h

# The vring_state_changed filter, fed vhost's calls (run by
# tests/test_lifecycle.py).
noinst_PROGRAMS += tests/test-vhost-vring-state
tests_test_vhost_vring_state_SOURCES = tests/test-vhost-vring-state.c
tests_test_vhost_vring_state_LDADD = lib/libopenvswitch.la
endif

# What the tests of the sanitizer build run (Makefile.am, SANITIZE_TESTS):
# "make ovs-sanitize" builds only these, and the generated sources they
# need, rather than all of upstream's tree (ovstest and the other test
# programs, vtep, ...), which the sanitizer build never runs.
FORK_SANITIZE_TARGETS = \
	vswitchd/ovs-vswitchd \
	ovsdb/ovsdb-server \
	ovsdb/ovsdb-tool \
	utilities/ovs-appctl \
	utilities/ovs-dpctl \
	utilities/ovs-ofctl \
	utilities/ovs-vsctl
if DPDK_NETDEV
FORK_SANITIZE_TARGETS += \
	utilities/ovs-vhost-guest \
	tests/test-dma-swcopy \
	tests/test-vhost-frame \
	tests/test-vhost-vring-state
endif
.PHONY: fork-sanitize-programs
fork-sanitize-programs: $(BUILT_SOURCES)
	$(MAKE) $(AM_MAKEFLAGS) $(FORK_SANITIZE_TARGETS)
