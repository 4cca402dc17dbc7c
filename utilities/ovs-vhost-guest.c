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

/*
 * ovs-vhost-guest: plays one or more VM guests in front of Open vSwitch.
 *
 * Every port is a DPDK "net_virtio_user" device in vhost-user server mode,
 * i.e. the socket that an Open vSwitch "dpdkvhostuserclient" port connects
 * to.  Ports generate traffic ("gen"), verify what they receive ("sink"),
 * bounce traffic back unchanged ("loop"), or both generate and verify
 * ("gen+sink").
 *
 * Every generated frame carries, right after its (inner) UDP header, a
 * payload header:
 *
 *     offset  size  field
 *          0     4  magic (0x4f564731, "OVG1")
 *          4     4  stream id: src port << 16 | queue << 8 | dst port
 *          8     8  sequence number within the stream, from 0
 *         16     2  frame length (without FCS)
 *         18     4  CRC-32 of the whole frame, this field taken as zero
 *
 * All fields are big-endian.  The frame length is 16 bits wide (frames are
 * at most 9000 bytes), which keeps the header at 22 bytes so that a 64-byte
 * frame (14 + 20 + 8 + 22) still holds it.  The rest of the payload is
 * filled with bytes derived from (stream, sequence, offset).
 *
 * The CRC is the IEEE 802.3 CRC-32 (the Ethernet FCS polynomial, reflected,
 * initial value and final XOR 0xffffffff), computed with DPDK's
 * rte_net_crc_calc(RTE_NET_CRC32_ETH), which uses PCLMULQDQ where the CPU
 * has it.  It covers every byte of the frame, outer and inner headers
 * included, so any change made by the switch to a byte it should not
 * touch is caught.
 *
 * Generators and sinks live in the same process, so every loss, duplicate,
 * reordering, misdelivery and corruption is counted exactly.
 */

#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_cpuflags.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_memzone.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_net_crc.h>
#include <rte_prefetch.h>
#include <rte_vect.h>

#include "ovs-vhost-frame.h"

#define PROGRAM "ovs-vhost-guest"

#define EXIT_OK 0
#define EXIT_FAIL 1             /* Corruption, duplicates, misdelivery... */
#define EXIT_USAGE 2            /* Bad command line. */
#define EXIT_RUNTIME 3          /* EAL, ports, link, memory. */

#define MAX_PORTS 16
#define MAX_QUEUES FRAME_RX_QUEUES  /* Each keeps its own order. */
#define MAX_SIZES 64
#define MAX_BURST 512
#define SCRATCH_SIZE 9216       /* Largest frame the sink linearizes. */
#define LOOP_RETRIES 64         /* tx attempts before a loop port drops. */

enum {
    ROLE_GEN = 1 << 0,
    ROLE_SINK = 1 << 1,
    ROLE_LOOP = 1 << 2,
};

enum phase {
    PHASE_GEN,                  /* Generating and receiving. */
    PHASE_DRAIN,                /* Receiving only. */
    PHASE_DONE,                 /* Everyone stops polling. */
};

/* Counters of one port.  Each is written only by the lcore that owns the
 * port (see stat_add()) and may be read at any time by the main lcore for
 * progress lines, so they are accessed with relaxed atomics. */
struct port_stats {
    uint64_t tx_pkts;
    uint64_t tx_bytes;
    uint64_t rx_pkts;
    uint64_t rx_bytes;
    uint64_t tx_queue[MAX_QUEUES];
    uint64_t rx_queue[MAX_QUEUES];
    uint64_t loop_pkts;         /* Received by a loop port. */
    uint64_t loop_dropped;      /* ...that tx refused for good. */
    uint64_t corrupted;         /* Every corrupted frame received. */
    uint64_t corrupted_unknown; /* ...that named no valid stream. */
    uint64_t misdelivered;      /* Valid frames for another port. */
    uint64_t foreign;           /* Frames that are not ours at all. */
    uint64_t late_probes;       /* Warm-up probes that came late. */
} __rte_cache_aligned;

/* One generated stream: (source port, queue, destination port). */
struct stream {
    uint32_t wire_id;           /* Stream id as carried in frames. */
    uint8_t src;
    uint8_t queue;
    uint8_t dst;
    uint16_t sport;             /* Inner UDP source port. */
    uint8_t tmpl[FRAME_VXLAN_HDR_LEN];  /* Headers; lengths, csums unset. */
    uint64_t next_seq;          /* Published by the generator (release). */
    uint64_t tx_pkts;           /* Generator-owned. */
};

/* Generator state of one tx queue of a "gen" port. */
struct gen_queue {
    struct port *port;
    uint16_t queue;
    unsigned int *streams;      /* Stream indexes, one per destination. */
    unsigned int n_streams;
    unsigned int dst_cur;       /* Index into 'streams'. */
    unsigned int run_left;      /* Frames left in the current burst run. */
    unsigned int size_cur;      /* Index into the size list. */
    uint64_t built;             /* Frames built (sequence numbers used). */
    uint64_t sent;              /* Frames accepted by tx. */
    bool done;                  /* --count reached. */
    double tokens;              /* --rate token bucket. */
    double tokens_per_tsc;
    uint64_t last_tsc;
    unsigned int n_pend;        /* Built but not yet accepted by tx. */
    struct rte_mbuf *pend[MAX_BURST];
    unsigned int pend_stream[MAX_BURST];
};

struct port {
    /* Configuration. */
    unsigned int index;
    char *path;
    unsigned int roles;
    unsigned int n_queues;
    unsigned int max_queues;    /* The device's queue pairs (virtio-user's
                                 * "queues"): n_queues of them enabled. */
    struct rte_ether_addr mac;
    char name[32];              /* vdev and ethdev name. */
    char *devargs;              /* Arguments for rte_dev_probe(). */

    /* Runtime. */
    uint16_t port_id;
    bool bound;                 /* Its socket was (maybe) created. */
    int listen_fd;              /* Listening, until virtio-user binds. */
    bool probed;
    bool configured;
    unsigned int lcore;
    struct gen_queue *gq[MAX_QUEUES];   /* "gen" ports only. */
    struct frame_rx *rx;        /* Per stream (owned by the port's lcore,
                                 * read by the main lcore once all lcores
                                 * joined); NULL for loop ports. */
    struct port_stats stats;
};

/* Per-lcore work list and scratch space. */
struct worker {
    unsigned int lcore;
    bool is_main;
    unsigned int n_ports;
    struct port *ports[MAX_PORTS];
    uint64_t idle_sleeps;       /* --idle-sleep: passes that slept. */
    uint8_t scratch[SCRATCH_SIZE];
};

/* Command-line options. */
static struct {
    struct port ports[MAX_PORTS];
    unsigned int n_ports;
    uint16_t sizes[MAX_SIZES];  /* Cycled per frame. */
    unsigned int n_sizes;
    const char *size_opt;       /* Which of --size/--sizes/--imix. */
    bool imix;
    bool size_steps;            /* --size-steps: sizes[i] in step i. */
    unsigned int burst_run;     /* --pattern burst:N; 0 means scatter. */
    bool dst_given;
    unsigned int dsts[MAX_PORTS];
    unsigned int n_dsts;
    bool no_self;
    bool vxlan;
    double duration;            /* 0 means until --count is reached. */
    bool duration_given;
    uint64_t count;             /* 0 means unlimited. */
    double rate;                /* 0 means unlimited. */
    unsigned int burst;
    unsigned int idle_sleep_us; /* 0 means busy polling. */
    double progress;
    double drain;
    double drain_idle;          /* 0 means off. */
    double wait_link;
    double warmup;
    double hold;                /* --hold: SIGUSR1 barriers, timeout. */
    unsigned int mbuf_size;     /* 0 means automatic. */
    unsigned int n_mbufs;       /* 0 means automatic. */
    unsigned int queue_size;
    bool corrupt;
    uint64_t corrupt_seq;
    bool max_lost_given;
    uint64_t max_lost;
} opt = {
    .burst_run = 32,
    .duration = 5.0,
    .burst = 32,
    .progress = 1.0,
    .drain = 1.0,
    .wait_link = 30.0,
    .warmup = 2.0,
    .queue_size = 1024,
};

static struct stream *streams;
static unsigned int n_streams;
static int stream_index[MAX_PORTS][MAX_QUEUES][MAX_PORTS];
static unsigned int hdr_len;    /* frame_hdr_len(opt.vxlan). */
static struct rte_mempool *pool;
static struct worker *workers[RTE_MAX_LCORE];
static unsigned int n_workers;

static volatile sig_atomic_t signals_seen;
static volatile sig_atomic_t alarm_fired;
static volatile sig_atomic_t usr1_seen;
/* The last SIGINT or SIGTERM, and the process that sent it: a run ended
 * by a signal names who ended it. */
static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stop_sender;
static volatile sig_atomic_t usr2_seen;
static int phase = PHASE_GEN;   /* Accessed with atomics. */
static bool corrupt_injected;   /* Written by the generator of stream 0. */
static bool out_of_memory;      /* A sink could not grow its bitmap. */
static uint64_t tsc_hz;
static uint64_t wait_start_tsc; /* When waiting for clients began. */
static uint64_t gen_start_tsc;
static uint64_t gen_stop_tsc;
static uint64_t drain_stop_tsc;

/* Single-writer counters: only the owning lcore adds, anyone may read. */
static inline void
stat_add(uint64_t *counter, uint64_t n)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

