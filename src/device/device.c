/* device.c - public device wrappers: per-category memory accounting against
 * the capacity, out-of-memory text, argument checks, dispatch to the backend
 * vtable (device_impl.h).
 * What it is not: any backend's memory or kernels (device_cpu.c, ...).
 */
#include "device/device_impl.h"

#include "shardsim/units.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOMBSTONE ((void *)1)

const char *shs_mem_category_name(shs_mem_category_t c) {
    switch (c) {
#define SHS_MEM_NAME(name, str) case SHS_MEM_##name: return str;
        SHS_MEM_CATEGORY_MAP(SHS_MEM_NAME)
#undef SHS_MEM_NAME
    default: return "invalid";
    }
}

shs_status_t shs__device_new(shs_device_t **out, const shs_device_iface_t *iface, void *ctx, int rank,
                             size_t capacity, int num_threads) {
    if (!out || !iface) return shs_set_error(SHS_INVALID_ARG, "shs__device_new: NULL argument");
    if (rank < 0) return shs_set_error(SHS_INVALID_ARG, "device: negative rank %d", rank);
    shs_device_t *dev = calloc(1, sizeof *dev);
    if (!dev) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate device struct", rank);
    dev->iface = iface;
    dev->ctx = ctx;
    dev->rank = rank;
    dev->num_threads = num_threads < 1 ? 1 : num_threads;
    dev->stats.capacity = capacity;
    *out = dev;
    return SHS_OK;
}

void shs_device_destroy(shs_device_t *dev) {
    if (!dev) return;
    for (size_t i = 0; i < dev->table_cap; i++) {
        void *p = dev->table[i].ptr;
        if (p && p != TOMBSTONE) dev->iface->free(dev, p, dev->table[i].bytes);
    }
    free(dev->table);
    if (dev->iface->destroy) dev->iface->destroy(dev);
    free(dev);
}

const char *shs_device_backend(const shs_device_t *dev) { return dev->iface->name; }

/* ---- allocation table: open addressing keyed by pointer ---------------- */

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static shs__alloc_entry_t *table_find(shs_device_t *dev, const void *p) {
    if (!dev->table_cap) return NULL;
    for (size_t i = hash_ptr(p, dev->table_cap), n = 0; n < dev->table_cap; i = (i + 1) & (dev->table_cap - 1), n++) {
        if (dev->table[i].ptr == NULL) return NULL;
        if (dev->table[i].ptr == p) return &dev->table[i];
    }
    return NULL;
}

static int table_insert_raw(shs__alloc_entry_t *table, size_t cap, shs__alloc_entry_t e) {
    for (size_t i = hash_ptr(e.ptr, cap), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
        if (table[i].ptr == NULL || table[i].ptr == TOMBSTONE) {
            table[i] = e;
            return 1;
        }
    }
    return 0;
}

static shs_status_t table_insert(shs_device_t *dev, shs__alloc_entry_t e) {
    if ((dev->table_used + 1) * 2 > dev->table_cap) {
        /* rehash, dropping tombstones, to at most 1/4 load */
        size_t cap = 64;
        while ((dev->stats.num_allocs + 1) * 4 > cap) cap *= 2;
        shs__alloc_entry_t *t = calloc(cap, sizeof *t);
        if (!t) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot grow allocation table", dev->rank);
        for (size_t i = 0; i < dev->table_cap; i++)
            if (dev->table[i].ptr && dev->table[i].ptr != TOMBSTONE) table_insert_raw(t, cap, dev->table[i]);
        free(dev->table);
        dev->table = t;
        dev->table_cap = cap;
        dev->table_used = dev->stats.num_allocs;
    }
    SHS_ASSERT(table_insert_raw(dev->table, dev->table_cap, e));
    dev->table_used++;
    return SHS_OK;
}

