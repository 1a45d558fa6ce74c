/* comm_impl.h - private: the communicator vtable each backend fills, the
 * per-rank handle the public wrappers in comm.c work on, and the element-wise
 * reduction that every backend shares (comm_reduce.c).
 *
 * Split of work (ggml-backend-impl.h's pattern): comm.c validates arguments,
 * numbers the call (sequence number), builds one shs__call_t and keeps the
 * per-rank stats; a backend moves the data and implements the cross-rank
 * consistency checks, timeout and abort of comm.h, and writes the error text.
 * Backends today: "thread" (comm_thread.c, ranks are threads of one process),
 * "meta" (comm_meta.c, counts calls), "mpi" (comm_mpi.c, ranks are
 * processes of an MPI job; built when mpicc is found), and the CUDA ones
 * (src/comm/cuda/). Point-to-point calls and groups (comm_p2p.c) and the
 * job every communicator belongs to (comm_job.c: failure of all at once,
 * unique names) are backend-independent too.
 */
#ifndef SHARDSIM_COMM_IMPL_H
#define SHARDSIM_COMM_IMPL_H

#include "shardsim/comm.h"

/* One call as it reaches a backend. Fields an op does not take hold fixed
 * values (count 0, redop SUM, root 0), so comparing two calls field by
 * field is the consistency check (shs__check_calls), the tag with its own
 * rule: 0 matches any tag. A send or receive is a call too, as NCCL's
 * ncclSend fills the collectives' ncclInfo: op SEND/RECV, its buffer in
 * sendbuf/recvbuf, root = the peer, seq = its number on the (comm, peer)
 * channel (comm.h POINT-TO-POINT). */
typedef struct {
    shs_coll_op_t op;
    const void *sendbuf;
    void *recvbuf;
    size_t count;            /* NCCL's count: all_gather sendcount, reduce_scatter recvcount */
    shs_dtype_t dtype;
    shs_redop_t redop;
    int root;                /* rooted ops: the root; send/recv: the peer */
    shs_reduce_order_t order; /* all_reduce and reduce_scatter: the handle's order; others RANK */
    uint64_t seq;
    uint64_t tag;            /* the handle's tag (comm.h CALL TAGS); 0 untagged */
    int color, key;          /* split only; not compared across ranks */
} shs__call_t;

/* Moves `bytes` from a send buffer to a receive buffer in this process (a
 * point-to-point message whose two ends are here): memcpy for host memory
 * (shs__copy_host), a device copy for the CUDA communicators. */
typedef shs_status_t (*shs__copy_fn)(void *dst, const void *src, size_t bytes);
shs_status_t shs__copy_host(void *dst, const void *src, size_t bytes);

typedef struct shs__job shs__job_t;

typedef struct shs__comm_iface {
    const char *name;
    /* Join rendezvous `id_ctx` (from the backend's id_create) as `rank`:
     * fill comm->ctx, nranks and name. */
    shs_status_t (*init_rank)(shs_comm_t *comm, void *id_ctx, int rank);
    void (*id_release)(void *id_ctx);
    /* Collectives: the contracts of comm.h, arguments already validated. */
    shs_status_t (*all_gather)(shs_comm_t *comm, const shs__call_t *call);
    shs_status_t (*reduce_scatter)(shs_comm_t *comm, const shs__call_t *call);
    shs_status_t (*all_reduce)(shs_comm_t *comm, const shs__call_t *call);
    shs_status_t (*broadcast)(shs_comm_t *comm, const shs__call_t *call);
    shs_status_t (*reduce)(shs_comm_t *comm, const shs__call_t *call);
    shs_status_t (*barrier)(shs_comm_t *comm, const shs__call_t *call);
    /* Sets *newcomm to a handle made with shs__comm_new(), or NULL, and then
     * members[0 .. child size) (room for comm's N) to the child's members as
     * comm's ranks, in child rank order; names the child with
     * shs__split_name (once per child and process). */
    shs_status_t (*split)(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members);
    /* Point-to-point: run calls[0 .. n) (op SEND or RECV; one call, or one
     * group in call order) to completion: pair each with its peer's by the
     * pairing rule (shs_p2p_pair_differs), check, and move the data, with
     * `copy` where both ends are in this process. copy NULL: pair and
     * check only, move nothing (the host handle of the NCCL communicator). */
    shs_status_t (*p2p)(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy);
    void (*abort)(shs_comm_t *comm, const char *reason);
    /* The job failed elsewhere (comm_job.c): mark this communicator failed
     * with `detail`, the first failure's text, and wake its waiters, who
     * return SHS_ABORTED "... the job failed: <detail>". Any thread. */
    void (*job_failed)(shs_comm_t *comm, const char *detail);
    void (*destroy)(shs_comm_t *comm);   /* frees ctx; comm.c frees the handle */
} shs__comm_iface_t;

