/* comm_nccl.c - the NCCL communicator: N ranks, one GPU each, as threads of
 * one process or as processes of an MPI job (comm_cuda.h).
 *
 * What it is: NCCL moves the data; a host communicator (the "sync" handle)
 * runs beside it for comm.h's cross-rank call checks and timeouts, BEFORE
 * any NCCL call, so a mismatched or missing call becomes SHS_MISMATCH /
 * SHS_TIMEOUT instead of a hang inside NCCL. For threads the sync handle is
 * a thread-backend rendezvous; for processes it is a split of the MPI job's
 * communicator, whose barrier exchanges and compares the call's descriptor
 * (comm_mpi.c), and the NCCL unique id reaches every process by a broadcast
 * over that communicator (shs_comm_nccl_create_mpi).
 * Why the reductions are not NCCL's: ncclAllReduce and ncclReduceScatter add
 * in an order of NCCL's choosing (ring or tree, split over channels; NCCL
 * issues #855, #1055), which differs from comm.h's fixed rank order and
 * changes with the buffer's size and the algorithm NCCL picks. To stay
 * bit-identical to the thread backend, every reducing collective moves the
 * operands with point-to-point calls and reduces them locally with the
 * ordered kernel (kernels.cu, shs__cuda_reduce):
 *   reduce_scatter  all-to-all of blocks (ncclSend/ncclRecv in one group):
 *                   rank r receives block r of every rank into scratch, then
 *                   reduces them in rank (or ring) order into its recvbuf;
 *   all_reduce      S = ceil(count/N), chunk c = [min(cS, count),
 *                   min((c+1)S, count)) (comm.h's ring chunks): all-to-all
 *                   of chunks, rank r reduces chunk r (rank order, or ring
 *                   order from rank r+1), then ncclAllGather of the reduced
 *                   chunks (padded to S) and a copy into recvbuf;
 *   reduce          every rank sends its buffer to the root, which reduces
 *                   them in rank order.
 * That moves the same bytes per rank as NCCL's ring reduce-scatter and
 * all-gather (all-to-all instead of ring steps), without NCCL's reduction.
 * all_gather and broadcast are ncclAllGather / ncclBroadcast (copies: exact).
 * Sends and receives: the host handle pairs and checks a group's calls
 * first (its p2p with no copy: thread_p2p.c or mpi_p2p.c), then the group
 * runs as ncclSend/ncclRecv inside one ncclGroupStart/ncclGroupEnd.
 * What it is not: woken by shs_comm_abort while inside an NCCL kernel (the
 * checks come first, so a healthy call never waits there for a failed
 * peer's mismatch).
 * Without NCCL at build time (no SHS_HAVE_NCCL) every entry point returns
 * SHS_UNSUPPORTED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "device/cuda/cuda_impl.h"
#include "device/cuda/kernels.h"
#include "shardsim/comm_cuda.h"

#ifndef SHS_HAVE_NCCL

shs_status_t shs_comm_id_create_nccl(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    (void)nranks, (void)timeout_ms, (void)name;
    if (id) *id = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "shardsim was built without NCCL (nccl.h not found at build time)");
}

shs_status_t shs__comm_nccl_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev) {
    (void)id, (void)rank, (void)dev;
    if (comm) *comm = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "shardsim was built without NCCL (nccl.h not found at build time)");
}

shs_status_t shs__comm_nccl_init_all(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n) {
    (void)comms, (void)id, (void)devs, (void)n;
    return shs_set_error(SHS_UNSUPPORTED, "shardsim was built without NCCL (nccl.h not found at build time)");
}

shs_status_t shs_comm_nccl_create_mpi(shs_comm_t **comm, shs_comm_t *host, shs_device_t *dev) {
    (void)host, (void)dev;
    if (comm) *comm = NULL;
    return shs_set_error(SHS_UNSUPPORTED, "shardsim was built without NCCL (nccl.h not found at build time)");
}

#else
#include <nccl.h>

typedef struct {
    void *sync_id;          /* thread-backend rendezvous */
    ncclUniqueId uid;
    int nranks;
} nccl_id_t;

