/* llama_ref.c - the float64 reference of llama_ref.h. Legend: N = B*T rows,
 * C hidden, NH heads, NKV key/value heads, HD head dim, QD = NH*HD, KVD =
 * NKV*HD, R rotary dim, I intermediate, V vocabulary, L layers. */
#include "model/llama_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *dz(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) abort();
    return p;
}

int llama_ref_tensor(const shs_layout_t *lo, const char *name) {
    for (int i = 0; i < lo->num_tensors; i++)
        if (strcmp(lo->tensors[i].name, name) == 0) return i;
    return -1;
}
static int tensor_index(const shs_layout_t *lo, const char *name) {
    int i = llama_ref_tensor(lo, name);
    if (i >= 0) return i;
    fprintf(stderr, "llama_ref: no tensor named %s\n", name);
    abort();
}

/* x (n) rounded to dt (bf16 or f16) from its f32 value; other dtypes: unchanged. */
static void rnd(double *x, size_t n, shs_dtype_t dt) {
    for (size_t i = 0; i < n && (dt == SHS_BF16 || dt == SHS_F16); i++) {
        float f = (float)x[i];
        x[i] = dt == SHS_BF16 ? shs_bf16_to_f32(shs_f32_to_bf16(f)) : shs_f16_to_f32(shs_f32_to_f16(f));
    }
}

/* ---- the pieces --------------------------------------------------------------------- */

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
/* RMSNorm of N rows of C: out = x r wt, r = 1/sqrt(mean x^2 + eps), wt = w or 1 + w */
static void rms(double *out, double *r, const double *x, const double *w, int plus1, int N, int C, double eps) {
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int c = 0; c < C; c++) s += x[(size_t)i * C + c] * x[(size_t)i * C + c];
        r[i] = 1.0 / sqrt(s / C + eps);
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = x[(size_t)i * C + c] * r[i] * (plus1 + w[c]);
    }
}
/* dx += d(out)/dx^T dy, dw += dy x r (d r / d x_j = -r^3 x_j / C) */
static void rms_back(double *dx, double *dw, const double *dy, const double *x, const double *r, const double *w,
                     int plus1, int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *xi = x + (size_t)i * C, *di = dy + (size_t)i * C;
        double dot = 0;
        for (int c = 0; c < C; c++) {
            dot += di[c] * (plus1 + w[c]) * xi[c];
            dw[c] += di[c] * xi[c] * r[i];
        }
        for (int c = 0; c < C; c++)
            dx[(size_t)i * C + c] += r[i] * (plus1 + w[c]) * di[c] - xi[c] * r[i] * r[i] * r[i] * dot / C;
    }
}
/* x (N rows of H heads of HD), the first R channels rotated by pos * inv,
 * cos and sin times m; sign -1: the transpose (backward) */
static void rope(double *x, const llama_ref_t *Rf, const float *inv, double m, int H, int HD, int R, int sign) {
    int h2 = R / 2;
    for (int bt = 0; bt < Rf->B * Rf->T; bt++) {
        double p = Rf->pos ? Rf->pos[bt] : bt % Rf->T;
        for (int h = 0; h < H; h++) {
            double *v = x + ((size_t)bt * H + h) * HD;
            for (int i = 0; i < h2; i++) {
                double a = p * (double)inv[i], cs = cos(a) * m, sn = sign * sin(a) * m;
                double x0 = v[i], x1 = v[i + h2];
                v[i] = x0 * cs - x1 * sn;
                v[i + h2] = x1 * cs + x0 * sn;
            }
        }
    }
}
static double gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_grad(double x) {
    double s = sqrt(2.0 / M_PI), u = s * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}
static double silu_grad(double g) {
    double sg = 1 / (1 + exp(-g));
    return sg * (1 + g * (1 - sg));
}

/* The window of layer l by the HF rules: Gemma 2/3's pattern, else every
 * layer from the first windowed one. */
static int window_of(const shs_llama_config_t *c, int l) {
    if (!c->sliding_window) return 0;
    if (c->window_pattern) return (l + 1) % c->window_pattern ? c->sliding_window : 0;
    return l >= c->window_first_layer ? c->sliding_window : 0;
}
static int allowed(const llama_ref_t *R, int W, int b, int t, int t2) {
    return t2 <= t && (!W || t - t2 < W) && (!R->doc || R->doc[b * R->T + t2] == R->doc[b * R->T + t]);
}

