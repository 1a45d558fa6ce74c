/* test_llama.c - the Llama model (llama.h) against a float64 reference of
 * Hugging Face LlamaForCausalLM's forward and backward written here in
 * plain loops (RMSNorm, rotate_half RoPE, grouped-query causal attention
 * with per-document masks, SwiGLU, mean cross-entropy over counted
 * targets), against finite differences, and its config functions against
 * hand-computed values. The model runs on the CPU device with a plain
 * parameter source (tests/plain_source.h). */
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
#include "plain_source.h"
#include "shardsim/llama.h"

/* ---- the float64 reference ------------------------------------------------------ */

typedef struct {
    const shs_llama_config_t *c;
    int B, T;
    const int32_t *tok, *tgt, *pos, *doc;
    const float *inv_freq;          /* HD/2, as the model uses (checked separately) */
    double **p;                     /* per tensor of the layout, by index */
    double **g;                     /* their gradients (out) */
    const shs_layout_t *lo;
} ref_t;

static int tensor_index(const shs_layout_t *lo, const char *name) {
    for (int i = 0; i < lo->num_tensors; i++)
        if (strcmp(lo->tensors[i].name, name) == 0) return i;
    fail_msg("no tensor named %s", name);
    return -1;
}
static int layer_tensor(const shs_layout_t *lo, int l, const char *suffix) {
    char n[96];
    snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);
    return tensor_index(lo, n);
}

/* out (N,OC) = in (N,K) W(OC,K)^T + b */
static void lin(double *out, const double *in, const double *W, const double *b, int N, int K, int OC) {
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < K; k++) s += in[(size_t)r * K + k] * W[(size_t)o * K + k];
            out[(size_t)r * OC + o] = s;
        }
}
/* din += dout W; dW += dout^T in; db += colsum dout */
static void lin_back(double *din, double *dW, double *db, const double *dout, const double *in, const double *W, int N,
                     int K, int OC) {
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double d = dout[(size_t)r * OC + o];
            if (db) db[o] += d;
            for (int k = 0; k < K; k++) {
                din[(size_t)r * K + k] += d * W[(size_t)o * K + k];
                dW[(size_t)o * K + k] += d * in[(size_t)r * K + k];
            }
        }
}
static void rms(double *out, double *r, const double *x, const double *w, int N, int C, double eps) {
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += x[(size_t)i * C + c] * x[(size_t)i * C + c];
        r[i] = 1.0 / sqrt(s / C + eps);
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = x[(size_t)i * C + c] * r[i] * w[c];
    }
}
static void rms_back(double *dx, double *dw, const double *dout, const double *x, const double *r, const double *w,
                     int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *xi = x + (size_t)i * C, *di = dout + (size_t)i * C;
        double dot = 0;
        for (int c = 0; c < C; c++) {
            dot += di[c] * w[c] * xi[c];
            dw[c] += di[c] * xi[c] * r[i];
        }
        for (int c = 0; c < C; c++) dx[(size_t)i * C + c] += r[i] * w[c] * di[c] - xi[c] * r[i] * r[i] * r[i] * dot / C;
    }
}
/* x (N rows of H heads of HD) rotated by pos * inv_freq; sign -1: the inverse */
static void rope(double *x, const ref_t *R, int H, int sign) {
    int HD = R->c->hidden / R->c->num_heads, h2 = HD / 2;
    for (int bt = 0; bt < R->B * R->T; bt++) {
        double p = R->pos ? R->pos[bt] : bt % R->T;
        for (int h = 0; h < H; h++) {
            double *v = x + ((size_t)bt * H + h) * HD;
            for (int i = 0; i < h2; i++) {
                double a = p * (double)R->inv_freq[i], cs = cos(a), sn = sign * sin(a);
                double x0 = v[i], x1 = v[i + h2];
                v[i] = x0 * cs - x1 * sn;
                v[i + h2] = x1 * cs + x0 * sn;
            }
        }
    }
}
static int allowed(const ref_t *R, int b, int t, int t2) {
    return t2 <= t && (!R->doc || R->doc[b * R->T + t2] == R->doc[b * R->T + t]);
}

