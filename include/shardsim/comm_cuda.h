/* comm_cuda.h - communicators on GPU memory for the CUDA device backend
 * and NCCL: the same collective API as comm.h (shs_all_reduce, ...), with
 * device pointers of CUDA devices (device.h's shs_device_create_cuda).
 *
 * Two kinds, chosen by the rendezvous (id) the ranks join:
 *   DEVICE-LOCAL  N ranks (threads) that share one GPU. Synchronization,
 *                 the cross-rank call checks, timeouts and abort are the
 *                 thread backend's (comm_thread.c); the data moves and is
 *                 reduced by CUDA kernels on the GPU, each rank reading its
 *                 peers' buffers directly. The reduction is comm.h's FIXED
 *                 REDUCTION ORDER (or the ring order when set) with the same
 *                 rounding as the CPU threads, so results are bit-identical
 *                 to the thread backend on the same inputs, and DDP and
 *                 ZeRO-1/2/3 agree bit for bit on one GPU.
 *   NCCL          N ranks (threads of one process), one GPU each. Data
 *                 moves with NCCL. all_gather and broadcast are exact
 *                 copies. NCCL's own reductions add in an order of its
 *                 choosing (ring/tree, channels), so the reducing
 *                 collectives here are built from ncclAllGather into a
 *                 scratch buffer plus the same ordered local reduction
 *                 kernel as the device-local communicator: bit-identical to
 *                 the thread backend, at N times the traffic of a
 *                 reduce-scatter (the price of the fixed order). Call checks
 *                 and timeouts come from a host communicator that runs
 *                 beside NCCL: a thread-backend rendezvous when the ranks
 *                 are threads of one process (shs_comm_id_create_nccl), or
 *                 a split of the MPI job's communicator when they are
 *                 processes, one GPU each (shs_comm_nccl_create_mpi).
 * Host buffers passed to either are staged through device memory (the
 * offload paths of strategy_step.c hand the norm accumulator in host memory).
 * Sends and receives (comm.h POINT-TO-POINT): device-local, the thread
 * backend's rendezvous and checks with each message copied by cudaMemcpy
 * (device or host memory on either end); NCCL, the host communicator pairs
 * and checks a group's calls first, then they run as ncclSend/ncclRecv in
 * one ncclGroupStart/ncclGroupEnd (device memory only).
 * What it is not: a network model. Device-local ranks are threads of one
 * process; NCCL ranks may be processes (bootstrapped over MPI).
 */
#ifndef SHARDSIM_COMM_CUDA_H
#define SHARDSIM_COMM_CUDA_H

#include "shardsim/comm.h"
#include "shardsim/device.h"

/* Rendezvous for `nranks` ranks sharing one GPU (arguments as
 * shs_comm_id_create). Errors: SHS_UNSUPPORTED (built without CUDA),
 * SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_comm_id_create_cuda_local(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name);
/* Rendezvous for `nranks` ranks on `nranks` GPUs of this process, over
 * NCCL. Errors: SHS_UNSUPPORTED (built without CUDA or without NCCL),
 * SHS_INVALID_ARG, SHS_HOST_OOM, SHS_INTERNAL (ncclGetUniqueId failed). */
shs_status_t shs_comm_id_create_nccl(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name);
/* Join either kind of rendezvous as `rank` with CUDA device `dev` (its GPU
 * and stream carry the collectives; the communicator waits for the
 * device's queued work before reading its buffers, and its results are
 * complete when a call returns). NCCL: every rank must call this
 * concurrently (ncclCommInitRank blocks until all ranks joined).
 * Errors: SHS_INVALID_ARG (not a CUDA device, bad rank), SHS_UNSUPPORTED,
 * SHS_INTERNAL (CUDA/NCCL error), SHS_HOST_OOM. */
shs_status_t shs_comm_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev);
/* Join ranks 0..n-1 from one thread (the world launcher): comms[r] with
 * devs[r]. For NCCL the joins run inside one ncclGroupStart/ncclGroupEnd, as
 * NCCL requires when one thread initializes several ranks. On failure every
 * comms[r] is NULL. Errors: as shs_comm_init_rank_cuda. */
shs_status_t shs_comm_init_all_cuda(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n);
/* One process per GPU, bootstrapped over MPI: an NCCL communicator with the rank and size of `host`, a
 * communicator whose ranks are the processes of the job (the MPI backend,
 * comm_mpi.h). Collective over `host`, every rank calls it with its own CUDA
 * device `dev`:
 *   1. shs_comm_split(host, 0, rank): the new handle's own host
 *      communicator, which checks every call (op, count, dtype, reduce op,
 *      root, order, sequence number) across the processes and enforces the
 *      timeout BEFORE any NCCL call, as the thread rendezvous does for
 *      threads: a mismatch or a missing process is an error, not a hang
 *      inside NCCL;
 *   2. rank 0 makes the NCCL unique id (ncclGetUniqueId) and broadcasts its
 *      bytes over `host` (shs_broadcast, u8);
 *   3. ncclCommInitRank(size, id, rank) on dev's GPU.
 * The collectives, reduction order and bits are those of the NCCL
 * communicator above. `host` stays the caller's (destroy it after this
 * handle). Errors: SHS_UNSUPPORTED (built without CUDA or NCCL),
 * SHS_INVALID_ARG (dev not a CUDA device), SHS_INTERNAL (NCCL), SHS_HOST_OOM,
 * and the errors of host's collectives. */
shs_status_t shs_comm_nccl_create_mpi(shs_comm_t **comm, shs_comm_t *host, shs_device_t *dev);

#endif
