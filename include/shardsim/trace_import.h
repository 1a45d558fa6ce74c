/* trace_import.h - read communication traces of other tools (and
 * shardsim's own) into the trace model (trace.h).
 *
 * What it is: one reader per format, each normalizing into the same trace:
 * sizes in bytes with an explicit scope, group-local ranks mapped to global
 * ranks, per-communicator sequence numbers (from the source when it has
 * them, else by position). Formats and their sources:
 *   shardsim     this project's text format (trace.h)
 *   nccl         NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL logs (NCCL's
 *                enqueue.cc log line; "Init COMPLETE" lines map comms to
 *                ranks), behind a launcher's header or not; one combined
 *                file or one file per rank; streamed (trace_nccl.c)
 *   pytorch-et   PyTorch Execution Trace JSON (schema 1.0.x, as read by
 *                PARAM's et_replay): record_param_comms nodes (named attrs
 *                or positional inputs), "## process_group:init ##", wait
 *   chakra       Chakra ET protobuf (mlcommons/chakra et_def.proto;
 *                varint-delimited GlobalMetadata then Node messages), one
 *                file per rank, via protobuf-c
 *   astra        ASTRA-sim 1.0 text workloads (DATA, MICRO, MODEL,
 *                HYBRID_*: each pass's comms on the model or data groups
 *                the workload type implies)
 *   kineto       PyTorch profiler (Kineto) Chrome-trace JSON, scanned
 *                without a DOM: NCCL kernels or record_param_comms with
 *                the collective's args, or older nccl:<op> annotations
 *                with "Input Dims"
 *   flight       PyTorch Flight Recorder JSON dumps (entries with
 *                collective_seq_id, profiling_name, input_sizes, state)
 *   horovod      Horovod timeline (HOROVOD_TIMELINE): rank 0's Chrome-trace
 *                array, one pid per tensor, B/E phases, readiness ticks;
 *                every operation a call on all ranks (trace_horovod.c)
 * The JSON formats but kineto need jansson and chakra needs protobuf-c at
 * build time; without them those readers return SHS_UNSUPPORTED saying so.
 * A file that is one process's view (PyTorch ET, Kineto, a Chakra
 * converter file) sets t->views; what a reader assumed where the file is
 * silent is in t->note.
 * Every reader refuses malformed input with SHS_PARSE and a message naming
 * the file and the line or record; sizes above SHS_TRACE_MAX_BYTES per
 * call and ranks beyond SHS_TRACE_MAX_WORLD are refused too, and so are
 * group members, ranks and p2p peers beyond a world size the file declares
 * (shardsim `world`, PyTorch ET and Flight Recorder default group "0",
 * Kineto distributedInfo.world_size, NCCL nranks, Horovod's readiness
 * ticks; Chakra declares none).
 * What it is not: the analysis or the replay.
 */
#ifndef SHARDSIM_TRACE_IMPORT_H
#define SHARDSIM_TRACE_IMPORT_H

#include "shardsim/trace.h"

/* SHS_TRACE_MAX_BYTES (trace.h): the largest byte size of one call an
 * importer accepts (1 PiB); absurd sizes are refused. */

/* The trace formats, one row each: enum suffix, name (as --format takes it;
 * "unknown" is not parsed). */
#define SHS_TRACE_FORMAT_MAP(X)                                                  \
    X(UNKNOWN, "unknown")                                                        \
    X(SHARDSIM, "shardsim")                                                      \
    X(NCCL, "nccl")                                                              \
    X(PYTORCH_ET, "pytorch-et")                                                  \
    X(CHAKRA, "chakra")                                                          \
    X(ASTRA, "astra")                                                            \
    X(KINETO, "kineto")                                                          \
    X(FLIGHT, "flight")                                                          \
    X(HOROVOD, "horovod")

typedef enum {
#define SHS_TRACE_FORMAT_ENUM(id, name) SHS_TFMT_##id,
    SHS_TRACE_FORMAT_MAP(SHS_TRACE_FORMAT_ENUM)
#undef SHS_TRACE_FORMAT_ENUM
    SHS_NUM_TFMTS
} shs_trace_format_t;

const char *shs_trace_format_name(shs_trace_format_t f); /* "shardsim", "nccl", ... */
int shs_trace_format_parse(const char *name, shs_trace_format_t *out); /* 0 ok, -1 unknown */
/* Guess the format from a file's first bytes (len bytes of `buf`). */
shs_trace_format_t shs_trace_detect(const char *buf, size_t len);

/* One input file as the readers see it. */
typedef struct {
    const char *name;      /* path, for messages */
    const char *buf;       /* contents, NUL-terminated */
    size_t len;
    int rank;              /* rank of a per-rank file (from its content or name), -1 unknown */
    int world;             /* ranks to expand to (ASTRA-sim; --world), 0: the format's default */
    int first_dim;         /* ASTRA-sim HYBRID_DATA_MODEL / _MODEL_DATA: NPUs in the network's first
                            * dimension (its groups), 0 unknown */
} shs_trace_input_t;

shs_status_t shs_trace_import_text(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_nccl(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_pytorch_et(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_chakra(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_astra(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_kineto(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_flight(shs_trace_t *t, const shs_trace_input_t *in);
shs_status_t shs_trace_import_horovod(shs_trace_t *t, const shs_trace_input_t *in);

typedef struct {
    shs_trace_format_t format;  /* SHS_TFMT_UNKNOWN: detect per file */
    int world;                  /* 0: from the trace */
    int first_dim;              /* shs_trace_input_t.first_dim; 0 unknown */
    /* out: */
    int files_read, files_skipped;  /* in a directory, files of no known format are skipped */
} shs_trace_load_opts_t;

/* Load PATH: a regular file, a directory of per-rank files (sorted by
 * name; a file's rank comes from its content or else the last number in its
 * name; subdirectories and names starting with '.' are not read), or a tar
 * archive of them (.tar, .tar.gz, read whole, up to 2 GiB inflated: as that
 * directory, trace_tar.h). A
 * file that starts with gzip's magic bytes (1f 8b) is inflated as it is read
 * (zlib) and its content detected and read as usual; without zlib it is
 * refused with SHS_UNSUPPORTED naming zlib1g-dev. An NCCL log is streamed
 * (any size); any other file is read whole, up to 2 GiB. A PATH,
 * or a directory entry, that is a FIFO, device or socket is refused at once
 * with SHS_IO naming the path and its kind: nothing waits on a writer.
 * Errors: SHS_IO, SHS_PARSE, SHS_UNSUPPORTED, SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_trace_load(shs_trace_t **out, const char *path, shs_trace_load_opts_t *opts);

/* Load one file already in memory: in->buf (in->len bytes, NUL at
 * in->buf[in->len]) read as `format`, or as detected from its content when
 * SHS_TFMT_UNKNOWN; in->name names it in messages, in->rank and in->world
 * as for a file; gzip data is inflated first, into a copy; a tar archive
 * (format SHS_TFMT_UNKNOWN) is read as its members. Then as
 * shs_trace_load: the world grows to in->world and
 * formats without sequence numbers are numbered by position. The entry
 * point of the fuzz targets (fuzz/). Errors: as shs_trace_load. */
shs_status_t shs_trace_load_buffer(shs_trace_t **out, const shs_trace_input_t *in, shs_trace_format_t format);

#endif
