/* trace_nccl_line.c - the anatomy of an NCCL log line (see trace_nccl.h):
 * NCCL's prefix "host:pid:tid [cudaDev] NCCL INFO" behind whatever header
 * a launcher adds, "Init COMPLETE" lines in every layout NCCL has printed
 * (src/init.cc of 2.4 to 2.27), and the table of processes.
 * What it is not: the reading of calls (trace_nccl.c) or the grouping of
 * communicators (trace_nccl_init.c). */
#include <stdlib.h>
#include <string.h>

#include "trace/import/trace_nccl.h"

/* Largest [cudaDev] read: a bound on the devices of one node, far above any. */
#define NCCL_MAX_DEV 65535
/* Tokens a launcher's header may take before "host:pid:tid" (Ray's "(RayTrainWorker pid=1, ip=h)" takes 3). */
#define MAX_HEADER_TOKENS 8

int shs__nccl_split_line(const char *line, size_t n, shs__nccl_line_t *x, char *why, size_t cap) {
    int k = shs__tokens(line, n, x->all, SHS__NCCL_MAX_TOKENS - 1);
    if (k < 5 || k > SHS__NCCL_MAX_TOKENS - 1) return 0;
    int at = -1; /* "NCCL" is the token after [cudaDev]: index 2 without a header */
    for (int i = 2; i < k - 1 && i <= MAX_HEADER_TOKENS + 2 && at < 0; i++)
        if (shs__tok_is(x->all[i], "NCCL") && shs__tok_is(x->all[i + 1], "INFO")) at = i;
    if (at < 0) return 0;
    x->tk = x->all + at + 2;
    x->nt = k - at - 2;
    /* host:pid:tid, after a header glued to it (torchrun writes "[default0]:" then the line) */
    const char *s = x->all[at - 2].s;
    size_t len = x->all[at - 2].n;
    for (size_t i = len; i >= 2; i--)
        if (s[i - 2] == ']' && s[i - 1] == ':') {
            s += i;
            len -= i;
            break;
        }
    size_t colon = len; /* host:pid:tid -> host:pid */
    while (colon > 0 && s[colon - 1] != ':') colon--;
    if (colon < 2 || colon == len) {
        snprintf(why, cap, "'%.*s' is not host:pid:tid", (int)(x->all[at - 2].n < 60 ? x->all[at - 2].n : 60),
                 x->all[at - 2].s);
        return -1;
    }
    x->proc = s;
    x->proc_n = colon - 1;
    const shs__tok_t *d = &x->all[at - 1];
    uint64_t v;
    if (d->n < 3 || d->s[0] != '[' || d->s[d->n - 1] != ']' || shs__parse_u64(d->s + 1, d->n - 2, 0, &v) ||
        v > NCCL_MAX_DEV) {
        snprintf(why, cap, "cudaDev '%.*s' is not a device number [0..%d]", (int)(d->n < 40 ? d->n : 40), d->s,
                 NCCL_MAX_DEV);
        return -1;
    }
    x->dev = (long)v;
    return 1;
}

int shs__nccl_is_init(const shs__tok_t *tk, int nt) {
    return nt >= 4 && shs__tok_is(tk[nt - 1], "COMPLETE") && shs__tok_is(tk[nt - 2], "Init");
}

