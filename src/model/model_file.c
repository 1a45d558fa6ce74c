/* model_file.c - user-defined models from a model-description file: the parser,
 * the parameter layout it implies, and the model that runs the layers in
 * sequence, all math through device.h (see model_file.h; the format is in
 * README.md, "Model-description files").
 * What it is not: a graph language (no residuals, no branches) or a
 * tokenizer (inputs are the trainer's bytes).
 * Legend: B micro-batch, T context, BT = B*T rows, V vocabulary of an
 * Embedding, K width of the last used layer (classes of the loss).
 */
#include "shardsim/model_file.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ND_MAX_DIM 16777216        /* any size on a layer line */
#define ND_MAX_LINE 1024           /* characters per line */
#define ND_MAX_LAYERS 65536
#define ND_MAX_FILE ((size_t)1 << 20)
#define ND_NAME_MAX 32             /* layer and unit names, characters */

typedef enum { ND_LINEAR, ND_LAYERNORM, ND_GELU, ND_RELU, ND_EMBEDDING } nd_kind_t;

static const struct {
    const char *word;
    int nsizes;
    const char *sizes;      /* what the sizes mean, for messages */
    const char *options;    /* accepted options, for messages */
} kinds[] = {
    [ND_LINEAR] = {"Linear", 2, "in out", "bias, nobias, name=, tied=, unused"},
    [ND_LAYERNORM] = {"LayerNorm", 1, "C", "name=, unused"},
    [ND_GELU] = {"GELU", 0, "", "name=, unused"},
    [ND_RELU] = {"ReLU", 0, "", "name=, unused"},
    [ND_EMBEDDING] = {"Embedding", 2, "V C", "name=, unused"},
};

typedef struct {
    nd_kind_t kind;
    int line;
    int unit;
    int size[2];            /* Linear (in, out); LayerNorm (C); Embedding (V, C) */
    int bias;               /* Linear has its own bias (out) */
    int used;               /* runs in the forward pass */
    int tied;               /* Linear: index of the Embedding whose weight it uses, else -1 */
    int user_named;
    char name[ND_NAME_MAX + 1];  /* user name, or the layer's index as in nn.Sequential */
    int in_w, out_w;        /* widths in the forward pass (used layers) */
    int weight, bias_t;     /* layout tensor indices of its own tensors, -1 if none */
} nd_layer_t;

typedef struct {
    char name[ND_NAME_MAX];
    int line;
    int replicated;
    int first_layer, num_layers;
    int fwd_params;         /* its parameters are read in the forward pass */
    int bwd_params;         /* ... and in the backward pass */
} nd_unit_t;

struct shs_model_file {
    char source[256];
    nd_layer_t *layers;
    int num_layers, cap_layers;
    nd_unit_t *units;
    int num_units, cap_units;
    int num_tensors;
    int first_used, last_used;   /* layer indices */
    int in_w;                    /* width of the input vector when the first used layer is not an Embedding */
    int out_w;                   /* K */
    int max_w;                   /* widest activation */
};

/* ---- parsing ------------------------------------------------------------- */

typedef struct {
    shs_model_file_t *nd;
    int line;
} parser_t;

/* A token as it may be printed: at most 40 bytes, non-printables as '?'. */
static const char *show(char *buf, size_t n, const char *tok) {
    size_t i = 0;
    for (; tok[i] && i + 1 < n && i < 40; i++) buf[i] = isprint((unsigned char)tok[i]) ? tok[i] : '?';
    buf[i] = 0;
    if (tok[i] && i >= 40 && n > 44) strcpy(buf + i, "...");
    return buf;
}

static shs_status_t perr(const parser_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static shs_status_t perr(const parser_t *p, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (p->line > 0) return shs_set_error(SHS_PARSE, "%s:%d: %s", p->nd->source, p->line, what);
    return shs_set_error(SHS_PARSE, "%s: %s", p->nd->source, what);
}

/* Names: a letter or '_' first, then letters, digits, '_', '.', '-'. */
static int valid_name(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-')) return 0;
    return 1;
}

static int looks_numeric(const char *s) { return isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+'; }

static shs_status_t parse_size(const parser_t *p, const char *kind, const char *what, const char *tok, int lo,
                               int *out) {
    char b[48];
    size_t n = strlen(tok);
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)tok[i]))
            return perr(p, "%s: %s '%s' is not a whole number", kind, what, show(b, sizeof b, tok));
    if (n > 9 || atol(tok) > ND_MAX_DIM || atol(tok) < lo)
        return perr(p, "%s: %s %s is out of range %d..%d", kind, what, show(b, sizeof b, tok), lo, ND_MAX_DIM);
    *out = (int)atol(tok);
    return SHS_OK;
}

