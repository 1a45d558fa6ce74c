/* llama_fixture.c - the Llama test fixture (llama_fixture.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "finite_diff.h"
#include "model/llama_fixture.h"
#include "model/llama_ref.h"

static double *dz(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* packed: two documents per row, every 5th target ignored. Positions
 * restart at the cut, the second document's with stride 3: RoPE scores
 * depend only on position differences, so restarting alone would not tell
 * whether the position ids reach the kernels. */
void fx_init(fx_t *f, shs_llama_config_t cfg, int B, int T, shs_gpt_exec_t ex, int packed) {
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
void fx_free(fx_t *f) {
    shs_model_destroy(f->m);
    plain_source_free(&f->ps);
    shs_device_destroy(f->dev);
    shs_layout_free(&f->lo);
    free(f->tok), free(f->tgt), free(f->pos), free(f->doc);
}
shs_batch_t fx_batch(const fx_t *f) {
    return (shs_batch_t){.tokens = f->tok, .targets = f->tgt, .positions = f->pos, .doc_ids = f->doc};
}
float fx_step(fx_t *f) {
    float loss;
    shs_batch_t b = fx_batch(f);
    assert_int_equal(shs_model_forward(f->m, &f->ps.src, &b, &loss), SHS_OK);
    plain_source_zero_grads(&f->ps);
    assert_int_equal(shs_model_backward(f->m, &f->ps.src, 1.0f), SHS_OK);
    return loss;
}
double fx_loss_cb(void *f) { return fx_step(f); }

/* The model's gradients of every unit, concatenated (host). */
float *fx_grads(fx_t *f) {
    float *g = malloc(f->lo.num_params * 4);
    size_t off = 0;
    for (int u = 0; u < f->lo.num_units; u++) {
        shs_memcpy_d2h(f->dev, g + off, f->ps.grads[u], f->lo.units[u].numel * 4);
        off += f->lo.units[u].numel;
    }
    return g;
}

int fx_check_finite_differences(fx_t *f, const char *what) {
    fx_step(f);
    float *g = fx_grads(f);
    size_t *base = calloc((size_t)f->lo.num_units, sizeof(size_t));
    for (int u = 1; u < f->lo.num_units; u++) base[u] = base[u - 1] + f->lo.units[u - 1].numel;
    int checked = 0;
    for (int ti = 0; ti < f->lo.num_tensors; ti++) {
        const shs_tensor_info_t *t = &f->lo.tensors[ti];
        for (size_t k = 0; k < 3 && k < t->numel; k++) {
            size_t e = t->offset + (k * 7919 + 5) % t->numel;
            double num = fd_derivative(f->dev, f->ps.params[t->unit] + e, fx_loss_cb, f);
            double ana = g[base[t->unit] + e], tol = 2e-3 * fmax(fabs(num), 1e-2) + 2e-4;
            if (fabs(ana - num) > tol)
                fail_msg("%s %s[%zu]: analytic %.6g vs numeric %.6g", what, t->name, e - t->offset, ana, num);
            checked++;
        }
    }
    free(g), free(base);
    return checked;
}

/* The step's invariants of the plain source: nothing held, every unit ready once. */
static float checked_step(fx_t *f) {
    float loss = fx_step(f);
    assert_int_equal(f->ps.acquired, 0);
    assert_int_equal(f->ps.grads_after_ready, 0);
    for (int u = 0; u < f->lo.num_units; u++) assert_int_equal(f->ps.ready[u], 1);
    return loss;
}

ref_diff_t diff_from_reference(fx_t *f, const shs_llama_config_t *ref_cfg, float loss, shs_dtype_t A, shs_dtype_t R,
                               double gtol) {
    int half = shs_llama_rotary_dim(ref_cfg) / 2, on = A == SHS_BF16 || A == SHS_F16;
    float *inv = malloc((size_t)half * 3 * 4);
    shs_llama_inv_freq(ref_cfg, SHS_ROPE_FREQ_GLOBAL, inv);
    shs_llama_inv_freq(ref_cfg, SHS_ROPE_FREQ_LOCAL, inv + half);
    shs_llama_inv_freq(ref_cfg, SHS_ROPE_FREQ_LONG, inv + 2 * half);
    llama_ref_t ref = {.c = ref_cfg, .lo = &f->lo, .B = f->B, .T = f->T, .tok = f->tok, .tgt = f->tgt, .pos = f->pos,
                       .doc = f->doc, .inv_global = inv, .inv_local = inv + half, .inv_long = inv + 2 * half, .A = A,
                       .R = R, .round_weights = on && f->ex.param_dtype != A,
                       .flash = f->ex.attention == SHS_ATTENTION_FLASH};
    int NT = f->lo.num_tensors;
    ref.p = calloc((size_t)NT, sizeof(double *));
    ref.g = calloc((size_t)NT, sizeof(double *));
    float *host = malloc(f->lo.num_params * 4);
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        ref.p[i] = dz(t->numel);
        ref.g[i] = dz(t->numel);
        shs_memcpy_d2h(f->dev, host, f->ps.params[t->unit] + t->offset, t->numel * 4);
        for (size_t k = 0; k < t->numel; k++) ref.p[i][k] = host[k];
    }
    ref_diff_t d = {.ref_loss = llama_ref_run(&ref), .worst_name = "", .tensor_failed = -1};
    d.loss_rel = fabs(loss - d.ref_loss) / fabs(d.ref_loss);
    double num = 0, den = 0;
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        shs_memcpy_d2h(f->dev, host, f->ps.grads[t->unit] + t->offset, t->numel * 4);
        double gmax = 0, emax = 0;
        for (size_t k = 0; k < t->numel; k++) {
            gmax = fmax(gmax, fabs(ref.g[i][k]));
            emax = fmax(emax, fabs(host[k] - ref.g[i][k]));
            num += (host[k] - ref.g[i][k]) * (host[k] - ref.g[i][k]), den += ref.g[i][k] * ref.g[i][k];
        }
        if (!(gmax > 0)) fail_msg("%s: no gradient in the reference", t->name); /* every parameter gets one */
        if (emax / gmax > d.worst) d.worst = emax / gmax, d.worst_name = t->name;
        if (emax > gtol * gmax && d.tensor_failed < 0) d.tensor_failed = i;
        free(ref.p[i]), free(ref.g[i]);
    }
    d.all_rel = sqrt(num / den);
    free(ref.p), free(ref.g), free(host), free(inv);
    return d;
}

