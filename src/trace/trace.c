/* trace.c - the in-memory trace model (see trace.h): ranks' record arrays,
 * the communicator table, the string pool, byte-scope conversion.
 * What it is not: any file format (trace_text.c and the importers). */
#include "shardsim/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void free_records(shs_trace_rank_t *rk);

shs_status_t shs_trace_create(shs_trace_t **out, int world) {
    *out = NULL;
    if (world < 0 || world > SHS_TRACE_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "trace world %d out of range 0..%d", world, SHS_TRACE_MAX_WORLD);
    shs_trace_t *t = calloc(1, sizeof *t);
    if (!t) return shs_set_error(SHS_HOST_OOM, "cannot allocate trace");
    snprintf(t->format, sizeof t->format, "shardsim");
    if (shs_trace_intern(t, "") == UINT32_MAX /* id 0 is "" */ || shs_trace_ensure_world(t, world) != SHS_OK) {
        shs_trace_free(t);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate trace");
    }
    *out = t;
    return SHS_OK;
}

void shs_trace_free(shs_trace_t *t) {
    if (!t) return;
    for (int r = 0; r < t->world; r++) free_records(&t->ranks[r]);
    free(t->ranks);
    for (int c = 0; c < t->ncomms; c++) {
        free(t->comms[c].name);
        free(t->comms[c].ranks);
    }
    free(t->comms);
    for (uint32_t i = 0; i < t->nstrs; i++) free(t->strs[i]);
    free(t->strs);
    free(t);
}

shs_status_t shs_trace_ensure_world(shs_trace_t *t, int world) {
    if (world <= t->world) return SHS_OK;
    if (world > SHS_TRACE_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "rank %d beyond the largest world accepted (%d)", world - 1,
                             SHS_TRACE_MAX_WORLD);
    shs_trace_rank_t *r = realloc(t->ranks, (size_t)world * sizeof *r);
    if (!r) return shs_set_error(SHS_HOST_OOM, "cannot grow trace to %d ranks", world);
    memset(r + t->world, 0, (size_t)(world - t->world) * sizeof *r);
    t->ranks = r;
    t->world = world;
    return SHS_OK;
}

int shs_trace_find_comm(const shs_trace_t *t, const char *name) {
    for (int c = 0; c < t->ncomms; c++)
        if (strcmp(t->comms[c].name, name) == 0) return c;
    return -1;
}

int shs_trace_comm_local(const shs_trace_t *t, int c, int g) {
    if (c < 0 || c >= t->ncomms) return -1;
    const shs_trace_comm_t *cm = &t->comms[c];
    if (g < cm->size && cm->ranks[g] == g) return g; /* the common identity layout */
    for (int i = 0; i < cm->size; i++)
        if (cm->ranks[i] == g) return i;
    return -1;
}

