/* trace_nccl.h - the NCCL log reader's parts (private to src/trace): the
 * anatomy of a log line (trace_nccl_line.c), the communicators its
 * "Init COMPLETE" lines declare (trace_nccl_init.c), and the streaming
 * reader (trace_nccl.c).
 * What it is not: format detection (trace_load.c). */
#ifndef SHARDSIM_TRACE_NCCL_H
#define SHARDSIM_TRACE_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/trace.h"
#include "trace/trace_stream.h"
#include "trace/trace_util.h"

/* Read an NCCL log from its lines (two passes: Init lines, then calls;
 * the lines are rewound in between, so a file is streamed, never held).
 * `name` names it in errors. Errors: as shs_trace_import_nccl. */
shs_status_t shs__trace_import_nccl_lines(shs_trace_t *t, shs__lines_t *l, const char *name);

/* The hint every message about missing Init lines carries. */
#define SHS__NCCL_INIT_HINT "NCCL_DEBUG_SUBSYS=INIT,COLL prints them"

/* One line of the log, split: a launcher's header (srun --label "0: ",
 * Ray's "(RayTrainWorker pid=..., ip=...) ", torchrun's "[rank0]:" or
 * "[default0]:") is passed over; then NCCL's "host:pid:tid [cudaDev] NCCL
 * INFO" and the tokens after it. */
#define SHS__NCCL_MAX_TOKENS 48
typedef struct {
    shs__tok_t all[SHS__NCCL_MAX_TOKENS];
    const shs__tok_t *tk;   /* the tokens after "INFO" */
    int nt;
    const char *proc;       /* "host:pid", proc_n bytes */
    size_t proc_n;
    long dev;               /* cudaDev */
} shs__nccl_line_t;

/* 1: an NCCL INFO line, split into *x; 0: any other line; -1: an NCCL INFO
 * line whose prefix is garbage (no host:pid:tid, a [cudaDev] that is no
 * device number such as [-1]), the reason in why[0..cap) (tk, nt set). */
int shs__nccl_split_line(const char *line, size_t n, shs__nccl_line_t *x, char *why, size_t cap);

/* The fields of an "Init COMPLETE" line (all NCCL versions' layouts:
 * "comm %p rank %d nranks %d ... commId 0x%llx - Init COMPLETE", since
 * 2.21 after the function's name, ncclCommSplit's with "parent %p
 * [splitCount %d] color %d key %d" and, since 2.23, no commId; before
 * 2.18 no commId at all). */
typedef struct {
    uint64_t ptr, comm_id, parent;
    int rank, nranks;
    int has_id, is_split;
    int64_t split_count, color;  /* -1 when absent */
} shs__nccl_init_t;

/* Whether the tokens after INFO end in "Init COMPLETE" (the test is
 * cheap: every other line is none). */
int shs__nccl_is_init(const shs__tok_t *tk, int nt);
/* Parse them: 0 ok, -1 malformed (why[0..cap) says what). */
int shs__nccl_parse_init(const shs__tok_t *tk, int nt, shs__nccl_init_t *f, char *why, size_t cap);

/* Processes ("host:pid") interned to small ids. */
typedef struct {
    char **keys;
    uint32_t *slot;      /* open addressing: id + 1, 0 empty */
    size_t n, cap, nslot;
} shs__nccl_procs_t;
/* The id of key[0..n) (added if new); -1 out of memory. */
int shs__nccl_proc_id(shs__nccl_procs_t *p, const char *key, size_t n);
void shs__nccl_procs_free(shs__nccl_procs_t *p);

/* The communicators of a log: one per commId (or split of a parent by
 * color, or, before NCCL 2.18, by size), from its Init lines in order. */
typedef struct {
    int proc, dev;
    int64_t line;
    shs__nccl_init_t f;
    int group;           /* index into groups, after shs__nccl_groups_build */
} shs__nccl_inst_t;       /* one Init line: one process's handle of a communicator */

typedef struct {
    int nranks;
    int *procs;          /* procs[rank] = process id */
    int tcomm;           /* the trace's communicator */
    char name[80];
} shs__nccl_group_t;

typedef struct {
    shs__nccl_inst_t *inst;
    size_t ninst, cap;
    shs__nccl_group_t *groups;
    int ngroups;
    int world;           /* the largest group */
    int *global;         /* per process id: its rank in the world group, -1 none */
    int nprocs;
} shs__nccl_comms_t;

/* Add one Init line's handle. Errors: SHS_HOST_OOM. */
shs_status_t shs__nccl_comms_add(shs__nccl_comms_t *c, int proc, long dev, int64_t line, const shs__nccl_init_t *f,
                                 const char *name);
/* Group the handles into communicators, check them (every rank of each
 * claimed by one process, one size, a split's parent initialized before it
 * in its process) and declare them in t ("world" for the largest, whose
 * ranks are the processes' global ranks). Errors: SHS_PARSE naming `name`
 * and the line, SHS_HOST_OOM. */
shs_status_t shs__nccl_comms_build(shs__nccl_comms_t *c, const shs__nccl_procs_t *procs, shs_trace_t *t,
                                   const char *name);
void shs__nccl_comms_free(shs__nccl_comms_t *c);

#endif
