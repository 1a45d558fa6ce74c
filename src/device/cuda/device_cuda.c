/* device_cuda.c - the CUDA device backend: the vtable behind
 * shs_device_create_cuda(), on one GPU.
 *
 * What it is: device memory from plain cudaMalloc (never managed memory),
 * copies and memset, and the kernels of kernels.cu, all queued on one CUDA
 * stream per device (non-blocking with respect to the legacy default
 * stream), so one device's work runs in call order. Several devices may
 * share a GPU (N simulated ranks on one GPU: each its own stream). Accounting
 * by category, capacity checks and the out-of-memory text stay in device.c,
 * as for every backend; cudaMalloc failing under the capacity is reported as
 * SHS_OUT_OF_MEMORY too, naming the GPU.
 * Synchronization: host<->device copies return when the data has arrived
 * (the caller may reuse or read its host buffer at once); device->device
 * copies, memset and kernels are asynchronous; shs_device_sync() waits.
 * Kernels return nothing (device.h), so a launch error is kept as the
 * device's sticky error, printed once, and returned by the next copy or sync.
 * Backend scratch (norm partials, encoder-backward groups, overlapping
 * copies) is a few KiB to BT*12 bytes outside the accounting.
 * What it is not: a communicator (comm_cuda_local.c, comm_nccl.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_impl.h"
#include "device/cuda/kernels.h"
#include "shardsim/units.h"

typedef struct {
    int gpu;
    cudaStream_t stream;
    int64_t *norm_scratch;     /* shs__cuda_norm_scratch_words() int64 */
    void *scratch;             /* grown on demand */
    size_t scratch_bytes;
    cudaError_t sticky;        /* first kernel launch error, cudaSuccess if none */
} cuda_ctx_t;

static cuda_ctx_t *ctx_of(const shs_device_t *dev) { return (cuda_ctx_t *)dev->ctx; }

shs_status_t shs__cuda_error(int rank, const char *what, cudaError_t e) {
    return shs_set_error(SHS_INTERNAL, "rank %d: %s: %s: %s", rank, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

int shs__device_is_cuda(const shs_device_t *dev) { return dev && dev->iface == &shs__cuda_iface; }
cudaStream_t shs__cuda_device_stream(const shs_device_t *dev) { return ctx_of(dev)->stream; }

shs_status_t shs__cuda_bind(const shs_device_t *dev) {
    cudaError_t e = cudaSetDevice(ctx_of(dev)->gpu);
    return e == cudaSuccess ? SHS_OK : shs__cuda_error(dev->rank, "cudaSetDevice", e);
}

/* Keep the first launch error; print it once (kernels cannot return it). */
static void note(shs_device_t *dev, const char *kernel, cudaError_t e) {
    cuda_ctx_t *c = ctx_of(dev);
    if (e == cudaSuccess || c->sticky != cudaSuccess) return;
    c->sticky = e;
    fprintf(stderr, "shardsim: rank %d: CUDA kernel %s failed to launch: %s\n", dev->rank, kernel,
            cudaGetErrorString(e));
}

static shs_status_t sticky_status(shs_device_t *dev) {
    cuda_ctx_t *c = ctx_of(dev);
    return c->sticky == cudaSuccess ? SHS_OK : shs__cuda_error(dev->rank, "an earlier kernel launch", c->sticky);
}

/* Bind to the GPU or return its status (every entry point: the calling
 * thread's current device is per thread). */
#define BIND(dev) SHS_CHECK(shs__cuda_bind(dev))
#define BIND_VOID(dev)                                                                             \
    do {                                                                                           \
        if (shs__cuda_bind(dev) != SHS_OK) { note((dev), "cudaSetDevice", cudaErrorInvalidDevice); return; } \
    } while (0)

static shs_status_t ensure_scratch(shs_device_t *dev, size_t bytes) {
    cuda_ctx_t *c = ctx_of(dev);
    if (c->scratch_bytes >= bytes) return SHS_OK;
    cudaError_t e = cudaStreamSynchronize(c->stream); /* the old scratch may be in use */
    if (e != cudaSuccess) return shs__cuda_error(dev->rank, "cudaStreamSynchronize", e);
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    e = cudaMalloc(&c->scratch, bytes);
    if (e != cudaSuccess) {
        char b[32];
        return shs_set_error(SHS_OUT_OF_MEMORY, "rank %d: GPU %d: cannot allocate %s of backend scratch: %s", dev->rank,
                             c->gpu, shs_format_bytes(b, sizeof b, (double)bytes), cudaGetErrorString(e));
    }
    c->scratch_bytes = bytes;
    return SHS_OK;
}

/* ---- memory ------------------------------------------------------------- */

static shs_status_t cuda_alloc(shs_device_t *dev, void **ptr, size_t bytes) {
    *ptr = NULL;
    BIND(dev);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1); /* bytes == 0: still a unique pointer */
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the (non-sticky) allocation error */
        char req[32];
        return shs_set_error(SHS_OUT_OF_MEMORY, "rank %d: cudaMalloc of %s on GPU %d failed: %s", dev->rank,
                             shs_format_bytes(req, sizeof req, (double)bytes), ctx_of(dev)->gpu, cudaGetErrorString(e));
    }
    *ptr = p;
    return SHS_OK;
}