typedef struct {
    shs_comm_t *sync;       /* host handle (thread or MPI backend): checks and timeouts */
    ncclComm_t nc;
    shs_device_t *dev;
    void *scratch;          /* grown on demand */
    size_t scratch_bytes;
    void **table_host;      /* (2N) pointers for the reduce kernel */
    void **table_dev;
} nccl_ctx_t;

static nccl_ctx_t *nctx(const shs_comm_t *comm) { return comm->ctx; }

static shs_status_t nccl_error(const shs_comm_t *comm, const char *what, ncclResult_t r) {
    return shs_set_error(SHS_INTERNAL, "rank %d: comm '%s': %s: %s", comm->rank, comm->name, what,
                         ncclGetErrorString(r));
}

#define NCCL_TRY(comm, what, call)                                                                 \
    do {                                                                                           \
        ncclResult_t nccl__r = (call);                                                             \
        if (nccl__r != ncclSuccess) return nccl_error((comm), (what), nccl__r);                    \
    } while (0)
#define CUDA_TRY(comm, what, call)                                                                 \
    do {                                                                                           \
        cudaError_t cuda__e = (call);                                                              \
        if (cuda__e != cudaSuccess) return shs__cuda_error((comm)->rank, (what), cuda__e);         \
    } while (0)

static ncclDataType_t nccl_dtype(shs_dtype_t t) { return (ncclDataType_t)shs_dtype_nccl(t); }

static shs_status_t ensure_scratch(shs_comm_t *comm, size_t bytes) {
    nccl_ctx_t *c = nctx(comm);
    if (c->scratch_bytes >= bytes) return SHS_OK;
    CUDA_TRY(comm, "cudaStreamSynchronize", cudaStreamSynchronize(shs__cuda_device_stream(c->dev)));
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    CUDA_TRY(comm, "comm scratch", cudaMalloc(&c->scratch, bytes));
    c->scratch_bytes = bytes;
    return SHS_OK;
}

static shs_status_t reduce_local(shs_comm_t *comm, void *dst, const void *const *srcs, int nsrc, size_t n,
                                 shs_dtype_t dtype, shs_redop_t op) {
    nccl_ctx_t *c = nctx(comm);
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    if (!n) return SHS_OK;
    for (int k = 0; k < nsrc; k++) c->table_host[k] = (void *)srcs[k];
    c->table_host[nsrc] = dst;
    CUDA_TRY(comm, "comm pointer table",
             cudaMemcpyAsync(c->table_dev, c->table_host, (size_t)(nsrc + 1) * sizeof(void *), cudaMemcpyHostToDevice, s));
    CUDA_TRY(comm, "ordered reduction",
             shs__cuda_reduce(s, c->table_dev + nsrc, 1, (const void *const *)c->table_dev, nsrc, n, dtype, (int)op));
    /* the host table is reused by the next call only after the stream drains */
    CUDA_TRY(comm, "cudaStreamSynchronize", cudaStreamSynchronize(s));
    return SHS_OK;
}

/* All-to-all: block j (bytes each) of `send` to rank j; rank j's block into
 * recv + j*bytes. One NCCL group. */
static shs_status_t all_to_all(shs_comm_t *comm, const char *send, size_t send_stride, char *recv, size_t count,
                               shs_dtype_t dtype) {
    nccl_ctx_t *c = nctx(comm);
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    size_t bytes = count * shs_dtype_size(dtype);
    NCCL_TRY(comm, "ncclGroupStart", ncclGroupStart());
    for (int j = 0; j < comm->nranks; j++) {
        ncclResult_t r = ncclSend(send + (size_t)j * send_stride, count, nccl_dtype(dtype), j, c->nc, s);
        if (r == ncclSuccess) r = ncclRecv(recv + (size_t)j * bytes, count, nccl_dtype(dtype), j, c->nc, s);
        if (r != ncclSuccess) {
            ncclGroupEnd();
            return nccl_error(comm, "ncclSend/ncclRecv", r);
        }
    }
    NCCL_TRY(comm, "ncclGroupEnd", ncclGroupEnd());
    return SHS_OK;
}

/* ---- collectives ------------------------------------------------------------ */