shs_status_t shs_trace_add_comm(shs_trace_t *t, const char *name, int size, const int *ranks, int *id) {
    if (!name || !*name) return shs_set_error(SHS_INVALID_ARG, "communicator without a name");
    if (size < 1 || size > SHS_TRACE_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "communicator '%s': size %d out of range 1..%d", name, size,
                             SHS_TRACE_MAX_WORLD);
    int maxr = size - 1;
    if (ranks) {
        for (int i = 0; i < size; i++) {
            if (ranks[i] < 0 || ranks[i] >= SHS_TRACE_MAX_WORLD)
                return shs_set_error(SHS_INVALID_ARG, "communicator '%s': member rank %d out of range 0..%d", name,
                                     ranks[i], SHS_TRACE_MAX_WORLD - 1);
            if (ranks[i] > maxr) maxr = ranks[i];
        }
    }
    int c = shs_trace_find_comm(t, name);
    if (c >= 0) {
        const shs_trace_comm_t *cm = &t->comms[c];
        int same = cm->size == size;
        for (int i = 0; same && i < size; i++) same = cm->ranks[i] == (ranks ? ranks[i] : i);
        if (!same) return shs_set_error(SHS_INVALID_ARG, "communicator '%s' declared twice with different members", name);
        if (id) *id = c;
        return SHS_OK;
    }
    /* duplicates: a mark per member over [0, maxr] */
    unsigned char *seen = calloc((size_t)maxr + 1, 1);
    if (!seen) return shs_set_error(SHS_HOST_OOM, "cannot allocate communicator '%s'", name);
    for (int i = 0; i < size; i++) {
        int g = ranks ? ranks[i] : i;
        if (seen[g]++) {
            free(seen);
            return shs_set_error(SHS_INVALID_ARG, "communicator '%s': rank %d listed twice", name, g);
        }
    }
    free(seen);
    SHS_CHECK(shs_trace_ensure_world(t, maxr + 1));
    if (t->ncomms == t->comms_cap) {
        int cap = t->comms_cap ? 2 * t->comms_cap : 8;
        shs_trace_comm_t *nc = realloc(t->comms, (size_t)cap * sizeof *nc);
        if (!nc) return shs_set_error(SHS_HOST_OOM, "cannot allocate communicator '%s'", name);
        t->comms = nc;
        t->comms_cap = cap;
    }
    shs_trace_comm_t *cm = &t->comms[t->ncomms];
    cm->name = strdup(name);
    cm->ranks = malloc((size_t)size * sizeof(int));
    if (!cm->name || !cm->ranks) {
        free(cm->name);
        free(cm->ranks);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate communicator '%s'", name);
    }
    cm->size = size;
    for (int i = 0; i < size; i++) cm->ranks[i] = ranks ? ranks[i] : i;
    if (id) *id = t->ncomms;
    t->ncomms++;
    return SHS_OK;
}

shs_status_t shs_trace_grow_identity_comm(shs_trace_t *t, const char *name, int size, int *id) {
    int c = shs_trace_find_comm(t, name);
    if (c < 0) return shs_trace_add_comm(t, name, size, NULL, id);
    shs_trace_comm_t *cm = &t->comms[c];
    for (int i = 0; i < cm->size; i++)
        if (cm->ranks[i] != i) return shs_set_error(SHS_INVALID_ARG, "communicator '%s' is not the identity group", name);
    if (size > cm->size) {
        if (size > SHS_TRACE_MAX_WORLD) return shs_set_error(SHS_INVALID_ARG, "communicator '%s': size %d too large", name, size);
        int *nr = realloc(cm->ranks, (size_t)size * sizeof *nr);
        if (!nr) return shs_set_error(SHS_HOST_OOM, "cannot grow communicator '%s'", name);
        for (int i = cm->size; i < size; i++) nr[i] = i;
        cm->ranks = nr;
        cm->size = size;
        SHS_CHECK(shs_trace_ensure_world(t, size));
    }
    if (id) *id = c;
    return SHS_OK;
}

uint32_t shs_trace_intern(shs_trace_t *t, const char *s) {
    if (t->nstrs > 0 && (!s || !*s)) return 0;
    /* markers are few and repeat: look back over the most recent ones first */
    for (uint32_t i = t->nstrs; i-- > 1;)
        if (strcmp(t->strs[i], s) == 0) return i;
    if (t->nstrs == t->strs_cap) {
        uint32_t cap = t->strs_cap ? 2 * t->strs_cap : 16;
        char **ns = realloc(t->strs, cap * sizeof *ns);
        if (!ns) return UINT32_MAX;
        t->strs = ns;
        t->strs_cap = cap;
    }
    char *d = strdup(s ? s : "");
    if (!d) return UINT32_MAX;
    t->strs[t->nstrs] = d;
    return t->nstrs++;
}

const char *shs_trace_str(const shs_trace_t *t, uint32_t id) { return id < t->nstrs ? t->strs[id] : ""; }

