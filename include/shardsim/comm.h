/* comm.h - communicators and collectives: threads stand in for GPUs.
 *
 * What it is: an NCCL-shaped collective API. A communicator joins N ranks:
 * N threads of one process (the thread backend, shs_comm_id_create), or N
 * processes of an MPI job (comm_mpi.h). Argument order and in-place rules are NCCL's
 * (nccl.h, "Collective Operations" in the NCCL user guide): send buffer,
 * receive buffer, count in elements, dtype, [reduce op], [root], communicator.
 * Point-to-point calls are NCCL's too (shs_send, shs_recv, shs_group_start
 * and _end, as ncclSend, ncclRecv, ncclGroupStart and _End), and all-to-all
 * is built on them. All buffers are host-addressable memory (CPU device
 * pointers).
 * What it is not: a model of network time.
 *
 * FIXED REDUCTION ORDER. Every reduced element is combined over ranks in rank
 * order 0, 1, ..., N-1:  r = x0; r = op(r, x1); ...; r = op(r, x_{N-1})
 * whatever algorithm moves the data. For f16 and bf16 each op() is computed in
 * f32 and rounded to the dtype (round-to-nearest-even), which equals a
 * correctly rounded add in that dtype because f32 carries >= 2p+2 bits
 * (Figueroa, "When is double rounding innocuous?", 1995). AVG is a sum of
 * pre-multiplied inputs (below). Hence an element's result depends only on
 * the N inputs at that element, and all_reduce(x) is bit-identical to
 * all_gather(reduce_scatter(x)) and to reduce(x) followed by broadcast.
 * MAX/MIN return the first NaN operand if any operand is NaN.
 *
 * AVG is defined as NCCL defines ncclAvg (src/enqueue.cc, hostToDevRedOp;
 * src/device/reduce_kernel.h, FuncPreMulSum and FuncSumPostDiv):
 *   floats    pre-multiplied sum: every input, the first included, is
 *             multiplied by s and the product rounded to the dtype, then the
 *             products are summed in the order above with the SUM rounding:
 *               r = rnd(x0*s); r = rnd(r + rnd(x1*s)); ...
 *             s is 1/N as NCCL stores it: 1/N in double, rounded to f32
 *             (f32: that is s), then rounded to nearest even in f16 or bf16
 *             (f16: 1/3 -> 0x3555 = 0.333251953125; bf16: 1/3 -> 0x3eab =
 *             0.333984375); f64: 1/N in double. A product of two f16 (or
 *             two bf16, for N <= 512) values is exact in f32, so rnd is one
 *             rounding. N a power of two: s = 2^-k and every product is exact
 *             barring underflow, so AVG = SUM scaled by 2^-k, computed without
 *             the SUM's overflow (f16 avg of 60000 and 60000 is 60000; the sum
 *             would be inf). Other N: s is not 1/N exactly and each product
 *             rounds, so AVG may differ from SUM/N by a few ulps.
 *   integers  the wrapped SUM, then divided by N truncating toward zero
 *             (NCCL's SumPostDiv: |sum| / N, sign restored).
 * Rank and ring order apply to the products exactly as to the SUM's inputs.
 * Every backend keeps this order, so the same calls give the same bits on
 * threads and on processes. The MPI backend therefore never calls
 * MPI_Allreduce or MPI_Reduce_scatter (MPI fixes no order of combination and
 * its algorithms differ by size and process count): it moves the data with
 * MPI and reduces locally in this order (comm_reduce.c).
 *
 * RING REDUCTION ORDER (opt-in, shs_comm_set_reduce_order(); the default
 * SHS_REDUCE_ORDER_RANK is the fixed order above). SHS_REDUCE_ORDER_RING
 * emulates the order in which NCCL's ring algorithm adds (NCCL issues #855
 * and #1055: a ring reduce-scatter is one chained reduce per chunk, each
 * chunk's chain starting at a different rank, and "sum over n gpus = sum over
 * n-1 gpus + value of one gpu"; the finished sum is then sent unchanged to
 * every rank). The buffer is cut into N chunks:
 *   reduce_scatter  chunk c = rank c's output block,
 *                   elements [c*recvcount, (c+1)*recvcount);
 *   all_reduce      S = ceil(count/N), chunk c = elements
 *                   [min(c*S, count), min((c+1)*S, count)) (trailing chunks
 *                   may be short or empty).
 * Every element of chunk c is combined in the order
 *   r = x_{(c+1)%N}; r = op(r, x_{(c+2)%N}); ...; r = op(r, x_c)
 * (the chain starts at the rank after the chunk's owner and ends with the
 * owner c, which in the reduce-scatter phase is where the chunk's sum lands),
 * with the same per-op rounding in the dtype as above (f16/bf16 round at every
 * hop, f32 rounds naturally); AVG sums the chain's pre-multiplied inputs
 * (integers: divides the chain's sum by N at the end).
 * Every rank receives the same result. At N <= 2 both orders give the same
 * bits for SUM/AVG/PROD (one commutative op per element). all_reduce(x) is
 * bit-identical to all_gather(reduce_scatter(x)) when count = N*recvcount
 * (the chunks coincide), and in general NOT otherwise: an element's result
 * depends on which chunk it falls in, i.e. on the buffer's length and offset
 * - which is why DDP (bucketed all-reduce) and FSDP (per-unit reduce-scatter)
 * drift apart at N >= 3. Real NCCL cuts buffers further (channels, slices,
 * protocol steps); this is the single-channel, single-loop ring. reduce (to a
 * root), broadcast and all_gather are unaffected: reduce keeps rank order.
 *
 * CONSISTENCY CHECKS. Each rank numbers its calls on a communicator
 * (sequence number, from 0). Every collective compares all ranks' calls
 * (op, count, dtype, reduce op, root, sequence number, tag); on any
 * difference every rank returns SHS_MISMATCH with text naming the sequence
 * number, the ranks and both calls (tags included). A rank that does not
 * arrive within the timeout makes
 * every waiting rank return SHS_TIMEOUT naming the missing ranks and each
 * rank's last call. After a mismatch, timeout or shs_comm_abort() the
 * communicator is unusable: every later call returns SHS_ABORTED (as an NCCL
 * communicator after an asynchronous error).
 * A call that fails returns only once no other rank can still read or write
 * its buffers, so the caller may reuse or free them at once.
 *
 * JOB FAILURE. The communicators made from one rendezvous (all ranks' handles
 * of shs_comm_id_create's id, or of one shs_comm_mpi_create) and every split
 * of them form a job. The first call that fails on any of them (a mismatch,
 * timeout, abort, or a backend's error) fails the whole job at once: every
 * other communicator of the job is marked failed too, so a rank waiting in
 * any of them returns SHS_ABORTED at once with the first failure's text
 * ("the job failed: rank 0: comm 'split(color=1)[2-3]' seq 5: ..."), and
 * later calls do the same. A job never waits out a timeout on one group for
 * a fault in another. Names are unique within a job: "world" (or the name
 * given), and a split's child "split(color=C)[R]", R its members' ranks in
 * the root communicator ("[0-1,4]"), with "#2", "#3" after a repeated name.
 *
 * POINT-TO-POINT. A send and a receive pair by the pairing rule below
 * (shs_p2p_pair_differs), the same rule the trace analysis applies
 * (trace_check.h): each rank numbers its sends to each peer and its
 * receives from each peer (per (comm, peer) sequence numbers, from 0,
 * apart from the collectives' numbers); the k-th send from a to b pairs
 * with b's k-th receive from a. A call blocks until its message has moved
 * (a rendezvous, as an NCCL send whose kernel waits for the receiver); the
 * calls between shs_group_start and shs_group_end all run at the end, so a
 * rank may send and receive in one group without deadlock, as in NCCL.
 * Checked: a pair whose count, dtype or tag (nonzero tags, as for
 * collectives) differ makes both ranks return SHS_MISMATCH naming both
 * calls, their ranks and sequence numbers; ranks blocked on each other in
 * a cycle (a ring of sends without a group; a send whose receiver waits in
 * a collective of the same communicator) make every rank of the cycle
 * return SHS_MISMATCH naming each rank, its call and the rank it waits for
 * (thread backend); a send or receive whose peer does not come within the
 * timeout returns SHS_TIMEOUT naming the peer and its last call. The MPI
 * backend checks pairs and timeouts the same way but finds no cycle: a
 * cycle there ends in the timeout.
 *
 * The MPI backend exchanges each call's descriptor the same way and fails
 * the same way, with one addition: since MPI cannot cancel the collectives
 * left half done in other processes, a program ends with shs_mpi_abort()
 * after an error (comm_mpi.h).
 * The meta backend (comm_meta.h) has no other rank present and checks nothing.
 *
 * CALL TAGS (shs_comm_set_tag). The fields above only see what a call
 * looks like, so a rank that skips one call among identical calls (the
 * same all-reduce every step, the same all-gather for every block of equal
 * size) stays in step with the others by the fields: each later call pairs
 * with the other ranks' call one further on, every such pair looks alike,
 * and the results mix data of different calls while every call returns
 * SHS_OK. NCCL has no such check at all. A tag names what a call is for
 * (its purpose, unit, micro-batch and step: shs_comm_tag_pack), as
 * PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints calls; the tag is
 * compared with the other fields. Exactly:
 *  - Detected, at the first call whose tags differ: two ranks' calls of one
 *    sequence number carrying different nonzero tags. So a skipped (or
 *    extra) call is caught at that sequence number, on every rank, whenever
 *    the skipping rank's next tagged call carries a tag other than the
 *    skipped one's. shardsim's strategies (strategy.h), the trainer and
 *    the meta run tag every call they make with its purpose, unit,
 *    micro-batch and step, which tells a call from the next one on the
 *    same communicator (a unit used twice in one pass, the GPT's tied
 *    embedding, repeats its tag, but not in consecutive calls), so a
 *    skipped strategy call is caught at the skip.
 *  - Not detected by tags: a tag of 0 (untagged, the default) matches any
 *    tag. A skip among untagged identical calls is found only when the
 *    fields differ later or, when the skipping rank stops one call early,
 *    by the timeout at the others' last call; the calls in between return
 *    SHS_OK with mixed results, as before tags existed. Also not detected:
 *    a skip whose next call happens to carry the same tag (a program that
 *    gives several calls one tag; tags kept across calls are sticky, see
 *    shs_comm_set_tag), a call tagged on one rank and untagged on another,
 *    and calls compared through fields packed into fewer bits than they
 *    hold (unit mod 2^16, micro-batch mod 2^8, step mod 2^32).
 *  - Not detected on a communicator of one rank (hybrid sharding with a
 *    shard group of G = 1, a split that leaves one member): it has no
 *    other rank to compare with, so a call skipped on it goes unseen there;
 *    it is caught only where the rank's later calls on a larger
 *    communicator (the replica group, the world) differ.
 * Tags are not recorded in traces (shs_comm_call_info_t has none; trace
 * formats are unchanged).
 *
 * Thread safety: a rank's handle is used by one thread at a time (MPI: the
 * thread that initialized MPI, shs_comm_abort() included).
 */