typedef struct {
    double *x, *r1, *n1, *q, *k, *v, *P, *y, *h, *r2, *n2, *g, *u, *a;
} ref_layer_t;

static double *dz(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* Forward and backward of the mean loss; gradients into R->g. Returns the loss. */
static double ref_run(ref_t *R) {
    const shs_llama_config_t *c = R->c;
    const shs_layout_t *lo = R->lo;
    int B = R->B, T = R->T, N = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = C / NH;
    int KVD = NKV * HD, I = c->intermediate, V = c->vocab, L = c->num_layers, grp = NH / NKV;
    double eps = c->rms_norm_eps, scale = 1.0 / sqrt((double)HD);
    int te = tensor_index(lo, "model.embed_tokens.weight"), tn = tensor_index(lo, "model.norm.weight");
    int th = c->tie_word_embeddings ? te : tensor_index(lo, "lm_head.weight");
    ref_layer_t *S = calloc((size_t)L, sizeof *S);
    double *x = dz((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) x[(size_t)i * C + ch] = R->p[te][(size_t)R->tok[i] * C + ch];
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        int bias = c->qkv_bias;
        s->x = x;
        s->r1 = dz(N), s->n1 = dz((size_t)N * C), s->q = dz((size_t)N * C), s->k = dz((size_t)N * KVD);
        s->v = dz((size_t)N * KVD), s->P = dz((size_t)B * NH * T * T), s->y = dz((size_t)N * C);
        s->h = dz((size_t)N * C), s->r2 = dz(N), s->n2 = dz((size_t)N * C), s->g = dz((size_t)N * I);
        s->u = dz((size_t)N * I), s->a = dz((size_t)N * I);
        rms(s->n1, s->r1, x, R->p[layer_tensor(lo, l, "input_layernorm.weight")], N, C, eps);
        lin(s->q, s->n1, R->p[layer_tensor(lo, l, "self_attn.q_proj.weight")],
            bias ? R->p[layer_tensor(lo, l, "self_attn.q_proj.bias")] : NULL, N, C, C);
        lin(s->k, s->n1, R->p[layer_tensor(lo, l, "self_attn.k_proj.weight")],
            bias ? R->p[layer_tensor(lo, l, "self_attn.k_proj.bias")] : NULL, N, C, KVD);
        lin(s->v, s->n1, R->p[layer_tensor(lo, l, "self_attn.v_proj.weight")],
            bias ? R->p[layer_tensor(lo, l, "self_attn.v_proj.bias")] : NULL, N, C, KVD);
        rope(s->q, R, NH, 1);
        rope(s->k, R, NKV, 1);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < T; t++) {
                    double *P = s->P + (((size_t)b * NH + hh) * T + t) * T, m = -INFINITY, z = 0;
                    const double *q = s->q + ((size_t)(b * T + t) * NH + hh) * HD;
                    for (int t2 = 0; t2 < T; t2++) {
                        if (!allowed(R, b, t, t2)) continue;
                        const double *k = s->k + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double d = 0;
                        for (int i = 0; i < HD; i++) d += q[i] * k[i];
                        P[t2] = d * scale;
                        m = fmax(m, P[t2]);
                    }
                    for (int t2 = 0; t2 < T; t2++) z += allowed(R, b, t, t2) ? exp(P[t2] - m) : 0;
                    for (int t2 = 0; t2 < T; t2++) P[t2] = allowed(R, b, t, t2) ? exp(P[t2] - m) / z : 0;
                    double *y = s->y + ((size_t)(b * T + t) * NH + hh) * HD;
                    for (int t2 = 0; t2 < T; t2++) {
                        const double *v = s->v + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        for (int i = 0; i < HD; i++) y[i] += P[t2] * v[i];
                    }
                }
        lin(s->h, s->y, R->p[layer_tensor(lo, l, "self_attn.o_proj.weight")], NULL, N, C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) s->h[i] += x[i];
        rms(s->n2, s->r2, s->h, R->p[layer_tensor(lo, l, "post_attention_layernorm.weight")], N, C, eps);
        lin(s->g, s->n2, R->p[layer_tensor(lo, l, "mlp.gate_proj.weight")], NULL, N, C, I);
        lin(s->u, s->n2, R->p[layer_tensor(lo, l, "mlp.up_proj.weight")], NULL, N, C, I);
        for (size_t i = 0; i < (size_t)N * I; i++) s->a[i] = s->g[i] / (1 + exp(-s->g[i])) * s->u[i];
        double *xn = dz((size_t)N * C);
        lin(xn, s->a, R->p[layer_tensor(lo, l, "mlp.down_proj.weight")], NULL, N, I, C);
        for (size_t i = 0; i < (size_t)N * C; i++) xn[i] += s->h[i];
        x = xn;
    }
    double *rf = dz(N), *nf = dz((size_t)N * C), *logits = dz((size_t)N * V);
    rms(nf, rf, x, R->p[tn], N, C, eps);
    lin(logits, nf, R->p[th], NULL, N, C, V);
    int count = 0;
    for (int i = 0; i < N; i++) count += R->tgt[i] != SHS_IGNORE_INDEX;
    double loss = 0;
    double *dlog = dz((size_t)N * V);
    for (int i = 0; i < N; i++) {
        if (R->tgt[i] == SHS_IGNORE_INDEX) continue;
        double *lg = logits + (size_t)i * V, m = -INFINITY, z = 0;
        for (int v = 0; v < V; v++) m = fmax(m, lg[v]);
        for (int v = 0; v < V; v++) z += exp(lg[v] - m);
        loss += m + log(z) - lg[R->tgt[i]];
        for (int v = 0; v < V; v++) dlog[(size_t)i * V + v] = (exp(lg[v] - m) / z - (v == R->tgt[i])) / count;
    }
    loss = count ? loss / count : 0;
    /* backward */
    double *dnf = dz((size_t)N * C), *dx = dz((size_t)N * C);
    double *scratch_w = R->g[th];
    lin_back(dnf, scratch_w, NULL, dlog, nf, R->p[th], N, C, V);
    rms_back(dx, R->g[tn], dnf, x, rf, R->p[tn], N, C);
    for (int l = L - 1; l >= 0; l--) {
        ref_layer_t *s = &S[l];
        int bias = c->qkv_bias;
        double *da = dz((size_t)N * I), *dg = dz((size_t)N * I), *du = dz((size_t)N * I), *dn2 = dz((size_t)N * C);
        double *dh = dz((size_t)N * C), *dy = dz((size_t)N * C), *dq = dz((size_t)N * C), *dk = dz((size_t)N * KVD);
        double *dv = dz((size_t)N * KVD), *dn1 = dz((size_t)N * C);
        lin_back(da, R->g[layer_tensor(lo, l, "mlp.down_proj.weight")], NULL, dx, s->a,
                 R->p[layer_tensor(lo, l, "mlp.down_proj.weight")], N, I, C);
        for (size_t i = 0; i < (size_t)N * I; i++) {
            double sg = 1 / (1 + exp(-s->g[i])), silu = s->g[i] * sg;
            dg[i] = da[i] * s->u[i] * sg * (1 + s->g[i] * (1 - sg));
            du[i] = da[i] * silu;
        }
        lin_back(dn2, R->g[layer_tensor(lo, l, "mlp.gate_proj.weight")], NULL, dg, s->n2,
                 R->p[layer_tensor(lo, l, "mlp.gate_proj.weight")], N, C, I);
        lin_back(dn2, R->g[layer_tensor(lo, l, "mlp.up_proj.weight")], NULL, du, s->n2,
                 R->p[layer_tensor(lo, l, "mlp.up_proj.weight")], N, C, I);
        memcpy(dh, dx, (size_t)N * C * sizeof(double));
        rms_back(dh, R->g[layer_tensor(lo, l, "post_attention_layernorm.weight")], dn2, s->h, s->r2,
                 R->p[layer_tensor(lo, l, "post_attention_layernorm.weight")], N, C);
        lin_back(dy, R->g[layer_tensor(lo, l, "self_attn.o_proj.weight")], NULL, dh, s->y,
                 R->p[layer_tensor(lo, l, "self_attn.o_proj.weight")], N, C, C);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < T; t++) {
                    const double *P = s->P + (((size_t)b * NH + hh) * T + t) * T;
                    const double *dyr = dy + ((size_t)(b * T + t) * NH + hh) * HD;
                    const double *q = s->q + ((size_t)(b * T + t) * NH + hh) * HD;
                    double *dqr = dq + ((size_t)(b * T + t) * NH + hh) * HD;
                    double dP[256], sum = 0;
                    for (int t2 = 0; t2 < T; t2++) {
                        const double *v = s->v + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double *dvr = dv + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        dP[t2] = 0;
                        for (int i = 0; i < HD; i++) {
                            dP[t2] += dyr[i] * v[i];
                            dvr[i] += P[t2] * dyr[i];
                        }
                        sum += P[t2] * dP[t2];
                    }
                    for (int t2 = 0; t2 < T; t2++) {
                        double dS = P[t2] * (dP[t2] - sum) * scale;
                        const double *k = s->k + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double *dkr = dk + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        for (int i = 0; i < HD; i++) {
                            dqr[i] += dS * k[i];
                            dkr[i] += dS * q[i];
                        }
                    }
                }
        rope(dq, R, NH, -1);
        rope(dk, R, NKV, -1);
        lin_back(dn1, R->g[layer_tensor(lo, l, "self_attn.q_proj.weight")],
                 bias ? R->g[layer_tensor(lo, l, "self_attn.q_proj.bias")] : NULL, dq, s->n1,
                 R->p[layer_tensor(lo, l, "self_attn.q_proj.weight")], N, C, C);
        lin_back(dn1, R->g[layer_tensor(lo, l, "self_attn.k_proj.weight")],
                 bias ? R->g[layer_tensor(lo, l, "self_attn.k_proj.bias")] : NULL, dk, s->n1,
                 R->p[layer_tensor(lo, l, "self_attn.k_proj.weight")], N, C, KVD);
        lin_back(dn1, R->g[layer_tensor(lo, l, "self_attn.v_proj.weight")],
                 bias ? R->g[layer_tensor(lo, l, "self_attn.v_proj.bias")] : NULL, dv, s->n1,
                 R->p[layer_tensor(lo, l, "self_attn.v_proj.weight")], N, C, KVD);
        memcpy(dx, dh, (size_t)N * C * sizeof(double));
        rms_back(dx, R->g[layer_tensor(lo, l, "input_layernorm.weight")], dn1, s->x, s->r1,
                 R->p[layer_tensor(lo, l, "input_layernorm.weight")], N, C);
        free(da), free(dg), free(du), free(dn2), free(dh), free(dy), free(dq), free(dk), free(dv), free(dn1);
    }
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) R->g[te][(size_t)R->tok[i] * C + ch] += dx[(size_t)i * C + ch];
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        double *bufs[] = {s->x, s->r1, s->n1, s->q, s->k, s->v, s->P, s->y, s->h, s->r2, s->n2, s->g, s->u, s->a};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    free(x), free(rf), free(nf), free(logits), free(dlog), free(dnf), free(dx), free(S);
    return loss;
}

