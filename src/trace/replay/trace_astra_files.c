/* trace_astra_files.c - ASTRA-sim's analytical network YAML and system JSON
 * (see trace_astra_model.h for the keys, bounds and errors).
 * What it is not: the timing (trace_astra_model.c). */
#include "shardsim/trace_astra_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/features.h"
#include "core/json_object.h"
#include "trace/replay/trace_astra_files.h"
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
    for (int d = 0; d < net.dims; d++) {
        net.phys[d] = d;
        net.span[d] = net.npus[d];
        net.stride[d] = 1;
    }
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
const char *const shs__astra_coll_keys[SHS_ASTRA_NUM_COLLS] = {"all-reduce-implementation", "all-gather-implementation",
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
        if (strcmp(key, shs__astra_coll_keys[c]) != 0) continue;
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

