/* trace_astra.c - import ASTRA-sim 1.0 text workloads.
 *
 * Format (ASTRA-sim 1.0, inputs/workload/ASTRA-sim-1.0): line 1 the
 * parallelism (DATA, MODEL, HYBRID_*, MICRO, ...; first word read), line 2
 * the layer count L, then L lines
 *   name reserved fwd_comp fwd_type fwd_bytes ig_comp ig_type ig_bytes wg_comp wg_type wg_bytes update_delay
 * with comm types NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL and
 * sizes in bytes. ASTRA-sim 1.0 hands a size to Sys::generate_<collective>
 * unchanged (Layer::issue_*_comm), as it does a Chakra comm_size, so both
 * mean one rank's input: the buffer for all-reduce, one rank's part for
 * all-gather (its Ring: final = size x N), the whole input for
 * reduce-scatter, a rank's whole send buffer for all-to-all (size / N to
 * each peer): shs_trace_input_scope() of the op. One training iteration is
 * expanded onto N ranks (in->world, default 8) as ASTRA-sim 1.0 runs it
 * (astra-sim/workload/Workload.cc: decode_involved_dimensions, the
 * iterate_* loops): per workload type, which passes issue comms and on
 * which group:
 *   DATA, MICRO        weight-gradient comms only, on all ranks (MICRO:
 *                      layer 0's only)
 *   MODEL              forward and input-gradient comms on all ranks
 *   HYBRID_DATA_MODEL  forward / input-gradient on the model group, the
 *                      network's first dimension (D0 consecutive ranks);
 *                      weight-gradient on the data group (ranks D0 apart)
 *   HYBRID_MODEL_DATA  the other way round: data group = the first
 *                      dimension, model group = ranks D0 apart
 *   HYBRID_TRANSFORMER line 1 "model_parallel_NPU_group: M": model group
 *                      M consecutive ranks, data group ranks M apart;
 *                      t->astra_mp_group = M (the network dimension M
 *                      falls in is split there, Sys::break_dimension)
 *   HYBRID_DLRM[_ENHANCED]  line 1 names the last bottom layer B: layer
 *                      0's comms on all ranks, the others' weight gradients
 *                      on all ranks; layer 0's input gradient is issued
 *                      after layer B+1's weight gradient (a B without a
 *                      layer after it is refused: the comm would be lost)
 * Order: forward comms layer 0..L-1 (marker fwd/<layer>), then for layers
 * L-1..0 the input-gradient comm (not layer 0's, but for
 * HYBRID_TRANSFORMER) and the weight-gradient comm (bwd-ig/<layer>,
 * bwd-wg/<layer>). D0 is in->first_dim (replay --first-dim, npus_count[0]
 * of the ASTRA-sim network); a group of one rank moves nothing and gets no
 * record. Groups are communicators "model<k>" / "data<k>" (or "world").
 * Every record's src_line is its layer line's number.
 * Compute times are not kept.
 * What it is not: a reader of the newer Chakra-based workloads (trace_chakra.c);
 * HYBRID_TRANSFORMER_FWD_IN_BCKWD (forward recomputed in the backward
 * pass), HYBRID_CUSTOMIZED and DISTRIBUTED_INFERENCE are refused, not
 * approximated.
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "trace/trace_util.h"

#define ASTRA_DEFAULT_WORLD 8
#define ASTRA_MAX_RECORDS ((uint64_t)100000000)

static shs_status_t perr(const shs_trace_input_t *in, long line, const char *fmt, const char *arg) {
    char msg[400];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return shs_set_error(SHS_PARSE, "%s:%ld: %s", in->name, line, msg);
}

static int comm_type(shs__tok_t t, shs_coll_op_t *op, int *none) {
    *none = 0;
    if (shs__tok_is(t, "NONE")) { *none = 1; return 0; }
    if (shs__tok_is(t, "ALLREDUCE")) *op = SHS_OP_ALL_REDUCE;
    else if (shs__tok_is(t, "ALLGATHER")) *op = SHS_OP_ALL_GATHER;
    else if (shs__tok_is(t, "REDUCESCATTER")) *op = SHS_OP_REDUCE_SCATTER;
    else if (shs__tok_is(t, "ALLTOALL")) *op = SHS_OP_ALL_TO_ALL;
    else return -1;
    return 0;
}

typedef struct {
    char name[64];
    shs_coll_op_t op[3];
    int none[3];
    uint64_t bytes[3];
    long line;      /* the layer line's number in the file */
} layer_t;

