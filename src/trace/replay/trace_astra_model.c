/* trace_astra_model.c - ASTRA-sim analytical network and system-layer
 * collective timing (see trace_astra_model.h). What it is not: the NCCL-
 * flavoured alpha-beta model (src/net/net_alpha_beta.c) or a report (sim/).
 *
 * The rules, as read in ASTRA-sim's sources (facts, no code taken):
 * Network (astra-sim/astra-network-analytical):
 *  N1 common/NetworkFunction.cc, bw_GBps_to_Bpns: bandwidth GB/s x 2^30 /
 *     10^9 = bytes per ns; common/Type.hh: latency in ns, EventTime a
 *     uint64 of ns.
 *  N2 congestion_unaware/basic-topology/BasicTopology.cc: a send costs
 *     hops x latency + bytes / bandwidth, cast to EventTime (truncated).
 *  N3 Ring.cc (bidirectional by default, Ring.hh): hops = the shorter way
 *     round; FullyConnected.cc: 1 hop; Switch.cc: 2 hops.
 *  N4 multi-dim-topology/MultiDimTopology.cc: NPU id -> address with
 *     dimension 0 varying fastest; a send uses the first dimension where
 *     the addresses differ. common/network-parser/NetworkParser.cc: lists
 *     topology / npus_count / bandwidth / latency of one length, npus_count
 *     > 1, bandwidth > 0, latency >= 0.
 *  N5 astra-sim network_frontend/analytical/congestion_unaware: each send
 *     is delayed independently (no contention between concurrent sends);
 *     num-queues-per-dim defaults to 1 (common/CmdLineParser.cc).
 * System layer (astra-sim/astra-sim, astra-sim/system):
 *  S1 Sys.cc, Sys(): endpoint delay (communication_delay) 10, local
 *     reduction delay 1, active chunks 1, FIFO; initialize_sys reads the
 *     keys listed in the header; local-mem-bw in GB/s (x 10^9).
 *  S2 Sys.cc, determine_chunk_size: chunk = size / preferred-dataset-splits;
 *     for all but all-gather, if the NPUs of the whole network exceed the
 *     chunk, chunk = NPUs and size = splits x chunk; generate_collective
 *     makes ceil(size / chunk) streams of chunk bytes each.
 *  S3 Sys.cc, generate_collective: phases per dimension in order (all-gather
 *     in reverse order), each phase's input = the previous phase's
 *     final_data_size; all-reduce with localBWAware = reduce-scatter on the
 *     dimensions before the last, all-reduce on the last, all-gather back
 *     down; with baseline an all-reduce on every dimension.
 *  S4 Sys.cc constructor / SchedulerUnit: one queue per dimension, at most
 *     ceil(active-chunks-per-dimension / queues) streams running on it;
 *     a stream's next phase joins the next dimension's queue behind the
 *     streams of equal priority (insert_stream), a finishing stream frees
 *     its slot at once (notify_stream_removed).
 *  S5 logical_topology/GeneralComplexTopology.cc: dimension kind NA, so
 *     MemBus.cc charges the endpoint delay (Transmition::Usual) on every
 *     NPU<->MA transfer; ring neighbours are one position apart.
 *  S6 PacketBundle.cc: a transfer marked for processing then waits 3 x
 *     (bytes / local-mem-bw) ns (one write, two reads), each truncated.
 *  S7 collective_algorithm/Ring.cc: steps K = 2(n-1) all-reduce, n(n-1)/2
 *     all-to-all, n-1 otherwise; message = size/n (all-reduce,
 *     reduce-scatter, all-to-all) or size (all-gather); final size = size,
 *     size x n, size / n, size. Packets come in rounds of one "zero-latency"
 *     packet (NPU->MA) and n-1 others (MA->NPU); the others are processed
 *     for reduce-scatter, and for all-reduce in odd rounds. The first packet
 *     is released at the start, one more after each of the K receptions;
 *     each release costs the endpoint delay (+ S6 if processed), each send
 *     one network time; the stream ends at the release after the last
 *     reception. So time = E + sum_j T_j + sum_{j=2..K+1} (E + P_j).
 *  S8 HalvingDoubling.cc: n a power of 2, L = log2 n, K = 2L all-reduce,
 *     else L; rounds of 1 + (L-1) packets; all-reduce / reduce-scatter start
 *     at message size/2, partner 1 away, then x2 distance and /2 size per
 *     packet, all-reduce turning back at distance n (n/2, size/n, then /2
 *     distance and x2 size); all-gather starts at size, distance n/2, then
 *     /2 distance and x2 size. A processed packet costs S6 of its own size.
 *  S9 AllToAll.cc ("direct"): the Ring rules with n-1 packets at once, one
 *     to every peer: all-gather / all-to-all / reduce-scatter take
 *     2E + max over peers of T (+ S6 for reduce-scatter); all-reduce waits
 *     for all n-1, sends the second round: 3E + 2 max T + S6.
 *  S10 DoubleBinaryTreeAllReduce.cc, BinaryTree.cc: an all-reduce of the
 *     whole size whatever the phase's op (final size = size); a complete
 *     binary tree numbered in order plus a root holding the last (or first)
 *     position: leaves send after E, a node sends up E + S6 after its last
 *     child's data arrived, the root sends down E + S6 after its child's,
 *     each node sends down E + S6 after its parent's data arrived, leaves end
 *     E after it; every message is the whole size. Needs n a power of 2
 *     (else the tree misses NPUs).
 * Not modelled, refused by name: oneRing / oneDirect / oneHalvingDoubling,
 * direct<window>, EXPLICIT scheduling, model-shared-bus 1 (LogGP), the
 * congestion-aware backend, broadcast / reduce / gather / scatter / barrier
 * (ASTRA-sim's system layer has none). local-reduction-delay is read by
 * ASTRA-sim 2.0 but used in no timing, so it changes nothing here either.
 * A size that is no multiple of the chunk: ASTRA-sim's unsigned loop never
 * ends; here the last chunk counts whole (ceil).
 */