/* One rank's handle. */
struct shs_comm {
    const shs__comm_iface_t *iface;
    void *ctx;                   /* backend state of this rank */
    int rank, nranks;
    const char *name;            /* owned by the backend; lives as long as the handle */
    uint64_t seq;                /* sequence number of the next call */
    shs_reduce_order_t reduce_order; /* for all_reduce and reduce_scatter (comm.h) */
    shs_comm_stats_t stats;
    shs_comm_recorder_fn recorder;   /* optional: called after each collective */
    void *recorder_user;
    char marker[SHS_COMM_MARKER_MAX];
    uint64_t tag;                /* of the next calls (shs_comm_set_tag) */
    /* Set by comm_job.c; a device communicator's inner host handle borrows
     * its outer handle's (shs__comm_borrow_job), without joining. */
    shs__job_t *job;             /* NULL: in no job */
    int *root_ranks;             /* (nranks) each member's rank in the job's root communicator */
    int owns_root_ranks;
    /* comm_p2p.c: next send number to peer j at [j], next receive number
     * from peer j at [nranks + j]; NULL until the first send or receive. */
    uint64_t *p2p_seq;
};

struct shs_comm_id {
    const shs__comm_iface_t *iface;
    void *ctx;
    shs__job_t *job;             /* the job its handles join */
};

/* ---- jobs (comm_job.c, comm.h JOB FAILURE) -------------------------------- */

/* A new job (one reference, the caller's), or NULL when the host refuses. */
shs__job_t *shs__job_create(void);
void shs__job_ref(shs__job_t *job);
void shs__job_unref(shs__job_t *job);
/* Put `comm` (nranks set) into `job`: its root ranks are root_ranks[0 ..
 * nranks) (copied; NULL: 0 .. nranks-1). A job that already failed fails
 * the new member at once. Errors: SHS_HOST_OOM. */
shs_status_t shs__job_join(shs_comm_t *comm, shs__job_t *job, const int *root_ranks);
/* Take `comm` out of its job (shs_comm_destroy does). */
void shs__job_leave(shs_comm_t *comm);
/* The first failure of any call of the job: every other member's
 * job_failed(detail). Later calls change nothing. No-op without a job. */
void shs__job_fail(shs_comm_t *comm, const char *detail);
/* `inner` (a device communicator's host handle) sees `outer`'s job and root
 * ranks (for names), without being a member. */
void shs__comm_borrow_job(shs_comm_t *inner, const shs_comm_t *outer);
/* The name of a child of `parent` holding parent ranks members[0 .. n) of
 * colour `color`: "split(color=C)[R]" (R: their root ranks), "#k" added
 * when the job made k-1 such names before; counts it in the job. Call once
 * per child per process. Always NUL-terminated (size >= 1). */
void shs__split_name(const shs_comm_t *parent, int color, const int *members, int n, char *name, size_t size);

/* A rendezvous of the thread backend for `iface` (the thread backend, or a
 * CUDA one built on it): checks nranks, makes the shared state (timeout_ms
 * <= 0: the default; name NULL: "world") and the job. `who` names the
 * public function in errors. comm_thread.c. Errors: SHS_INVALID_ARG,
 * SHS_HOST_OOM. */
shs_status_t shs__comm_thread_id_new(shs_comm_id_t **id, const shs__comm_iface_t *iface, int nranks, int timeout_ms,
                                     const char *name, const char *who);

