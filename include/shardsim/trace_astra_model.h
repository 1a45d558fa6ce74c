/* trace_astra_model.h - ASTRA-sim's analytical (congestion-unaware) network
 * and its system layer's collective timing, for `replay --network NET.yml
 * [--system SYS.json]`.
 *
 * What it is: the network file (topology, npus_count, bandwidth in GB/s with
 * 1 GB = 2^30 bytes, latency in ns, one entry per dimension), the system
 * JSON (collective implementations per dimension, chunking, endpoint delay,
 * local memory bandwidth), and the time of one collective built from the
 * step rules of ASTRA-sim's system layer, listed with their source files in
 * src/trace/replay/trace_astra_model.c.
 * What it is not: ASTRA-sim's congestion-aware backend, ns-3 or Garnet; nor
 * its compute model (peak-perf, roofline: shardsim replays communication
 * only); nor the interleaving of concurrent collectives (each call is timed
 * alone, so scheduling-policy orders nothing here).
 */
#ifndef SHARDSIM_TRACE_ASTRA_MODEL_H
#define SHARDSIM_TRACE_ASTRA_MODEL_H

#include <stdint.h>

#include "shardsim/status.h"
#include "shardsim/trace.h"

#define SHS_ASTRA_MAX_DIMS 8

typedef enum { SHS_ASTRA_TOPO_RING, SHS_ASTRA_TOPO_FULLY_CONNECTED, SHS_ASTRA_TOPO_SWITCH } shs_astra_topo_t;
typedef enum { SHS_ASTRA_RING, SHS_ASTRA_DIRECT, SHS_ASTRA_HALVING_DOUBLING, SHS_ASTRA_DOUBLE_BINARY_TREE } shs_astra_impl_t;
/* the collectives ASTRA-sim's system layer generates */
typedef enum { SHS_ASTRA_AR, SHS_ASTRA_AG, SHS_ASTRA_RS, SHS_ASTRA_A2A, SHS_ASTRA_NUM_COLLS } shs_astra_coll_t;

typedef struct {
    int dims;
    shs_astra_topo_t topo[SHS_ASTRA_MAX_DIMS];
    int npus[SHS_ASTRA_MAX_DIMS];        /* >= 2 each */
    double bw_gbps[SHS_ASTRA_MAX_DIMS];  /* GB/s, 1 GB = 2^30 bytes (ASTRA-sim's bw_GBps_to_Bpns) */
    double lat_ns[SHS_ASTRA_MAX_DIMS];   /* ns per hop */
    /* A dimension split in two (shs_astra_break_dimension) lies inside a
     * physical one: phys[d] is that one's index in the file, span[d] its
     * NPUs, stride[d] the positions in it between neighbours of d.
     * shs_astra_net_load sets phys[d] = d, span[d] = npus[d], stride[d] = 1. */
    int phys[SHS_ASTRA_MAX_DIMS], span[SHS_ASTRA_MAX_DIMS], stride[SHS_ASTRA_MAX_DIMS];
} shs_astra_net_t;

typedef struct {
    int local_bw_aware;                  /* collective-optimization: localBWAware 1, baseline 0 */
    char path[256];                      /* "" for the defaults */
    shs_astra_impl_t impl[SHS_ASTRA_NUM_COLLS][SHS_ASTRA_MAX_DIMS]; /* per collective, per dimension */
    int nimpl[SHS_ASTRA_NUM_COLLS];      /* 0: ring on every dimension */
    int lifo;                            /* scheduling-policy LIFO 1, FIFO 0 (orders concurrent collectives only) */
    double endpoint_delay_ns;            /* per message, at each end of a step */
    int active_chunks;                   /* chunks in flight per dimension */
    int splits;                          /* preferred-dataset-splits */
    double local_mem_bw_gbps;            /* GB/s, 1 GB = 1e9 bytes (ASTRA-sim's local-mem-bw); 0 = not given */
    double local_reduction_delay;        /* read; ASTRA-sim 2.0 times nothing with it */
    double peak_perf_tflops;             /* read; compute only, not replayed */
    unsigned given;                      /* SHS_ASTRA_GIVEN_* bits: keys the system JSON gave */
} shs_astra_sys_t;
#define SHS_ASTRA_GIVEN_SCHED 1u        /* scheduling-policy */
#define SHS_ASTRA_GIVEN_LRD 2u          /* local-reduction-delay */
#define SHS_ASTRA_GIVEN_PEAK 4u         /* peak-perf */

/* Bounds of the network and system numbers: beyond them a figure is garbage
 * (1e308 GB/s prints "inf", 1e-300 GB/s a 300-digit time). 1e-3 GB/s (8
 * Mb/s) is slower than any interconnect, 1e6 GB/s (1 PB/s) faster than any;
 * 1e9 ns is one second per hop or endpoint. */
#define SHS_ASTRA_MAX_NPUS (1 << 20)
#define SHS_ASTRA_MIN_BW_GBPS 1e-3
#define SHS_ASTRA_MAX_BW_GBPS 1e6
#define SHS_ASTRA_MAX_LAT_NS 1e9

