/* test_llama_activations.c - the activation bytes a Llama layer keeps for
 * backward on the meta backend (what compare measures), against closed
 * forms derived by hand here from what each op saves (llama.h lists it),
 * with and without autocast, per recompute policy.
 *
 * Per layer, with b sequences, s positions, h = hidden, n = heads, kv =
 * key/value width (NKV*HD), I = intermediate, A the activation width (2
 * under autocast, else 4), R the residual's (A when the parameters are A,
 * else 4), m1 = 3 and m2 = 2 when A < R (autocast casts the f32 norm output
 * once per projection that reads it: q, k, v; gate, up), else 1:
 *   RMSNorm statistics           2 x 4 sb
 *   norm outputs (linear inputs) A (m1 + m2) sbh
 *   q (rotated), attention out   2 A sbh
 *   k (rotated), v               2 A sb kv
 *   res2, the layer output       2 R sbh
 *   gate, up, SwiGLU output      3 A sbI
 *   eager: probabilities A n s^2 b; flash: log-sum-exp 4 n s b
 * Full recompute keeps the layer output only (R sbh); Megatron's selective
 * drops the eager probabilities (nothing with flash).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "shardsim/device.h"
#include "shardsim/llama.h"

typedef struct {
    uint64_t s, b, h, n, nkv, I;
} shape_t;

/* ACTIVATIONS bytes a Llama of `layers` layers allocates on a meta device. */
static size_t activation_bytes(const shape_t *sh, int layers, const shs_gpt_exec_t *ex) {
    shs_llama_config_t cfg = {.num_layers = layers, .hidden = (int)sh->h, .num_heads = (int)sh->n,
                              .num_kv_heads = (int)sh->nkv, .intermediate = (int)sh->I, .vocab = 64,
                              .max_position = (int)sh->s, .rms_norm_eps = 1e-5f, .rope_theta = 10000.0};
    shs_device_t *dev = NULL;
    assert_int_equal(shs_device_create_meta(&dev, 0, SIZE_MAX), SHS_OK);
    shs_layout_t lo;
    assert_int_equal(shs_llama_layout_create(&lo, &cfg), SHS_OK);
    shs_model_t *m = NULL;
    assert_int_equal(shs_llama_create(&m, &lo, &cfg, dev, (int)sh->b, (int)sh->s, ex), SHS_OK);
    shs_mem_stats_t st;
    shs_device_mem_stats(dev, &st);
    shs_model_destroy(m);
    shs_layout_free(&lo);
    shs_device_destroy(dev);
    return st.current[SHS_MEM_ACTIVATIONS];
}

/* What `extra` more layers add (everything shared cancels). */
static size_t added_bytes(const shape_t *sh, int base, int extra, const shs_gpt_exec_t *ex) {
    return activation_bytes(sh, base + extra, ex) - activation_bytes(sh, base, ex);
}

static const shape_t shapes[] = {
    {16, 2, 24, 4, 2, 40}, /* GQA */
    {32, 1, 32, 4, 1, 56}, /* MQA */
    {8, 3, 48, 6, 6, 72},  /* MHA */
};

/* The closed form above for a layer that keeps everything. */
static uint64_t full_layer(const shape_t *sh, uint64_t A, uint64_t R, int flash) {
    uint64_t s = sh->s, b = sh->b, h = sh->h, n = sh->n, kv = sh->nkv * (h / n), I = sh->I;
    uint64_t m1 = A < R ? 3 : 1, m2 = A < R ? 2 : 1;
    uint64_t core = flash ? 4 * n * s * b : A * n * s * s * b;
    return 8 * s * b + A * (m1 + m2) * s * b * h + 2 * A * s * b * h + 2 * A * s * b * kv + 2 * R * s * b * h +
           3 * A * s * b * I + core;
}

static void check(const shape_t *sh, const char *what, const shs_gpt_exec_t *ex, int base, int extra, uint64_t want) {
    size_t got = added_bytes(sh, base, extra, ex);
    if (got != want)
        fail_msg("s=%llu b=%llu h=%llu n=%llu nkv=%llu I=%llu %s: %zu bytes for %d layers, closed form %llu",
                 (unsigned long long)sh->s, (unsigned long long)sh->b, (unsigned long long)sh->h,
                 (unsigned long long)sh->n, (unsigned long long)sh->nkv, (unsigned long long)sh->I, what, got, extra,
                 (unsigned long long)want);
}

/* No recompute, full and Megatron's selective, f32 and autocast with f32
 * or 16-bit parameters, eager and flash. */
static void test_layer_forms(void **state) {
    (void)state;
    static const struct {
        shs_dtype_t autocast, param;
        uint64_t A, R;
    } precisions[] = {
        {SHS_DTYPE_DEFAULT, SHS_DTYPE_DEFAULT, 4, 4},
        {SHS_BF16, SHS_DTYPE_DEFAULT, 2, 4},
        {SHS_BF16, SHS_BF16, 2, 2},
        {SHS_F16, SHS_F16, 2, 2},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (size_t p = 0; p < sizeof precisions / sizeof precisions[0]; p++)
            for (int flash = 0; flash < 2; flash++) {
                const shape_t *sh = &shapes[k];
                uint64_t A = precisions[p].A, R = precisions[p].R, s = sh->s, b = sh->b, h = sh->h, n = sh->n;
                shs_gpt_exec_t ex = {.autocast = precisions[p].autocast, .param_dtype = precisions[p].param,
                                     .attention = flash ? SHS_ATTENTION_FLASH : SHS_ATTENTION_EAGER};
                uint64_t layer = full_layer(sh, A, R, flash);
                check(sh, "none", &ex, 1, 1, layer);
                ex.recompute = SHS_RECOMPUTE_FULL;
                check(sh, "full", &ex, 1, 1, R * s * b * h);
                ex.recompute = SHS_RECOMPUTE_SELECTIVE;
                check(sh, "selective", &ex, 1, 1, flash ? layer : layer - A * n * s * s * b);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