static inline uint64_t
stat_get(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static inline int
phase_get(void)
{
    return __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
}

static void
phase_set(int new_phase)
{
    __atomic_store_n(&phase, new_phase, __ATOMIC_RELEASE);
}

/* Command-line parsing. */

static void usage_error(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* Prints a one-line error about the command line and exits with status 2.
 * Nothing has been allocated from DPDK at that point. */
static void
usage_error(const char *format, ...)
{
    va_list args;

    fprintf(stderr, "%s: ", PROGRAM);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, " (see '%s --help')\n", PROGRAM);
    exit(EXIT_USAGE);
}

static void
usage(void)
{
    printf("%s: play VM guests on vhost-user sockets facing Open vSwitch\n"
           "usage: %s [EAL options] -- [options]\n"
           "\n"
           "Each --port becomes a net_virtio_user<N> device in vhost-user\n"
           "server mode on socket PATH; attach it to Open vSwitch with\n"
           "  ovs-vsctl add-port BR NAME -- set Interface NAME \\\n"
           "      type=dpdkvhostuserclient options:vhost-server-path=PATH\n"
           "\n"
           "EAL options that work well: --no-pci --in-memory\n"
           "  --single-file-segments --iova-mode=va --file-prefix=NAME -l 0\n"
           "  (without hugepages: --no-huge -m 512 instead of --in-memory).\n"
           "\n"
           "Ports (at least one generator and one sink):\n"
           "  --port PATH,role=ROLE[,queues=N][,max-queues=M][,mac=MAC]\n"
           "      ROLE: gen (send), sink (receive and verify), gen+sink,\n"
           "      or loop (send back what arrives, unchanged).  N is\n"
           "      1..%d (default 1); MAC defaults to 02:00:00:00:00:<i+1>\n"
           "      and is the destination MAC of frames for that sink.\n"
           "      Repeat for each port; the order gives the index i.\n"
           "  --dst I[,J...]       send only to these sink port indexes\n"
           "  --no-self            a gen+sink port never sends to itself\n"
           "  --queue-size N       virtqueue size (default 1024)\n"
           "\n"
           "Traffic:\n"
           "  --size N             frame size without FCS, %d..%d\n"
           "                       (default 64; --vxlan needs >= %d)\n"
           "  --sizes A,B,...      sizes cycled frame by frame\n"
           "  --size-steps A,B,... size A for the first part of --duration,\n"
           "                       then B, ... (equal parts)\n"
           "  --imix               64/570/1518 bytes in a 7:4:1 mix\n"
           "  --pattern burst[:N]  N frames to one sink, then the next\n"
           "                       (default burst:32)\n"
           "  --pattern scatter    next sink for every frame\n"
           "  --vxlan              VXLAN (VNI %d) encapsulated frames\n"
           "  --duration SEC       generation time (default 5)\n"
           "  --count N            frames per generating queue\n"
           "  --rate PPS           total rate limit (default: none), in\n"
           "                       full bursts of --burst frames\n"
           "  --burst N            tx/rx burst size, 1..%d (default 32)\n"
           "  --idle-sleep US      sleep US microseconds whenever a pass\n"
           "                       over the queues found nothing to send\n"
           "                       or receive (default 0: busy polling)\n"
           "  --corrupt SEQ        self-test: damage frame SEQ of the\n"
           "                       first stream after its CRC was taken\n"
           "\n"
           "Run control:\n"
           "  --wait-link SEC      how long to wait for the switch to\n"
           "                       connect every port (default 30;\n"
           "                       0 = forever)\n"
           "  --hold SEC           after warm-up, wait for SIGUSR1 before\n"
           "                       generating, and after printing the\n"
           "                       result, for another SIGUSR1 before\n"
           "                       closing the ports (each wait ends after\n"
           "                       SEC), so that a harness can read the\n"
           "                       switch's counters at exact points\n"
           "  --warmup SEC         before counting, wait up to SEC for a\n"
           "                       probe of every stream to reach its\n"
           "                       sink (default 2; 0 = off)\n"
           "  --drain SEC          keep receiving after generation\n"
           "                       (default 1)\n"
           "  --drain-idle SEC     end draining earlier once nothing\n"
           "                       arrived for SEC (default 0 = off)\n"
           "  --progress SEC       progress lines on stderr (default 1;\n"
           "                       0 = off)\n"
           "  (SIGUSR2 while generating: take 64 MB more memory, which\n"
           "   sends the switch a new memory table on a live device)\n"
           "  --max-lost N         fail if more than N frames are lost\n"
           "  --mbuf-size N        mbuf data room including headroom\n"
           "  --mbufs N            mbuf pool size (default 16384/port)\n"
           "  -h, --help           show this help\n"
           "  -V, --version        show the version\n"
           "\n"
           "Example (OVS forwards port 1 <-> port 2 of its bridge):\n"
           "  %s --no-pci --in-memory --single-file-segments \\\n"
           "      --iova-mode=va --file-prefix=vg -l 0 -- \\\n"
           "      --port /tmp/vu0,role=gen+sink --port /tmp/vu1,role=loop\n"
           "\n"
           "The result is one JSON object on stdout.  Exit status: 0 ok,\n"
           "1 corrupted/duplicated/misdelivered frames (or too many lost,\n"
           "or nothing sent), 2 usage error, 3 runtime failure.\n",
           PROGRAM, PROGRAM, MAX_QUEUES, FRAME_MIN, FRAME_MAX,
           frame_min_len(true), FRAME_VXLAN_VNI, MAX_BURST, PROGRAM);
}

/* Parses 's', the value of option 'name', as an integer in [min, max]. */
static uint64_t
parse_uint(const char *name, const char *s, uint64_t min, uint64_t max)
{
    unsigned long long value;
    char *end;

    errno = 0;
    if (!isdigit((unsigned char) *s)) {
        goto error;
    }
    value = strtoull(s, &end, 10);
    if (errno || *end || value < min || value > max) {
        goto error;
    }
    return value;

error:
    usage_error("%s: invalid value '%s' (expected an integer from %"PRIu64
                " to %"PRIu64")", name, s, min, max);
}

/* Parses 's', the value of option 'name', as a number in [min, max]. */
static double
parse_double(const char *name, const char *s, double min, double max)
{
    double value;
    char *end;

    errno = 0;
    value = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(value)
        || value < min || value > max) {
        usage_error("%s: invalid value '%s' (expected a number from %g to "
                    "%g)", name, s, min, max);
    }
    return value;
}

/* Parses a comma-separated list of integers in [min, max] into 'out'.
 * Returns the number of values. */
static unsigned int
parse_list(const char *name, const char *s, uint64_t min, uint64_t max,
           uint64_t *out, unsigned int max_n)
{
    char *copy = strdup(s);
    char *save = NULL;
    unsigned int n = 0;

    if (!copy) {
        usage_error("%s: out of memory", name);
    }
    if (!*s || s[strlen(s) - 1] == ',' || strstr(s, ",,")) {
        usage_error("%s: invalid list '%s'", name, s);
    }
    for (char *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n >= max_n) {
            usage_error("%s: more than %u values in '%s'", name, max_n, s);
        }
        out[n++] = parse_uint(name, tok, min, max);
    }
    free(copy);
    return n;
}

static const char *
role_name(unsigned int roles)
{
    switch (roles) {
    case ROLE_GEN:
        return "gen";
    case ROLE_SINK:
        return "sink";
    case ROLE_LOOP:
        return "loop";
    case ROLE_GEN | ROLE_SINK:
        return "gen+sink";
    default:
        return "?";
    }
}

/* Parses the value of --port:
 * "PATH,role=ROLE[,queues=N][,max-queues=M][,mac=MAC]". */
static void
parse_port(const char *arg)
{
    struct port *p = &opt.ports[opt.n_ports];
    char *copy, *save = NULL, *tok;
    bool have_role = false, have_mac = false;
    struct stat st;
    char *slash;

    if (opt.n_ports >= MAX_PORTS) {
        usage_error("--port: at most %d ports are supported", MAX_PORTS);
    }
    copy = strdup(arg);
    if (!copy) {
        usage_error("--port: out of memory");
    }

    memset(p, 0, sizeof *p);
    p->index = opt.n_ports;
    p->n_queues = 1;
    p->listen_fd = -1;

    /* The socket path comes first. */
    tok = strtok_r(copy, ",", &save);
    if (!tok || arg[0] == ',' || strchr(tok, '=')) {
        usage_error("--port: '%s' must start with a socket path", arg);
    }
    if (strlen(tok) >= 108) {
        usage_error("--port: socket path '%s' is too long (max 107)", tok);
    }
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        if (!strcmp(opt.ports[i].path, tok)) {
            usage_error("--port: socket path '%s' given twice", tok);
        }
    }
    p->path = strdup(tok);
    if (!p->path) {
        usage_error("--port: out of memory");
    }

    /* The directory must exist, or the vdev would fail obscurely. */
    slash = strrchr(tok, '/');
    if (slash && slash != tok) {
        *slash = '\0';
        if (stat(tok, &st) || !S_ISDIR(st.st_mode)) {
            usage_error("--port: directory '%s' of socket '%s' does not "
                        "exist", tok, p->path);
        }
    }

    while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
        char *value = strchr(tok, '=');

        if (!value) {
            usage_error("--port: '%s' in '%s' is not KEY=VALUE", tok, arg);
        }
        *value++ = '\0';
        if (!strcmp(tok, "role")) {
            if (!strcmp(value, "gen")) {
                p->roles = ROLE_GEN;
            } else if (!strcmp(value, "sink")) {
                p->roles = ROLE_SINK;
            } else if (!strcmp(value, "loop")) {
                p->roles = ROLE_LOOP;
            } else if (!strcmp(value, "gen+sink")
                       || !strcmp(value, "sink+gen")) {
                p->roles = ROLE_GEN | ROLE_SINK;
            } else {
                usage_error("--port: unknown role '%s' (expected gen, sink, "
                            "loop or gen+sink)", value);
            }
            have_role = true;
        } else if (!strcmp(tok, "queues")) {
            p->n_queues = parse_uint("--port queues", value, 1, MAX_QUEUES);
        } else if (!strcmp(tok, "max-queues")) {
            p->max_queues = parse_uint("--port max-queues", value, 1,
                                       MAX_QUEUES);
        } else if (!strcmp(tok, "mac")) {
            if (rte_ether_unformat_addr(value, &p->mac)
                || !rte_is_unicast_ether_addr(&p->mac)
                || rte_is_zero_ether_addr(&p->mac)) {
                usage_error("--port: invalid mac '%s' (expected a unicast "
                            "XX:XX:XX:XX:XX:XX)", value);
            }
            have_mac = true;
        } else {
            usage_error("--port: unknown key '%s' in '%s' (expected role, "
                        "queues, max-queues or mac)", tok, arg);
        }
    }
    if (!have_role) {
        usage_error("--port: '%s' lacks role=gen|sink|loop|gen+sink", arg);
    }
    if (!p->max_queues) {
        p->max_queues = p->n_queues;
    } else if (p->max_queues < p->n_queues) {
        usage_error("--port: max-queues %u is less than queues %u in '%s'",
                    p->max_queues, p->n_queues, arg);
    }
    if (!have_mac) {
        struct rte_ether_addr mac = {
            .addr_bytes = { 0x02, 0, 0, 0, 0, p->index + 1 }
        };
        p->mac = mac;
    }
    snprintf(p->name, sizeof p->name, "net_virtio_user%u", p->index);
    free(copy);
    opt.n_ports++;
}

static void
parse_pattern(const char *arg)
{
    if (!strcmp(arg, "scatter")) {
        opt.burst_run = 0;
    } else if (!strcmp(arg, "burst")) {
        opt.burst_run = 32;
    } else if (!strncmp(arg, "burst:", 6)) {
        opt.burst_run = parse_uint("--pattern burst", arg + 6, 1, 1 << 20);
    } else {
        usage_error("--pattern: invalid value '%s' (expected burst, "
                    "burst:N or scatter)", arg);
    }
}

static void
set_size_option(const char *name)
{
    if (opt.size_opt && strcmp(opt.size_opt, name)) {
        usage_error("%s: cannot be combined with %s", name, opt.size_opt);
    }
    opt.size_opt = name;
}