#ifndef SHARDSIM_COMM_H
#define SHARDSIM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/dtype.h"
#include "shardsim/status.h"

typedef struct shs_comm shs_comm_t;
/* Rendezvous that N threads use to form one communicator (ncclUniqueId's role). */
typedef struct shs_comm_id shs_comm_id_t;

/* Reduce ops, one row each: enum suffix, name. In this order the values
 * equal NCCL's ncclRedOp_t: sum 0, prod 1, max 2, min 3, avg 4. */
#define SHS_REDOP_MAP(X) X(SUM, "sum") X(PROD, "prod") X(MAX, "max") X(MIN, "min") X(AVG, "avg")

typedef enum {
#define SHS_REDOP_ENUM(id, name) SHS_##id,
    SHS_REDOP_MAP(SHS_REDOP_ENUM)
#undef SHS_REDOP_ENUM
    SHS_NUM_REDOPS
} shs_redop_t;

/* Every op a communicator runs or a trace records, one row each: enum
 * suffix, name (as traces, stats and errors write it), kind (shs_op_kind_t:
 * COLL a collective, matched across a communicator's members by sequence
 * number; SPLIT a communicator split; P2P send/recv; WAIT the local
 * completion of an async call, never matched or replayed).
 * SHS_COMM_OP_MAP: what shs_comm_t runs (comm stats are indexed by these);
 * SHS_TRACE_OP_MAP: what traces of other tools also hold. */
