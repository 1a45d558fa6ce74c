/* nccl_model.h - the time of one collective as NCCL prices it: the tuning
 * model of NCCL 2.20.3 (src/graph/tuning.cc, ncclTopoTuneModel and
 * ncclTopoGetAlgoTime), per algorithm (ring, tree) and protocol (LL,
 * LL128, Simple), on a topology of nodes joined by NICs, and NCCL's choice:
 * the algorithm and protocol of least time.
 *
 * What it is, per (collective, algorithm, protocol), n ranks on `nodes`
 * nodes, p = n / nodes ranks per node, S bytes (the whole buffer: NCCL's
 * nBytes, an all-gather's or reduce-scatter's n x per-rank count):
 *   graph    one node: channels_intra channels of bw_intra GB/s; several
 *            nodes: 2 x min(p, nics_per_node) channels (one ring per NIC,
 *            doubled by ncclTopoPostset) of nic_gbs / 2 each
 *   busBw    channels x bw; ring LL x 1/4 (several nodes, all-reduce,
 *            reduce) else 1/3, capped at llMaxBw; ring LL128 x 0.92 (0.7
 *            below 2 ranks per node), capped at channels x
 *            perChMaxRingLL128Bw; tree x 0.92 capped at channels x
 *            perChMaxTreeBw, then LL / 3.8 capped at llMaxBw, LL128 x 7/9
 *            (one node) or 120/128 capped at channels x
 *            perChMaxTreeLL128Bw
 *   algBw    ring busBw x n / nsteps, tree busBw / 2; the tree's x
 *            treeCorrectionFactor[proto][log2(S / 64)]
 *   latency  baseLat[algo][proto] + ring: (nsteps - nInterSteps) x
 *            max(hwLat[intra], netOverhead) + nInterSteps x hwLat[NET]
 *            (nsteps 2(n-1) all-reduce, n-1 all-gather / reduce-scatter;
 *            nInterSteps 2 nodes (capped at nsteps) resp. nodes - 1, 0 on one
 *            node; netOverhead 1 us (Intel) or 2 us (AMD), x 3 for Simple,
 *            on several nodes); broadcast / reduce one hwLat; tree: 2 ((p -
 *            1) hwLat[intra] + floor(log2 nodes) hwLat[NET]); ring Simple
 *            all-reduce on several nodes with S / (channels n) >= 64: x 1.4
 *            (x 1.9 before Ampere), the ring's plateau
 *   time     latency + S / algBw
 * The tables are src/net/nccl_tables.c's. Tree exists for all-reduce only
 * (as in NCCL); LL128 only where enabled (NCCL: NVLink on Volta, Ampere,
 * Hopper). all_to_all and send/recv, which NCCL's tuning model does not
 * price, cost one ring step's latency and S (n-1)/n (all_to_all) or S
 * (send/recv) over the Simple ring's bus bandwidth.
 * What it is not: NVLS, CollNet, PAT; NCCL's topology search itself (the
 * channels and bandwidths are inputs, taken per GPU from what the search
 * yields on the reference node: time/gpu_preset.c); its reduction of
 * channels for small messages; congestion between concurrent calls.
 */
#ifndef SHARDSIM_NCCL_MODEL_H
#define SHARDSIM_NCCL_MODEL_H

#include "shardsim/comm.h"
#include "shardsim/net.h"

#define SHS_NCCL_PROTO_MAP(X) X(LL, "ll") X(LL128, "ll128") X(SIMPLE, "simple")
typedef enum {
#define SHS_NCCL_PROTO_ENUM(id, name) SHS_PROTO_##id,
    SHS_NCCL_PROTO_MAP(SHS_NCCL_PROTO_ENUM)
#undef SHS_NCCL_PROTO_ENUM
    SHS_NUM_PROTOS
} shs_nccl_proto_t;
const char *shs_nccl_proto_name(shs_nccl_proto_t p);            /* "ll", "ll128", "simple" */
int shs_nccl_proto_parse(const char *name, shs_nccl_proto_t *out); /* 0 ok, -1 unknown */

/* What NCCL's topology search yields on one kind of node. */
typedef struct {
    int arch;                /* compute capability x 10 (70, 80, 90): the rows of the per-channel caps */
    int intra_pci;           /* 0: GPUs of a node joined by NVLink (hwLat's NVLINK row), 1: PCI */
    int channels_intra;      /* channels of a graph within one node (after ncclTopoPostset's doubling) */
    double bw_intra;         /* GB/s (1e9 B/s) per channel within a node */
    int gpus_per_node;
    int nics_per_node;
    double nic_gbs;          /* GB/s of one NIC as NCCL's search rates it (a speedArrayInter entry) */
    int cpu_amd;             /* the CPU rows of llMaxBws and the net overhead: 0 Intel, 1 AMD */
    int ll128;               /* LL128 enabled */
} shs_nccl_topo_t;

/* One priced call. */
typedef struct {
    double time_s;           /* latency + bytes / algbw */
    double latency_s;
    double algbw;            /* bytes/s */
    int channels;            /* channels the call runs on: one CUDA block (one SM) each */
    shs_net_algo_t algo;     /* SHS_ALGO_RING or SHS_ALGO_TREE */
    shs_nccl_proto_t proto;
} shs_nccl_cost_t;

/* The cost of `op` on n ranks over `nodes` nodes (1 <= nodes <= n), S bytes,
 * with algorithm `algo` and protocol `proto`. Returns 0, or -1 (and *out
 * untouched) when NCCL has no such combination (tree for an op other than
 * all-reduce, LL128 disabled, DIRECT). n <= 1 costs 0. */
int shs_nccl_time(const shs_nccl_topo_t *t, shs_coll_op_t op, shs_net_algo_t algo, shs_nccl_proto_t proto, double S,
                  int n, int nodes, shs_nccl_cost_t *out);
/* NCCL's choice: the least time over the algorithms (algo = SHS_NUM_ALGOS:
 * ring and tree; else that one) and protocols (proto = SHS_NUM_PROTOS: all
 * enabled; else that one). Returns 0, or -1 when none is available. */
int shs_nccl_best(const shs_nccl_topo_t *t, shs_coll_op_t op, shs_net_algo_t algo, shs_nccl_proto_t proto, double S,
                  int n, int nodes, shs_nccl_cost_t *out);

#endif
