/* comm_cuda_local.c - the device-local communicator: N ranks (threads) that
 * share one GPU exchange buffers in its memory (comm_cuda.h).
 *
 * What it is: the thread backend's direct algorithms (comm_thread.c) with
 * the data moved by the GPU. Each rank keeps a handle of the thread backend
 * ("sync") for the rendezvous: posting calls with their buffer pointers,
 * barriers, the cross-rank call checks, timeouts and abort are exactly the
 * thread backend's. Every call runs:
 *   drain       wait for this rank's device stream, so its send buffer is
 *               complete before anyone reads it;
 *   post+check  begin on the sync handle: every rank's call (and device
 *               pointers) posted, barrier, calls compared;
 *   move        this rank enqueues copies / one reduction kernel on its
 *               stream, reading the peers' posted buffers (one GPU, one
 *               address space), then waits for them;
 *   exit        barrier: every output is complete and no buffer is reused
 *               while a peer may still read it.
 * Work split, as comm_thread.c's direct paths (chunk r = [start(r),
 * start(r+1)), start(j) = floor-balanced j*count/N):
 *   all_gather      rank r copies its sendbuf into block r of every recvbuf
 *                   (skipped where that is its own sendbuf: in place);
 *   reduce_scatter  rank r reduces block r of every sendbuf into its recvbuf;
 *   all_reduce      rank r reduces chunk r of every sendbuf and writes it into
 *                   chunk r of every recvbuf (ring order: ring chunk r,
 *                   sources from rank r+1 around, comm.h);
 *   broadcast       every rank copies the root's sendbuf;
 *   reduce          rank r reduces chunk r into the root's recvbuf.
 * The reduction kernel (kernels.cu, shs__cuda_reduce) reads an element from
 * every source, in the given order, before writing it anywhere, and only
 * rank r touches chunk r, so the in-place forms are safe as on threads. The
 * per-element order and rounding are comm_reduce.c's: bit-identical results.
 * Host buffers (not cudaMalloc'ed) are staged through a device buffer of the
 * rank: copied in before the drain, copied out after the exit barrier.
 * Sends and receives are the thread backend's (thread_p2p.c) on the sync
 * handle, its copies made by cudaMemcpy (cudaMemcpyDefault: device or host
 * memory on either end) after every rank of the group drained its stream.
 * What it is not: overlapped with compute (every call drains the stream), or
 * usable across GPUs (comm_nccl.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "device/cuda/cuda_impl.h"
#include "device/cuda/kernels.h"
#include "shardsim/comm_cuda.h"

typedef struct {
    shs_comm_t *sync;       /* thread-backend handle: rendezvous, checks, timeout, abort */
    shs_device_t *dev;      /* CUDA device of this rank (NULL until bound) */
    void **table_host;      /* (2N) source then destination pointers for the reduce kernel */
    void **table_dev;       /* the same, in device memory */
    const void **srcs;      /* (N) scratch lists for the algorithms */
    void **dsts;            /* (N) */
    void *stage;            /* host-buffer staging, grown on demand */
    size_t stage_bytes;
} local_ctx_t;

static local_ctx_t *lctx(const shs_comm_t *comm) { return comm->ctx; }

/* ---- lifetime ------------------------------------------------------------ */

static shs_status_t wrap_sync(shs_comm_t *comm, shs_comm_t *sync) {
    local_ctx_t *c = calloc(1, sizeof *c);
    void **table = calloc(4 * (size_t)sync->nranks, sizeof *table);
    if (!c || !table) {
        free(c);
        free(table);
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", sync->rank, sync->name);
    }
    c->sync = sync;
    c->table_host = table;
    c->srcs = (const void **)(table + 2 * (size_t)sync->nranks);
    c->dsts = table + 3 * (size_t)sync->nranks;
    comm->ctx = c;
    comm->rank = sync->rank;
    comm->nranks = sync->nranks;
    comm->name = sync->name;
    return SHS_OK;
}

