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
#define FAIL_TEXT 768
#define YIELD_SECONDS 2e-3   /* poll with sched_yield this long, then sleep between polls */
#define SLEEP_MIN_S 50e-6
#define SLEEP_MAX_S 1e-3

typedef enum { FAIL_NONE, FAIL_MISMATCH, FAIL_TIMEOUT, FAIL_ABORT, FAIL_MPI } fail_kind_t;

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
} mpi_ctx_t;

#define MPI_TRY(comm, call)                                              \
    do {                                                                 \
        int mpi__rc = (call);                                            \
        if (mpi__rc != MPI_SUCCESS) return shs__mpi_error((comm), #call, mpi__rc); \
    } while (0)

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
shs_status_t shs__mpi_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm);

#endif