shs_trace_rec_t shs_trace_rec_init(void) {
    return (shs_trace_rec_t){.rank = 0, .comm = 0, .seq = 0, .op = SHS_OP_ALL_REDUCE, .dtype = SHS_TRACE_NONE,
                             .redop = SHS_TRACE_NONE, .root = SHS_TRACE_NONE, .peer = SHS_TRACE_NONE,
                             .tag = SHS_TRACE_NONE, .scope = SHS_BYTES_PER_RANK, .t_start = -1, .t_end = -1};
}

/* Ops whose whole buffer is N x one rank's part. */
static int scales_with_n(shs_coll_op_t op) {
    return op == SHS_OP_ALL_GATHER || op == SHS_OP_REDUCE_SCATTER || op == SHS_OP_ALL_TO_ALL ||
           op == SHS_OP_ALL_TO_ALLV || op == SHS_OP_GATHER || op == SHS_OP_SCATTER;
}

/* Arrays of at least this many bytes live in a mapping of their own. */
#define MAP_FROM ((size_t)4 << 20)

/* Double a rank's record array. A large one is a mapping of its own that
 * mremap grows without copying, advised into huge pages where the kernel
 * offers them on request: a trace of millions of calls then takes far
 * fewer page faults as it fills (advice only). */
static shs_status_t grow_records(shs_trace_rank_t *rk) {
    size_t cap = rk->cap ? 2 * rk->cap : 64, bytes = cap * sizeof *rk->recs;
#if defined(MREMAP_MAYMOVE) && defined(MAP_ANONYMOUS)
    if (bytes >= MAP_FROM) {
        void *p = rk->mapped ? mremap(rk->recs, rk->cap * sizeof *rk->recs, bytes, MREMAP_MAYMOVE)
                             : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return SHS_HOST_OOM;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
        if (!rk->mapped) {
            if (rk->n) memcpy(p, rk->recs, rk->n * sizeof *rk->recs);
            free(rk->recs);
        }
        rk->recs = p;
        rk->cap = cap;
        rk->mapped = 1;
        return SHS_OK;
    }
#endif
    shs_trace_rec_t *nr = realloc(rk->recs, bytes);
    if (!nr) return SHS_HOST_OOM;
    rk->recs = nr;
    rk->cap = cap;
    return SHS_OK;
}

static void free_records(shs_trace_rank_t *rk) {
#if defined(MREMAP_MAYMOVE) && defined(MAP_ANONYMOUS)
    if (rk->mapped) {
        munmap(rk->recs, rk->cap * sizeof *rk->recs);
        return;
    }
#endif
    free(rk->recs);
}

int shs_trace_rank_traced(const shs_trace_t *t, int g) { return !t->views || t->ranks[g].n > 0; }

shs_bytes_scope_t shs_trace_input_scope(shs_coll_op_t op) {
    return op == SHS_OP_REDUCE_SCATTER || op == SHS_OP_SCATTER || op == SHS_OP_ALL_TO_ALL || op == SHS_OP_ALL_TO_ALLV
               ? SHS_BYTES_TOTAL
               : SHS_BYTES_PER_RANK;
}

