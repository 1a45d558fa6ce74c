/* comm_meta.c - the meta communicator backend (comm_meta.h): one handle that is
 * rank r of N with no other rank present. comm.c has already checked the
 * arguments, numbered the call and will count it in the stats; here every
 * collective, send and receive returns at once, touching no buffer. Splits
 * ask the color function what every parent rank passes and rank the child
 * as ncclCommSplit does: by (key, parent rank) among the ranks of one color.
 * What it is not: data movement or cross-rank checks (comm_thread.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "shardsim/comm_meta.h"

typedef struct {
    char name[256];
    shs_meta_color_fn color_fn;
    void *user;
    int splits;              /* splits made on this handle so far */
    int split_index;         /* which split of its parent made it; -1 for a root */
} meta_comm_t;

static shs_status_t meta_init_rank(shs_comm_t *comm, void *id_ctx, int rank) {
    return shs_set_error(SHS_UNSUPPORTED, "meta communicators are created by shs_comm_create_meta");
}
static void meta_id_release(void *id_ctx) {}
static shs_status_t meta_coll(shs_comm_t *comm, const shs__call_t *call) { return SHS_OK; }
static shs_status_t meta_p2p(shs_comm_t *comm, const shs__call_t *calls, int n, shs__copy_fn copy) { return SHS_OK; }
static void meta_abort(shs_comm_t *comm, const char *reason) {}
static void meta_job_failed(shs_comm_t *comm, const char *detail) {}
static void meta_destroy(shs_comm_t *comm) { free(comm->ctx); }

static shs_status_t meta_new(shs_comm_t **out, int nranks, int rank, const char *name, shs_meta_color_fn fn,
                             void *user);


static shs_status_t meta_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *member_ranks) {
    meta_comm_t *m = comm->ctx;
    int k = m->splits++;
    if (!m->color_fn)
        return shs_set_error(SHS_UNSUPPORTED, "rank %d: split on meta comm '%s' without a color function", comm->rank,
                             m->name);
    if (call->color == SHS_SPLIT_NOCOLOR) return SHS_OK;
    shs__split_member_t *order = malloc((size_t)comm->nranks * sizeof *order);
    if (!order) return shs_set_error(SHS_HOST_OOM, "rank %d: split on meta comm '%s': out of host memory", comm->rank,
                                     m->name);
    int members = 0, newrank = 0;
    for (int j = 0; j < comm->nranks; j++) {
        int key = 0, color = j == comm->rank ? call->color : m->color_fn(m->user, k, j, &key);
        if (j == comm->rank) key = call->key;
        if (color != call->color) continue;
        order[members++] = (shs__split_member_t){key, j};
        if (key < call->key || (key == call->key && j < comm->rank)) newrank++;
    }
    shs__split_order(order, members, member_ranks);
    free(order);
    char name[256];
    shs__split_name(comm, call->color, member_ranks, members, name, sizeof name);
    SHS_CHECK(meta_new(newcomm, members, newrank, name, NULL, NULL));
    ((meta_comm_t *)(*newcomm)->ctx)->split_index = k;
    /* the child reports to the parent's recorder (meta_run's timeline):
     * shs_comm_split hands it on */
    return SHS_OK;
}

static const shs__comm_iface_t meta_iface = {
    .name = "meta",
    .init_rank = meta_init_rank,
    .id_release = meta_id_release,
    .all_gather = meta_coll,
    .reduce_scatter = meta_coll,
    .all_reduce = meta_coll,
    .broadcast = meta_coll,
    .reduce = meta_coll,
    .barrier = meta_coll,
    .split = meta_split,
    .p2p = meta_p2p,
    .abort = meta_abort,
    .job_failed = meta_job_failed,
    .destroy = meta_destroy,
};

static shs_status_t meta_new(shs_comm_t **out, int nranks, int rank, const char *name, shs_meta_color_fn fn,
                             void *user) {
    shs_comm_t *c = shs__comm_new(&meta_iface);
    meta_comm_t *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c);
        free(m);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate a meta communicator");
    }
    snprintf(m->name, sizeof m->name, "%s", name ? name : "world");
    m->color_fn = fn;
    m->user = user;
    m->split_index = -1;
    c->ctx = m;
    c->rank = rank;
    c->nranks = nranks;
    c->name = m->name;
    *out = c;
    return SHS_OK;
}

shs_status_t shs_comm_create_meta(shs_comm_t **out, int nranks, int rank, const char *name,
                                  shs_meta_color_fn color_fn, void *user) {
    if (!out) return shs_set_error(SHS_INVALID_ARG, "shs_comm_create_meta: out is NULL");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return shs_set_error(SHS_INVALID_ARG, "shs_comm_create_meta: rank %d of %d", rank, nranks);
    SHS_CHECK(meta_new(out, nranks, rank, name, color_fn, user));
    shs__job_t *job = shs__job_create();
    shs_status_t st = job ? shs__job_join(*out, job, NULL)
                          : shs_set_error(SHS_HOST_OOM, "cannot allocate a meta communicator");
    shs__job_unref(job); /* the members hold it */
    if (st != SHS_OK) {
        shs_comm_destroy(*out);
        *out = NULL;
    }
    return st;
}

int shs_comm_is_meta(const shs_comm_t *comm) { return comm && comm->iface == &meta_iface; }

int shs_comm_meta_split_index(const shs_comm_t *comm) {
    return shs_comm_is_meta(comm) ? ((const meta_comm_t *)comm->ctx)->split_index : -1;
}