static int find_layer(const shs_model_file_t *nd, const char *name) {
    for (int i = 0; i < nd->num_layers; i++)
        if (strcmp(nd->layers[i].name, name) == 0) return i;
    return -1;
}

static shs_status_t parse_unit(parser_t *p, char **tok, int ntok) {
    shs_model_file_t *nd = p->nd;
    char b[48];
    if (ntok < 2) return perr(p, "unit needs a name");
    if (!valid_name(tok[1], ND_NAME_MAX - 1))
        return perr(p, "unit: bad name '%s' (a letter or _, then letters, digits, _ . -; at most %d characters)",
                    show(b, sizeof b, tok[1]), ND_NAME_MAX - 1);
    for (int u = 0; u < nd->num_units; u++)
        if (strcmp(nd->units[u].name, tok[1]) == 0)
            return perr(p, "unit '%s' is already defined on line %d", tok[1], nd->units[u].line);
    int replicated = 0;
    for (int i = 2; i < ntok; i++) {
        if (strcmp(tok[i], "replicated") == 0 && !replicated) replicated = 1;
        else if (strcmp(tok[i], "replicated") == 0) return perr(p, "unit: option 'replicated' given twice");
        else return perr(p, "unknown option '%s' for unit (expected replicated)", show(b, sizeof b, tok[i]));
    }
    if (nd->num_units == nd->cap_units) {
        int cap = nd->cap_units ? 2 * nd->cap_units : 8;
        void *q = realloc(nd->units, (size_t)cap * sizeof *nd->units);
        if (!q) return shs_set_error(SHS_HOST_OOM, "cannot allocate model description");
        nd->units = q;
        nd->cap_units = cap;
    }
    nd_unit_t *u = &nd->units[nd->num_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", tok[1]);
    u->line = p->line;
    u->replicated = replicated;
    u->first_layer = nd->num_layers;
    return SHS_OK;
}

static shs_status_t parse_layer(parser_t *p, nd_kind_t kind, char **tok, int ntok) {
    shs_model_file_t *nd = p->nd;
    const char *kw = kinds[kind].word;
    char b[48];
    if (nd->num_units == 0) return perr(p, "%s before any 'unit' line", kw);
    if (nd->num_layers >= ND_MAX_LAYERS) return perr(p, "more than %d layers", ND_MAX_LAYERS);
    nd_layer_t L = {.kind = kind, .line = p->line, .unit = nd->num_units - 1, .bias = kind == ND_LINEAR,
                    .used = 1, .tied = -1, .weight = -1, .bias_t = -1};
    int nsizes = 0, want = kinds[kind].nsizes;
    while (1 + nsizes < ntok && looks_numeric(tok[1 + nsizes])) nsizes++;
    if (nsizes != want) {
        if (want == 0) return perr(p, "%s takes no sizes, got %d", kw, nsizes);
        return perr(p, "%s needs %d size%s (%s), got %d", kw, want, want == 1 ? "" : "s", kinds[kind].sizes, nsizes);
    }
    static const char *size_names[][2] = {[ND_LINEAR] = {"in", "out"}, [ND_LAYERNORM] = {"C", ""},
                                          [ND_EMBEDDING] = {"V", "C"}};
    for (int k = 0; k < want; k++) {
        /* LayerNorm needs C >= 1 (normalizing nothing is undefined), an Embedding V >= 1 (token % V) */
        int lo = (kind == ND_LAYERNORM || (kind == ND_EMBEDDING && k == 0)) ? 1 : 0;
        SHS_CHECK(parse_size(p, kw, size_names[kind][k], tok[1 + k], lo, &L.size[k]));
    }
    int saw_bias = 0, saw_unused = 0;
    const char *tied_name = NULL;
    for (int i = 1 + want; i < ntok; i++) {
        const char *t = tok[i];
        if (kind == ND_LINEAR && (strcmp(t, "bias") == 0 || strcmp(t, "nobias") == 0)) {
            if (saw_bias) return perr(p, "%s: bias given twice (bias or nobias, once)", kw);
            saw_bias = 1;
            L.bias = strcmp(t, "bias") == 0;
        } else if (strcmp(t, "unused") == 0) {
            if (saw_unused) return perr(p, "%s: option 'unused' given twice", kw);
            saw_unused = 1;
            L.used = 0;
        } else if (strncmp(t, "name=", 5) == 0) {
            if (L.user_named) return perr(p, "%s: option 'name=' given twice", kw);
            if (!valid_name(t + 5, ND_NAME_MAX))
                return perr(p, "%s: bad name '%s' (a letter or _, then letters, digits, _ . -; at most %d characters)",
                            kw, show(b, sizeof b, t + 5), ND_NAME_MAX);
            int j = find_layer(nd, t + 5);
            if (j >= 0) return perr(p, "name '%s' is already used on line %d", t + 5, nd->layers[j].line);
            snprintf(L.name, sizeof L.name, "%s", t + 5);
            L.user_named = 1;
        } else if (kind == ND_LINEAR && strncmp(t, "tied=", 5) == 0) {
            if (tied_name) return perr(p, "%s: option 'tied=' given twice", kw);
            tied_name = t + 5;
        } else {
            return perr(p, "unknown option '%s' for %s (expected %s)", show(b, sizeof b, t), kw, kinds[kind].options);
        }
    }
    if (!L.user_named) snprintf(L.name, sizeof L.name, "%d", nd->num_layers);
    if (tied_name) {
        int e = find_layer(nd, tied_name);
        if (e < 0) {
            show(b, sizeof b, tied_name);
            return perr(p, "tied=%s: no Embedding named '%s' on an earlier line", b, b);
        }
        const nd_layer_t *E = &nd->layers[e];
        if (E->kind != ND_EMBEDDING)
            return perr(p, "tied=%s: '%s' (line %d) is a %s, not an Embedding", tied_name, tied_name, E->line,
                        kinds[E->kind].word);
        if (E->size[0] != L.size[1] || E->size[1] != L.size[0])
            return perr(p, "tied=%s: Linear %d %d needs Embedding %d %d, but '%s' (line %d) is Embedding %d %d",
                        tied_name, L.size[0], L.size[1], L.size[1], L.size[0], tied_name, E->line, E->size[0],
                        E->size[1]);
        L.tied = e;
    }
    size_t numel = kind == ND_LINEAR && L.tied < 0 ? (size_t)L.size[0] * (size_t)L.size[1]
                 : kind == ND_EMBEDDING           ? (size_t)L.size[0] * (size_t)L.size[1]
                                                  : 0;
    if (numel > INT_MAX)
        return perr(p, "%s %d %d: its weight would have %zu elements, more than %d", kw, L.size[0], L.size[1], numel,
                    INT_MAX);
    /* own tensors, in layout order: weight then bias */
    if ((kind == ND_LINEAR && L.tied < 0) || kind == ND_LAYERNORM || kind == ND_EMBEDDING) L.weight = nd->num_tensors++;
    if ((kind == ND_LINEAR && L.bias) || kind == ND_LAYERNORM) L.bias_t = nd->num_tensors++;

    if (nd->num_layers == nd->cap_layers) {
        int cap = nd->cap_layers ? 2 * nd->cap_layers : 16;
        void *q = realloc(nd->layers, (size_t)cap * sizeof *nd->layers);
        if (!q) return shs_set_error(SHS_HOST_OOM, "cannot allocate model description");
        nd->layers = q;
        nd->cap_layers = cap;
    }
    nd->layers[nd->num_layers++] = L;
    nd->units[nd->num_units - 1].num_layers++;
    return SHS_OK;
}

/* Widths along the forward pass, and what each unit needs when. */
static shs_status_t check_forward(parser_t *p) {
    shs_model_file_t *nd = p->nd;
    int width = -1, from = 0;   /* width of the running activation; the line that made it */
    nd->first_used = nd->last_used = -1;
    for (int i = 0; i < nd->num_layers; i++) {
        nd_layer_t *L = &nd->layers[i];
        if (!L->used) continue;
        p->line = L->line;
        const char *kw = kinds[L->kind].word;
        int in = -1, out = -1;
        switch (L->kind) {
        case ND_LINEAR: in = L->size[0], out = L->size[1]; break;
        case ND_LAYERNORM: in = out = L->size[0]; break;
        case ND_EMBEDDING:
            if (nd->first_used >= 0)
                return perr(p, "Embedding must be the first used layer (it reads the tokens); mark it 'unused' to "
                               "declare it here");
            out = L->size[1];
            break;
        case ND_GELU:
        case ND_RELU:
            if (width < 0)
                return perr(p, "%s cannot be the first used layer: its width is unknown (start with Linear, "
                               "LayerNorm or Embedding)", kw);
            in = out = width;
            break;
        }
        if (nd->first_used < 0) {
            nd->first_used = i;
            nd->in_w = L->kind == ND_EMBEDDING ? 0 : in;
        } else if (in != width) {
            return perr(p, "%s expects input width %d, but the layer before it (line %d) outputs %d", kw, in, from,
                        width);
        }
        L->in_w = L->kind == ND_EMBEDDING ? 0 : in;
        L->out_w = out;
        width = out;
        from = L->line;
        nd->last_used = i;
        if (in > nd->max_w) nd->max_w = in;
        if (out > nd->max_w) nd->max_w = out;
        /* own parameters read in the forward; in the backward only by what needs the weight for dinp */
        nd_unit_t *u = &nd->units[L->unit];
        if (L->weight >= 0 || L->bias_t >= 0) u->fwd_params = 1;
        if ((L->kind == ND_LINEAR && L->weight >= 0) || L->kind == ND_LAYERNORM) u->bwd_params = 1;
    }
    if (nd->num_layers == 0) {
        p->line = 0;
        return perr(p, "empty model (no layers)");
    }
    if (nd->first_used < 0) {
        p->line = 0;
        return perr(p, "no layer is used in the forward pass (every layer is 'unused')");
    }
    if (width == 0) {
        p->line = nd->layers[nd->last_used].line;
        return perr(p, "the last used layer outputs width 0; the loss needs at least 1 class");
    }
    nd->out_w = width;
    return SHS_OK;
}

static shs_status_t parse_line(parser_t *p, char *s) {
    char *hash = strchr(s, '#');
    if (hash) *hash = 0;
    char *tok[16];
    int ntok = 0;
    for (char *t = strtok(s, " \t\r\v\f"); t; t = strtok(NULL, " \t\r\v\f")) {
        if (ntok == 16) return perr(p, "too many words on one line (at most 16)");
        tok[ntok++] = t;
    }
    if (ntok == 0) return SHS_OK;
    if (strcmp(tok[0], "unit") == 0) return parse_unit(p, tok, ntok);
    for (int k = 0; k < (int)(sizeof kinds / sizeof kinds[0]); k++)
        if (strcmp(tok[0], kinds[k].word) == 0) return parse_layer(p, (nd_kind_t)k, tok, ntok);
    char b[48];
    return perr(p, "unknown layer '%s' (expected unit, Linear, LayerNorm, GELU, ReLU or Embedding)",
                show(b, sizeof b, tok[0]));
}

shs_status_t shs_model_file_parse(shs_model_file_t **out, const char *text, const char *source) {
    *out = NULL;
    shs_model_file_t *nd = calloc(1, sizeof *nd);
    if (!nd) return shs_set_error(SHS_HOST_OOM, "cannot allocate model description");
    snprintf(nd->source, sizeof nd->source, "%s", source ? source : "<text>");
    parser_t p = {nd, 0};
    shs_status_t st = SHS_OK;
    char line[ND_MAX_LINE + 2];
    const char *s = text;
    while (*s) {
        p.line++;
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n > ND_MAX_LINE) {
            st = perr(&p, "line longer than %d characters", ND_MAX_LINE);
            goto fail;
        }
        memcpy(line, s, n);
        line[n] = 0;
        SHS_CHECK_GOTO(parse_line(&p, line), st, fail);
        s += n + (e ? 1 : 0);
    }
    SHS_CHECK_GOTO(check_forward(&p), st, fail);
    *out = nd;
    return SHS_OK;
fail:
    shs_model_file_free(nd);
    return st;
}