enum {
    OPT_PORT = 256, OPT_SIZE, OPT_SIZES, OPT_SIZE_STEPS, OPT_IMIX,
    OPT_PATTERN, OPT_DST, OPT_VXLAN, OPT_DURATION, OPT_COUNT, OPT_RATE,
    OPT_BURST, OPT_PROGRESS, OPT_DRAIN, OPT_DRAIN_IDLE, OPT_MBUF_SIZE,
    OPT_MBUFS, OPT_CORRUPT, OPT_WAIT_LINK, OPT_MAX_LOST, OPT_QUEUE_SIZE,
    OPT_WARMUP, OPT_NO_SELF, OPT_HOLD, OPT_IDLE_SLEEP,
};

static const struct option long_options[] = {
    {"port", required_argument, NULL, OPT_PORT},
    {"size", required_argument, NULL, OPT_SIZE},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"size-steps", required_argument, NULL, OPT_SIZE_STEPS},
    {"imix", no_argument, NULL, OPT_IMIX},
    {"pattern", required_argument, NULL, OPT_PATTERN},
    {"dst", required_argument, NULL, OPT_DST},
    {"vxlan", no_argument, NULL, OPT_VXLAN},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"count", required_argument, NULL, OPT_COUNT},
    {"rate", required_argument, NULL, OPT_RATE},
    {"burst", required_argument, NULL, OPT_BURST},
    {"idle-sleep", required_argument, NULL, OPT_IDLE_SLEEP},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"drain", required_argument, NULL, OPT_DRAIN},
    {"drain-idle", required_argument, NULL, OPT_DRAIN_IDLE},
    {"mbuf-size", required_argument, NULL, OPT_MBUF_SIZE},
    {"mbufs", required_argument, NULL, OPT_MBUFS},
    {"corrupt", required_argument, NULL, OPT_CORRUPT},
    {"wait-link", required_argument, NULL, OPT_WAIT_LINK},
    {"max-lost", required_argument, NULL, OPT_MAX_LOST},
    {"queue-size", required_argument, NULL, OPT_QUEUE_SIZE},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"hold", required_argument, NULL, OPT_HOLD},
    {"no-self", no_argument, NULL, OPT_NO_SELF},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* Parses the program's own options (those after "--"), then checks that
 * they make sense together.  Exits on any error. */
static void
parse_options(int argc, char *argv[])
{
    static const uint16_t imix[] = {
        64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 64, 570
    };
    uint64_t values[MAX_SIZES];
    unsigned int min_size, n;
    int c;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":hV", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_PORT:
            parse_port(optarg);
            break;
        case OPT_SIZE:
            set_size_option("--size");
            opt.sizes[0] = parse_uint("--size", optarg, FRAME_MIN, FRAME_MAX);
            opt.n_sizes = 1;
            break;
        case OPT_SIZES:
        case OPT_SIZE_STEPS: {
            const char *name = c == OPT_SIZES ? "--sizes" : "--size-steps";

            set_size_option(name);
            n = parse_list(name, optarg, FRAME_MIN, FRAME_MAX, values,
                           MAX_SIZES);
            for (unsigned int i = 0; i < n; i++) {
                opt.sizes[i] = values[i];
            }
            opt.n_sizes = n;
            opt.size_steps = c == OPT_SIZE_STEPS;
            break;
        }
        case OPT_IMIX:
            set_size_option("--imix");
            memcpy(opt.sizes, imix, sizeof imix);
            opt.n_sizes = RTE_DIM(imix);
            opt.imix = true;
            break;
        case OPT_PATTERN:
            parse_pattern(optarg);
            break;
        case OPT_DST:
            n = parse_list("--dst", optarg, 0, MAX_PORTS - 1, values,
                           MAX_PORTS);
            for (unsigned int i = 0; i < n; i++) {
                for (unsigned int j = 0; j < i; j++) {
                    if (values[j] == values[i]) {
                        usage_error("--dst: port %"PRIu64" listed twice",
                                    values[i]);
                    }
                }
                opt.dsts[i] = values[i];
            }
            opt.n_dsts = n;
            opt.dst_given = true;
            break;
        case OPT_VXLAN:
            opt.vxlan = true;
            break;
        case OPT_DURATION:
            opt.duration = parse_double("--duration", optarg, 0.001, 1e7);
            opt.duration_given = true;
            break;
        case OPT_COUNT:
            opt.count = parse_uint("--count", optarg, 1, UINT64_MAX / 2);
            break;
        case OPT_RATE:
            opt.rate = parse_double("--rate", optarg, 1, 1e10);
            break;
        case OPT_BURST:
            opt.burst = parse_uint("--burst", optarg, 1, MAX_BURST);
            break;
        case OPT_IDLE_SLEEP:
            opt.idle_sleep_us = parse_uint("--idle-sleep", optarg, 0,
                                           1000000);
            break;
        case OPT_PROGRESS:
            opt.progress = parse_double("--progress", optarg, 0, 1e6);
            break;
        case OPT_DRAIN:
            opt.drain = parse_double("--drain", optarg, 0, 1e6);
            break;
        case OPT_DRAIN_IDLE:
            opt.drain_idle = parse_double("--drain-idle", optarg, 0, 1e6);
            break;
        case OPT_MBUF_SIZE:
            opt.mbuf_size = parse_uint("--mbuf-size", optarg,
                                       RTE_PKTMBUF_HEADROOM + 256, 65535);
            break;
        case OPT_MBUFS:
            opt.n_mbufs = parse_uint("--mbufs", optarg, 1024, 1 << 26);
            break;
        case OPT_CORRUPT:
            opt.corrupt_seq = parse_uint("--corrupt", optarg, 0,
                                         UINT64_MAX / 2);
            opt.corrupt = true;
            break;
        case OPT_WAIT_LINK:
            opt.wait_link = parse_double("--wait-link", optarg, 0, 1e6);
            break;
        case OPT_NO_SELF:
            opt.no_self = true;
            break;
        case OPT_HOLD:
            opt.hold = parse_double("--hold", optarg, 0, 1e6);
            break;
        case OPT_WARMUP:
            opt.warmup = parse_double("--warmup", optarg, 0, 1e6);
            break;
        case OPT_MAX_LOST:
            opt.max_lost = parse_uint("--max-lost", optarg, 0, UINT64_MAX);
            opt.max_lost_given = true;
            break;
        case OPT_QUEUE_SIZE:
            opt.queue_size = parse_uint("--queue-size", optarg, 64, 32768);
            if (opt.queue_size & (opt.queue_size - 1)) {
                usage_error("--queue-size: invalid value '%s' (expected a "
                            "power of 2 from 64 to 32768)", optarg);
            }
            break;
        case 'h':
            usage();
            exit(EXIT_OK);
        case 'V':
            printf("%s (Open vSwitch) %s\n", PROGRAM, VERSION);
            exit(EXIT_OK);
        case ':':
            usage_error("option '%s' requires a value", argv[optind - 1]);
        case '?':
        default:
            usage_error("unknown option '%s' (EAL options go before '--')",
                        argv[optind - 1]);
        }
    }
    if (optind < argc) {
        usage_error("unexpected argument '%s'", argv[optind]);
    }

    /* Cross-checks. */
    if (!opt.n_ports) {
        usage_error("no --port given");
    }
    if (!opt.n_sizes) {
        opt.sizes[0] = FRAME_MIN;
        opt.n_sizes = 1;
    }
    hdr_len = frame_hdr_len(opt.vxlan);
    min_size = frame_min_len(opt.vxlan);
    for (unsigned int i = 0; i < opt.n_sizes; i++) {
        if (opt.sizes[i] < min_size) {
            usage_error("%s: %u-byte frames are too small%s (minimum %u)",
                        opt.size_opt ? opt.size_opt : "--size",
                        opt.sizes[i], opt.vxlan ? " for --vxlan" : "",
                        min_size);
        }
    }
    if (opt.dst_given) {
        for (unsigned int i = 0; i < opt.n_dsts; i++) {
            unsigned int d = opt.dsts[i];

            if (d >= opt.n_ports) {
                usage_error("--dst: port %u does not exist (%u ports given)",
                            d, opt.n_ports);
            }
            if (!(opt.ports[d].roles & ROLE_SINK)) {
                usage_error("--dst: port %u has role %s, not sink", d,
                            role_name(opt.ports[d].roles));
            }
        }
    } else {
        for (unsigned int i = 0; i < opt.n_ports; i++) {
            if (opt.ports[i].roles & ROLE_SINK) {
                opt.dsts[opt.n_dsts++] = i;
            }
        }
    }
    if (!opt.n_dsts) {
        usage_error("--port: no port has role sink or gen+sink");
    }
    n = 0;
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        n += (opt.ports[i].roles & ROLE_GEN) != 0;
        for (unsigned int j = 0; j < i; j++) {
            if (rte_is_same_ether_addr(&opt.ports[i].mac,
                                       &opt.ports[j].mac)) {
                usage_error("--port: ports %u and %u have the same mac", j,
                            i);
            }
        }
    }
    if (!n) {
        usage_error("--port: no port has role gen or gen+sink");
    }
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        if (opt.ports[i].roles & ROLE_GEN && opt.no_self && opt.n_dsts == 1
            && opt.dsts[0] == i) {
            usage_error("--no-self: port %u has no destination left", i);
        }
    }
    if (opt.count && !opt.duration_given) {
        opt.duration = 0;
    }
    if (opt.size_steps && !opt.duration) {
        usage_error("--size-steps needs --duration");
    }
}

/* Frame construction (the format is ovs-vhost-frame.h). */

/* Copies the 'len'-byte frame at 'buf' into the empty mbuf 'm', chaining
 * more segments as needed.  Returns false (and leaves 'm' for the caller
 * to free) if the pool ran dry. */
static bool
mbuf_fill_chain(struct rte_mbuf *m, const uint8_t *buf, unsigned int len)
{
    struct rte_mbuf *seg = m;
    unsigned int done = 0;

    for (;;) {
        unsigned int chunk = RTE_MIN(len - done,
                                     (unsigned int) rte_pktmbuf_tailroom(seg));

        memcpy(rte_pktmbuf_mtod_offset(seg, uint8_t *, seg->data_len),
               buf + done, chunk);
        seg->data_len += chunk;
        done += chunk;
        if (done == len) {
            break;
        }

        struct rte_mbuf *next = rte_pktmbuf_alloc(pool);
        if (!next || m->nb_segs == UINT16_MAX) {
            rte_pktmbuf_free(next);
            return false;
        }
        seg->next = next;
        seg = next;
        m->nb_segs++;
    }
    m->pkt_len = len;
    return true;
}

/* Generator. */

/* Builds the next frame of generator queue 'g' into mbuf 'm'.  Returns the
 * stream index, or -1 if 'm' could not be filled. */
static unsigned int
size_step(void)
{
    uint64_t elapsed = rte_rdtsc() - gen_start_tsc;
    unsigned int i = elapsed * opt.n_sizes / (opt.duration * tsc_hz);

    return RTE_MIN(i, opt.n_sizes - 1);
}