/* ---- fixture ------------------------------------------------------------------------ */

typedef struct {
    shs_llama_config_t cfg;
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *m;
    plain_source_t ps;
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

/* Model vs reference: loss within 1e-5 relative; per tensor, the largest
 * gradient error within `gtol` of the tensor's largest reference
 * gradient. Prints the measured figures. */
static void check_against_reference(fx_t *f, const char *what, double gtol) {
    float loss = fx_step(f);
    assert_int_equal(f->ps.acquired, 0);
    assert_int_equal(f->ps.grads_after_ready, 0);
    for (int u = 0; u < f->lo.num_units; u++) assert_int_equal(f->ps.ready[u], 1);
    float *inv = malloc((size_t)(f->cfg.hidden / f->cfg.num_heads / 2) * 4);
    shs_llama_inv_freq(&f->cfg, inv);
    ref_t R = {.c = &f->cfg, .B = f->B, .T = f->T, .tok = f->tok, .tgt = f->tgt, .pos = f->pos, .doc = f->doc,
               .inv_freq = inv, .lo = &f->lo};
    int NT = f->lo.num_tensors;
    R.p = calloc((size_t)NT, sizeof(double *));
    R.g = calloc((size_t)NT, sizeof(double *));
    float *host = malloc(f->lo.num_params * 4);
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        R.p[i] = dz(t->numel);
        R.g[i] = dz(t->numel);
        shs_memcpy_d2h(f->dev, host, f->ps.params[t->unit] + t->offset, t->numel * 4);
        for (size_t k = 0; k < t->numel; k++) R.p[i][k] = host[k];
    }
    double ref_loss = ref_run(&R);
    double loss_rel = fabs(loss - ref_loss) / fabs(ref_loss), worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < NT; i++) {
        const shs_tensor_info_t *t = &f->lo.tensors[i];
        shs_memcpy_d2h(f->dev, host, f->ps.grads[t->unit] + t->offset, t->numel * 4);
        double gmax = 0, emax = 0;
        for (size_t k = 0; k < t->numel; k++) {
            gmax = fmax(gmax, fabs(R.g[i][k]));
            emax = fmax(emax, fabs(host[k] - R.g[i][k]));
        }
        assert_true(gmax > 0); /* every parameter gets a gradient */
        if (emax / gmax > worst) worst = emax / gmax, worst_name = t->name;
        if (emax > gtol * gmax) fail_msg("%s: %s gradient error %.3g of its largest %.3g", what, t->name, emax, gmax);
        free(R.p[i]), free(R.g[i]);
    }
    printf("%s: loss %.9g vs f64 %.9g (rel %.2e); worst gradient rel err %.2e (%s)\n", what, (double)loss, ref_loss,
           loss_rel, worst, worst_name);
    assert_true(loss_rel <= 1e-5);
    free(R.p), free(R.g), free(host), free(inv);
}

