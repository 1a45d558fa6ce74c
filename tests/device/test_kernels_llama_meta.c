/* test_kernels_llama_meta.c - the Llama-family kernels' contract beyond
 * their values (which are test_kernels_llama.c's): the same bits at any
 * thread count (bit for bit), which backends have them (SHS_KERNELS_LLAMA),
 * argument errors that abort, and the meta device's FLOP and byte counts against the closed forms of
 * device_meta.c's header, recomputed here by hand (plain, and with the
 * decoder extensions: partial / scaled RoPE, GeGLU, soft caps, windows).
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/kernel_checks.h"
#include "device/device_impl.h"
#include "shardsim/device.h"

/* ---- thread-count invariance ------------------------------------------------------------ */

/* Every kernel gives the same bits at 1 and 3 threads (T = 150: flash's
 * blocks; several rows and column blocks everywhere); the attention kernels
 * plain and with a window of 40, a soft cap and a scale, the RoPE full and
 * partial with an mscale. */
static void test_thread_count_bits(void **state) {
    seed(41);
    enum { B = 2, T = 150, NH = 4, NKV = 2, HD = 8, NR = 40, C = 40 };
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    size_t nrow = (size_t)B * NH * T, nrms = (size_t)NR * C;
    float *q = hf(nq), *k = hf(nkv), *v = hf(nkv), *dy = hf(nq), *inv = hf(HD / 2), *w = hf(C);
    fill_wide(q, nq), fill_wide(k, nkv), fill_wide(v, nkv), fill_wide(dy, nq), fill(inv, HD / 2, 0, 1), fill(w, C, 0, 2);
    int32_t doc[B * T];
    for (int i = 0; i < B * T; i++) doc[i] = i / 37;
    const shs_attention_opts_t opts[2] = {{0}, {.scale = 0.5f, .softcap = 3.0f, .window = 40}};
    enum { NATT = 10, NRES = 2 * NATT + 10 };
    float *res[2][NRES];
    size_t len[NRES];
    for (int kk = 0; kk < 2; kk++) {
        shs_device_t *d = new_dev(kk ? 3 : 1);
        float *d_q = dput(d, q, nq), *d_k = dput(d, k, nkv), *d_v = dput(d, v, nkv), *d_dy = dput(d, dy, nq);
        int32_t *d_doc = dput_i32(d, doc, (size_t)B * T), *d_pos = d_doc; /* positions: any int32 */
        float *d_inv = dput(d, inv, HD / 2), *d_w = dput(d, w, C);
        float *o[NRES];
        size_t sz[NRES] = {nq, natt, nq, nkv, nkv, nq, nrow, nq, nkv, nkv};
        for (int i = 0; i < NATT; i++) sz[NATT + i] = sz[i];
        size_t rest[10] = {nrms, NR, nrms, C, nq, nq, nq, nkv, nq, nq};
        for (int i = 0; i < 10; i++) sz[2 * NATT + i] = rest[i];
        for (int i = 0; i < NRES; i++) o[i] = dnew(d, sz[i]), zero(d, o[i], sz[i] * sizeof(float)), len[i] = sz[i];
        for (int a = 0; a < 2; a++) {
            float **x = o + a * NATT;
            const shs_attention_opts_t *op = &opts[a];
            shs_attention_gqa_forward(d, x[0], x[1], d_q, d_k, d_v, d_doc, op, B, T, NH, NKV, HD);
            shs_attention_gqa_backward(d, x[2], x[3], x[4], dnew(d, natt), d_dy, d_q, d_k, d_v, x[1], op, B, T, NH,
                                       NKV, HD);
            shs_attention_gqa_forward_flash(d, x[5], x[6], d_q, d_k, d_v, d_doc, op, B, T, NH, NKV, HD);
            shs_attention_gqa_backward_flash(d, x[7], x[8], x[9], d_dy, d_q, d_k, d_v, x[5], x[6], d_doc, op, B, T, NH,
                                             NKV, HD);
        }
        float **x = o + 2 * NATT;
        shs_rmsnorm_forward(d, x[0], x[1], d_q, d_w, NR, C, 1e-5f);
        shs_rmsnorm_backward(d, x[2], x[3], d_dy, d_q, d_w, x[1], NR, C);
        shs_rope_forward(d, x[4], d_q, d_pos, &(shs_rope_t){d_inv, 0, 0}, B, T, NH, HD);
        shs_rope_backward(d, x[4], d_dy, NULL, &(shs_rope_t){d_inv, 0, 0}, B, T, NH, HD);
        shs_rope_forward(d, x[5], d_q, d_pos, &(shs_rope_t){d_inv, HD / 2, 1.3f}, B, T, NH, HD);
        shs_rope_backward(d, x[5], d_dy, d_pos, &(shs_rope_t){d_inv, HD / 2, 1.3f}, B, T, NH, HD);
        shs_swiglu_forward(d, x[6], d_q, d_dy, nq);
        shs_swiglu_backward(d, x[6], x[7], d_dy, d_q, d_k, nkv);
        shs_geglu_forward(d, x[8], d_q, d_dy, nq);
        shs_geglu_backward(d, x[8], x[9], d_dy, d_q, d_k, nkv);
        shs_softcap_forward(d, x[7], x[7], 0.75f, nkv);
        shs_softcap_backward(d, x[9], d_dy, x[7], 0.75f, nkv);
        for (int i = 0; i < NRES; i++) res[kk][i] = fetch(d, o[i], sz[i]);
    }
    for (int i = 0; i < NRES; i++) {
        char what[32];
        snprintf(what, sizeof what, "output %d", i);
        check_bits(what, res[1][i], res[0][i], len[i]);
    }
}

