/* nccl_model.c - one collective priced by NCCL's tuning model, and NCCL's
 * choice of algorithm and protocol (nccl_model.h; the constants in
 * nccl_tables.c, the formulas of NCCL 2.20.3 src/graph/tuning.cc as the
 * header states them).
 * What it is not: the topology search (its results are inputs), the
 * alpha-beta model replay uses (net_alpha_beta.c).
 */
#include "shardsim/nccl_model.h"

#include "core/names.h"
#include "net/nccl_tables.h"

#define PROTO_NAME(id, name) name,
static const char *const proto_names[] = {SHS_NCCL_PROTO_MAP(PROTO_NAME)};
#undef PROTO_NAME

const char *shs_nccl_proto_name(shs_nccl_proto_t p) {
    return shs__name_of(proto_names, SHS_NUM_PROTOS, (int)p, "invalid");
}

int shs_nccl_proto_parse(const char *name, shs_nccl_proto_t *out) {
    int k = shs__name_find(proto_names, SHS_NUM_PROTOS, name);
    if (k >= 0) *out = (shs_nccl_proto_t)k;
    return k >= 0 ? 0 : -1;
}

/* floor(log2 x), 0 for x < 2: NCCL's log2i */
static int log2i(double x) {
    int l = 0;
    while (x >= 2) {
        x /= 2;
        l++;
    }
    return l;
}

static double min2(double a, double b) { return a < b ? a : b; }
static double max2(double a, double b) { return a > b ? a : b; }

/* the graph a call of p ranks per node runs on: channels and GB/s per channel */
static void graph(const shs_nccl_topo_t *t, int nodes, int p, int *channels, double *bw) {
    if (nodes == 1) {
        *channels = t->channels_intra;
        *bw = t->bw_intra;
        return;
    }
    int rails = p < t->nics_per_node ? p : t->nics_per_node;
    if (rails < 1) rails = 1;
    *channels = 2 * rails; /* one ring per NIC, doubled by ncclTopoPostset (bandwidth halved) */
    *bw = t->nic_gbs / 2;
}