/* Thresholds of the thread backend's algorithms (comm_thread.c), here so
 * the tests can check both sides of each. Bytes per rank unless noted.
 *   STAGE_BYTES       staging buffer per rank and parity: a call whose
 *                     staged input fits (all_reduce, all_gather block,
 *                     reduce_scatter sendbuf, broadcast, reduce) is staged
 *                     and takes one barrier;
 *   ONE_SHOT_MAX      staged all_reduce also needs count*size*N <= this;
 *   STREAM_MIN        streaming stores when the output of all ranks
 *                     together (all_reduce count*size*N, all_gather
 *                     N*N*block, reduce_scatter N*block) exceeds this. */
#define SHS__STAGE_BYTES (16 * 1024)
#define SHS__ONE_SHOT_MAX_BYTES (64 * 1024)
#define SHS__STREAM_MIN_BYTES ((size_t)8 << 20)

extern const shs__comm_iface_t shs__comm_thread_iface;

/* A zeroed handle with `iface` set, or NULL when the host refuses. */
shs_comm_t *shs__comm_new(const shs__comm_iface_t *iface);

/* A member of a split's colour: its key and parent rank. */
typedef struct {
    int key, rank;
} shs__split_member_t;
/* Sort m[0 .. n) by (key, parent rank), ncclCommSplit's order of the
 * child's ranks, and write their parent ranks to ranks[0 .. n). comm.c. */
void shs__split_order(shs__split_member_t *m, int n, int *ranks);

/* "rank 2: all_reduce seq 7 on comm 'world': " ("send to rank 3 seq 0"
 * for a send or receive): how a backend starts a call's error text. */
void shs__call_prefix(char *buf, size_t size, int rank, const shs__call_t *call, const char *comm_name);

/* ---- what comm.c shares with comm_p2p.c ---- */
/* SHS_INVALID_ARG "rank r: <op> on comm '<name>': <what>". */
shs_status_t shs__comm_arg_error(const shs_comm_t *comm, shs_coll_op_t op, const char *what);
/* The checks of every call (dtype, reduce op when needed, count x size
 * without overflow); on success *bytes = count * dtype size. */
shs_status_t shs__comm_check_call(const shs_comm_t *comm, const shs__call_t *c, int needs_redop, size_t *bytes);
/* After a dispatched call: the stats on success (`bytes` as comm.h's
 * shs_comm_stats_t counts them) and the recorder (t0: when it began). */
void shs__comm_account(shs_comm_t *comm, const shs__call_t *c, uint64_t bytes, shs_status_t s, double t0);
/* Is this thread inside shs_group_start ... shs_group_end? */
int shs__group_active(void);
/* The pairing rule on two calls (comm.h shs_p2p_pair_differs): 1 when
 * `send` (by send_rank) and `recv` (by recv_rank) are one message and agree;
 * else 0 with `detail` naming the comm, both ranks, both calls with their
 * sequence numbers and the field that differs. */
int shs__p2p_check_pair(const shs__call_t *send, int send_rank, const shs__call_t *recv, int recv_rank,
                        const char *comm_name, char *detail, size_t size);

/* "all_reduce(count=1024, dtype=f32, op=sum)": the fields the op takes,
 * then the tag when there is one ("... tag 7", "... [reduce-scatter unit 3
 * micro 0 step 7]"). */
void shs__call_format(char *buf, size_t size, const shs__call_t *call);

/* The cross-rank check of comm.h on one call, the same in every backend:
 * get(ctx, j, buf) returns rank j's call (a pointer into the backend's
 * state, or buf filled in) for j in [0, n). All fields but the tag must
 * equal rank 0's; then all nonzero tags must equal the first one. Returns
 * 1 when they do; else 0 with `detail` (size bytes) naming the comm, the
 * sequence number, the first rank that differs, its call and the call it
 * differs from ("comm 'world' seq 5: rank 0 called A but rank 2 called B",
 * "... (3 ranks differ from rank 0)"). Every rank holding the same calls
 * reaches the same verdict and text. */
typedef const shs__call_t *(*shs__call_get_fn)(const void *ctx, int rank, shs__call_t *buf);
int shs__check_calls(int n, shs__call_get_fn get, const void *ctx, const char *comm_name, char *detail,
                     size_t size);

/* AVG's 1/N for a float dtype as NCCL represents it (comm.h, AVG): 1/N in
 * double, rounded to f32, then to the dtype; f64 keeps the double. The value
 * is exact in the dtype. 0 for integer dtypes (they divide the sum). */
