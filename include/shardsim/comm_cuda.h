/* comm_cuda.h - communicators on GPU memory for the CUDA device backend
 * (issue 6): the same collective API as comm.h (shs_all_reduce, ...), with
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
 *                 and timeouts come from a thread-backend rendezvous that
 *                 runs beside NCCL (one process only: no MPI bootstrap yet).
 * Host buffers passed to either are staged through device memory (the
 * offload paths of strategy.c hand the norm accumulator in host memory).
 * What it is not: a network model, or multi-process (see issue 6's MPI
 * backend for processes).
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

#endif
