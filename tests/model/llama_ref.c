/* llama_ref.c - the float64 Llama reference (llama_ref.h). */
#include "llama_ref.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

int llama_ref_tensor(const shs_layout_t *lo, const char *name) {
    for (int i = 0; i < lo->num_tensors; i++)
        if (strcmp(lo->tensors[i].name, name) == 0) return i;
    fail_msg("no tensor named %s", name);
    return -1;
}
static int layer_tensor(const shs_layout_t *lo, int l, const char *suffix) {
    char n[96];
    snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);
    return llama_ref_tensor(lo, n);
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
static void rope(double *x, const llama_ref_t *R, int H, int sign) {
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
static int allowed(const llama_ref_t *R, int b, int t, int t2) {
    return t2 <= t && (!R->doc || R->doc[b * R->T + t2] == R->doc[b * R->T + t]);
}

typedef struct {
    double *x, *r1, *n1, *q, *k, *v, *P, *Pr, *y, *h, *r2, *n2, *g, *u, *a;
} ref_layer_t;

static double *dz(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* x (n) rounded to dt (bf16 or f16) from its f32 value; other dtypes: unchanged. */
static void rnd(double *x, size_t n, shs_dtype_t dt) {
    for (size_t i = 0; i < n && (dt == SHS_BF16 || dt == SHS_F16); i++) {
        float f = (float)x[i];
        x[i] = dt == SHS_BF16 ? shs_bf16_to_f32(shs_f32_to_bf16(f)) : shs_f16_to_f32(shs_f32_to_f16(f));
    }
}

double llama_ref_run(llama_ref_t *R) {
    const shs_llama_config_t *c = R->c;
    const shs_layout_t *lo = R->lo;
    int B = R->B, T = R->T, N = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = C / NH;
    int KVD = NKV * HD, I = c->intermediate, V = c->vocab, L = c->num_layers, grp = NH / NKV;
    double eps = c->rms_norm_eps, scale = 1.0 / sqrt((double)HD);
    int te = llama_ref_tensor(lo, "model.embed_tokens.weight"), tn = llama_ref_tensor(lo, "model.norm.weight");
    int th = c->tie_word_embeddings ? te : llama_ref_tensor(lo, "lm_head.weight");
    shs_dtype_t A = R->A, RD = R->R;
    /* what the matmuls read: the weights and biases, rounded to A with round_weights */
    double **pw = calloc((size_t)lo->num_tensors, sizeof *pw);
    for (int i = 0; i < lo->num_tensors; i++) {
        pw[i] = dz(lo->tensors[i].numel);
        memcpy(pw[i], R->p[i], lo->tensors[i].numel * sizeof(double));
        if (R->round_weights) rnd(pw[i], lo->tensors[i].numel, A);
    }
#define PW(suffix) pw[layer_tensor(lo, l, suffix)]
#define PWB(suffix) (c->qkv_bias ? pw[layer_tensor(lo, l, suffix)] : NULL)
#define GW(suffix) R->g[layer_tensor(lo, l, suffix)]
#define GWB(suffix) (c->qkv_bias ? R->g[layer_tensor(lo, l, suffix)] : NULL)
    ref_layer_t *S = calloc((size_t)L, sizeof *S);
    double *x = dz((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) x[(size_t)i * C + ch] = R->p[te][(size_t)R->tok[i] * C + ch];
    rnd(x, (size_t)N * C, RD);
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        size_t NC = (size_t)N * C, NK = (size_t)N * KVD, NI = (size_t)N * I, TT = (size_t)B * NH * T * T;
        s->x = x;
        s->r1 = dz(N), s->n1 = dz(NC), s->q = dz(NC), s->k = dz(NK), s->v = dz(NK), s->P = dz(TT), s->Pr = dz(TT);
        s->y = dz(NC), s->h = dz(NC), s->r2 = dz(N), s->n2 = dz(NC), s->g = dz(NI), s->u = dz(NI), s->a = dz(NI);
        rms(s->n1, s->r1, x, R->p[layer_tensor(lo, l, "input_layernorm.weight")], N, C, eps);
        rnd(s->n1, NC, A);
        lin(s->q, s->n1, PW("self_attn.q_proj.weight"), PWB("self_attn.q_proj.bias"), N, C, C);
        lin(s->k, s->n1, PW("self_attn.k_proj.weight"), PWB("self_attn.k_proj.bias"), N, C, KVD);
        lin(s->v, s->n1, PW("self_attn.v_proj.weight"), PWB("self_attn.v_proj.bias"), N, C, KVD);
        rnd(s->q, NC, A), rnd(s->k, NK, A), rnd(s->v, NK, A);
        rope(s->q, R, NH, 1);
        rope(s->k, R, NKV, 1);
        rnd(s->q, NC, A), rnd(s->k, NK, A);
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
        /* the output from the f32 probabilities; eager stores them rounded (backward reads those),
         * flash recomputes them unrounded */
        memcpy(s->Pr, s->P, TT * sizeof(double));
        rnd(s->Pr, TT, A);
        rnd(s->y, NC, A);
        lin(s->h, s->y, PW("self_attn.o_proj.weight"), NULL, N, C, C);
        rnd(s->h, NC, A);
        for (size_t i = 0; i < NC; i++) s->h[i] += x[i];
        rnd(s->h, NC, RD);
        rms(s->n2, s->r2, s->h, R->p[layer_tensor(lo, l, "post_attention_layernorm.weight")], N, C, eps);
        rnd(s->n2, NC, A);
        lin(s->g, s->n2, PW("mlp.gate_proj.weight"), NULL, N, C, I);
        lin(s->u, s->n2, PW("mlp.up_proj.weight"), NULL, N, C, I);
        rnd(s->g, NI, A), rnd(s->u, NI, A);
        for (size_t i = 0; i < NI; i++) s->a[i] = s->g[i] / (1 + exp(-s->g[i])) * s->u[i];
        rnd(s->a, NI, A);
        double *xn = dz(NC);
        lin(xn, s->a, PW("mlp.down_proj.weight"), NULL, N, I, C);
        rnd(xn, NC, A);
        for (size_t i = 0; i < NC; i++) xn[i] += s->h[i];
        rnd(xn, NC, RD);
        x = xn;
    }
    double *rf = dz(N), *nf = dz((size_t)N * C), *logits = dz((size_t)N * V);
    rms(nf, rf, x, R->p[tn], N, C, eps);
    rnd(nf, (size_t)N * C, A);
    lin(logits, nf, pw[th], NULL, N, C, V);
    rnd(logits, (size_t)N * V, A);
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
    /* backward (f64 gradients; the stored values as rounded above) */
    double *dnf = dz((size_t)N * C), *dx = dz((size_t)N * C);
    lin_back(dnf, R->g[th], NULL, dlog, nf, pw[th], N, C, V);
    rms_back(dx, R->g[tn], dnf, x, rf, R->p[tn], N, C);
    for (int l = L - 1; l >= 0; l--) {
        ref_layer_t *s = &S[l];
        double *da = dz((size_t)N * I), *dg = dz((size_t)N * I), *du = dz((size_t)N * I), *dn2 = dz((size_t)N * C);
        double *dh = dz((size_t)N * C), *dy = dz((size_t)N * C), *dq = dz((size_t)N * C), *dk = dz((size_t)N * KVD);
        double *dv = dz((size_t)N * KVD), *dn1 = dz((size_t)N * C);
        lin_back(da, GW("mlp.down_proj.weight"), NULL, dx, s->a, PW("mlp.down_proj.weight"), N, I, C);
        for (size_t i = 0; i < (size_t)N * I; i++) {
            double sg = 1 / (1 + exp(-s->g[i])), silu = s->g[i] * sg;
            dg[i] = da[i] * s->u[i] * sg * (1 + s->g[i] * (1 - sg));
            du[i] = da[i] * silu;
        }
        lin_back(dn2, GW("mlp.gate_proj.weight"), NULL, dg, s->n2, PW("mlp.gate_proj.weight"), N, C, I);
        lin_back(dn2, GW("mlp.up_proj.weight"), NULL, du, s->n2, PW("mlp.up_proj.weight"), N, C, I);
        memcpy(dh, dx, (size_t)N * C * sizeof(double));
        rms_back(dh, GW("post_attention_layernorm.weight"), dn2, s->h, s->r2,
                 R->p[layer_tensor(lo, l, "post_attention_layernorm.weight")], N, C);
        lin_back(dy, GW("self_attn.o_proj.weight"), NULL, dh, s->y, PW("self_attn.o_proj.weight"), N, C, C);
        const double *Pb = R->flash ? s->P : s->Pr;
        for (int b = 0; b < B; b++)
            for (int hh = 0; hh < NH; hh++)
                for (int t = 0; t < T; t++) {
                    const double *P = Pb + (((size_t)b * NH + hh) * T + t) * T;
                    const double *dyr = dy + ((size_t)(b * T + t) * NH + hh) * HD;
                    const double *yr = s->y + ((size_t)(b * T + t) * NH + hh) * HD;
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
                    if (R->flash) { /* FlashAttention's D = dout . out, with the output as stored */
                        sum = 0;
                        for (int i = 0; i < HD; i++) sum += dyr[i] * yr[i];
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
        lin_back(dn1, GW("self_attn.q_proj.weight"), GWB("self_attn.q_proj.bias"), dq, s->n1,
                 PW("self_attn.q_proj.weight"), N, C, C);
        lin_back(dn1, GW("self_attn.k_proj.weight"), GWB("self_attn.k_proj.bias"), dk, s->n1,
                 PW("self_attn.k_proj.weight"), N, C, KVD);
        lin_back(dn1, GW("self_attn.v_proj.weight"), GWB("self_attn.v_proj.bias"), dv, s->n1,
                 PW("self_attn.v_proj.weight"), N, C, KVD);
        memcpy(dx, dh, (size_t)N * C * sizeof(double));
        rms_back(dx, GW("input_layernorm.weight"), dn1, s->x, s->r1,
                 R->p[layer_tensor(lo, l, "input_layernorm.weight")], N, C);
        free(da), free(dg), free(du), free(dn2), free(dh), free(dy), free(dq), free(dk), free(dv), free(dn1);
    }
#undef PW
#undef PWB
#undef GW
#undef GWB
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < C; ch++) R->g[te][(size_t)R->tok[i] * C + ch] += dx[(size_t)i * C + ch];
    for (int l = 0; l < L; l++) {
        ref_layer_t *s = &S[l];
        double *bufs[] = {s->x, s->r1, s->n1, s->q, s->k, s->v, s->P, s->Pr, s->y, s->h, s->r2, s->n2, s->g, s->u, s->a};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    }
    for (int i = 0; i < lo->num_tensors; i++) free(pw[i]);
    free(pw);
    free(x), free(rf), free(nf), free(logits), free(dlog), free(dnf), free(dx), free(S);
    return loss;
}