/* The group a pass's comms run on (Workload.cc's involved dimensions). */
enum { G_NONE, G_ALL, G_MODEL, G_DATA };

typedef struct {
    int fwd, ig, wg;           /* G_* of each pass */
    int ig_layer0;             /* layer 0's input-gradient comm is issued */
    int micro;                 /* MICRO: layer 0's weight gradient only */
    int dlrm;                  /* DLRM: layer 0 on all ranks, its ig after layer bottom+1's wg */
    long dlrm_bottom;
    int block_from;            /* consecutive group size: 0 none, 1 first_dim, 2 the file's M */
    long block;                /* M of HYBRID_TRANSFORMER */
    int consecutive_is_model;  /* the consecutive groups are the model groups */
} policy_t;

/* Line 1: the parallelism and its extra fields. */
static shs_status_t parse_policy(const shs_trace_input_t *in, const shs__tok_t *tk, int nt, policy_t *p) {
    char kind[48];
    shs__tok_copy(tk[0], kind, sizeof kind);
    *p = (policy_t){.fwd = G_NONE, .ig = G_NONE, .wg = G_ALL, .ig_layer0 = 0};
    uint64_t v;
    if (strcmp(kind, "DATA") == 0) return SHS_OK;
    if (strcmp(kind, "MICRO") == 0) { p->micro = 1; return SHS_OK; }
    if (strcmp(kind, "MODEL") == 0) { p->fwd = p->ig = G_ALL; p->wg = G_NONE; return SHS_OK; }
    if (strcmp(kind, "HYBRID_DATA_MODEL") == 0 || strcmp(kind, "HYBRID_MODEL_DATA") == 0) {
        p->fwd = p->ig = G_MODEL;
        p->wg = G_DATA;
        p->block_from = 1;
        p->consecutive_is_model = kind[7] == 'D'; /* DATA_MODEL: model = the first dimension */
        return SHS_OK;
    }
    if (strcmp(kind, "HYBRID_TRANSFORMER") == 0) {
        if (nt < 3 || !shs__tok_is(tk[1], "model_parallel_NPU_group:") || shs__parse_u64(tk[2].s, tk[2].n, 0, &v) ||
            v < 1 || v > SHS_TRACE_MAX_WORLD)
            return perr(in, 1, "HYBRID_TRANSFORMER wants 'model_parallel_NPU_group: M' (M ranks per model group)%s", NULL);
        p->fwd = p->ig = G_MODEL;
        p->wg = G_DATA;
        p->ig_layer0 = 1;
        p->block_from = 2;
        p->block = (long)v;
        p->consecutive_is_model = 1;
        return SHS_OK;
    }
    if (strcmp(kind, "HYBRID_DLRM") == 0 || strcmp(kind, "HYBRID_DLRM_ENHANCED") == 0) {
        if (nt < 2 || shs__parse_u64(tk[1].s, tk[1].n, 0, &v) || v > 1000000)
            return perr(in, 1, "%s wants the last bottom layer's index after it", kind);
        p->dlrm = 1;
        p->dlrm_bottom = (long)v;
        return SHS_OK;
    }
    if (strcmp(kind, "HYBRID_TRANSFORMER_FWD_IN_BCKWD") == 0 || strcmp(kind, "HYBRID_CUSTOMIZED") == 0 ||
        strcmp(kind, "DISTRIBUTED_INFERENCE") == 0)
        return perr(in, 1, "workload type %s is not supported (its schedule is not modelled here)", kind);
    return perr(in, 1, "unknown workload type '%s' (DATA, MICRO, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, "
                "HYBRID_TRANSFORMER, HYBRID_DLRM, HYBRID_DLRM_ENHANCED)", kind);
}

/* The consecutive groups' size for this policy on `world` ranks (0: none). */
static shs_status_t decide_block(const shs_trace_input_t *in, const policy_t *p, int world, int *block) {
    *block = 0;
    if (!p->block_from) return SHS_OK;
    long b = p->block_from == 2 ? p->block : in->first_dim;
    if (b <= 0)
        return perr(in, 1, "this workload runs model- and data-parallel comms on the network's dimensions: give the "
                    "first dimension's NPU count (replay --first-dim N: npus_count[0] of the ASTRA-sim network)%s", NULL);
    if (b > world || world % b) {
        char m[160];
        snprintf(m, sizeof m, "a group of %ld consecutive ranks does not divide the %d ranks", b, world);
        return perr(in, 1, "%s", m);
    }
    *block = (int)b;
    return SHS_OK;
}