static shs_status_t do_all_gather(shs_comm_t *comm, const shs__call_t *call) {
    nccl_ctx_t *c = nctx(comm);
    NCCL_TRY(comm, "ncclAllGather",
             ncclAllGather(call->sendbuf, call->recvbuf, call->count, nccl_dtype(call->dtype), c->nc,
                           shs__cuda_device_stream(c->dev)));
    return SHS_OK;
}

static shs_status_t do_broadcast(shs_comm_t *comm, const shs__call_t *call) {
    nccl_ctx_t *c = nctx(comm);
    NCCL_TRY(comm, "ncclBroadcast",
             ncclBroadcast(call->sendbuf, call->recvbuf, call->count, nccl_dtype(call->dtype), call->root, c->nc,
                           shs__cuda_device_stream(c->dev)));
    return SHS_OK;
}

static shs_status_t do_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    nccl_ctx_t *c = nctx(comm);
    int n = comm->nranks, r = comm->rank;
    size_t block = call->count * shs_dtype_size(call->dtype);
    if (!block) return SHS_OK;
    SHS_CHECK(ensure_scratch(comm, block * (size_t)n));
    SHS_CHECK(all_to_all(comm, call->sendbuf, block, c->scratch, call->count, call->dtype));
    const void **srcs = (const void **)c->table_host + 2 * (size_t)n; /* spare part of the host table */
    int first = call->order == SHS_REDUCE_ORDER_RING ? r + 1 : 0;
    for (int k = 0; k < n; k++) srcs[k] = (const char *)c->scratch + (size_t)((first + k) % n) * block;
    return reduce_local(comm, call->recvbuf, srcs, n, call->count, call->dtype, call->redop);
}

static shs_status_t do_all_reduce(shs_comm_t *comm, const shs__call_t *call) {
    nccl_ctx_t *c = nctx(comm);
    int n = comm->nranks, r = comm->rank;
    size_t es = shs_dtype_size(call->dtype), count = call->count;
    if (!count) return SHS_OK;
    size_t S = count / (size_t)n + (count % (size_t)n != 0);
    /* scratch: (N, S) received chunks | (S) my reduced chunk | (N, S) gathered */
    SHS_CHECK(ensure_scratch(comm, (2 * (size_t)n + 1) * S * es));
    char *recv = c->scratch, *mine = recv + (size_t)n * S * es, *all = mine + S * es;
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    /* the send side needs S elements per chunk: the last chunks may be short,
     * so send from a padded copy of sendbuf (gathered area, not yet in use) */
    CUDA_TRY(comm, "cudaMemsetAsync", cudaMemsetAsync(all, 0, (size_t)n * S * es, s));
    CUDA_TRY(comm, "cudaMemcpyAsync", cudaMemcpyAsync(all, call->sendbuf, count * es, cudaMemcpyDeviceToDevice, s));
    SHS_CHECK(all_to_all(comm, all, S * es, recv, S, call->dtype));
    const void **srcs = (const void **)c->table_host + 2 * (size_t)n;
    int ring = call->order == SHS_REDUCE_ORDER_RING;
    for (int k = 0; k < n; k++) srcs[k] = recv + (size_t)(ring ? (r + 1 + k) % n : k) * S * es;
    size_t lo, len; /* my ring chunk: [min(rS, count), min((r+1)S, count)) */
    shs__ring_chunk(count, n, r, &lo, &len);
    SHS_CHECK(reduce_local(comm, mine, srcs, n, len, call->dtype, call->redop));
    NCCL_TRY(comm, "ncclAllGather", ncclAllGather(mine, all, S, nccl_dtype(call->dtype), c->nc, s));
    CUDA_TRY(comm, "cudaMemcpyAsync", cudaMemcpyAsync(call->recvbuf, all, count * es, cudaMemcpyDeviceToDevice, s));
    return SHS_OK;
}