static int
gen_build(struct worker *w, struct gen_queue *g, struct rte_mbuf *m)
{
    unsigned int si = g->streams[g->dst_cur];
    struct stream *s = &streams[si];
    unsigned int len = opt.sizes[opt.size_steps ? size_step()
                                                : g->size_cur];
    uint64_t seq = s->next_seq;
    bool linear = len <= rte_pktmbuf_tailroom(m);
    uint8_t *buf;

    buf = linear ? rte_pktmbuf_mtod(m, uint8_t *) : w->scratch;
    frame_build(buf, s->tmpl, opt.vxlan, s->wire_id, seq, len);
    if (opt.corrupt && si == 0 && seq == opt.corrupt_seq) {
        /* Self-test: damage the last byte, which is payload fill (or, in
         * a minimum-size frame, part of the CRC field). */
        buf[len - 1] ^= 0xff;
        corrupt_injected = true;
    }
    if (linear) {
        m->data_len = len;
        m->pkt_len = len;
    } else if (!mbuf_fill_chain(m, buf, len)) {
        return -1;
    }

    /* Commit: the sequence number is used, advance the cursors. */
    __atomic_store_n(&s->next_seq, seq + 1, __ATOMIC_RELEASE);
    g->built++;
    if (++g->size_cur >= opt.n_sizes) {
        g->size_cur = 0;
    }
    if (!opt.burst_run || --g->run_left == 0) {
        g->dst_cur = (g->dst_cur + 1) % g->n_streams;
        g->run_left = opt.burst_run;
    }
    return si;
}

/* Tokens a generator queue may save up under --rate, in bursts: a pass
 * that comes late catches up in the next ones. */
#define RATE_BUCKET_BURSTS 4

/* One generation step on generator queue 'g': top up the pending frames
 * (respecting --count and --rate), then offer them to tx.  Frames that tx
 * refuses stay pending, in order, for the next step.  Under --rate the
 * frames are released a full burst at a time, so that the switch sees the
 * batches it would see at full rate, spaced to meet the rate.  Returns the
 * number of frames that tx took. */
static unsigned int
gen_step(struct worker *w, struct gen_queue *g)
{
    struct port *p = g->port;
    unsigned int room = opt.burst - g->n_pend;
    uint64_t bytes = 0;
    unsigned int n;

    if (g->done) {
        return 0;
    }
    if (opt.count && opt.count - g->built < room) {
        room = opt.count - g->built;
    }
    if (opt.rate > 0 && room) {
        uint64_t now = rte_rdtsc();
        double cap = RATE_BUCKET_BURSTS * opt.burst;

        g->tokens += (now - g->last_tsc) * g->tokens_per_tsc;
        g->last_tsc = now;
        if (g->tokens > cap) {
            g->tokens = cap;
        }
        if (g->tokens < room) {
            room = 0;
        }
    }
    if (room) {
        struct rte_mbuf *fresh[MAX_BURST];
        unsigned int built = 0;

        if (!rte_pktmbuf_alloc_bulk(pool, fresh, room)) {
            for (unsigned int i = 0; i < room; i++) {
                int si = gen_build(w, g, fresh[i]);

                if (si < 0) {
                    rte_pktmbuf_free_bulk(fresh + i, room - i);
                    break;
                }
                g->pend[g->n_pend] = fresh[i];
                g->pend_stream[g->n_pend++] = si;
                built++;
            }
        }
        if (opt.rate > 0) {
            g->tokens -= built;
        }
    }
    if (!g->n_pend) {
        return 0;
    }

    n = rte_eth_tx_burst(p->port_id, g->queue, g->pend, g->n_pend);
    if (!n) {
        return 0;
    }
    for (unsigned int i = 0; i < n; i++) {
        streams[g->pend_stream[i]].tx_pkts++;
        bytes += g->pend[i]->pkt_len;
    }
    g->n_pend -= n;
    memmove(g->pend, g->pend + n, g->n_pend * sizeof g->pend[0]);
    memmove(g->pend_stream, g->pend_stream + n,
            g->n_pend * sizeof g->pend_stream[0]);
    g->sent += n;
    stat_add(&p->stats.tx_pkts, n);
    stat_add(&p->stats.tx_bytes, bytes);
    stat_add(&p->stats.tx_queue[g->queue], n);
    if (opt.count && g->sent >= opt.count) {
        __atomic_store_n(&g->done, true, __ATOMIC_RELEASE);
    }
    return n;
}

/* Frees the frames that generation stopped before tx took them.  Their
 * sequence numbers were never sent, so they are not counted as lost. */
static void
gen_flush(struct worker *w)
{
    for (unsigned int i = 0; i < w->n_ports; i++) {
        struct port *p = w->ports[i];

        for (unsigned int q = 0; q < MAX_QUEUES; q++) {
            struct gen_queue *g = p->gq[q];

            if (g && g->n_pend) {
                rte_pktmbuf_free_bulk(g->pend, g->n_pend);
                g->n_pend = 0;
            }
        }
    }
}

/* Sink. */

/* Returns the index of the stream with wire id 'id', or -1. */
static inline int
stream_lookup(uint32_t id)
{
    unsigned int src = id >> 16, queue = (id >> 8) & 0xff, dst = id & 0xff;

    return (src < MAX_PORTS && queue < MAX_QUEUES && dst < MAX_PORTS
            ? stream_index[src][queue][dst] : -1);
}

/* frame_lookup_cb for frame_verify(). */
static int
lookup_stream(uint32_t wire_id, void *aux __rte_unused, unsigned int *dst,
              uint64_t *next_seq)
{
    int si = stream_lookup(wire_id);

    if (si >= 0) {
        *dst = streams[si].dst;
        *next_seq = __atomic_load_n(&streams[si].next_seq, __ATOMIC_ACQUIRE);
    }
    return si;
}

/* Verifies one frame received on queue 'q' of port 'p' and updates the
 * counters. */
static void
rx_verify(struct worker *w, struct port *p, uint16_t q, struct rte_mbuf *m)
{
    uint32_t len = rte_pktmbuf_pkt_len(m);
    unsigned int avail;
    uint8_t *data;
    uint64_t seq;
    int si;

    /* Get the frame as one linear buffer.  Chained (jumbo) frames are
     * copied into the scratch area; up to its size for overlong ones. */
    if (m->nb_segs == 1) {
        data = rte_pktmbuf_mtod(m, uint8_t *);
        avail = len;
    } else {
        const struct rte_mbuf *seg;

        avail = 0;
        for (seg = m; seg && avail < SCRATCH_SIZE; seg = seg->next) {
            unsigned int n = RTE_MIN((unsigned int) seg->data_len,
                                     SCRATCH_SIZE - avail);

            memcpy(w->scratch + avail,
                   rte_pktmbuf_mtod(seg, const uint8_t *), n);
            avail += n;
        }
        data = w->scratch;
    }

    switch (frame_verify(data, avail, len, opt.vxlan, p->index,
                         lookup_stream, NULL, &si, &seq)) {
    case FRAME_PROBE:
        stat_add(&p->stats.late_probes, 1);
        break;
    case FRAME_FOREIGN:
        stat_add(&p->stats.foreign, 1);
        break;
    case FRAME_CORRUPTED:
        stat_add(&p->stats.corrupted, 1);
        if (si >= 0) {
            p->rx[si].corrupted++;
        } else {
            stat_add(&p->stats.corrupted_unknown, 1);
        }
        break;
    case FRAME_MISDELIVERED:
        stat_add(&p->stats.misdelivered, 1);
        /* Fall through. */
    case FRAME_OK:
        if (!frame_rx_record(&p->rx[si], q, seq, len)) {
            /* The frame still counts as received, but not as distinct. */
            __atomic_store_n(&out_of_memory, true, __ATOMIC_RELAXED);
        }
        break;
    }
}

/* Receives up to --burst frames from queue 'q' of port 'p' into 'pkts'.
 * The virtio PMD counts its burst limit in descriptors, not frames, so a
 * single call returns only a few chained jumbo frames; polling a few times
 * keeps receivers as fast as the generator that shares their lcore. */
static unsigned int
rx_burst(struct port *p, uint16_t q, struct rte_mbuf **pkts)
{
    unsigned int n = 0;

    for (unsigned int i = 0; i < 8 && n < opt.burst; i++) {
        unsigned int got = rte_eth_rx_burst(p->port_id, q, pkts + n,
                                            opt.burst - n);
        if (!got) {
            break;
        }
        n += got;
    }
    return n;
}

/* Receives and verifies one burst on queue 'q' of port 'p'. */
static unsigned int
rx_step(struct worker *w, struct port *p, uint16_t q)
{
    struct rte_mbuf *pkts[MAX_BURST];
    uint64_t bytes = 0;
    unsigned int n;

    n = rx_burst(p, q, pkts);
    if (!n) {
        return 0;
    }
    for (unsigned int i = 0; i < n; i++) {
        if (i + 1 < n) {
            rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
        }
        bytes += rte_pktmbuf_pkt_len(pkts[i]);
        rx_verify(w, p, q, pkts[i]);
    }
    rte_pktmbuf_free_bulk(pkts, n);
    stat_add(&p->stats.rx_pkts, n);
    stat_add(&p->stats.rx_bytes, bytes);
    stat_add(&p->stats.rx_queue[q], n);
    return n;
}

/* Loop: sends what queue 'q' of port 'p' receives back out of the same
 * queue, unchanged.  What tx keeps refusing is dropped and counted.
 * Returns the number of frames received. */
static unsigned int
loop_step(struct port *p, uint16_t q)
{
    struct rte_mbuf *pkts[MAX_BURST];
    unsigned int n, sent = 0;
    uint64_t bytes = 0;

    n = rx_burst(p, q, pkts);
    if (!n) {
        return 0;
    }
    for (unsigned int i = 0; i < n; i++) {
        bytes += rte_pktmbuf_pkt_len(pkts[i]);
    }
    for (unsigned int tries = 0; sent < n && tries < LOOP_RETRIES; tries++) {
        sent += rte_eth_tx_burst(p->port_id, q, pkts + sent, n - sent);
    }
    stat_add(&p->stats.rx_pkts, n);
    stat_add(&p->stats.rx_bytes, bytes);
    stat_add(&p->stats.rx_queue[q], n);
    stat_add(&p->stats.loop_pkts, n);
    if (sent < n) {
        for (unsigned int i = sent; i < n; i++) {
            bytes -= rte_pktmbuf_pkt_len(pkts[i]);
        }
        rte_pktmbuf_free_bulk(pkts + sent, n - sent);
        stat_add(&p->stats.loop_dropped, n - sent);
    }
    stat_add(&p->stats.tx_pkts, sent);
    stat_add(&p->stats.tx_bytes, bytes);
    stat_add(&p->stats.tx_queue[q], sent);
    return n;
}

/* Run control (main lcore only). */

struct totals {
    uint64_t tx;                /* Generated frames sent. */
    uint64_t rx;                /* Frames received by non-loop ports. */
    uint64_t loop;
    uint64_t corrupted;
};