#include "shardsim/trace_astra_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/features.h"
#include "core/json_object.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

/* ---- network file ---- */

static const char *const topo_names[] = {"Ring", "FullyConnected", "Switch"};

/* Items of "key: [a, b]  # comment" into items[] (start, length); -1 malformed. */
static int yml_items(const char *s, size_t n, const char **it, size_t *il, int *ni) {
    const char *e = s + n, *p = memchr(s, '[', n);
    *ni = 0;
    if (!p) return -1;
    p++;
    while (p < e && *p != ']') {
        while (p < e && (*p == ' ' || *p == ',' || *p == '\t')) p++;
        if (p >= e || *p == ']') break;
        const char *q = p;
        while (q < e && *q != ',' && *q != ']' && *q != ' ' && *q != '\t') q++;
        if (*ni == SHS_ASTRA_MAX_DIMS) return -1;
        it[*ni] = p;
        il[(*ni)++] = (size_t)(q - p);
        p = q;
    }
    return p < e && *ni > 0 ? 0 : -1;
}

shs_status_t shs_astra_net_load(const char *path, shs_astra_net_t *out) {
    char *buf;
    size_t len;
    SHS_CHECK(shs__read_file(path, &buf, &len));
    int n[4] = {0, 0, 0, 0}; /* topology, npus_count, bandwidth, latency */
    static const char *const keys[4] = {"topology", "npus_count", "bandwidth", "latency"};
    shs_astra_net_t net = {0};
    long line = 0, key_line[4] = {0, 0, 0, 0};
    shs_status_t st = SHS_OK;
    for (size_t i = 0; i < len && st == SHS_OK;) {
        size_t j = i;
        while (j < len && buf[j] != '\n') j++;
        line++;
        const char *s = buf + i;
        size_t m = j - i;
        i = j + 1;
        const char *hash = memchr(s, '#', m);
        if (hash) m = (size_t)(hash - s);
        while (m && (s[m - 1] == ' ' || s[m - 1] == '\r' || s[m - 1] == '\t')) m--;
        if (m == 0 || s[0] == ' ' || s[0] == '\t') {
            if (m && strspn(s, " \t") < m)
                st = shs_set_error(SHS_PARSE, "%s:%ld: indented line: want top-level 'key: [list]'", path, line);
            continue;
        }
        const char *colon = memchr(s, ':', m);
        int k = -1;
        for (int q = 0; q < 4 && colon; q++)
            if ((size_t)(colon - s) == strlen(keys[q]) && strncmp(s, keys[q], strlen(keys[q])) == 0) k = q;
        if (k < 0) {
            st = shs_set_error(SHS_PARSE, "%s:%ld: unknown key '%.*s' (the analytical network has topology, "
                               "npus_count, bandwidth, latency)", path, line, (int)(colon ? colon - s : (long)m), s);
            continue;
        }
        if (key_line[k]) {
            st = shs_set_error(SHS_PARSE, "%s:%ld: key '%s' given twice (first at line %ld)", path, line, keys[k],
                               key_line[k]);
            continue;
        }
        key_line[k] = line;
        const char *it[SHS_ASTRA_MAX_DIMS];
        size_t il[SHS_ASTRA_MAX_DIMS];
        if (yml_items(colon, m - (size_t)(colon - s), it, il, &n[k])) {
            st = shs_set_error(SHS_PARSE, "%s:%ld: %s: want a list of 1 to %d entries in [ ]", path, line, keys[k],
                               SHS_ASTRA_MAX_DIMS);
            continue;
        }
        for (int d = 0; d < n[k] && st == SHS_OK; d++) {
            double v = 0;
            if (k == 0) {
                int found = -1;
                for (int q = 0; q < 3; q++)
                    if (il[d] == strlen(topo_names[q]) && strncmp(it[d], topo_names[q], il[d]) == 0) found = q;
                if (found < 0)
                    st = shs_set_error(SHS_PARSE, "%s:%ld: topology '%.*s' unknown (Ring, FullyConnected, Switch)",
                                       path, line, (int)il[d], it[d]);
                else net.topo[d] = (shs_astra_topo_t)found;
                continue;
            }
            int bad = shs__parse_double(it[d], il[d], &v) != 0;
            if (k == 1) bad = bad || v < 2 || v > SHS_ASTRA_MAX_NPUS || v != floor(v);
            if (k == 2) bad = bad || !(v >= SHS_ASTRA_MIN_BW_GBPS && v <= SHS_ASTRA_MAX_BW_GBPS);
            if (k == 3) bad = bad || !(v >= 0 && v <= SHS_ASTRA_MAX_LAT_NS);
            if (bad)
                st = shs_set_error(SHS_PARSE, "%s:%ld: %s entry %d '%.*s': want %s", path, line, keys[k], d + 1,
                                   (int)il[d], it[d],
                                   k == 1 ? "an integer in 2..1048576"
                                   : k == 2 ? "GB/s in 1e-3..1e6" : "ns in 0..1e9");
            else if (k == 1) net.npus[d] = (int)v;
            else if (k == 2) net.bw_gbps[d] = v;
            else net.lat_ns[d] = v;
        }
    }
    free(buf);
    if (st != SHS_OK) return st;
    if (!key_line[0] && !key_line[1] && !key_line[2] && !key_line[3])
        return shs_set_error(SHS_PARSE, "%s: no topology/npus_count/bandwidth/latency keys (not an ASTRA-sim "
                             "analytical network file?)", path);
    for (int k = 0; k < 4; k++)
        if (n[k] == 0 || n[k] != n[0])
            return shs_set_error(SHS_PARSE, "%s: needs topology, npus_count, bandwidth (GB/s) and latency (ns) lists "
                                 "of one length (%s has %d entries, topology %d)", path, keys[k], n[k], n[0]);
    net.dims = n[0];
    double total = 1;
    for (int d = 0; d < net.dims; d++) total *= net.npus[d];
    if (total > SHS_TRACE_MAX_WORLD)
        return shs_set_error(SHS_PARSE, "%s: %.0f NPUs in all, more than %d", path, total, SHS_TRACE_MAX_WORLD);
    *out = net;
    return SHS_OK;
}

