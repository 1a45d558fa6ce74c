/* test_llama.c - the Llama model (llama.h) against a float64 reference of
 * Hugging Face LlamaForCausalLM's forward and backward written in plain
 * loops (llama_ref.h), with and without autocast's rounding, against
 * finite differences, and its config functions against hand-computed
 * values. The model runs on the CPU device with a plain parameter source
 * (tests/plain_source.h). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "finite_diff.h"
#include "llama_ref.h"
#include "plain_source.h"
#include "shardsim/llama.h"

/* ---- fixture ------------------------------------------------------------------------ */

typedef struct {
    shs_llama_config_t cfg;
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *m;
    plain_source_t ps;
    shs_gpt_exec_t ex;
    int B, T;
    int32_t *tok, *tgt, *pos, *doc;
} fx_t;

static shs_llama_config_t tiny(int tied, int bias, int nkv) {
    return (shs_llama_config_t){.num_layers = 2, .hidden = 16, .num_heads = 4, .num_kv_heads = nkv,
                                .intermediate = 24, .vocab = 40, .max_position = 64, .rms_norm_eps = 1e-5f,
                                .rope_theta = 10000.0, .tie_word_embeddings = tied, .qkv_bias = bias};
}

/* packed: two documents per row, every 5th target ignored. Positions
 * restart at the cut, the second document's with stride 3: RoPE scores
 * depend only on position differences, so restarting alone would not tell
 * whether the position ids reach the kernels. */
static void fx_init(fx_t *f, shs_llama_config_t cfg, int B, int T, shs_gpt_exec_t ex, int packed) {
    memset(f, 0, sizeof *f);
    f->cfg = cfg;
    f->ex = ex;
    f->B = B;
    f->T = T;
    assert_int_equal(shs_llama_layout_create(&f->lo, &f->cfg), SHS_OK);
    assert_int_equal(shs_device_create_cpu(&f->dev, 0, SIZE_MAX, 1), SHS_OK);
    assert_int_equal(shs_llama_create(&f->m, &f->lo, &f->cfg, f->dev, B, T, &ex), SHS_OK);
    plain_source_init(&f->ps, f->dev, &f->lo, 42, 0.05f);
    size_t bt = (size_t)B * T;
    f->tok = malloc(bt * 4), f->tgt = malloc(bt * 4);
    for (size_t i = 0; i < bt; i++) {
        f->tok[i] = (int32_t)((i * 37 + 11) % (size_t)cfg.vocab);
        f->tgt[i] = (int32_t)((i * 53 + 7) % (size_t)cfg.vocab);
    }
    if (packed) {
        f->pos = malloc(bt * 4), f->doc = malloc(bt * 4);
        for (int b = 0; b < B; b++) {
            int cut = 2 + b; /* document 0 is [0, cut), document 1 the rest */
            for (int t = 0; t < T; t++) {
                f->doc[b * T + t] = t < cut ? 0 : 1;
                f->pos[b * T + t] = t < cut ? t : 3 * (t - cut);
            }
        }
        for (size_t i = 0; i < bt; i += 5) f->tgt[i] = SHS_IGNORE_INDEX;
    }
}
static void fx_free(fx_t *f) {
    shs_model_destroy(f->m);
    plain_source_free(&f->ps);
    shs_device_destroy(f->dev);
    shs_layout_free(&f->lo);
    free(f->tok), free(f->tgt), free(f->pos), free(f->doc);
}
static shs_batch_t fx_batch(const fx_t *f) {
    return (shs_batch_t){.tokens = f->tok, .targets = f->tgt, .positions = f->pos, .doc_ids = f->doc};
}
static float fx_step(fx_t *f) {
    float loss;
    shs_batch_t b = fx_batch(f);
    assert_int_equal(shs_model_forward(f->m, &f->ps.src, &b, &loss), SHS_OK);
    plain_source_zero_grads(&f->ps);
    assert_int_equal(shs_model_backward(f->m, &f->ps.src, 1.0f), SHS_OK);
    return loss;
}
static double fx_loss_cb(void *f) { return fx_step(f); }