/* Load an ASTRA-sim analytical network YAML: `topology: [Ring|FullyConnected
 * |Switch, ...]`, `npus_count: [n, ...]` (integers in 2..1048576),
 * `bandwidth: [GB/s, ...]` (in 1e-3..1e6), `latency: [ns, ...]` (in 0..1e9),
 * all of one length (1 to 8), each key once.
 * Errors: SHS_IO, SHS_PARSE (file:line and key; an unknown topology or key,
 * a key given twice, a file without any of the four keys). */
shs_status_t shs_astra_net_load(const char *path, shs_astra_net_t *out);
/* Product of npus_count. */
int shs_astra_net_npus(const shs_astra_net_t *net);

/* The system when no --system is given: ASTRA-sim's Sys constructor
 * defaults (endpoint-delay 10 ns, active-chunks-per-dimension 1,
 * local-reduction-delay 1, collective-optimization baseline, FIFO) with
 * ring on every dimension, preferred-dataset-splits 1 (ASTRA-sim's 0 would
 * divide by zero) and no local-mem-bw (reductions cost no local time). */
void shs_astra_sys_default(shs_astra_sys_t *out);
/* Load an ASTRA-sim system JSON (jansson). Keys and what they do here:
 * scheduling-policy (LIFO, FIFO), {all-reduce,all-gather,reduce-scatter,
 * all-to-all}-implementation (lists of ring, direct, halvingDoubling,
 * doubleBinaryTree), collective-optimization (baseline, localBWAware),
 * endpoint-delay (ns), active-chunks-per-dimension, preferred-dataset-splits,
 * local-mem-bw (GB/s, 1e9), local-reduction-delay, peak-perf (TFLOPS),
 * roofline-enabled, boost-mode, trace-enabled, replay-only (read, no
 * effect on communication time); model-shared-bus and L, o, g, G only as 0
 * (ASTRA-sim's LogGP shared bus is not modelled). An unknown key, a value of
 * the wrong type or out of range, or a value not modelled (oneRing,
 * direct<window>, EXPLICIT, ...) is refused naming the file and key.
 * Errors: SHS_IO, SHS_PARSE, SHS_UNSUPPORTED (built without jansson: the
 * message names libjansson-dev). */
shs_status_t shs_astra_sys_load(const char *path, shs_astra_sys_t *out);

/* Nanoseconds of one collective `c` over the dimensions flagged in
 * `involved` (NULL: all), `bytes` being ASTRA-sim's collective size, one
 * rank's input buffer: the buffer for all-reduce, the input for
 * reduce-scatter (whole buffer), one rank's part for all-gather, and a
 * rank's whole send buffer for all-to-all (size / n goes to each peer).
 * Errors: SHS_INVALID_ARG
 * (halvingDoubling or doubleBinaryTree on a dimension whose size is not a
 * power of 2, an implementation list shorter than the network's
 * dimensions). */
shs_status_t shs_astra_coll_ns(const shs_astra_net_t *net, const shs_astra_sys_t *sys, shs_astra_coll_t c,
                               uint64_t bytes, const int *involved, double *ns);
/* Nanoseconds of a message of `bytes` from global NPU `src` to `dst`: the
 * first dimension where their addresses differ carries it (hops x latency +
 * bytes / bandwidth, truncated to whole ns as ASTRA-sim's EventTime). */
double shs_astra_p2p_ns(const shs_astra_net_t *net, int src, int dst, uint64_t bytes);

/* ASTRA-sim's Sys::break_dimension (astra-sim/system/Sys.cc of the 1.0
 * workloads' era, called by Workload::decode_involved_dimensions for
 * HYBRID_TRANSFORMER): the first dimension d whose NPUs, times those of
 * the dimensions before it (P), exceed the model-parallel group M is split
 * into two logical dimensions, M / P consecutive positions and the rest
 * M / P apart, each with d's topology, bandwidth, latency and collective
 * implementation (sys's lists gain a copy of d's entry); a group that
 * ends exactly at a dimension's edge splits nothing. Messages still cross
 * the physical dimension: hops count physical positions (stride).
 * Errors: SHS_INVALID_ARG (M beyond the NPUs, M / P or its complement not
 * whole, already SHS_ASTRA_MAX_DIMS dimensions). */
shs_status_t shs_astra_break_dimension(shs_astra_net_t *net, shs_astra_sys_t *sys, int group);

/* Check that trace t can be timed on net: world <= NPUs, every
 * communicator spans whole dimensions, every op is one ASTRA-sim times
 * (all_reduce, all_gather, reduce_scatter, all_to_all, send, recv, wait),
 * every collective's implementation applies. Errors: SHS_INVALID_ARG
 * naming the numbers, comm, rank, op and seq. */
shs_status_t shs_astra_check_trace(const shs_astra_net_t *net, const shs_astra_sys_t *sys, const shs_trace_t *t);
/* With t->astra_mp_group (a HYBRID_TRANSFORMER workload), both time t on
 * net and sys with that group's dimension broken
 * (shs_astra_break_dimension), as ASTRA-sim runs the workload. */
/* Seconds of record r (after shs_astra_check_trace; NaN if it would fail). */
double shs_astra_rec_time(const shs_astra_net_t *net, const shs_astra_sys_t *sys, const shs_trace_t *t,
                          const shs_trace_rec_t *r);

#endif
