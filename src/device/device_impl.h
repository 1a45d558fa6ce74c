/* device_impl.h - private: the device vtable that each backend fills, and the
 * device struct the public wrappers in device.c work on (ggml-backend-impl.h's
 * pattern). Backends implement raw memory and kernels only; accounting by
 * category, capacity checks and error text live in device.c so every backend
 * reports memory the same way.
 * Slots marked (optional) may be NULL; the wrapper then supplies the fallback.
 */
#ifndef SHARDSIM_DEVICE_IMPL_H
#define SHARDSIM_DEVICE_IMPL_H

#include "device/kernel_math.h"
#include "shardsim/device.h"

typedef struct shs_device_iface {
    const char *name;
    /* memory */
    shs_status_t (*alloc)(shs_device_t *dev, void **ptr, size_t bytes);
    void (*free)(shs_device_t *dev, void *ptr, size_t bytes);   /* bytes as allocated */
    shs_status_t (*memcpy_h2d)(shs_device_t *dev, void *dst, const void *src, size_t bytes);
    shs_status_t (*memcpy_d2h)(shs_device_t *dev, void *dst, const void *src, size_t bytes);
    shs_status_t (*memcpy_d2d)(shs_device_t *dev, void *dst, const void *src, size_t bytes);
    shs_status_t (*memset)(shs_device_t *dev, void *dst, int value, size_t bytes);
    shs_status_t (*sync)(shs_device_t *dev);      /* (optional) */
    void (*destroy)(shs_device_t *dev);            /* (optional) frees ctx */
    /* kernels: same contracts as the public functions in device.h */
    void (*matmul_forward)(shs_device_t *, float *, const float *, const float *, const float *, int, int, int);
    void (*matmul_backward)(shs_device_t *, float *, float *, float *, const float *, const float *,
                            const float *, int, int, int);
    void (*layernorm_forward)(shs_device_t *, float *, float *, float *, const float *, const float *,
                              const float *, int, int);
    void (*layernorm_backward)(shs_device_t *, float *, float *, float *, const float *, const float *,
                               const float *, const float *, const float *, int, int);
    void (*attention_forward)(shs_device_t *, float *, float *, float *, const float *, int, int, int, int);
    void (*attention_backward)(shs_device_t *, float *, float *, float *, const float *, const float *,
                               const float *, int, int, int, int);
    /* (optional) dropout and the attention kernels beyond eager
     * and rounding (shs_device_supports says which a backend has) */
    void (*round)(shs_device_t *, float *, shs_dtype_t, size_t);
    void (*dropout_forward)(shs_device_t *, float *, uint8_t *, const float *, size_t, const shs_dropout_t *);
    void (*dropout_backward)(shs_device_t *, float *, const uint8_t *, const float *, size_t, float);
    void (*attention_forward_dropout)(shs_device_t *, float *, float *, float *, float *, uint8_t *, const float *,
                                      int, int, int, int, const shs_dropout_t *);
    void (*attention_backward_dropout)(shs_device_t *, float *, float *, float *, const float *, const float *,
                                       const float *, const float *, const uint8_t *, int, int, int, int, float);
    void (*attention_forward_flash)(shs_device_t *, float *, float *, const float *, int, int, int, int,
                                    const shs_dropout_t *);
    void (*attention_backward_flash)(shs_device_t *, float *, const float *, const float *, const float *,
                                     const float *, int, int, int, int, const shs_dropout_t *);
    void (*gelu_forward)(shs_device_t *, float *, const float *, size_t);
    void (*gelu_backward)(shs_device_t *, float *, const float *, const float *, size_t);
    void (*relu_forward)(shs_device_t *, float *, const float *, size_t);
    void (*relu_backward)(shs_device_t *, float *, const float *, const float *, size_t);
    void (*encoder_forward)(shs_device_t *, float *, const int32_t *, const float *, const float *, int,
                            int, int);
    void (*encoder_backward)(shs_device_t *, float *, float *, const float *, const int32_t *, int, int,
                             int);
    void (*residual_forward)(shs_device_t *, float *, const float *, const float *, size_t);
    void (*accumulate)(shs_device_t *, float *, const float *, size_t);
    void (*scale)(shs_device_t *, float *, float, size_t);
    void (*softmax_xent_forward)(shs_device_t *, float *, float *, const float *, const int32_t *, int, int);
    void (*softmax_xent_backward)(shs_device_t *, float *, const float *, const int32_t *, float, int, int);
    int xent_ignore_index; /* the two above take SHS_IGNORE_INDEX targets (SHS_KERNELS_IGNORE_INDEX) */
    void (*sum)(shs_device_t *, float *, const float *, size_t);
    void (*norm_accumulate)(shs_device_t *, int64_t *, const float *, size_t, int);
    void (*cast)(shs_device_t *, void *, shs_dtype_t, const void *, shs_dtype_t, size_t);
    void (*adamw_update)(shs_device_t *, float *, const float *, float *, float *, size_t,
                         const shs_adamw_hparams_t *);
    void (*sgd_update)(shs_device_t *, float *, const float *, float *, size_t, float, float, float);
    /* (optional) the Llama-family kernels (SHS_KERNELS_LLAMA: all of them, and
     * encoder_forward/backward taking wpe/dwpe NULL) */
    void (*rmsnorm_forward)(shs_device_t *, float *, float *, const float *, const float *, int, int, float);
    void (*rmsnorm_backward)(shs_device_t *, float *, float *, const float *, const float *, const float *,
                             const float *, int, int);
    void (*rope_forward)(shs_device_t *, float *out, const float *inp, const int32_t *positions, const shs_rope_t *,
                         int B, int T, int NH, int HD);
    void (*rope_backward)(shs_device_t *, float *dinp, const float *dout, const int32_t *positions,
                          const shs_rope_t *, int B, int T, int NH, int HD);
    void (*swiglu_forward)(shs_device_t *, float *, const float *, const float *, size_t);
    void (*swiglu_backward)(shs_device_t *, float *, float *, const float *, const float *, const float *, size_t);
    void (*geglu_forward)(shs_device_t *, float *out, const float *gate, const float *up, size_t n);
    void (*geglu_backward)(shs_device_t *, float *dgate, float *dup, const float *dout, const float *gate,
                           const float *up, size_t n);
    void (*softcap_forward)(shs_device_t *, float *out, const float *inp, float cap, size_t n);
    void (*softcap_backward)(shs_device_t *, float *dinp, const float *dout, const float *out, float cap, size_t n);
    /* the GQA kernels get opt filled in (never NULL) */
    void (*attention_gqa_forward)(shs_device_t *, float *out, float *att, const float *q, const float *k,
                                  const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                  int T, int NH, int NKV, int HD);
    void (*attention_gqa_backward)(shs_device_t *, float *dq, float *dk, float *dv, float *datt, const float *dout,
                                   const float *q, const float *k, const float *v, const float *att,
                                   const shs_attention_opts_t *opt, int B, int T, int NH, int NKV, int HD);
    void (*attention_gqa_forward_flash)(shs_device_t *, float *out, float *lse, const float *q, const float *k,
                                        const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                        int B, int T, int NH, int NKV, int HD);
    void (*attention_gqa_backward_flash)(shs_device_t *, float *dq, float *dk, float *dv, const float *dout,
                                         const float *q, const float *k, const float *v, const float *out,
                                         const float *lse, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                         int B, int T, int NH, int NKV, int HD);
    /* (optional) kernel work counters; NULL: shs_device_kernel_stats says unsupported */
    void (*kernel_stats)(const shs_device_t *, shs_kernel_stats_t *);
} shs_device_iface_t;

