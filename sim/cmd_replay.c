/* cmd_replay.c - `shardsim replay PATH`: load a trace (any supported format,
 * detected from content), check its consistency, and replay it on rank
 * threads with real buffers, reporting the time inside the calls and, under
 * --max-bytes, capped calls' times scaled linearly to the trace's sizes.
 * Exit: 0 consistent and replayed, 1 inconsistent / replay failed /
 * unreadable or malformed input, 2 usage.
 * What it is not: the analysis or the importers (src/trace_*.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "options.h"
#include "commands.h"
#include "shardsim/durable.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_export_chakra.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_perfetto.h"
#include "shardsim/trace_replay.h"
#include "shardsim/units.h"
#include "replay_timing.h"

#define usage_error(...) sim_usage_error("replay", __VA_ARGS__)

/* The options of `replay`; the rows' order is --help's. */
typedef enum {
    R_FORMAT, R_WORLD, R_FIRST_DIM, R_MAX_BYTES, R_MEM_LIMIT, R_CHECK_ONLY, R_NETWORK, R_SYSTEM, R_ALGO,
    R_COMPARE_ALGORITHMS, R_MAX_ISSUES,
    R_TIMEOUT, R_EXPORT_TEXT, R_EXPORT_CHAKRA, R_EXPORT_PERFETTO,
    R_NUM_OPTIONS
} replay_opt_t;