/* ---- the weights by their Hugging Face names ------------------------------------------ */

typedef struct {
    double *w, *g;
} pv_t;

typedef struct {
    pv_t n_ai, n_ao, n_mi, n_mo, qn, kn; /* norms (w NULL: absent) */
    pv_t q, k, v, bq, bk, bv, o, bo, gate, up, down;
    double *grouped_w, *grouped_g, *grouped_b, *grouped_bg; /* InternLM2's wqkv (and bias) to scatter back */
} layer_w_t;

/* A layer tensor's values from `src` (R->p, or its copy with the matmul
 * weights rounded) and its gradient, from element off. */
static pv_t named_from(const llama_ref_t *R, double **src, int l, const char *suffix, size_t off) {
    char n[96];
    snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);
    int idx = tensor_index(R->lo, n);
    return (pv_t){src[idx] + off, R->g[idx] + off};
}
static pv_t named(const llama_ref_t *R, int l, const char *suffix, size_t off) {
    return named_from(R, R->p, l, suffix, off);
}

/* InternLM2's wqkv rows, 'b q (h gs d) -> b q h gs d' with gs = G + 2: for
 * key/value head h, slots 0..G-1 its query heads h G + j, slot G its key,
 * slot G + 1 its value; into (or out of) separate q (QD), k, v (KVD) rows of
 * `cols` each. */
static void internlm2_rows(const shs_llama_config_t *c, int HD, int cols, double *grouped, double *q, double *k,
                           double *v, int to_grouped) {
    int G = c->num_heads / c->num_kv_heads;
    for (int h = 0; h < c->num_kv_heads; h++)
        for (int s = 0; s < G + 2; s++)
            for (int d = 0; d < HD; d++) {
                double *src = grouped + ((size_t)(h * (G + 2) + s) * HD + d) * cols;
                double *dst = s < G ? q + ((size_t)(h * G + s) * HD + d) * cols
                                    : (s == G ? k : v) + ((size_t)h * HD + d) * cols;
                for (int j = 0; j < cols; j++) {
                    if (to_grouped) src[j] += dst[j];
                    else dst[j] = src[j];
                }
            }
}