/* Declare (or find) comm `name` of n ranks first, first + stride, ... */
static shs_status_t group_comm(shs_trace_t *t, const char *name, int n, int first, int stride, int *id) {
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (!ranks) return shs_set_error(SHS_HOST_OOM, "out of memory");
    for (int k = 0; k < n; k++) ranks[k] = first + k * stride;
    shs_status_t st = shs_trace_add_comm(t, name, n, ranks, id);
    free(ranks);
    return st;
}

typedef struct {
    long layer;
    int pass;   /* 0 fwd, 1 input gradient, 2 weight gradient */
    int group;  /* G_* */
} step_t;

/* The order ASTRA-sim issues the comms of one iteration (the iterate_* loops). */
static long schedule(const policy_t *p, long L, step_t *s) {
    long n = 0;
    if (p->micro) {
        if (L > 0) s[n++] = (step_t){0, 2, G_ALL};
        return n;
    }
    for (long l = 0; l < L; l++) {
        int g = p->dlrm ? (l == 0 ? G_ALL : G_NONE) : p->fwd;
        s[n++] = (step_t){l, 0, g};
    }
    for (long l = L - 1; l >= 0; l--) {
        if (p->dlrm) {
            s[n++] = (step_t){l, 2, G_ALL};
            if (l > 0 && l == p->dlrm_bottom + 1) s[n++] = (step_t){0, 1, G_ALL};
            continue;
        }
        if (l > 0 || p->ig_layer0) s[n++] = (step_t){l, 1, p->ig};
        s[n++] = (step_t){l, 2, p->wg};
    }
    return n;
}