ref_diff_t check_against_reference(fx_t *f, const char *what, double ltol, double gtol) {
    float loss = checked_step(f);
    shs_dtype_t A = f->ex.autocast, R = A && f->ex.param_dtype == A ? A : SHS_DTYPE_DEFAULT;
    ref_diff_t d = diff_from_reference(f, &f->cfg, loss, A, R, gtol);
    printf("%s: loss %.9g vs f64 %.9g (rel %.2e); worst gradient rel err %.2e (%s)\n", what, (double)loss, d.ref_loss,
           d.loss_rel, d.worst, d.worst_name);
    if (d.tensor_failed >= 0)
        fail_msg("%s: %s gradient error above %g of its largest", what, f->lo.tensors[d.tensor_failed].name, gtol);
    if (!(d.loss_rel <= ltol)) fail_msg("%s: loss relative error %.3g above %g", what, d.loss_rel, ltol);
    return d;
}

ref_diff_t check_autocast_against_reference(fx_t *f, const char *what, double ltol, double gtol) {
    check_against_reference(f, what, ltol, gtol);
    float loss = fx_step(f);
    ref_diff_t plain = diff_from_reference(f, &f->cfg, loss, SHS_DTYPE_DEFAULT, SHS_DTYPE_DEFAULT, 1.0);
    printf("  without the rounding: loss rel %.2e, worst gradient %.2e (%s)\n", plain.loss_rel, plain.worst,
           plain.worst_name);
    return plain;
}

double compare_with_reference(fx_t *f, const shs_llama_config_t *ref_cfg, double gtol, const char *what,
                              double *loss_rel) {
    float loss = checked_step(f);
    ref_diff_t d = diff_from_reference(f, ref_cfg, loss, SHS_DTYPE_DEFAULT, SHS_DTYPE_DEFAULT, gtol > 0 ? gtol : 1e300);
    printf("%s: loss %.9g vs f64 %.9g (rel %.2e); worst gradient rel err %.2e (%s)\n", what, (double)loss, d.ref_loss,
           d.loss_rel, d.worst, d.worst_name);
    if (gtol > 0 && d.tensor_failed >= 0)
        fail_msg("%s: %s gradient error above %g of its largest", what, f->lo.tensors[d.tensor_failed].name, gtol);
    *loss_rel = d.loss_rel;
    return d.worst;
}