static void cuda_free(shs_device_t *dev, void *ptr, size_t bytes) {
    (void)bytes;
    if (shs__cuda_bind(dev) != SHS_OK) return;
    /* queued work of this device may still use ptr (cudaFree does not wait for a non-blocking stream) */
    cudaStreamSynchronize(ctx_of(dev)->stream);
    cudaFree(ptr);
}

/* Host<->device: queued after this device's work, then waited for. */
static shs_status_t copy_sync(shs_device_t *dev, void *dst, const void *src, size_t bytes, const char *what) {
    BIND(dev);
    SHS_CHECK(sticky_status(dev));
    cuda_ctx_t *c = ctx_of(dev);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? SHS_OK : shs__cuda_error(dev->rank, what, e);
}

static shs_status_t cuda_memcpy_h2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    return copy_sync(dev, dst, src, bytes, "copy host to device");
}

static shs_status_t cuda_memcpy_d2h(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    return copy_sync(dev, dst, src, bytes, "copy device to host");
}

/* memmove semantics: overlapping ranges go through scratch. */
static shs_status_t cuda_memcpy_d2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    BIND(dev);
    SHS_CHECK(sticky_status(dev));
    cuda_ctx_t *c = ctx_of(dev);
    const char *d = dst, *s = src;
    cudaError_t e;
    if (d < s + bytes && s < d + bytes) {
        SHS_CHECK(ensure_scratch(dev, bytes));
        e = cudaMemcpyAsync(c->scratch, src, bytes, cudaMemcpyDefault, c->stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dst, c->scratch, bytes, cudaMemcpyDefault, c->stream);
    } else {
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->stream);
    }
    return e == cudaSuccess ? SHS_OK : shs__cuda_error(dev->rank, "copy device to device", e);
}

static shs_status_t cuda_memset(shs_device_t *dev, void *dst, int value, size_t bytes) {
    BIND(dev);
    cudaError_t e = cudaMemsetAsync(dst, value, bytes, ctx_of(dev)->stream);
    return e == cudaSuccess ? SHS_OK : shs__cuda_error(dev->rank, "cudaMemsetAsync", e);
}

static shs_status_t cuda_sync(shs_device_t *dev) {
    BIND(dev);
    cudaError_t e = cudaStreamSynchronize(ctx_of(dev)->stream);
    if (e != cudaSuccess) return shs__cuda_error(dev->rank, "cudaStreamSynchronize", e);
    return sticky_status(dev);
}

static void cuda_destroy(shs_device_t *dev) {
    cuda_ctx_t *c = ctx_of(dev);
    if (!c) return;
    if (cudaSetDevice(c->gpu) == cudaSuccess) {
        if (c->stream) cudaStreamSynchronize(c->stream);
        if (c->scratch) cudaFree(c->scratch);
        if (c->norm_scratch) cudaFree(c->norm_scratch);
        if (c->stream) cudaStreamDestroy(c->stream);
    }
    free(c);
    dev->ctx = NULL;
}

/* ---- kernels ----------------------------------------------------------------- */

#define STREAM(dev) (ctx_of(dev)->stream)
#define LAUNCH(dev, name, call)                                                                    \
    do {                                                                                           \
        BIND_VOID(dev);                                                                            \
        note((dev), name, (call));                                                                 \
    } while (0)