double shs__avg_scale(shs_dtype_t dtype, int nranks);

/* dst[i] = op over srcs[0][i], srcs[1][i], ..., srcs[nsrc-1][i] in that order,
 * for i in [0, n), with the rounding rules of comm.h (AVG with N = nsrc:
 * floats sum srcs[k][i] * shs__avg_scale(dtype, nsrc), each product rounded
 * to the dtype; integers divide the sum by nsrc).
 * dst may equal any source: each tile of dst is written after all sources of
 * that tile were read. Sources must not overlap dst otherwise. */
void shs__reduce(void *dst, const void *const *srcs, int nsrc, size_t n, shs_dtype_t dtype, shs_redop_t op);

/* Rank j's share of `count` elements split over N ranks, floor-balanced:
 * elements [shs__chunk_start(j), shs__chunk_start(j+1)), start(j) =
 * j*q + min(j, count % N) with q = count / N (the first count % N chunks
 * one longer). Every backend splits work this way. */
static inline size_t shs__chunk_start(size_t count, int nranks, int j) {
    size_t q = count / (size_t)nranks, rem = count % (size_t)nranks;
    return q * (size_t)j + ((size_t)j < rem ? (size_t)j : rem);
}

/* Ring order's chunk c (comm.h, RING REDUCTION ORDER): elements
 * [min(c*S, count), min((c+1)*S, count)) with S = ceil(count/N); trailing
 * chunks may be short or empty. */
static inline void shs__ring_chunk(size_t count, int n, int c, size_t *off, size_t *len) {
    size_t S = count / (size_t)n + (count % (size_t)n != 0);
    size_t lo = (size_t)c * S < count ? (size_t)c * S : count;
    size_t hi = count - lo < S ? count : lo + S;
    *off = lo;
    *len = hi - lo;
}
/* The same reduction, each tile stored to every dsts[k] (k < ndst) after all
 * sources of that tile were read (so any dst may equal any source at the same
 * offsets). `stream`: non-temporal stores (for outputs larger than the cache;
 * followed by a store fence before returning). */
void shs__reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n, shs_dtype_t dtype,
                       shs_redop_t op, int stream);
/* src (bytes) to every dsts[k], chunk by chunk so src is read from memory
 * once; a dst equal to src is skipped. `stream` as above. */
void shs__copy_multi(void *const *dsts, int ndst, const void *src, size_t bytes, int stream);
void shs__stream_fence(void);

/* Reuse of the thread backend by the CUDA communicators (src/comm/cuda/): a
 * handle `tcomm` of the thread backend serves as their rendezvous.
 * begin: post `call` (its buffer pointers included), wait for every rank,
 * compare every rank's call (SHS_MISMATCH / SHS_TIMEOUT / SHS_ABORTED as in
 * comm.h). posted: rank j's posted call, valid from a successful begin until
 * this rank's next call. finish: the optional exit barrier, then mark the
 * call done. */
shs_status_t shs__comm_thread_begin(shs_comm_t *tcomm, const shs__call_t *call);
const shs__call_t *shs__comm_thread_posted(const shs_comm_t *tcomm, int rank, const shs__call_t *call);
shs_status_t shs__comm_thread_finish(shs_comm_t *tcomm, const shs__call_t *call, int exit_barrier);
/* The thread backend's point-to-point on `tcomm` (the p2p slot), its data
 * moved by `copy` (NULL: pair and check only). */
shs_status_t shs__comm_thread_p2p(shs_comm_t *tcomm, const shs__call_t *calls, int n, shs__copy_fn copy);
/* The CUDA communicators' vtables (src/comm/cuda/comm_cuda_local.c, comm_nccl.c). */
extern const shs__comm_iface_t shs__comm_cuda_local_iface;
extern const shs__comm_iface_t shs__comm_nccl_iface;

/* Error-text helpers shared by the backends (comm.c): printf into
 * buf + *len (size bytes in all), advancing *len, never past the end; and
 * "[0-2,5]" for the ranks r < n with in_set[r] != 0. */
void shs__appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void shs__append_rank_set(char *buf, size_t size, size_t *len, const unsigned char *in_set, int n);

#endif