static void
totals_get(struct totals *t)
{
    memset(t, 0, sizeof *t);
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];

        if (p->roles & ROLE_LOOP) {
            t->loop += stat_get(&p->stats.loop_pkts);
        } else {
            t->tx += stat_get(&p->stats.tx_pkts);
            t->rx += stat_get(&p->stats.rx_pkts);
            t->corrupted += stat_get(&p->stats.corrupted);
        }
    }
}

static bool
all_generators_done(void)
{
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        for (unsigned int q = 0; q < MAX_QUEUES; q++) {
            struct gen_queue *g = opt.ports[i].gq[q];

            if (g && !__atomic_load_n(&g->done, __ATOMIC_ACQUIRE)) {
                return false;
            }
        }
    }
    return true;
}

/* Called by the main lcore between polling rounds: ends generation and
 * draining when it is time, and prints progress lines. */
/* On SIGUSR2, takes GROW_MB more of DPDK memory for good.  With dynamic
 * memory (hugepages, not --legacy-mem or --no-huge) EAL maps new pages and
 * each virtio-user port sends the switch its new memory table
 * (VHOST_USER_SET_MEM_TABLE) on a live device, as a guest whose memory
 * grows does. */
#define GROW_MB 64
static void
grow_memory(void)
{
    static unsigned int grown;

    while (grown < (unsigned int) usr2_seen) {
        char name[RTE_MEMZONE_NAMESIZE];
        const struct rte_memzone *mz;

        snprintf(name, sizeof name, "ovs_vg_grow%u", grown);
        mz = rte_memzone_reserve(name, GROW_MB << 20, SOCKET_ID_ANY, 0);
        grown++;
        if (mz) {
            memset(mz->addr, 0, mz->len);
            fprintf(stderr, "%s: memory grown by %d MB (%u)\n", PROGRAM,
                    GROW_MB, grown);
        } else {
            fprintf(stderr, "%s: memory not grown: %s\n", PROGRAM,
                    rte_strerror(rte_errno));
        }
    }
}

static void
control(void)
{
    static uint64_t next_check, next_progress, last_change, next_link;
    static struct totals last, last_progress;
    static uint64_t last_progress_tsc;
    uint64_t now = rte_rdtsc();
    struct totals t;

    if (now < next_check) {
        return;
    }
    next_check = now + tsc_hz / 1000;
    if (!next_progress) {
        next_progress = gen_start_tsc + opt.progress * tsc_hz;
        last_progress_tsc = gen_start_tsc;
        last_change = now;
    }
    totals_get(&t);
    if (t.rx != last.rx || t.loop != last.loop) {
        last_change = now;
    }
    last = t;

    /* A virtio-user server accepts the switch's next connection (after the
     * switch closed one, e.g. when its port was deleted and re-added) only
     * when the link status is read: read it every 100 ms for the ports
     * that this lcore polls. */
    if (now >= next_link) {
        next_link = now + tsc_hz / 10;
        for (unsigned int i = 0; i < opt.n_ports; i++) {
            struct rte_eth_link link;

            if (opt.ports[i].lcore == rte_lcore_id()) {
                /* Only the read matters, not the status it returns. */
                (void) !rte_eth_link_get_nowait(opt.ports[i].port_id,
                                                &link);
            }
        }
    }

    grow_memory();

    if (phase_get() == PHASE_GEN) {
        bool stop = false;

        if (signals_seen) {
            fprintf(stderr, "%s: signal received, stopping generation\n",
                    PROGRAM);
            stop = true;
        } else if (opt.duration > 0
                   && now >= gen_start_tsc + opt.duration * tsc_hz) {
            stop = true;
        } else if (opt.count && all_generators_done()) {
            stop = true;
        }
        if (stop) {
            gen_stop_tsc = now;
            phase_set(PHASE_DRAIN);
        }
    } else {
        /* Draining: stop at the deadline, on a second signal, once
         * everything sent arrived and nothing came for 200 ms, or (with
         * --drain-idle) once nothing came for that long, whatever was
         * lost. */
        if (signals_seen > 1 || now >= gen_stop_tsc + opt.drain * tsc_hz
            || (t.rx >= t.tx && now - last_change >= tsc_hz / 5)
            || (opt.drain_idle > 0
                && now - RTE_MAX(last_change, gen_stop_tsc)
                   >= opt.drain_idle * tsc_hz)) {
            drain_stop_tsc = now;
            phase_set(PHASE_DONE);
        }
    }

    if (opt.progress > 0 && now >= next_progress) {
        double dt = (double) (now - last_progress_tsc) / tsc_hz;

        fprintf(stderr, "%s: %7.1f s: tx %.3f Mpps, rx %.3f Mpps; "
                "tx %"PRIu64" rx %"PRIu64" loop %"PRIu64" corrupted %"
                PRIu64"%s\n", PROGRAM,
                (double) (now - gen_start_tsc) / tsc_hz,
                (t.tx - last_progress.tx) / dt / 1e6,
                (t.rx - last_progress.rx) / dt / 1e6,
                t.tx, t.rx, t.loop, t.corrupted,
                phase_get() == PHASE_GEN ? "" : " (draining)");
        last_progress = t;
        last_progress_tsc = now;
        next_progress = now + opt.progress * tsc_hz;
    }
}

/* The polling loop of every lcore.  The main lcore also runs control().
 * With --idle-sleep a pass that moved no frame is followed by a sleep, so
 * that a thread sharing the CPU (a DMA engine's, on a small host) runs
 * promptly; every frame is still verified, later. */
static int
worker_main(void *w_)
{
    struct worker *w = w_;
    bool generating = true;

    for (;;) {
        int ph = phase_get();
        unsigned int moved = 0;

        if (ph == PHASE_DONE) {
            break;
        }
        if (generating && ph != PHASE_GEN) {
            gen_flush(w);
            generating = false;
        }
        for (unsigned int i = 0; i < w->n_ports; i++) {
            struct port *p = w->ports[i];

            for (uint16_t q = 0; q < p->n_queues; q++) {
                if (p->roles & ROLE_LOOP) {
                    moved += loop_step(p, q);
                    continue;
                }
                if (generating && p->gq[q]) {
                    moved += gen_step(w, p->gq[q]);
                }
                moved += rx_step(w, p, q);
            }
        }
        if (w->is_main) {
            control();
        }
        if (!moved && opt.idle_sleep_us) {
            rte_delay_us_sleep(opt.idle_sleep_us);
            w->idle_sleeps++;
        }
    }
    gen_flush(w);
    return 0;
}

/* Setup. */

/* Creates the streams and the generator queues. */
static void
setup_streams(void)
{
    unsigned int n = 0, n_gen_queues = 0;

    memset(stream_index, 0xff, sizeof stream_index);
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        if (opt.ports[i].roles & ROLE_GEN) {
            n_gen_queues += opt.ports[i].n_queues;
        }
    }
    n = n_gen_queues * opt.n_dsts;     /* At most. */
    streams = calloc(n, sizeof *streams);
    if (!streams) {
        fprintf(stderr, "%s: out of memory\n", PROGRAM);
        exit(EXIT_RUNTIME);
    }

    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];
        unsigned int dsts[MAX_PORTS], n_dsts = 0;

        if (!(p->roles & ROLE_GEN)) {
            continue;
        }
        for (unsigned int d = 0; d < opt.n_dsts; d++) {
            if (!opt.no_self || opt.dsts[d] != i) {
                dsts[n_dsts++] = opt.dsts[d];
            }
        }
        for (unsigned int q = 0; q < p->n_queues; q++) {
            struct gen_queue *g = calloc(1, sizeof *g);

            if (!g) {
                fprintf(stderr, "%s: out of memory\n", PROGRAM);
                exit(EXIT_RUNTIME);
            }
            g->streams = calloc(n_dsts, sizeof *g->streams);
            if (!g->streams) {
                fprintf(stderr, "%s: out of memory\n", PROGRAM);
                exit(EXIT_RUNTIME);
            }
            g->port = p;
            g->queue = q;
            g->n_streams = n_dsts;
            g->dst_cur = q % n_dsts;    /* Spread queues over sinks. */
            g->run_left = opt.burst_run;
            g->tokens_per_tsc = opt.rate / n_gen_queues / tsc_hz;
            for (unsigned int d = 0; d < n_dsts; d++) {
                struct stream *s = &streams[n_streams];

                s->src = i;
                s->queue = q;
                s->dst = dsts[d];
                s->wire_id = frame_stream_id(i, q, s->dst);
                s->sport = 10000 + n_streams;
                frame_template(s->tmpl, opt.vxlan, &opt.ports[s->dst].mac,
                               &p->mac, i, q, s->dst, n_streams);
                stream_index[i][q][s->dst] = n_streams;
                g->streams[d] = n_streams++;
            }
            p->gq[q] = g;
        }
    }

    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];

        if (!(p->roles & ROLE_LOOP)) {
            p->rx = calloc(n_streams, sizeof *p->rx);
            if (!p->rx) {
                fprintf(stderr, "%s: out of memory\n", PROGRAM);
                exit(EXIT_RUNTIME);
            }
        }
    }
}

/* Creates the mbuf pool.  By default each mbuf holds the largest frame in
 * one segment; if that does not fit in memory the data room is halved
 * (jumbo frames are then chained) down to DPDK's default size. */
static bool
setup_pool(void)
{
    unsigned int max_len = 0, room;
    unsigned int n = opt.n_mbufs ? opt.n_mbufs : 16384 * opt.n_ports;

    for (unsigned int i = 0; i < opt.n_sizes; i++) {
        max_len = RTE_MAX(max_len, (unsigned int) opt.sizes[i]);
    }
    room = opt.mbuf_size;
    if (!room) {
        room = RTE_MAX(RTE_ALIGN_CEIL(RTE_PKTMBUF_HEADROOM + max_len, 64),
                       (unsigned int) RTE_MBUF_DEFAULT_BUF_SIZE);
    }
    for (;;) {
        pool = rte_pktmbuf_pool_create("vg_pool", n, 256, 0, room,
                                       rte_socket_id());
        if (pool) {
            return true;
        }
        if (opt.mbuf_size || room <= RTE_MBUF_DEFAULT_BUF_SIZE) {
            fprintf(stderr, "%s: cannot create a pool of %u mbufs of %u "
                    "bytes: %s (try smaller --mbufs or --mbuf-size, or more "
                    "memory)\n", PROGRAM, n, room, rte_strerror(rte_errno));
            return false;
        }
        room = RTE_MAX(RTE_ALIGN_CEIL(room / 2, 64),
                       (unsigned int) RTE_MBUF_DEFAULT_BUF_SIZE);
        fprintf(stderr, "%s: pool does not fit, retrying with %u-byte "
                "mbufs\n", PROGRAM, room);
    }
}

