/* world.h - a world of N simulated GPUs: N persistent rank threads, each
 * owning its device and its handle on the world communicator.
 *
 * What it is: the launcher (the role of torchrun / mpirun for threads). The
 * caller hands a function to every rank with shs_world_run(), which returns
 * when all ranks have returned. A rank whose function fails aborts the world
 * communicator, so ranks waiting in a collective return SHS_ABORTED instead
 * of hanging; shs_world_run() then reports the originating rank's error.
 * What it is not: a scheduler; jobs run one at a time.
 */
#ifndef SHARDSIM_WORLD_H
#define SHARDSIM_WORLD_H

#include <stddef.h>

#include "shardsim/comm.h"
#include "shardsim/device.h"

#define SHS_MAX_WORLD 1024

typedef struct shs_world shs_world_t;

typedef struct {
    int rank, world_size;
    shs_device_t *dev;
    shs_comm_t *comm;
    void *user;            /* per-rank slot the caller may use (e.g. model state) */
} shs_rank_ctx_t;

typedef shs_status_t (*shs_rank_fn)(shs_rank_ctx_t *ctx, void *arg);

/* What each rank runs on (CPU threads, or CUDA devices with NCCL).
 *   SHS_WORLD_CPU          a CPU device per rank, the thread communicator.
 *   SHS_WORLD_CUDA         a CUDA device per rank, all on GPU `gpu`, and the
 *                          device-local communicator (comm_cuda.h): bit-exact
 *                          like the threads; N ranks need only one GPU.
 *   SHS_WORLD_CUDA_NCCL    rank r on GPU gpu + r, the NCCL communicator.
 * CUDA backends fail with SHS_UNSUPPORTED ("no CUDA device" or "built
 * without the CUDA backend") where they cannot run. */
typedef enum { SHS_WORLD_CPU = 0, SHS_WORLD_CUDA = 1, SHS_WORLD_CUDA_NCCL = 2 } shs_world_backend_t;

typedef struct {
    int world_size;        /* 1..SHS_MAX_WORLD */
    size_t device_mem;     /* bytes per rank; SIZE_MAX unlimited */
    int timeout_ms;        /* collective timeout; <= 0: default */
    const char *name;      /* communicator name, e.g. "world" */
    shs_reduce_order_t reduce_order; /* all_reduce/reduce_scatter order (comm.h); 0 = RANK */
    shs_world_backend_t backend;     /* devices and communicator; 0 = CPU threads */
    int gpu;               /* CUDA backends: the (first) GPU index */
} shs_world_config_t;

/* Start world_size rank threads with a CPU device each (kernel threads per
 * device = max(1, cores / world_size)) and a world communicator.
 * Errors: SHS_INVALID_ARG (world size, reduce order), SHS_HOST_OOM, SHS_SYSTEM. */
shs_status_t shs_world_create(shs_world_t **out, const shs_world_config_t *cfg);
/* A world of which this process runs one rank: rank shs_comm_rank(comm) of
 * shs_comm_size(comm), over a communicator that spans processes (the MPI
 * backend, comm_mpi.h). cfg->world_size must equal the communicator's size
 * (name is unused). Jobs run on the caller's thread (no rank threads).
 *   cfg->backend SHS_WORLD_CPU: the rank gets a CPU device with
 *     max(1, cores / size) kernel threads and uses comm itself, which the
 *     world borrows (it must outlive the world);
 *   SHS_WORLD_CUDA_NCCL: one process per GPU. The rank gets a CUDA device on
 *     GPU cfg->gpu + its index among the job's processes on this node (from
 *     OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID; 0 if none
 *     is set) and an NCCL communicator bootstrapped over comm
 *     (shs_comm_nccl_create_mpi), which the world owns; comm must outlive
 *     the world too. Collective over comm.
 * The reduce order is set from cfg. Errors: SHS_INVALID_ARG (size, reduce
 * order, SHS_WORLD_CUDA: device-local ranks share one process), SHS_HOST_OOM,
 * and those of shs_device_create_cuda and shs_comm_nccl_create_mpi. */
shs_status_t shs_world_create_local(shs_world_t **out, const shs_world_config_t *cfg, shs_comm_t *comm);

/* Stop the threads and free devices and communicators. NULL is a no-op. */
void shs_world_destroy(shs_world_t *w);

int shs_world_size(const shs_world_t *w);
/* The context of `rank`, or NULL when this process does not run that rank
 * (a world from shs_world_create_local runs one). */
shs_rank_ctx_t *shs_world_rank(shs_world_t *w, int rank);
/* The ranks this process runs: [first, first + count). A thread world runs
 * [0, N); a local one its communicator's rank alone. */
void shs_world_local_ranks(const shs_world_t *w, int *first, int *count);

/* Run fn(ctx, arg) on every rank concurrently; returns SHS_OK if all
 * succeeded, else the status of the rank whose failure came first in cause
 * (a non-ABORTED error is preferred over the ABORTED it caused in others),
 * with that rank's error text set as the caller's shs_last_error(). */
shs_status_t shs_world_run(shs_world_t *w, shs_rank_fn fn, void *arg);

#endif
