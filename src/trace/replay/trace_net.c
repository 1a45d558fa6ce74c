/* trace_net.c - alpha-beta time model of a trace's calls and ASTRA-sim
 * network files (see trace_net.h). What it is not: a report (sim/).
 *
 * Latency constants: NCCL 2.20.3 (NVIDIA/nccl commit b6475625,
 * makefiles/version.mk 2.20.3), src/graph/tuning.cc, ncclTopoTuneModel,
 * Simple protocol, microseconds:
 *   baseLat[RING][SIMPLE] = 8.4      per call, ring         -> base_lat
 *   baseLat[TREE][SIMPLE] = 0        per call, tree         -> tree_base_lat
 *   hwLat[NVLINK][RING][SIMPLE] = 3.4, hwLat[PCI][RING][SIMPLE] = 5.7,
 *   hwLat[NET][RING][SIMPLE] = 14.0  per ring step          -> intra_lat, inter_lat
 *   hwLat[NVLINK|PCI|NET][TREE][SIMPLE] = 28  per tree level -> tree_*_lat
 * Composition (the same file): ring latency = baseLat + (nsteps -
 * nInterSteps) x intra hwLat + nInterSteps x NET hwLat with nsteps =
 * 2(nRanks-1) for all-reduce, nRanks-1 for all-gather / reduce-scatter,
 * nRanks otherwise, and nInterSteps = 2 nNodes (all-reduce, nNodes > 1),
 * nNodes-1 (all-gather / reduce-scatter), 0 on one node; broadcast / reduce
 * add nsteps x hwLat (or one hwLat when the rings share channels); tree
 * all-reduce latency = baseLat + 2((nRanks/nNodes - 1) intra hwLat +
 * log2i(nNodes) NET hwLat). Bandwidth: NCCL converts the bus bandwidth to
 * algorithm bandwidth by nRanks/nsteps (ring) and 1/2 (tree), the inverse
 * of nccl-tests' busbw factors, so with busbw = the link's bandwidth the
 * byte terms here are nccl-tests'.
 * Deliberately left out (documented, not modeled): the other protocols (LL:
 * baseLat 6.6, NVLink hwLat 0.6 us per step, ring bus bandwidth x 1/4 for
 * all-reduce or multi-node, 1/3 otherwise, capped; LL128: baseLat 14.0,
 * hwLat 1.9, x 0.92 (0.7 at one GPU per node), capped) and NCCL's choice
 * between them, so small messages cost Simple's latency; the tree's bus
 * bandwidth x 0.92 and per-size correction factors; the multi-node ring
 * all-reduce "plateau" latency x 1.4 (sm80+); the per-step network
 * overhead floor (1 us Intel, 2 us AMD, x 3 for Simple) and the
 * topology's latencyInter (0 for the presets here); CollNet, NVLS, PAT.
 * Two simplifications: nInterSteps is capped at nsteps (NCCL 2.20.3's
 * 2 nNodes exceeds 2(nRanks-1) at one GPU per node), and broadcast /
 * reduce take nsteps = nRanks ring steps at the ring's hwLat (NCCL uses
 * one hwLat when its rings share channels, else nsteps x the Tree/Simple
 * hwLat of 28 us as a stand-in for chunk latency).
 *
 * A cluster (nics_per_node > 0, set by estimate.c's GPU presets): a call
 * spanning nodes is priced per level (trace_net.h). The hierarchical
 * all-gather / reduce-scatter is the two-level form of the literature
 * (an inter-node collective among the ranks with the same local index --
 * one per NIC rail -- then an intra-node collective: Jia et al. 2018,
 * "Highly Scalable Deep Learning Training System with Mixed-Precision",
 * §3.3 hierarchical all-reduce; Cho et al. 2019, BlueConnect, its
 * reduce-scatter / all-gather decomposition), the two phases summed (not
 * pipelined). Its bytes are the ring's per level: a rank receives S(r-1)/r
 * over NVLink and S(N-1)/(rN) over its NIC share, so a node's NICs carry
 * S(N-1)/N, as an NCCL ring through the node's r GPUs does with one channel
 * per NIC (nccl-tests then report busbw ~ the node's NIC aggregate). What is
 * left out: congestion in the fabric (a non-blocking fat tree is assumed),
 * NCCL's pipelining of the two levels, SHARP / CollNet.
 */
#include "shardsim/trace_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "trace/trace_util.h"

/* NCCL 2.20.3 src/graph/tuning.cc, Simple protocol (see above), seconds */
#define NCCL_BASE_RING 8.4e-6   /* baseLat[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_BASE_TREE 0.0      /* baseLat[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_NVLINK_RING 3.4e-6 /* hwLat[NCCL_HW_NVLINK][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_PCI_RING 5.7e-6    /* hwLat[NCCL_HW_PCI][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_NET_RING 14.0e-6   /* hwLat[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] */
#define NCCL_HW_TREE 28e-6         /* hwLat[NVLINK, PCI and NET][NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] */