/* Configures and starts port 'p'. */
static bool
setup_port(struct port *p)
{
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    unsigned int max_len = 0;
    uint16_t buf_size;
    int error;

    error = rte_eth_dev_info_get(p->port_id, &info);
    if (error) {
        goto error;
    }

    memset(&conf, 0, sizeof conf);
    for (unsigned int i = 0; i < opt.n_sizes; i++) {
        max_len = RTE_MAX(max_len, (unsigned int) opt.sizes[i]);
    }
    conf.rxmode.mtu = RTE_MAX(max_len - RTE_ETHER_HDR_LEN,
                              (unsigned int) RTE_ETHER_MTU);
    if (conf.rxmode.mtu > info.max_mtu) {
        conf.rxmode.mtu = info.max_mtu;
    }
    buf_size = rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM;
    if (buf_size < conf.rxmode.mtu + 64
        && info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) {
        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) {
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    }

    error = rte_eth_dev_configure(p->port_id, p->n_queues, p->n_queues,
                                  &conf);
    if (error) {
        goto error;
    }
    p->configured = true;
    for (uint16_t q = 0; q < p->n_queues; q++) {
        error = rte_eth_rx_queue_setup(p->port_id, q, opt.queue_size,
                                       rte_eth_dev_socket_id(p->port_id),
                                       NULL, pool);
        if (!error) {
            error = rte_eth_tx_queue_setup(p->port_id, q, opt.queue_size,
                                           rte_eth_dev_socket_id(p->port_id),
                                           NULL);
        }
        if (error) {
            goto error;
        }
    }
    error = rte_eth_dev_start(p->port_id);
    if (error) {
        goto error;
    }
    rte_eth_promiscuous_enable(p->port_id);
    return true;

error:
    fprintf(stderr, "%s: port %u (%s): setup failed: %s\n", PROGRAM,
            p->index, p->path, rte_strerror(-error));
    return false;
}

/* Waits until every port's link is up, i.e. the switch has connected to
 * every socket and set the device up, within what is left of
 * --wait-link (0 means forever). */
static bool
wait_links(void)
{
    uint64_t deadline = wait_start_tsc + opt.wait_link * tsc_hz;

    for (;;) {
        int down = -1;

        for (unsigned int i = 0; i < opt.n_ports && down < 0; i++) {
            struct rte_eth_link link;

            memset(&link, 0, sizeof link);
            if (rte_eth_link_get_nowait(opt.ports[i].port_id, &link)
                || !link.link_status) {
                down = i;
            }
        }
        if (down < 0) {
            return true;
        }
        if (signals_seen) {
            fprintf(stderr, "%s: interrupted while waiting for links\n",
                    PROGRAM);
            return false;
        }
        if (opt.wait_link > 0 && rte_rdtsc() >= deadline) {
            fprintf(stderr, "%s: port %d (%s): link still down after %g s, "
                    "although a client connected\n", PROGRAM, down,
                    opt.ports[down].path, opt.wait_link);
            return false;
        }
        rte_delay_us_sleep(10 * 1000);
    }
}

/* Sends one warm-up frame on queue 0 of port 'p': a probe of stream 'si'
 * of 'len' bytes or, if 'si' is negative, a broadcast "hello" from the
 * port's MAC, from which a MAC-learning switch learns where it is. */
static void
warmup_send(const struct port *p, int si, unsigned int len)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
    uint16_t queue = 0;
    uint8_t *buf;

    if (!m) {
        return;
    }
    len = si < 0 ? FRAME_MIN : RTE_MIN(len, rte_pktmbuf_tailroom(m));
    buf = (uint8_t *) rte_pktmbuf_append(m, len);
    if (si < 0) {
        memset(buf, 0, len);
        memset(buf, 0xff, RTE_ETHER_ADDR_LEN);
        memcpy(buf + 6, &p->mac, RTE_ETHER_ADDR_LEN);
        frame_put_be16(buf + 12, FRAME_HELLO_ETHERTYPE);
    } else {
        frame_build_probe(buf, streams[si].tmpl, opt.vxlan,
                          streams[si].wire_id, len);
        queue = streams[si].queue;
    }
    if (!rte_eth_tx_burst(p->port_id, queue, &m, 1)) {
        rte_pktmbuf_free(m);
    }
}

/* Warm-up receive on queue 'q' of port 'p': loop ports bounce frames, the
 * others note which probes arrived where.  Returns true if a probe
 * arrived at a port that is not its destination. */
static bool
warmup_receive(const struct port *p, uint16_t q, bool *done,
               unsigned int *n_done)
{
    struct rte_mbuf *pkts[MAX_BURST];
    unsigned int n, sent = 0;
    bool stray = false;

    n = rte_eth_rx_burst(p->port_id, q, pkts, opt.burst);
    if (p->roles & ROLE_LOOP) {
        for (int tries = 0; sent < n && tries < LOOP_RETRIES; tries++) {
            sent += rte_eth_tx_burst(p->port_id, q, pkts + sent, n - sent);
        }
    }
    for (unsigned int j = sent; j < n; j++) {
        uint8_t copy[FRAME_VXLAN_HDR_LEN + FRAME_PH_LEN];
        const uint8_t *h = rte_pktmbuf_read(pkts[j], 0,
                                            hdr_len + FRAME_PH_LEN,
                                            copy);
        int si;

        if (!h || frame_get_be32(h + hdr_len + FRAME_PH_OFS_MAGIC)
                  != FRAME_PH_PROBE_MAGIC) {
            continue;
        }
        si = stream_lookup(frame_get_be32(h + hdr_len
                                          + FRAME_PH_OFS_STREAM));
        if (si < 0) {
            continue;
        } else if (streams[si].dst != p->index) {
            stray = true;
        } else if (!done[si]) {
            done[si] = true;
            (*n_done)++;
        }
    }
    if (sent < n) {
        rte_pktmbuf_free_bulk(pkts + sent, n - sent);
    }
    return stray;
}

/* Before anything is counted, makes sure that the path of every stream
 * works.  Every 10 ms, each sink-only port broadcasts a "hello" (so that a
 * MAC-learning switch knows where every destination MAC lives; generators
 * teach it with their probes) and a probe frame goes out on every stream
 * that has not yet reached its destination.  The warm-up ends when every
 * stream got through and no probe went astray (flooded) for 30 ms.  This
 * absorbs the moment between a link coming up and the switch really
 * forwarding, which would otherwise show up as loss.  Runs on the main
 * lcore alone.  If that does not happen in --warmup seconds, a warning
 * names a failing stream and the run goes on: the results will show what
 * happens to it. */
static void
warmup(void)
{
    uint64_t start = rte_rdtsc(), next_send = start, last_stray = start;
    uint64_t deadline = start + opt.warmup * tsc_hz;
    unsigned int n_done = 0, len = FRAME_MAX;
    bool *done;

    if (opt.warmup <= 0) {
        return;
    }
    done = calloc(n_streams, sizeof *done);
    if (!done) {
        return;
    }
    for (unsigned int i = 0; i < opt.n_sizes; i++) {
        len = RTE_MIN(len, (unsigned int) opt.sizes[i]);
    }

    for (;;) {
        uint64_t now = rte_rdtsc();

        if ((n_done == n_streams && now - last_stray >= tsc_hz * 3 / 100)
            || signals_seen || now >= deadline) {
            break;
        }
        if (now >= next_send) {
            for (unsigned int i = 0; i < opt.n_ports; i++) {
                if (opt.ports[i].roles == ROLE_SINK) {
                    warmup_send(&opt.ports[i], -1, 0);
                }
            }
            for (unsigned int si = 0; si < n_streams; si++) {
                if (!done[si]) {
                    warmup_send(&opt.ports[streams[si].src], si, len);
                }
            }
            next_send = now + tsc_hz / 100;
        }
        for (unsigned int i = 0; i < opt.n_ports; i++) {
            for (uint16_t q = 0; q < opt.ports[i].n_queues; q++) {
                if (warmup_receive(&opt.ports[i], q, done, &n_done)) {
                    last_stray = rte_rdtsc();
                }
            }
        }
    }

    for (unsigned int si = 0; si < n_streams; si++) {
        if (!done[si]) {
            fprintf(stderr, "%s: warning: after %.1f s of warm-up, %u of %u "
                    "streams do not reach their sink (first: port %u queue "
                    "%u -> port %u); going on\n", PROGRAM,
                    (double) (rte_rdtsc() - start) / tsc_hz,
                    n_streams - n_done, n_streams, streams[si].src,
                    streams[si].queue, streams[si].dst);
            break;
        }
    }
    if (n_done == n_streams && rte_rdtsc() - last_stray < tsc_hz * 3 / 100) {
        fprintf(stderr, "%s: warning: warm-up probes still reach ports "
                "other than their destination (flooding?); going on\n",
                PROGRAM);
    }
    free(done);
}

/* Distributes whole ports over the enabled lcores, round robin, the main
 * lcore first.  A port's queues all stay on one lcore, so the per-stream
 * receive state of a port has a single owner. */
static bool
setup_workers(void)
{
    unsigned int lcores[RTE_MAX_LCORE];
    unsigned int n_lcores = 0, lcore;

    lcores[n_lcores++] = rte_get_main_lcore();
    RTE_LCORE_FOREACH_WORKER (lcore) {
        lcores[n_lcores++] = lcore;
    }
    n_workers = RTE_MIN(n_lcores, opt.n_ports);
    for (unsigned int i = 0; i < n_workers; i++) {
        workers[i] = rte_zmalloc("vg_worker", sizeof *workers[i],
                                 RTE_CACHE_LINE_SIZE);
        if (!workers[i]) {
            fprintf(stderr, "%s: out of memory\n", PROGRAM);
            return false;
        }
        workers[i]->lcore = lcores[i];
        workers[i]->is_main = i == 0;
    }
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct worker *w = workers[i % n_workers];

        opt.ports[i].lcore = w->lcore;
        w->ports[w->n_ports++] = &opt.ports[i];
    }
    return true;
}

static void
signal_handler(int sig, siginfo_t *info, void *ctx __rte_unused)
{
    if (sig == SIGALRM) {
        alarm_fired = 1;
    } else if (sig == SIGUSR1) {
        usr1_seen++;
    } else if (sig == SIGUSR2) {
        usr2_seen++;
    } else {
        stop_signal = sig;
        stop_sender = info ? info->si_pid : 0;
        signals_seen++;
    }
}

/* Blocks or unblocks the signals that this program handles. */
static void
block_signals(bool block)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGALRM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* Arms (or, with 0, disarms) SIGALRM 'seconds' from now, repeating every
 * 100 ms after that. */
static void
set_alarm(double seconds)
{
    struct itimerval it;

    memset(&it, 0, sizeof it);
    if (seconds > 0) {
        it.it_value.tv_sec = seconds;
        it.it_value.tv_usec = (seconds - it.it_value.tv_sec) * 1e6;
        if (!it.it_value.tv_sec && !it.it_value.tv_usec) {
            it.it_value.tv_usec = 1;
        }
        it.it_interval.tv_usec = 100 * 1000;
    }
    setitimer(ITIMER_REAL, &it, NULL);
}

/* virtio-user refuses to bind a socket path that exists.  A socket left
 * behind by an earlier run that died is removed; one that someone still
 * listens on means that another guest serves it, and is an error. */