#define SHS_COMM_OP_MAP(X)                                                       \
    X(ALL_GATHER, "all_gather", COLL)                                            \
    X(REDUCE_SCATTER, "reduce_scatter", COLL)                                    \
    X(ALL_REDUCE, "all_reduce", COLL)                                            \
    X(BROADCAST, "broadcast", COLL)                                              \
    X(REDUCE, "reduce", COLL)                                                    \
    X(BARRIER, "barrier", COLL)                                                  \
    X(SPLIT, "split", SPLIT)                                                     \
    X(SEND, "send", P2P)                                                         \
    X(RECV, "recv", P2P)
#define SHS_TRACE_OP_MAP(X)                                                      \
    X(ALL_TO_ALL, "all_to_all", COLL)                                            \
    X(ALL_TO_ALLV, "all_to_allv", COLL) /* per-rank sizes differ: bytes not compared */ \
    X(GATHER, "gather", COLL)                                                    \
    X(SCATTER, "scatter", COLL)                                                  \
    X(WAIT, "wait", WAIT)

typedef enum {
#define SHS_COLL_OP_ENUM(id, name, kind) SHS_OP_##id,
    SHS_COMM_OP_MAP(SHS_COLL_OP_ENUM) SHS_TRACE_OP_MAP(SHS_COLL_OP_ENUM)
#undef SHS_COLL_OP_ENUM
    SHS_NUM_OPS
} shs_coll_op_t;

