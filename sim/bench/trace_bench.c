/* trace_bench.c - generate a large consistent trace, write it in the text
 * format, and time loading and checking it (see trace_bench.h).
 * What it is not: an importer or an analysis of its own. */
#include "bench/trace_bench.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardsim/clock.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"

#define UNITS 12
#define GROUP 8
#define UNIT_ELEMS 49568 /* one rank's shard of a unit (the default model's block, f32) */

typedef struct {
    uint32_t fwd[UNITS], bwd[UNITS], loss; /* marker ids */
} ids_t;

/* Comms: GROUP-rank shard groups of consecutive ranks, replica groups of the
 * ranks with the same position in their shard group, and the world. */
static shs_status_t declare(shs_trace_t *t, int world, int g, int **shard_of, int **replica_of) {
    int ng = world / g, *ranks = malloc((size_t)world * sizeof *ranks);
    *shard_of = malloc((size_t)world * sizeof(int));
    *replica_of = malloc((size_t)world * sizeof(int));
    if (!ranks || !*shard_of || !*replica_of) {
        free(ranks);
        return shs_set_error(SHS_HOST_OOM, "trace bench: out of memory");
    }
    shs_status_t st = SHS_OK;
    char name[64];
    for (int s = 0; s < ng && st == SHS_OK; s++) {
        for (int k = 0; k < g; k++) ranks[k] = s * g + k;
        snprintf(name, sizeof name, "shard%d", s);
        int id;
        st = shs_trace_add_comm(t, name, g, ranks, &id);
        for (int k = 0; k < g; k++) (*shard_of)[s * g + k] = id;
    }
    for (int k = 0; k < g && st == SHS_OK; k++) {
        for (int s = 0; s < ng; s++) ranks[s] = s * g + k;
        snprintf(name, sizeof name, "replica%d", k);
        int id;
        st = shs_trace_add_comm(t, name, ng, ranks, &id);
        for (int s = 0; s < ng; s++) (*replica_of)[s * g + k] = id;
    }
    free(ranks);
    return st;
}

/* One rank's sequence: n records of the repeating step described in trace_bench.h. */
static shs_status_t gen_rank(shs_trace_t *t, int r, size_t n, int shard, int replica, int world_comm,
                             const ids_t *m, int64_t *seq) {
    memset(seq, 0, (size_t)t->ncomms * sizeof *seq);
    size_t i = 0;
    double clock = 1e-4 * (r % 7); /* a little skew between ranks */
    while (i < n) {
        for (int k = 0; k < UNITS + 3 * UNITS + 1 && i < n; k++, i++) {
            shs_trace_rec_t x = shs_trace_rec_init();
            x.rank = r;
            x.dtype = SHS_F32;
            if (k < UNITS) { /* forward all-gather of unit k */
                x.op = SHS_OP_ALL_GATHER;
                x.comm = shard;
                x.marker = m->fwd[k];
                x.count = UNIT_ELEMS;
            } else if (k < 4 * UNITS) { /* backward of unit u: all-gather, reduce-scatter, replica all-reduce */
                int u = UNITS - 1 - (k - UNITS) / 3, phase = (k - UNITS) % 3;
                x.marker = m->bwd[u];
                x.op = phase == 0 ? SHS_OP_ALL_GATHER : phase == 1 ? SHS_OP_REDUCE_SCATTER : SHS_OP_ALL_REDUCE;
                x.comm = phase == 2 ? replica : shard;
                x.count = UNIT_ELEMS;
                if (phase) x.redop = phase == 1 ? SHS_AVG : SHS_SUM;
            } else { /* the loss */
                x.op = SHS_OP_ALL_REDUCE;
                x.comm = world_comm;
                x.marker = m->loss;
                x.count = 1;
                x.redop = SHS_SUM;
            }
            x.bytes = x.count * 4;
            x.seq = seq[x.comm]++;
            x.t_start = clock;
            x.t_end = clock + 5e-5 * (1 + (x.op == SHS_OP_ALL_REDUCE));
            clock = x.t_end + 1e-5;
            SHS_CHECK(shs_trace_append(t, &x));
        }
    }
    return SHS_OK;
}