static void test_matches_f64_reference_untied_gqa(void **state) {
    (void)state;
    fx_t f;
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){0}, 0);
    check_against_reference(&f, "untied GQA eager", 1e-5);
    fx_free(&f);
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){.attention = SHS_ATTENTION_FLASH}, 0);
    check_against_reference(&f, "untied GQA flash", 1e-5);
    fx_free(&f);
}

static void test_matches_f64_reference_tied_bias_mqa_scaled_rope(void **state) {
    (void)state;
    fx_t f;
    shs_llama_config_t c = tiny(1, 1, 1);
    c.rope_scaling = (shs_rope_scaling_t){SHS_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 32};
    c.rope_theta = 500.0;
    fx_init(&f, c, 2, 8, (shs_gpt_exec_t){0}, 0);
    check_against_reference(&f, "tied qkv_bias MQA llama3-rope eager", 1e-5);
    fx_free(&f);
}

static void test_matches_f64_reference_packed_ignored(void **state) {
    (void)state;
    fx_t f;
    fx_init(&f, tiny(0, 0, 2), 2, 8, (shs_gpt_exec_t){0}, 1);
    check_against_reference(&f, "packed+ignored eager", 1e-5);
    fx_free(&f);
    fx_init(&f, tiny(0, 1, 4), 2, 8, (shs_gpt_exec_t){.attention = SHS_ATTENTION_FLASH}, 1);
    check_against_reference(&f, "packed+ignored MHA flash", 1e-5);
    fx_free(&f);
}

/* Recompute changes memory, not bits: full and selective give the
 * gradients of none exactly (eager and flash). */
static void test_recompute_is_bit_identical(void **state) {
    (void)state;
    for (int a = 0; a < 2; a++) {
        float *want = NULL, lw = 0;
        for (int r = 0; r < 3; r++) {
            fx_t f;
            fx_init(&f, tiny(0, 0, 2), 2, 8,
                    (shs_gpt_exec_t){.recompute = (shs_recompute_t)r, .attention = (shs_attention_kind_t)a}, 1);
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
    assert_int_equal(tensor_index(&lo, "model.layers.125.post_attention_layernorm.weight") >= 0, 1);
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
    /* autocast, dropout and a too-long context are refused by name */
    c = tiny(0, 0, 2);
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *m;
    assert_int_equal(shs_llama_layout_create(&lo, &c), SHS_OK);
    assert_int_equal(shs_device_create_cpu(&dev, 0, SIZE_MAX, 1), SHS_OK);
    assert_int_equal(shs_llama_create(&m, &lo, &c, dev, 1, 8, &(shs_gpt_exec_t){.autocast = SHS_BF16}), SHS_UNSUPPORTED);
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
