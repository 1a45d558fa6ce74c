/* trace_json.c - helpers shared by the JSON trace readers (see trace_json.h). */
#include "trace/trace_json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Lower-case, drop '_', ' ', ':' and a leading "nccl"/"c10d" prefix. */
static void squash(const char *s, char *out, size_t cap) {
    size_t k = 0;
    for (; *s && k + 1 < cap; s++)
        if (*s != '_' && *s != ' ' && *s != ':') out[k++] = (char)tolower((unsigned char)*s);
    out[k] = 0;
}

int shs__torch_coll_op(const char *name, shs_coll_op_t *op) {
    static const struct { const char *n; shs_coll_op_t op; } m[] = {
        {"allreduce", SHS_OP_ALL_REDUCE}, {"allreducecoalesced", SHS_OP_ALL_REDUCE},
        {"allgather", SHS_OP_ALL_GATHER}, {"allgatherbase", SHS_OP_ALL_GATHER},
        {"allgatherintotensor", SHS_OP_ALL_GATHER}, {"allgathercoalesced", SHS_OP_ALL_GATHER},
        {"allgatherintotensorcoalesced", SHS_OP_ALL_GATHER},
        {"reducescatter", SHS_OP_REDUCE_SCATTER}, {"reducescatterbase", SHS_OP_REDUCE_SCATTER},
        {"reducescattertensor", SHS_OP_REDUCE_SCATTER}, {"reducescattertensorcoalesced", SHS_OP_REDUCE_SCATTER},
        {"broadcast", SHS_OP_BROADCAST}, {"reduce", SHS_OP_REDUCE}, {"barrier", SHS_OP_BARRIER},
        {"alltoall", SHS_OP_ALL_TO_ALL}, {"alltoallbase", SHS_OP_ALL_TO_ALL}, {"alltoallv", SHS_OP_ALL_TO_ALLV},
        {"alltoallsingle", SHS_OP_ALL_TO_ALL}, {"sendrecv", SHS_OP_ALL_TO_ALL},
        {"gather", SHS_OP_GATHER}, {"scatter", SHS_OP_SCATTER}, {"send", SHS_OP_SEND}, {"recv", SHS_OP_RECV},
        {"wait", SHS_OP_WAIT}};
    char s[64];
    squash(name, s, sizeof s);
    const char *p = s;
    if (strncmp(p, "nccl", 4) == 0) p += 4;
    else if (strncmp(p, "c10d", 4) == 0) p += 4;
    size_t n = strlen(p);
    if (n && p[n - 1] == '_') n--;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strlen(m[i].n) == n && strncmp(p, m[i].n, n) == 0) { *op = m[i].op; return 0; }
    return -1;
}

int shs__torch_dtype(const char *name, int32_t *dtype, size_t *size) {
    /* torch's dtype names (c10/core/ScalarType.h, squashed) with their element
     * sizes; NONE: a real torch dtype shardsim has no dtype for */
    enum { NONE = SHS_TRACE_NONE };
    static const struct { const char *n; int32_t d; unsigned char size; } m[] = {
        {"float", SHS_F32, 4}, {"float32", SHS_F32, 4}, {"double", SHS_F64, 8}, {"float64", SHS_F64, 8},
        {"half", SHS_F16, 2}, {"float16", SHS_F16, 2}, {"c10half", SHS_F16, 2}, {"bfloat16", SHS_BF16, 2},
        {"c10bfloat16", SHS_BF16, 2}, {"int", SHS_I32, 4}, {"int32", SHS_I32, 4}, {"longint", SHS_I64, 8},
        {"long", SHS_I64, 8}, {"int64", SHS_I64, 8}, {"byte", SHS_U8, 1}, {"unsignedchar", SHS_U8, 1},
        {"uint8", SHS_U8, 1}, {"char", SHS_I8, 1}, {"signedchar", SHS_I8, 1}, {"int8", SHS_I8, 1},
        {"bool", SHS_U8, 1},
        {"short", NONE, 2}, {"int16", NONE, 2}, {"uint16", NONE, 2}, {"uint32", NONE, 4}, {"uint64", NONE, 8},
        {"float8e4m3fn", NONE, 1}, {"float8e5m2", NONE, 1}, {"float8e4m3fnuz", NONE, 1},
        {"float8e5m2fnuz", NONE, 1}, {"float8e8m0fnu", NONE, 1}, {"float4e2m1fnx2", NONE, 1},
        {"complexhalf", NONE, 4}, {"complexfloat", NONE, 8}, {"complexdouble", NONE, 16},
        {"complex32", NONE, 4}, {"complex64", NONE, 8}, {"complex128", NONE, 16},
        {"qint8", NONE, 1}, {"quint8", NONE, 1}, {"qint32", NONE, 4}, {"quint4x2", NONE, 1},
        {"quint2x4", NONE, 1}, {"bits8", NONE, 1}, {"bits16", NONE, 2}};
    char s[64];
    squash(name, s, sizeof s);
    const char *p = s;
    size_t n = strlen(p);
    if (strncmp(p, "tensor(", 7) == 0 && n > 8 && p[n - 1] == ')') { p += 7; n -= 8; }
    if (strncmp(p, "genericlist[tensor(", 19) == 0) { p += 19; n = strcspn(p, ")"); }
    if (n > 5 && strncmp(p, "torch.", 6) == 0) { p += 6; n -= 6; }
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strlen(m[i].n) == n && strncmp(p, m[i].n, n) == 0) {
            *dtype = m[i].d;
            *size = m[i].size;
            return 0;
        }
    return -1;
}

