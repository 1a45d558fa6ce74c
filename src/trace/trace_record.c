/* trace_record.c - per-rank recording of collectives and point-to-point
 * calls (see trace_record.h).
 * What it is not: the communicator (comm.c calls the hook) or a format. */
#include "shardsim/trace_record.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/clock.h"

typedef struct {
    shs_comm_call_info_t info;   /* marker points into rank_buf_t.markers */
    int comm;                    /* index into the recorder's comm table */
} entry_t;

/* One recorded handle of one rank: the user of its recorder hook. */
typedef struct hook {
    struct rank_buf *buf;
    int comm;                    /* index into the recorder's comm table */
    const shs_comm_t *handle;
    const struct hook *parent;   /* the hook of the handle it was split from; NULL if attached */
    struct hook *next;           /* the rank's hooks, newest first */
} hook_t;

typedef struct rank_buf {
    struct shs_trace_recorder *rec;
    int rank;
    entry_t *e;
    size_t n, cap;
    char **markers;              /* this rank's distinct markers */
    size_t nmarkers, markers_cap;
    int oom;
    hook_t *hooks;
} rank_buf_t;

/* A communicator of the trace. Attached ones are found by name; one split
 * from a recorded communicator by (parent, seq, color), which every member
 * of the split passes alike, and its members are filled in by each member
 * rank as it reports the split (-1 until then). */
typedef struct {
    char name[128];
    int size;
    int *members;
    int parent;                  /* index of the parent; -1 if attached */
    uint64_t seq;                /* the split's sequence number on the parent */
    int color;
} comm_desc_t;

struct shs_trace_recorder {
    int world;
    double origin;
    rank_buf_t *ranks;
    comm_desc_t *comms;          /* guarded by mu */
    int ncomms;
    pthread_mutex_t mu;
};

shs_status_t shs_trace_recorder_create(shs_trace_recorder_t **out, int world) {
    *out = NULL;
    if (world < 1 || world > SHS_TRACE_MAX_WORLD) return shs_set_error(SHS_INVALID_ARG, "recorder world %d", world);
    shs_trace_recorder_t *r = calloc(1, sizeof *r);
    if (!r || !(r->ranks = calloc((size_t)world, sizeof *r->ranks))) {
        free(r);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate trace recorder");
    }
    r->world = world;
    r->origin = shs_now_seconds();
    pthread_mutex_init(&r->mu, NULL);
    for (int i = 0; i < world; i++) r->ranks[i] = (rank_buf_t){.rec = r, .rank = i};
    *out = r;
    return SHS_OK;
}