/* The model's gradients of every unit, concatenated (host). */
static float *fx_grads(fx_t *f) {
    float *g = malloc(f->lo.num_params * 4);
    size_t off = 0;
    for (int u = 0; u < f->lo.num_units; u++) {
        shs_memcpy_d2h(f->dev, g + off, f->ps.grads[u], f->lo.units[u].numel * 4);
        off += f->lo.units[u].numel;
    }
    return g;
}

/* How far the model's loss and gradients (its last fx_step) are from the
 * reference with autocast dtypes A and R (A = SHS_DTYPE_DEFAULT: none);
 * per tensor the largest gradient error over the tensor's largest
 * reference gradient, the worst of them reported. */
typedef struct {
    double ref_loss, loss_rel, worst;
    const char *worst_name;
    int tensor_failed;                  /* the first tensor above gtol, or -1 */
} ref_diff_t;

static ref_diff_t diff_from_reference(fx_t *f, float loss, shs_dtype_t A, shs_dtype_t R, double gtol) {
    float *inv = malloc((size_t)(f->cfg.hidden / f->cfg.num_heads / 2) * 4);
    shs_llama_inv_freq(&f->cfg, inv);
    int on = A == SHS_BF16 || A == SHS_F16;
    llama_ref_t ref = {.c = &f->cfg, .B = f->B, .T = f->T, .tok = f->tok, .tgt = f->tgt, .pos = f->pos,
                       .doc = f->doc, .inv_freq = inv, .lo = &f->lo, .A = A, .R = R,
                       .round_weights = on && f->ex.param_dtype != A,
                       .flash = f->ex.attention == SHS_ATTENTION_FLASH};
    int NT = f->lo.num_tensors;
    ref.p = calloc((size_t)NT, sizeof(double *));
    ref.g = calloc((size_t)NT, sizeof(double *));
    float *host = malloc(f->lo.num_params * 4);
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        ref.p[i] = calloc(t->numel, sizeof(double));
        ref.g[i] = calloc(t->numel, sizeof(double));
        shs_memcpy_d2h(f->dev, host, f->ps.params[t->unit] + t->offset, t->numel * 4);
        for (size_t k = 0; k < t->numel; k++) ref.p[i][k] = host[k];
    }
    ref_diff_t d = {.ref_loss = llama_ref_run(&ref), .worst_name = "", .tensor_failed = -1};
    d.loss_rel = fabs(loss - d.ref_loss) / fabs(d.ref_loss);
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        shs_memcpy_d2h(f->dev, host, f->ps.grads[t->unit] + t->offset, t->numel * 4);
        double gmax = 0, emax = 0;
        for (size_t k = 0; k < t->numel; k++) {
            gmax = fmax(gmax, fabs(ref.g[i][k]));
            emax = fmax(emax, fabs(host[k] - ref.g[i][k]));
        }
        assert_true(gmax > 0); /* every parameter gets a gradient */
        if (emax / gmax > d.worst) d.worst = emax / gmax, d.worst_name = t->name;
        if (emax > gtol * gmax && d.tensor_failed < 0) d.tensor_failed = i;
        free(ref.p[i]), free(ref.g[i]);
    }
    free(ref.p), free(ref.g), free(host), free(inv);
    return d;
}

/* Model vs reference (with the model's own autocast rounding): loss within
 * `ltol` relative; per tensor, the largest gradient error within `gtol` of
 * the tensor's largest reference gradient. Prints the measured figures. */
static ref_diff_t check_against_reference(fx_t *f, const char *what, double ltol, double gtol) {
    float loss = fx_step(f);
    assert_int_equal(f->ps.acquired, 0);
    assert_int_equal(f->ps.grads_after_ready, 0);
    for (int u = 0; u < f->lo.num_units; u++) assert_int_equal(f->ps.ready[u], 1);
    shs_dtype_t A = f->ex.autocast, R = A && f->ex.param_dtype == A ? A : SHS_DTYPE_DEFAULT;
    ref_diff_t d = diff_from_reference(f, loss, A, R, gtol);
    printf("%s: loss %.9g vs f64 %.9g (rel %.2e); worst gradient rel err %.2e (%s)\n", what, (double)loss, d.ref_loss,
           d.loss_rel, d.worst, d.worst_name);
    if (d.tensor_failed >= 0) fail_msg("%s: %s gradient error above %g of its largest", what,
                                       f->lo.tensors[d.tensor_failed].name, gtol);
    if (!(d.loss_rel <= ltol)) fail_msg("%s: loss relative error %.3g above %g", what, d.loss_rel, ltol);
    return d;
}