int shs__int_list(const char *s, int64_t **v, int *n, int *truncated) {
    *v = NULL;
    *n = 0;
    *truncated = 0;
    while (isspace((unsigned char)*s)) s++;
    if (*s++ != '[') return -1;
    size_t cap = 0;
    int64_t *a = NULL;
    for (int first = 1;; first = 0) {
        while (isspace((unsigned char)*s)) s++;
        if (*s == ']' && first) { s++; break; }
        if (strncmp(s, "...", 3) == 0 && !first) { /* the profiler's truncation */
            s += 3;
            while (isspace((unsigned char)*s)) s++;
            if (*s++ != ']') goto bad;
            *truncated = 1;
            break;
        }
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (end == s || errno || x < 0 || (uint64_t)x > SHS_TRACE_MAX_BYTES || *n >= SHS_TRACE_MAX_WORLD) goto bad;
        if ((size_t)*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *na = realloc(a, cap * sizeof *na);
            if (!na) goto bad;
            a = na;
        }
        a[(*n)++] = x;
        s = end;
        while (isspace((unsigned char)*s)) s++;
        if (*s == ',') { s++; continue; }
        if (*s++ != ']') goto bad;
        break;
    }
    while (isspace((unsigned char)*s)) s++;
    if (*s) goto bad;
    *v = a;
    return 0;
bad:
    free(a);
    *n = 0;
    return -1;
}

/* One side of an exchange: the elements this rank keeps (its own block)
 * of `elems`, split in rows list[n] (empty: g even blocks). */
static int own_block(const int64_t *list, int n, int g, int self, uint64_t elems, uint64_t *own, const char *side,
                     char *why, size_t cap) {
    if (n == 0) {
        if (elems % (uint64_t)g) {
            snprintf(why, cap, "%s: %llu elements do not split evenly among %d ranks", side, (unsigned long long)elems, g);
            return -1;
        }
        *own = elems / (uint64_t)g;
        return 0;
    }
    if (n != g) {
        snprintf(why, cap, "%s split sizes name %d ranks, the group has %d", side, n, g);
        return -1;
    }
    uint64_t rows = 0;
    for (int k = 0; k < n; k++) rows += (uint64_t)list[k];
    if (rows == 0 ? elems != 0 : elems % rows) {
        snprintf(why, cap, "%s split sizes sum to %llu rows, which do not divide its %llu elements", side,
                 (unsigned long long)rows, (unsigned long long)elems);
        return -1;
    }
    *own = rows ? (uint64_t)list[self] * (elems / rows) : 0;
    return 0;
}

int shs__a2av_bytes(const int64_t *in, int nin, const int64_t *out, int nout, int g, int self, uint64_t in_elems,
                    uint64_t out_elems, size_t es, uint64_t *v_bytes, char *why, size_t cap) {
    uint64_t own_in, own_out;
    if (g < 1 || self < 0 || self >= g) {
        snprintf(why, cap, "rank position %d outside a group of %d", self, g);
        return -1;
    }
    if (own_block(in, nin, g, self, in_elems, &own_in, "input", why, cap) ||
        own_block(out, nout, g, self, out_elems, &own_out, "output", why, cap))
        return -1;
    uint64_t sent = in_elems - own_in, recv = out_elems - own_out;
    *v_bytes = (sent > recv ? sent : recv) * (uint64_t)es;
    return 0;
}

#ifdef SHS_HAVE_JANSSON

int shs__json_int(const json_t *v, int64_t *out) {
    if (json_is_integer(v)) { *out = json_integer_value(v); return 0; }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d) || fabs(d) > 9e15) return -1;
        *out = (int64_t)d;
        return 0;
    }
    return -1;
}

int shs__json_rank_list(json_t *v, int **ranks, int *n) {
    *ranks = NULL;
    *n = 0;
    json_t *arr = v, *owned = NULL;
    if (json_is_string(v)) {
        owned = json_loads(json_string_value(v), JSON_DECODE_ANY, NULL);
        arr = owned;
    }
    if (!json_is_array(arr) || json_array_size(arr) > SHS_TRACE_MAX_WORLD) { json_decref(owned); return -1; }
    size_t k = json_array_size(arr);
    int *r = malloc((k ? k : 1) * sizeof *r);
    if (!r) { json_decref(owned); return -1; }
    for (size_t i = 0; i < k; i++) {
        int64_t x;
        if (shs__json_int(json_array_get(arr, i), &x) || x < 0 || x >= SHS_TRACE_MAX_WORLD) {
            free(r);
            json_decref(owned);
            return -1;
        }
        r[i] = (int)x;
    }
    json_decref(owned);
    *ranks = r;
    *n = (int)k;
    return 0;
}

#else

int shs__json_rank_list(struct json_t *v, int **ranks, int *n) {
    (void)v;
    *ranks = NULL;
    *n = 0;
    return -1;
}

#endif