/* ---- which backends have the kernels; argument errors abort ---------------------------- */

static void test_supports(void **state) {
    assert_true(shs_device_supports(new_dev(1), SHS_KERNELS_LLAMA));
    shs_device_t *m = NULL;
    assert_int_equal(shs_device_create_meta(&m, 0, SIZE_MAX), SHS_OK);
    assert_true(shs_device_supports(m, SHS_KERNELS_LLAMA));
    shs_device_destroy(m);
    /* a backend missing any one of them (as the CUDA backend's vtable) does not */
    static shs_device_iface_t bare;
    bare = shs__cpu_iface;
    bare.name = "bare";
    bare.attention_gqa_backward_flash = NULL;
    shs_device_t *d = NULL;
    assert_int_equal(shs__device_new(&d, &bare, NULL, 0, SIZE_MAX, 1), SHS_OK);
    assert_false(shs_device_supports(d, SHS_KERNELS_LLAMA));
    assert_true(shs_device_supports(d, SHS_KERNELS_FLASH_ATTENTION));
    shs_device_destroy(d);
    static shs_device_iface_t no_softcap;
    no_softcap = shs__cpu_iface;
    no_softcap.softcap_backward = NULL;
    assert_int_equal(shs__device_new(&d, &no_softcap, NULL, 0, SIZE_MAX, 1), SHS_OK);
    assert_false(shs_device_supports(d, SHS_KERNELS_LLAMA));
    shs_device_destroy(d);
}

/* Runs f in a child process with stderr discarded; asserts it aborted. */
static void expect_abort(const char *what, void (*f)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        f();
        _exit(0); /* did not abort */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) fail_msg("%s: did not abort (status %d)", what, status);
}

static shs_device_t *abort_dev(void) {
    shs_device_t *d = NULL;
    SHS_ASSERT(shs_device_create_cpu(&d, 0, SIZE_MAX, 1) == SHS_OK);
    return d;
}
static float *abort_buf(shs_device_t *d, size_t n) {
    void *p = NULL;
    SHS_ASSERT(shs_device_alloc(d, &p, n * sizeof(float), SHS_MEM_OTHER, "t") == SHS_OK);
    memset(p, 0, n * sizeof(float));
    return p;
}
static void rope_odd_hd(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64);
    shs_rope_forward(d, x, x, NULL, &(shs_rope_t){x, 0, 0}, 1, 2, 2, 5);
}
static void gqa_bad_groups(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_forward(d, x, x + 512, x, x, x, NULL, NULL, 1, 2, 4, 3, 4);
}
static void gqa_flash_bad_groups(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_backward_flash(d, x, x, x, x, x, x, x, x, x, NULL, NULL, 1, 2, 3, 2, 4);
}
static void rmsnorm_short_weight(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64), *w = abort_buf(d, 4);
    shs_rmsnorm_forward(d, x, x, x, w, 2, 8, 1e-5f); /* weight has 4 of C = 8 */
}
static void encoder_no_wpe_on_bare(void) {
    static shs_device_iface_t bare;
    bare = shs__cpu_iface;
    bare.rmsnorm_forward = NULL;
    shs_device_t *d = NULL;
    SHS_ASSERT(shs__device_new(&d, &bare, NULL, 0, SIZE_MAX, 1) == SHS_OK);
    float *x = abort_buf(d, 64);
    int32_t *tok = (int32_t *)abort_buf(d, 4);
    shs_encoder_forward(d, x, tok, x, NULL, 1, 2, 4);
}

