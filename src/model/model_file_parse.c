/* model_file_parse.c - the parser of model-description files: lines to
 * layers and wrap units, every error naming file:line (see model_file.h;
 * the format is in README.md, "Model-description files").
 * What it is not: the layout or the model (model_file.c).
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
#include "model/model_file_impl.h"

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
