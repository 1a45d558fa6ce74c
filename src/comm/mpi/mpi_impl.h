/* mpi_impl.h - private to src/comm/mpi/: the MPI backend's per-rank state
 * and the pieces its files share: errors, the descriptor exchange and the
 * polling wait (mpi_sync.c), the collectives (mpi_collectives.c), the
 * handle's lifetime (comm_mpi.c). Only with SHS_HAVE_MPI.
 * What it is not: the public MPI entry points (comm_mpi.h).
 */
#ifndef SHARDSIM_MPI_IMPL_H
#define SHARDSIM_MPI_IMPL_H

#include <mpi.h>
#include <stdint.h>

#include "comm/comm_impl.h"

#define TAG_DESC 1
#define TAG_ABORT 2
#define TAG_SEND_DESC 3   /* a send's descriptor, sender to receiver (mpi_p2p.c) */
#define TAG_RECV_DESC 4   /* a receive's descriptor, receiver to sender */
#define TAG_P2P_DATA 5    /* a message's data */
#define FAIL_TEXT 768
#define YIELD_SECONDS 2e-3   /* poll with sched_yield this long, then sleep between polls */
#define SLEEP_MIN_S 50e-6
#define SLEEP_MAX_S 1e-3

typedef enum { FAIL_NONE, FAIL_MISMATCH, FAIL_TIMEOUT, FAIL_ABORT, FAIL_MPI, FAIL_JOB } fail_kind_t;

/* One call's fields as sent to the other ranks (fixed layout, all int64). */
typedef struct {
    int64_t op, count, dtype, redop, root, order, seq, color, key, tag;
} desc_t;

typedef struct {
    MPI_Comm mc;
    int timeout_ms;
    char *name;
    fail_kind_t fail;
    char fail_detail[FAIL_TEXT];
    desc_t mine;                 /* send buffer of the current exchange */
    desc_t *descs;               /* (nranks) this call's descriptors */
    desc_t *last;                /* (nranks) last descriptor received from each rank */
    unsigned char *seen;         /* (nranks) last[j] is valid */
    MPI_Request *reqs;           /* (2 * nranks) */
    int *owner;                  /* (2 * nranks) exchange: rank whose descriptor reqs[k] receives, -1 send */
    int *scounts, *sdispls, *rcounts, *rdispls; /* (nranks) each, elements */
    const void **srcs;           /* (nranks) */
    char *scratch;
    size_t scratch_bytes;
    int data_pending;            /* a data-phase wait failed: MPI may still write into user or scratch memory */
    char abort_msg[FAIL_TEXT];   /* send buffer of abort messages */
    MPI_Request *abort_reqs;     /* (nranks) */
    /* point-to-point (mpi_p2p.c), grown per group: per call its descriptor,
     * the peer's, and two requests (a descriptor's, then the data's) */
    desc_t *p2p_descs;           /* (2 p2p_cap): mine at 2i, the peer's at 2i+1 */
    MPI_Request *p2p_reqs;       /* (2 p2p_cap) */
    int p2p_cap, p2p_nreqs;      /* p2p_nreqs: requests of the last group still to release after a failure */
} mpi_ctx_t;

#define MPI_TRY(comm, call)                                              \
    do {                                                                 \
        int mpi__rc = (call);                                            \
        if (mpi__rc != MPI_SUCCESS) return shs__mpi_error((comm), #call, mpi__rc); \
    } while (0)

/* "rank 2: all_reduce seq 7 on comm 'world': " ("send to rank 3 seq 0" for
 * point-to-point): the start of a call's error text. */
void shs__mpi_call_prefix(char *buf, size_t size, const shs_comm_t *comm, const shs__call_t *call);
/* The status of a call on a communicator that failed earlier. */
shs_status_t shs__mpi_failed_earlier(const shs_comm_t *comm, const shs__call_t *call);
/* A call's descriptor, and the call (no buffers) a descriptor describes. */
desc_t shs__mpi_desc_of(const shs__call_t *call);
shs__call_t shs__mpi_call_of(const desc_t *d);
/* Poll reqs[0..n) until done (SHS_OK), an abort message (SHS_ABORTED,
 * error set), or the communicator's deadline (*timed_out = 1, SHS_TIMEOUT,
 * no error set: the caller names what was missing). data_phase: the
 * requests move user data (they cannot be cancelled: data_pending). */
shs_status_t shs__mpi_poll(shs_comm_t *comm, const shs__call_t *call, MPI_Request *reqs, int n, int data_phase,
                           int *timed_out);
/* Record a timeout of `call` as the communicator's failure (first wins). */
void shs__mpi_record_timeout(shs_comm_t *comm, const shs__call_t *call, const char *detail);
/* Record an MPI failure (first one wins) and return SHS_SYSTEM naming `what`. */
shs_status_t shs__mpi_error(const shs_comm_t *comm, const char *what, int rc);
/* The element type MPI moves: an unsigned integer of the dtype's size. */
MPI_Datatype shs__mpi_move_type(shs_dtype_t dtype);
/* Grow the rank's scratch to at least `bytes`. */
shs_status_t shs__mpi_ensure_scratch(shs_comm_t *comm, size_t bytes);
/* Send this call's descriptor to every other rank, receive theirs, compare;
 * returns once every rank has called (so it is also the barrier). */
shs_status_t shs__mpi_exchange(shs_comm_t *comm, const shs__call_t *call);
/* SHS_UNSUPPORTED when `elements` exceeds what one MPI call can move. */
shs_status_t shs__mpi_check_int_count(const shs_comm_t *comm, const shs__call_t *call, size_t elements);
/* The wait (deadline, abort messages) on one request. */
shs_status_t shs__mpi_wait_one(shs_comm_t *comm, const shs__call_t *call, MPI_Request *req);
/* Fill comm (ctx, rank, size, name) for the MPI communicator `mc`. */
shs_status_t shs__mpi_ctx_create(shs_comm_t *comm, MPI_Comm mc, int timeout_ms, const char *name);

/* The collectives (comm.h contracts), mpi_collectives.c. */
shs_status_t shs__mpi_all_gather(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_reduce_scatter(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_all_reduce(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_broadcast(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_reduce(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_barrier(shs_comm_t *comm, const shs__call_t *call);
shs_status_t shs__mpi_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members);
/* Point-to-point (mpi_p2p.c). */
shs_status_t shs__mpi_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy);

#endif