int shs_astra_net_npus(const shs_astra_net_t *net) {
    int p = 1;
    for (int d = 0; d < net->dims; d++) p *= net->npus[d];
    return p;
}

/* ---- system file ---- */

static const char *const impl_names[] = {"ring", "direct", "halvingDoubling", "doubleBinaryTree"};
static const char *const coll_keys[SHS_ASTRA_NUM_COLLS] = {"all-reduce-implementation", "all-gather-implementation",
                                                           "reduce-scatter-implementation", "all-to-all-implementation"};

void shs_astra_sys_default(shs_astra_sys_t *out) {
    *out = (shs_astra_sys_t){0};
    out->endpoint_delay_ns = 10;
    out->active_chunks = 1;
    out->splits = 1;
    out->local_reduction_delay = 1;
}

#ifdef SHS_HAVE_JANSSON
/* number value; 0 ok */
static int num(const json_t *v, double *out) {
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return isfinite(*out) ? 0 : -1;
}

static shs_status_t sys_key(const char *path, const char *key, json_t *v, shs_astra_sys_t *s) {
    double x = 0;
#define BAD(...) shs_set_error(SHS_PARSE, "%s: key \"%s\": " __VA_ARGS__)
    for (int c = 0; c < SHS_ASTRA_NUM_COLLS; c++) {
        if (strcmp(key, coll_keys[c]) != 0) continue;
        if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > SHS_ASTRA_MAX_DIMS)
            return BAD("want a list of 1 to %d implementations, one per dimension", path, key, SHS_ASTRA_MAX_DIMS);
        for (size_t i = 0; i < json_array_size(v); i++) {
            const char *name = json_string_value(json_array_get(v, i));
            int k = -1;
            for (int q = 0; q < 4 && name; q++)
                if (strcmp(name, impl_names[q]) == 0) k = q;
            if (k < 0)
                return BAD("entry %zu '%s' not modelled (ring, direct, halvingDoubling, doubleBinaryTree; oneRing, "
                           "oneDirect, oneHalvingDoubling and direct<window> are not)", path, key, i + 1,
                           name ? name : "(not a string)");
            s->impl[c][i] = (shs_astra_impl_t)k;
        }
        s->nimpl[c] = (int)json_array_size(v);
        return SHS_OK;
    }
    if (strcmp(key, "scheduling-policy") == 0) {
        const char *p = json_string_value(v);
        if (!p || (strcmp(p, "LIFO") && strcmp(p, "FIFO")))
            return BAD("'%s' not modelled (LIFO, FIFO; EXPLICIT is not)", path, key, p ? p : "(not a string)");
        s->lifo = strcmp(p, "LIFO") == 0;
        s->given |= SHS_ASTRA_GIVEN_SCHED;
    } else if (strcmp(key, "collective-optimization") == 0) {
        const char *p = json_string_value(v);
        if (!p || (strcmp(p, "baseline") && strcmp(p, "localBWAware")))
            return BAD("'%s' unknown (baseline, localBWAware)", path, key, p ? p : "(not a string)");
        s->local_bw_aware = strcmp(p, "localBWAware") == 0;
    } else if (strcmp(key, "endpoint-delay") == 0) {
        if (num(v, &x) || x < 0 || x > SHS_ASTRA_MAX_LAT_NS) return BAD("want ns in 0..1e9", path, key);
        s->endpoint_delay_ns = floor(x); /* an int in ASTRA-sim */
    } else if (strcmp(key, "active-chunks-per-dimension") == 0 || strcmp(key, "preferred-dataset-splits") == 0) {
        if (num(v, &x) || x < 1 || x > 65536 || x != floor(x)) return BAD("want an integer in [1, 65536]", path, key);
        *(key[0] == 'a' ? &s->active_chunks : &s->splits) = (int)x;
    } else if (strcmp(key, "local-mem-bw") == 0) {
        if (num(v, &x) || !(x >= SHS_ASTRA_MIN_BW_GBPS && x <= SHS_ASTRA_MAX_BW_GBPS))
            return BAD("want GB/s in 1e-3..1e6", path, key);
        s->local_mem_bw_gbps = x;
    } else if (strcmp(key, "local-reduction-delay") == 0) {
        if (num(v, &x) || x < 0 || x > SHS_ASTRA_MAX_LAT_NS) return BAD("want a number in 0..1e9", path, key);
        s->local_reduction_delay = x;
        s->given |= SHS_ASTRA_GIVEN_LRD;
    } else if (strcmp(key, "peak-perf") == 0) {
        if (num(v, &x) || x < 0 || x > 1e6) return BAD("want TFLOPS in 0..1e6", path, key);
        s->peak_perf_tflops = x;
        s->given |= SHS_ASTRA_GIVEN_PEAK;
    } else if (strcmp(key, "roofline-enabled") == 0 || strcmp(key, "boost-mode") == 0 ||
               strcmp(key, "trace-enabled") == 0 || strcmp(key, "replay-only") == 0) {
        if (num(v, &x) || (x != 0 && x != 1)) return BAD("want 0 or 1", path, key);
    } else if (strcmp(key, "model-shared-bus") == 0 || strcmp(key, "L") == 0 || strcmp(key, "o") == 0 ||
               strcmp(key, "g") == 0 || strcmp(key, "G") == 0) {
        if (num(v, &x) || x != 0)
            return BAD("only 0 is modelled (ASTRA-sim's LogGP shared-bus model is not)", path, key);
    } else {
        return shs_set_error(SHS_PARSE, "%s: unknown key \"%s\" (see shardsim replay --help for the system keys)",
                             path, key);
    }