static void test_matches_f64_reference_untied_gqa(void **state) {
    (void)state;
    fx_t f;
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){0}, 0);
    check_against_reference(&f, "untied GQA eager", 1e-5, 1e-5);
    fx_free(&f);
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){.attention = SHS_ATTENTION_FLASH}, 0);
    check_against_reference(&f, "untied GQA flash", 1e-5, 1e-5);
    fx_free(&f);
}

static void test_matches_f64_reference_tied_bias_mqa_scaled_rope(void **state) {
    (void)state;
    fx_t f;
    shs_llama_config_t c = tiny(1, 1, 1);
    c.rope_scaling = (shs_rope_scaling_t){SHS_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 32};
    c.rope_theta = 500.0;
    fx_init(&f, c, 2, 8, (shs_gpt_exec_t){0}, 0);
    check_against_reference(&f, "tied qkv_bias MQA llama3-rope eager", 1e-5, 1e-5);
    fx_free(&f);
}

static void test_matches_f64_reference_packed_ignored(void **state) {
    (void)state;
    fx_t f;
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){0}, 1);
    check_against_reference(&f, "packed+ignored eager", 1e-5, 1e-5);
    fx_free(&f);
    fx_init(&f, tiny(0, 1, 4), 2, 8, (shs_gpt_exec_t){.attention = SHS_ATTENTION_FLASH}, 1);
    check_against_reference(&f, "packed+ignored MHA flash", 1e-5, 1e-5);
    fx_free(&f);
}

/* Autocast (bf16, f16; parameters f32 with weights rounded at use, or
 * 16-bit with a 16-bit residual stream; eager and flash): the model
 * against the reference that rounds the same values at the same points
 * (llama.h's list), within the f32 tolerances above tightened for the
 * loss to 1e-6 (measured: <= 4e-8 and <= 9e-7; the f32 arithmetic between
 * roundings may flip a rounding near a tie). The same model against the
 * reference without the rounding is off by more (measured: loss >= 3.7e-6,
 * gradients >= 1.4e-3): the check sees a rounding left out. */
