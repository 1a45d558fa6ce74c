/* net_alpha_beta.c - the alpha-beta time of one collective (net.h) and
 * nccl-tests' bus-bandwidth factor. What it is not: the presets and
 * ASTRA-sim files (net_preset.c), NCCL's protocol model (nccl_model.c), a
 * report (sim/).
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
 * hwLat of 28 us as a stand-in for chunk latency). nccl_model.c prices
 * the protocols and NCCL's choice (compare uses it).
 */
#include "shardsim/net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/nccl_tables.h"

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

double shs_net_time(const shs_net_t *net, shs_net_algo_t algo, shs_coll_op_t op, double S, int n, int nodes) {
    if (nodes < 1) nodes = 1;
    int one_node = nodes == 1;
    double hop = one_node ? net->intra_lat : net->inter_lat, b = one_node ? net->intra_bw : net->inter_bw;
    if (op == SHS_OP_WAIT) return 0;
    if (op == SHS_OP_SEND || op == SHS_OP_RECV) return hop + S / b;
    if (n <= 1) return 0;
    if (op == SHS_OP_BARRIER) { /* an all-reduce of nothing */
        op = SHS_OP_ALL_REDUCE;
        S = 0;
    }
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