#undef BAD
    return SHS_OK;
}
#endif

shs_status_t shs_astra_sys_load(const char *path, shs_astra_sys_t *out) {
#ifndef SHS_HAVE_JANSSON
    (void)out;
    return shs_set_error(SHS_UNSUPPORTED, "%s: reading an ASTRA-sim system JSON %s", path,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
#else
    json_t *root;
    shs_status_t st = shs__json_object_load(path, "system keys", &root);
    SHS_CHECK(st);
    shs_astra_sys_t s;
    shs_astra_sys_default(&s);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        st = sys_key(path, key, v, &s);
        if (st != SHS_OK) break;
    }
    json_decref(root);
    if (st != SHS_OK) return st;
    snprintf(s.path, sizeof s.path, "%s", path);
    *out = s;
    return SHS_OK;
#endif
}

/* ---- timing ---- */

static int hops(const shs_astra_net_t *net, int d, int dist) {
    int n = net->npus[d];
    dist = ((dist % n) + n) % n;
    if (net->topo[d] == SHS_ASTRA_TOPO_SWITCH) return 2;
    if (net->topo[d] == SHS_ASTRA_TOPO_FULLY_CONNECTED) return 1;
    return dist < n - dist ? dist : n - dist; /* N3 */
}

/* N1, N2: one send of `bytes` over `h` hops of dimension d, whole ns */
static double send_ns(const shs_astra_net_t *net, int d, int h, uint64_t bytes) {
    double bpns = net->bw_gbps[d] * 1073741824.0 / 1e9;
    return floor(h * net->lat_ns[d] + (double)bytes / bpns);
}