static shs_status_t do_reduce(shs_comm_t *comm, const shs__call_t *call) {
    nccl_ctx_t *c = nctx(comm);
    int n = comm->nranks, root = call->root;
    size_t bytes = call->count * shs_dtype_size(call->dtype);
    if (!bytes) return SHS_OK;
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    if (comm->rank == root) SHS_CHECK(ensure_scratch(comm, bytes * (size_t)n));
    NCCL_TRY(comm, "ncclGroupStart", ncclGroupStart());
    ncclResult_t rr = ncclSend(call->sendbuf, call->count, nccl_dtype(call->dtype), root, c->nc, s);
    for (int j = 0; rr == ncclSuccess && comm->rank == root && j < n; j++)
        rr = ncclRecv((char *)c->scratch + (size_t)j * bytes, call->count, nccl_dtype(call->dtype), j, c->nc, s);
    ncclResult_t re = ncclGroupEnd();
    if (rr != ncclSuccess) return nccl_error(comm, "ncclSend/ncclRecv", rr);
    if (re != ncclSuccess) return nccl_error(comm, "ncclGroupEnd", re);
    if (comm->rank != root) return SHS_OK;
    const void **srcs = (const void **)c->table_host + 2 * (size_t)n;
    for (int j = 0; j < n; j++) srcs[j] = (const char *)c->scratch + (size_t)j * bytes;
    return reduce_local(comm, call->recvbuf, srcs, n, call->count, call->dtype, call->redop);
}

/* check (the host handle pairs the calls, moving nothing) -> one NCCL group
 * of the sends and receives -> drain. */
static shs_status_t nccl_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy) {
    nccl_ctx_t *c = nctx(comm);
    (void)copy; /* NCCL moves every message, to this rank itself too */
    SHS_CHECK(shs__cuda_bind(c->dev));
    SHS_CHECK(c->sync->iface->p2p(c->sync, calls, n, NULL));
    cudaStream_t s = shs__cuda_device_stream(c->dev);
    NCCL_TRY(comm, "ncclGroupStart", ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < n && r == ncclSuccess; i++) {
        const shs__call_t *x = &calls[i];
        r = x->op == SHS_OP_SEND ? ncclSend(x->sendbuf, x->count, nccl_dtype(x->dtype), x->root, c->nc, s)
                                 : ncclRecv(x->recvbuf, x->count, nccl_dtype(x->dtype), x->root, c->nc, s);
    }
    ncclResult_t re = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_error(comm, "ncclSend/ncclRecv", r);
    if (re != ncclSuccess) return nccl_error(comm, "ncclGroupEnd", re);
    CUDA_TRY(comm, "cudaStreamSynchronize", cudaStreamSynchronize(s));
    return SHS_OK;
}

static shs_status_t do_nothing(shs_comm_t *comm, const shs__call_t *call) {
    (void)comm, (void)call;
    return SHS_OK;
}

typedef shs_status_t (*nccl_fn)(shs_comm_t *comm, const shs__call_t *call);

/* The host handle's check of `call` before any NCCL work: the thread
 * rendezvous's post-and-compare, or (processes) the host backend's barrier
 * with this call's descriptor, which the MPI backend exchanges and compares
 * under its timeout. */
static shs_status_t sync_begin(shs_comm_t *sync, const shs__call_t *call) {
    if (sync->iface == &shs__comm_thread_iface) return shs__comm_thread_begin(sync, call);
    return sync->iface->barrier(sync, call);
}
static shs_status_t sync_finish(shs_comm_t *sync, const shs__call_t *call) {
    if (sync->iface == &shs__comm_thread_iface) return shs__comm_thread_finish(sync, call, 0);
    return SHS_OK;
}

/* check (host handle) -> NCCL work on the device stream -> drain. */
static shs_status_t run_call(shs_comm_t *comm, const shs__call_t *call, nccl_fn fn) {
    nccl_ctx_t *c = nctx(comm);
    SHS_CHECK(shs__cuda_bind(c->dev));
    SHS_CHECK(sync_begin(c->sync, call));
    shs_status_t st = fn(comm, call);
    cudaError_t e = cudaStreamSynchronize(shs__cuda_device_stream(c->dev));
    if (st == SHS_OK && e != cudaSuccess) st = shs__cuda_error(comm->rank, "collective on the device stream", e);
    shs_status_t fin = sync_finish(c->sync, call);
    return st != SHS_OK ? st : fin;
}