#define ALGO_NAME(id, name) name,
static const char *const algo_names[] = {SHS_NET_ALGO_MAP(ALGO_NAME)};
#undef ALGO_NAME

const char *shs_net_algo_name(shs_net_algo_t a) { return shs__name_of(algo_names, SHS_NUM_ALGOS, (int)a, "invalid"); }

int shs_net_algo_parse(const char *name, shs_net_algo_t *out) {
    int k = shs__name_find(algo_names, SHS_NUM_ALGOS, name);
    if (k >= 0) *out = (shs_net_algo_t)k;
    return k >= 0 ? 0 : -1;
}

shs_status_t shs_net_preset(const char *name, shs_net_t *out) {
    /* bandwidths: ASTRA-sim's HGX-H100-validated.yml (400 GB/s per GPU in a
     * node), 400 Gb/s NDR InfiniBand per GPU (50 GB/s), PCIe Gen4 x16 at
     * ~25 GB/s with 100 Gb/s per GPU between nodes (12.5 GB/s); ring-50 is
     * ASTRA-sim's Ring_*npus.yml (50 GB/s, 500 ns), kept as its link model */
    static const shs_net_t presets[] = {
        {"hgx-h100", 8, 400e9, 50e9, NCCL_HW_NVLINK_RING, NCCL_HW_NET_RING, NCCL_BASE_RING, NCCL_BASE_TREE,
         NCCL_HW_TREE, NCCL_HW_TREE, SHS_NET_NOT_ASTRA},
        {"ring-50", 1 << 30, 50e9, 50e9, 500e-9, 500e-9, 0, 0, 500e-9, 500e-9, SHS_NET_NOT_ASTRA},
        {"pcie", 8, 25e9, 12.5e9, NCCL_HW_PCI_RING, NCCL_HW_NET_RING, NCCL_BASE_RING, NCCL_BASE_TREE, NCCL_HW_TREE,
         NCCL_HW_TREE, SHS_NET_NOT_ASTRA},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i]; return SHS_OK; }
    return shs_set_error(SHS_INVALID_ARG, "unknown network preset '%s' (hgx-h100, ring-50, pcie, or an ASTRA-sim .yml)", name);
}

shs_status_t shs_net_load(const char *path, shs_net_t *out) {
    shs_astra_net_t an;
    SHS_CHECK(shs_astra_net_load(path, &an));
    int last = an.dims - 1;
    *out = (shs_net_t){0};
    snprintf(out->name, sizeof out->name, "%s", path);
    out->astra = 1;
    out->anet = an;
    shs_astra_sys_default(&out->asys);
    out->gpus_per_node = an.dims == 1 ? 1 << 30 : an.npus[0]; /* one dimension: everything on one "node" */
    out->intra_bw = an.bw_gbps[0] * 1073741824.0; /* ASTRA-sim's GB: 2^30 bytes */
    out->intra_lat = an.lat_ns[0] * 1e-9;
    out->inter_bw = an.bw_gbps[last] * 1073741824.0;
    out->inter_lat = an.lat_ns[last] * 1e-9;
    out->tree_intra_lat = out->intra_lat; /* ASTRA-sim's link latency: per step and per level, */
    out->tree_inter_lat = out->inter_lat; /* base latencies 0 */
    return SHS_OK;
}

shs_status_t shs_net_set_system(shs_net_t *net, const char *path) {
    if (!net->astra)
        return shs_set_error(SHS_INVALID_ARG, "--system %s: network %s is a preset; an ASTRA-sim system JSON goes "
                             "with an ASTRA-sim network .yml", path, net->name);
    return shs_astra_sys_load(path, &net->asys);
}

double shs_net_busbw_factor(shs_coll_op_t op, int n) {
    if (n <= 1) return 1.0;
    if (op == SHS_OP_ALL_REDUCE) return 2.0 * (n - 1) / n;
    if (op == SHS_OP_ALL_GATHER || op == SHS_OP_REDUCE_SCATTER || op == SHS_OP_ALL_TO_ALL || op == SHS_OP_ALL_TO_ALLV)
        return (double)(n - 1) / n; /* nccl-tests alltoall.cu: (nranks-1)/nranks */
    return 1.0;
}

/* floor(log2 x) for x >= 1, as NCCL's log2i */
static int log2_floor(int x) {
    int l = 0;
    while (x >>= 1) l++;
    return l;
}

