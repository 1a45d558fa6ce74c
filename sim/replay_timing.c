/* replay_timing.c - `shardsim replay --network`: the alpha-beta estimate of
 * every call (trace_net.h); per rank its total and exposed communication
 * (trace_comm_timeline.h); per op and the most expensive calls.
 * What it is not: the models themselves (src/net/net_alpha_beta.c,
 * src/trace/replay/trace_comm_timeline.c). */
#include "replay_timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_comm_timeline.h"
#include "shardsim/units.h"

typedef struct {
    double t;
    int rank;
    size_t idx;
} inst_t;

static int cmp_inst(const void *a, const void *b) {
    double x = ((const inst_t *)a)->t, y = ((const inst_t *)b)->t;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A record counted once per instance: the collective on its comm's local
 * rank 0, or the send of a p2p pair. */
static int is_instance(const shs_trace_t *t, const shs_trace_rec_t *r) {
    if (r->op == SHS_OP_WAIT || r->op == SHS_OP_RECV) return 0;
    if (r->op == SHS_OP_SEND) return 1;
    return t->comms[r->comm].ranks[0] == r->rank;
}

/* What an ASTRA-sim network and system say, units included. */
static void print_astra_header(const shs_net_t *net) {
    static const char *const topo[] = {"Ring", "FullyConnected", "Switch"};
    static const char *const impl[] = {"ring", "direct", "halvingDoubling", "doubleBinaryTree"};
    static const char *const coll[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
    const shs_astra_net_t *a = &net->anet;
    const shs_astra_sys_t *s = &net->asys;
    printf("\ntiming (ASTRA-sim analytical, congestion-unaware rules): network %s, %d NPUs\n", net->name,
           shs_astra_net_npus(a));
    for (int d = 0; d < a->dims; d++)
        printf("  dimension %d: %s of %d, %g GB/s (1 GB = 2^30 bytes), %g ns per hop\n", d + 1, topo[a->topo[d]],
               a->npus[d], a->bw_gbps[d], a->lat_ns[d]);
    printf("  system %s: %s, %d split%s, %d active chunk%s per dimension, endpoint delay %g ns, ",
           s->path[0] ? s->path : "(ASTRA-sim's defaults, see --help)", s->local_bw_aware ? "localBWAware" : "baseline",
           s->splits, s->splits == 1 ? "" : "s", s->active_chunks, s->active_chunks == 1 ? "" : "s", s->endpoint_delay_ns);
    if (s->local_mem_bw_gbps > 0) printf("local-mem-bw %g GB/s (1 GB = 1e9 bytes)\n", s->local_mem_bw_gbps);
    else printf("no local-mem-bw (reductions cost no local time)\n");
    for (int c = 0; c < SHS_ASTRA_NUM_COLLS; c++) {
        printf("  %s:", coll[c]);
        for (int d = 0; d < a->dims; d++) printf(" %s", impl[s->nimpl[c] ? s->impl[c][d] : SHS_ASTRA_RING]);
        printf("%s", c == SHS_ASTRA_NUM_COLLS - 1 ? "\n" : ";");
    }
    printf("  each call timed alone: scheduling-policy %s%s orders concurrent collectives only",
           s->lifo ? "LIFO" : "FIFO", s->given & SHS_ASTRA_GIVEN_SCHED ? "" : " (default)");
    if (s->given & (SHS_ASTRA_GIVEN_LRD | SHS_ASTRA_GIVEN_PEAK)) {
        printf(";");
        if (s->given & SHS_ASTRA_GIVEN_LRD) printf(" local-reduction-delay %g", s->local_reduction_delay);
        if (s->given & SHS_ASTRA_GIVEN_PEAK)
            printf("%s peak-perf %g TFLOPS", s->given & SHS_ASTRA_GIVEN_LRD ? "," : "", s->peak_perf_tflops);
        printf(" read, not used by ASTRA-sim's communication timing");
    }
    printf("\n");
}

void sim_print_timing(const shs_trace_t *t, const shs_net_t *net, shs_net_algo_t algo, int compare) {
    char b1[32], b2[32];
    if (net->astra) print_astra_header(net);
    else
        printf("\ntiming (alpha-beta, %s): network %s, %d GPUs per node, intra %.1f GB/s %.3f us, inter %.1f GB/s "
               "%.3f us per ring step, %.3f us per call\n",
               shs_net_algo_name(algo), net->name, net->gpus_per_node > 65536 ? t->world : net->gpus_per_node,
               net->intra_bw / 1e9, net->intra_lat * 1e6, net->inter_bw / 1e9, net->inter_lat * 1e6,
               net->base_lat * 1e6);
    /* per rank: the calls' times, and what stays exposed once ranks wait
     * for each other and the trace's own compute gaps are kept */
    shs_trace_comm_timeline_t tl;
    if (shs_trace_comm_timeline(t, net, algo, &tl) != SHS_OK) {
        printf("  per-rank timeline: %s\n", shs_last_error());
    } else {
        double worst = 0, sum_comm = 0, sum_exp = 0;
        int worst_rank = 0;
        printf("  per rank (ms): communication = the calls' times; exposed = wall - compute, compute = %s\n",
               tl.timed ? "the gaps the trace recorded between calls" : "none (the trace has no times)");
        for (int r = 0; r < t->world; r++) {
            const shs_rank_comm_timeline_t *o = &tl.ranks[r];
            sum_comm += o->comm_s;
            sum_exp += o->exposed_s;
            if (o->exposed_s > worst) { worst = o->exposed_s; worst_rank = r; }
            if (t->world <= 16)
                printf("  rank %-4d communication %12.3f  exposed %12.3f  (waiting for peers %.3f, compute %.3f, "
                       "wall %.3f)\n", r, o->comm_s * 1e3, o->exposed_s * 1e3, o->wait_s * 1e3, o->compute_s * 1e3,
                       o->wall_s * 1e3);
        }
        if (t->world > 16)
            printf("  mean per rank: communication %.3f ms, exposed %.3f ms\n", sum_comm / t->world * 1e3,
                   sum_exp / t->world * 1e3);
        printf("  most exposed: rank %d, %.3f ms; slowest wall %.3f ms\n", worst_rank, worst * 1e3, tl.wall_s * 1e3);
        if (!tl.complete) printf("  (the timeline stops where ranks block forever: the trace deadlocks)\n");
        shs_trace_comm_timeline_free(&tl);
    }

    double time_op[SHS_NUM_ALGOS][SHS_NUM_OPS] = {{0}}, bytes_op[SHS_NUM_OPS] = {0};
    uint64_t calls[SHS_NUM_OPS] = {0};
    int nr_op[SHS_NUM_OPS] = {0};
    size_t ninst = 0;
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) ninst += is_instance(t, &t->ranks[r].recs[i]);
    inst_t *inst = malloc((ninst ? ninst : 1) * sizeof *inst);
    size_t k = 0;
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            if (!is_instance(t, x)) continue;
            for (int a = 0; a < SHS_NUM_ALGOS; a++) time_op[a][x->op] += shs_net_rec_time(net, (shs_net_algo_t)a, t, x);
            bytes_op[x->op] += (double)shs_trace_rec_bytes(t, x, shs_coll_op_is_p2p(x->op) ? SHS_BYTES_PER_RANK : SHS_BYTES_TOTAL);
            calls[x->op]++;
            nr_op[x->op] = t->comms[x->comm].size;
            if (inst) inst[k++] = (inst_t){shs_net_rec_time(net, algo, t, x), r, i};
        }
    printf("\n  %-15s %8s %12s %12s %10s %10s   (per collective: each counted once)\n", "op", "calls", "bytes", "time ms",
           "algbw GB/s", "busbw GB/s");
    for (int op = 0; op < SHS_NUM_OPS; op++) {
        if (!calls[op]) continue;
        double tm = time_op[algo][op], algbw = tm > 0 ? bytes_op[op] / tm : 0;
        printf("  %-15s %8llu %12s %12.3f %10.2f %10.2f\n", shs_coll_op_name((shs_coll_op_t)op),
               (unsigned long long)calls[op], shs_format_bytes(b1, sizeof b1, bytes_op[op]), tm * 1e3, algbw / 1e9,
               algbw * shs_net_busbw_factor((shs_coll_op_t)op, nr_op[op]) / 1e9);
    }
    if (compare) {
        printf("\n  %-15s %12s %12s %12s   (ms; tree only changes all_reduce, broadcast, reduce, barrier)\n", "op",
               "ring", "tree", "direct");
        for (int op = 0; op < SHS_NUM_OPS; op++)
            if (calls[op])
                printf("  %-15s %12.3f %12.3f %12.3f\n", shs_coll_op_name((shs_coll_op_t)op), time_op[0][op] * 1e3,
                       time_op[1][op] * 1e3, time_op[2][op] * 1e3);
    }
    if (inst && k) {
        qsort(inst, k, sizeof *inst, cmp_inst);
        printf("\n  top %d calls by time:\n", k < 10 ? (int)k : 10);
        for (size_t q = 0; q < k && q < 10; q++) {
            const shs_trace_rec_t *x = &t->ranks[inst[q].rank].recs[inst[q].idx];
            const char *m = shs_trace_str(t, x->marker);
            printf("  %9.3f ms  %-15s comm %s seq %lld, %s%s%s\n", inst[q].t * 1e3, shs_coll_op_name(x->op),
                   t->comms[x->comm].name, (long long)x->seq,
                   shs_format_bytes(b2, sizeof b2, (double)shs_trace_rec_bytes(t, x, SHS_BYTES_TOTAL)), *m ? ", " : "", m);
        }
    }
    free(inst);
}