void shs_trace_recorder_free(shs_trace_recorder_t *r) {
    if (!r) return;
    for (int i = 0; i < r->world; i++) {
        free(r->ranks[i].e);
        for (size_t k = 0; k < r->ranks[i].nmarkers; k++) free(r->ranks[i].markers[k]);
        free(r->ranks[i].markers);
        for (hook_t *h = r->ranks[i].hooks, *next; h; h = next) {
            next = h->next;
            free(h);
        }
    }
    for (int c = 0; c < r->ncomms; c++) free(r->comms[c].members);
    free(r->comms);
    free(r->ranks);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Append a communicator of `size` members to the table (mu held); its
 * members are `members`, or 0..size-1 for NULL, or all -1 for `unknown`.
 * Returns its index, -1 on OOM. */
static int add_comm(shs_trace_recorder_t *r, const char *name, int size, const int *members, int unknown) {
    comm_desc_t *nc = realloc(r->comms, (size_t)(r->ncomms + 1) * sizeof *nc);
    if (nc) r->comms = nc;
    int *m = malloc((size_t)size * sizeof(int));
    if (!nc || !m) {
        free(m);
        return -1;
    }
    for (int i = 0; i < size; i++) m[i] = unknown ? -1 : members ? members[i] : i;
    comm_desc_t *d = &r->comms[r->ncomms];
    *d = (comm_desc_t){.size = size, .members = m, .parent = -1};
    snprintf(d->name, sizeof d->name, "%s", name);
    return r->ncomms++;
}

/* Index of attached comm `name` in the recorder's table, adding it; -1 on OOM. */
static int comm_index(shs_trace_recorder_t *r, const shs_comm_t *comm, const int *members) {
    pthread_mutex_lock(&r->mu);
    int found = -1;
    for (int c = 0; c < r->ncomms && found < 0; c++)
        if (r->comms[c].parent < 0 && strcmp(r->comms[c].name, shs_comm_name(comm)) == 0) found = c;
    if (found < 0) found = add_comm(r, shs_comm_name(comm), shs_comm_size(comm), members, 0);
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* Index of the communicator that split number `seq` of recorded comm
 * `parent` made for `color`, adding it, and global rank `rank` as its member
 * `local`; -1 on OOM. Its trace name is "<parent>/<color>@<seq>": the
 * child's own name (comm.h) qualified by the split, since two splits of one
 * parent (hybrid sharding's shard and replica groups) both make a "/0". */
static int child_index(shs_trace_recorder_t *r, int parent, uint64_t seq, int color, const shs_comm_t *child,
                       int rank) {
    pthread_mutex_lock(&r->mu);
    int found = -1;
    for (int c = 0; c < r->ncomms && found < 0; c++)
        if (r->comms[c].parent == parent && r->comms[c].seq == seq && r->comms[c].color == color) found = c;
    if (found < 0) {
        char name[sizeof r->comms[0].name + 32];
        snprintf(name, sizeof name, "%s/%d@%llu", r->comms[parent].name, color, (unsigned long long)seq);
        found = add_comm(r, name, shs_comm_size(child), NULL, 1);
        if (found >= 0) {
            r->comms[found].parent = parent;
            r->comms[found].seq = seq;
            r->comms[found].color = color;
        }
    }
    int local = shs_comm_rank(child);
    if (found >= 0 && local >= 0 && local < r->comms[found].size) r->comms[found].members[local] = rank;
    pthread_mutex_unlock(&r->mu);
    return found;
}

static hook_t *new_hook(rank_buf_t *b, int comm, const shs_comm_t *handle, const hook_t *parent) {
    hook_t *h = malloc(sizeof *h);
    if (!h) return NULL;
    *h = (hook_t){.buf = b, .comm = comm, .handle = handle, .parent = parent, .next = b->hooks};
    b->hooks = h;
    return h;
}

static const char *keep_marker(rank_buf_t *b, const char *m) {
    if (!m || !*m) return "";
    for (size_t k = b->nmarkers; k-- > 0;)
        if (strcmp(b->markers[k], m) == 0) return b->markers[k];
    if (b->nmarkers == b->markers_cap) {
        size_t cap = b->markers_cap ? 2 * b->markers_cap : 16;
        char **nm = realloc(b->markers, cap * sizeof *nm);
        if (!nm) return NULL;
        b->markers = nm;
        b->markers_cap = cap;
    }
    char *d = strdup(m);
    if (!d) return NULL;
    b->markers[b->nmarkers++] = d;
    return d;
}

static void on_split(hook_t *h, const shs_comm_call_info_t *call);

static void on_call(void *user, const shs_comm_t *comm, const shs_comm_call_info_t *call) {
    (void)comm;
    hook_t *h = user;
    rank_buf_t *b = h->buf;
    if (call->status != SHS_OK || b->oom) return;
    if (call->op == SHS_OP_SPLIT) {
        on_split(h, call);
        return;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        entry_t *ne = realloc(b->e, cap * sizeof *ne);
        if (!ne) { b->oom = 1; return; }
        b->e = ne;
        b->cap = cap;
    }
    entry_t *e = &b->e[b->n];
    e->info = *call;
    e->comm = h->comm;
    /* a split communicator's calls carry its nearest ancestor's marker
     * (the trainer marks the world communicator only) */
    const char *m = call->marker;
    for (const hook_t *p = h->parent; (!m || !*m) && p; p = p->parent) m = shs_comm_marker(p->handle);
    e->info.marker = keep_marker(b, m);
    if (!e->info.marker) { b->oom = 1; return; }
    b->n++;
}

/* The split reported by `h`'s handle: record the new handle too, as its own
 * communicator (it has on_call with the parent's hook already). */
static void on_split(hook_t *h, const shs_comm_call_info_t *call) {
    rank_buf_t *b = h->buf;
    if (!call->newcomm) return;
    int c = child_index(b->rec, h->comm, call->seq, call->color, call->newcomm, b->rank);
    hook_t *child = c >= 0 ? new_hook(b, c, call->newcomm, h) : NULL;
    if (!child) {
        b->oom = 1;
        shs_comm_set_recorder(call->newcomm, NULL, NULL);
        return;
    }
    shs_comm_set_recorder(call->newcomm, on_call, child);
}

shs_status_t shs_trace_recorder_attach(shs_trace_recorder_t *r, shs_comm_t *comm, int rank, const int *members) {
    if (!r || !comm || rank < 0 || rank >= r->world)
        return shs_set_error(SHS_INVALID_ARG, "recorder attach: rank %d outside 0..%d", rank, r ? r->world - 1 : -1);
    rank_buf_t *b = &r->ranks[rank];
    int c = comm_index(r, comm, members);
    hook_t *h = c >= 0 ? new_hook(b, c, comm, NULL) : NULL;
    if (!h) return shs_set_error(SHS_HOST_OOM, "recorder attach: out of memory");
    shs_comm_set_recorder(comm, on_call, h);
    return SHS_OK;
}

/* 1 if comm a comes before comm b among the children of one parent, or
 * among the attached comms: by (seq, color), or by name. */
static int comm_before(const shs_trace_recorder_t *r, int a, int b) {
    const comm_desc_t *x = &r->comms[a], *y = &r->comms[b];
    if (x->parent < 0) return strcmp(x->name, y->name) < 0;
    return x->seq != y->seq ? x->seq < y->seq : x->color < y->color;
}

/* The trace's comm order, whatever order the ranks' threads added them in:
 * the attached comms by name, then, breadth first, each comm's children by
 * (seq, color). */
static void comm_order(const shs_trace_recorder_t *r, int *order) {
    int n = 0;
    for (int k = -1; k < n; k++) { /* k = -1: the attached comms */
        int parent = k < 0 ? -1 : order[k], first = n;
        for (int c = 0; c < r->ncomms; c++) {
            if (r->comms[c].parent != parent) continue;
            int i = n++;
            for (; i > first && comm_before(r, c, order[i - 1]); i--) order[i] = order[i - 1];
            order[i] = c;
        }
    }
}

shs_status_t shs_trace_recorder_finish(shs_trace_recorder_t *r, shs_trace_t **out) {
    *out = NULL;
    shs_trace_t *t;
    SHS_CHECK(shs_trace_create(&t, r->world));
    shs_status_t st = SHS_OK;
    int *ids = calloc((size_t)r->ncomms + 1, sizeof *ids), *order = calloc((size_t)r->ncomms + 1, sizeof *order);
    if (!ids || !order) st = shs_set_error(SHS_HOST_OOM, "cannot build trace");
    for (int c = 0; st == SHS_OK && c < r->ncomms; c++)
        for (int i = 0; st == SHS_OK && i < r->comms[c].size; i++)
            if (r->comms[c].members[i] < 0)
                st = shs_set_error(SHS_INVALID_ARG,
                                   "communicator '%s': its rank %d did not record the split that made it (a "
                                   "rank recorded by another recorder, e.g. another process)",
                                   r->comms[c].name, i);
    if (st == SHS_OK) comm_order(r, order);
    for (int k = 0; st == SHS_OK && k < r->ncomms; k++) {
        const comm_desc_t *d = &r->comms[order[k]];
        st = shs_trace_add_comm(t, d->name, d->size, d->members, &ids[order[k]]);
    }
    for (int k = 0; st == SHS_OK && k < r->world; k++) {
        rank_buf_t *b = &r->ranks[k];
        if (b->oom) st = shs_set_error(SHS_HOST_OOM, "rank %d ran out of memory while recording", k);
        for (size_t i = 0; st == SHS_OK && i < b->n; i++) {
            const shs_comm_call_info_t *ci = &b->e[i].info;
            shs_trace_rec_t rec = shs_trace_rec_init();
            rec.rank = k;
            rec.comm = ids[b->e[i].comm];
            rec.seq = (int64_t)ci->seq;
            rec.op = ci->op; /* never a split: on_call keeps those apart */
            rec.count = ci->count;
            rec.bytes = ci->bytes;
            if (rec.op != SHS_OP_BARRIER) rec.dtype = ci->dtype;
            if (rec.op == SHS_OP_REDUCE_SCATTER || rec.op == SHS_OP_ALL_REDUCE || rec.op == SHS_OP_REDUCE)
                rec.redop = ci->redop;
            if (rec.op == SHS_OP_BROADCAST || rec.op == SHS_OP_REDUCE) rec.root = ci->root;
            if (shs_coll_op_is_p2p(rec.op)) { /* seq: the (comm, peer) channel's; the peer as a global rank */
                rec.peer = r->comms[b->e[i].comm].members[ci->root];
                rec.tag = 0; /* as NCCL logs: shardsim's messages have no MPI tag */
            }
            rec.t_start = ci->t_start - r->origin;
            rec.t_end = ci->t_end - r->origin;
            if (rec.t_start < 0) rec.t_start = 0;
            if (rec.t_end < rec.t_start) rec.t_end = rec.t_start;
            rec.marker = shs_trace_intern(t, ci->marker);
            if (rec.marker == UINT32_MAX) st = shs_set_error(SHS_HOST_OOM, "cannot build trace");
            else st = shs_trace_append(t, &rec);
        }
    }
    free(ids);
    free(order);
    if (st != SHS_OK) {
        shs_trace_free(t);
        return st;
    }
    *out = t;
    return SHS_OK;
}

/* ---- unit markers ------------------------------------------------------ */

static void mark_unit(shs_param_decorator_t *d, shs_param_call_t call, int unit) {
    (void)call; /* every call marks */
    shs_trace_marking_source_t *w = (shs_trace_marking_source_t *)d;
    char m[SHS_COMM_MARKER_MAX];
    const char *cur = shs_comm_marker(w->comm);
    size_t plen = strcspn(cur, "/");
    const char *uname = unit >= 0 && unit < w->layout->num_units ? w->layout->units[unit].name : "?";
    snprintf(m, sizeof m, "%.*s/%s", (int)plen, cur, uname);
    shs_comm_set_marker(w->comm, m);
}

shs_param_source_t *shs_trace_marking_source(shs_trace_marking_source_t *w, shs_param_source_t *inner,
                                             shs_comm_t *comm, const shs_layout_t *layout) {
    w->comm = comm;
    w->layout = layout;
    return shs_param_decorator_init(&w->base, inner, mark_unit);
}