/* S6: local processing of a received packet */
static double proc_ns(const shs_astra_sys_t *s, uint64_t bytes) {
    if (s->local_mem_bw_gbps <= 0) return 0;
    double one = floor((double)bytes / (s->local_mem_bw_gbps * 1e9) * 1e9);
    return 3 * one;
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* DBT subtree over in-order positions [a, b]: the time its root sends up (S10) */
static double dbt_up(const shs_astra_net_t *net, const shs_astra_sys_t *s, int d, int a, int b, uint64_t D) {
    double E = s->endpoint_delay_ns;
    if (a == b) return E;
    int m = (a + b) / 2, lm = (a + m - 1) / 2, rm = (m + 1 + b) / 2;
    double tl = dbt_up(net, s, d, a, m - 1, D) + send_ns(net, d, hops(net, d, m - lm), D);
    double tr = dbt_up(net, s, d, m + 1, b, D) + send_ns(net, d, hops(net, d, rm - m), D);
    return (tl > tr ? tl : tr) + E + proc_ns(s, D);
}

/* DBT subtree [a, b] whose root receives from above at `arrive`: latest end */
static double dbt_down(const shs_astra_net_t *net, const shs_astra_sys_t *s, int d, int a, int b, uint64_t D,
                       double arrive) {
    double E = s->endpoint_delay_ns;
    if (a == b) return arrive + E;
    int m = (a + b) / 2, lm = (a + m - 1) / 2, rm = (m + 1 + b) / 2;
    double sent = arrive + E + proc_ns(s, D);
    double l = dbt_down(net, s, d, a, m - 1, D, sent + send_ns(net, d, hops(net, d, m - lm), D));
    double r = dbt_down(net, s, d, m + 1, b, D, sent + send_ns(net, d, hops(net, d, rm - m), D));
    double e = l > r ? l : r;
    return e > sent ? e : sent;
}

/* One phase of one chunk on dimension d: ns, and the data it leaves. */
static shs_status_t phase_ns(const shs_astra_net_t *net, const shs_astra_sys_t *s, shs_astra_impl_t impl,
                             shs_astra_coll_t c, int d, uint64_t data, double *ns, uint64_t *final) {
    int n = net->npus[d];
    double E = s->endpoint_delay_ns;
    uint64_t un = (uint64_t)n;
    *final = c == SHS_ASTRA_AG ? data * un : c == SHS_ASTRA_RS ? data / un : data;
    if (impl == SHS_ASTRA_DOUBLE_BINARY_TREE) { /* S10 */
        if (!is_pow2(n))
            return shs_set_error(SHS_INVALID_ARG, "doubleBinaryTree on dimension %d of %d NPUs: ASTRA-sim's tree "
                                 "covers only a power of 2", d + 1, n);
        *final = data;
        int root = n - 1, top = (0 + n - 2) / 2;
        double up = dbt_up(net, s, d, 0, n - 2, data) + send_ns(net, d, hops(net, d, root - top), data);
        double sent = up + E + proc_ns(s, data);
        double end = dbt_down(net, s, d, 0, n - 2, data, sent + send_ns(net, d, hops(net, d, root - top), data));
        *ns = end > sent ? end : sent;
        return SHS_OK;
    }
    uint64_t msg = c == SHS_ASTRA_AG ? data : data / un;
    if (impl == SHS_ASTRA_DIRECT) { /* S9 */
        double maxT = 0;
        for (int k = 1; k < n; k++) {
            double t = send_ns(net, d, hops(net, d, k), msg);
            if (t > maxT) maxT = t;
        }
        *ns = c == SHS_ASTRA_AR ? 3 * E + 2 * maxT + proc_ns(s, msg)
                                : 2 * E + maxT + (c == SHS_ASTRA_RS ? proc_ns(s, msg) : 0);
        return SHS_OK;
    }
    /* S7 ring, S8 halving-doubling: the packet rounds */
    int hd = impl == SHS_ASTRA_HALVING_DOUBLING, L = 0;
    if (hd) {
        if (!is_pow2(n))
            return shs_set_error(SHS_INVALID_ARG, "halvingDoubling on dimension %d of %d NPUs: needs a power of 2",
                                 d + 1, n);
        if (c == SHS_ASTRA_A2A)
            return shs_set_error(SHS_INVALID_ARG, "halvingDoubling has no all-to-all in ASTRA-sim");
        while ((1 << L) < n) L++;
    }
    int64_t K = hd ? (c == SHS_ASTRA_AR ? 2 * L : L)
                   : c == SHS_ASTRA_AR ? 2 * (int64_t)(n - 1) : c == SHS_ASTRA_A2A ? (int64_t)n * (n - 1) / 2 : n - 1;
    int per_round = hd ? L - 1 : n - 1;
    double mult = 2, off = 1;
    uint64_t m = msg;
    if (hd) {
        if (c == SHS_ASTRA_AG) { m = data; off = n / 2; mult = 0.5; }
        else m = data / 2;
    }
    int zero = 0, nonzero = 0, toggle = 0;
    double t = E; /* the first packet's release */
    for (int64_t j = 1; j <= K + 1; j++) {
        uint64_t size = m;
        int dist = (int)off;
        if (zero == 0 && nonzero == 0) { zero = 1; nonzero = per_round; toggle = !toggle; }
        int processed = 0;
        if (zero > 0) zero--;
        else {
            processed = c == SHS_ASTRA_RS || (c == SHS_ASTRA_AR && toggle);
            nonzero--;
        }
        if (j >= 2) t += E + (processed ? proc_ns(s, size) : 0); /* the release after reception j-1 */
        if (j <= K) t += send_ns(net, d, hops(net, d, hd ? dist : 1), size);
        if (hd) { /* process_max_count's update after the release */
            off = (double)(int)(off * mult);
            m = (uint64_t)((double)m / mult);
            if ((int)off == n && c == SHS_ASTRA_AR) {
                mult = 0.5;
                off = (double)(int)(off * mult);
                m = (uint64_t)((double)m / mult);
            }
        }
    }
    *ns = t;
    return SHS_OK;
}

typedef struct {
    int phase;
    double end;   /* running: when its phase ends */
    int running;
} chunk_t;

/* S4: chunks through the phases' queues, at most `active` running per queue */
static double schedule(int nchunks, int nph, const int *qdim, const double *dur, int active, int dims) {
    if (nph == 1) return ceil((double)nchunks / active) * dur[0];
    chunk_t *ck = calloc((size_t)nchunks, sizeof *ck);
    int *wait = malloc((size_t)dims * (size_t)nchunks * sizeof *wait); /* FIFO per queue */
    int head[SHS_ASTRA_MAX_DIMS] = {0}, tail[SHS_ASTRA_MAX_DIMS] = {0}, run[SHS_ASTRA_MAX_DIMS] = {0};
    if (!ck || !wait) {
        free(ck);
        free(wait);
        return NAN;
    }
#define START(q, now)                                                                                 \
    while (run[q] < active && head[q] < tail[q]) {                                                    \
        int c_ = wait[(q) * nchunks + head[q]++];                                                     \
        ck[c_].running = 1;                                                                           \
        ck[c_].end = (now) + dur[ck[c_].phase];                                                       \
        run[q]++;                                                                                     \
    }
    for (int c = 0; c < nchunks; c++) wait[qdim[0] * nchunks + tail[qdim[0]]++] = c;
    START(qdim[0], 0.0);
    double last = 0;
    for (int left = nchunks; left > 0;) {
        int best = -1;
        for (int c = 0; c < nchunks; c++)
            if (ck[c].running && (best < 0 || ck[c].end < ck[best].end)) best = c;
        if (best < 0) break;
        double now = ck[best].end;
        int q = qdim[ck[best].phase];
        ck[best].running = 0;
        run[q]--;
        ck[best].phase++;
        if (ck[best].phase < nph) wait[qdim[ck[best].phase] * nchunks + tail[qdim[ck[best].phase]]++] = best;
        else { left--; last = now; }
        START(q, now);
        if (ck[best].phase < nph) START(qdim[ck[best].phase], now);
    }
#undef START
    free(ck);
    free(wait);
    return last;
}

shs_status_t shs_astra_coll_ns(const shs_astra_net_t *net, const shs_astra_sys_t *s, shs_astra_coll_t c,
                               uint64_t bytes, const int *involved, double *ns) {
    *ns = 0;
    for (int k = 0; k < SHS_ASTRA_NUM_COLLS; k++)
        if (s->nimpl[k] && s->nimpl[k] != net->dims)
            return shs_set_error(SHS_INVALID_ARG, "%s: %s lists %d implementation%s, the network has %d dimension%s",
                                 s->path, coll_keys[k], s->nimpl[k], s->nimpl[k] == 1 ? "" : "s", net->dims,
                                 net->dims == 1 ? "" : "s");
    /* S2 */
    uint64_t size = bytes, total = (uint64_t)shs_astra_net_npus(net), chunk = size / (uint64_t)s->splits;
    if (c != SHS_ASTRA_AG && total > chunk) {
        chunk = total;
        size = (uint64_t)s->splits * chunk;
    }
    if (chunk == 0) return SHS_OK; /* an all-gather of nothing */
    uint64_t nchunks = (size + chunk - 1) / chunk;
    if (nchunks > 65536) return shs_set_error(SHS_INVALID_ARG, "%llu chunks: more than 65536", (unsigned long long)nchunks);
    /* S3: the phases of one chunk */
    int order[SHS_ASTRA_MAX_DIMS], nd = 0;
    for (int d = 0; d < net->dims; d++) {
        int dd = c == SHS_ASTRA_AG ? net->dims - 1 - d : d;
        if (!involved || involved[dd]) order[nd++] = dd;
    }
    if (nd == 0) return SHS_OK;
    int qdim[2 * SHS_ASTRA_MAX_DIMS];
    shs_astra_coll_t pc[2 * SHS_ASTRA_MAX_DIMS];
    int nph = 0;
    if (c == SHS_ASTRA_AR && s->local_bw_aware) {
        for (int k = 0; k < nd - 1; k++) { qdim[nph] = order[k]; pc[nph++] = SHS_ASTRA_RS; }
        qdim[nph] = order[nd - 1];
        pc[nph++] = SHS_ASTRA_AR;
        for (int k = nd - 2; k >= 0; k--) { qdim[nph] = order[k]; pc[nph++] = SHS_ASTRA_AG; }
    } else {
        for (int k = 0; k < nd; k++) { qdim[nph] = order[k]; pc[nph++] = c; }
    }
    double dur[2 * SHS_ASTRA_MAX_DIMS];
    uint64_t data = chunk;
    for (int p = 0; p < nph; p++) {
        shs_astra_impl_t impl = s->nimpl[c] ? s->impl[c][qdim[p]] : SHS_ASTRA_RING;
        SHS_CHECK(phase_ns(net, s, impl, pc[p], qdim[p], data, &dur[p], &data));
    }
    *ns = schedule((int)nchunks, nph, qdim, dur, s->active_chunks, net->dims);
    if (isnan(*ns)) return shs_set_error(SHS_HOST_OOM, "ASTRA-sim chunk schedule of %llu chunks",
                                         (unsigned long long)nchunks);
    return SHS_OK;
}

static void address(const shs_astra_net_t *net, int id, int *a) {
    for (int d = 0; d < net->dims; d++) {
        a[d] = id % net->npus[d];
        id /= net->npus[d];
    }
}

double shs_astra_p2p_ns(const shs_astra_net_t *net, int src, int dst, uint64_t bytes) {
    int a[SHS_ASTRA_MAX_DIMS], b[SHS_ASTRA_MAX_DIMS];
    address(net, src, a);
    address(net, dst, b);
    for (int d = 0; d < net->dims; d++)
        if (a[d] != b[d]) return send_ns(net, d, hops(net, d, b[d] - a[d]), bytes);
    return 0;
}

static int coll_of(shs_coll_op_t op, shs_astra_coll_t *c) {
    switch (op) {
    case SHS_OP_ALL_REDUCE: *c = SHS_ASTRA_AR; return 0;
    case SHS_OP_ALL_GATHER: *c = SHS_ASTRA_AG; return 0;
    case SHS_OP_REDUCE_SCATTER: *c = SHS_ASTRA_RS; return 0;
    case SHS_OP_ALL_TO_ALL: *c = SHS_ASTRA_A2A; return 0;
    default: return -1;
    }
}

/* The dimensions comm c's ranks span; -1 when they are not whole dimensions. */
static int comm_dims(const shs_astra_net_t *net, const shs_trace_comm_t *cm, int *inv) {
    int a0[SHS_ASTRA_MAX_DIMS], a[SHS_ASTRA_MAX_DIMS];
    memset(inv, 0, sizeof(int) * SHS_ASTRA_MAX_DIMS);
    address(net, cm->ranks[0], a0);
    for (int k = 1; k < cm->size; k++) {
        address(net, cm->ranks[k], a);
        for (int d = 0; d < net->dims; d++) inv[d] |= a[d] != a0[d];
    }
    long p = 1;
    for (int d = 0; d < net->dims; d++)
        if (inv[d]) p *= net->npus[d];
    return p == cm->size ? 0 : -1;
}

static uint64_t astra_bytes(const shs_trace_t *t, const shs_trace_rec_t *r) {
    return shs_trace_rec_bytes(t, r, r->op == SHS_OP_REDUCE_SCATTER ? SHS_BYTES_TOTAL : SHS_BYTES_PER_RANK);
}

shs_status_t shs_astra_check_trace(const shs_astra_net_t *net, const shs_astra_sys_t *sys, const shs_trace_t *t) {
    int npus = shs_astra_net_npus(net);
    if (t->world > npus)
        return shs_set_error(SHS_INVALID_ARG, "the trace has %d ranks, the network only %d NPUs (product of "
                             "npus_count)", t->world, npus);
    for (int c = 0; c < t->ncomms; c++) {
        int inv[SHS_ASTRA_MAX_DIMS];
        if (t->comms[c].size > 1 && comm_dims(net, &t->comms[c], inv))
            return shs_set_error(SHS_INVALID_ARG, "comm %s: its %d ranks do not fill whole dimensions of the network "
                                 "(ASTRA-sim runs a collective over whole dimensions)", t->comms[c].name,
                                 t->comms[c].size);
    }
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            shs_astra_coll_t c;
            if (x->op == SHS_OP_SEND || x->op == SHS_OP_RECV || x->op == SHS_OP_WAIT) continue;
            if (coll_of(x->op, &c))
                return shs_set_error(SHS_INVALID_ARG, "rank %d comm %s seq %lld: ASTRA-sim's system layer has no %s "
                                     "(all_reduce, all_gather, reduce_scatter, all_to_all, send/recv)", r,
                                     t->comms[x->comm].name, (long long)x->seq, shs_coll_op_name(x->op));
            double ns;
            int inv[SHS_ASTRA_MAX_DIMS];
            if (t->comms[x->comm].size > 1) {
                comm_dims(net, &t->comms[x->comm], inv);
                if (shs_astra_coll_ns(net, sys, c, astra_bytes(t, x), inv, &ns) != SHS_OK)
                    return shs_set_error(SHS_INVALID_ARG, "rank %d comm %s seq %lld %s: %s", r,
                                         t->comms[x->comm].name, (long long)x->seq, shs_coll_op_name(x->op),
                                         shs_last_error());
            }
        }
    return SHS_OK;
}

double shs_astra_rec_time(const shs_astra_net_t *net, const shs_astra_sys_t *sys, const shs_trace_t *t,
                          const shs_trace_rec_t *r) {
    if (r->op == SHS_OP_WAIT) return 0;
    if (r->op == SHS_OP_SEND || r->op == SHS_OP_RECV)
        return shs_astra_p2p_ns(net, r->op == SHS_OP_SEND ? r->rank : r->peer, r->op == SHS_OP_SEND ? r->peer : r->rank,
                                shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK)) * 1e-9;
    shs_astra_coll_t c;
    const shs_trace_comm_t *cm = &t->comms[r->comm];
    if (coll_of(r->op, &c)) return NAN;
    if (cm->size <= 1) return 0;
    int inv[SHS_ASTRA_MAX_DIMS];
    double ns;
    if (comm_dims(net, cm, inv) || shs_astra_coll_ns(net, sys, c, astra_bytes(t, r), inv, &ns) != SHS_OK) return NAN;
    return ns * 1e-9;
}