static shs_status_t nccl_all_gather(shs_comm_t *comm, const shs__call_t *call) { return run_call(comm, call, do_all_gather); }
static shs_status_t nccl_reduce_scatter(shs_comm_t *comm, const shs__call_t *call) {
    return run_call(comm, call, do_reduce_scatter);
}
static shs_status_t nccl_all_reduce(shs_comm_t *comm, const shs__call_t *call) { return run_call(comm, call, do_all_reduce); }
static shs_status_t nccl_broadcast(shs_comm_t *comm, const shs__call_t *call) { return run_call(comm, call, do_broadcast); }
static shs_status_t nccl_reduce(shs_comm_t *comm, const shs__call_t *call) { return run_call(comm, call, do_reduce); }
static shs_status_t nccl_barrier(shs_comm_t *comm, const shs__call_t *call) { return run_call(comm, call, do_nothing); }

/* ---- lifetime ------------------------------------------------------------------ */

static void nccl_destroy(shs_comm_t *comm) {
    nccl_ctx_t *c = nctx(comm);
    if (!c) return;
    if (c->dev && shs__cuda_bind(c->dev) == SHS_OK) {
        if (c->nc) ncclCommDestroy(c->nc);
        if (c->scratch) cudaFree(c->scratch);
        if (c->table_dev) cudaFree(c->table_dev);
    }
    shs_comm_destroy(c->sync);
    free(c->table_host);
    free(c);
    comm->ctx = NULL;
}

/* A handle around a joined sync handle and an NCCL communicator. On failure
 * comm->ctx may hold a partial context (nccl_destroy frees it). */
static shs_status_t make_handle(shs_comm_t *comm, shs_comm_t *sync, ncclComm_t nc, shs_device_t *dev) {
    nccl_ctx_t *c = calloc(1, sizeof *c);
    void **table = calloc(3 * (size_t)sync->nranks + 1, sizeof *table);
    if (!c || !table) {
        free(c);
        free(table);
        return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", sync->rank, sync->name);
    }
    c->sync = sync;
    c->nc = nc;
    c->dev = dev;
    c->table_host = table;
    comm->ctx = c;
    comm->rank = sync->rank;
    comm->nranks = sync->nranks;
    comm->name = sync->name;
    cudaError_t e = cudaMalloc((void **)&c->table_dev, (2 * (size_t)sync->nranks + 1) * sizeof(void *));
    if (e != cudaSuccess) return shs__cuda_error(sync->rank, "comm pointer table", e);
    return SHS_OK;
}

static shs_status_t nccl_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *members) {
    nccl_ctx_t *c = nctx(comm);
    *newcomm = NULL;
    SHS_CHECK(shs__cuda_bind(c->dev));
    shs_comm_t *child_sync = NULL;
    /* a thread rendezvous names the child from this handle's job; an MPI
     * host handle is a member of the job itself */
    if (c->sync->iface == &shs__comm_thread_iface) shs__comm_borrow_job(c->sync, comm);
    SHS_CHECK(c->sync->iface->split(c->sync, call, &child_sync, members));
    ncclComm_t child_nc = NULL;
    ncclResult_t r = ncclCommSplit(c->nc, call->color == SHS_SPLIT_NOCOLOR ? NCCL_SPLIT_NOCOLOR : call->color,
                                   call->key, &child_nc, NULL);
    shs_status_t st = r == ncclSuccess ? SHS_OK : nccl_error(comm, "ncclCommSplit", r);
    if (st == SHS_OK && !child_sync) return SHS_OK;
    shs_comm_t *child = st == SHS_OK ? shs__comm_new(&shs__comm_nccl_iface) : NULL;
    if (st == SHS_OK && !child) st = shs_set_error(SHS_HOST_OOM, "rank %d: split: out of host memory", comm->rank);
    if (st == SHS_OK) st = make_handle(child, child_sync, child_nc, c->dev);
    if (st != SHS_OK) {
        if (child && child->ctx) {
            nccl_destroy(child);
        } else {
            if (child_nc) ncclCommDestroy(child_nc);
            shs_comm_destroy(child_sync);
        }
        free(child);
        return st;
    }
    *newcomm = child;
    return SHS_OK;
}

