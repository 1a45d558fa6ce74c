/* trace.h - communication traces: the in-memory model every recorder and
 * importer fills, and shardsim's own text format.
 *
 * What it is: per-rank ordered records of communication calls (collectives
 * and point-to-point), each naming its communicator (a group of global
 * ranks), its per-communicator sequence number, op, count, dtype, reduce op,
 * root or peer, a byte size with an explicit scope, start/end times and a
 * marker string ("fwd/block3"). Importers of other formats (trace_import.h)
 * normalize into this model: sizes in bytes, group-local ranks mapped to
 * global ranks.
 * What it is not: the analysis (trace_check.h), the replay
 * (trace_replay.h) or any importer.
 *
 * TEXT FORMAT ("shardsim-trace 1"), line oriented, one record per line,
 * fields separated by blanks, '-' for an absent value, '#' starts a comment:
 *   shardsim-trace 1
 *   world <N>
 *   comm <name> <size> <global rank of local 0>,<of local 1>,...
 *   <rank> <comm> <seq> <op> <count> <dtype> <redop> <root> <peer> <tag> <bytes> <scope> <t_start_us> <t_end_us> <marker>
 * rank: global rank that issued the call; comm: a declared comm name;
 * seq: per-communicator sequence number of this rank (from 0); op: a name of
 * shs_coll_op_name() (comm.h) other than split; count: elements (NCCL's convention: all_gather's send
 * count, reduce_scatter's receive count, the whole buffer otherwise);
 * dtype: shs_dtype_name() or '-'; redop: shs_redop_name() or '-'; root:
 * comm-local root or '-'; peer: global rank of the send destination / recv
 * source or '-'; tag: p2p tag or '-'; bytes: see shs_bytes_scope_t; scope:
 * 'rank' or 'total'; times: microseconds since the trace's origin, or '-';
 * marker: phase/unit without blanks, or '-'. An all_to_allv line may end
 * with a 16th field `vbytes=<N>`, the record's v_bytes (uneven split
 * sizes). Once `world N` is read,
 * every rank the file names (communicator members, record ranks, peers)
 * must be below N; without it the communicators define the world. A file
 * may hold any subset of ranks; `shardsim train --trace DIR` writes
 * DIR/rank<k>.trace, one per rank.
 */
#ifndef SHARDSIM_TRACE_H
#define SHARDSIM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shardsim/comm.h"
#include "shardsim/dtype.h"
#include "shardsim/status.h"

/* Largest world an importer accepts (groups naming ranks beyond it are refused). */
#define SHS_TRACE_MAX_WORLD 65536
/* Largest byte size of one call (1 PiB), one rank's part or the whole
 * collective buffer, and largest element count: shs_trace_append refuses
 * absurd sizes, so no size arithmetic on a trace overflows. */
#define SHS_TRACE_MAX_BYTES ((uint64_t)1 << 50)
/* Largest start or end time of a call, in seconds: 2^63 ns (INT64_MAX
 * nanoseconds, about 292 years). The tools whose traces are read take
 * their times from a signed 64-bit nanosecond clock (c10's and Kineto's
 * clocks, Flight Recorder's time_created_ns, CUDA events), since the epoch
 * or since boot, so no real time lies beyond it; a larger one (a Kineto ts
 * of 1e300) is garbage, refused by shs_trace_append and, naming the field,
 * by the importers. It also keeps every printed time under 11 digits of
 * seconds. */
#define SHS_TRACE_MAX_TIME_S 9223372036.854775807

/* What a record's `bytes` counts.
 *   PER_RANK: one rank's part: all_gather's input, reduce_scatter's output,
 *             all_to_all's block for one peer (NCCL's per-peer sendcount),
 *             a p2p message; for all_reduce, broadcast and reduce the buffer
 *             (per rank == whole).
 *   TOTAL:    the whole collective buffer: all_gather's output,
 *             reduce_scatter's input, all_to_all's input (one rank's send
 *             buffer of N blocks, nccl-tests' alltoall size; each rank sends
 *             (N-1)/N of it). */
