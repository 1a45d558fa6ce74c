/* test_llama_recompute.c - the activation bytes a Llama layer keeps for
 * backward on the meta backend (what compare measures), against closed
 * forms derived by hand here from what each op saves (llama.h lists it),
 * with and without autocast, per recompute policy; and the matmul FLOPs
 * each policy's recompute adds (what compare's HFU counts) against the
 * recomputed projections and attention.
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
 * drops the eager probabilities (nothing with flash). torchtitan's
 * op-level selective AC keeps, besides the layer output, the outputs of
 * the 1st, 3rd, 5th and 7th bias-free projection (aten.mm, counted per
 * layer: q before RoPE A sbh, v A sb kv, gate A sbI, down_proj A sbh) and,
 * with flash, the attention kernel's (output A sbh, log-sum-exp 4 n s b);
 * with q/k/v biases (aten.addmm, not counted) o_proj A sbh and up A sbI.
 * Every N-th layer: those layers as full recompute, the others as none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "shardsim/device.h"
#include "shardsim/llama.h"
#include "shardsim/meta_run.h"
#include "shardsim/train.h"

typedef struct {
    uint64_t s, b, h, n, nkv, I;
    int bias;                          /* q/k/v biases (Qwen2) */
} shape_t;

/* ACTIVATIONS bytes a Llama of `layers` layers allocates on a meta device. */
static size_t activation_bytes(const shape_t *sh, int layers, const shs_gpt_exec_t *ex) {
    shs_llama_config_t cfg = {.num_layers = layers, .hidden = (int)sh->h, .num_heads = (int)sh->n,
                              .num_kv_heads = (int)sh->nkv, .intermediate = (int)sh->I, .vocab = 64,
                              .max_position = (int)sh->s, .rms_norm_eps = 1e-5f, .rope_theta = 10000.0,
                              .qkv_bias = sh->bias};
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
    {16, 2, 24, 4, 2, 40, 0}, /* GQA */
    {32, 1, 32, 4, 1, 56, 0}, /* MQA */
    {8, 3, 48, 6, 6, 72, 0},  /* MHA */
    {8192, 2, 4096, 32, 8, 14336, 0}, /* Llama 3 8B's layer (its config.json), torchtitan's b = 2, s = 8192 */
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
        fail_msg("s=%llu b=%llu h=%llu n=%llu nkv=%llu I=%llu %s%s: %zu bytes for %d layers, closed form %llu",
                 (unsigned long long)sh->s, (unsigned long long)sh->b, (unsigned long long)sh->h,
                 (unsigned long long)sh->n, (unsigned long long)sh->nkv, (unsigned long long)sh->I,
                 sh->bias ? " biases" : "", what, got, extra,
                 (unsigned long long)want);
}

/* Every policy, f32 and autocast with f32 or 16-bit parameters, eager and
 * flash: none, full and Megatron's selective per layer; op-level (with and
 * without q/k/v biases) per layer; every 2nd and every 3rd layer over two
 * and three more layers (one keeps only its output, the others all). */
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
                uint64_t kv = sh->nkv * (h / n), I = sh->I, attn = flash ? A * s * b * h + 4 * n * s * b : 0;
                shs_gpt_exec_t ex = {.autocast = precisions[p].autocast, .param_dtype = precisions[p].param,
                                     .attention = flash ? SHS_ATTENTION_FLASH : SHS_ATTENTION_EAGER};
                uint64_t layer = full_layer(sh, A, R, flash), out = R * s * b * h;
                check(sh, "none", &ex, 1, 1, layer);
                ex.recompute = SHS_RECOMPUTE_FULL;
                check(sh, "full", &ex, 1, 1, out);
                ex.recompute = SHS_RECOMPUTE_SELECTIVE;
                check(sh, "selective", &ex, 1, 1, flash ? layer : layer - A * n * s * s * b);
                ex.recompute = SHS_RECOMPUTE_SELECTIVE_OP;
                check(sh, "selective-op", &ex, 1, 1, out + 2 * A * s * b * h + A * s * b * kv + A * s * b * I + attn);
                shape_t biased = *sh;
                biased.bias = 1;
                check(&biased, "selective-op, q/k/v biases", &ex, 1, 1, out + A * s * b * h + A * s * b * I + attn);
                ex.recompute = SHS_RECOMPUTE_EVERY_N;
                ex.recompute_every = 2;
                check(sh, "selective-2", &ex, 2, 2, layer + out);
                ex.recompute_every = 3; /* layers 3, 4, 5 added to 0, 1, 2: the 6th (index 5) recomputes */
                check(sh, "selective-3", &ex, 3, 3, 2 * layer + out);
            }
}