shs_status_t shs_trace_append(shs_trace_t *t, const shs_trace_rec_t *r) {
    if (r->rank < 0 || r->rank >= t->world)
        return shs_set_error(SHS_INVALID_ARG, "rank %d outside the world of %d ranks", r->rank, t->world);
    if (r->comm < 0 || r->comm >= t->ncomms)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: undeclared communicator #%d", r->rank, r->comm);
    if ((int)r->op < 0 || r->op >= SHS_NUM_OPS || r->op == SHS_OP_SPLIT)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: invalid op", r->rank);
    if (r->dtype != SHS_TRACE_NONE && shs_dtype_size((shs_dtype_t)r->dtype) == 0)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: invalid dtype %d", r->rank, r->dtype);
    if (r->redop != SHS_TRACE_NONE && (r->redop < 0 || r->redop >= SHS_NUM_REDOPS))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: invalid reduce op %d", r->rank, r->redop);
    const shs_trace_comm_t *cm = &t->comms[r->comm];
    if (shs_trace_comm_local(t, r->comm, r->rank) < 0)
        return shs_set_error(SHS_INVALID_ARG, "rank %d is not a member of communicator '%s'", r->rank, cm->name);
    if (r->root != SHS_TRACE_NONE && (r->root < 0 || r->root >= cm->size))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: root %d outside communicator '%s' of %d ranks", r->rank,
                             r->root, cm->name, cm->size);
    if (shs_coll_op_is_p2p(r->op) && (r->peer < 0 || r->peer >= t->world))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: %s peer %d outside the world of %d ranks", r->rank,
                             shs_coll_op_name(r->op), r->peer, t->world);
    if (r->marker >= t->nstrs) return shs_set_error(SHS_INVALID_ARG, "rank %d: unknown marker id", r->rank);
    uint64_t es = r->dtype != SHS_TRACE_NONE ? shs_dtype_size((shs_dtype_t)r->dtype) : 1;
    uint64_t n = scales_with_n(r->op) ? (uint64_t)cm->size : 1;
    if (r->count > SHS_TRACE_MAX_BYTES / es || r->bytes > SHS_TRACE_MAX_BYTES || r->v_bytes > SHS_TRACE_MAX_BYTES ||
        (r->scope == SHS_BYTES_PER_RANK && r->bytes > SHS_TRACE_MAX_BYTES / n))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: %s of %llu elements, %llu bytes (%s) on %d ranks is above the "
                             "%llu-byte limit for one call", r->rank, shs_coll_op_name(r->op),
                             (unsigned long long)r->count, (unsigned long long)r->bytes,
                             r->scope == SHS_BYTES_TOTAL ? "total" : "per rank", cm->size,
                             (unsigned long long)SHS_TRACE_MAX_BYTES);
    /* times: unknown (negative) or a real clock's reading, the end not before the start */
    if (isnan(r->t_start) || isnan(r->t_end) || r->t_start > SHS_TRACE_MAX_TIME_S || r->t_end > SHS_TRACE_MAX_TIME_S ||
        (r->t_start >= 0 && r->t_end >= 0 && r->t_end < r->t_start))
        return shs_set_error(SHS_INVALID_ARG, "rank %d: %s times %g .. %g s are not a start and an end in 0..%.0f s "
                             "(2^63 ns)", r->rank, shs_coll_op_name(r->op), r->t_start, r->t_end, SHS_TRACE_MAX_TIME_S);
    shs_trace_rank_t *rk = &t->ranks[r->rank];
    if (rk->n == rk->cap && grow_records(rk) != SHS_OK)
        return shs_set_error(SHS_HOST_OOM, "cannot grow rank %d's trace", r->rank);
    rk->recs[rk->n++] = *r;
    return SHS_OK;
}

size_t shs_trace_num_records(const shs_trace_t *t) {
    size_t n = 0;
    for (int r = 0; r < t->world; r++) n += t->ranks[r].n;
    return n;
}

uint64_t shs_trace_rec_bytes(const shs_trace_t *t, const shs_trace_rec_t *r, shs_bytes_scope_t scope) {
    if (r->scope == scope || !scales_with_n(r->op)) return r->bytes;
    uint64_t n = (uint64_t)t->comms[r->comm].size;
    if (scope != SHS_BYTES_TOTAL) return r->bytes / n;
    return r->bytes > UINT64_MAX / n ? UINT64_MAX : r->bytes * n;
}

void shs_trace_renumber(shs_trace_t *t) {
    int64_t *next = calloc((size_t)(t->ncomms ? t->ncomms : 1), sizeof *next);
    if (!next) return;
    for (int r = 0; r < t->world; r++) {
        memset(next, 0, (size_t)(t->ncomms ? t->ncomms : 1) * sizeof *next);
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            shs_trace_rec_t *rec = &t->ranks[r].recs[i];
            rec->seq = next[rec->comm]++;
        }
    }
    free(next);
}