/* The number of rows of SHS_COMM_OP_MAP: ops below it are run by a communicator. */
enum {
#define SHS_COLL_OP_COUNT(id, name, kind) +1
    SHS_NUM_COLL_OPS = 0 SHS_COMM_OP_MAP(SHS_COLL_OP_COUNT)
#undef SHS_COLL_OP_COUNT
};

typedef enum { SHS_OPK_COLL, SHS_OPK_SPLIT, SHS_OPK_P2P, SHS_OPK_WAIT } shs_op_kind_t;

const char *shs_redop_name(shs_redop_t op);      /* "sum", "prod", "max", "min", "avg"; "invalid" otherwise */
int shs_redop_parse(const char *name, shs_redop_t *out); /* 0 ok, -1 unknown */
const char *shs_coll_op_name(shs_coll_op_t op);  /* "all_gather", ..., "send", "wait"; "invalid" otherwise */
int shs_coll_op_parse(const char *name, shs_coll_op_t *out); /* any row's name: 0 ok, -1 unknown */
shs_op_kind_t shs_coll_op_kind(shs_coll_op_t op); /* the row's kind; WAIT for an invalid op */
int shs_coll_op_is_p2p(shs_coll_op_t op);        /* 1 for send/recv */
int shs_coll_op_is_collective(shs_coll_op_t op); /* 1 for kind COLL */

#define SHS_COMM_DEFAULT_TIMEOUT_MS 60000