static const sim_opt_t replay_options[R_NUM_OPTIONS] = {
    [R_FORMAT] = {"--format", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F", "read as format F instead of detecting it"},
    [R_WORLD] = {"--world", NULL, SIM_OPT_INT, 1, SHS_TRACE_MAX_WORLD, 0, 0, "N",
                 "ranks: expand an ASTRA-sim workload to N ranks; the world of a\n"
                 "Horovod timeline without readiness ticks; for other formats,\n"
                 "ranks with no file are added (and reported missing)"},
    [R_FIRST_DIM] = {"--first-dim", NULL, SIM_OPT_INT, 1, SHS_TRACE_MAX_WORLD, 0, 0, "N",
                     "ASTRA-sim HYBRID_DATA_MODEL / HYBRID_MODEL_DATA workloads: NPUs in the\n"
                     "network's first dimension (npus_count[0]): the model resp. data groups\n"
                     "(default with --network NET.yml: its npus_count[0]; another value is refused)"},
    [R_MAX_BYTES] = {"--max-bytes", NULL, SIM_OPT_SIZE, 0, 0, 0, 0, "SIZE",
                     "cap each call's largest buffer per rank, e.g. 1MiB (default: no cap;\n"
                     "the replay refuses to allocate more than --mem-limit in all); capped\n"
                     "calls' times are also reported scaled linearly to the trace's bytes"},
    [R_MEM_LIMIT] = {"--mem-limit", NULL, SIM_OPT_SIZE, 0, 0, 0, 0, "SIZE", "total replay buffers allowed"},
    [R_CHECK_ONLY] = {"--check-only", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL, "analyse, do not replay"},
    [R_NETWORK] = {"--network", NULL, SIM_OPT_STR, 0, 0, 0, 0, "N",
                   "estimate each call's time: a preset (hgx-h100, ring-50, pcie: NCCL-like\n"
                   "alpha-beta, GB = 1e9 bytes, latencies NCCL's) or an ASTRA-sim analytical\n"
                   "network .yml, timed by ASTRA-sim's congestion-unaware rules: per dimension\n"
                   "topology Ring | FullyConnected | Switch (1 hop to a ring neighbour, 1,\n"
                   "2 hops), npus_count, bandwidth in GB/s with 1 GB = 2^30 bytes (as\n"
                   "ASTRA-sim), latency in ns per hop; a trace with more ranks than the\n"
                   "network's NPUs is refused"},
    [R_SYSTEM] = {"--system", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F",
                  "ASTRA-sim system JSON for a --network .yml (needs jansson): *-implementation\n"
                  "per dimension (ring, direct, halvingDoubling, doubleBinaryTree),\n"
                  "collective-optimization (baseline, localBWAware), preferred-dataset-splits,\n"
                  "active-chunks-per-dimension, endpoint-delay (ns), local-mem-bw (GB/s,\n"
                  "1 GB = 1e9 bytes, as ASTRA-sim: 3 x bytes / bw per reduced message),\n"
                  "scheduling-policy LIFO | FIFO; read with no effect on a call timed alone:\n"
                  "local-reduction-delay (ASTRA-sim 2.0 times nothing with it), peak-perf,\n"
                  "roofline-enabled, boost-mode, trace-enabled, replay-only; other keys and\n"
                  "values not modelled are refused by name. Default without --system:\n"
                  "ASTRA-sim's built-in values (ring, baseline, endpoint-delay 10 ns, 1 active\n"
                  "chunk) with 1 split and no local-mem-bw (reductions cost no local time)"},
    [R_ALGO] = {"--algo", NULL, SIM_OPT_STR, 0, 0, 0, 0, "A", "ring | tree | direct: the algorithm of a --network preset's estimates\n"
                "(with a .yml the system JSON's *-implementation decides)"},
    [R_COMPARE_ALGORITHMS] = {"--compare-algorithms", NULL, SIM_OPT_BOOL, 0, 0, 0, 0, NULL,
                              "with --network: ring, tree and direct side by side"},
    [R_MAX_ISSUES] = {"--max-issues", NULL, SIM_OPT_INT, 1, 100000, 0, 0, "K", "issues to print"},
    [R_TIMEOUT] = SIM_ROW_TIMEOUT,
    [R_EXPORT_TEXT] = {"--export-text", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F", "also write the normalized trace in shardsim's text format to F"},
    [R_EXPORT_CHAKRA] = {"--export-chakra", NULL, SIM_OPT_STR, 0, 0, 0, 0, "P", "also write Chakra ET files P.<rank>.et (for ASTRA-sim)"},
    [R_EXPORT_PERFETTO] = {"--export-perfetto", NULL, SIM_OPT_STR, 0, 0, 0, 0, "F",
                           "also write Chrome/Perfetto trace JSON to F (ui.perfetto.dev,\n"
                           "chrome://tracing): a track per rank, a slice per call; calls without\n"
                           "times are laid out back to back, lasting the --network estimate\n"
                           "(or 1 us each without --network)"},
};

static const char *const replay_defaults[R_NUM_OPTIONS] = {
    [R_WORLD] = "8", [R_MEM_LIMIT] = "4GiB", [R_CHECK_ONLY] = "false", [R_ALGO] = "ring",
    [R_COMPARE_ALGORITHMS] = "false", [R_MAX_ISSUES] = "20", [R_TIMEOUT] = "10",
};

static const char replay_usage_head[] =
    "usage: shardsim replay PATH [options]\n"
    "\n"
    "Load a communication trace (a file, or a directory of per-rank files), check that\n"
    "the ranks' sequences agree and would not deadlock, then run it on simulated GPUs.\n"
    "Formats (detected from content): shardsim, nccl, pytorch-et, chakra, astra, kineto, flight, horovod.\n"
    "PATH must be a regular file or a directory: a FIFO, device or socket (or one inside\n"
    "the directory) is refused at once, not waited on; save a stream to a file first.\n"
    "A gzip-compressed file (.gz, or any file starting with gzip's magic bytes) is\n"
    "inflated transparently with zlib, in a directory too (a build without zlib\n"
    "refuses it, naming the library).\n"
    "Garbage values (negative ranks or sizes, times beyond 2^63 ns, an itemsize of 0)\n"
    "are refused with the file and line or record, exit 1.\n"
    "Options take '--opt V' or '--opt=V'; a [true|false] option alone means true.\n"
    "\n";

/* PATH, the one positional argument */
static int replay_path(void *ctx, sim_args_t *a, int id, const sim_opts_t *o) {
    (void)id;
    (void)o;
    const char **path = ctx;
    if (a->i == a->after_bare_bool && *path) return sim_args_unexpected(a);
    if (*path) return usage_error("more than one PATH: '%s' after '%s'", a->argv[a->i], *path);
    *path = a->argv[a->i];
    return -1;
}

static const char *human(char *buf, size_t n, double b) { return shs_format_bytes(buf, n, b); }

/* Time inside the calls, mean over the ranks that made them; with a cap, the
 * capped calls' times scaled to the trace's bytes; nccl-tests' bandwidths
 * of what was moved. */
static void print_replay_timing(const shs_replay_stats_t *s, int capped) {
    printf("\n  time inside the calls, mean per rank%s\n",
           capped ? "; scaled ms = each capped call's measured time x trace bytes / moved bytes\n"
                    "  (a linear extrapolation to the trace's sizes, not a measurement; uncapped calls keep their "
                    "measured time)" : "");
    printf("  %-15s %14s", "op", "measured ms");
    if (capped) printf(" %14s", "scaled ms");
    printf(" %11s %11s   (bandwidth: moved bytes / measured time)\n", "algbw GB/s", "busbw GB/s");
    double sec = 0, scaled = 0, alg = 0, bus = 0;
    for (int k = 0; k <= SHS_NUM_OPS; k++) {
        int total = k == SHS_NUM_OPS;
        if (!total && !s->ranks[k]) continue;
        if (total && !s->timed_ranks) break;
        double n = total ? (double)s->timed_ranks : (double)s->ranks[k];
        double cs = total ? sec : s->call_seconds[k], ss = total ? scaled : s->scaled_seconds[k];
        double ab = total ? alg : s->alg_bytes[k], bb = total ? bus : s->bus_bytes[k];
        printf("  %-15s %14.6f", total ? "total" : shs_coll_op_name((shs_coll_op_t)k), cs / n * 1e3);
        if (capped) printf(" %14.6f", ss / n * 1e3);
        printf(" %11.3f %11.3f\n", cs > 0 ? ab / cs / 1e9 : 0, cs > 0 ? bb / cs / 1e9 : 0);
        if (!total) { sec += cs; scaled += ss; alg += ab; bus += bb; }
    }
}

/* The --export-* outputs, refused before any is written when one would
 * overwrite the input trace (or a file of its directory) or another output,
 * or the Chakra prefix names no file (shs_out_check, shs_out_prefix_check). */
static shs_status_t check_outputs(const char *input, int world, const char *text, const char *chakra,
                                  const char *perfetto) {
    if (chakra) SHS_CHECK(shs_out_prefix_check("--export-chakra", chakra));
    size_t n = 0, nchakra = chakra ? (size_t)world : 0;
    shs_out_named_t *outs = calloc(2 + nchakra, sizeof *outs);
    char *names = calloc(nchakra ? nchakra : 1, 4096);
    if (!outs || !names) {
        free(outs);
        free(names);
        return shs_set_error(SHS_HOST_OOM, "out of memory");
    }
    if (text) outs[n++] = (shs_out_named_t){"--export-text", text};
    if (perfetto) outs[n++] = (shs_out_named_t){"--export-perfetto", perfetto};
    for (size_t r = 0; r < nchakra; r++) { /* the names shs_trace_export_chakra writes */
        shs_trace_chakra_path(names + r * 4096, 4096, chakra, (int)r);
        outs[n++] = (shs_out_named_t){"--export-chakra", names + r * 4096};
    }
    shs_status_t st = shs_out_check(outs, n, &input, 1);
    free(outs);
    free(names);
    return st;
}

int sim_cmd_replay(int argc, char **argv) {
    const char *path = NULL, *export_text = NULL, *export_chakra = NULL, *export_perfetto = NULL;
    shs_trace_load_opts_t lo = {0};
    shs_replay_opts_t ro = {.timeout_ms = 10000};
    long max_issues = 20;
    int check_only = 0, compare = 0, rc_;
    const char *network = NULL;
    shs_net_algo_t algo = SHS_ALGO_RING;
    const sim_command_t cmd = {"replay", replay_usage_head, replay_options, R_NUM_OPTIONS, replay_defaults,
                               replay_path, &path};
    sim_opts_t o;
    if ((rc_ = sim_opts_parse(&cmd, argc, argv, &o)) >= 0) return rc_;
    if (o.given[R_FORMAT] && shs_trace_format_parse(o.str[R_FORMAT], &lo.format))
        return usage_error("--format: unknown format '%s' (shardsim, nccl, pytorch-et, chakra, astra, kineto, flight, horovod)",
                           o.str[R_FORMAT]);
    if (o.given[R_WORLD]) lo.world = (int)o.num[R_WORLD];
    if (o.given[R_FIRST_DIM]) lo.first_dim = (int)o.num[R_FIRST_DIM];
    if (o.given[R_MAX_BYTES]) {
        size_t sz = o.bytes[R_MAX_BYTES];
        if (sz == 0) return usage_error("--max-bytes: must be > 0, not %s", o.str[R_MAX_BYTES]);
        ro.max_bytes = sz == SIZE_MAX ? 0 : sz;
    }
    if (o.given[R_MEM_LIMIT]) {
        if (o.bytes[R_MEM_LIMIT] == 0) return usage_error("--mem-limit: must be > 0, not %s", o.str[R_MEM_LIMIT]);
        ro.mem_limit = o.bytes[R_MEM_LIMIT];
    }
    check_only = o.given[R_CHECK_ONLY] && o.num[R_CHECK_ONLY];
    compare = o.given[R_COMPARE_ALGORITHMS] && o.num[R_COMPARE_ALGORITHMS];
    if (o.given[R_MAX_ISSUES]) max_issues = (long)o.num[R_MAX_ISSUES];
    if (o.given[R_TIMEOUT]) ro.timeout_ms = (int)ceil(o.num[R_TIMEOUT] * 1000.0);
    export_text = o.str[R_EXPORT_TEXT];
    export_chakra = o.str[R_EXPORT_CHAKRA];
    export_perfetto = o.str[R_EXPORT_PERFETTO];
    network = o.str[R_NETWORK];
    const char *system = o.str[R_SYSTEM];
    int algo_given = o.given[R_ALGO];
    if (algo_given && shs_net_algo_parse(o.str[R_ALGO], &algo))
        return usage_error("--algo takes ring, tree or direct, not %s", o.str[R_ALGO]);
    if (!path) return usage_error("missing PATH (a trace file or a directory of per-rank files)");
    if (compare && !network) return usage_error("--compare-algorithms needs --network");
    if (algo_given && !network) return usage_error("--algo %s needs --network (the algorithm of its time estimates)",
                                                   shs_net_algo_name(algo));
    if (system && !network) return usage_error("--system %s needs --network NET.yml (ASTRA-sim's network file)", system);
    shs_net_t net;
    if (network && shs_net_preset(network, &net) != SHS_OK) {
        if (!strchr(network, '/') && !strstr(network, ".yml")) return usage_error("--network: %s", shs_last_error());
        if (shs_net_load(network, &net) != SHS_OK) {
            sim_error("replay", "%s", shs_last_error());
            return SIM_EXIT_ERROR;
        }
    }
    if (network && net.astra && (algo_given || compare))
        return usage_error("--%s: with an ASTRA-sim network the system JSON's *-implementation picks the algorithm",
                           algo_given ? "algo" : "compare-algorithms");
    if (system && shs_net_set_system(&net, system) != SHS_OK) {
        sim_error("replay", "%s", shs_last_error());
        return SIM_EXIT_ERROR;
    }
    /* HYBRID_DATA_MODEL / _MODEL_DATA groups follow the network's first dimension */
    if (network && net.astra) {
        if (!lo.first_dim) lo.first_dim = net.anet.npus[0];
        else if (lo.first_dim != net.anet.npus[0])
            return usage_error("--first-dim %d disagrees with %s, whose first dimension has %d NPUs (npus_count[0]); "
                               "leave --first-dim out to take the network's", lo.first_dim, network, net.anet.npus[0]);
    }

    shs_trace_t *t;
    if (shs_trace_load(&t, path, &lo) != SHS_OK) {
        sim_error("replay", "%s", shs_last_error());
        return SIM_EXIT_ERROR;
    }
    size_t nrec = shs_trace_num_records(t);
    if (network && net.astra && nrec > 0 && shs_astra_check_trace(&net.anet, &net.asys, t) != SHS_OK) {
        sim_error("replay", "%s: %s", network, shs_last_error());
        shs_trace_free(t);
        return SIM_EXIT_ERROR;
    }
    if (!check_only && nrec > 0 && t->world > SHS_MAX_WORLD) { /* refused before the analysis, not after it */
        sim_error("replay", "%s: %d ranks: the replay runs one thread per rank (1..%d); --check-only analyses any "
                  "world up to %d", path, t->world, SHS_MAX_WORLD, SHS_TRACE_MAX_WORLD);
        shs_trace_free(t);
        return SIM_EXIT_ERROR;
    }
    if (nrec == 0 || t->world < 1) { /* nothing recognizable: not a "consistent" trace */
        sim_error("replay", "%s: no communication records found (format %s)%s", path, t->format,
                lo.files_skipped ? "; some files were of no known format" : "");
        shs_trace_free(t);
        return SIM_EXIT_ERROR;
    }
    printf("shardsim replay: %s\n  format %s, %d ranks, %d communicator%s, %zu records", path, t->format, t->world,
           t->ncomms, t->ncomms == 1 ? "" : "s", nrec);
    if (lo.files_read > 1 || lo.files_skipped) printf(" from %d files", lo.files_read);
    if (lo.files_skipped) printf(" (%d files of no known format skipped)", lo.files_skipped);
    printf("\n");
    if (t->note[0]) printf("  note: %s\n", t->note);
    for (int c = 0; c < t->ncomms; c++) {
        const shs_trace_comm_t *cm = &t->comms[c];
        printf("  comm %s: %d ranks [", cm->name, cm->size);
        for (int k = 0; k < cm->size && k < 16; k++) printf(k ? ",%d" : "%d", cm->ranks[k]);
        printf("%s]\n", cm->size > 16 ? ",..." : "");
    }
    for (int g = 0; g < t->world; g++)
        if (!shs_trace_rank_traced(t, g))
            printf("  rank %d: not traced (the files are single processes' views); left out of the check\n", g);
    for (int g = 0; g < t->world;) { /* ranks --world added that no file holds: runs of them on one line */
        int h = g;
        while (h < t->world && t->ranks[h].n == 0 && shs_trace_rank_traced(t, h)) h++;
        if (h > g) {
            if (h - g == 1) printf("  rank %d: missing: no file and no record of it\n", g);
            else printf("  ranks %d-%d: missing: no file and no record of them\n", g, h - 1);
        }
        g = h > g ? h : g + 1;
    }
    if (check_outputs(path, t->world, export_text, export_chakra, export_perfetto) != SHS_OK) {
        sim_error("replay", "%s", shs_last_error()); /* nothing written */
        shs_trace_free(t);
        return SIM_EXIT_ERROR;
    }
    int rc = SIM_EXIT_OK;
    if (export_text) {
        shs_afile_t af; /* whole or not at all */
        shs_status_t st = shs_afile_open(&af, export_text, "w");
        if (st == SHS_OK) {
            st = shs_trace_write_text(t, af.fp, -1);
            int err = errno; /* the writer's own flush */
            st = st == SHS_OK ? shs_afile_commit(&af) : shs_afile_fail(&af, err ? strerror(err) : NULL);
        }
        if (st != SHS_OK) { /* the error names the file */
            sim_error("replay", "%s", shs_last_error());
            rc = SIM_EXIT_ERROR;
        }
    }
    if (export_chakra) {
        if (shs_trace_export_chakra(t, export_chakra) != SHS_OK) { /* refused or failed: stop before the replay */
            sim_error("replay", "%s", shs_last_error());
            shs_trace_free(t);
            return SIM_EXIT_ERROR;
        } else {
            printf("  wrote %s.<rank>.et (Chakra ET, %d files)\n", export_chakra, t->world);
        }
    }
    if (export_perfetto) {
        shs_perfetto_opts_t po = {.net = network ? &net : NULL, .algo = algo};
        if (shs_trace_export_perfetto(t, export_perfetto, &po) != SHS_OK) {
            sim_error("replay", "%s", shs_last_error());
            rc = SIM_EXIT_ERROR;
        } else {
            printf("  wrote %s (Chrome/Perfetto trace JSON, %d tracks, %zu slices: %zu recorded times", export_perfetto,
                   t->world, po.slices, po.recorded);
            if (po.estimated) printf(", %zu %s-estimated", po.estimated, shs_net_algo_name(algo));
            if (po.sequential) printf(", %zu without times laid out 1 us each", po.sequential);
            printf(")\n");
        }
    }

    /* per-op summary over all ranks, from the trace */
    uint64_t calls[SHS_NUM_OPS] = {0}, bytes[SHS_NUM_OPS] = {0};
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            calls[x->op]++;
            bytes[x->op] += shs_trace_rec_bytes(t, x, SHS_BYTES_PER_RANK);
        }
    printf("\n  %-15s %10s %14s   (all ranks; bytes = each rank's part, summed)\n", "op", "calls", "bytes");
    char hb[32];
    for (int k = 0; k < SHS_NUM_OPS; k++)
        if (calls[k]) printf("  %-15s %10llu %14s\n", shs_coll_op_name((shs_coll_op_t)k), (unsigned long long)calls[k], human(hb, sizeof hb, (double)bytes[k]));

    shs_trace_report_t rep;
    if (shs_trace_check(t, &rep, (size_t)max_issues) != SHS_OK) {
        sim_error("replay", "%s", shs_last_error());
        shs_trace_free(t);
        return SIM_EXIT_ERROR;
    }
    printf("\nconsistency: ");
    if (rep.total == 0) {
        printf("OK: every communicator's calls agree (op, count, dtype, reduce op, root, bytes) at every sequence "
               "number; %zu collective instances and %zu send/recv pairs complete, no deadlock\n",
               rep.coll_completed, rep.p2p_matched);
    } else {
        printf("%zu issue%s (%d rank%s blocked forever; %zu collective instances and %zu send/recv pairs complete "
               "before)\n", rep.total, rep.total == 1 ? "" : "s", rep.ranks_blocked, rep.ranks_blocked == 1 ? "" : "s",
               rep.coll_completed, rep.p2p_matched);
        static const char *const kind[] = {"mismatch", "missing", "order", "deadlock", "unmatched send"};
        for (size_t i = 0; i < rep.n; i++) printf("  [%s] %s\n", kind[rep.issues[i].kind], rep.issues[i].text);
        if (rep.total > rep.n) printf("  ... %zu more (--max-issues)\n", rep.total - rep.n);
        rc = SIM_EXIT_ERROR;
    }
    int consistent = rep.total == 0;
    shs_trace_report_free(&rep);
    if (network) sim_print_timing(t, &net, algo, compare);

    if (consistent && !check_only) {
        shs_replay_stats_t s;
        shs_status_t st = shs_trace_replay(t, &ro, &s);
        if (st != SHS_OK) {
            sim_error("replay", "replay failed: %s", shs_last_error());
            rc = SIM_EXIT_ERROR;
        } else {
            char hm[32], hbuf[32];
            printf("\nreplay on %d threads: %.3f s, buffers %s in all", t->world, s.seconds, human(hbuf, sizeof hbuf, (double)s.buffer_bytes));
            if (ro.max_bytes) printf(", %llu calls capped at %s", (unsigned long long)s.capped, human(hm, sizeof hm, (double)ro.max_bytes));
            printf("\n  %-15s %10s %14s %14s  %s\n", "op", "calls", "trace bytes", "moved bytes", "how");
            for (int k = 0; k < SHS_NUM_OPS; k++) {
                if (!s.calls[k]) continue;
                const char *how = s.not_run[k] ? (k == SHS_OP_WAIT ? "local (not run)" : "matched in the analysis, not run")
                                  : s.sync_only[k] ? "as a barrier (no data)" : "real buffers";
                printf("  %-15s %10llu %14s %14s  %s\n", shs_coll_op_name((shs_coll_op_t)k),
                       (unsigned long long)s.calls[k], human(hb, sizeof hb, (double)s.trace_bytes[k]),
                       human(hm, sizeof hm, (double)s.moved_bytes[k]), how);
            }
            print_replay_timing(&s, ro.max_bytes != 0);
        }
    }
    shs_trace_free(t);
    return rc;
}