/* Norm weights from R->p, the matmuls' from pw. */
static void layer_weights(const llama_ref_t *R, double **pw, int l, int HD, layer_w_t *w) {
    const shs_llama_config_t *c = R->c;
    int C = c->hidden, QD = c->num_heads * HD, KVD = c->num_kv_heads * HD, I = c->intermediate;
    unsigned nb = c->norms ? c->norms : SHS_LLAMA_NORMS_PRE;
    int intern = c->names == SHS_LLAMA_NAMES_INTERNLM2, phi = c->names == SHS_LLAMA_NAMES_PHI3;
    int bias = c->qkv_bias || c->attention_bias;
    memset(w, 0, sizeof *w);
    if (nb & SHS_LLAMA_NORM_ATTN_IN) w->n_ai = named(R, l, intern ? "attention_norm.weight" : "input_layernorm.weight", 0);
    if (nb & SHS_LLAMA_NORM_ATTN_OUT) w->n_ao = named(R, l, "post_attention_layernorm.weight", 0);
    if (nb & SHS_LLAMA_NORM_MLP_IN)
        w->n_mi = named(R, l, intern ? "ffn_norm.weight" : nb & SHS_LLAMA_NORM_ATTN_OUT ? "pre_feedforward_layernorm.weight"
                                                                                   : "post_attention_layernorm.weight", 0);
    if (nb & SHS_LLAMA_NORM_MLP_OUT) w->n_mo = named(R, l, "post_feedforward_layernorm.weight", 0);
    if (c->qk_norm) w->qn = named(R, l, "self_attn.q_norm.weight", 0), w->kn = named(R, l, "self_attn.k_norm.weight", 0);
    if (intern) {
        pv_t g = named_from(R, pw, l, "attention.wqkv.weight", 0);
        w->grouped_w = g.w, w->grouped_g = g.g;
        w->q = (pv_t){dz((size_t)QD * C), dz((size_t)QD * C)}, w->k = (pv_t){dz((size_t)KVD * C), dz((size_t)KVD * C)};
        w->v = (pv_t){dz((size_t)KVD * C), dz((size_t)KVD * C)};
        internlm2_rows(c, HD, C, g.w, w->q.w, w->k.w, w->v.w, 0);
        if (bias) {
            pv_t b = named_from(R, pw, l, "attention.wqkv.bias", 0);
            w->grouped_b = b.w, w->grouped_bg = b.g;
            w->bq = (pv_t){dz(QD), dz(QD)}, w->bk = (pv_t){dz(KVD), dz(KVD)}, w->bv = (pv_t){dz(KVD), dz(KVD)};
            internlm2_rows(c, HD, 1, b.w, w->bq.w, w->bk.w, w->bv.w, 0);
            w->bo = named_from(R, pw, l, "attention.wo.bias", 0);
        }
        w->o = named_from(R, pw, l, "attention.wo.weight", 0);
        w->gate = named_from(R, pw, l, "feed_forward.w1.weight", 0), w->up = named_from(R, pw, l, "feed_forward.w3.weight", 0);
        w->down = named_from(R, pw, l, "feed_forward.w2.weight", 0);
        return;
    }
    if (phi) { /* Phi3Attention: qkv[..., :QD], then KVD, then KVD; Phi3MLP: gate_up.chunk(2) */
        w->q = named_from(R, pw, l, "self_attn.qkv_proj.weight", 0);
        w->k = named_from(R, pw, l, "self_attn.qkv_proj.weight", (size_t)QD * C);
        w->v = named_from(R, pw, l, "self_attn.qkv_proj.weight", (size_t)(QD + KVD) * C);
        w->gate = named_from(R, pw, l, "mlp.gate_up_proj.weight", 0);
        w->up = named_from(R, pw, l, "mlp.gate_up_proj.weight", (size_t)I * C);
    } else {
        w->q = named_from(R, pw, l, "self_attn.q_proj.weight", 0), w->k = named_from(R, pw, l, "self_attn.k_proj.weight", 0);
        w->v = named_from(R, pw, l, "self_attn.v_proj.weight", 0);
        w->gate = named_from(R, pw, l, "mlp.gate_proj.weight", 0), w->up = named_from(R, pw, l, "mlp.up_proj.weight", 0);
    }
    if (bias) {
        w->bq = named_from(R, pw, l, "self_attn.q_proj.bias", 0), w->bk = named_from(R, pw, l, "self_attn.k_proj.bias", 0);
        w->bv = named_from(R, pw, l, "self_attn.v_proj.bias", 0);
    }
    w->o = named_from(R, pw, l, "self_attn.o_proj.weight", 0);
    if (c->attention_bias) w->bo = named_from(R, pw, l, "self_attn.o_proj.bias", 0);
    w->down = named_from(R, pw, l, "mlp.down_proj.weight", 0);
}

/* InternLM2: the separate gradients added back into wqkv's, the temporaries freed. */
static void layer_weights_done(const llama_ref_t *R, int HD, layer_w_t *w) {
    if (!w->grouped_w) return;
    internlm2_rows(R->c, HD, R->c->hidden, w->grouped_g, w->q.g, w->k.g, w->v.g, 1);
    if (w->grouped_b) internlm2_rows(R->c, HD, 1, w->grouped_bg, w->bq.g, w->bk.g, w->bv.g, 1);
    double *tmp[] = {w->q.w, w->q.g, w->k.w, w->k.g, w->v.w, w->v.g, w->bq.w, w->bq.g, w->bk.w, w->bk.g, w->bv.w,
                     w->bv.g};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++) free(tmp[i]);
}

/* ---- the model -------------------------------------------------------------------------- */

typedef struct {
    double *x, *r1, *n1, *qraw, *kraw, *rq, *rk, *q, *k, *v, *S, *P, *Pr, *y, *oraw, *ro, *h, *r2, *n2, *g, *u, *a;
    double *mraw, *rm;
    const float *inv;
    double mscale;
    int W;
} ref_layer_t;