static shs_status_t bind_device(shs_comm_t *comm, shs_device_t *dev) {
    local_ctx_t *c = lctx(comm);
    if (!shs__device_is_cuda(dev))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: comm '%s': the device-local communicator needs a CUDA device",
                             comm->rank, comm->name);
    SHS_CHECK(shs__cuda_bind(dev));
    cudaError_t e = cudaMalloc((void **)&c->table_dev, 2 * (size_t)comm->nranks * sizeof(void *));
    if (e != cudaSuccess) return shs__cuda_error(comm->rank, "comm pointer table", e);
    c->dev = dev;
    return SHS_OK;
}

static shs_status_t local_init_rank(shs_comm_t *comm, void *id_ctx, int rank) {
    shs_comm_t *sync = shs__comm_new(&shs__comm_thread_iface);
    if (!sync) return shs_set_error(SHS_HOST_OOM, "rank %d: out of host memory", rank);
    shs_status_t st = shs__comm_thread_iface.init_rank(sync, id_ctx, rank);
    if (st == SHS_OK) st = wrap_sync(comm, sync);
    if (st != SHS_OK) {
        if (sync->ctx) shs__comm_thread_iface.destroy(sync);
        free(sync);
    }
    return st;
}

static void local_id_release(void *id_ctx) { shs__comm_thread_iface.id_release(id_ctx); }

static void local_destroy(shs_comm_t *comm) {
    local_ctx_t *c = lctx(comm);
    if (!c) return;
    if (c->dev && shs__cuda_bind(c->dev) == SHS_OK) {
        if (c->table_dev) cudaFree(c->table_dev);
        if (c->stage) cudaFree(c->stage);
    }
    shs__comm_thread_iface.destroy(c->sync);
    free(c->sync);
    free(c->table_host);
    free(c);
}

static void local_abort(shs_comm_t *comm, const char *reason) { shs__comm_thread_iface.abort(lctx(comm)->sync, reason); }
static void local_job_failed(shs_comm_t *comm, const char *detail) {
    shs__comm_thread_iface.job_failed(lctx(comm)->sync, detail);
}

/* ---- helpers ---------------------------------------------------------------- */

static int is_host_pointer(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
}

static shs_status_t cuda_status(const shs_comm_t *comm, const char *what, cudaError_t e) {
    return e == cudaSuccess ? SHS_OK : shs__cuda_error(comm->rank, what, e);
}

/* Reduce n elements: srcs[k] (nsrc) in that order into every dsts[j] (ndst). */
static cudaError_t reduce_on_gpu(shs_comm_t *comm, void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                                 size_t n, shs_dtype_t dtype, shs_redop_t op) {
    local_ctx_t *c = lctx(comm);
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    for (int k = 0; k < nsrc; k++) c->table_host[k] = (void *)srcs[k];
    for (int j = 0; j < ndst; j++) c->table_host[nsrc + j] = dsts[j];
    cudaError_t e = cudaMemcpyAsync(c->table_dev, c->table_host, (size_t)(nsrc + ndst) * sizeof(void *),
                                    cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) return e;
    /* the kernel reads the table from device memory; the host copy is not
     * reused before the stream is drained at the end of the call */
    return shs__cuda_reduce(s, c->table_dev + nsrc, ndst, (const void *const *)c->table_dev, nsrc, n, dtype, (int)op);
}

/* ---- the data movement of each op (after post+check, before exit) ------------ */

#define POSTED(j) shs__comm_thread_posted(c->sync, (j), call)