static shs_status_t generate(shs_trace_t *t, size_t per_rank) {
    int world = t->world, g = world % GROUP == 0 ? GROUP : world;
    int *shard_of = NULL, *replica_of = NULL, wc;
    int64_t *seq = NULL;
    ids_t m;
    shs_status_t st = declare(t, world, g, &shard_of, &replica_of);
    if (st == SHS_OK) st = shs_trace_add_comm(t, "world", world, NULL, &wc);
    char name[32];
    for (int u = 0; u < UNITS && st == SHS_OK; u++) {
        snprintf(name, sizeof name, "fwd/block%d", u);
        m.fwd[u] = shs_trace_intern(t, name);
        snprintf(name, sizeof name, "bwd/block%d", u);
        m.bwd[u] = shs_trace_intern(t, name);
        if (m.fwd[u] == UINT32_MAX || m.bwd[u] == UINT32_MAX) st = shs_set_error(SHS_HOST_OOM, "trace bench: out of memory");
    }
    if (st == SHS_OK && (m.loss = shs_trace_intern(t, "loss")) == UINT32_MAX) st = shs_set_error(SHS_HOST_OOM, "trace bench: out of memory");
    if (st == SHS_OK && !(seq = malloc((size_t)t->ncomms * sizeof *seq))) st = shs_set_error(SHS_HOST_OOM, "trace bench: out of memory");
    for (int r = 0; r < world && st == SHS_OK; r++) {
        shs_trace_rank_t *rk = &t->ranks[r];
        if (!(rk->recs = malloc(per_rank * sizeof *rk->recs))) { st = shs_set_error(SHS_HOST_OOM, "trace bench: out of memory"); break; }
        rk->cap = per_rank;
        st = gen_rank(t, r, per_rank, shard_of[r], replica_of[r], wc, &m, seq);
    }
    free(seq);
    free(shard_of);
    free(replica_of);
    return st;
}

/* Remove dir's rank files and dir itself; returns their total size. */
static uint64_t remove_dir(const char *dir, int world) {
    uint64_t total = 0;
    char path[4096 + 32];
    for (int r = 0; r < world; r++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/rank%d.trace", dir, r);
        if (stat(path, &sb) == 0) total += (uint64_t)sb.st_size;
        unlink(path);
    }
    rmdir(dir);
    return total;
}

/* NCCL's names of the ops the generator issues, as its COLL log prints them. */
static const char *nccl_op_name(shs_coll_op_t op) {
    return op == SHS_OP_ALL_GATHER ? "AllGather" : op == SHS_OP_REDUCE_SCATTER ? "ReduceScatter" : "AllReduce";
}

/* Rank g's communicator pointer for comm c, and comm c's commId (made up, unique). */
#define NCCL_PTR(g, c) (0x550000000000ull + ((((unsigned long long)(g) << 16) + (unsigned long long)(c)) << 12))
#define NCCL_ID(c) (0x6b1c3f27d0a90000ull + (unsigned long long)(c))

/* Write t as one combined NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL log
 * (8 ranks a node, one process a rank): every rank's Init COMPLETE line per
 * communicator, then the ranks' collective lines interleaved round robin,
 * as the processes of one job print them into one file. */
static shs_status_t write_nccl_log(const shs_trace_t *t, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return shs_set_error(SHS_IO, "%s: cannot create: %s", path, strerror(errno));
    for (int c = 0; c < t->ncomms; c++)
        for (int l = 0; l < t->comms[c].size; l++) {
            int g = t->comms[c].ranks[l];
            fprintf(f, "node%02d:%d:%d [%d] NCCL INFO comm 0x%llx rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 "
                    "commId 0x%llx - Init COMPLETE\n", g / 8, 4000 + g, 4000 + g, g % 8, NCCL_PTR(g, c), l,
                    t->comms[c].size, g % 8, g % 8, 0x18 + g % 8, NCCL_ID(c));
        }
    size_t most = 0;
    for (int r = 0; r < t->world; r++) most = t->ranks[r].n > most ? t->ranks[r].n : most;
    for (size_t i = 0; i < most; i++)
        for (int g = 0; g < t->world; g++) {
            if (i >= t->ranks[g].n) continue;
            const shs_trace_rec_t *x = &t->ranks[g].recs[i];
            unsigned long long b = 0x7f3a00000000ull + ((unsigned long long)i % 4096) * 0x100000;
            fprintf(f, "node%02d:%d:%d [%d] NCCL INFO %s: opCount %llx sendbuff 0x%llx recvbuff 0x%llx count %llu "
                    "datatype %d op %d root 0 comm 0x%llx [nranks=%d] stream 0x%llx\n", g / 8, 4000 + g, 4000 + g,
                    g % 8, nccl_op_name(x->op), (unsigned long long)x->seq, b, b + 0x80000,
                    (unsigned long long)x->count, shs_dtype_nccl((shs_dtype_t)x->dtype),
                    x->redop == SHS_TRACE_NONE ? 0 : x->redop, NCCL_PTR(g, x->comm), t->comms[x->comm].size,
                    0x55d0c1b2e000ull + (unsigned long long)g * 0x2000);
        }
    if (fclose(f) != 0) return shs_set_error(SHS_IO, "%s: write failed: %s", path, strerror(errno));
    return SHS_OK;
}