double llama_ref_run(llama_ref_t *R) {
    const shs_llama_config_t *c = R->c;
    const shs_layout_t *lo = R->lo;
    int B = R->B, T = R->T, N = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads;
    int HD = c->head_dim ? c->head_dim : C / NH, QD = NH * HD, KVD = NKV * HD, Rd = c->rotary_dim ? c->rotary_dim : HD;
    int I = c->intermediate, V = c->vocab, L = c->num_layers, grp = NH / NKV, p1 = c->norm_plus_one;
    double eps = c->rms_norm_eps, scale = c->query_pre_attn_scalar > 0 ? 1.0 / sqrt(c->query_pre_attn_scalar)
                                                                      : 1.0 / sqrt((double)HD);
    double acap = c->attn_softcap, fcap = c->final_softcap, es = c->embed_scale ? sqrt((double)C) : 1.0;
    int head_qk = c->qk_norm == SHS_QK_NORM_HEAD;
    int qrows = head_qk ? N * NH : N, qcols = head_qk ? HD : QD, krows = head_qk ? N * NKV : N, kcols = head_qk ? HD : KVD;
    int intern = c->names == SHS_LLAMA_NAMES_INTERNLM2;
    int te = tensor_index(lo, intern ? "model.tok_embeddings.weight" : "model.embed_tokens.weight");
    int tn = tensor_index(lo, "model.norm.weight");
    int th = c->tie_word_embeddings ? te : tensor_index(lo, intern ? "output.weight" : "lm_head.weight");
    shs_dtype_t A = R->A, RD = R->R;
    /* what the matmuls read: the weights and biases, rounded to A with round_weights */
    double **pw = R->p;
    if (R->round_weights) {
        pw = calloc((size_t)lo->num_tensors, sizeof *pw);
        for (int i = 0; i < lo->num_tensors; i++) {
            pw[i] = dz(lo->tensors[i].numel);
            memcpy(pw[i], R->p[i], lo->tensors[i].numel * sizeof(double));
            rnd(pw[i], lo->tensors[i].numel, A);
        }
    }
    size_t NC = (size_t)N * C, NQ = (size_t)N * QD, NK = (size_t)N * KVD, NI = (size_t)N * I;
    size_t TT = (size_t)B * NH * T * T;
    rnd(&es, 1, RD); /* HF Gemma: the normalizer a tensor of the hidden states' dtype */
    /* LongRoPE: the long factors once the batch's positions pass the original context */
    const float *inv_global = R->inv_global;
    double mscale = 1.0;
    if (c->rope_scaling.kind == SHS_ROPE_SCALING_LONGROPE) {
        int seq = T, orig = c->rope_scaling.original_max_position_embeddings;
        if (R->pos) {
            seq = 0;
            for (int i = 0; i < N; i++) seq = R->pos[i] + 1 > seq ? R->pos[i] + 1 : seq;
        }
        if (seq > orig) inv_global = R->inv_long;
        double f = (double)c->max_position / orig;
        mscale = c->rope_scaling.attention_factor > 0 ? c->rope_scaling.attention_factor
                 : f <= 1 ? 1.0 : sqrt(1 + log(f) / log((double)orig));
    }
    ref_layer_t *S = calloc((size_t)L, sizeof *S);
    double *x = dz((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) x[(size_t)i * C + ch] = R->p[te][(size_t)R->tok[i] * C + ch] * es;
    rnd(x, NC, RD);
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        layer_w_t w;
        layer_weights(R, pw, l, HD, &w);
        s->W = window_of(c, l);
        int local = s->W && c->rope_local_theta > 0;
        s->inv = local ? R->inv_local : inv_global, s->mscale = local ? 1.0 : mscale;
        s->x = x;
        s->r1 = dz(N), s->n1 = dz((size_t)N * C), s->q = dz((size_t)N * QD), s->k = dz((size_t)N * KVD);
        s->qraw = dz((size_t)N * QD), s->kraw = dz((size_t)N * KVD), s->rq = dz((size_t)qrows), s->rk = dz((size_t)krows);
        s->v = dz((size_t)N * KVD), s->S = dz(TT), s->P = dz(TT), s->Pr = dz(TT);
        s->y = dz((size_t)N * QD), s->oraw = dz((size_t)N * C), s->ro = dz(N), s->h = dz((size_t)N * C);
        s->r2 = dz(N), s->n2 = dz((size_t)N * C), s->g = dz((size_t)N * I), s->u = dz((size_t)N * I);
        s->a = dz((size_t)N * I), s->mraw = dz((size_t)N * C), s->rm = dz(N);
        /* n1: what the projections read, the input norm's output or the input, in A */
        if (w.n_ai.w) rms(s->n1, s->r1, x, w.n_ai.w, p1, N, C, eps);
        else memcpy(s->n1, x, NC * sizeof(double));
        rnd(s->n1, NC, A);
        lin(s->qraw, s->n1, w.q.w, w.bq.w, N, C, QD);
        lin(s->kraw, s->n1, w.k.w, w.bk.w, N, C, KVD);
        lin(s->v, s->n1, w.v.w, w.bv.w, N, C, KVD);
        rnd(s->qraw, NQ, A), rnd(s->kraw, NK, A), rnd(s->v, NK, A);
        if (c->qk_norm) {
            rms(s->q, s->rq, s->qraw, w.qn.w, p1, qrows, qcols, eps);
            rms(s->k, s->rk, s->kraw, w.kn.w, p1, krows, kcols, eps);
            if (p1 || c->qk_norm == SHS_QK_NORM_ALL) rnd(s->q, NQ, A), rnd(s->k, NK, A); /* Gemma's, OLMo 2's: type_as */
        } else {
            memcpy(s->q, s->qraw, (size_t)N * QD * sizeof(double));
            memcpy(s->k, s->kraw, (size_t)N * KVD * sizeof(double));
        }
        rope(s->q, R, s->inv, s->mscale, NH, HD, Rd, 1);
        rope(s->k, R, s->inv, s->mscale, NKV, HD, Rd, 1);
        rnd(s->q, NQ, A), rnd(s->k, NK, A);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < T; t++) {
                    size_t row = (((size_t)b * NH + hh) * T + t) * T;
                    double *Sr = s->S + row, *P = s->P + row, m = -INFINITY, z = 0;
                    const double *q = s->q + ((size_t)(b * T + t) * NH + hh) * HD;
                    for (int t2 = 0; t2 < T; t2++) {
                        if (!allowed(R, s->W, b, t, t2)) continue;
                        const double *k = s->k + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double d = 0;
                        for (int i = 0; i < HD; i++) d += q[i] * k[i];
                        Sr[t2] = d * scale;
                        P[t2] = acap > 0 ? acap * tanh(Sr[t2] / acap) : Sr[t2];
                        m = fmax(m, P[t2]);
                    }
                    for (int t2 = 0; t2 < T; t2++) z += allowed(R, s->W, b, t, t2) ? exp(P[t2] - m) : 0;
                    for (int t2 = 0; t2 < T; t2++) P[t2] = allowed(R, s->W, b, t, t2) ? exp(P[t2] - m) / z : 0;
                    double *y = s->y + ((size_t)(b * T + t) * NH + hh) * HD;
                    for (int t2 = 0; t2 < T; t2++) {
                        const double *v = s->v + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        for (int i = 0; i < HD; i++) y[i] += P[t2] * v[i];
                    }
                }
        /* the output from the f32 probabilities; eager stores them rounded (backward reads those),
         * flash recomputes them unrounded */
        memcpy(s->Pr, s->P, TT * sizeof(double));
        rnd(s->Pr, TT, A);
        rnd(s->y, NQ, A);
        lin(s->oraw, s->y, w.o.w, w.bo.w, N, QD, C);
        rnd(s->oraw, NC, A);
        double *o = s->oraw, *on = dz(NC);
        if (w.n_ao.w) rms(on, s->ro, s->oraw, w.n_ao.w, p1, N, C, eps), rnd(on, NC, A), o = on;
        for (size_t i = 0; i < NC; i++) s->h[i] = x[i] + o[i];
        rnd(s->h, NC, RD);
        if (w.n_mi.w) rms(s->n2, s->r2, s->h, w.n_mi.w, p1, N, C, eps);
        else memcpy(s->n2, s->h, NC * sizeof(double));
        rnd(s->n2, NC, A);
        lin(s->g, s->n2, w.gate.w, NULL, N, C, I);
        lin(s->u, s->n2, w.up.w, NULL, N, C, I);
        rnd(s->g, NI, A), rnd(s->u, NI, A);
        for (size_t i = 0; i < NI; i++)
            s->a[i] = (c->act == SHS_LLAMA_ACT_GELU_TANH ? gelu(s->g[i]) : s->g[i] / (1 + exp(-s->g[i]))) * s->u[i];
        rnd(s->a, NI, A);
        lin(s->mraw, s->a, w.down.w, NULL, N, I, C);
        rnd(s->mraw, NC, A);
        double *m = s->mraw, *mn = dz(NC), *xn = dz(NC);
        if (w.n_mo.w) rms(mn, s->rm, s->mraw, w.n_mo.w, p1, N, C, eps), rnd(mn, NC, A), m = mn;
        for (size_t i = 0; i < NC; i++) xn[i] = s->h[i] + m[i];
        rnd(xn, NC, RD);
        free(on), free(mn);
        layer_weights_done(R, HD, &w); /* forward only: no gradient yet (adds zeros) */
        x = xn;
    }
    double *rf = dz(N), *nf = dz((size_t)N * C), *logits = dz((size_t)N * V), *raw = dz((size_t)N * V);
    rms(nf, rf, x, R->p[tn], p1, N, C, eps);
    rnd(nf, NC, A);
    lin(raw, nf, pw[th], NULL, N, C, V);
    rnd(raw, (size_t)N * V, A);
    for (size_t i = 0; i < (size_t)N * V; i++) logits[i] = fcap > 0 ? fcap * tanh(raw[i] / fcap) : raw[i];
    if (fcap > 0) rnd(logits, (size_t)N * V, A);
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
        for (int v = 0; v < V; v++) {
            double d = (exp(lg[v] - m) / z - (v == R->tgt[i])) / count;
            double t = fcap > 0 ? lg[v] / fcap : 0; /* tanh as stored (autograd saves tanh's output) */
            dlog[(size_t)i * V + v] = fcap > 0 ? d * (1 - t * t) : d;
        }
    }
    loss = count ? loss / count : 0;
    /* backward */
    double *dnf = dz((size_t)N * C), *dx = dz((size_t)N * C);
    lin_back(dnf, R->g[th], NULL, dlog, nf, pw[th], N, C, V);
    rms_back(dx, R->g[tn], dnf, x, rf, R->p[tn], p1, N, C);
    for (int l = L - 1; l >= 0; l--) {
        ref_layer_t *s = &S[l];
        layer_w_t w;
        layer_weights(R, pw, l, HD, &w);
        double *da = dz((size_t)N * I), *dg = dz((size_t)N * I), *du = dz((size_t)N * I), *dn2 = dz((size_t)N * C);
        double *dh = dz((size_t)N * C), *dy = dz((size_t)N * QD), *dq = dz((size_t)N * QD), *dk = dz((size_t)N * KVD);
        double *dv = dz((size_t)N * KVD), *dn1 = dz((size_t)N * C), *dmr = dz((size_t)N * C), *dor = dz((size_t)N * C);
        double *dqr = dz((size_t)N * QD), *dkr = dz((size_t)N * KVD);
        /* MLP branch: xn = h + [norm] down(act(gate(n2)) up(n2)) */
        if (w.n_mo.w) rms_back(dmr, w.n_mo.g, dx, s->mraw, s->rm, w.n_mo.w, p1, N, C);
        else memcpy(dmr, dx, (size_t)N * C * sizeof(double));
        lin_back(da, w.down.g, NULL, dmr, s->a, w.down.w, N, I, C);
        for (size_t i = 0; i < (size_t)N * I; i++) {
            int gl = c->act == SHS_LLAMA_ACT_GELU_TANH;
            double act = gl ? gelu(s->g[i]) : s->g[i] / (1 + exp(-s->g[i]));
            dg[i] = da[i] * s->u[i] * (gl ? gelu_grad(s->g[i]) : silu_grad(s->g[i]));
            du[i] = da[i] * act;
        }
        lin_back(dn2, w.gate.g, NULL, dg, s->n2, w.gate.w, N, C, I);
        lin_back(dn2, w.up.g, NULL, du, s->n2, w.up.w, N, C, I);
        memcpy(dh, dx, (size_t)N * C * sizeof(double));
        if (w.n_mi.w) rms_back(dh, w.n_mi.g, dn2, s->h, s->r2, w.n_mi.w, p1, N, C);
        else for (size_t i = 0; i < (size_t)N * C; i++) dh[i] += dn2[i];
        /* attention branch: h = x + [norm] o(attention(...)) */
        if (w.n_ao.w) rms_back(dor, w.n_ao.g, dh, s->oraw, s->ro, w.n_ao.w, p1, N, C);
        else memcpy(dor, dh, (size_t)N * C * sizeof(double));
        lin_back(dy, w.o.g, w.bo.g, dor, s->y, w.o.w, N, QD, C);
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < T; t++) {
                    size_t row = (((size_t)b * NH + hh) * T + t) * T;
                    const double *P = (R->flash ? s->P : s->Pr) + row, *Sr = s->S + row;
                    const double *yr = s->y + ((size_t)(b * T + t) * NH + hh) * HD;
                    const double *dyr = dy + ((size_t)(b * T + t) * NH + hh) * HD;
                    const double *q = s->q + ((size_t)(b * T + t) * NH + hh) * HD;
                    double *dqr_ = dq + ((size_t)(b * T + t) * NH + hh) * HD;
                    double *dP = dz((size_t)T), sum = 0;
                    for (int t2 = 0; t2 < T; t2++) {
                        const double *v = s->v + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double *dvr = dv + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        for (int i = 0; i < HD; i++) {
                            dP[t2] += dyr[i] * v[i];
                            dvr[i] += P[t2] * dyr[i];
                        }
                        sum += P[t2] * dP[t2];
                    }
                    if (R->flash) { /* FlashAttention's D = dout . out, with the output as stored */
                        sum = 0;
                        for (int i = 0; i < HD; i++) sum += dyr[i] * yr[i];
                    }
                    for (int t2 = 0; t2 < T; t2++) {
                        if (!allowed(R, s->W, b, t, t2)) continue;
                        double th_ = acap > 0 ? tanh(Sr[t2] / acap) : 0;
                        double dS = P[t2] * (dP[t2] - sum) * (acap > 0 ? 1 - th_ * th_ : 1) * scale;
                        const double *k = s->k + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        double *dkr_ = dk + ((size_t)(b * T + t2) * NKV + hh / grp) * HD;
                        for (int i = 0; i < HD; i++) {
                            dqr_[i] += dS * k[i];
                            dkr_[i] += dS * q[i];
                        }
                    }
                    free(dP);
                }
        rope(dq, R, s->inv, s->mscale, NH, HD, Rd, -1);
        rope(dk, R, s->inv, s->mscale, NKV, HD, Rd, -1);
        if (c->qk_norm) {
            rms_back(dqr, w.qn.g, dq, s->qraw, s->rq, w.qn.w, p1, qrows, qcols);
            rms_back(dkr, w.kn.g, dk, s->kraw, s->rk, w.kn.w, p1, krows, kcols);
        } else {
            memcpy(dqr, dq, (size_t)N * QD * sizeof(double));
            memcpy(dkr, dk, (size_t)N * KVD * sizeof(double));
        }
        lin_back(dn1, w.q.g, w.bq.g, dqr, s->n1, w.q.w, N, C, QD);
        lin_back(dn1, w.k.g, w.bk.g, dkr, s->n1, w.k.w, N, C, KVD);
        lin_back(dn1, w.v.g, w.bv.g, dv, s->n1, w.v.w, N, C, KVD);
        memcpy(dx, dh, (size_t)N * C * sizeof(double));
        if (w.n_ai.w) rms_back(dx, w.n_ai.g, dn1, s->x, s->r1, w.n_ai.w, p1, N, C);
        else for (size_t i = 0; i < (size_t)N * C; i++) dx[i] += dn1[i];
        layer_weights_done(R, HD, &w);
        double *f[] = {da, dg, du, dn2, dh, dy, dq, dk, dv, dn1, dmr, dor, dqr, dkr};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    }
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) R->g[te][(size_t)R->tok[i] * C + ch] += dx[(size_t)i * C + ch] * es;
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        double *bufs[] = {s->x, s->r1, s->n1, s->qraw, s->kraw, s->rq, s->rk, s->q, s->k, s->v, s->S, s->P, s->Pr, s->y,
                          s->oraw, s->ro, s->h, s->r2, s->n2, s->g, s->u, s->a, s->mraw, s->rm};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    if (pw != R->p) {
        for (int i = 0; i < lo->num_tensors; i++) free(pw[i]);
        free(pw);
    }
    free(x), free(rf), free(nf), free(logits), free(raw), free(dlog), free(dnf), free(dx), free(S);
    return loss;
}