shs_status_t shs_model_file_load(shs_model_file_t **out, const char *path) {
    *out = NULL;
    struct stat sb; /* a pipe or device could block or never end: regular files only */
    if (stat(path, &sb) != 0) return shs_set_error(SHS_IO, "cannot open model file '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return shs_set_error(SHS_IO, "model file '%s' is not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return shs_set_error(SHS_IO, "cannot open model file '%s': %s", path, strerror(errno));
    char *buf = malloc(ND_MAX_FILE + 1);
    if (!buf) {
        fclose(f);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate model description");
    }
    size_t n = fread(buf, 1, ND_MAX_FILE + 1, f);
    int err = ferror(f);
    fclose(f);
    shs_status_t st;
    if (err) st = shs_set_error(SHS_IO, "cannot read model file '%s'", path);
    else if (n > ND_MAX_FILE)
        st = shs_set_error(SHS_PARSE, "%s: larger than %zu bytes; not a model description", path, ND_MAX_FILE);
    else if (memchr(buf, 0, n))
        st = shs_set_error(SHS_PARSE, "%s: contains a NUL byte; not a model description", path);
    else {
        buf[n] = 0;
        st = shs_model_file_parse(out, buf, path);
    }
    free(buf);
    return st;
}

void shs_model_file_free(shs_model_file_t *nd) {
    if (!nd) return;
    free(nd->layers);
    free(nd->units);
    free(nd);
}

/* ---- layout -------------------------------------------------------------- */

shs_status_t shs_model_file_layout_create(shs_layout_t *lo, const shs_model_file_t *nd) {
    shs_layout_init(lo);
    shs_status_t st = SHS_OK;
    for (int u = 0; u < nd->num_units; u++) {
        const nd_unit_t *U = &nd->units[u];
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, U->name), st, fail);
        lo->units[u].replicated = U->replicated;
        for (int i = U->first_layer; i < U->first_layer + U->num_layers; i++) {
            const nd_layer_t *L = &nd->layers[i];
            char n[48];
            switch (L->kind) {
            case ND_LINEAR:
                snprintf(n, sizeof n, "%s.weight", L->name);
                if (L->weight >= 0)
                    SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[1], L->size[0], SHS_INIT_NORMAL, 0.02f), st,
                                   fail);
                snprintf(n, sizeof n, "%s.bias", L->name);
                if (L->bias_t >= 0) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[1], 1, SHS_INIT_ZEROS, 0), st, fail);
                break;
            case ND_LAYERNORM:
                snprintf(n, sizeof n, "%s.weight", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], 1, SHS_INIT_ONES, 0), st, fail);
                snprintf(n, sizeof n, "%s.bias", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], 1, SHS_INIT_ZEROS, 0), st, fail);
                break;
            case ND_EMBEDDING:
                snprintf(n, sizeof n, "%s.weight", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], L->size[1], SHS_INIT_NORMAL, 0.02f), st,
                               fail);
                break;
            case ND_GELU:
            case ND_RELU:
                break;
            }
        }
    }
    SHS_ASSERT(lo->num_tensors == nd->num_tensors);
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    shs_model_t base;           /* ops: nd_ops */
    const shs_model_file_t *nd;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B, T;
    float *acts_mem;            /* forward activations, one block */
    float *x0;                  /* (BT, in_w) input vectors (first used layer not an Embedding) */
    float **out;                /* per layer: (BT, out_w) output of a used layer, else NULL */
    const float **in;           /* per layer: its input in the forward pass (x0 or an earlier out) */
    float **mean, **rstd;       /* per layer: (BT) for LayerNorm */
    float *pos;                 /* (T, C) zeros for the encoder kernel's position term; dwpe scratch */
    float *probs, *losses;      /* (BT, K), (BT) */
    float *loss_sum;            /* (1) */
    float *dA, *dB;             /* (BT, max_w) backward ping-pong */
    float *dummy;               /* (1) stands in for the pointer of an empty tensor */
    int32_t *tokens, *targets;  /* (BT) device: token % V (Embedding input), target % K */
    int32_t *h_tok, *h_tgt;     /* (BT) host staging */
    float *h_x0;                /* (BT, in_w) host staging */
} nd_model_t;

