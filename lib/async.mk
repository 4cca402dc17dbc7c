# Sources of the async vhost fork that go into libopenvswitch.
#
# This file lives in the fork's repository as lib/async.mk; the build links
# it (and every file it names) into the upstream tree, whose
# lib/automake.mk includes it (patches/0005).

lib_libopenvswitch_la_SOURCES += \
	lib/ovs-fork.h