static void cuda_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                                const float *bias, int BT, int C, int OC) {
    LAUNCH(dev, "matmul_forward", shs__cuda_matmul_forward(STREAM(dev), out, inp, weight, bias, BT, C, OC));
}
static void cuda_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, int BT, int C, int OC) {
    LAUNCH(dev, "matmul_backward",
           shs__cuda_matmul_backward(STREAM(dev), dinp, dweight, dbias, dout, inp, weight, BT, C, OC));
}
static void cuda_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                                   const float *weight, const float *bias, int N, int C) {
    LAUNCH(dev, "layernorm_forward", shs__cuda_layernorm_forward(STREAM(dev), out, mean, rstd, inp, weight, bias, N, C));
}
static void cuda_layernorm_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, const float *mean, const float *rstd, int N,
                                    int C) {
    LAUNCH(dev, "layernorm_backward",
           shs__cuda_layernorm_backward(STREAM(dev), dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C));
}
static void cuda_attention_forward(shs_device_t *dev, float *out, float *preatt, float *att, const float *qkv, int B,
                                   int T, int C, int NH) {
    LAUNCH(dev, "attention_forward", shs__cuda_attention_forward(STREAM(dev), out, preatt, att, qkv, B, T, C, NH));
}
static void cuda_attention_backward(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C, int NH) {
    LAUNCH(dev, "attention_backward",
           shs__cuda_attention_backward(STREAM(dev), dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH));
}
static void cuda_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    LAUNCH(dev, "gelu_forward", shs__cuda_gelu_forward(STREAM(dev), out, inp, n));
}
static void cuda_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    LAUNCH(dev, "gelu_backward", shs__cuda_gelu_backward(STREAM(dev), dinp, inp, dout, n));
}
static void cuda_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    LAUNCH(dev, "relu_forward", shs__cuda_relu_forward(STREAM(dev), out, inp, n));
}
static void cuda_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    LAUNCH(dev, "relu_backward", shs__cuda_relu_backward(STREAM(dev), dinp, inp, dout, n));
}
static void cuda_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                                 const float *wpe, int B, int T, int C) {
    LAUNCH(dev, "encoder_forward", shs__cuda_encoder_forward(STREAM(dev), out, tokens, wte, wpe, B, T, C));
}

/* dwpe on the GPU; dwte by token groups: the tokens come to the host, are
 * grouped as on the CPU (shs__encoder_groups), and each token's positions go
 * back as one group, summed in increasing position by one thread per
 * (group, channel). The tokens are B*T int32, so the round trip is small. */
static void cuda_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                                  const int32_t *tokens, int B, int T, int C) {
    BIND_VOID(dev);
    cuda_ctx_t *c = ctx_of(dev);
    note(dev, "encoder_backward", shs__cuda_encoder_backward_wpe(c->stream, dwpe, dout, B, T, C));
    int BT = B * T;
    if (BT <= 0 || C <= 0) return;
    int32_t *host = malloc((size_t)(3 * BT + 1) * sizeof *host); /* tokens, then the groups over them */
    SHS_ASSERT(host != NULL);
    cudaError_t e = cudaMemcpyAsync(host, tokens, (size_t)BT * sizeof(int32_t), cudaMemcpyDefault, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        note(dev, "encoder_backward (tokens to host)", e);
        goto out;
    }
    int ngroups = shs__encoder_groups(host, BT, host);
    size_t words = (size_t)BT + (size_t)ngroups + 1 + (size_t)ngroups;
    if (ensure_scratch(dev, words * sizeof(int32_t)) != SHS_OK) {
        note(dev, "encoder_backward (scratch)", cudaErrorMemoryAllocation);
        goto out;
    }
    int32_t *d = c->scratch;
    e = cudaMemcpyAsync(d, host, words * sizeof(int32_t), cudaMemcpyDefault, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream); /* host buffer freed below */
    if (e != cudaSuccess) {
        note(dev, "encoder_backward (groups to device)", e);
        goto out;
    }
    note(dev, "encoder_backward",
         shs__cuda_encoder_backward_wte(c->stream, dwte, dout, d, d + BT, d + BT + ngroups + 1, ngroups, C));
out:
    free(host);
}