/* make_handle and join `job` (root ranks as shs__job_join), then hand the
 * result to *out, or free everything. */
static shs_status_t finish_handle(shs_comm_t **out, shs_comm_t *c, shs_comm_t *sync, ncclComm_t nc, shs_device_t *dev,
                                  shs__job_t *job, const int *root_ranks) {
    shs_status_t st = make_handle(c, sync, nc, dev);
    if (st == SHS_OK && job && (st = shs__job_join(c, job, root_ranks)) != SHS_OK) {
        shs_comm_destroy(c);
        return st;
    }
    if (st != SHS_OK) {
        if (c->ctx) nccl_destroy(c);
        else {
            ncclCommDestroy(nc);
            shs_comm_destroy(sync);
        }
        free(c);
        return st;
    }
    *out = c;
    return SHS_OK;
}

static void nccl_abort(shs_comm_t *comm, const char *reason) { nctx(comm)->sync->iface->abort(nctx(comm)->sync, reason); }
static void nccl_job_failed(shs_comm_t *comm, const char *detail) {
    nctx(comm)->sync->iface->job_failed(nctx(comm)->sync, detail);
}

static shs_status_t nccl_init_rank_plain(shs_comm_t *comm, void *id_ctx, int rank) {
    (void)comm, (void)id_ctx;
    return shs_set_error(SHS_INVALID_ARG, "rank %d: an NCCL rendezvous is joined with shs_comm_init_rank_cuda", rank);
}

static void nccl_id_release(void *id_ctx) {
    nccl_id_t *id = id_ctx;
    shs__comm_thread_iface.id_release(id->sync_id);
    free(id);
}

const shs__comm_iface_t shs__comm_nccl_iface = {
    .name = "nccl",
    .init_rank = nccl_init_rank_plain,
    .id_release = nccl_id_release,
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .reduce = nccl_reduce,
    .barrier = nccl_barrier,
    .split = nccl_split,
    .p2p = nccl_p2p,
    .abort = nccl_abort,
    .job_failed = nccl_job_failed,
    .destroy = nccl_destroy,
};

/* The thread rendezvous (shs__comm_thread_id_new) with the NCCL unique id
 * beside it. */
shs_status_t shs_comm_id_create_nccl(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    SHS_CHECK(shs__comm_thread_id_new(id, &shs__comm_nccl_iface, nranks, timeout_ms, name, "shs_comm_id_create_nccl"));
    nccl_id_t *nid = calloc(1, sizeof *nid);
    ncclResult_t r = nid ? ncclGetUniqueId(&nid->uid) : ncclSuccess;
    if (!nid || r != ncclSuccess) {
        free(nid);
        shs__comm_thread_iface.id_release((*id)->ctx); /* the shared state alone: not yet wrapped */
        (*id)->ctx = NULL;
        (*id)->iface = &shs__comm_thread_iface;
        shs__job_unref((*id)->job);
        free(*id);
        *id = NULL;
        return nid ? shs_set_error(SHS_INTERNAL, "ncclGetUniqueId: %s", ncclGetErrorString(r))
                   : shs_set_error(SHS_HOST_OOM, "shs_comm_id_create_nccl: out of host memory");
    }
    nid->nranks = nranks;
    nid->sync_id = (*id)->ctx;
    (*id)->ctx = nid;
    return SHS_OK;
}

shs_status_t shs__comm_nccl_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev) {
    *comm = NULL;
    if (id->iface != &shs__comm_nccl_iface)
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank_cuda: rank %d: not a CUDA rendezvous", rank);
    nccl_id_t *nid = id->ctx;
    SHS_CHECK(shs__cuda_bind(dev));
    shs_comm_t *sync = shs__comm_new(&shs__comm_thread_iface);
    shs_comm_t *c = shs__comm_new(&shs__comm_nccl_iface);
    if (!sync || !c) {
        free(sync);
        free(c);
        return shs_set_error(SHS_HOST_OOM, "rank %d: out of host memory", rank);
    }
    shs_status_t st = shs__comm_thread_iface.init_rank(sync, nid->sync_id, rank);
    if (st != SHS_OK) {
        free(sync);
        free(c);
        return st;
    }
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommInitRank(&nc, nid->nranks, nid->uid, rank);
    if (r != ncclSuccess) {
        shs_comm_destroy(sync);
        free(c);
        return shs_set_error(SHS_INTERNAL, "rank %d: ncclCommInitRank: %s", rank, ncclGetErrorString(r));
    }
    return finish_handle(comm, c, sync, nc, dev, id->job, NULL);
}