static shs_status_t oom_error(shs_device_t *dev, size_t bytes, shs_mem_category_t cat, const char *tag) {
    char req[32], used[32], cap[32], usage[512];
    size_t off = 0;
    usage[0] = 0;
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) {
        char b[32];
        off += (size_t)snprintf(usage + off, sizeof usage - off, "%s%s %s", c ? ", " : "",
                                shs_mem_category_name((shs_mem_category_t)c), shs_format_bytes(b, sizeof b, (double)dev->stats.current[c]));
        if (off >= sizeof usage) break;
    }
    return shs_set_error(SHS_OUT_OF_MEMORY,
                         "rank %d: out of device memory: requested %s (%s%s%s) with %s of %s in use (%s)",
                         dev->rank, shs_format_bytes(req, sizeof req, (double)bytes), shs_mem_category_name(cat),
                         tag ? ", " : "", tag ? tag : "", shs_format_bytes(used, sizeof used, (double)dev->stats.total_current),
                         shs_format_bytes(cap, sizeof cap, (double)dev->stats.capacity), usage);
}

shs_status_t shs_device_alloc(shs_device_t *dev, void **ptr, size_t bytes, shs_mem_category_t cat,
                              const char *tag) {
    SHS_ASSERT(dev && ptr);
    if ((int)cat < 0 || cat >= SHS_MEM_NUM_CATEGORIES)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: invalid memory category %d", dev->rank, (int)cat);
    *ptr = NULL;
    shs_mem_stats_t *s = &dev->stats;
    if (bytes > s->capacity || s->total_current > s->capacity - bytes) return oom_error(dev, bytes, cat, tag);
    void *p = NULL;
    shs_status_t st = dev->iface->alloc(dev, &p, bytes);
    if (st != SHS_OK) return st;
    st = table_insert(dev, (shs__alloc_entry_t){.ptr = p, .bytes = bytes, .cat = cat});
    if (st != SHS_OK) {
        dev->iface->free(dev, p, bytes);
        return st;
    }
    s->num_allocs++;
    s->current[cat] += bytes;
    s->total_current += bytes;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    if (s->total_current > s->total_peak) s->total_peak = s->total_current;
    if (s->total_current > dev->window_peak) dev->window_peak = s->total_current;
    *ptr = p;
    return SHS_OK;
}

void shs_device_free(shs_device_t *dev, void *ptr) {
    if (!ptr) return;
    shs__alloc_entry_t *e = table_find(dev, ptr);
    if (!e) {
        fprintf(stderr, "shardsim: rank %d: free of %p, which this device did not allocate\n", dev->rank, ptr);
        SHS_ASSERT(!"shs_device_free: pointer not owned by this device");
    }
    dev->stats.current[e->cat] -= e->bytes;
    dev->stats.total_current -= e->bytes;
    dev->stats.num_allocs--;
    e->ptr = TOMBSTONE;
    if (dev->poison_freed & (1 << e->cat)) dev->iface->memset(dev, ptr, 0xff, e->bytes); /* all-ones: f32 NaN */
    dev->iface->free(dev, ptr, e->bytes);
}

void shs_device_set_poison_freed(shs_device_t *dev, unsigned category_mask) { dev->poison_freed = (int)category_mask; }

/* ---- bounds: every device range inside the allocation that holds it ----- */

/* The live allocation whose bytes hold address p (a 0-byte allocation holds
 * its own address only), or NULL. A scan of the table: it holds the few
 * hundred allocations of a run, and a call moves far more bytes. */
static const shs__alloc_entry_t *table_holding(const shs_device_t *dev, const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < dev->table_cap; i++) {
        const shs__alloc_entry_t *e = &dev->table[i];
        if (!e->ptr || e->ptr == TOMBSTONE) continue;
        uintptr_t b = (uintptr_t)e->ptr;
        if (a == b || (a > b && a - b < e->bytes)) return e;
    }
    return NULL;
}

/* SHS_INVALID_ARG naming the op, the argument, its allocation and the
 * overflow when [p, p + bytes) is not inside one allocation of dev; with
 * `strict` 0 a pointer outside every allocation passes (kernels may be
 * handed host memory on the CPU backend). */