/* One live allocation, kept by device.c in an open-addressing table. */
typedef struct {
    void *ptr;           /* NULL: empty slot; (void*)1: tombstone */
    size_t bytes;
    size_t gpu_bytes;    /* what the modelled GPU run holds in its place (device.h) */
    long gpu_block;      /* its handle in the caching allocator model, -1 none */
    shs_mem_category_t cat;
} shs__alloc_entry_t;

struct shs_device {
    const shs_device_iface_t *iface;
    void *ctx;           /* backend state */
    int rank;
    int num_threads;     /* kernel threads for this device */
    shs_mem_stats_t stats;
    shs__alloc_entry_t *table;
    size_t table_cap;    /* power of two */
    size_t table_used;   /* live + tombstones */
    size_t table_live;   /* live entries (GPU-only ones included) */
    int poison_freed;    /* shs_device_set_poison_freed: category mask */
    size_t window_peak;  /* max total bytes since the last shs_device_window_peak() */
    shs_gpu_mem_stats_t gpu; /* the modelled GPU run's ledger (device.h) */
    size_t gpu_window_peak;
    struct shs__callocator *callocator; /* its caching allocator model (caching_allocator.h) */
    shs_kernel_recorder_fn kernel_recorder; /* shs_device_set_kernel_recorder (counting backends call it) */
    void *kernel_recorder_user;
};

/* SHS_INVALID_ARG naming the op, the argument, its allocation and the
 * overflow when [p, p + bytes) is not inside one allocation of dev; with
 * `strict` 0 a pointer outside every allocation passes (kernels may be
 * handed host memory on the CPU backend). (device_memory.c) */
shs_status_t shs__device_check_range(const shs_device_t *dev, const char *op, const char *arg, const void *p,
                                     size_t bytes, int strict);

/* Wrap a filled vtable into a device (used by backend constructors). */
shs_status_t shs__device_new(shs_device_t **out, const shs_device_iface_t *iface, void *ctx, int rank,
                             size_t capacity, int num_threads);

/* AdamW's per-call scalars for the kernels (kernel_math.h), from the hparams. */
static inline shs__adamw_coef_t shs__adamw_coef(const shs_adamw_hparams_t *hp) {
    shs__adamw_coef_t k = {
        .decay = 1.0f - hp->lr * hp->weight_decay,
        .step_size = hp->lr / hp->bias_correction1,
        .b1 = hp->beta1,
        .b2 = hp->beta2,
        .bc2s = hp->bias_correction2_sqrt,
        .eps = hp->eps,
    };
    return k;
}

/* Positions 0..BT-1 grouped by token, for the embedding gradient (encoder
 * backward): sorted by (token, position), a total order, so each token's
 * positions come in increasing order. Writes groups (3*BT + 1 int32):
 *   pos[BT]                   positions in that order,
 *   group_start[ngroups + 1]  group g is pos[group_start[g] .. group_start[g+1]),
 *   group_tok[ngroups]        its token;
 * and returns ngroups. tokens may be groups itself (read before it is
 * written). Every token must be >= 0 (asserted). (encoder_groups.c) */
int shs__encoder_groups(const int32_t *tokens, int BT, int32_t *groups);

/* The CPU backend's vtable (device_cpu.c). */
extern const shs_device_iface_t shs__cpu_iface;
/* The meta backend's vtable (device_meta.c). */
extern const shs_device_iface_t shs__meta_iface;

#endif