static void test_autocast_matches_rounding_reference(void **state) {
    (void)state;
    static const struct {
        const char *what;
        shs_dtype_t A, param;
        shs_attention_kind_t att;
        int packed, tied, bias;
    } cases[] = {
        {"bf16 autocast, f32 params, eager", SHS_BF16, SHS_DTYPE_DEFAULT, SHS_ATTENTION_EAGER, 0, 0, 0},
        {"bf16 autocast, f32 params, flash, packed", SHS_BF16, SHS_DTYPE_DEFAULT, SHS_ATTENTION_FLASH, 1, 0, 0},
        {"bf16 autocast, bf16 params, eager, tied qkv_bias", SHS_BF16, SHS_BF16, SHS_ATTENTION_EAGER, 0, 1, 1},
        {"f16 autocast, f16 params, flash", SHS_F16, SHS_F16, SHS_ATTENTION_FLASH, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fx_t f;
        shs_gpt_exec_t ex = {.autocast = cases[k].A, .param_dtype = cases[k].param, .attention = cases[k].att};
        fx_init(&f, tiny(cases[k].tied, cases[k].bias, 2), 2, 8, ex, cases[k].packed);
        check_against_reference(&f, cases[k].what, 1e-6, 1e-5);
        float loss;
        shs_batch_t b = fx_batch(&f);
        assert_int_equal(shs_model_forward(f.m, &f.ps.src, &b, &loss), SHS_OK);
        plain_source_zero_grads(&f.ps);
        assert_int_equal(shs_model_backward(f.m, &f.ps.src, 1.0f), SHS_OK);
        ref_diff_t plain = diff_from_reference(&f, loss, SHS_DTYPE_DEFAULT, SHS_DTYPE_DEFAULT, 1.0);
        printf("  without the rounding: loss rel %.2e, worst gradient %.2e (%s)\n", plain.loss_rel, plain.worst,
               plain.worst_name);
        assert_true(plain.loss_rel > 1e-6);
        assert_true(plain.worst > 1e-4);
        fx_free(&f);
    }
}

/* Recompute changes memory, not bits: full, selective, op-level and every
 * 2nd layer give the gradients of none exactly (eager and flash, f32 and
 * bf16 autocast, with and without q/k/v biases: their projections are not
 * the mms op-level SAC saves). */
static void test_recompute_is_bit_identical(void **state) {
    (void)state;
    for (int v = 0; v < 8; v++) {
        int a = v & 1, bias = v >> 2 & 1;
        shs_dtype_t ac = v & 2 ? SHS_BF16 : SHS_DTYPE_DEFAULT;
        float *want = NULL, lw = 0;
        for (int r = SHS_RECOMPUTE_NONE; r <= SHS_RECOMPUTE_EVERY_N; r++) {
            fx_t f;
            shs_llama_config_t c = tiny(0, bias, 2);
            c.num_layers = 3;
            fx_init(&f, c, 2, 8,
                    (shs_gpt_exec_t){.recompute = (shs_recompute_t)r, .recompute_every = 2,
                                     .attention = (shs_attention_kind_t)a, .autocast = ac}, 1);
            float l = fx_step(&f), *g = fx_grads(&f);
            if (!want) {
                want = g, lw = l;
            } else {
                assert_memory_equal(&l, &lw, sizeof l);
                assert_memory_equal(g, want, f.lo.num_params * 4);
                free(g);
            }
            fx_free(&f);
        }
        free(want);
    }
}

/* The analytic gradient against central differences of the model's own
 * f32 loss, for a few elements of every tensor. Tolerance as test_model.c's:
 * 2e-3 relative + 2e-4, set by the f32 loss's rounding over steps of 5e-3. */
static void test_gradient_matches_finite_differences(void **state) {
    (void)state;
    fx_t f;
    fx_init(&f, tiny(0, 1, 2), 2, 6, (shs_gpt_exec_t){0}, 1);
    fx_step(&f);
    float *g = fx_grads(&f);
    size_t *base = calloc((size_t)f.lo.num_units, sizeof(size_t));
    for (int u = 1; u < f.lo.num_units; u++) base[u] = base[u - 1] + f.lo.units[u - 1].numel;
    int checked = 0;
    for (int ti = 0; ti < f.lo.num_tensors; ti++) {
        const shs_tensor_info_t *t = &f.lo.tensors[ti];
        for (size_t k = 0; k < 3 && k < t->numel; k++) {
            size_t e = t->offset + (k * 7919 + 5) % t->numel;
            double num = fd_derivative(f.dev, f.ps.params[t->unit] + e, fx_loss_cb, &f);
            double ana = g[base[t->unit] + e], tol = 2e-3 * fmax(fabs(num), 1e-2) + 2e-4;
            if (fabs(ana - num) > tol) fail_msg("%s[%zu]: analytic %.6g vs numeric %.6g", t->name, e - t->offset, ana, num);
            checked++;
        }
    }
    assert_true(checked > 40);
    free(g), free(base);
    fx_free(&f);
}

/* Backward protocol: grads_ready in reverse unit order, head first, the
 * embedding last (tied: its one grads_ready sums both uses). */
static void test_grads_ready_order(void **state) {
    (void)state;
    for (int tied = 0; tied < 2; tied++) {
        fx_t f;
        fx_init(&f, tiny(tied, 0, 2), 1, 4, (shs_gpt_exec_t){0}, 0);
        fx_step(&f);
        int U = f.lo.num_units;
        assert_int_equal(U, 2 + 2 + !tied);
        assert_int_equal(f.ps.num_ready, U);
        for (int i = 0; i < U; i++) assert_int_equal(f.ps.ready_order[i], U - 1 - i);
        fx_free(&f);
    }
}

/* ---- config functions ----------------------------------------------------------- */

/* Llama-2-7B (HF config.json: hidden 4096, 32 layers, 32 heads, 32 kv
 * heads, intermediate 11008, vocab 32000, untied): 6,738,415,616 published. */
static void test_num_params_llama2_7b(void **state) {
    (void)state;
    shs_llama_config_t c = {.num_layers = 32, .hidden = 4096, .num_heads = 32, .num_kv_heads = 32,
                            .intermediate = 11008, .vocab = 32000, .max_position = 4096, .rms_norm_eps = 1e-5f,
                            .rope_theta = 10000.0};
    assert_true(shs_llama_num_params(&c) == 6738415616ull);
    /* the layout's count equals the formula for tiny shapes of every kind */
    for (int k = 0; k < 4; k++) {
        shs_llama_config_t t = tiny(k & 1, k >> 1, k & 1 ? 1 : 2);
        shs_layout_t lo;
        assert_int_equal(shs_llama_layout_create(&lo, &t), SHS_OK);
        uint64_t C = 16, I = 24, V = 40, KVD = (uint64_t)t.num_kv_heads * 4;
        uint64_t hand = 2 * (2 * C + 2 * C * C + 2 * C * KVD + 3 * C * I + (t.qkv_bias ? C + 2 * KVD : 0)) + V * C +
                        C + (t.tie_word_embeddings ? 0 : V * C);
        assert_true(lo.num_params == hand);
        assert_true(shs_llama_num_params(&t) == hand);
        shs_layout_free(&lo);
    }
}

/* HF tensor names, shapes and init (weights N(0, 0.02), norms 1, biases 0). */
static void test_layout_names_and_init(void **state) {
    (void)state;
    shs_llama_config_t c = tiny(0, 1, 2);
    c.num_layers = 1;
    c.hidden = 64, c.intermediate = 96;
    shs_layout_t lo;
    assert_int_equal(shs_llama_layout_create(&lo, &c), SHS_OK);
    const char *want[] = {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                          "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                          "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.q_proj.bias",
                          "model.layers.0.self_attn.k_proj.bias", "model.layers.0.self_attn.v_proj.bias",
                          "model.layers.0.self_attn.o_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                          "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                          "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"};
    int rows[] = {40, 64, 64, 32, 32, 64, 32, 32, 64, 64, 96, 96, 64, 64, 40};
    assert_int_equal(lo.num_tensors, 15);
    assert_string_equal(lo.units[0].name, "embed");
    assert_string_equal(lo.units[1].name, "layer0");
    assert_string_equal(lo.units[2].name, "norm");
    assert_string_equal(lo.units[3].name, "lm_head");
    for (int i = 0; i < 15; i++) {
        const shs_tensor_info_t *t = &lo.tensors[i];
        assert_string_equal(t->name, want[i]);
        assert_int_equal(t->rows, rows[i]);
        float *v = malloc(t->numel * 4);
        shs_layout_init_range(&lo, 3, t->unit, t->offset, t->offset + t->numel, v);
        double s = 0, s2 = 0;
        for (size_t k = 0; k < t->numel; k++) s += v[k], s2 += (double)v[k] * v[k];
        double sd = sqrt(s2 / (double)t->numel - (s / t->numel) * (s / t->numel));
        if (strstr(t->name, "norm")) for (size_t k = 0; k < t->numel; k++) assert_true(v[k] == 1.0f);
        else if (strstr(t->name, "bias")) for (size_t k = 0; k < t->numel; k++) assert_true(v[k] == 0.0f);
        else if (fabs(sd - 0.02) > 0.002) fail_msg("%s: sd %g, want 0.02", t->name, sd);
        free(v);
    }
    shs_layout_free(&lo);
    /* a three-digit layer's longest name fits whole */
    c.num_layers = 126;
    c.hidden = 8, c.num_heads = 2, c.num_kv_heads = 1, c.intermediate = 8;
    assert_int_equal(shs_llama_layout_create(&lo, &c), SHS_OK);
    assert_int_equal(llama_ref_tensor(&lo, "model.layers.125.post_attention_layernorm.weight") >= 0, 1);
    shs_layout_free(&lo);
}

/* inv_freq by hand (python f64, 1/theta^(2i/HD), then HF's llama3 rule
 * with factor 8, low 1, high 4, original context 8192: wavelengths below
 * 2048 kept, above 8192 divided by 8, between blended). theta 1e6, HD 8:
 * base 1, 0.0316227766, 0.001, 3.16227766e-05; wavelengths 6.28, 198.7,
 * 6283.2 (blended: smooth = (8192/6283.185 - 1)/3 = 0.1012658), 198692
 * (divided). */
static void test_inv_freq_llama3(void **state) {
    (void)state;
    shs_llama_config_t c = tiny(0, 0, 2);
    c.hidden = 8, c.num_heads = 1, c.num_kv_heads = 1, c.rope_theta = 1e6;
    float f[4];
    shs_llama_inv_freq(&c, f);
    assert_true(f[0] == 1.0f && f[1] == (float)0.031622776601683794 && f[2] == (float)0.001 &&
                f[3] == (float)3.1622776601683795e-05);
    c.rope_scaling = (shs_rope_scaling_t){SHS_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 8192};
    shs_llama_inv_freq(&c, f);
    assert_true(f[0] == 1.0f && f[1] == (float)0.031622776601683794);
    /* (1 - s)/8 * 0.001f + s * 0.001f with s = 0.10126579 (0.001f as f64): 2.1360757e-4 */
    assert_float_equal(f[2], 2.1360757e-4, 2e-10);
    assert_true(f[3] == (float)((double)(float)3.1622776601683795e-05 / 8.0));
}

static void test_config_and_exec_refusals(void **state) {
    (void)state;
    struct { void (*edit)(shs_llama_config_t *); const char *field; } cases[] = {
        {(void (*)(shs_llama_config_t *))0, NULL},
    };
    (void)cases;
    shs_llama_config_t c = tiny(0, 0, 3);
    assert_int_equal(shs_llama_config_validate(&c), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "num_key_value_heads"));
    c = tiny(0, 0, 2);
    c.num_heads = 8; /* head dim 2: even, fine */
    assert_int_equal(shs_llama_config_validate(&c), SHS_OK);
    c.num_heads = 16; /* head dim 1: odd */
    assert_int_equal(shs_llama_config_validate(&c), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "num_attention_heads"));
    c = tiny(0, 0, 2);
    c.rms_norm_eps = 0;
    assert_int_equal(shs_llama_config_validate(&c), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "rms_norm_eps"));
    c = tiny(0, 0, 2);
    c.rope_scaling = (shs_rope_scaling_t){SHS_ROPE_SCALING_LLAMA3, 8.0, 4.0, 1.0, 8192};
    assert_int_equal(shs_llama_config_validate(&c), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "low_freq_factor"));
    /* dropout, an autocast dtype that is not 16-bit and a too-long context are refused by name */
    c = tiny(0, 0, 2);
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *m;
    assert_int_equal(shs_llama_layout_create(&lo, &c), SHS_OK);
    assert_int_equal(shs_device_create_cpu(&dev, 0, SIZE_MAX, 1), SHS_OK);
    assert_int_equal(shs_llama_create(&m, &lo, &c, dev, 1, 8, &(shs_gpt_exec_t){.autocast = SHS_F64}), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "autocast"));
    assert_int_equal(shs_llama_create(&m, &lo, &c, dev, 1, 8, &(shs_gpt_exec_t){.dropout = 0.1f}), SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "dropout"));
    assert_int_equal(shs_llama_create(&m, &lo, &c, dev, 1, 65, &(shs_gpt_exec_t){0}), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "max_position_embeddings"));
    c.tie_word_embeddings = 1; /* the layout has an lm_head unit this config lacks */
    assert_int_equal(shs_llama_create(&m, &lo, &c, dev, 1, 8, &(shs_gpt_exec_t){0}), SHS_INVALID_ARG);
    assert_null(m);
    shs_device_destroy(dev);
    shs_layout_free(&lo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_f64_reference_untied_gqa),
        cmocka_unit_test(test_matches_f64_reference_tied_bias_mqa_scaled_rope),
        cmocka_unit_test(test_matches_f64_reference_packed_ignored),
        cmocka_unit_test(test_autocast_matches_rounding_reference),
        cmocka_unit_test(test_recompute_is_bit_identical),
        cmocka_unit_test(test_gradient_matches_finite_differences),
        cmocka_unit_test(test_grads_ready_order),
        cmocka_unit_test(test_num_params_llama2_7b),
        cmocka_unit_test(test_layout_names_and_init),
        cmocka_unit_test(test_inv_freq_llama3),
        cmocka_unit_test(test_config_and_exec_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