static cudaError_t move_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    local_ctx_t *c = lctx(comm);
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    size_t block = call->count * shs_dtype_size(call->dtype);
    for (int j = 0; j < comm->nranks && block; j++) {
        char *dst = (char *)POSTED(j)->recvbuf + (size_t)comm->rank * block;
        if (dst == (const char *)call->sendbuf) continue;
        cudaError_t e = cudaMemcpyAsync(dst, call->sendbuf, block, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

static cudaError_t move_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    local_ctx_t *c = lctx(comm);
    int n = comm->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    if (!block) return cudaSuccess;
    int first = call->order == SHS_REDUCE_ORDER_RING ? r + 1 : 0; /* ring: block r's chain is r+1, ..., r */
    for (int k = 0; k < n; k++) c->srcs[k] = (const char *)POSTED((first + k) % n)->sendbuf + (size_t)r * block;
    return reduce_on_gpu(comm, &call->recvbuf, 1, c->srcs, n, call->count, call->dtype, call->redop);
}

static cudaError_t move_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    local_ctx_t *c = lctx(comm);
    int n = comm->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype), off, len;
    int ring = call->order == SHS_REDUCE_ORDER_RING;
    if (ring) {
        shs__ring_chunk(call->count, n, r, &off, &len);
    } else {
        off = shs__chunk_start(call->count, n, r);
        len = shs__chunk_start(call->count, n, r + 1) - off;
    }
    if (!len) return cudaSuccess;
    for (int k = 0; k < n; k++) {
        c->srcs[k] = (const char *)POSTED(ring ? (r + 1 + k) % n : k)->sendbuf + off * esize;
        c->dsts[k] = (char *)POSTED(k)->recvbuf + off * esize;
    }
    return reduce_on_gpu(comm, c->dsts, n, c->srcs, n, len, call->dtype, call->redop);
}

static cudaError_t move_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    local_ctx_t *c = lctx(comm);
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    const void *src = POSTED(call->root)->sendbuf;
    if (!bytes || src == call->recvbuf) return cudaSuccess;
    return cudaMemcpyAsync(call->recvbuf, src, bytes, cudaMemcpyDeviceToDevice, shs__cuda_device_stream(c->dev));
}

static cudaError_t move_reduce(shs_comm_t *comm, const shs__call_t *call) {
    local_ctx_t *c = lctx(comm);
    int n = comm->nranks, r = comm->rank;
    size_t esize = shs_dtype_size(call->dtype);
    size_t off = shs__chunk_start(call->count, n, r), len = shs__chunk_start(call->count, n, r + 1) - off;
    if (!len) return cudaSuccess;
    for (int j = 0; j < n; j++) c->srcs[j] = (const char *)POSTED(j)->sendbuf + off * esize;
    c->dsts[0] = (char *)POSTED(call->root)->recvbuf + off * esize;
    return reduce_on_gpu(comm, c->dsts, 1, c->srcs, n, len, call->dtype, call->redop);
}

static cudaError_t move_nothing(shs_comm_t *comm, const shs__call_t *call) {
    (void)comm, (void)call;
    return cudaSuccess;
}

/* ---- the call protocol: stage, drain, post+check, move, exit, unstage ---------- */

typedef cudaError_t (*move_fn)(shs_comm_t *comm, const shs__call_t *call);

/* Bytes of the send and receive buffers a rank passes for `call`. */
static void buffer_bytes(const shs_comm_t *comm, const shs__call_t *call, size_t *send, size_t *recv) {
    size_t b = call->count * shs_dtype_size(call->dtype), n = (size_t)comm->nranks;
    switch (call->op) {
    case SHS_OP_ALL_GATHER: *send = b, *recv = n * b; break;
    case SHS_OP_REDUCE_SCATTER: *send = n * b, *recv = b; break;
    case SHS_OP_BROADCAST: *send = comm->rank == call->root ? b : 0, *recv = b; break;
    case SHS_OP_REDUCE: *send = b, *recv = comm->rank == call->root ? b : 0; break;
    case SHS_OP_ALL_REDUCE: *send = b, *recv = b; break;
    default: *send = *recv = 0; break;
    }
}