typedef enum { SHS_BYTES_PER_RANK = 0, SHS_BYTES_TOTAL = 1 } shs_bytes_scope_t;

#define SHS_TRACE_NONE (-1)   /* absent root / peer / tag / dtype / redop */

typedef struct {
    int32_t rank;          /* global rank that issued the call */
    int32_t comm;          /* index into shs_trace_t.comms */
    shs_coll_op_t op;      /* any op of comm.h's tables but SHS_OP_SPLIT */
    int32_t dtype;         /* shs_dtype_t, or SHS_TRACE_NONE when the source does not say */
    int32_t redop;         /* shs_redop_t, or SHS_TRACE_NONE */
    int32_t root;          /* comm-local root (broadcast, reduce, gather, scatter), or NONE */
    int32_t peer;          /* send: destination, recv: source (global ranks), or NONE */
    int32_t tag;           /* p2p tag, or NONE */
    shs_bytes_scope_t scope;
    uint32_t marker;       /* string id (shs_trace_str); 0 = none */
    int64_t seq;           /* per-communicator sequence number of this rank, from 0 */
    uint64_t count;        /* elements (NCCL's convention, see the file header); 0 if unknown */
    uint64_t bytes;        /* bytes, meaning per `scope` */
    uint64_t v_bytes;      /* all_to_allv: the larger of the bytes this rank sends to the other
                            * members and the bytes it receives from them (its split sizes, its
                            * own block left out), what its part of the exchange moves; 0 when
                            * the source gave no split sizes (then it is timed as an even
                            * all_to_all of `bytes`), and for every other op */
    double t_start, t_end; /* seconds since the trace's origin; < 0 unknown */
    int64_t src_line;      /* where the call was read, in the file that holds the rank's calls:
                            * the 1-based line of a text input (NCCL log, shardsim trace, an
                            * ASTRA-sim workload's layer line), a Chakra record number (1 =
                            * the first node), or a JSON input's array index + 1 (PyTorch ET
                            * nodes, Kineto traceEvents, flight-recorder entries, Horovod
                            * events); 0 unknown (recorded, generated). Diagnoses name it as
                            * the importer's errors do ("log line 40", "traceEvents[39]"). */
} shs_trace_rec_t;

typedef struct {
    char *name;
    int size;
    int *ranks;            /* ranks[local] = global rank */
} shs_trace_comm_t;

typedef struct {
    shs_trace_rec_t *recs;
    size_t n, cap;
    int mapped;            /* recs is a mapping of its own that shs_trace_append grows (a large
                            * array: no copy as it grows), not malloc'd; 0 for a caller's array */
} shs_trace_rank_t;

typedef struct {
    int world;             /* ranks 0..world-1 */
    shs_trace_rank_t *ranks;   /* world entries */
    shs_trace_comm_t *comms;
    int ncomms, comms_cap;
    char **strs;           /* strs[0] = "" */
    uint32_t nstrs, strs_cap;
    char format[32];       /* "shardsim", "nccl", "pytorch-et", ... (for reports) */
    int views;             /* 1: each rank's records are that process's own view (PyTorch ET, one
                            * file per process); a rank without records was not traced, and the
                            * analysis leaves it out. 0: every rank was traced. */
    int astra_mp_group;    /* an ASTRA-sim HYBRID_TRANSFORMER workload's model_parallel_NPU_group M:
                            * ASTRA-sim splits the network dimension M falls in (Sys::
                            * break_dimension, trace_astra_model.h); 0 for any other trace */
    char note[192];        /* what a reader assumed where its input was silent, for reports
                            * ("ranks are the cudaDev numbers: the log has no 'Init COMPLETE'
                            * lines ..."); "" none */
} shs_trace_t;

/* An empty trace of `world` ranks (0 allowed: importers grow it).
 * Errors: SHS_INVALID_ARG (world > SHS_TRACE_MAX_WORLD), SHS_HOST_OOM. */
shs_status_t shs_trace_create(shs_trace_t **out, int world);
void shs_trace_free(shs_trace_t *t);
/* Grow the world to at least `world` ranks (never shrinks). */
shs_status_t shs_trace_ensure_world(shs_trace_t *t, int world);