static const shs_model_ops_t nd_ops;
static void nd_destroy(shs_model_t *m);

static float *carve(float *base, size_t *cursor, size_t n) {
    float *p = base ? base + *cursor : NULL;
    *cursor += n;
    return p;
}

static void layout_acts(nd_model_t *m, float *base, size_t *total) {
    const shs_model_file_t *nd = m->nd;
    size_t BT = (size_t)m->B * (size_t)m->T, cur = 0;
    m->x0 = carve(base, &cur, BT * (size_t)nd->in_w);
    const float *prev = m->x0;
    for (int i = 0; i < nd->num_layers; i++) {
        const nd_layer_t *L = &nd->layers[i];
        m->out[i] = m->mean[i] = m->rstd[i] = NULL;
        m->in[i] = NULL;
        if (!L->used) continue;
        m->in[i] = prev;
        prev = m->out[i] = carve(base, &cur, BT * (size_t)L->out_w);
        if (L->kind == ND_LAYERNORM) {
            m->mean[i] = carve(base, &cur, BT);
            m->rstd[i] = carve(base, &cur, BT);
        }
    }
    const nd_layer_t *F = &nd->layers[nd->first_used];
    m->pos = carve(base, &cur, F->kind == ND_EMBEDDING ? (size_t)m->T * (size_t)F->out_w : 0);
    m->probs = carve(base, &cur, BT * (size_t)nd->out_w);
    m->losses = carve(base, &cur, BT);
    m->loss_sum = carve(base, &cur, 1);
    m->dA = carve(base, &cur, BT * (size_t)nd->max_w);
    m->dB = carve(base, &cur, BT * (size_t)nd->max_w);
    m->dummy = carve(base, &cur, 1);
    *total = cur;
}

