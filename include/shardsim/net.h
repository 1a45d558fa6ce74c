/* net.h - the network model shared by replay and compare: the time of one
 * collective under an alpha-beta model whose latency terms follow NCCL's
 * own tuning model, named networks, nccl-tests' bus-bandwidth factor.
 *
 * What it is: each call costs a latency (a fixed part per call plus a
 * per-step or per-level part) plus bytes over bandwidth, with S the whole
 * collective buffer (bytes, TOTAL scope), n the communicator's ranks on
 * `nodes` nodes, p = n / nodes ranks per node (integer division, as NCCL),
 * b = intra_bw on one node, else inter_bw (the slowest link bounds it).
 * The latency composition is NCCL's ncclTopoTuneModel for the Simple
 * protocol (NCCL 2.20.3, src/graph/tuning.cc; the constants and what is
 * left out are listed in src/net/net_alpha_beta.c):
 *   ring    steps k = 2(n-1) for all_reduce, n-1 for all_gather,
 *           reduce_scatter (and all_to_all, gather, scatter); k_net =
 *           min(2 nodes, k) resp. nodes-1 of them cross nodes (0 on one
 *           node); latency = base_lat + (k - k_net) intra_lat + k_net
 *           inter_lat; bytes S k / (n b), i.e. busbw = b with nccl-tests'
 *           factors. Broadcast, reduce: base_lat + n hop + S/b (hop =
 *           intra_lat on one node, else inter_lat). Barrier: all_reduce of
 *           0 bytes.
 *   tree    all_reduce: tree_base_lat + 2((p-1) tree_intra_lat +
 *           floor(log2 nodes) tree_inter_lat) + 2 S/b (NCCL's chain within
 *           a node, double binary tree between nodes; algbw = busbw / 2);
 *           barrier: the same with S = 0; other ops as ring (NCCL has no
 *           tree for them).
 *   direct  shardsim's own, not NCCL's: every rank talks to every other at
 *           once, one step per phase: all_reduce base_lat + 2 hop + 2(n-1)S
 *           /(n b); all_gather, reduce_scatter, all_to_all, gather, scatter
 *           base_lat + hop + (n-1)S/(n b); broadcast, reduce base_lat + hop
 *           + (n-1)S/b; barrier base_lat + 2 hop.
 *   send/recv hop + bytes/b (each side; NCCL's tuning model has no p2p
 *           term); wait 0.
 * The figures busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
 * reduce_scatter, all_to_all), 1 (others), algbw = bytes / time, are
 * nccl-tests'.
 * What it is not: a packet or congestion simulator (ASTRA-sim is), nor
 * NCCL's protocol choice (Simple only: small messages cost more than under
 * NCCL's LL); no compute, so exposed time is not modeled.
 */
#ifndef SHARDSIM_NET_H
#define SHARDSIM_NET_H

#include "shardsim/comm.h"
#include "shardsim/trace_astra_model.h" /* the ASTRA-sim network and system a .yml network carries */

#define SHS_NET_ALGO_MAP(X) X(RING, "ring") X(TREE, "tree") X(DIRECT, "direct")
typedef enum {
#define SHS_NET_ALGO_ENUM(id, name) SHS_ALGO_##id,
    SHS_NET_ALGO_MAP(SHS_NET_ALGO_ENUM)
#undef SHS_NET_ALGO_ENUM
    SHS_NUM_ALGOS
} shs_net_algo_t;
const char *shs_net_algo_name(shs_net_algo_t a);            /* "ring", "tree", "direct" */
int shs_net_algo_parse(const char *name, shs_net_algo_t *out); /* 0 ok, -1 unknown */

typedef struct {
    char name[128];
    int gpus_per_node;           /* ranks per node */
    double intra_bw, inter_bw;   /* bytes per second */
    double intra_lat, inter_lat; /* seconds per ring step over the link (NCCL hwLat[link][RING][SIMPLE]) */
    double base_lat;             /* seconds per call, ring and direct (NCCL baseLat[RING][SIMPLE]) */
    double tree_base_lat;        /* seconds per call, tree (NCCL baseLat[TREE][SIMPLE]) */
    double tree_intra_lat, tree_inter_lat; /* seconds per tree level (NCCL hwLat[link][TREE][SIMPLE]) */
    int astra;                   /* 1: loaded from an ASTRA-sim .yml: calls are timed by ASTRA-sim's rules */
    shs_astra_net_t anet;        /* with astra: the network file */
    shs_astra_sys_t asys;        /* with astra: the system (shs_astra_sys_default unless shs_net_set_system) */
} shs_net_t;
/* Presets (GB = 1e9 bytes; latencies NCCL 2.20.3's, src/net/nccl_tables.h):
 * "hgx-h100" (8 GPUs per node, 400 GB/s as ASTRA-sim's HGX-H100-validated,
 * NVLink latencies; between nodes 50 GB/s, network latencies), "pcie" (8 per
 * node, 25 GB/s, PCI latencies; 12.5 GB/s, network latencies), "ring-50"
 * (ASTRA-sim's Ring_*npus: 50 GB/s, 500 ns per step and per level, no
 * per-call latency, one node). Errors: SHS_INVALID_ARG (unknown name). */
shs_status_t shs_net_preset(const char *name, shs_net_t *out);
/* Set the latency fields to NCCL's Simple-protocol ones (base, per ring
 * step, per tree level) for intra-node links over NVLink (pci 0) or PCI
 * (pci 1) and the network between nodes. */
void shs_net_set_nccl_simple_latency(shs_net_t *net, int pci);
/* An ASTRA-sim analytical network YAML (shs_astra_net_load: topology,
 * npus_count, bandwidth in GB/s of 2^30 bytes, latency in ns, per
 * dimension). Sets astra = 1 with the default system, so shs_net_rec_time
 * follows ASTRA-sim's rules (trace_astra_model.h); the alpha-beta fields
 * are filled too (dimension 1 the node, the last dimension between nodes,
 * bandwidth x 2^30, no per-call latency) for shs_net_time.
 * Errors: SHS_IO, SHS_PARSE (file:line). */
shs_status_t shs_net_load(const char *path, shs_net_t *out);
/* Use ASTRA-sim system JSON `path` (shs_astra_sys_load) for a network
 * loaded by shs_net_load. Errors: SHS_INVALID_ARG (a preset: it has no
 * ASTRA-sim system layer), those of shs_astra_sys_load. */
shs_status_t shs_net_set_system(shs_net_t *net, const char *path);

/* Seconds for one call on a communicator of n ranks on `nodes` nodes (1:
 * within one node; below 1 counts as 1), S bytes (TOTAL scope, or the
 * message for send/recv, where nodes > 1 picks the inter-node link).
 * nccl_model.h prices a call as NCCL does, per protocol, on nodes
 * joined by NICs (compare). */
double shs_net_time(const shs_net_t *net, shs_net_algo_t algo, shs_coll_op_t op, double S, int n, int nodes);
/* nccl-tests' bus-bandwidth factor for op on n ranks. */
double shs_net_busbw_factor(shs_coll_op_t op, int n);
#endif