static shs_status_t check_range(const shs_device_t *dev, const char *op, const char *arg, const void *p, size_t bytes,
                                int strict) {
    const shs__alloc_entry_t *e = table_holding(dev, p);
    if (!e) {
        if (!strict) return SHS_OK;
        return shs_set_error(SHS_INVALID_ARG, "rank %d: %s: %s %p (%zu bytes) is in no allocation of this device",
                             dev->rank, op, arg, p, bytes);
    }
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)e->ptr), room = e->bytes - off;
    if (bytes <= room) return SHS_OK;
    return shs_set_error(SHS_INVALID_ARG,
                         "rank %d: %s: %s [%zu, %zu) overflows its allocation (%s, %zu bytes at %p) by %zu bytes",
                         dev->rank, op, arg, off, off + bytes, shs_mem_category_name(e->cat), e->bytes, e->ptr,
                         bytes - room);
}

/* Kernels return nothing: an overflow is a programming error, reported and aborted. */
static void kernel_range(const shs_device_t *dev, const char *op, const char *arg, const void *p, size_t n, size_t es) {
    if (!p || !n) return;
    if (n > SIZE_MAX / es || check_range(dev, op, arg, p, n * es, 0) != SHS_OK) {
        fprintf(stderr, "shardsim: %s\n", n > SIZE_MAX / es ? "kernel element count overflows size_t" : shs_last_error());
        SHS_ASSERT(!"kernel argument outside its device allocation");
    }
}
#define KRANGE(op, arg, n) kernel_range(dev, op, #arg, arg, n, sizeof *(arg))

shs_status_t shs_memcpy_h2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(check_range(dev, "memcpy_h2d", "dst", dst, bytes, 1));
    return dev->iface->memcpy_h2d(dev, dst, src, bytes);
}
shs_status_t shs_memcpy_d2h(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(check_range(dev, "memcpy_d2h", "src", src, bytes, 1));
    return dev->iface->memcpy_d2h(dev, dst, src, bytes);
}
shs_status_t shs_memcpy_d2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(check_range(dev, "memcpy_d2d", "dst", dst, bytes, 1));
    SHS_CHECK(check_range(dev, "memcpy_d2d", "src", src, bytes, 1));
    if (dst == src) return SHS_OK;
    return dev->iface->memcpy_d2d(dev, dst, src, bytes);
}
shs_status_t shs_memset(shs_device_t *dev, void *dst, int value, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst);
    SHS_CHECK(check_range(dev, "memset", "dst", dst, bytes, 1));
    return dev->iface->memset(dev, dst, value, bytes);
}
shs_status_t shs_device_sync(shs_device_t *dev) { return dev->iface->sync ? dev->iface->sync(dev) : SHS_OK; }

void shs_device_mem_stats(const shs_device_t *dev, shs_mem_stats_t *out) { *out = dev->stats; }

void shs_device_set_kernel_recorder(shs_device_t *dev, shs_kernel_recorder_fn fn, void *user) {
    if (!dev) return;
    dev->kernel_recorder = fn;
    dev->kernel_recorder_user = user;
}

shs_status_t shs_device_kernel_stats(const shs_device_t *dev, shs_kernel_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (!dev->iface->kernel_stats)
        return shs_set_error(SHS_UNSUPPORTED, "rank %d: the %s backend does not count kernel work", dev->rank,
                             dev->iface->name);
    dev->iface->kernel_stats(dev, out);
    return SHS_OK;
}

size_t shs_device_window_peak(shs_device_t *dev) {
    size_t p = dev->window_peak > dev->stats.total_current ? dev->window_peak : dev->stats.total_current;
    dev->window_peak = dev->stats.total_current;
    return p;
}

void shs_device_reset_peak(shs_device_t *dev) {
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) dev->stats.peak[c] = dev->stats.current[c];
    dev->stats.total_peak = dev->stats.total_current;
}