shs_status_t shs_model_file_model_create(shs_model_t **out, const shs_model_file_t *nd, const shs_layout_t *layout,
                                      shs_device_t *dev, int B, int T) {
    *out = NULL;
    if (B < 1 || T < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch and context must be >= 1 (got %d, %d)", B, T);
    if (layout->num_units != nd->num_units || layout->num_tensors != nd->num_tensors)
        return shs_set_error(SHS_INVALID_ARG, "layout (%d units, %d tensors) is not the one of '%s' (%d units, %d tensors)",
                             layout->num_units, layout->num_tensors, nd->source, nd->num_units, nd->num_tensors);
    if ((size_t)B * (size_t)T * (size_t)(nd->max_w > 1 ? nd->max_w : 1) > INT_MAX)
        return shs_set_error(SHS_INVALID_ARG,
                             "micro-batch %d x context %d is too large for '%s' (activations of width %d would have "
                             "more than 2^31 elements)", B, T, nd->source, nd->max_w);
    nd_model_t *m = calloc(1, sizeof *m);
    if (!m) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    m->base.ops = &nd_ops;
    m->nd = nd;
    m->layout = layout;
    m->dev = dev;
    m->B = B;
    m->T = T;
    size_t BT = (size_t)B * (size_t)T, L = (size_t)nd->num_layers, n_acts;
    m->out = calloc(L, sizeof *m->out);
    m->in = calloc(L, sizeof *m->in);
    m->mean = calloc(L, sizeof *m->mean);
    m->rstd = calloc(L, sizeof *m->rstd);
    m->h_tok = malloc(2 * BT * sizeof *m->h_tok);
    m->h_x0 = malloc((BT * (size_t)nd->in_w + 1) * sizeof *m->h_x0);
    shs_status_t st = SHS_OK;
    if (!m->out || !m->in || !m->mean || !m->rstd || !m->h_tok || !m->h_x0) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    m->h_tgt = m->h_tok + BT;
    layout_acts(m, NULL, &n_acts);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&m->acts_mem, n_acts * sizeof(float), SHS_MEM_ACTIVATIONS,
                                    "activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&m->tokens, 2 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    m->targets = m->tokens + BT;
    layout_acts(m, m->acts_mem, &n_acts);
    *out = &m->base;
    return SHS_OK;
fail:
    nd_destroy(&m->base);
    return st;
}

static void nd_destroy(shs_model_t *base) {
    nd_model_t *m = (nd_model_t *)base;
    if (!m) return;
    shs_device_free(m->dev, m->acts_mem);
    shs_device_free(m->dev, m->tokens);
    free(m->out);
    free(m->in);
    free(m->mean);
    free(m->rstd);
    free(m->h_tok);
    free(m->h_x0);
    free(m);
}

/* Element 0 of layout tensor `t` inside the unit buffer `base`. An empty
 * tensor is never read, but kernels want a valid pointer: the dummy. */
static const float *tensor_at(const nd_model_t *m, const float *base, int t) {
    const shs_tensor_info_t *ti = &m->layout->tensors[t];
    return ti->numel && base ? base + ti->offset : m->dummy;
}
static float *grad_at(const nd_model_t *m, float *base, int t) { return (float *)tensor_at(m, base, t); }

static shs_status_t nd_forward(shs_model_t *base, shs_param_source_t *src, const int32_t *tokens,
                               const int32_t *targets, float *mean_loss) {
    nd_model_t *m = (nd_model_t *)base;
    const shs_model_file_t *nd = m->nd;
    shs_device_t *d = m->dev;
    int BT = m->B * m->T, K = nd->out_w;
    const nd_layer_t *F = &nd->layers[nd->first_used];
    /* inputs: token % V for an Embedding, else the one-hot vector of token % in (zero width: nothing);
     * tokens and targets are bytes, read as unsigned */
    uint32_t V = F->kind == ND_EMBEDDING ? (uint32_t)F->size[0] : (nd->in_w > 0 ? (uint32_t)nd->in_w : 1u);
    for (int r = 0; r < BT; r++) {
        m->h_tok[r] = (int32_t)((uint32_t)tokens[r] % V);
        m->h_tgt[r] = (int32_t)((uint32_t)targets[r] % (uint32_t)K);
    }
    SHS_CHECK(shs_memcpy_h2d(d, m->tokens, m->h_tok, 2 * (size_t)BT * sizeof(int32_t)));
    if (F->kind != ND_EMBEDDING && nd->in_w > 0) {
        size_t W = (size_t)nd->in_w;
        memset(m->h_x0, 0, (size_t)BT * W * sizeof(float));
        for (int r = 0; r < BT; r++) m->h_x0[(size_t)r * W + (size_t)m->h_tok[r]] = 1.0f;
        SHS_CHECK(shs_memcpy_h2d(d, m->x0, m->h_x0, (size_t)BT * W * sizeof(float)));
    }

    for (int u = 0; u < nd->num_units; u++) {
        const nd_unit_t *U = &nd->units[u];
        const float *p = NULL;
        if (U->fwd_params) SHS_CHECK(src->acquire_params(src->self, u, &p));
        for (int i = U->first_layer; i < U->first_layer + U->num_layers; i++) {
            const nd_layer_t *L = &nd->layers[i];
            if (!L->used) continue;
            const float *x = m->in[i];
            float *y = m->out[i];
            size_t n = (size_t)BT * (size_t)L->out_w;
            switch (L->kind) {
            case ND_LINEAR: {
                const float *bias = L->bias_t >= 0 ? tensor_at(m, p, L->bias_t) : NULL;
                if (L->tied >= 0) {
                    /* the Embedding's weight (V, C) is this layer's (out, in): acquire its unit again */
                    const nd_layer_t *E = &nd->layers[L->tied];
                    const float *pe;
                    SHS_CHECK(src->acquire_params(src->self, E->unit, &pe));
                    shs_matmul_forward(d, y, x, tensor_at(m, pe, E->weight), bias, BT, L->in_w, L->out_w);
                    SHS_CHECK(src->release_params(src->self, E->unit));
                } else {
                    shs_matmul_forward(d, y, x, tensor_at(m, p, L->weight), bias, BT, L->in_w, L->out_w);
                }
                break;
            }
            case ND_LAYERNORM:
                shs_layernorm_forward(d, y, m->mean[i], m->rstd[i], x, tensor_at(m, p, L->weight),
                                      tensor_at(m, p, L->bias_t), BT, L->out_w);
                break;
            case ND_GELU: shs_gelu_forward(d, y, x, n); break;
            case ND_RELU: shs_relu_forward(d, y, x, n); break;
            case ND_EMBEDDING:
                /* the encoder kernel adds a position row: give it zeros (wte + 0 is exact) */
                SHS_CHECK(shs_memset(d, m->pos, 0, (size_t)m->T * (size_t)L->out_w * sizeof(float)));
                shs_encoder_forward(d, y, m->tokens, tensor_at(m, p, L->weight), m->pos, m->B, m->T, L->out_w);
                break;
            }
        }
        if (U->fwd_params) SHS_CHECK(src->release_params(src->self, u));
    }
    const float *logits = m->out[nd->last_used];
    shs_softmax_xent_forward(d, m->losses, m->probs, logits, m->targets, BT, K);
    shs_sum(d, m->loss_sum, m->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, m->loss_sum, sizeof sum));
    *mean_loss = sum / (float)BT;
    return SHS_OK;
}