/* Matmul FLOPs (forward, backward and recompute) of one training step of a
 * Llama of `sh`'s layer shape with L layers on one meta rank. */
static double step_matmul_flops(const shape_t *sh, int L, shs_recompute_t r, int every, int flash) {
    shs_meta_config_t mc = {.steps = 1};
    mc.train = shs_train_default_config();
    mc.train.arch = SHS_ARCH_LLAMA;
    mc.train.llama = (shs_llama_config_t){.num_layers = L, .hidden = (int)sh->h, .num_heads = (int)sh->n,
                                          .num_kv_heads = (int)sh->nkv, .intermediate = (int)sh->I, .vocab = 256,
                                          .max_position = (int)sh->s, .rms_norm_eps = 1e-5f, .rope_theta = 10000.0,
                                          .qkv_bias = sh->bias};
    mc.train.model.context = (int)sh->s;
    mc.train.micro_batch = (int)sh->b;
    mc.train.world_size = 1;
    mc.train.strategy.kind = SHS_DDP;
    mc.train.device_mem = SIZE_MAX;
    mc.train.recompute = r;
    mc.train.recompute_every = every;
    mc.train.attention = flash ? SHS_ATTENTION_FLASH : SHS_ATTENTION_EAGER;
    shs_meta_result_t res;
    assert_int_equal(shs_meta_run(&mc, &res), SHS_OK);
    double f = (double)res.ranks[0].kernels.matmul_flops;
    shs_meta_result_free(&res);
    return f;
}

/* What each policy recomputes, in matmul FLOPs per step (2 per
 * multiply-add; the attention core as the meta backend counts it: causal
 * pairs b n s(s+1)/2 times 4 HD + 5): full and every N-th layer rerun the
 * layer's 7 projections and the attention core; op-level SAC reruns k,
 * o_proj and up (q, v, gate, down_proj and flash attention are saved; eager
 * attention is not one op); with q/k/v biases (o_proj and up saved) q, k,
 * v and gate (down_proj's output is read by nothing backward needs);
 * Megatron's selective the eager attention core only. */
static void test_recompute_flops(void **state) {
    (void)state;
    const int L = 4;
    for (size_t k = 0; k < 3; k++)
        for (int bias = 0; bias < 2; bias++)
            for (int flash = 0; flash < 2; flash++) {
                shape_t sh = shapes[k];
                sh.bias = bias;
                double bt = (double)sh.s * sh.b, h = (double)sh.h, I = (double)sh.I;
                double kv = (double)sh.nkv * (h / sh.n), hd = h / sh.n;
                double core = (double)sh.b * sh.n * sh.s * (sh.s + 1.0) / 2.0 * (4 * hd + 5);
                double q = 2 * bt * h * h + (bias ? bt * h : 0), kk = 2 * bt * h * kv + (bias ? bt * kv : 0);
                double o = 2 * bt * h * h, mlp = 2 * bt * h * I;
                double layer = q + 2 * kk + o + 3 * mlp + core;
                double none = step_matmul_flops(&sh, L, SHS_RECOMPUTE_NONE, 0, flash);
                struct {
                    const char *what;
                    shs_recompute_t r;
                    int every;
                    double want;
                } rows[] = {
                    {"full", SHS_RECOMPUTE_FULL, 0, L * layer},
                    {"selective-2", SHS_RECOMPUTE_EVERY_N, 2, L / 2 * layer},
                    {"selective-op", SHS_RECOMPUTE_SELECTIVE_OP, 0,
                     L * ((bias ? q + 2 * kk + mlp : kk + o + mlp) + (flash ? 0 : core))},
                    {"selective", SHS_RECOMPUTE_SELECTIVE, 0, flash ? 0 : L * core},
                };
                for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                    double got = step_matmul_flops(&sh, L, rows[r].r, rows[r].every, flash) - none;
                    if (got != rows[r].want)
                        fail_msg("h=%g I=%g%s %s %s: recompute adds %.17g matmul FLOPs, closed form %.17g", h, I,
                                 bias ? " biases" : "", flash ? "flash" : "eager", rows[r].what, got, rows[r].want);
                }
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_forms),
        cmocka_unit_test(test_recompute_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