/* Remove what write_input made under dir, and dir; returns their total size. */
static uint64_t remove_input(const char *dir, int world, int nccl) {
    if (!nccl) return remove_dir(dir, world);
    char path[4096 + 32];
    struct stat sb;
    uint64_t total = 0;
    snprintf(path, sizeof path, "%s/job.log", dir);
    if (stat(path, &sb) == 0) total = (uint64_t)sb.st_size;
    unlink(path);
    rmdir(dir);
    return total;
}

/* The body of both benchmarks: the trace in memory, written as shardsim
 * text files (nccl = 0) or one NCCL log, loaded back and checked. */
static shs_status_t bench(size_t records, int world, const char *parent_dir, int nccl, shs_trace_bench_t *out) {
    memset(out, 0, sizeof *out);
    if (world < 1 || world > SHS_TRACE_MAX_WORLD || records < (size_t)world)
        return shs_set_error(SHS_INVALID_ARG, "trace bench: %zu records over %d ranks (want world in 1..%d and at "
                             "least one record per rank)", records, world, SHS_TRACE_MAX_WORLD);
    if (!parent_dir) parent_dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[4096], input[4096 + 32];
    snprintf(dir, sizeof dir, "%s/shardsim-trace-bench-XXXXXX", parent_dir);
    if (!mkdtemp(dir)) return shs_set_error(SHS_IO, "%s: cannot create a directory: %s", dir, strerror(errno));
    snprintf(input, sizeof input, nccl ? "%s/job.log" : "%s", dir);
    size_t per_rank = records / (size_t)world;
    shs_trace_t *t = NULL;
    double t0 = shs_now_seconds();
    shs_status_t st = shs_trace_create(&t, world);
    if (st == SHS_OK) st = generate(t, per_rank);
    double t1 = shs_now_seconds();
    if (st == SHS_OK) st = nccl ? write_nccl_log(t, input) : shs_trace_write_dir(t, dir);
    double t2 = shs_now_seconds();
    if (t) {
        out->comms = t->ncomms;
        shs_trace_free(t);
        t = NULL;
    }
    shs_trace_load_opts_t lo = {0};
    double t3 = shs_now_seconds(), t4 = t3, t5 = t3;
    if (st == SHS_OK) st = shs_trace_load(&t, input, &lo);
    t4 = shs_now_seconds();
    shs_trace_report_t rep = {0};
    if (st == SHS_OK) st = shs_trace_check(t, &rep, 4);
    t5 = shs_now_seconds();
    if (st == SHS_OK) {
        out->records = shs_trace_num_records(t);
        out->world = t->world;
        out->files = nccl ? 1 : lo.files_read;
        out->issues = rep.total;
        out->coll_completed = rep.coll_completed;
        out->gen_s = t1 - t0;
        out->write_s = t2 - t1;
        out->load_s = t4 - t3;
        out->check_s = t5 - t4;
        shs_trace_report_free(&rep);
    }
    shs_trace_free(t);
    out->file_bytes = remove_input(dir, world, nccl);
    return st;
}

shs_status_t shs_trace_bench_import(size_t records, int world, const char *parent_dir, shs_trace_bench_t *out) {
    return bench(records, world, parent_dir, 0, out);
}

shs_status_t shs_trace_bench_import_nccl(size_t records, int world, const char *parent_dir, shs_trace_bench_t *out) {
    return bench(records, world, parent_dir, 1, out);
}