static void rope_odd_rot_dim(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64);
    shs_rope_forward(d, x, x, NULL, &(shs_rope_t){x, 3, 0}, 1, 2, 2, 8);
}
static void rope_rot_dim_over_hd(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64);
    shs_rope_backward(d, x, x, NULL, &(shs_rope_t){x, 10, 0}, 1, 2, 2, 8);
}
static void gqa_negative_window(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_forward_flash(d, x, x + 512, x, x, x, NULL, &(shs_attention_opts_t){.window = -1}, 1, 2, 4, 2, 4);
}
static void gqa_nan_softcap(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 1024);
    shs_attention_gqa_backward(d, x, x, x, x, x, x, x, x, x, &(shs_attention_opts_t){.softcap = NAN}, 1, 2, 4, 2, 4);
}
static void softcap_zero_cap(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64);
    shs_softcap_forward(d, x, x, 0.0f, 64);
}
static void geglu_short_up(void) {
    shs_device_t *d = abort_dev();
    float *x = abort_buf(d, 64), *u = abort_buf(d, 8);
    shs_geglu_forward(d, x, x, u, 64);
}

static void test_argument_errors_abort(void **state) {
    expect_abort("rope rot_dim odd", rope_odd_rot_dim);
    expect_abort("rope rot_dim > HD", rope_rot_dim_over_hd);
    expect_abort("gqa window < 0", gqa_negative_window);
    expect_abort("gqa softcap NaN", gqa_nan_softcap);
    expect_abort("softcap cap 0", softcap_zero_cap);
    expect_abort("geglu up too short", geglu_short_up);
    expect_abort("rope HD odd", rope_odd_hd);
    expect_abort("gqa NH % NKV", gqa_bad_groups);
    expect_abort("gqa flash NH % NKV", gqa_flash_bad_groups);
    expect_abort("rmsnorm weight too short", rmsnorm_short_weight);
    expect_abort("encoder without wpe on a backend without SHS_KERNELS_LLAMA", encoder_no_wpe_on_bare);
}

/* ---- meta counts: device_meta.c's closed forms, by hand ------------------------------- */

static void meta_expect(shs_device_t *m, shs_kernel_stats_t *prev, const char *what, double flops, double bytes,
                        int matmul) {
    shs_kernel_stats_t k;
    assert_int_equal(shs_device_kernel_stats(m, &k), SHS_OK);
    if (k.kernels != prev->kernels + 1) fail_msg("%s: %llu kernels", what, (unsigned long long)(k.kernels - prev->kernels));
    if (k.flops - prev->flops != (uint64_t)flops)
        fail_msg("%s: flops %llu, want %.0f", what, (unsigned long long)(k.flops - prev->flops), flops);
    if (k.bytes - prev->bytes != (uint64_t)bytes)
        fail_msg("%s: bytes %llu, want %.0f", what, (unsigned long long)(k.bytes - prev->bytes), bytes);
    uint64_t mm = k.matmul_flops - prev->matmul_flops;
    if (mm != (matmul ? (uint64_t)flops : 0)) fail_msg("%s: matmul flops %llu", what, (unsigned long long)mm);
    *prev = k;
}

