/* trace_check.h - consistency analysis of a trace: would these per-rank
 * sequences run, and where do they first disagree?
 *
 * What it is: the checks of PyTorch's Flight Recorder analyzer, on the
 * normalized trace. (1) For every communicator and sequence number, each
 * member's call must agree on op, count, dtype, reduce op, root and bytes
 * (bytes not for all_to_allv); the first disagreement per communicator is
 * reported with both ranks and both calls, and a member with no call at a
 * sequence number the others issued is reported as missing (the deadlock
 * signature). When the first divergence on a communicator is explained by
 * calls skipped (a member lacks k consecutive calls another member has,
 * and its remaining calls there agree with that member's after them, as
 * every other member's agree), each such rank is reported as having
 * skipped the first of them "and the k-1 calls after it"; NCCL's opCount
 * (how its logs number calls, a rank counting its own) shifts after a
 * skipped call, so without this a skip reads as a mismatch at the next
 * call. Texts name sequence numbers as the source does ("opCount 0xf" for
 * NCCL logs, "seq 15" otherwise) and where each call was read when the
 * record says (src_line: "log line 40", "line 40", "record 40"). (2) An execution of the sequences, each collective blocking
 * until all members arrive at the same sequence number, sends eager
 * (buffered) and each recv blocking until a send on its channel
 * (communicator, source, dest, tag) was posted, matched in FIFO order (the
 * k-th send with the k-th recv: comm.h's pairing rule, whose
 * shs_p2p_pair_differs then checks that the two ends agree on dtype and
 * count, or bytes, else a mismatch naming both); ranks still blocked at the
 * end are deadlocked (each named with what it waits for), and sends nobody
 * receives are reported as unmatched. Waits are ignored. Ranks that were not traced
 * (shs_trace_rank_traced: the other members seen from one process's
 * execution trace) are left out of both.
 * What it is not: a timing model or a data-moving replay (trace_replay.h).
 */
#ifndef SHARDSIM_TRACE_CHECK_H
#define SHARDSIM_TRACE_CHECK_H

#include "shardsim/trace.h"

typedef enum {
    SHS_ISSUE_MISMATCH,        /* two members' calls at one sequence number differ */
    SHS_ISSUE_MISSING,         /* a member never issues a sequence number others issued */
    SHS_ISSUE_ORDER,           /* a rank's sequence numbers on a communicator do not increase */
    SHS_ISSUE_DEADLOCK,        /* a rank blocked forever in a collective or recv */
    SHS_ISSUE_UNMATCHED_SEND,  /* a send no rank receives */
} shs_issue_kind_t;

typedef struct {
    shs_issue_kind_t kind;
    int comm;                  /* communicator index */
    int64_t seq;               /* sequence number concerned (-1 if none) */
    int rank;                  /* the rank the issue is about */
    int other;                 /* the rank compared with / waited for (-1 if none) */
    char text[512];            /* one line, e.g. "comm world seq 7: rank 2 all_gather(...) vs rank 0 ..." */
} shs_trace_issue_t;

typedef struct {
    shs_trace_issue_t *issues;
    size_t n;                  /* issues kept (at most max_issues) */
    size_t total;              /* issues found */
    size_t coll_completed;     /* collective instances the execution completed */
    size_t p2p_matched;        /* send/recv pairs matched */
    int ranks_blocked;         /* ranks that never finish */
} shs_trace_report_t;

/* Run both analyses. The trace is consistent iff rep->total == 0.
 * Errors: SHS_HOST_OOM (the trace itself is never the error). */
shs_status_t shs_trace_check(const shs_trace_t *t, shs_trace_report_t *rep, size_t max_issues);
void shs_trace_report_free(shs_trace_report_t *rep);

/* "all_gather(count=147456, dtype=bf16, bytes=294912/rank)" into buf. */
void shs_trace_rec_format(const shs_trace_t *t, const shs_trace_rec_t *r, char *buf, size_t n);

#endif