/* ---- kernels: check shapes, dispatch ------------------------------------ */

void shs_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                        const float *bias, int BT, int C, int OC) {
    SHS_ASSERT(out && inp && weight && BT >= 0 && C >= 0 && OC >= 0);
    dev->iface->matmul_forward(dev, out, inp, weight, bias, BT, C, OC);
}
void shs_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int BT, int C, int OC) {
    SHS_ASSERT(dweight && dout && inp && weight && BT >= 0 && C >= 0 && OC >= 0);
    dev->iface->matmul_backward(dev, dinp, dweight, dbias, dout, inp, weight, BT, C, OC);
}
void shs_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C) {
    SHS_ASSERT(out && mean && rstd && inp && weight && bias && N >= 0 && C > 0);
    dev->iface->layernorm_forward(dev, out, mean, rstd, inp, weight, bias, N, C);
}
void shs_layernorm_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight,
                            const float *mean, const float *rstd, int N, int C) {
    SHS_ASSERT(dinp && dweight && dbias && dout && inp && weight && mean && rstd && N >= 0 && C > 0);
    dev->iface->layernorm_backward(dev, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void shs_attention_forward(shs_device_t *dev, float *out, float *preatt, float *att, const float *qkv,
                           int B, int T, int C, int NH) {
    SHS_ASSERT(out && preatt && att && qkv && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    dev->iface->attention_forward(dev, out, preatt, att, qkv, B, T, C, NH);
}
void shs_attention_backward(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                            const float *dout, const float *qkv, const float *att, int B, int T,
                            int C, int NH) {
    SHS_ASSERT(dqkv && dpreatt && datt && dout && qkv && att && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    dev->iface->attention_backward(dev, dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}
int shs_device_supports(const shs_device_t *dev, unsigned sets) {
    const shs_device_iface_t *f = dev->iface;
    if ((sets & SHS_KERNELS_FLASH_ATTENTION) && !(f->attention_forward_flash && f->attention_backward_flash)) return 0;
    if ((sets & SHS_KERNELS_DROPOUT) && !(f->dropout_forward && f->dropout_backward && f->attention_forward_dropout &&
                                          f->attention_backward_dropout))
        return 0;
    if ((sets & SHS_KERNELS_ROUND) && !f->round) return 0;
    if ((sets & SHS_KERNELS_LLAMA) &&
        !(f->rmsnorm_forward && f->rmsnorm_backward && f->rope_forward && f->rope_backward && f->swiglu_forward &&
          f->swiglu_backward && f->attention_gqa_forward && f->attention_gqa_backward &&
          f->attention_gqa_forward_flash && f->attention_gqa_backward_flash))
        return 0;
    if ((sets & SHS_KERNELS_IGNORE_INDEX) && !f->xent_ignore_index) return 0;
    return 1;
}
/* A kernel the backend lacks: a programming error (callers ask
 * shs_device_supports first). */
#define KNEED(slot) SHS_ASSERT(dev->iface->slot && #slot " is not implemented by this backend")
static int dropout_ok(const shs_dropout_t *d) { return !d || (d->p >= 0.0f && d->p < 1.0f); }
void shs_dropout_forward(shs_device_t *dev, float *out, uint8_t *mask, const float *inp, size_t n,
                         const shs_dropout_t *d) {
    SHS_ASSERT(out && mask && inp && d && dropout_ok(d));
    KNEED(dropout_forward);
    KRANGE("dropout_forward", out, n), KRANGE("dropout_forward", mask, n), KRANGE("dropout_forward", inp, n);
    dev->iface->dropout_forward(dev, out, mask, inp, n, d);
}
void shs_dropout_backward(shs_device_t *dev, float *dinp, const uint8_t *mask, const float *dout, size_t n, float p) {
    SHS_ASSERT(dinp && mask && dout && p >= 0.0f && p < 1.0f);
    KNEED(dropout_backward);
    KRANGE("dropout_backward", dinp, n), KRANGE("dropout_backward", mask, n), KRANGE("dropout_backward", dout, n);
    dev->iface->dropout_backward(dev, dinp, mask, dout, n, p);
}
void shs_attention_forward_dropout(shs_device_t *dev, float *out, float *preatt, float *att, float *att_drop,
                                   uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                   const shs_dropout_t *d) {
    SHS_ASSERT(out && preatt && att && att_drop && mask && qkv && d && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 &&
               C % NH == 0);
    KNEED(attention_forward_dropout);
    dev->iface->attention_forward_dropout(dev, out, preatt, att, att_drop, mask, qkv, B, T, C, NH, d);
}
void shs_attention_backward_dropout(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                    const float *qkv, const float *att, const float *att_drop, const uint8_t *mask,
                                    int B, int T, int C, int NH, float p) {
    SHS_ASSERT(dqkv && dpreatt && datt && dout && qkv && att && att_drop && mask && p >= 0.0f && p < 1.0f &&
               B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_backward_dropout);
    dev->iface->attention_backward_dropout(dev, dqkv, dpreatt, datt, dout, qkv, att, att_drop, mask, B, T, C, NH, p);
}
void shs_attention_forward_flash(shs_device_t *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH, const shs_dropout_t *d) {
    SHS_ASSERT(out && lse && qkv && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_forward_flash);
    size_t btc = (size_t)B * T * C;
    KRANGE("attention_forward_flash", out, btc), KRANGE("attention_forward_flash", qkv, 3 * btc);
    KRANGE("attention_forward_flash", lse, (size_t)B * NH * T);
    dev->iface->attention_forward_flash(dev, out, lse, qkv, B, T, C, NH, d && d->p > 0.0f ? d : NULL);
}
void shs_attention_backward_flash(shs_device_t *dev, float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  const shs_dropout_t *d) {
    SHS_ASSERT(dqkv && dout && qkv && out && lse && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_backward_flash);
    size_t btc = (size_t)B * T * C;
    KRANGE("attention_backward_flash", dqkv, 3 * btc), KRANGE("attention_backward_flash", qkv, 3 * btc);
    KRANGE("attention_backward_flash", dout, btc), KRANGE("attention_backward_flash", out, btc);
    KRANGE("attention_backward_flash", lse, (size_t)B * NH * T);
    dev->iface->attention_backward_flash(dev, dqkv, dout, qkv, out, lse, B, T, C, NH, d && d->p > 0.0f ? d : NULL);
}
void shs_round(shs_device_t *dev, float *x, shs_dtype_t dtype, size_t n) {
    SHS_ASSERT(x && (dtype == SHS_F16 || dtype == SHS_BF16));
    KNEED(round);
    KRANGE("round", x, n);
    dev->iface->round(dev, x, dtype, n);
}
/* ---- Llama-family kernels (SHS_KERNELS_LLAMA) ---- */
void shs_rmsnorm_forward(shs_device_t *dev, float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps) {
    SHS_ASSERT(out && rstd && inp && weight && N >= 0 && C > 0 && eps >= 0.0f);
    KNEED(rmsnorm_forward);
    size_t n = (size_t)N * C;
    KRANGE("rmsnorm_forward", out, n), KRANGE("rmsnorm_forward", rstd, (size_t)N);
    KRANGE("rmsnorm_forward", inp, n), KRANGE("rmsnorm_forward", weight, (size_t)C);
    dev->iface->rmsnorm_forward(dev, out, rstd, inp, weight, N, C, eps);
}
void shs_rmsnorm_backward(shs_device_t *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C) {
    SHS_ASSERT(dinp && dweight && dout && inp && weight && rstd && N >= 0 && C > 0);
    KNEED(rmsnorm_backward);
    size_t n = (size_t)N * C;
    KRANGE("rmsnorm_backward", dinp, n), KRANGE("rmsnorm_backward", dweight, (size_t)C);
    KRANGE("rmsnorm_backward", dout, n), KRANGE("rmsnorm_backward", inp, n);
    KRANGE("rmsnorm_backward", weight, (size_t)C), KRANGE("rmsnorm_backward", rstd, (size_t)N);
    dev->iface->rmsnorm_backward(dev, dinp, dweight, dout, inp, weight, rstd, N, C);
}
/* out/dinp and inp/dout (B,T,NH,HD), positions (B,T) or NULL, inv_freq (HD/2). */
static void rope_checks(shs_device_t *dev, const char *op, const float *out, const float *inp,
                        const int32_t *positions, const float *inv_freq, int B, int T, int NH, int HD) {
    SHS_ASSERT(out && inp && inv_freq && B >= 0 && T >= 0 && NH > 0 && HD > 0 && HD % 2 == 0);
    size_t n = (size_t)B * T * NH * HD;
    KRANGE(op, out, n), KRANGE(op, inp, n), KRANGE(op, inv_freq, (size_t)HD / 2);
    KRANGE(op, positions, (size_t)B * T);
}
void shs_rope_forward(shs_device_t *dev, float *out, const float *inp, const int32_t *positions,
                      const float *inv_freq, int B, int T, int NH, int HD) {
    KNEED(rope_forward);
    rope_checks(dev, "rope_forward", out, inp, positions, inv_freq, B, T, NH, HD);
    dev->iface->rope_forward(dev, out, inp, positions, inv_freq, B, T, NH, HD);
}
void shs_rope_backward(shs_device_t *dev, float *dinp, const float *dout, const int32_t *positions,
                       const float *inv_freq, int B, int T, int NH, int HD) {
    KNEED(rope_backward);
    rope_checks(dev, "rope_backward", dinp, dout, positions, inv_freq, B, T, NH, HD);
    dev->iface->rope_backward(dev, dinp, dout, positions, inv_freq, B, T, NH, HD);
}
void shs_swiglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n) {
    SHS_ASSERT(out && gate && up);
    KNEED(swiglu_forward);
    KRANGE("swiglu_forward", out, n), KRANGE("swiglu_forward", gate, n), KRANGE("swiglu_forward", up, n);
    dev->iface->swiglu_forward(dev, out, gate, up, n);
}
void shs_swiglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, size_t n) {
    SHS_ASSERT(dgate && dup && dout && gate && up);
    KNEED(swiglu_backward);
    KRANGE("swiglu_backward", dgate, n), KRANGE("swiglu_backward", dup, n), KRANGE("swiglu_backward", dout, n);
    KRANGE("swiglu_backward", gate, n), KRANGE("swiglu_backward", up, n);
    dev->iface->swiglu_backward(dev, dgate, dup, dout, gate, up, n);
}
/* The shape checks every GQA kernel shares; NH % NKV != 0 is named on stderr. */
static void gqa_checks(shs_device_t *dev, const char *op, int B, int T, int NH, int NKV, int HD) {
    SHS_ASSERT(B >= 0 && T > 0 && NH > 0 && NKV > 0 && HD > 0);
    if (NH % NKV != 0) {
        fprintf(stderr, "shardsim: %s: %d query heads are not a multiple of %d key/value heads\n", op, NH, NKV);
        SHS_ASSERT(!"attention_gqa: NH % NKV != 0");
    }
}
void shs_attention_gqa_forward(shs_device_t *dev, float *out, float *att, const float *q, const float *k,
                               const float *v, const int32_t *doc_ids, int B, int T, int NH, int NKV, int HD) {
    SHS_ASSERT(out && att && q && k && v);
    KNEED(attention_gqa_forward);
    const char *op = "attention_gqa_forward";
    gqa_checks(dev, op, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, out, nq), KRANGE(op, att, (size_t)B * NH * T * T), KRANGE(op, q, nq), KRANGE(op, k, nkv);
    KRANGE(op, v, nkv), KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_forward(dev, out, att, q, k, v, doc_ids, B, T, NH, NKV, HD);
}
void shs_attention_gqa_backward(shs_device_t *dev, float *dq, float *dk, float *dv, float *datt, const float *dout,
                                const float *q, const float *k, const float *v, const float *att, int B, int T,
                                int NH, int NKV, int HD) {
    SHS_ASSERT(dq && dk && dv && datt && dout && q && k && v && att);
    KNEED(attention_gqa_backward);
    const char *op = "attention_gqa_backward";
    gqa_checks(dev, op, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, ntt = (size_t)B * NH * T * T;
    KRANGE(op, dq, nq), KRANGE(op, dk, nkv), KRANGE(op, dv, nkv), KRANGE(op, datt, ntt), KRANGE(op, dout, nq);
    KRANGE(op, q, nq), KRANGE(op, k, nkv), KRANGE(op, v, nkv), KRANGE(op, att, ntt);
    dev->iface->attention_gqa_backward(dev, dq, dk, dv, datt, dout, q, k, v, att, B, T, NH, NKV, HD);
}
void shs_attention_gqa_forward_flash(shs_device_t *dev, float *out, float *lse, const float *q, const float *k,
                                     const float *v, const int32_t *doc_ids, int B, int T, int NH, int NKV, int HD) {
    SHS_ASSERT(out && lse && q && k && v);
    KNEED(attention_gqa_forward_flash);
    const char *op = "attention_gqa_forward_flash";
    gqa_checks(dev, op, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, out, nq), KRANGE(op, lse, (size_t)B * NH * T), KRANGE(op, q, nq), KRANGE(op, k, nkv);
    KRANGE(op, v, nkv), KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_forward_flash(dev, out, lse, q, k, v, doc_ids, B, T, NH, NKV, HD);
}
void shs_attention_gqa_backward_flash(shs_device_t *dev, float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v, const float *out,
                                      const float *lse, const int32_t *doc_ids, int B, int T, int NH, int NKV,
                                      int HD) {
    SHS_ASSERT(dq && dk && dv && dout && q && k && v && out && lse);
    KNEED(attention_gqa_backward_flash);
    const char *op = "attention_gqa_backward_flash";
    gqa_checks(dev, op, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, dq, nq), KRANGE(op, dk, nkv), KRANGE(op, dv, nkv), KRANGE(op, dout, nq), KRANGE(op, q, nq);
    KRANGE(op, k, nkv), KRANGE(op, v, nkv), KRANGE(op, out, nq), KRANGE(op, lse, (size_t)B * NH * T);
    KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_backward_flash(dev, dq, dk, dv, dout, q, k, v, out, lse, doc_ids, B, T, NH, NKV, HD);
}
#undef KNEED
/* The checks every activation's forward (out = f(inp)) and backward
 * (dinp += f'(inp) * dout) shares. */
static void activation_forward_checks(shs_device_t *dev, const char *op, float *out, const float *inp, size_t n) {
    SHS_ASSERT(out && inp);
    KRANGE(op, out, n), KRANGE(op, inp, n);
}
static void activation_backward_checks(shs_device_t *dev, const char *op, float *dinp, const float *inp,
                                       const float *dout, size_t n) {
    SHS_ASSERT(dinp && inp && dout);
    KRANGE(op, dinp, n), KRANGE(op, inp, n), KRANGE(op, dout, n);
}
void shs_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    activation_forward_checks(dev, "gelu_forward", out, inp, n);
    dev->iface->gelu_forward(dev, out, inp, n);
}
void shs_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    activation_backward_checks(dev, "gelu_backward", dinp, inp, dout, n);
    dev->iface->gelu_backward(dev, dinp, inp, dout, n);
}
void shs_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    activation_forward_checks(dev, "relu_forward", out, inp, n);
    dev->iface->relu_forward(dev, out, inp, n);
}
void shs_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    activation_backward_checks(dev, "relu_backward", dinp, inp, dout, n);
    dev->iface->relu_backward(dev, dinp, inp, dout, n);
}
void shs_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                         const float *wpe, int B, int T, int C) {
    SHS_ASSERT(out && tokens && wte && B >= 0 && T >= 0 && C >= 0);
    SHS_ASSERT((wpe || shs_device_supports(dev, SHS_KERNELS_LLAMA)) && "encoder without wpe needs SHS_KERNELS_LLAMA");
    dev->iface->encoder_forward(dev, out, tokens, wte, wpe, B, T, C);
}
void shs_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C) {
    SHS_ASSERT(dwte && dout && tokens && B >= 0 && T >= 0 && C >= 0);
    SHS_ASSERT((dwpe || shs_device_supports(dev, SHS_KERNELS_LLAMA)) && "encoder without dwpe needs SHS_KERNELS_LLAMA");
    dev->iface->encoder_backward(dev, dwte, dwpe, dout, tokens, B, T, C);
}
void shs_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n) {
    SHS_ASSERT(out && a && b);
    KRANGE("residual_forward", out, n), KRANGE("residual_forward", a, n), KRANGE("residual_forward", b, n);
    dev->iface->residual_forward(dev, out, a, b, n);
}
void shs_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n) {
    SHS_ASSERT(dst && src);
    KRANGE("accumulate", dst, n), KRANGE("accumulate", src, n);
    dev->iface->accumulate(dev, dst, src, n);
}
void shs_scale(shs_device_t *dev, float *x, float alpha, size_t n) {
    SHS_ASSERT(x);
    KRANGE("scale", x, n);
    dev->iface->scale(dev, x, alpha, n);
}
void shs_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                              const int32_t *targets, int BT, int V) {
    SHS_ASSERT(losses && probs && logits && targets && BT >= 0 && V > 0);
    dev->iface->softmax_xent_forward(dev, losses, probs, logits, targets, BT, V);
}
void shs_softmax_xent_backward(shs_device_t *dev, float *dlogits, const float *probs,
                               const int32_t *targets, float dloss, int BT, int V) {
    SHS_ASSERT(dlogits && probs && targets && BT >= 0 && V > 0);
    dev->iface->softmax_xent_backward(dev, dlogits, probs, targets, dloss, BT, V);
}
void shs_sum(shs_device_t *dev, float *out, const float *x, size_t n) {
    SHS_ASSERT(out && (x || !n));
    KRANGE("sum", out, 1), KRANGE("sum", x, n);
    dev->iface->sum(dev, out, x, n);
}
void shs_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p) {
    SHS_ASSERT(acc && (x || !n) && (p == SHS_NORM_INF || p == 1 || p == 2));
    KRANGE("norm_accumulate", x, n);
    dev->iface->norm_accumulate(dev, acc, x, n, p);
}
void shs_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src,
              shs_dtype_t src_dtype, size_t n) {
    SHS_ASSERT(dst && src && shs_dtype_is_float(dst_dtype) && shs_dtype_is_float(src_dtype));
    kernel_range(dev, "cast", "dst", dst, n, shs_dtype_size(dst_dtype));
    kernel_range(dev, "cast", "src", src, n, shs_dtype_size(src_dtype));
    dev->iface->cast(dev, dst, dst_dtype, src, src_dtype, n);
}
void shs_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                      const shs_adamw_hparams_t *hp) {
    SHS_ASSERT(hp && (!n || (param && grad && m && v)));
    KRANGE("adamw_update", param, n), KRANGE("adamw_update", grad, n), KRANGE("adamw_update", m, n),
        KRANGE("adamw_update", v, n);
    dev->iface->adamw_update(dev, param, grad, m, v, n, hp);
}
void shs_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                    float lr, float momentum, float weight_decay) {
    SHS_ASSERT(!n || (param && grad && (momentum_buf || momentum == 0.0f)));
    KRANGE("sgd_update", param, n), KRANGE("sgd_update", grad, n), KRANGE("sgd_update", momentum_buf, n);
    dev->iface->sgd_update(dev, param, grad, momentum_buf, n, lr, momentum, weight_decay);
}
