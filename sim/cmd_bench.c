/* cmd_bench.c - `shardsim bench`: collective bandwidth tables in the
 * nccl-tests format with the same run's memcpy bandwidth beside each row,
 * training step time per strategy, and matmul GFLOP/s against the CPU's
 * estimated fp32 peak. Text, or JSON through jansson when it was found at
 * build time. `--only p2p` measures point-to-point calls in nccl-tests'
 * sendrecv form (each rank sends to the next, receives from the previous,
 * busbw factor 1) in the same table format. `--only trace` times importing and checking a generated
 * 1 M-record, 64-rank trace, as shardsim text files and as one NCCL log
 * (trace_bench.h).
 * What it is not: a pass/fail test; it reports ratios measured in one run.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

#include "args.h"
#include "commands.h"

/* The training table: DDP and ZeRO-1/2/3 (hybrid sharding at its default group size is ZeRO-3/2). */
#define SHS_BENCH_STRATEGIES (SHS_ZERO3 + 1)
#include "bench/bench.h"
#include "shardsim/features.h"
#include "shardsim/meta_run.h"
#include "shardsim/model_preset.h"
#include "bench/trace_bench.h"
#include "shardsim/train.h"
#include "shardsim/units.h"
#include "shardsim/clock.h"

#define MAX_WORLDS 16

typedef struct {
    shs_coll_op_t ops[4];
    int num_ops;
    int worlds[MAX_WORLDS];
    int num_worlds;
    size_t min_bytes, max_bytes;
    double factor;
    int in_place;
    double row_seconds;
    int json;
    int do_coll, do_train, do_matmul, do_compare, do_trace, do_p2p;
    int train_steps;
    shs_world_backend_t backend; /* --backend: cpu (threads) or a CUDA world (world.h) */
} bench_opts_t;

/* The options of `bench`; the rows' order is --help's. --op, --world and
 * --only may repeat (each occurrence adds to the list: bench_each). */
typedef enum {
    B_OP, B_WORLD, B_MIN_BYTES, B_MAX_BYTES, B_FACTOR, B_IN_PLACE, B_SECONDS, B_ONLY, B_TRAIN_STEPS, B_FORMAT,
    B_BACKEND,
    B_NUM_OPTIONS
} bench_opt_t;

static const sim_opt_t bench_options[B_NUM_OPTIONS] = {
    [B_OP] = {"--op", NULL, SIM_OPT_STR, 0, 0, 0, 1, "OP", "all_reduce | all_gather | reduce_scatter | broadcast | all\n(repeatable)"},
    [B_WORLD] = {"--world", NULL, SIM_OPT_INT, 1, SHS_MAX_WORLD, 0, 1, "N",
                 "ranks of the collective sweep (repeatable);\n"
                 "the training tables always use world 4 (strategies) and 1..64\n"
                 "(ZeRO-3 at a global batch of 64)"},
    [B_MIN_BYTES] = {"--min-bytes", NULL, SIM_OPT_SIZE, 0, 0, 0, 0, "SIZE", "smallest size (nccl-tests -b)"},
    [B_MAX_BYTES] = {"--max-bytes", NULL, SIM_OPT_SIZE, 0, 0, 0, 0, "SIZE", "largest size (nccl-tests -e)"},
    [B_FACTOR] = {"--factor", NULL, SIM_OPT_FLOAT, 1.01, 1024, 0, 0, "F", "size multiplier between rows (nccl-tests -f)"},
    [B_IN_PLACE] = {"--in-place", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL, "in-place collectives"},
    [B_SECONDS] = {"--seconds", NULL, SIM_OPT_FLOAT, 0.001, 60, 0, 0, "S", "target time per row"},
    [B_ONLY] = {"--only", NULL, SIM_OPT_STR, 0, 0, 0, 1, "WHAT", "coll | p2p | train | matmul | compare | trace\n(repeatable)"},
    [B_TRAIN_STEPS] = {"--train-steps", NULL, SIM_OPT_INT, 1, 1000, 0, 0, "N", "timed steps per strategy"},
    [B_FORMAT] = {"--format", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F",
                  "text | json; json holds the coll, train and matmul\n"
                  "tables (--only compare and --only trace are text only)"},
    [B_BACKEND] = {"--backend", NULL, SIM_OPT_STR, 0, 0, 0, 0, "B",
                   "cpu (or thread) | cuda | cuda-nccl: ranks on CPU threads, on one GPU\n"
                   "(device-local communicator), or one GPU each (NCCL); the matmul\n"
                   "table is CPU-only and skipped on CUDA"},
};