static shs_status_t run_call(shs_comm_t *comm, const shs__call_t *call_in, move_fn move) {
    local_ctx_t *c = lctx(comm);
    if (!c->dev)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: comm '%s': no CUDA device bound (use shs_comm_init_rank_cuda)",
                             comm->rank, comm->name);
    SHS_CHECK(shs__cuda_bind(c->dev));
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    shs__call_t call = *call_in;
    size_t sbytes, rbytes;
    buffer_bytes(comm, &call, &sbytes, &rbytes);
    int host_send = sbytes && call.sendbuf && is_host_pointer(call.sendbuf);
    int host_recv = rbytes && call.recvbuf && is_host_pointer(call.recvbuf);
    void *user_recv = call.recvbuf;
    cudaError_t e = cudaSuccess;
    if (host_send || host_recv) {
        size_t need = (host_send ? sbytes : 0) + (host_recv ? rbytes : 0);
        if (c->stage_bytes < need) {
            cudaStreamSynchronize(s);
            if (c->stage) cudaFree(c->stage);
            c->stage = NULL;
            c->stage_bytes = 0;
            e = cudaMalloc(&c->stage, need);
            if (e != cudaSuccess) return shs__cuda_error(comm->rank, "comm staging buffer", e);
            c->stage_bytes = need;
        }
        char *p = c->stage;
        if (host_send) {
            e = cudaMemcpyAsync(p, call.sendbuf, sbytes, cudaMemcpyDefault, s);
            call.sendbuf = p;
            p += sbytes;
        }
        if (host_recv) call.recvbuf = p;
        if (e != cudaSuccess) return shs__cuda_error(comm->rank, "staging a host send buffer", e);
    }
    /* drain: this rank's buffers are complete before any peer reads them */
    e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return shs__cuda_error(comm->rank, "waiting for the device before a collective", e);
    SHS_CHECK(shs__comm_thread_begin(c->sync, &call));
    e = move(comm, &call);
    /* wait for every copy already queued, failed call or not: after the exit
     * barrier peers free their buffers, so none may still be in flight */
    cudaError_t drained = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = drained;
    /* the exit barrier runs even after a CUDA error, so no peer is left waiting */
    shs_status_t st = shs__comm_thread_finish(c->sync, &call, 1);
    if (e != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "%s seq %llu on comm '%s'", shs_coll_op_name(call.op),
                 (unsigned long long)call.seq, comm->name);
        return shs__cuda_error(comm->rank, what, e);
    }
    if (st == SHS_OK && host_recv)
        st = cuda_status(comm, "copying a collective's result to host memory",
                         cudaMemcpy(user_recv, call.recvbuf, rbytes, cudaMemcpyDefault));
    return st;
}

static shs_status_t local_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_all_gather);
}
static shs_status_t local_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_reduce_scatter);
}
static shs_status_t local_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_all_reduce);
}
static shs_status_t local_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_broadcast);
}
static shs_status_t local_reduce(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_reduce);
}
/* A barrier also orders device work: every rank's queued work is done. */
static shs_status_t local_barrier(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, move_nothing);
}

/* A message's copy on the GPU (either end may be host memory). */
static shs_status_t cuda_copy(void *dst, const void *src, size_t bytes) {
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    return e == cudaSuccess ? SHS_OK
                            : shs_set_error(SHS_INTERNAL, "copying a message of %zu bytes: %s: %s", bytes,
                                            cudaGetErrorName(e), cudaGetErrorString(e));
}

/* drain (every send buffer complete), then the thread backend's rendezvous
 * with cudaMemcpy as its copy. */
static shs_status_t local_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy) {
    local_ctx_t *c = lctx(comm);
    if (!c->dev)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: comm '%s': no CUDA device bound (use shs_comm_init_rank_cuda)",
                             comm->rank, comm->name);
    SHS_CHECK(shs__cuda_bind(c->dev));
    cudaError_t e = cudaStreamSynchronize(shs__cuda_device_stream(c->dev));
    if (e != cudaSuccess) return shs__cuda_error(comm->rank, "waiting for the device before a send or receive", e);
    return shs__comm_thread_p2p(c->sync, calls, n, copy ? cuda_copy : NULL);
}