static bool
check_socket_path(const struct port *p)
{
    struct sockaddr_un un;
    struct stat st;
    bool in_use;
    int fd;

    if (lstat(p->path, &st)) {
        return true;
    }
    if (!S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "%s: --port: '%s' exists and is not a socket\n",
                PROGRAM, p->path);
        exit(EXIT_USAGE);
    }
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        return true;
    }
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", p->path);
    in_use = !connect(fd, (struct sockaddr *) &un, sizeof un);
    if (!in_use && errno == ECONNREFUSED) {
        fprintf(stderr, "%s: removing stale socket %s\n", PROGRAM, p->path);
        unlink(p->path);
    }
    close(fd);
    if (in_use) {
        fprintf(stderr, "%s: port %u: socket %s is in use by another "
                "process\n", PROGRAM, p->index, p->path);
    }
    return !in_use;
}

/* Every port's socket listens from the start.
 *
 * A virtio-user server creates its socket when its device is created, and
 * then blocks in accept() until a client connects; devices are created one
 * after another.  A vhost-user client of the switch whose connection
 * failed tries again once a second (DPDK's reconnection thread), so each
 * port would wait for the next of those passes: a guest of two ports
 * waited 1.5 s on average for its links.  Instead, listen_ports() makes
 * every port's socket listen before the first device is created, so that
 * the switch connects all of them in one pass, and when virtio-user binds
 * its socket to a port's path, bind() below hands it the socket that
 * already listens, the switch's connection waiting in its backlog.
 *
 * This program exports bind() (utilities/async.mk), so that the virtio-user
 * driver, which EAL loads with -d, calls this one. */
static pthread_mutex_t listen_mutex = PTHREAD_MUTEX_INITIALIZER;

static int
raw_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    return syscall(SYS_bind, fd, addr, len);
}

int
bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *) addr;
    int listen_fd = -1;
    int fd_flags, error;

    if (addr && addr->sa_family == AF_UNIX
        && len > offsetof(struct sockaddr_un, sun_path)) {
        pthread_mutex_lock(&listen_mutex);
        for (unsigned int i = 0; i < opt.n_ports; i++) {
            struct port *p = &opt.ports[i];

            if (p->listen_fd >= 0
                && !strncmp(un->sun_path, p->path, sizeof un->sun_path)) {
                listen_fd = p->listen_fd;
                p->listen_fd = -1;
                break;
            }
        }
        pthread_mutex_unlock(&listen_mutex);
    }
    if (listen_fd < 0) {
        return raw_bind(fd, addr, len);
    }

    /* 'fd' becomes the listening socket; it keeps its descriptor flags. */
    fd_flags = fcntl(fd, F_GETFD);
    error = 0;
    if (dup2(listen_fd, fd) < 0
        || (fd_flags >= 0 && fcntl(fd, F_SETFD, fd_flags) < 0)) {
        error = errno;
    }
    close(listen_fd);
    errno = error;
    return error ? -1 : 0;
}

/* Makes every port's socket listen (see bind() above).  A port whose
 * socket cannot be created here is left to virtio-user, which reports
 * the error. */
static void
listen_ports(void)
{
    pthread_mutex_lock(&listen_mutex);
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];
        struct sockaddr_un un;
        int fd;

        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) {
            continue;
        }
        memset(&un, 0, sizeof un);
        un.sun_family = AF_UNIX;
        snprintf(un.sun_path, sizeof un.sun_path, "%s", p->path);
        if (raw_bind(fd, (struct sockaddr *) &un, sizeof un) < 0) {
            close(fd);
            continue;
        }
        p->bound = true;
        if (listen(fd, 1) < 0) {
            close(fd);
            unlink(p->path);
            continue;
        }
        p->listen_fd = fd;
    }
    pthread_mutex_unlock(&listen_mutex);
}

/* Creates the virtio-user devices.  In server mode, creating one blocks
 * until a vhost-user client (Open vSwitch) connects to its socket, so this
 * is where most of --wait-link is spent.  All other threads were created
 * with our signals blocked, so SIGALRM (the deadline) and SIGINT/SIGTERM
 * interrupt that wait here, in the main thread. */
static bool
probe_ports(void)
{
    bool ok = true;

    listen_ports();
    set_alarm(opt.wait_link);
    for (unsigned int i = 0; i < opt.n_ports && ok; i++) {
        struct port *p = &opt.ports[i];

        if (!alarm_fired && !signals_seen) {
            p->bound = true;
        }
        if (alarm_fired || signals_seen
            || rte_dev_probe(p->devargs) < 0
            || rte_eth_dev_get_port_by_name(p->name, &p->port_id)) {
            ok = false;
            if (alarm_fired) {
                fprintf(stderr, "%s: port %u (%s): no vhost-user client "
                        "connected within %g s: is an Open vSwitch "
                        "dpdkvhostuserclient port's vhost-server-path set to "
                        "it?\n", PROGRAM, i, p->path, opt.wait_link);
            } else if (signals_seen) {
                fprintf(stderr, "%s: interrupted while waiting for a client "
                        "on %s (%s from pid %d)\n", PROGRAM, p->path,
                        strsignal(stop_signal), (int) stop_sender);
            } else {
                fprintf(stderr, "%s: port %u (%s): cannot create %s\n",
                        PROGRAM, i, p->path, p->name);
            }
        } else {
            p->probed = true;
        }
    }
    set_alarm(0);
    return ok;
}

/* Results. */

/* Prints 's' as a JSON string. */
static void
json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = *s;

        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

/* What one stream experienced, over every receiving port. */
struct stream_result {
    uint64_t rx, lost, corrupted, reordered, requeued, duplicates;
    uint64_t misdelivered;
    int64_t first_lost;         /* Lowest sequence never received, or -1. */
};

static void
stream_result_get(unsigned int si, struct stream_result *sr)
{
    const struct stream *s = &streams[si];
    const struct frame_rx *own = &opt.ports[s->dst].rx[si];

    memset(sr, 0, sizeof *sr);
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        const struct frame_rx *st = opt.ports[i].rx;

        if (st) {
            sr->corrupted += st[si].corrupted;
            sr->misdelivered += i != s->dst ? st[si].rx : 0;
        }
    }
    sr->rx = own->rx;
    sr->lost = s->tx_pkts > own->distinct ? s->tx_pkts - own->distinct : 0;

    /* Frames go out in sequence order, so [0, tx_pkts) were sent. */
    sr->first_lost = -1;
    for (uint64_t w = 0; sr->lost && w * 64 < s->tx_pkts; w++) {
        uint64_t bits = w < own->n_words ? own->seen[w] : 0;

        if (~bits) {
            uint64_t seq = w * 64 + __builtin_ctzll(~bits);

            sr->first_lost = seq < s->tx_pkts ? (int64_t) seq : -1;
            break;
        }
    }
    sr->reordered = own->reordered;
    sr->requeued = own->requeued;
    sr->duplicates = own->duplicates;
}

/* With --hold, says 'what' on stderr and waits until SIGUSR1 number 'n'
 * arrived, a SIGINT/SIGTERM arrived or --hold seconds passed. */
static void
hold(const char *what, int n)
{
    uint64_t deadline;

    if (opt.hold <= 0) {
        return;
    }
    fprintf(stderr, "%s: %s; waiting for SIGUSR1\n", PROGRAM, what);
    fflush(stderr);
    deadline = rte_rdtsc() + opt.hold * tsc_hz;
    while (usr1_seen < n && !signals_seen && rte_rdtsc() < deadline) {
        rte_delay_us_sleep(1000);
    }
}

/* Passes of all lcores that slept for --idle-sleep. */
static uint64_t
idle_sleeps(void)
{
    uint64_t n = 0;

    for (unsigned int i = 0; i < n_workers; i++) {
        n += workers[i]->idle_sleeps;
    }
    return n;
}

/* Prints the per-port and per-stream arrays of the result object. */
static void
report_details(void)
{
    printf(",\"ports\":[");
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        const struct port *p = &opt.ports[i];
        const struct port_stats *ps = &p->stats;
        char mac[RTE_ETHER_ADDR_FMT_SIZE];

        rte_ether_format_addr(mac, sizeof mac, &p->mac);
        printf("%s{\"index\":%u,\"name\":\"%s\",\"path\":", i ? "," : "",
               i, p->name);
        json_string(p->path);
        printf(",\"role\":\"%s\",\"mac\":\"%s\",\"queues\":%u,\"lcore\":%u,"
               "\"tx\":%"PRIu64",\"tx_bytes\":%"PRIu64",\"rx\":%"PRIu64","
               "\"rx_bytes\":%"PRIu64",\"loop_pkts\":%"PRIu64","
               "\"loop_dropped\":%"PRIu64",\"corrupted\":%"PRIu64","
               "\"misdelivered\":%"PRIu64",\"foreign\":%"PRIu64","
               "\"late_probes\":%"PRIu64,
               role_name(p->roles), mac, p->n_queues, p->lcore, ps->tx_pkts,
               ps->tx_bytes, ps->rx_pkts, ps->rx_bytes, ps->loop_pkts,
               ps->loop_dropped, ps->corrupted, ps->misdelivered,
               ps->foreign, ps->late_probes);
        printf(",\"tx_queues\":[");
        for (unsigned int q = 0; q < p->n_queues; q++) {
            printf("%s%"PRIu64, q ? "," : "", ps->tx_queue[q]);
        }
        printf("],\"rx_queues\":[");
        for (unsigned int q = 0; q < p->n_queues; q++) {
            printf("%s%"PRIu64, q ? "," : "", ps->rx_queue[q]);
        }
        printf("]}");
    }

    printf("],\"streams\":[");
    for (unsigned int si = 0; si < n_streams; si++) {
        const struct stream *s = &streams[si];
        struct stream_result sr;

        stream_result_get(si, &sr);
        printf("%s{\"id\":%"PRIu32",\"src\":%u,\"queue\":%u,\"dst\":%u,"
               "\"udp_sport\":%u,\"tx\":%"PRIu64",\"rx\":%"PRIu64","
               "\"lost\":%"PRIu64",\"corrupted\":%"PRIu64","
               "\"reordered\":%"PRIu64",\"requeued\":%"PRIu64","
               "\"duplicates\":%"PRIu64",\"misdelivered\":%"PRIu64","
               "\"first_lost\":%"PRId64"}",
               si ? "," : "", s->wire_id, s->src, s->queue, s->dst, s->sport,
               s->tx_pkts, sr.rx, sr.lost, sr.corrupted, sr.reordered,
               sr.requeued, sr.duplicates, sr.misdelivered, sr.first_lost);
    }
    printf("]");
}

/* Prints the JSON result object on one line and returns the exit status.
 * Called after every lcore has stopped. */