static const char *const bench_defaults[B_NUM_OPTIONS] = {
    [B_OP] = "all", [B_WORLD] = "2, 4, 8, 16", [B_MIN_BYTES] = "1K", [B_MAX_BYTES] = "256M", [B_FACTOR] = "4",
    [B_IN_PLACE] = "false: out of place", [B_SECONDS] = "0.2", [B_ONLY] = "all", [B_TRAIN_STEPS] = "4",
    [B_FORMAT] = "text", [B_BACKEND] = "cpu",
};

static const char bench_usage_head[] =
    "usage: shardsim bench [options]\n"
    "\n"
    "Measure collectives over threads (nccl-tests conventions), the training step per\n"
    "strategy and the matmul rate; every figure is set beside a reference measured in\n"
    "the same run (memcpy bandwidth, DDP step time, estimated fp32 peak).\n"
    "\n";

static int bench_error(const char *what, const char *detail) {
    return sim_usage_error("bench", "%s%s", what, detail ? detail : "");
}

static int parse_op(const char *s, bench_opts_t *o) {
    static const shs_coll_op_t all[] = {SHS_OP_ALL_REDUCE, SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER, SHS_OP_BROADCAST};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, "all") == 0 || strcmp(s, shs_coll_op_name(all[i])) == 0) {
            int dup = 0;
            for (int k = 0; k < o->num_ops; k++) dup |= o->ops[k] == all[i];
            if (!dup) o->ops[o->num_ops++] = all[i];
            if (strcmp(s, "all") != 0) return 0;
        }
    }
    return strcmp(s, "all") == 0 ? 0 : -1;
}

/* One occurrence of a repeatable option: added to its list. */
static int bench_each(void *ctx, sim_args_t *a, int id, const sim_opts_t *p) {
    bench_opts_t *o = ctx;
    const char *v = p->str[id];
    if (id < 0) return sim_args_unexpected(a);
    if (id == B_OP && parse_op(v, o)) return bench_error("unknown --op ", v);
    if (id == B_WORLD) {
        if (o->num_worlds == MAX_WORLDS) return bench_error("too many --world values", NULL);
        o->worlds[o->num_worlds++] = (int)p->num[B_WORLD];
    }
    if (id == B_ONLY) {
        static const char *const what[] = {"coll", "train", "matmul", "compare", "trace", "p2p"};
        int *flag[] = {&o->do_coll, &o->do_train, &o->do_matmul, &o->do_compare, &o->do_trace, &o->do_p2p};
        int k = 0;
        while (k < 6 && strcmp(v, what[k]) != 0) k++;
        if (k == 6) return bench_error("unknown --only ", v);
        *flag[k] = 1;
    }
    return -1;
}