/* The order in which all_reduce and reduce_scatter combine ranks (see RING
 * REDUCTION ORDER above). RANK (0) is the default. */
#define SHS_REDUCE_ORDER_MAP(X) X(RANK, "rank") X(RING, "ring")
typedef enum {
#define SHS_REDUCE_ORDER_ENUM(id, name) SHS_REDUCE_ORDER_##id,
    SHS_REDUCE_ORDER_MAP(SHS_REDUCE_ORDER_ENUM)
#undef SHS_REDUCE_ORDER_ENUM
    SHS_NUM_REDUCE_ORDERS
} shs_reduce_order_t;

const char *shs_reduce_order_name(shs_reduce_order_t order);            /* "rank", "ring" */
int shs_reduce_order_parse(const char *name, shs_reduce_order_t *out);  /* 0 ok, -1 unknown */

/* Per-rank counters, by collective op. */
typedef struct {
    uint64_t calls[SHS_NUM_COLL_OPS];
    /* Bytes of the collective's buffer: all_reduce/broadcast/reduce count*size;
     * all_gather and reduce_scatter the whole (N * per-rank) buffer; send and
     * recv the message (count*size). */
    uint64_t bytes[SHS_NUM_COLL_OPS];
    /* Bytes this rank sends under a ring algorithm, the nccl-tests busbw model,
     * computed from the byte totals above (rounded down once):
     * all_reduce 2(N-1)/N * bytes; all_gather, reduce_scatter (N-1)/N * bytes;
     * broadcast, reduce (N-1)/N * bytes on average per rank; send all its
     * bytes, recv none. */
    uint64_t bytes_sent[SHS_NUM_COLL_OPS];
} shs_comm_stats_t;

/* Create a rendezvous for `nranks` threads. `timeout_ms` <= 0 means
 * SHS_COMM_DEFAULT_TIMEOUT_MS. `name` (copied; may be NULL -> "world") names
 * the communicator in errors. Each of the nranks threads then calls
 * shs_comm_init_rank() once; the creator drops its reference with
 * shs_comm_id_release() whenever it likes. Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_comm_id_create(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name);
void shs_comm_id_release(shs_comm_id_t *id);

/* Join as `rank` (0 <= rank < nranks). Does not wait for the other ranks
 * (their first collective does). Errors: SHS_INVALID_ARG (bad or taken rank). */
shs_status_t shs_comm_init_rank(shs_comm_t **comm, shs_comm_id_t *id, int rank);
/* Release this rank's handle; the shared state goes with the last handle. */
void shs_comm_destroy(shs_comm_t *comm);

int shs_comm_rank(const shs_comm_t *comm);
int shs_comm_size(const shs_comm_t *comm);
const char *shs_comm_name(const shs_comm_t *comm);
void shs_comm_get_stats(const shs_comm_t *comm, shs_comm_stats_t *out);

/* Set this rank's reduction order for its later all_reduce and
 * reduce_scatter calls. A local setting, no communication: every rank must
 * set the same order, else its next all_reduce or reduce_scatter returns
 * SHS_MISMATCH on every rank (the order is part of the checked call).
 * Communicators made by shs_comm_split() inherit the parent handle's order.
 * Errors: SHS_INVALID_ARG (NULL comm, unknown order). */
shs_status_t shs_comm_set_reduce_order(shs_comm_t *comm, shs_reduce_order_t order);
shs_reduce_order_t shs_comm_reduce_order(const shs_comm_t *comm); /* RANK for NULL */

/* ---- call tags (see CALL TAGS above) ------------------------------------ */

/* What a packed tag's call is for, one row each: enum suffix, name (that
 * of the error text), meaning. */