/* Every unit, in reverse order, gets acquire_grads and then grads_ready once
 * its layers are done. A tied Linear adds into its Embedding's unit, which
 * comes earlier, so that unit's grads_ready still follows both uses. */
static shs_status_t nd_backward(shs_model_t *base, shs_param_source_t *src, float dloss) {
    nd_model_t *m = (nd_model_t *)base;
    const shs_model_file_t *nd = m->nd;
    shs_device_t *d = m->dev;
    int BT = m->B * m->T, K = nd->out_w;
    float *dcur = m->dA, *dnext = m->dB;
    shs_softmax_xent_backward(d, dcur, m->probs, m->targets, dloss / (float)BT, BT, K);
    for (int u = nd->num_units - 1; u >= 0; u--) {
        const nd_unit_t *U = &nd->units[u];
        const float *p = NULL;
        float *g;
        SHS_CHECK(src->acquire_grads(src->self, u, &g));
        if (U->bwd_params) SHS_CHECK(src->acquire_params(src->self, u, &p));
        for (int i = U->first_layer + U->num_layers - 1; i >= U->first_layer; i--) {
            const nd_layer_t *L = &nd->layers[i];
            if (!L->used) continue;
            const float *x = m->in[i];
            int first = i == nd->first_used;
            size_t n_in = (size_t)BT * (size_t)L->in_w;
            /* d(input): not needed for the first layer (its input is data), except as LayerNorm's scratch */
            if (!first || L->kind == ND_LAYERNORM) SHS_CHECK(shs_memset(d, dnext, 0, n_in * sizeof(float)));
            float *dinp = first && L->kind != ND_LAYERNORM ? NULL : dnext;
            switch (L->kind) {
            case ND_LINEAR: {
                float *dbias = L->bias_t >= 0 ? grad_at(m, g, L->bias_t) : NULL;
                if (L->tied >= 0) {
                    const nd_layer_t *E = &nd->layers[L->tied];
                    const float *pe;
                    float *ge;
                    SHS_CHECK(src->acquire_params(src->self, E->unit, &pe));
                    SHS_CHECK(src->acquire_grads(src->self, E->unit, &ge));
                    shs_matmul_backward(d, dinp, grad_at(m, ge, E->weight), dbias, dcur, x, tensor_at(m, pe, E->weight),
                                        BT, L->in_w, L->out_w);
                    SHS_CHECK(src->release_params(src->self, E->unit));
                } else {
                    shs_matmul_backward(d, dinp, grad_at(m, g, L->weight), dbias, dcur, x, tensor_at(m, p, L->weight),
                                        BT, L->in_w, L->out_w);
                }
                break;
            }
            case ND_LAYERNORM:
                shs_layernorm_backward(d, dnext, grad_at(m, g, L->weight), grad_at(m, g, L->bias_t), dcur, x,
                                       tensor_at(m, p, L->weight), m->mean[i], m->rstd[i], BT, L->out_w);
                break;
            case ND_GELU:
                if (dinp) shs_gelu_backward(d, dinp, x, dcur, n_in);
                break;
            case ND_RELU:
                if (dinp) shs_relu_backward(d, dinp, x, dcur, n_in);
                break;
            case ND_EMBEDDING:
                /* the position part lands in the scratch m->pos, re-zeroed by the next forward */
                shs_encoder_backward(d, grad_at(m, g, L->weight), m->pos, dcur, m->tokens, m->B, m->T, L->out_w);
                break;
            }
            float *t = dcur;
            dcur = dnext;
            dnext = t;
        }
        if (U->bwd_params) SHS_CHECK(src->release_params(src->self, u));
        SHS_CHECK(src->grads_ready(src->self, u));
    }
    return SHS_OK;
}

static const shs_model_ops_t nd_ops = {nd_forward, nd_backward, nd_destroy};