/* Split the sync handle (the thread backend's split), then wrap the child
 * with the same device. */
static shs_status_t local_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members) {
    local_ctx_t *c = lctx(comm);
    shs_comm_t *child_sync = NULL;
    *newcomm = NULL;
    shs__comm_borrow_job(c->sync, comm); /* the child's name comes from this handle's job */
    SHS_CHECK(shs__comm_thread_iface.split(c->sync, call, &child_sync, members));
    if (!child_sync) return SHS_OK; /* SHS_SPLIT_NOCOLOR */
    shs_comm_t *child = shs__comm_new(&shs__comm_cuda_local_iface);
    shs_status_t st = child ? wrap_sync(child, child_sync)
                            : shs_set_error(SHS_HOST_OOM, "rank %d: split: out of host memory", comm->rank);
    if (st == SHS_OK && c->dev) st = bind_device(child, c->dev);
    if (st != SHS_OK) {
        if (child && child->ctx) {
            local_destroy(child); /* also destroys child_sync */
        } else {
            shs__comm_thread_iface.destroy(child_sync);
            free(child_sync);
        }
        free(child);
        return st;
    }
    *newcomm = child;
    return SHS_OK;
}

const shs__comm_iface_t shs__comm_cuda_local_iface = {
    .name = "cuda-local",
    .init_rank = local_init_rank,
    .id_release = local_id_release,
    .all_gather = local_all_gather,
    .reduce_scatter = local_reduce_scatter,
    .all_reduce = local_all_reduce,
    .broadcast = local_broadcast,
    .reduce = local_reduce,
    .barrier = local_barrier,
    .split = local_split,
    .p2p = local_p2p,
    .abort = local_abort,
    .job_failed = local_job_failed,
    .destroy = local_destroy,
};

/* ---- public constructors (comm_cuda.h) ------------------------------------------ */

shs_status_t shs_comm_id_create_cuda_local(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    return shs__comm_thread_id_new(id, &shs__comm_cuda_local_iface, nranks, timeout_ms, name,
                                   "shs_comm_id_create_cuda_local");
}

/* NCCL joins: comm_nccl.c (which says SHS_UNSUPPORTED in a build without NCCL). */
shs_status_t shs__comm_nccl_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev);
shs_status_t shs__comm_nccl_init_all(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n);

shs_status_t shs_comm_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev) {
    if (!comm || !id) return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank_cuda: %s is NULL", comm ? "id" : "comm");
    *comm = NULL;
    if (!shs__device_is_cuda(dev))
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank_cuda: rank %d: not a CUDA device", rank);
    if (id->iface != &shs__comm_cuda_local_iface) return shs__comm_nccl_init_rank_cuda(comm, id, rank, dev);
    shs_comm_t *c = NULL;
    SHS_CHECK(shs_comm_init_rank(&c, id, rank));
    shs_status_t st = bind_device(c, dev);
    if (st != SHS_OK) {
        shs_comm_destroy(c);
        return st;
    }
    *comm = c;
    return SHS_OK;
}

shs_status_t shs_comm_init_all_cuda(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n) {
    SHS_ASSERT(comms && id && devs && n >= 1);
    for (int r = 0; r < n; r++) comms[r] = NULL;
    if (id->iface != &shs__comm_cuda_local_iface) return shs__comm_nccl_init_all(comms, id, devs, n);
    for (int r = 0; r < n; r++) {
        shs_status_t st = shs_comm_init_rank_cuda(&comms[r], id, r, devs[r]);
        if (st != SHS_OK) {
            for (int k = 0; k < r; k++) {
                shs_comm_destroy(comms[k]);
                comms[k] = NULL;
            }
            return st;
        }
    }
    return SHS_OK;
}