int shs__nccl_parse_init(const shs__tok_t *tk, int nt, shs__nccl_init_t *f, char *why, size_t cap) {
    *f = (shs__nccl_init_t){.split_count = -1, .color = -1};
    int c = shs__tok_is(tk[0], "comm") ? 0 : nt > 1 && shs__tok_is(tk[1], "comm") ? 1 : -1;
    if (c < 0) {
        snprintf(why, cap, "want [ncclCommInitRank|ncclCommSplit|...] comm <ptr> rank <r> nranks <n> ... - Init "
                 "COMPLETE");
        return -1;
    }
    const shs__tok_t *rank = NULL, *nranks = NULL, *id = NULL, *parent = NULL, *color = NULL, *count = NULL;
    for (int i = c + 2; i + 1 < nt - 2; i++) {
        const shs__tok_t **slot = shs__tok_is(tk[i], "rank") ? &rank : shs__tok_is(tk[i], "nranks") ? &nranks
                                  : shs__tok_is(tk[i], "commId") ? &id : shs__tok_is(tk[i], "parent") ? &parent
                                  : shs__tok_is(tk[i], "color") ? &color : shs__tok_is(tk[i], "splitCount") ? &count
                                  : NULL;
        if (slot && !*slot) *slot = &tk[++i];
    }
    uint64_t r, n;
    int64_t v;
    if (shs__parse_u64(tk[c + 1].s, tk[c + 1].n, 2, &f->ptr)) {
        snprintf(why, cap, "comm pointer '%.*s' is not hexadecimal", (int)(tk[c + 1].n < 40 ? tk[c + 1].n : 40),
                 tk[c + 1].s);
        return -1;
    }
    if (!rank || !nranks || shs__parse_u64(rank->s, rank->n, 0, &r) || shs__parse_u64(nranks->s, nranks->n, 0, &n) ||
        n < 1 || n > SHS_TRACE_MAX_WORLD || r >= n) {
        snprintf(why, cap, "want rank <r> nranks <n> with 0 <= r < n <= %d", SHS_TRACE_MAX_WORLD);
        return -1;
    }
    f->rank = (int)r;
    f->nranks = (int)n;
    if (id) {
        if (shs__parse_u64(id->s, id->n, 1, &f->comm_id)) {
            snprintf(why, cap, "commId '%.*s' is not hexadecimal", (int)(id->n < 40 ? id->n : 40), id->s);
            return -1;
        }
        f->has_id = 1;
    }
    if (parent) {
        if (shs__parse_u64(parent->s, parent->n, 2, &f->parent) || !color || shs__parse_i64(color->s, color->n, &v) ||
            v < 0) {
            snprintf(why, cap, "a split's 'parent <ptr> ... color <c>' is malformed");
            return -1;
        }
        f->color = v;
        if (count) {
            if (shs__parse_i64(count->s, count->n, &v) || v < 0) {
                snprintf(why, cap, "splitCount '%.*s' is not a count", (int)(count->n < 40 ? count->n : 40), count->s);
                return -1;
            }
            f->split_count = v;
        }
        f->is_split = 1;
    }
    return 0;
}

static uint64_t key_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n; /* 8 bytes at a time, then FNV-1a on the tail */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int shs__nccl_proc_id(shs__nccl_procs_t *p, const char *key, size_t n) {
    uint64_t h = key_hash(key, n);
    if (p->nslot) {
        for (size_t i = h & (p->nslot - 1);; i = (i + 1) & (p->nslot - 1)) {
            uint32_t e = p->slot[i];
            if (!e) break;
            const char *k = p->keys[e - 1];
            if (strncmp(k, key, n) == 0 && k[n] == 0) return (int)e - 1;
        }
    }
    if (2 * (p->n + 1) > p->nslot) { /* grow and rehash */
        size_t ns = p->nslot ? 2 * p->nslot : 64;
        uint32_t *sl = calloc(ns, sizeof *sl);
        if (!sl) return -1;
        for (size_t id = 0; id < p->n; id++) {
            size_t i = key_hash(p->keys[id], strlen(p->keys[id])) & (ns - 1);
            while (sl[i]) i = (i + 1) & (ns - 1);
            sl[i] = (uint32_t)id + 1;
        }
        free(p->slot);
        p->slot = sl;
        p->nslot = ns;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        char **nk = realloc(p->keys, cap * sizeof *nk);
        if (!nk) return -1;
        p->keys = nk;
        p->cap = cap;
    }
    char *k = malloc(n + 1);
    if (!k) return -1;
    memcpy(k, key, n);
    k[n] = 0;
    p->keys[p->n] = k;
    size_t i = h & (p->nslot - 1);
    while (p->slot[i]) i = (i + 1) & (p->nslot - 1);
    p->slot[i] = (uint32_t)p->n + 1;
    return (int)p->n++;
}

void shs__nccl_procs_free(shs__nccl_procs_t *p) {
    for (size_t i = 0; i < p->n; i++) free(p->keys[i]);
    free(p->keys);
    free(p->slot);
    *p = (shs__nccl_procs_t){0};
}