/* A cluster's call across `nodes` nodes by ring: the two-level form (see the
 * header comment), `phases` = 1 (all-gather, reduce-scatter) or 2
 * (all-reduce: reduce-scatter then all-gather). */
static double cluster_ring(const shs_net_t *net, double S, int n, int nodes, double b_net, int phases) {
    int r = n / nodes > 1 ? n / nodes : 1;
    return net->base_lat + phases * ((r - 1) * net->intra_lat + (nodes - 1) * net->inter_lat +
                                     S * (r - 1) / r / net->intra_bw + S * (nodes - 1) / nodes / b_net);
}

double shs_net_time(const shs_net_t *net, shs_net_algo_t algo, shs_coll_op_t op, double S, int n, int nodes) {
    if (nodes < 1) nodes = 1;
    int one_node = nodes == 1, cluster = net->nics_per_node > 0 && !one_node;
    double hop = one_node ? net->intra_lat : net->inter_lat, b = one_node ? net->intra_bw : net->inter_bw;
    /* a cluster: one rank's share of its node's NICs, every rank of the node sending at once */
    double share = cluster ? net->nics_per_node * net->nic_bw / (net->gpus_per_node > 0 ? net->gpus_per_node : 1) : 0;
    if (op == SHS_OP_WAIT) return 0;
    if (op == SHS_OP_SEND || op == SHS_OP_RECV) return hop + S / (cluster ? share : b);
    if (n <= 1) return 0;
    if (op == SHS_OP_BARRIER) { /* an all-reduce of nothing */
        op = SHS_OP_ALL_REDUCE;
        S = 0;
    }
    if (cluster) b = (n / nodes > 1 ? n / nodes : 1) * share; /* B_net: the call's r ranks per node */
    if (cluster && algo == SHS_ALGO_RING &&
        (op == SHS_OP_ALL_GATHER || op == SHS_OP_REDUCE_SCATTER || op == SHS_OP_ALL_REDUCE))
        return cluster_ring(net, S, n, nodes, b, op == SHS_OP_ALL_REDUCE ? 2 : 1);
    double m = n - 1;
    if (algo == SHS_ALGO_TREE && op == SHS_OP_ALL_REDUCE) {
        int per_node = n / nodes > 1 ? n / nodes : 1;
        double lat = net->tree_base_lat +
                     2 * ((per_node - 1) * net->tree_intra_lat + log2_floor(nodes) * net->tree_inter_lat);
        return lat + 2 * S / b;
    }
    if (algo == SHS_ALGO_DIRECT) {
        switch (op) {
        case SHS_OP_ALL_REDUCE: return net->base_lat + 2 * hop + 2 * m * S / (n * b);
        case SHS_OP_BROADCAST: case SHS_OP_REDUCE: return net->base_lat + hop + m * S / b;
        default: return net->base_lat + hop + m * S / (n * b);
        }
    }
    if (op == SHS_OP_BROADCAST || op == SHS_OP_REDUCE) return net->base_lat + n * hop + S / b;
    int all_reduce = op == SHS_OP_ALL_REDUCE;
    int steps = all_reduce ? 2 * (n - 1) : n - 1;
    int net_steps = one_node ? 0 : all_reduce ? 2 * nodes : nodes - 1;
    if (net_steps > steps) net_steps = steps;
    return net->base_lat + (steps - net_steps) * net->intra_lat + net_steps * net->inter_lat + steps * S / (n * b);
}

/* Nodes that the sorted-or-not global ranks sit on (rank / gpus_per_node). */
static int count_nodes(const int *ranks, int n, int gpus_per_node) {
    int nodes = n > 0, sorted = 1;
    for (int k = 1; k < n && sorted; k++) sorted = ranks[k] / gpus_per_node >= ranks[k - 1] / gpus_per_node;
    for (int k = 1; k < n; k++) {
        int node = ranks[k] / gpus_per_node, seen = 0;
        if (sorted) seen = node == ranks[k - 1] / gpus_per_node;
        else
            for (int j = 0; j < k && !seen; j++) seen = ranks[j] / gpus_per_node == node;
        nodes += !seen;
    }
    return nodes;
}

double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r) {
    if (net->astra) return shs_astra_rec_time(&net->anet, &net->asys, t, r);
    const shs_trace_comm_t *cm = &t->comms[r->comm];
    int p2p = shs_coll_op_is_p2p(r->op);
    int nodes = p2p ? 1 + (r->rank / net->gpus_per_node != r->peer / net->gpus_per_node)
                    : count_nodes(cm->ranks, cm->size, net->gpus_per_node);
    double S = (double)shs_trace_rec_bytes(t, r, p2p ? SHS_BYTES_PER_RANK : SHS_BYTES_TOTAL);
    return shs_net_time(net, algo, r->op, S, cm->size, nodes);
}