static void test_meta_counts(void **state) {
    shs_device_t *m = NULL;
    assert_int_equal(shs_device_create_meta(&m, 0, SIZE_MAX), SHS_OK);
    shs_kernel_stats_t s = {0};
    enum { B = 2, T = 6, NH = 4, NKV = 2, HD = 8, N = 12, C = 32 };
    float *x = dalloc(m, 1 << 16), *y = dalloc(m, 1 << 16), *z = dalloc(m, 1 << 16), *w = dalloc(m, 1 << 16);
    int32_t *ip = dalloc(m, 1 << 10);
    /* rmsnorm: n = 384 */
    shs_rmsnorm_forward(m, y, z, x, w, N, C, 1e-5f);
    meta_expect(m, &s, "rmsnorm_forward", 4 * 384 + 3 * 12, 4 * (2 * 384 + 32 + 12), 0);
    shs_rmsnorm_backward(m, y, z, x, x, w, z, N, C);
    meta_expect(m, &s, "rmsnorm_backward", 11 * 384, 4 * (4 * 384 + 3 * 32 + 12), 0);
    /* rope: n = B T NH HD = 384, pairs 192 */
    shs_rope_forward(m, y, x, NULL, &(shs_rope_t){w, 0, 0}, B, T, NH, HD);
    meta_expect(m, &s, "rope_forward", 192 * 9, 4 * (2 * 384 + 4), 0);
    shs_rope_forward(m, y, x, ip, &(shs_rope_t){w, 0, 0}, B, T, NH, HD);
    meta_expect(m, &s, "rope_forward positions", 192 * 9, 4 * (2 * 384 + 4 + 12), 0);
    shs_rope_backward(m, y, x, ip, &(shs_rope_t){w, 0, 0}, B, T, NH, HD);
    meta_expect(m, &s, "rope_backward", 192 * 11, 4 * (3 * 384 + 4 + 12), 0);
    shs_swiglu_forward(m, y, x, z, 1000);
    meta_expect(m, &s, "swiglu_forward", 4000, 12000, 0);
    shs_swiglu_backward(m, y, z, x, x, w, 1000);
    meta_expect(m, &s, "swiglu_backward", 13000, 28000, 0);
    /* attention: causal pairs B NH T (T+1) / 2 = 2*4*21 = 168; nq = 384, nkv = 192,
     * B NH T T = 288, B NH T = 48, B T = 12 */
    shs_attention_gqa_forward(m, y, z, x, x, x, NULL, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288), 1);
    shs_attention_gqa_forward(m, y, z, x, x, x, ip, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward docs", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288 + 12), 1);
    shs_attention_gqa_backward(m, y, y, y, z, x, x, x, x, x, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward", 168 * (8 * 8 + 4), 4 * (4 * 384 + 6 * 192 + 3 * 288), 1);
    shs_attention_gqa_forward_flash(m, y, z, x, x, x, ip, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward_flash", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 48 + 12), 1);
    shs_attention_gqa_backward_flash(m, y, y, y, x, x, x, x, x, x, NULL, NULL, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward_flash", 168 * (10 * 8 + 4) + 48 * 2 * 8, 4 * (5 * 384 + 6 * 192 + 48), 1);
    /* encoder: B T C = 12 * 32 = 384 */
    shs_encoder_forward(m, y, ip, x, NULL, 2, 6, 32);
    meta_expect(m, &s, "encoder_forward no wpe", 0, 4 * (2 * 384 + 12), 0);
    shs_encoder_forward(m, y, ip, x, w, 2, 6, 32);
    meta_expect(m, &s, "encoder_forward", 384, 4 * (3 * 384 + 12), 0);
    shs_encoder_backward(m, y, NULL, x, ip, 2, 6, 32);
    meta_expect(m, &s, "encoder_backward no dwpe", 384, 4 * (3 * 384 + 12), 0);
    shs_device_destroy(m);
}

/* The counts of the decoder extensions, by hand: RoPE on R = 4 of HD = 8
 * channels with mscale 1.5 (nr = B T NH R = 192 of n = 384); GeGLU and the
 * soft cap on 1000 elements; attention with a window W = 4 < T = 6 (per
 * (b, h) 1+2+3+4+4+4 = 18 pairs: B NH 18 = 144 = B NH (W(W+1)/2 + (T-W)W))
 * and with a soft cap. */
static void test_meta_counts_decoder(void **state) {
    shs_device_t *m = NULL;
    assert_int_equal(shs_device_create_meta(&m, 0, SIZE_MAX), SHS_OK);
    shs_kernel_stats_t s = {0};
    enum { B = 2, T = 6, NH = 4, NKV = 2, HD = 8 };
    float *x = dalloc(m, 1 << 16), *y = dalloc(m, 1 << 16), *z = dalloc(m, 1 << 16), *w = dalloc(m, 1 << 16);
    int32_t *ip = dalloc(m, 1 << 10);
    const shs_rope_t part = {w, 4, 1.5f};
    shs_rope_forward(m, y, x, NULL, &part, B, T, NH, HD);
    meta_expect(m, &s, "rope_forward partial", 4.5 * 192 + 192, 4 * (2 * 384 + 2), 0);
    shs_rope_backward(m, y, x, ip, &part, B, T, NH, HD);
    meta_expect(m, &s, "rope_backward partial", 5.5 * 192 + 192 + (384 - 192), 4 * (3 * 384 + 2 + 12), 0);
    shs_rope_forward(m, y, x, NULL, &(shs_rope_t){w, 0, 1.0f}, B, T, NH, HD); /* mscale 1: no extra */
    meta_expect(m, &s, "rope_forward mscale 1", 4.5 * 384, 4 * (2 * 384 + 4), 0);
    shs_geglu_forward(m, y, x, z, 1000);
    meta_expect(m, &s, "geglu_forward", 11000, 12000, 0);
    shs_geglu_backward(m, y, z, x, x, w, 1000);
    meta_expect(m, &s, "geglu_backward", 31000, 28000, 0);
    shs_softcap_forward(m, y, x, 30.0f, 1000);
    meta_expect(m, &s, "softcap_forward", 3000, 8000, 0);
    shs_softcap_backward(m, y, x, y, 30.0f, 1000);
    meta_expect(m, &s, "softcap_backward", 6000, 12000, 0);
    /* nq = 384, nkv = 192, B NH T T = 288, B NH T = 48, B T = 12 */
    const shs_attention_opts_t win = {.window = 4}, cap = {.softcap = 50.0f}, both = {.softcap = 50.0f, .window = 4};
    shs_attention_gqa_forward(m, y, z, x, x, x, NULL, &win, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward window", 144 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288), 1);
    shs_attention_gqa_forward(m, y, z, x, x, x, NULL, &(shs_attention_opts_t){.window = 6}, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward window = T", 168 * (4 * 8 + 5), 4 * (2 * 384 + 2 * 192 + 288), 1);
    shs_attention_gqa_forward(m, y, z, x, x, x, NULL, &cap, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward softcap", 168 * (4 * 8 + 5 + 3), 4 * (2 * 384 + 2 * 192 + 288), 1);
    shs_attention_gqa_backward(m, y, y, y, z, x, x, x, x, x, &both, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward both", 144 * (8 * 8 + 4 + 2 * 8 + 6), 4 * (4 * 384 + 6 * 192 + 3 * 288), 1);
    shs_attention_gqa_forward_flash(m, y, z, x, x, x, ip, &both, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_forward_flash both", 144 * (4 * 8 + 5 + 3), 4 * (2 * 384 + 2 * 192 + 48 + 12), 1);
    shs_attention_gqa_backward_flash(m, y, y, y, x, x, x, x, x, x, NULL, &win, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward_flash window", 144 * (10 * 8 + 4) + 48 * 2 * 8, 4 * (5 * 384 + 6 * 192 + 48), 1);
    shs_attention_gqa_backward_flash(m, y, y, y, x, x, x, x, x, x, NULL, &cap, B, T, NH, NKV, HD);
    meta_expect(m, &s, "gqa_backward_flash softcap", 168 * (10 * 8 + 4 + 6) + 48 * 2 * 8,
                4 * (5 * 384 + 6 * 192 + 48), 1);
    shs_device_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_thread_count_bits, teardown),
        cmocka_unit_test_teardown(test_supports, teardown),
        cmocka_unit_test_teardown(test_argument_errors_abort, teardown),
        cmocka_unit_test_teardown(test_meta_counts, teardown),
        cmocka_unit_test_teardown(test_meta_counts_decoder, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