static int parse_bench_args(int argc, char **argv, bench_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->min_bytes = 1024;
    o->max_bytes = (size_t)256 << 20;
    o->factor = 4;
    o->row_seconds = 0.2;
    o->train_steps = 4;
    const sim_command_t cmd = {"bench", bench_usage_head, bench_options, B_NUM_OPTIONS, bench_defaults, bench_each, o};
    sim_opts_t p;
    int rc = sim_opts_parse(&cmd, argc, argv, &p);
    if (rc >= 0) return rc;
    int only = p.given[B_ONLY];
    if (p.given[B_MIN_BYTES]) o->min_bytes = p.bytes[B_MIN_BYTES];
    if (p.given[B_MAX_BYTES]) o->max_bytes = p.bytes[B_MAX_BYTES];
    if (p.given[B_FACTOR]) o->factor = p.num[B_FACTOR];
    if (p.given[B_SECONDS]) o->row_seconds = p.num[B_SECONDS];
    if (p.given[B_TRAIN_STEPS]) o->train_steps = (int)p.num[B_TRAIN_STEPS];
    o->in_place = p.given[B_IN_PLACE] && p.num[B_IN_PLACE];
    if (p.given[B_BACKEND]) {
        const char *v = p.str[B_BACKEND];
        if (strcmp(v, "cuda") == 0) o->backend = SHS_WORLD_CUDA;
        else if (strcmp(v, "cuda-nccl") == 0) o->backend = SHS_WORLD_CUDA_NCCL;
        else if (strcmp(v, "cpu") != 0 && strcmp(v, "thread") != 0)
            return bench_error("--backend takes cpu, thread, cuda or cuda-nccl (bench runs in one process), not ", v);
    }
    if (p.given[B_FORMAT]) {
        if (strcmp(p.str[B_FORMAT], "json") == 0) o->json = 1;
        else if (strcmp(p.str[B_FORMAT], "text") != 0) return bench_error("unknown --format ", p.str[B_FORMAT]);
    }
    if (o->json && (o->do_compare || o->do_trace))
        return bench_error("--format json covers coll, train and matmul; --only compare and --only trace print text: ",
                           o->do_compare ? "compare" : "trace");
    if (!only) o->do_coll = o->do_p2p = o->do_train = o->do_matmul = o->do_compare = o->do_trace = 1;
    if (!o->num_ops) parse_op("all", o);
    if (!o->num_worlds) {
        static const int def[] = {2, 4, 8, 16};
        memcpy(o->worlds, def, sizeof def);
        o->num_worlds = 4;
    }
    if (o->min_bytes == 0) return bench_error("--min-bytes must be at least 1 byte", NULL);
    if (o->min_bytes > o->max_bytes) return bench_error("--min-bytes is larger than --max-bytes", NULL);
    if (o->max_bytes > ((size_t)1 << 36)) return bench_error("--max-bytes is larger than 64 GiB", NULL);
    return -1;
}

/* Everything measured, kept for the JSON report. */
typedef struct {
    shs_bench_coll_t c;
    double memcpy_bw;      /* bytes moved per s (read + write), same run, same working set */
    double ratio;          /* traffic per s / memcpy_bw */
    double naive_us;       /* the naive thread design's time per call, same run; < 0: not measured */
} coll_row_t;

typedef struct {
    coll_row_t *coll;
    int num_coll, cap_coll;
    double train_ms[SHS_BENCH_STRATEGIES];
    int train_world, have_train;
    struct { const char *what; int BT, C, OC; double gflops; } mm[8];
    int num_mm;
    shs_cpu_peak_t peak;
    struct { int world, micro_batch; double step_ms, device_bytes, extra_bytes; } scale[8];
    int num_scale;
} results_t;

static void add_coll(results_t *r, const coll_row_t *row) {
    if (r->num_coll == r->cap_coll) {
        int cap = r->cap_coll ? 2 * r->cap_coll : 64;
        coll_row_t *nc = realloc(r->coll, (size_t)cap * sizeof *nc);
        if (!nc) return;
        r->coll = nc;
        r->cap_coll = cap;
    }
    r->coll[r->num_coll++] = *row;
}

/* Rounds of (memcpy, communicator, naive design) per row; the best of each
 * counts, so a burst of machine noise spoils one round, not the row. */
#define ROUNDS 2

static int reduces(shs_coll_op_t op) { return op == SHS_OP_ALL_REDUCE || op == SHS_OP_REDUCE_SCATTER; }

/* A row's op as nccl-tests names it: SHS_OP_SEND stands for sendrecv. */
static const char *row_name(shs_coll_op_t op) { return op == SHS_OP_SEND ? "sendrecv" : shs_coll_op_name(op); }

/* Bytes every rank's buffers occupy together (the collective's working set). */
static size_t working_set(shs_coll_op_t op, int n, size_t bytes, int in_place) {
    if (op == SHS_OP_SEND) return 2 * bytes * (size_t)n; /* a message out, one in, per rank */
    size_t per_rank_in = op == SHS_OP_ALL_GATHER ? bytes / n : bytes;
    size_t per_rank_out = op == SHS_OP_REDUCE_SCATTER ? bytes / n : bytes;
    size_t per_rank = in_place ? (per_rank_in > per_rank_out ? per_rank_in : per_rank_out) : per_rank_in + per_rank_out;
    return per_rank * (size_t)n;
}

