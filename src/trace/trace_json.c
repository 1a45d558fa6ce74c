/* trace_json.c - helpers shared by the JSON trace readers (see trace_json.h). */
#include "trace/trace_json.h"

#include <ctype.h>
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

int shs__torch_dtype(const char *name, shs_dtype_t *out) {
    static const struct { const char *n; shs_dtype_t d; } m[] = {
        {"float", SHS_F32}, {"float32", SHS_F32}, {"double", SHS_F64}, {"float64", SHS_F64},
        {"half", SHS_F16}, {"float16", SHS_F16}, {"c10half", SHS_F16}, {"bfloat16", SHS_BF16}, {"c10bfloat16", SHS_BF16},
        {"int", SHS_I32}, {"int32", SHS_I32}, {"longint", SHS_I64}, {"long", SHS_I64}, {"int64", SHS_I64},
        {"byte", SHS_U8}, {"unsignedchar", SHS_U8}, {"uint8", SHS_U8}, {"char", SHS_I8}, {"signedchar", SHS_I8},
        {"int8", SHS_I8}, {"bool", SHS_U8}};
    char s[64];
    squash(name, s, sizeof s);
    const char *p = s;
    size_t n = strlen(p);
    if (strncmp(p, "tensor(", 7) == 0 && n > 8 && p[n - 1] == ')') { p += 7; n -= 8; }
    if (strncmp(p, "genericlist[tensor(", 19) == 0) { p += 19; n = strcspn(p, ")"); }
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (strlen(m[i].n) == n && strncmp(p, m[i].n, n) == 0) { *out = m[i].d; return 0; }
    return -1;
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