#define SHS_TAG_KIND_MAP(X)                                                                          \
    X(RAW, "raw")                               /* not packed: the tag is a plain number ("tag 14") */ \
    X(FWD_ALL_GATHER, "fwd-all-gather")         /* a unit's parameters for forward */               \
    X(BWD_ALL_GATHER, "bwd-all-gather")         /* a unit's parameters for backward */              \
    X(REDUCE_SCATTER, "reduce-scatter")         /* a unit's gradient over the shard group */        \
    X(REPLICA_ALL_REDUCE, "replica-all-reduce") /* a unit's gradient shard across replicas */       \
    X(GRAD_ALL_REDUCE, "grad-all-reduce")       /* a bucket of whole gradients (DDP) */             \
    X(PARAM_REGATHER, "param-regather")         /* a unit's parameters after the optimizer step */  \
    X(GRAD_NORM, "grad-norm")                   /* the gradient norm for clipping */                \
    X(OVERFLOW_CHECK, "overflow-check")         /* fp16 loss scaling's inf/NaN check */             \
    X(LOSS_ALL_REDUCE, "loss-all-reduce")       /* the step's loss */                               \
    X(SPLIT, "split")                           /* a communicator split */                          \
    X(TOKEN_COUNT, "token-count")               /* the global batch's counted targets (loss norm) */

typedef enum {
#define SHS_TAG_KIND_ENUM(id, name) SHS_TAG_##id,
    SHS_TAG_KIND_MAP(SHS_TAG_KIND_ENUM)
#undef SHS_TAG_KIND_ENUM
    SHS_NUM_TAG_KINDS
} shs_tag_kind_t;

/* A tag from its parts, nonzero for kind >= 1: bits 63-56 kind, 55-48
 * micro-batch mod 2^8, 47-32 unit + 1 mod 2^16 (0: none, unit < 0), 31-0
 * step mod 2^32 (0: none). A tag below 2^56 (kind RAW) is a plain number. */
uint64_t shs_comm_tag_pack(shs_tag_kind_t kind, int unit, int micro, long step);
/* The tag as error texts show it: "untagged" (0), "tag 14" (RAW),
 * "[reduce-scatter unit 3 micro 0 step 7]" (packed; "unit" and "step"
 * left out when none), "tag 0x..." (unknown kind). Always NUL-terminated
 * (size >= 1). */
void shs_comm_tag_format(char *buf, size_t size, uint64_t tag);
/* The tag of this rank's later calls on this handle, until set again
 * (sticky, like the marker); 0 (the default) is untagged and matches any
 * tag. A local setting, no communication; not inherited by split children. */
void shs_comm_set_tag(shs_comm_t *comm, uint64_t tag);
uint64_t shs_comm_tag(const shs_comm_t *comm); /* 0 for NULL */

/* Mark the communicator failed with `reason` and wake every waiting rank,
 * which returns SHS_ABORTED naming this rank and the reason. Safe to call from
 * any thread, any number of times (the first reason is kept). */
void shs_comm_abort(shs_comm_t *comm, const char *reason);

/* recvbuf (N*sendcount) gets rank r's sendbuf (sendcount) at offset r*sendcount.
 * In place iff sendbuf == recvbuf + rank*sendcount (in elements). */
shs_status_t shs_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount, shs_dtype_t dtype,
                            shs_comm_t *comm);
/* recvbuf (recvcount) = op over ranks (the communicator's reduce order:
 * rank order by default) of sendbuf[rank*recvcount ...
 * (rank+1)*recvcount) (sendbuf holds N*recvcount). In place iff
 * recvbuf == sendbuf + rank*recvcount. */
shs_status_t shs_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, shs_dtype_t dtype,
                                shs_redop_t op, shs_comm_t *comm);
/* recvbuf (count) = op over ranks (the communicator's reduce order) of
 * sendbuf (count). In place iff sendbuf == recvbuf. */
shs_status_t shs_all_reduce(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype,
                            shs_redop_t op, shs_comm_t *comm);
/* recvbuf (count) on every rank = root's sendbuf (count). sendbuf is read on
 * root only. In place iff sendbuf == recvbuf. */