/* The table of `ops` at every --world (SHS_OP_SEND: sendrecv, out of place). */
static int run_collectives(const bench_opts_t *o, const shs_coll_op_t *ops, int num_ops, results_t *res) {
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    int p2p = ops[0] == SHS_OP_SEND, in_place = o->in_place && !p2p;
    if (!o->json && p2p)
        printf("# point-to-point over threads, nccl-tests' sendrecv: rank r sends to (r+1) mod n and receives from\n"
               "# (r-1+n) mod n in one group; size = one message; busbw = algbw (factor 1); out of place\n");
    else if (!o->json)
        printf("# collectives over threads: f32, sum, root 0, %s; memcpy = 2 threads over the same working set,\n"
               "# best of libc memcpy and streaming stores, in bytes read+written per s\n"
               "# traffic/memcpy = (minimal bytes read+written by all ranks per call / time) / memcpy bytes per s\n"
               "# x naive = time of the naive thread design (pthread_barrier, reduce own slice, copy; out of\n"
               "#   place) / time here: > 1 is faster. Per row, memcpy, this communicator and the naive design\n"
               "#   run interleaved, %d rounds, best of each\n",
               o->in_place ? "in place" : "out of place", ROUNDS);
    for (int wi = 0; wi < o->num_worlds; wi++) {
        int n = o->worlds[wi];
        shs_world_t *w;
        shs_world_config_t wc = {.world_size = n, .device_mem = SIZE_MAX, .timeout_ms = 600000, .name = "bench",
                                 .backend = o->backend};
        if (shs_world_create(&w, &wc) != SHS_OK) {
            sim_error("bench", "%s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
        for (int oi = 0; oi < num_ops; oi++) {
            shs_coll_op_t op = ops[oi];
            if (!o->json)
                printf("#\n# %s  nranks %d\n# %12s %12s %5s %6s %10s %12s %8s %8s %11s %11s\n", row_name(op), n,
                       "size(B)", "count", "type", "redop", "time(us)", "memcpy(GB/s)", "traffic/", "x naive",
                       "algbw(GB/s)", "busbw(GB/s)");
            size_t unit = (p2p ? 1 : (size_t)n) * sizeof(float), last = 0;
            int skipped_small = 0;
            for (double sz = (double)o->min_bytes; sz <= (double)o->max_bytes * 1.0000001; sz *= o->factor) {
                size_t bytes = (size_t)sz / unit * unit; /* whole f32 elements, a multiple of N */
                if (bytes == 0) {
                    skipped_small = 1;
                    continue;
                }
                if (bytes == last) continue; /* a small --factor rounds to the same row */
                last = bytes;
                size_t ws = working_set(op, n, bytes, in_place);
                if ((double)ws > 0.5 * ram) {
                    if (!o->json) printf("  %12zu  (skipped: %zu bytes of buffers exceed half of RAM)\n", bytes, ws);
                    continue;
                }
                coll_row_t row = {.naive_us = -1};
                for (int round = 0; round < ROUNDS; round++) {
                    double mbw = shs_bench_memcpy_bw(ws, 2);
                    shs_bench_coll_t r;
                    if (shs_bench_collective(w, op, bytes, in_place, o->row_seconds / ROUNDS, &r) != SHS_OK) {
                        sim_error("bench", "%s", shs_last_error());
                        shs_world_destroy(w);
                        return SIM_EXIT_ERROR;
                    }
                    double naive = o->backend == SHS_WORLD_CPU && !p2p
                                       ? shs_bench_naive_us(op, n, bytes, o->row_seconds / ROUNDS) : -1;
                    if (round == 0 || r.time_us < row.c.time_us) row.c = r;
                    if (mbw > row.memcpy_bw) row.memcpy_bw = mbw;
                    if (naive > 0 && (row.naive_us < 0 || naive < row.naive_us)) row.naive_us = naive;
                }
                row.ratio = row.memcpy_bw > 0 ? row.c.traffic / (row.c.time_us * 1e-6) / row.memcpy_bw : 0;
                add_coll(res, &row);
                if (!o->json) {
                    char vs[16] = "-";
                    if (row.naive_us > 0) snprintf(vs, sizeof vs, "%.2f", row.naive_us / row.c.time_us);
                    printf("  %12zu %12zu %5s %6s %10.2f %12.2f %8.3f %8s %11.3f %11.3f\n", row.c.bytes, row.c.count,
                           "f32", reduces(op) ? "sum" : "none", row.c.time_us, row.memcpy_bw / 1e9, row.ratio, vs,
                           row.c.algbw, row.c.busbw);
                    fflush(stdout);
                }
            }
            if (skipped_small && !o->json)
                printf("# (sizes below %zu bytes skipped: one f32 element per rank is the smallest row)\n", unit);
        }
        shs_world_destroy(w);
    }
    return SIM_EXIT_OK;
}

/* Default model at world 4; steps of the four strategies interleaved so
 * that machine noise hits them alike. */
static int run_training(const bench_opts_t *o, results_t *res) {
    shs_corpus_t corpus;
    shs_corpus_builtin(&corpus);
    shs_trainer_t *t[SHS_BENCH_STRATEGIES] = {0};
    double total[SHS_BENCH_STRATEGIES] = {0};
    int rc = SIM_EXIT_ERROR;
    shs_train_config_t cfg = shs_train_default_config();
    cfg.backend = o->backend;
    for (int k = 0; k < SHS_BENCH_STRATEGIES; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        float loss;
        if (shs_trainer_create(&t[k], &cfg, &corpus) != SHS_OK || shs_trainer_step(t[k], &loss) != SHS_OK) goto out;
    }
    for (int s = 0; s < o->train_steps; s++) {
        for (int k = 0; k < SHS_BENCH_STRATEGIES; k++) {
            float loss;
            double t0 = shs_now_seconds();
            if (shs_trainer_step(t[k], &loss) != SHS_OK) goto out;
            total[k] += shs_now_seconds() - t0;
        }
    }
    if (!o->json)
        printf("#\n# training step: default model (L=%d C=%d T=%d), world %d, micro-batch %d, %d interleaved steps each\n"
               "# %-10s %12s %12s\n",
               cfg.model.num_layers, cfg.model.channels, cfg.model.context, cfg.world_size, cfg.micro_batch,
               o->train_steps, "strategy", "step(ms)", "ratio/ddp");
    for (int k = 0; k < SHS_BENCH_STRATEGIES; k++) {
        double ms = total[k] / o->train_steps * 1e3, ratio = total[k] / total[SHS_DDP];
        res->train_ms[k] = ms;
        if (!o->json)
            printf("  %-10s %12.1f %12.3f\n", shs_strategy_name((shs_strategy_kind_t)k), ms, ratio);
    }
    res->train_world = cfg.world_size;
    res->have_train = 1;
    rc = SIM_EXIT_OK;
out:
    if (rc != SIM_EXIT_OK) sim_error("bench", "%s", shs_last_error());
    for (int k = 0; k < SHS_BENCH_STRATEGIES; k++) shs_trainer_destroy(t[k]);
    return rc;
}

/* ZeRO-3 at a fixed global batch of 64 sequences: step time as N grows, and
 * what each rank holds beyond the model's own state (params, grads,
 * optimizer state, activations): peak communication and other buffers. */
static int run_scaling(const bench_opts_t *o, results_t *res) {
    /* up to 64 ranks on however few cores: slower per rank,
     * but no collapse; a global batch every world divides */
    enum { GLOBAL_BATCH = 64 };
    static const int worlds[] = {1, 2, 4, 8, 16, 32, 64};
    shs_corpus_t corpus;
    shs_corpus_builtin(&corpus);
    if (!o->json)
        printf("#\n# scaling: zero3, default model, global batch %d sequences, %d steps per world\n"
               "# %6s %6s %10s %10s %16s %12s %10s\n",
               GLOBAL_BATCH, o->train_steps, "world", "mbatch", "step(ms)", "ratio/N=1", "model's own(MiB)", "buffers(MiB)", "buffers(%)");
    double base = 0;
    for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
        shs_train_config_t cfg = shs_train_default_config();
        cfg.backend = o->backend;
        cfg.world_size = worlds[i];
        cfg.micro_batch = GLOBAL_BATCH / worlds[i];
        shs_trainer_t *t;
        float loss;
        if (shs_trainer_create(&t, &cfg, &corpus) != SHS_OK || shs_trainer_step(t, &loss) != SHS_OK) {
            sim_error("bench", "%s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
        double t0 = shs_now_seconds();
        for (int s = 0; s < o->train_steps; s++) {
            if (shs_trainer_step(t, &loss) != SHS_OK) {
                sim_error("bench", "%s", shs_last_error());
                shs_trainer_destroy(t);
                return SIM_EXIT_ERROR;
            }
        }
        double ms = (shs_now_seconds() - t0) / o->train_steps * 1e3;
        double own = 0, extra = 0; /* worst rank */
        for (int r = 0; r < cfg.world_size; r++) {
            shs_mem_stats_t m;
            shs_trainer_mem_stats(t, r, &m);
            double o_r = (double)(m.peak[SHS_MEM_PARAMS] + m.peak[SHS_MEM_GRADS] + m.peak[SHS_MEM_OPTIM] +
                                  m.peak[SHS_MEM_ACTIVATIONS]);
            double e_r = (double)(m.peak[SHS_MEM_COMM] + m.peak[SHS_MEM_OTHER]);
            if (e_r > extra) { extra = e_r; own = o_r; }
            if (r == 0 && extra == 0) own = o_r;
        }
        double per_rank = own;
        shs_trainer_destroy(t);
        if (i == 0) base = ms;
        int k = res->num_scale++;
        res->scale[k].world = cfg.world_size;
        res->scale[k].micro_batch = cfg.micro_batch;
        res->scale[k].step_ms = ms;
        res->scale[k].device_bytes = per_rank;
        res->scale[k].extra_bytes = extra;
        if (!o->json)
            printf("  %6d %6d %10.1f %10.3f %16.2f %12.2f %10.1f\n", cfg.world_size, cfg.micro_batch, ms, ms / base,
                   per_rank / 1048576.0, extra / 1048576.0, 100.0 * extra / per_rank);
    }
    return SIM_EXIT_OK;
}

static int run_matmul(const bench_opts_t *o, results_t *res) {
    shs_cpu_peak_t peak;
    shs_bench_cpu_peak(&peak);
    res->peak = peak;
    /* the default model's shapes (BT = 4 x 64) and a GPT-2 small layer */
    static const struct { const char *what; int BT, C, OC; } shapes[] = {
        {"attn qkv", 256, 128, 384},   {"attn proj", 256, 128, 128}, {"mlp fc", 256, 128, 512},
        {"mlp proj", 256, 512, 128},   {"lm head", 256, 128, 256},   {"gpt2 mlp fc", 1024, 768, 3072},
    };
    if (!o->json)
        printf("#\n# matmul forward (CPU backend, %d threads); fp32 peak estimate: %d cores x %.2f GHz x %d lanes (%s)"
               " x %d (fma) x %d pipes = %.0f GFLOP/s\n# %-12s %6s %6s %6s %10s %10s\n",
               peak.cores, peak.cores, peak.ghz, peak.vector_floats, peak.isa, peak.fma ? 2 : 1, peak.fma_units,
               peak.peak_gflops, "shape", "BT", "C", "OC", "GFLOP/s", "of peak");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double g = shs_bench_matmul_gflops(shapes[i].BT, shapes[i].C, shapes[i].OC, peak.cores);
        double frac = peak.peak_gflops > 0 ? g / peak.peak_gflops : 0;
        res->mm[res->num_mm].what = shapes[i].what;
        res->mm[res->num_mm].BT = shapes[i].BT;
        res->mm[res->num_mm].C = shapes[i].C;
        res->mm[res->num_mm].OC = shapes[i].OC;
        res->mm[res->num_mm++].gflops = g;
        if (!o->json)
            printf("  %-12s %6d %6d %6d %10.1f %9.1f%%\n", shapes[i].what, shapes[i].BT, shapes[i].C, shapes[i].OC, g,
                   100 * frac);
    }
    return SIM_EXIT_OK;
}

#ifdef SHS_HAVE_JANSSON
static void print_json(const results_t *r) {
    json_t *root = json_object(), *coll = json_array(), *train = json_array(), *mm = json_array();
    for (int i = 0; i < r->num_coll; i++) {
        const shs_bench_coll_t *c = &r->coll[i].c;
        json_array_append_new(coll, json_pack("{s:s,s:i,s:I,s:I,s:s,s:s,s:b,s:i,s:f,s:f,s:f,s:f,s:f,s:f}", "op",
                                              row_name(c->op), "nranks", c->nranks, "size_bytes",
                                              (json_int_t)c->bytes, "count", (json_int_t)c->count, "type", "f32",
                                              "redop", reduces(c->op) ? "sum" : "none", "in_place", c->in_place, "iters", c->iters, "time_us",
                                              c->time_us, "memcpy_GBps", r->coll[i].memcpy_bw / 1e9,
                                              "traffic_over_memcpy", r->coll[i].ratio, "naive_time_us",
                                              r->coll[i].naive_us, "algbw_GBps", c->algbw,
                                              "busbw_GBps", c->busbw));
    }
    for (int k = 0; r->have_train && k < SHS_BENCH_STRATEGIES; k++)
        json_array_append_new(train, json_pack("{s:s,s:i,s:f,s:f}", "strategy", shs_strategy_name((shs_strategy_kind_t)k),
                                               "world", r->train_world, "step_ms", r->train_ms[k], "ratio_to_ddp",
                                               r->train_ms[k] / r->train_ms[SHS_DDP]));
    for (int i = 0; i < r->num_mm; i++)
        json_array_append_new(mm, json_pack("{s:s,s:i,s:i,s:i,s:f,s:f}", "shape", r->mm[i].what, "BT", r->mm[i].BT, "C",
                                            r->mm[i].C, "OC", r->mm[i].OC, "gflops", r->mm[i].gflops, "of_peak",
                                            r->peak.peak_gflops > 0 ? r->mm[i].gflops / r->peak.peak_gflops : 0.0));
    json_t *scale = json_array();
    for (int i = 0; i < r->num_scale; i++)
        json_array_append_new(scale, json_pack("{s:i,s:i,s:f,s:f,s:I,s:I}", "world", r->scale[i].world, "micro_batch",
                                               r->scale[i].micro_batch, "step_ms", r->scale[i].step_ms,
                                               "ratio_to_world1", r->scale[i].step_ms / r->scale[0].step_ms,
                                               "model_bytes_per_rank", (json_int_t)r->scale[i].device_bytes,
                                               "buffer_bytes_per_rank", (json_int_t)r->scale[i].extra_bytes));
    json_object_set_new(root, "scaling", scale);
    json_object_set_new(root, "collectives", coll);
    json_object_set_new(root, "train", train);
    json_object_set_new(root, "matmul", mm);
    if (r->num_mm)
        json_object_set_new(root, "cpu", json_pack("{s:i,s:f,s:s,s:b,s:i,s:f}", "cores", r->peak.cores, "ghz",
                                                   r->peak.ghz, "isa", r->peak.isa, "fma", r->peak.fma,
                                                   "vector_floats", r->peak.vector_floats, "peak_gflops",
                                                   r->peak.peak_gflops));
    json_dumpf(root, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(root);
}
#endif

/* The meta backend's speed target: `compare --model gpt3-175b --world 1024` over all
 * strategies and variants (24 meta runs of 2 steps each) in under 10 s on a
 * 2-core laptop. Wall time of the same runs the command makes. */
static int run_compare_bench(void) {
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD,
                                                SHS_HYBRID_SHARD_ZERO2};
    shs_meta_config_t mc = {.steps = 2};
    mc.train = shs_train_default_config();
    mc.train.model = shs_model_preset_find("gpt3-175b")->cfg;
    mc.train.world_size = 1024;
    mc.train.micro_batch = 1;
    mc.train.strategy.param_dtype = SHS_BF16;
    mc.train.strategy.shard_group_size = 8;
    mc.train.device_mem = SIZE_MAX;
    double t0 = shs_now_seconds();
    int runs = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int v = 0; v < 4; v++) {
            mc.train.strategy.kind = kinds[k];
            mc.train.checkpoint_activations = v & 1;
            mc.train.strategy.offload = !(v & 2) ? SHS_OFFLOAD_NONE
                               : (kinds[k] == SHS_ZERO3 || kinds[k] == SHS_HYBRID_SHARD) ? SHS_OFFLOAD_PARAMS
                                                                                        : SHS_OFFLOAD_OPTIMIZER;
            shs_meta_result_t r;
            if (shs_meta_run(&mc, &r) != SHS_OK) {
                sim_error("bench", "compare benchmark: %s", shs_last_error());
                return SIM_EXIT_ERROR;
            }
            shs_meta_result_free(&r);
            runs++;
        }
    double dt = shs_now_seconds() - t0;
    printf("#\n# compare: gpt3-175b (174.6B parameters), world 1024, bf16, all strategies x {plain, ckpt, offload,\n"
           "# ckpt+offload} on the meta backend (target: under 10 s on a 2-core laptop)\n"
           "  %d meta runs of 2 steps in %.3f s (%.1f ms per run)\n", runs, dt, 1e3 * dt / runs);
    return SIM_EXIT_OK;
}

/* The trace importers' speed targets: import + check 1 M records across 64
 * ranks at 1.5 M records/s from shardsim's text format, 2 M records/s from
 * one NCCL log. */
static int run_trace_bench(void) {
    shs_trace_bench_t b, nb;
    if (shs_trace_bench_import(1000000, 64, NULL, &b) != SHS_OK ||
        shs_trace_bench_import_nccl(1000000, 64, NULL, &nb) != SHS_OK) {
        sim_error("bench", "trace benchmark: %s", shs_last_error());
        return SIM_EXIT_ERROR;
    }
    double s = b.load_s + b.check_s, ns = nb.load_s + nb.check_s;
    printf("#\n# trace import: %zu records, %d ranks, %d communicators, loaded and checked (targets: 1.5 M records/s\n"
           "# from shardsim text, 2 M records/s from an NCCL log)\n"
           "  shardsim text, %d files (%.1f MiB; written in %.2f s): load %.3f s + check %.3f s = %.3f s: "
           "%.2f M records/s (%zu issues)\n"
           "  NCCL log, 1 file (%.1f MiB; written in %.2f s): load %.3f s + check %.3f s = %.3f s: "
           "%.2f M records/s (%zu issues)\n",
           b.records, b.world, b.comms, b.files, b.file_bytes / 1048576.0, b.write_s, b.load_s, b.check_s, s,
           s > 0 ? b.records / s / 1e6 : 0.0, b.issues, nb.file_bytes / 1048576.0, nb.write_s, nb.load_s,
           nb.check_s, ns, ns > 0 ? nb.records / ns / 1e6 : 0.0, nb.issues);
    if (nb.records != b.records)
        printf("  (the NCCL log loaded back %zu records, not %zu)\n", nb.records, b.records);
    return SIM_EXIT_OK;
}

int sim_cmd_bench(int argc, char **argv) {
    bench_opts_t o;
    int rc = parse_bench_args(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.json && !shs_feature_available(SHS_FEATURE_JANSSON))
        return sim_usage_error("bench", "--format json %s", shs_feature_missing(SHS_FEATURE_JANSSON));
    if (o.backend != SHS_WORLD_CPU) {
        int gpus;
        if (shs_cuda_device_count(&gpus) != SHS_OK) {
            sim_error("bench", "--backend %s: %s", o.backend == SHS_WORLD_CUDA ? "cuda" : "cuda-nccl",
                    shs_last_error());
            return SIM_EXIT_ERROR;
        }
        if (o.do_matmul && !o.json) printf("# matmul table: CPU backend only, skipped with a CUDA backend\n");
        o.do_matmul = 0;
    }
    results_t res = {0};
    rc = SIM_EXIT_OK;
    if (o.do_coll) rc = run_collectives(&o, o.ops, o.num_ops, &res);
    static const shs_coll_op_t sendrecv[] = {SHS_OP_SEND};
    if (rc == SIM_EXIT_OK && o.do_p2p) rc = run_collectives(&o, sendrecv, 1, &res);
    if (rc == SIM_EXIT_OK && o.do_train) rc = run_training(&o, &res);
    if (rc == SIM_EXIT_OK && o.do_train) rc = run_scaling(&o, &res);
    if (rc == SIM_EXIT_OK && o.do_matmul) rc = run_matmul(&o, &res);
    if (rc == SIM_EXIT_OK && o.do_compare && !o.json) rc = run_compare_bench();
    if (rc == SIM_EXIT_OK && o.do_trace && !o.json) rc = run_trace_bench();
#ifdef SHS_HAVE_JANSSON
    if (rc == SIM_EXIT_OK && o.json) print_json(&res);
#endif
    free(res.coll);
    return rc;
}