shs_status_t shs_trace_import_astra(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "astra");
    int world = in->world > 0 ? in->world : ASTRA_DEFAULT_WORLD;
    long lineno = 0, want = -1, got = 0;
    layer_t *layers = NULL;
    shs_status_t st = SHS_OK;
    char buf[64];
    policy_t pol = {0};
    int have_pol = 0;
    for (size_t i = 0; i < in->len && st == SHS_OK;) {
        size_t j = i;
        while (j < in->len && in->buf[j] != '\n') j++;
        lineno++;
        shs__tok_t tk[16];
        int nt = shs__tokens(in->buf + i, j - i, tk, 15);
        i = j + 1;
        if (nt == 0) continue;
        if (!have_pol) { /* line 1: the parallelism and its fields */
            if (lineno != 1) return perr(in, lineno, "line 1 must name the workload's parallelism%s", NULL);
            SHS_CHECK(parse_policy(in, tk, nt > 15 ? 15 : nt, &pol));
            have_pol = 1;
            continue;
        }
        if (want < 0) {
            uint64_t v;
            if (nt != 1 || shs__parse_u64(tk[0].s, tk[0].n, 0, &v) || v > 1000000)
                return perr(in, lineno, "line 2 must be the layer count (0..1000000)%s", NULL);
            want = (long)v;
            if (!(layers = calloc(v ? v : 1, sizeof *layers))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
            continue;
        }
        if (got == want) { st = perr(in, lineno, "more layer lines than the declared count%s", NULL); break; }
        if (nt != 12) { st = perr(in, lineno, "a layer line has 12 fields (name -1 fwd_comp fwd_type fwd_bytes ig_comp ig_type ig_bytes wg_comp wg_type wg_bytes delay)%s", NULL); break; }
        layer_t *L = &layers[got];
        shs__tok_copy(tk[0], L->name, sizeof L->name);
        L->line = lineno;
        for (int k = 0; k < 3 && st == SHS_OK; k++) {
            uint64_t comp, b;
            if (shs__parse_u64(tk[2 + 3 * k].s, tk[2 + 3 * k].n, 0, &comp)) {
                int64_t neg;
                if (shs__parse_i64(tk[2 + 3 * k].s, tk[2 + 3 * k].n, &neg) || neg < -1) st = perr(in, lineno, "bad compute time '%s'", shs__tok_copy(tk[2 + 3 * k], buf, sizeof buf));
            }
            if (st != SHS_OK) break;
            if (comm_type(tk[3 + 3 * k], &L->op[k], &L->none[k])) { st = perr(in, lineno, "unknown comm type '%s'", shs__tok_copy(tk[3 + 3 * k], buf, sizeof buf)); break; }
            if (shs__parse_u64(tk[4 + 3 * k].s, tk[4 + 3 * k].n, 0, &b) || b > SHS_TRACE_MAX_BYTES) { st = perr(in, lineno, "bad or absurd comm size '%s' (bytes)", shs__tok_copy(tk[4 + 3 * k], buf, sizeof buf)); break; }
            L->bytes[k] = b;
        }
        got++;
    }
    if (st == SHS_OK && want < 0) st = perr(in, lineno, "truncated: no layer count%s", NULL);
    if (st == SHS_OK && got != want) {
        char m[96];
        snprintf(m, sizeof m, "truncated: %ld of %ld layer lines", got, want);
        st = perr(in, lineno, "%s", m);
    }
    if (st == SHS_OK && pol.dlrm && pol.dlrm_bottom + 1 >= want) { /* Workload.cc: index == DLRM_LAST_BOTTOM_LAYER + 1 */
        char m[300];
        snprintf(m, sizeof m, "HYBRID_DLRM's last bottom layer %ld needs a layer after it, and the workload has %ld "
                 "(0..%ld): layer 0's input-gradient comm, issued after layer %ld's weight gradient, would never be "
                 "issued", pol.dlrm_bottom, want, want - 1, pol.dlrm_bottom + 1);
        st = perr(in, 1, "%s", m);
    }
    if (st == SHS_OK && (uint64_t)world * (uint64_t)want * 3 > ASTRA_MAX_RECORDS)
        st = shs_set_error(SHS_INVALID_ARG, "%s: %d ranks x %ld layers is too large to expand", in->name, world, want);
    step_t *sched = NULL;
    long nsched = 0;
    if (st == SHS_OK && !(sched = malloc((size_t)(3 * want + 2) * sizeof *sched)))
        st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
    if (st == SHS_OK) nsched = schedule(&pol, want, sched);
    int block = 0; /* size of the consecutive groups */
    if (st == SHS_OK) st = decide_block(in, &pol, world, &block);
    if (st == SHS_OK && pol.block_from == 2) t->astra_mp_group = block; /* its network dimension is split there */
    int cw = -1, cm = -1, cd = -1;
    if (st == SHS_OK) st = group_comm(t, "world", world, 0, 1, &cw); /* once: a lookup per rank would cost world^2 */
    for (int r = 0; r < world && st == SHS_OK; r++) {
        /* this rank's groups: world (above), its model group, its data group */
        if (block > 0) {
            int nb = world / block, blk = r / block, pos = r % block;
            char nm[32], nd[32];
            /* consecutive: ranks blk*block + i; strided: pos + k*block */
            snprintf(nm, sizeof nm, "%s%d", pol.consecutive_is_model ? "model" : "data", blk);
            snprintf(nd, sizeof nd, "%s%d", pol.consecutive_is_model ? "data" : "model", pos);
            int cc, cs;
            if ((st = group_comm(t, nm, block, blk * block, 1, &cc)) != SHS_OK) break;
            if ((st = group_comm(t, nd, nb, pos, block, &cs)) != SHS_OK) break;
            cm = pol.consecutive_is_model ? cc : cs;
            cd = pol.consecutive_is_model ? cs : cc;
        }
        for (long k = 0; k < nsched && st == SHS_OK; k++) {
            const layer_t *L = &layers[sched[k].layer];
            int pass = sched[k].pass, g = sched[k].group;
            if (L->none[pass] || g == G_NONE) continue;
            int comm = g == G_ALL ? cw : g == G_MODEL ? cm : cd;
            if (t->comms[comm].size < 2) continue; /* a group of one moves nothing */
            shs_trace_rec_t rec = shs_trace_rec_init();
            char m[96];
            snprintf(m, sizeof m, "%s/%s", pass == 0 ? "fwd" : pass == 1 ? "bwd-ig" : "bwd-wg", L->name);
            rec.rank = r;
            rec.comm = comm;
            rec.op = L->op[pass];
            rec.bytes = L->bytes[pass];
            rec.scope = shs_trace_input_scope(rec.op);
            rec.src_line = L->line;
            if (rec.op != SHS_OP_ALL_GATHER && rec.op != SHS_OP_ALL_TO_ALL) rec.redop = SHS_SUM;
            rec.marker = shs_trace_intern(t, m);
            if (rec.marker == UINT32_MAX) st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
            else if (shs_trace_append(t, &rec) != SHS_OK)
                st = shs_set_error(SHS_PARSE, "%s: layer %s: %s", in->name, L->name, shs_last_error());
        }
    }
    free(sched);
    free(layers);
    return st;
}
