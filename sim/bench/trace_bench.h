/* trace_bench.h - how fast a large trace imports and checks (the
 * importers' speed targets, 1 M collective records across 64 ranks: 1.5 M
 * records/s from shardsim's text format, 2 M records/s from an NCCL log).
 *
 * What it is: a generator of a consistent FSDP-like trace (hybrid
 * sharding: per step, for each of 12 units a forward all-gather on the
 * rank's 8-rank shard group, then in reverse unit order a backward
 * all-gather and reduce-scatter on the shard group and an all-reduce on the
 * rank's replica group; the step ends with a loss all-reduce on the world;
 * markers fwd/block<u>, bwd/block<u>, loss; times increasing), written in
 * shardsim's text format, one file per rank, into a fresh directory, and
 * the wall time of shs_trace_load + shs_trace_check on it. `shardsim bench
 * --only trace` prints it. The same trace written as one combined NCCL
 * log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL: Init COMPLETE lines,
 * then the ranks' collective lines interleaved) times the NCCL importer.
 * What it is not: a pass/fail test; it reports rates measured in one run.
 */
#ifndef SHARDSIM_TRACE_BENCH_H
#define SHARDSIM_TRACE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"

typedef struct {
    size_t records;           /* records written and loaded back */
    int world, files, comms;
    uint64_t file_bytes;      /* the files' total size */
    double gen_s, write_s;    /* building the trace in memory, writing the files */
    double load_s, check_s;   /* shs_trace_load (read + parse), shs_trace_check (both analyses) */
    size_t issues;            /* issues the analysis found (0: consistent, as generated) */
    size_t coll_completed;    /* collective instances the analysis completed */
} shs_trace_bench_t;

/* Generate records / world records per rank (world >= 1; shard groups of 8
 * when 8 divides world, else one group of all ranks), write them under a
 * new directory in parent_dir (NULL: $TMPDIR or /tmp), time the load and
 * the check, and remove the files. Errors: SHS_INVALID_ARG (world outside
 * 1..SHS_TRACE_MAX_WORLD, records < world), SHS_IO, SHS_HOST_OOM, and the
 * loader's errors. */
shs_status_t shs_trace_bench_import(size_t records, int world, const char *parent_dir, shs_trace_bench_t *out);
/* The same, the trace written as one NCCL log (files = 1). */
shs_status_t shs_trace_bench_import_nccl(size_t records, int world, const char *parent_dir, shs_trace_bench_t *out);

#endif
