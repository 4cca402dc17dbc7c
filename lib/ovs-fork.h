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

#ifndef OVS_FORK_H
#define OVS_FORK_H 1

/* Identity of the async vhost fork of Open vSwitch.
 *
 * This suffix is the one source of the fork's version.  Upstream's
 * configure.ac (patches/0006) and the fork's own configure.ac read it from
 * this line and append it to the upstream version, so VERSION is
 * "3.5.0+async" for everything built: "--version" of every program, the
 * startup log lines, OpenFlow's software description, the man pages and the
 * Python library (python/ovs/version.py).  Bump it only together with
 * NEWS. */
#define OVS_FORK_VERSION_SUFFIX "+async"

/* Where the fork's bugs are reported: configure's bug-report address, which
 * "configure --help" and a failing testsuite print ("Report bugs to <...>").
 * A fault of the fork is not upstream's and does not belong on
 * bugs@openvswitch.org.  The fork has no public URL yet, so this names the
 * place that says where to report, on one line, in words without commas or
 * quotes (m4, a shell and sed read it).  Read by the same two configure.ac
 * files as the suffix. */
#define OVS_FORK_BUGREPORT "README.md of openvswitch-async: Reporting bugs"

#endif /* ovs-fork.h */