static void cuda_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n) {
    LAUNCH(dev, "residual_forward", shs__cuda_residual_forward(STREAM(dev), out, a, b, n));
}
static void cuda_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n) {
    LAUNCH(dev, "accumulate", shs__cuda_accumulate(STREAM(dev), dst, src, n));
}
static void cuda_scale(shs_device_t *dev, float *x, float alpha, size_t n) {
    LAUNCH(dev, "scale", shs__cuda_scale(STREAM(dev), x, alpha, n));
}
static void cuda_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                                      const int32_t *targets, int BT, int V) {
    LAUNCH(dev, "softmax_xent_forward", shs__cuda_softmax_xent_forward(STREAM(dev), losses, probs, logits, targets, BT, V));
}
static void cuda_softmax_xent_backward(shs_device_t *dev, float *dlogits, const float *probs, const int32_t *targets,
                                       float dloss, int BT, int V) {
    LAUNCH(dev, "softmax_xent_backward",
           shs__cuda_softmax_xent_backward(STREAM(dev), dlogits, probs, targets, dloss, BT, V));
}
static void cuda_sum(shs_device_t *dev, float *out, const float *x, size_t n) {
    LAUNCH(dev, "sum", shs__cuda_sum(STREAM(dev), out, x, n));
}
static void cuda_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p) {
    LAUNCH(dev, "norm_accumulate", shs__cuda_norm_accumulate(STREAM(dev), acc, x, n, p, ctx_of(dev)->norm_scratch));
}
static void cuda_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src, shs_dtype_t src_dtype,
                      size_t n) {
    SHS_ASSERT(shs_dtype_is_float(dst_dtype) && shs_dtype_is_float(src_dtype));
    LAUNCH(dev, "cast", shs__cuda_cast(STREAM(dev), dst, dst_dtype, src, src_dtype, n));
}
/* decay and step size on the host, exactly as the CPU backend computes them. */
static void cuda_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                              const shs_adamw_hparams_t *hp) {
    LAUNCH(dev, "adamw_update", shs__cuda_adamw_update(STREAM(dev), param, grad, m, v, n, shs__adamw_coef(hp)));
}
static void cuda_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                            float lr, float momentum, float weight_decay) {
    LAUNCH(dev, "sgd_update", shs__cuda_sgd_update(STREAM(dev), param, grad, momentum_buf, n, lr, momentum, weight_decay));
}

/* ---- vtable and constructor ---------------------------------------------------- */

const shs_device_iface_t shs__cuda_iface = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_d2d = cuda_memcpy_d2d,
    .memset = cuda_memset,
    .sync = cuda_sync,
    .destroy = cuda_destroy,
    .matmul_forward = cuda_matmul_forward,
    .matmul_backward = cuda_matmul_backward,
    .layernorm_forward = cuda_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .attention_forward = cuda_attention_forward,
    .attention_backward = cuda_attention_backward,
    .gelu_forward = cuda_gelu_forward,
    .gelu_backward = cuda_gelu_backward,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .encoder_forward = cuda_encoder_forward,
    .encoder_backward = cuda_encoder_backward,
    .residual_forward = cuda_residual_forward,
    .accumulate = cuda_accumulate,
    .scale = cuda_scale,
    .softmax_xent_forward = cuda_softmax_xent_forward,
    .softmax_xent_backward = cuda_softmax_xent_backward,
    .sum = cuda_sum,
    .norm_accumulate = cuda_norm_accumulate,
    .cast = cuda_cast,
    .adamw_update = cuda_adamw_update,
    .sgd_update = cuda_sgd_update,
};

shs_status_t shs_cuda_device_count(int *count) {
    SHS_ASSERT(count);
    *count = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return shs_set_error(SHS_UNSUPPORTED, "no CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    }
    if (n == 0) return shs_set_error(SHS_UNSUPPORTED, "no CUDA device (cudaGetDeviceCount found 0)");
    *count = n;
    return SHS_OK;
}

shs_status_t shs_device_create_cuda(shs_device_t **out, int rank, int gpu_index, size_t capacity) {
    if (!out) return shs_set_error(SHS_INVALID_ARG, "shs_device_create_cuda: out is NULL");
    *out = NULL;
    int n = 0;
    SHS_CHECK(shs_cuda_device_count(&n));
    if (gpu_index < 0 || gpu_index >= n)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: GPU %d does not exist (%d CUDA device%s)", rank, gpu_index, n,
                             n == 1 ? "" : "s");
    cuda_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate CUDA device state", rank);
    c->gpu = gpu_index;
    shs_status_t st = SHS_OK;
    cudaError_t e = cudaSetDevice(gpu_index);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->norm_scratch, shs__cuda_norm_scratch_words() * sizeof(int64_t));
    if (e != cudaSuccess) {
        st = shs__cuda_error(rank, "creating the CUDA device", e);
        goto fail;
    }
    SHS_CHECK_GOTO(shs__device_new(out, &shs__cuda_iface, c, rank, capacity, 1), st, fail);
    return SHS_OK;
fail:
    if (c->norm_scratch) cudaFree(c->norm_scratch);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
    return st;
}