static int
report(void)
{
    double duration = (double) (gen_stop_tsc - gen_start_tsc) / tsc_hz;
    double drain = (double) (drain_stop_tsc - gen_stop_tsc) / tsc_hz;
    uint64_t tx_pkts = 0, rx_pkts = 0, tx_bytes = 0, rx_bytes = 0;
    uint64_t lost = 0, corrupted = 0, reordered = 0, duplicates = 0;
    uint64_t misdelivered = 0, foreign = 0, loop_pkts = 0, loop_dropped = 0;
    uint64_t requeued = 0;
    const char *verdict;
    int status;

    for (unsigned int i = 0; i < opt.n_ports; i++) {
        const struct port_stats *ps = &opt.ports[i].stats;

        if (opt.ports[i].roles & ROLE_LOOP) {
            loop_pkts += ps->loop_pkts;
            loop_dropped += ps->loop_dropped;
        } else {
            tx_pkts += ps->tx_pkts;
            tx_bytes += ps->tx_bytes;
            rx_pkts += ps->rx_pkts;
            rx_bytes += ps->rx_bytes;
            corrupted += ps->corrupted_unknown;
            foreign += ps->foreign;
        }
    }
    for (unsigned int si = 0; si < n_streams; si++) {
        struct stream_result sr;

        stream_result_get(si, &sr);
        lost += sr.lost;
        corrupted += sr.corrupted;
        reordered += sr.reordered;
        requeued += sr.requeued;
        duplicates += sr.duplicates;
        misdelivered += sr.misdelivered;
    }

    if (out_of_memory) {
        verdict = "out_of_memory";
        status = EXIT_RUNTIME;
    } else if (corrupted) {
        verdict = "corrupted";
        status = EXIT_FAIL;
    } else if (duplicates) {
        verdict = "duplicated";
        status = EXIT_FAIL;
    } else if (misdelivered) {
        verdict = "misdelivered";
        status = EXIT_FAIL;
    } else if (!tx_pkts) {
        verdict = "no_traffic";
        status = EXIT_FAIL;
    } else if (lost) {
        verdict = "lost";
        status = (opt.max_lost_given && lost > opt.max_lost
                  ? EXIT_FAIL : EXIT_OK);
    } else if (reordered) {
        verdict = "reordered";
        status = EXIT_OK;
    } else {
        verdict = "ok";
        status = EXIT_OK;
    }

    printf("{\"verdict\":\"%s\",\"tx_pkts\":%"PRIu64",\"rx_pkts\":%"PRIu64
           ",\"lost\":%"PRIu64",\"corrupted\":%"PRIu64",\"reordered\":%"
           PRIu64",\"requeued\":%"PRIu64",\"duplicates\":%"PRIu64
           ",\"misdelivered\":%"PRIu64",\"foreign\":%"PRIu64
           ",\"loop_pkts\":%"PRIu64",\"loop_dropped\":%"PRIu64
           ",\"tx_bytes\":%"PRIu64",\"rx_bytes\":%"PRIu64, verdict,
           tx_pkts, rx_pkts, lost, corrupted, reordered, requeued,
           duplicates, misdelivered, foreign, loop_pkts, loop_dropped,
           tx_bytes, rx_bytes);
    printf(",\"duration_s\":%.6f,\"drain_s\":%.6f,\"tx_mpps\":%.6f"
           ",\"mpps\":%.6f,\"gbps\":%.6f", duration, drain,
           duration > 0 ? tx_pkts / duration / 1e6 : 0.0,
           duration > 0 ? rx_pkts / duration / 1e6 : 0.0,
           duration > 0 ? rx_bytes * 8 / duration / 1e9 : 0.0);

    printf(",\"sizes\":[");
    if (opt.imix) {
        printf("64,570,1518],\"imix\":true");
    } else {
        for (unsigned int i = 0; i < opt.n_sizes; i++) {
            printf("%s%u", i ? "," : "", opt.sizes[i]);
        }
        printf("],\"imix\":false");
    }
    printf(",\"size_steps\":%s", opt.size_steps ? "true" : "false");
    if (opt.burst_run) {
        printf(",\"pattern\":\"burst:%u\"", opt.burst_run);
    } else {
        printf(",\"pattern\":\"scatter\"");
    }
    printf(",\"vxlan\":%s,\"lcores\":%u,\"corrupt_injected\":%s",
           opt.vxlan ? "true" : "false", n_workers,
           corrupt_injected ? "true" : "false");
    if (opt.max_lost_given) {
        printf(",\"max_lost\":%"PRIu64, opt.max_lost);
    }
    printf(",\"rate\":%.0f,\"burst\":%u,\"idle_sleep_us\":%u,"
           "\"idle_sleeps\":%"PRIu64, opt.rate, opt.burst, opt.idle_sleep_us,
           idle_sleeps());
    report_details();
    printf("}\n");
    fflush(stdout);
    return status;
}

/* Stops every port that was set up, removes the sockets and frees what is
 * ours.
 *
 * The ports are not closed, and EAL is not released: the process exits
 * with them.  After the switch reconnects to a virtio-user server (the
 * switch reset or re-added its port), DPDK 22.11's virtio-user registers
 * its link-state handler with EAL's interrupt thread even though we did not
 * ask for link-state interrupts, and nothing unregisters it: neither
 * rte_eth_dev_stop() nor rte_eth_dev_close().  rte_eth_dev_close() frees
 * the device's private data while that thread may still be about to call
 * the handler for an event of the last vhost-user messages, which then
 * reads a NULL 'struct virtio_hw' (SEGV at address 0x1e, hw->port_id, in
 * the interrupt thread: seen under AddressSanitizer after
 * tests/test_lifecycle.py::test_engine_error).  rte_eal_cleanup() would
 * unmap the memory that the handler reads in the same way. */
static void
cleanup(void)
{
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];

        if (p->configured) {
            rte_eth_dev_stop(p->port_id);
        }
        p->configured = p->probed = false;
        if (p->bound) {
            struct stat st;

            /* Remove the socket that virtio-user left behind. */
            if (!lstat(p->path, &st) && S_ISSOCK(st.st_mode)) {
                unlink(p->path);
            }
            p->bound = false;
        }

        for (unsigned int q = 0; q < MAX_QUEUES; q++) {
            if (p->gq[q]) {
                free(p->gq[q]->streams);
                free(p->gq[q]);
                p->gq[q] = NULL;
            }
        }
        for (unsigned int si = 0; p->rx && si < n_streams; si++) {
            frame_rx_destroy(&p->rx[si]);
        }
        free(p->rx);
        free(p->devargs);
        free(p->path);
        p->rx = NULL;
        p->devargs = p->path = NULL;
    }
    free(streams);
    streams = NULL;
}

/* Splits argv at "--": EAL options before it, ours after.  Without "--",
 * every argument is ours. */
static int
split_args(int argc, char *argv[])
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            return i;
        }
    }
    return 0;
}

int
main(int argc, char *argv[])
{
    char **app_argv, **eal_argv;
    int app_argc, eal_argc, split, status;
    struct sigaction sa;

    /* Parse our own options first: they name the vdevs to create. */
    split = split_args(argc, argv);
    app_argc = split ? argc - split : argc;
    app_argv = calloc(app_argc + 1, sizeof *app_argv);
    eal_argv = calloc((split ? split : 1) + 1, sizeof *eal_argv);
    if (!app_argv || !eal_argv) {
        fprintf(stderr, "%s: out of memory\n", PROGRAM);
        return EXIT_RUNTIME;
    }
    app_argv[0] = argv[0];
    for (int i = 1; i < app_argc; i++) {
        app_argv[i] = argv[(split ? split : 0) + i];
    }
    parse_options(app_argc, app_argv);
    free(app_argv);

    eal_argc = 0;
    eal_argv[eal_argc++] = argv[0];
    for (int i = 1; i < split; i++) {
        eal_argv[eal_argc++] = argv[i];
    }
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        struct port *p = &opt.ports[i];
        char mac[RTE_ETHER_ADDR_FMT_SIZE];
        size_t size = strlen(p->path) + 128;

        if (!check_socket_path(p)) {
            return EXIT_RUNTIME;
        }
        p->devargs = malloc(size);
        if (!p->devargs) {
            fprintf(stderr, "%s: out of memory\n", PROGRAM);
            return EXIT_RUNTIME;
        }
        rte_ether_format_addr(mac, sizeof mac, &p->mac);
        /* With queue pairs to leave disabled, the control queue (which
         * virtio-user handles itself) carries the driver's
         * VIRTIO_NET_CTRL_MQ, and virtio-user then disables them. */
        snprintf(p->devargs, size, "%s,path=%s,server=1,queues=%u,"
                 "queue_size=%u,mac=%s%s", p->name, p->path, p->max_queues,
                 opt.queue_size, mac,
                 p->max_queues > p->n_queues ? ",cq=1" : "");
    }

    /* EAL's threads inherit the signal mask: keep our signals for the
     * main thread. */
    block_signals(true);
    optind = 0;                 /* Let EAL's getopt start afresh. */
    if (rte_eal_init(eal_argc, eal_argv) < 0) {
        fprintf(stderr, "%s: EAL initialization failed: %s\n", PROGRAM,
                rte_strerror(rte_errno));
        return EXIT_RUNTIME;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = signal_handler;   /* No SA_RESTART: interrupt. */
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    /* The switch may close a vhost-user socket at any time (a port deleted
     * or registered again): a write to it must fail, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    block_signals(false);

    tsc_hz = rte_get_tsc_hz();
    wait_start_tsc = rte_rdtsc();
    if (!probe_ports()) {
        status = EXIT_RUNTIME;
        goto out;
    }

    if (!frame_init(true)) {
        fprintf(stderr, "%s: rte_net_crc self-test failed\n", PROGRAM);
        status = EXIT_RUNTIME;
        goto out;
    }

    setup_streams();
    if (!setup_pool()) {
        status = EXIT_RUNTIME;
        goto out;
    }
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        if (!setup_port(&opt.ports[i])) {
            status = EXIT_RUNTIME;
            goto out;
        }
    }
    if (!wait_links() || !setup_workers()) {
        status = EXIT_RUNTIME;
        goto out;
    }
    warmup();
    if (signals_seen) {
        fprintf(stderr, "%s: interrupted before generation\n", PROGRAM);
        status = EXIT_RUNTIME;
        goto out;
    }

    hold("ready", 1);
    fprintf(stderr, "%s: %u port(s) up, %u stream(s), %u lcore(s); "
            "generating\n", PROGRAM, opt.n_ports, n_streams, n_workers);
    gen_start_tsc = rte_rdtsc();
    for (unsigned int i = 0; i < opt.n_ports; i++) {
        for (unsigned int q = 0; q < MAX_QUEUES; q++) {
            if (opt.ports[i].gq[q]) {
                opt.ports[i].gq[q]->last_tsc = gen_start_tsc;
            }
        }
    }
    phase_set(PHASE_GEN);
    for (unsigned int i = 1; i < n_workers; i++) {
        rte_eal_remote_launch(worker_main, workers[i], workers[i]->lcore);
    }
    worker_main(workers[0]);
    rte_eal_mp_wait_lcore();

    status = report();
    hold("done", 2);

out:
    cleanup();
    free(eal_argv);
    return status;
}