/* Declare (or find, by name) a communicator of `size` members whose global
 * ranks are ranks[0..size) (NULL: 0..size-1). The world grows to cover them.
 * A second declaration of a name must agree. *id gets its index.
 * Errors: SHS_INVALID_ARG (empty name, size < 1, a rank out of
 * [0, SHS_TRACE_MAX_WORLD), duplicates, disagreeing redeclaration). */
shs_status_t shs_trace_add_comm(shs_trace_t *t, const char *name, int size, const int *ranks, int *id);
/* Declare or extend a communicator whose members are the identity 0..size-1
 * (a default process group whose size a per-rank reader learns file by
 * file): an existing identity comm of that name grows to `size`.
 * Errors: as shs_trace_add_comm; SHS_INVALID_ARG if the name is taken by a
 * non-identity comm. */
shs_status_t shs_trace_grow_identity_comm(shs_trace_t *t, const char *name, int size, int *id);
/* Whether rank `g`'s calls are in the trace: 0 only for a rank without
 * records of a trace of per-process views (t->views), such as the other
 * members of a group seen from one process's PyTorch execution trace. */
int shs_trace_rank_traced(const shs_trace_t *t, int g);
/* Index of the comm named `name`, or -1. */
int shs_trace_find_comm(const shs_trace_t *t, const char *name);
/* Local rank of global rank `g` in comm `c`, or -1 when not a member. */
int shs_trace_comm_local(const shs_trace_t *t, int c, int g);

/* Intern a string (markers); returns its id (0 for NULL or ""), or
 * UINT32_MAX when out of memory. */
uint32_t shs_trace_intern(shs_trace_t *t, const char *s);
const char *shs_trace_str(const shs_trace_t *t, uint32_t id);

/* The scope of a size that counts one rank's input buffer (NCCL's
 * sendbuff, PyTorch's input tensor, ASTRA-sim's collective size): TOTAL for
 * reduce_scatter, scatter and all_to_all(v), PER_RANK for every other op. */
shs_bytes_scope_t shs_trace_input_scope(shs_coll_op_t op);

/* A record with every optional field absent. */
shs_trace_rec_t shs_trace_rec_init(void);
/* Append `r` to rank r->rank's sequence. Checks the rank is in the world and
 * a member of the comm, the op and dtype are valid, for p2p the peer is in
 * the world, and that count, count x dtype size, bytes and the whole
 * collective buffer (bytes x comm size for a per-rank part) are at most
 * SHS_TRACE_MAX_BYTES, and that each time is unknown (< 0, not NaN) or in
 * [0, SHS_TRACE_MAX_TIME_S] with the end not before the start.
 * Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_trace_append(shs_trace_t *t, const shs_trace_rec_t *r);
size_t shs_trace_num_records(const shs_trace_t *t);

/* A record's size as `scope` (converting with the comm's size; saturates
 * at UINT64_MAX should a comm grown after the append make it overflow). */
uint64_t shs_trace_rec_bytes(const shs_trace_t *t, const shs_trace_rec_t *r, shs_bytes_scope_t scope);

/* Give every record the per-(rank, comm) sequence number of its position
 * (0, 1, ...): for sources without sequence numbers. */
void shs_trace_renumber(shs_trace_t *t);

/* Write the trace in the text format: all ranks (rank < 0) or one rank.
 * Errors: SHS_IO. */
shs_status_t shs_trace_write_text(const shs_trace_t *t, FILE *f, int rank);
/* Write DIR/rank<k>.trace for every rank, creating DIR if needed. */
shs_status_t shs_trace_write_dir(const shs_trace_t *t, const char *dir);
/* Read the text format from `buf` (len bytes; `name` names it in errors)
 * into t, appending. Errors: SHS_PARSE "<name>:<line>: <reason>", among
 * them a rank at or beyond the `world` line's N, and a `world` line below
 * a rank already named. */
shs_status_t shs_trace_read_text(shs_trace_t *t, const char *buf, size_t len, const char *name);

#endif