int shs_nccl_time(const shs_nccl_topo_t *t, shs_coll_op_t op, shs_net_algo_t algo, shs_nccl_proto_t proto, double S,
                  int n, int nodes, shs_nccl_cost_t *out) {
    if (algo != SHS_ALGO_RING && algo != SHS_ALGO_TREE) return -1;
    if ((int)proto < 0 || proto >= SHS_NUM_PROTOS) return -1;
    if (proto == SHS_PROTO_LL128 && !t->ll128) return -1;
    int ar = op == SHS_OP_ALL_REDUCE || op == SHS_OP_BARRIER, ag_rs = op == SHS_OP_ALL_GATHER || op == SHS_OP_REDUCE_SCATTER;
    int rooted = op == SHS_OP_BROADCAST || op == SHS_OP_REDUCE;
    int p2p = !ar && !ag_rs && !rooted; /* all_to_all, gather, scatter, send, recv: no term in the tuning model */
    if (algo == SHS_ALGO_TREE && !ar) return -1;
    if (p2p && (algo != SHS_ALGO_RING || proto != SHS_PROTO_SIMPLE)) return -1;
    if (op == SHS_OP_BARRIER) S = 0;
    if (nodes < 1) nodes = 1;
    if (nodes > n) nodes = n;
    int ppn = n / nodes > 0 ? n / nodes : 1;
    int a = algo == SHS_ALGO_TREE ? SHS__NCCL_TREE : SHS__NCCL_RING;
    int cc = t->arch >= 90 ? SHS__NCCL_HOPPER : t->arch >= 80 ? SHS__NCCL_AMPERE : SHS__NCCL_VOLTA;
    int idx2 = nodes <= 2 ? nodes - 1 : 2, idx1 = nodes == 1 ? cc : t->cpu_amd ? 1 : 0;
    int channels;
    double bw;
    graph(t, nodes, ppn, &channels, &bw);
    *out = (shs_nccl_cost_t){.channels = channels, .algo = algo, .proto = proto};
    if (n <= 1) return 0;
    double ll_max = shs__nccl_ll_max_bw[idx1][idx2];
    double bus = channels * bw;
    if (a == SHS__NCCL_RING && proto == SHS_PROTO_LL)
        bus = min2(ll_max, bus * (nodes > 1 || ar || op == SHS_OP_REDUCE ? 1.0 / 4.0 : 1.0 / 3.0));
    if (a == SHS__NCCL_RING && proto == SHS_PROTO_LL128)
        bus = min2(bus * (n < 2 * nodes ? 0.7 : 0.92), channels * shs__nccl_ring_ll128_max_bw[cc][idx2]);
    if (a == SHS__NCCL_TREE) bus = min2(bus * .92, channels * shs__nccl_tree_max_bw[cc][idx2]);
    if (a == SHS__NCCL_TREE && proto == SHS_PROTO_LL) bus = min2(bus / 3.8, ll_max);
    if (a == SHS__NCCL_TREE && proto == SHS_PROTO_LL128)
        bus = min2(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), channels * shs__nccl_tree_ll128_max_bw[cc][idx2]);
    int nsteps = ar ? 2 * (n - 1) : ag_rs ? n - 1 : n;
    int inter = nodes == 1 ? 0 : ar ? 2 * nodes : ag_rs ? nodes - 1 : nodes;
    if (inter > nsteps) inter = nsteps;
    double alg = bus * (a == SHS__NCCL_RING ? (double)n / nsteps : 0.5);
    int hw_intra = t->intra_pci ? SHS__NCCL_HW_PCI : SHS__NCCL_HW_NVLINK;
    double intra_lat = shs__nccl_hw_lat[hw_intra][a][proto], inter_lat = shs__nccl_hw_lat[SHS__NCCL_HW_NET][a][proto];
    double lat = shs__nccl_base_lat[a][proto];
    if (a == SHS__NCCL_RING && (rooted || p2p)) {
        lat += nodes == 1 ? intra_lat : inter_lat; /* rings sharing channels: one hop's latency */
    } else if (a == SHS__NCCL_RING) {
        double overhead = nodes > 1 ? (t->cpu_amd ? 2e-6 : 1e-6) * (proto == SHS_PROTO_SIMPLE ? 3 : 1) : 0;
        lat += (nsteps - inter) * max2(intra_lat, overhead) + inter * inter_lat;
    } else {
        lat += 2 * ((ppn - 1) * intra_lat + log2i(nodes) * inter_lat);
    }
    /* ncclTopoGetAlgoTime */
    int log_size = log2i(S / 64);
    if (a == SHS__NCCL_TREE && log_size < 23) alg *= shs__nccl_tree_correction[proto][log_size];
    if (a == SHS__NCCL_RING && proto == SHS_PROTO_SIMPLE && nodes > 1 && ar && S / ((double)channels * n) >= 64)
        lat *= t->arch >= 80 ? 1.4 : 1.9;
    double bytes = op == SHS_OP_ALL_TO_ALL || op == SHS_OP_ALL_TO_ALLV ? S * (n - 1) / n : S;
    if (p2p) alg = bus; /* moved bytes over the bus bandwidth */
    out->latency_s = lat;
    out->algbw = alg * 1e9;
    out->time_s = lat + bytes / out->algbw;
    return 0;
}

int shs_nccl_best(const shs_nccl_topo_t *t, shs_coll_op_t op, shs_net_algo_t algo, shs_nccl_proto_t proto, double S,
                  int n, int nodes, shs_nccl_cost_t *out) {
    int found = 0;
    for (int a = SHS_ALGO_RING; a <= SHS_ALGO_TREE; a++) {
        if (algo != SHS_NUM_ALGOS && a != (int)algo) continue;
        for (int p = 0; p < SHS_NUM_PROTOS; p++) {
            if (proto != SHS_NUM_PROTOS && p != (int)proto) continue;
            shs_nccl_cost_t c;
            if (shs_nccl_time(t, op, (shs_net_algo_t)a, (shs_nccl_proto_t)p, S, n, nodes, &c) != 0) continue;
            if (!found || c.time_s < out->time_s) *out = c;
            found = 1;
        }
    }
    return found ? 0 : -1;
}