shs_status_t shs_broadcast(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, int root,
                           shs_comm_t *comm);
/* root's recvbuf (count) = op over ranks of sendbuf (count); recvbuf is
 * ignored on other ranks. In place iff sendbuf == recvbuf. */
shs_status_t shs_reduce(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, shs_redop_t op,
                        int root, shs_comm_t *comm);
/* Returns once every rank has called it. */
shs_status_t shs_barrier(shs_comm_t *comm);

/* ---- point-to-point (see POINT-TO-POINT above) --------------------------- */

/* Send `count` elements of sendbuf to rank `peer` (0 <= peer < N) of comm,
 * like ncclSend. Blocks until the message has moved into the peer's
 * matching shs_recv (or, inside a group, only queues it: the group's end
 * runs it, and sendbuf must stay untouched until then). A send to oneself
 * pairs with a receive from oneself in the same group; outside a group it
 * is refused (SHS_INVALID_ARG: nothing could ever receive it).
 * Errors: SHS_INVALID_ARG (NULL comm or buffer with count > 0, peer out of
 * range, bad dtype, a group already holding another communicator's calls:
 * consumes no sequence number), SHS_MISMATCH, SHS_TIMEOUT, SHS_ABORTED. */
shs_status_t shs_send(const void *sendbuf, size_t count, shs_dtype_t dtype, int peer, shs_comm_t *comm);
/* Receive `count` elements from rank `peer` into recvbuf, like ncclRecv:
 * the k-th receive from a peer takes that peer's k-th send to this rank,
 * whose count and dtype must be these. Otherwise as shs_send. */
shs_status_t shs_recv(void *recvbuf, size_t count, shs_dtype_t dtype, int peer, shs_comm_t *comm);
/* Group this thread's (this rank's) next sends and receives, as
 * ncclGroupStart/ncclGroupEnd: they are checked and queued as they are
 * called and all run at the outermost shs_group_end, which returns once
 * every one of them has moved (or the first error). Groups nest (only the
 * outermost end runs them). A group holds the point-to-point calls of one
 * communicator; a collective or split inside a group is refused
 * (SHS_INVALID_ARG), as are shs_group_end without a start and a group whose
 * sends to this rank itself do not pair with its receives from itself
 * (SHS_MISMATCH, the communicator then failed: the group's other calls
 * were already numbered). */
shs_status_t shs_group_start(void);
shs_status_t shs_group_end(void);

/* PyTorch's all_to_all_single with equal splits: block j of sendbuf
 * (elements [j*count, (j+1)*count), N*count in all) goes to rank j, and
 * rank j's block for this rank lands at block j of recvbuf (N*count). One
 * group of N sends and N receives (its own block too, copied), so it is
 * recorded, checked and counted as those (stats and traces hold sends and
 * receives). sendbuf and recvbuf must not overlap. Errors: as shs_send. */
shs_status_t shs_all_to_all(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, shs_comm_t *comm);
/* The same with uneven splits (all_to_all_single's input_split_sizes and
 * output_split_sizes): send_counts[j] elements to rank j, taken from
 * sendbuf in rank order without gaps; recv_counts[j] elements from rank j,
 * stored in recvbuf the same way. Rank i's send_counts[j] must equal rank
 * j's recv_counts[i] (else SHS_MISMATCH on both, naming both). */
shs_status_t shs_all_to_allv(const void *sendbuf, const size_t *send_counts, void *recvbuf, const size_t *recv_counts,
                             shs_dtype_t dtype, shs_comm_t *comm);

/* ---- the pairing rule, shared with the trace analysis (trace_check.h) ---- */

/* One end of a message: a send or a receive as a communicator or a trace
 * holds it. */