/* Every rank from this thread: the ncclCommInitRank calls of one group
 * complete together at ncclGroupEnd. */
shs_status_t shs__comm_nccl_init_all(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n) {
    if (id->iface != &shs__comm_nccl_iface)
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_all_cuda: not a CUDA rendezvous");
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return shs_set_error(SHS_INTERNAL, "ncclGroupStart: %s", ncclGetErrorString(r));
    shs_status_t st = SHS_OK;
    for (int k = 0; k < n && st == SHS_OK; k++) {
        if (!shs__device_is_cuda(devs[k])) st = shs_set_error(SHS_INVALID_ARG, "rank %d: not a CUDA device", k);
        else st = shs__comm_nccl_init_rank_cuda(&comms[k], id, k, devs[k]);
    }
    r = ncclGroupEnd();
    if (st == SHS_OK && r != ncclSuccess) st = shs_set_error(SHS_INTERNAL, "ncclGroupEnd (init): %s", ncclGetErrorString(r));
    if (st != SHS_OK)
        for (int k = 0; k < n; k++) {
            shs_comm_destroy(comms[k]);
            comms[k] = NULL;
        }
    return st;
}

shs_status_t shs_comm_nccl_create_mpi(shs_comm_t **comm, shs_comm_t *host, shs_device_t *dev) {
    if (!comm || !host || !dev)
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_nccl_create_mpi: %s is NULL", !comm ? "comm" : !host ? "host" : "dev");
    *comm = NULL;
    int rank = shs_comm_rank(host), n = shs_comm_size(host);
    if (!shs__device_is_cuda(dev))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: shs_comm_nccl_create_mpi: not a CUDA device", rank);
    SHS_CHECK(shs__cuda_bind(dev));
    /* A process that fails before the broadcast aborts `host`, so the
     * others' broadcast returns SHS_ABORTED instead of waiting for it; one
     * that fails inside ncclCommInitRank cannot wake the others there, and
     * the caller ends the job (shs_mpi_abort), as train does on any error. */
    shs_comm_t *sync = NULL;
    shs_status_t st = shs_comm_split(host, 0, rank, &sync);
    if (st != SHS_OK) shs_comm_abort(host, shs_last_error());
    ncclUniqueId uid;
    memset(&uid, 0, sizeof uid);
    if (st == SHS_OK && rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&uid);
        if (r != ncclSuccess) {
            st = shs_set_error(SHS_INTERNAL, "rank 0: ncclGetUniqueId: %s", ncclGetErrorString(r));
            shs_comm_abort(host, shs_last_error());
        }
    }
    if (st == SHS_OK) st = shs_broadcast(&uid, &uid, sizeof uid, SHS_U8, 0, host);
    ncclComm_t nc = NULL;
    if (st == SHS_OK) {
        ncclResult_t r = ncclCommInitRank(&nc, n, uid, rank);
        if (r != ncclSuccess) st = shs_set_error(SHS_INTERNAL, "rank %d: ncclCommInitRank: %s", rank, ncclGetErrorString(r));
    }
    shs_comm_t *c = st == SHS_OK ? shs__comm_new(&shs__comm_nccl_iface) : NULL;
    if (st == SHS_OK && !c) st = shs_set_error(SHS_HOST_OOM, "rank %d: out of host memory", rank);
    if (st != SHS_OK) {
        if (nc) ncclCommDestroy(nc);
        shs_comm_destroy(sync);
        return st;
    }
    return finish_handle(comm, c, sync, nc, dev, host->job, host->root_ranks);
}

#endif /* SHS_HAVE_NCCL */
