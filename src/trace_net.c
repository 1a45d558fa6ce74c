/* trace_net.c - alpha-beta time model of a trace's calls and ASTRA-sim
 * network files (see trace_net.h). What it is not: a report (sim/). */
#include "shardsim/trace_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_util.h"

static const char *const algo_names[SHS_NUM_ALGOS] = {"ring", "tree", "direct"};

const char *shs_net_algo_name(shs_net_algo_t a) { return (int)a >= 0 && a < SHS_NUM_ALGOS ? algo_names[a] : "invalid"; }

int shs_net_algo_parse(const char *name, shs_net_algo_t *out) {
    for (int i = 0; i < SHS_NUM_ALGOS; i++)
        if (strcmp(name, algo_names[i]) == 0) { *out = (shs_net_algo_t)i; return 0; }
    return -1;
}

shs_status_t shs_net_preset(const char *name, shs_net_t *out) {
    static const shs_net_t presets[] = {
        {"hgx-h100", 8, 400e9, 50e9, 936.25e-9, 5e-6},
        {"ring-50", 1 << 30, 50e9, 50e9, 500e-9, 500e-9},
        {"pcie", 8, 25e9, 12.5e9, 2e-6, 10e-6},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i]; return SHS_OK; }
    return shs_set_error(SHS_INVALID_ARG, "unknown network preset '%s' (hgx-h100, ring-50, pcie, or an ASTRA-sim .yml)", name);
}

/* Parse "key: [v1, v2]  # comment" values into vals (up to 4). */
static int yml_list(const char *s, size_t n, double *vals, int *nv) {
    const char *e = s + n, *p = memchr(s, '[', n);
    *nv = 0;
    if (!p) return -1;
    p++;
    while (p < e && *p != ']') {
        while (p < e && (*p == ' ' || *p == ',')) p++;
        if (p >= e || *p == ']') break;
        const char *q = p;
        while (q < e && *q != ',' && *q != ']' && *q != ' ') q++;
        double v;
        if (*nv == 4 || shs__parse_double(p, (size_t)(q - p), &v) || v <= 0) return -1;
        vals[(*nv)++] = v;
        p = q;
    }
    return p < e && *nv > 0 ? 0 : -1;
}

shs_status_t shs_net_load(const char *path, shs_net_t *out) {
    char *buf;
    size_t len;
    SHS_CHECK(shs__read_file(path, &buf, &len));
    double npus[4], bw[4], lat[4];
    int nn = 0, nb = 0, nl = 0;
    long line = 0;
    shs_status_t st = SHS_OK;
    for (size_t i = 0; i < len && st == SHS_OK;) {
        size_t j = i;
        while (j < len && buf[j] != '\n') j++;
        line++;
        const char *s = buf + i;
        size_t n = j - i;
        i = j + 1;
        const char *hash = memchr(s, '#', n);
        if (hash) n = (size_t)(hash - s);
        int bad = 0;
        if (n >= 10 && strncmp(s, "npus_count", 10) == 0) bad = yml_list(s, n, npus, &nn);
        else if (n >= 9 && strncmp(s, "bandwidth", 9) == 0) bad = yml_list(s, n, bw, &nb);
        else if (n >= 7 && strncmp(s, "latency", 7) == 0) bad = yml_list(s, n, lat, &nl);
        if (bad) st = shs_set_error(SHS_PARSE, "%s:%ld: want a list of positive numbers in [ ]", path, line);
    }
    free(buf);
    if (st != SHS_OK) return st;
    if (!nn || !nb || !nl || nn != nb || nn != nl)
        return shs_set_error(SHS_PARSE, "%s: needs npus_count, bandwidth (GB/s) and latency (ns) lists of one length", path);
    *out = (shs_net_t){0};
    snprintf(out->name, sizeof out->name, "%s", path);
    out->gpus_per_node = npus[0] > 1e9 ? 1 << 30 : (int)npus[0];
    out->intra_bw = bw[0] * 1e9;
    out->intra_lat = lat[0] * 1e-9;
    out->inter_bw = (nn > 1 ? bw[1] : bw[0]) * 1e9;
    out->inter_lat = (nn > 1 ? lat[1] : lat[0]) * 1e-9;
    if (nn == 1) out->gpus_per_node = 1 << 30; /* one dimension: everything on one "node" */
    return SHS_OK;
}

double shs_net_busbw_factor(shs_trace_op_t op, int n) {
    if (n <= 1) return 1.0;
    if (op == SHS_TOP_ALL_REDUCE) return 2.0 * (n - 1) / n;
    if (op == SHS_TOP_ALL_GATHER || op == SHS_TOP_REDUCE_SCATTER) return (double)(n - 1) / n;
    return 1.0;
}

double shs_net_time(const shs_net_t *net, shs_net_algo_t algo, shs_trace_op_t op, double S, int n, int spans) {
    double a = spans ? net->inter_lat : net->intra_lat, b = spans ? net->inter_bw : net->intra_bw;
    if (op == SHS_TOP_WAIT) return 0;
    if (op == SHS_TOP_SEND || op == SHS_TOP_RECV) return a + S / b;
    if (n <= 1) return 0;
    double m = n - 1, d = ceil(log2((double)n));
    int reduce_like = op == SHS_TOP_ALL_REDUCE || op == SHS_TOP_BROADCAST || op == SHS_TOP_REDUCE || op == SHS_TOP_BARRIER;
    if (algo == SHS_ALGO_TREE && reduce_like) {
        if (op == SHS_TOP_ALL_REDUCE) return 2 * d * a + 2 * S / b;
        if (op == SHS_TOP_BARRIER) return 2 * d * a;
        return d * a + S / b;
    }
    if (algo == SHS_ALGO_DIRECT) {
        switch (op) {
        case SHS_TOP_ALL_REDUCE: return 2 * (a + m * S / (n * b));
        case SHS_TOP_BROADCAST: case SHS_TOP_REDUCE: return a + m * S / b;
        case SHS_TOP_BARRIER: return 2 * a;
        default: return a + m * S / (n * b);
        }
    }
    switch (op) {
    case SHS_TOP_ALL_REDUCE: return 2 * m * (a + S / (n * b));
    case SHS_TOP_BROADCAST: case SHS_TOP_REDUCE: return m * a + S / b;
    case SHS_TOP_BARRIER: return 2 * m * a;
    default: return m * (a + S / (n * b));
    }
}

double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r) {
    const shs_trace_comm_t *cm = &t->comms[r->comm];
    int spans = 0;
    if (shs_trace_op_is_p2p(r->op)) {
        spans = r->rank / net->gpus_per_node != r->peer / net->gpus_per_node;
    } else {
        for (int k = 1; k < cm->size && !spans; k++) spans = cm->ranks[k] / net->gpus_per_node != cm->ranks[0] / net->gpus_per_node;
    }
    double S = (double)shs_trace_rec_bytes(t, r, shs_trace_op_is_p2p(r->op) ? SHS_BYTES_PER_RANK : SHS_BYTES_TOTAL);
    return shs_net_time(net, algo, r->op, S, cm->size, spans);
}