typedef struct {
    shs_coll_op_t op;  /* SHS_OP_SEND or SHS_OP_RECV */
    int rank, peer;    /* the caller and the other end, in one numbering */
    uint64_t seq;      /* which send to (receive from) that peer: k, from 0 */
    uint64_t count;    /* elements; 0 with dtype -1: unknown, bytes compared */
    int dtype;         /* shs_dtype_t, or -1 when unknown */
    uint64_t bytes;    /* the message's bytes */
    uint64_t tag;      /* the call tag (comm.h CALL TAGS); 0 matches any */
} shs_p2p_end_t;

/* The pairing rule: a send and a receive are the two ends of one message
 * when the send's (rank, peer) is the receive's (peer, rank) and both are
 * the k-th on that channel (equal seq); the ends must then agree on dtype
 * and count where both know them, else on bytes, and on nonzero tags.
 * Returns NULL when they pair and agree, else the first field that does not
 * ("op", "peer", "seq", "dtype", "count", "bytes", "tag"). */
const char *shs_p2p_pair_differs(const shs_p2p_end_t *send, const shs_p2p_end_t *recv);

/* ---- recording hook (trace_record.h builds traces on it) -------------- */

/* One completed-or-failed call as the recorder sees it, after it returns. */
typedef struct {
    shs_coll_op_t op;
    size_t count;          /* elements, NCCL's convention (all_gather send count, reduce_scatter recv count) */
    shs_dtype_t dtype;
    shs_redop_t redop;     /* SUM for ops without one */
    int root;              /* send/recv: the peer (as NCCL fills root); 0 for ops without one */
    uint64_t seq;          /* this rank's sequence number on the communicator; send/recv:
                            * on its (comm, peer) channel */
    uint64_t bytes;        /* this rank's part: count * dtype size (0 for barrier) */
    double t_start, t_end; /* shs_now_seconds() around the call */
    const char *marker;    /* the marker set when the call was made ("" if none) */
    shs_status_t status;
    int color;             /* split only: the color this rank passed */
    shs_comm_t *newcomm;   /* split only: this rank's new handle (NULL: SHS_SPLIT_NOCOLOR or failed) */
} shs_comm_call_info_t;

typedef void (*shs_comm_recorder_fn)(void *user, const shs_comm_t *comm, const shs_comm_call_info_t *call);

/* Call fn(user, comm, info) after every collective, send, receive and split
 * this rank's handle makes, on the calling rank's thread (a group's sends and
 * receives one by one after its end, in call order); NULL fn turns it off.
 * A split is reported as op SHS_OP_SPLIT (count and bytes 0) with its color
 * and new handle; that handle already has this recorder (fn and user), so a
 * recorder that ignores splits sees the child's calls too (with the child as
 * `comm`), and one that wants to tell communicators apart re-hooks the child
 * from the report. Calls rejected by argument checks are not reported (they
 * consume no sequence number). */
void shs_comm_set_recorder(shs_comm_t *comm, shs_comm_recorder_fn fn, void *user);
/* The marker (phase/unit, e.g. "fwd/block3") attached to this rank's next
 * calls; copied, truncated to SHS_COMM_MARKER_MAX - 1 bytes; NULL clears. */
#define SHS_COMM_MARKER_MAX 64
void shs_comm_set_marker(shs_comm_t *comm, const char *marker);
const char *shs_comm_marker(const shs_comm_t *comm);

#define SHS_SPLIT_NOCOLOR (-1)
/* Collective over `comm` (like ncclCommSplit): ranks passing the same
 * `color` (>= 0) form a new communicator, ranked by (key, parent rank).
 * color == SHS_SPLIT_NOCOLOR gives *newcomm = NULL. The child is named
 * "split(color=C)[R]" (JOB FAILURE above: R its members' root ranks, "#k"
 * after a repeat), belongs to the parent's job and inherits the timeout
 * and, per handle, the reduce order and the recorder (shs_comm_set_recorder;
 * the split is reported to it). The split takes one sequence number of
 * `comm`. */
shs_status_t shs_comm_split(shs_comm_t *comm, int color, int key, shs_comm_t **newcomm);

#endif
