/* trace_nccl_init.c - the communicators an NCCL log's "Init COMPLETE" lines
 * declare (see trace_nccl.h). Each line is one process's handle (a comm
 * pointer) of one communicator; handles group by commId, a split's by its
 * parent's communicator, splitCount and color (ncclCommSplit prints no
 * commId since NCCL 2.23), and, before 2.18 (no commId at all), by size.
 * The largest communicator is the world: a process's global rank is its
 * rank there.
 * What it is not: the line anatomy (trace_nccl_line.c) or the reading of
 * calls (trace_nccl.c). */
#include <stdlib.h>
#include <string.h>

#include "trace/import/trace_nccl.h"

static shs_status_t perr(const char *name, int64_t line, const char *fmt, const char *a, const char *b) {
    char m[512];
    snprintf(m, sizeof m, fmt, a, b);
    return shs_set_error(SHS_PARSE, "%s:%lld: %s", name, (long long)line, m);
}

shs_status_t shs__nccl_comms_add(shs__nccl_comms_t *c, int proc, long dev, int64_t line, const shs__nccl_init_t *f,
                                 const char *name) {
    if (c->ninst == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        shs__nccl_inst_t *ni = realloc(c->inst, cap * sizeof *ni);
        if (!ni) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
        c->inst = ni;
        c->cap = cap;
    }
    c->inst[c->ninst++] = (shs__nccl_inst_t){.proc = proc, .dev = (int)dev, .line = line, .f = *f, .group = -1};
    return SHS_OK;
}

void shs__nccl_comms_free(shs__nccl_comms_t *c) {
    for (int g = 0; g < c->ngroups; g++) free(c->groups[g].procs);
    free(c->groups);
    free(c->inst);
    free(c->global);
    *c = (shs__nccl_comms_t){0};
}

/* What makes two handles one communicator. */
typedef struct {
    int kind;            /* 0 commId, 1 split, 2 no commId (size only) */
    uint64_t id;         /* commId, or the parent's group */
    int64_t count, color;
    int nranks;
} gkey_t;

static gkey_t key_of(const shs__nccl_inst_t *x, int parent_group) {
    if (x->f.is_split && !x->f.has_id)
        return (gkey_t){1, (uint64_t)parent_group, x->f.split_count, x->f.color, 0};
    if (x->f.has_id) return (gkey_t){0, x->f.comm_id, 0, 0, 0};
    return (gkey_t){2, 0, 0, 0, x->f.nranks};
}

static int same_key(gkey_t a, gkey_t b) {
    return a.kind == b.kind && a.id == b.id && a.count == b.count && a.color == b.color && a.nranks == b.nranks;
}

/* The handle of process `proc` with pointer `ptr` initialized last before
 * handle i, or -1. */
static long handle_before(const shs__nccl_comms_t *c, size_t i, int proc, uint64_t ptr) {
    for (size_t k = i; k-- > 0;)
        if (c->inst[k].proc == proc && c->inst[k].f.ptr == ptr) return (long)k;
    return -1;
}

shs_status_t shs__nccl_comms_build(shs__nccl_comms_t *c, const shs__nccl_procs_t *procs, shs_trace_t *t,
                                   const char *name) {
    gkey_t *keys = calloc(c->ninst ? c->ninst : 1, sizeof *keys);
    int64_t *first_line = calloc(c->ninst ? c->ninst : 1, sizeof *first_line);
    c->groups = calloc(c->ninst ? c->ninst : 1, sizeof *c->groups);
    c->nprocs = (int)procs->n;
    c->global = malloc((procs->n ? procs->n : 1) * sizeof *c->global);
    shs_status_t st = SHS_OK;
    if (!keys || !first_line || !c->groups || !c->global) st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
    char a[160], b[160];
    /* group the handles in log order (a split's parent is grouped before it) */
    for (size_t i = 0; i < c->ninst && st == SHS_OK; i++) {
        shs__nccl_inst_t *x = &c->inst[i];
        int pg = -1;
        if (x->f.is_split && !x->f.has_id) {
            long p = handle_before(c, i, x->proc, x->f.parent);
            if (p < 0) {
                snprintf(a, sizeof a, "0x%llx", (unsigned long long)x->f.parent);
                st = perr(name, x->line, "ncclCommSplit of parent comm %s, which process %s initialized on no earlier "
                          "'Init COMPLETE' line", a, procs->keys[x->proc]);
                break;
            }
            pg = c->inst[p].group;
        }
        gkey_t k = key_of(x, pg);
        int g = 0;
        while (g < c->ngroups && !same_key(keys[g], k)) g++;
        if (g == c->ngroups) {
            shs__nccl_group_t *ng = &c->groups[c->ngroups++];
            ng->nranks = x->f.nranks;
            ng->tcomm = -1;
            if (!(ng->procs = malloc((size_t)x->f.nranks * sizeof *ng->procs))) {
                st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
                break;
            }
            for (int r = 0; r < x->f.nranks; r++) ng->procs[r] = -1;
            keys[g] = k;
            first_line[g] = x->line;
            char parent[48] = "";
            if (k.kind == 1) snprintf(parent, sizeof parent, "%.40s", c->groups[pg].name);
            if (k.kind == 0) snprintf(ng->name, sizeof ng->name, "comm-%llx", (unsigned long long)k.id);
            else if (k.kind == 1 && k.count >= 0)
                snprintf(ng->name, sizeof ng->name, "%s.split%lld.color%lld", parent, (long long)k.count,
                         (long long)k.color);
            else if (k.kind == 1) snprintf(ng->name, sizeof ng->name, "%s.color%lld", parent, (long long)k.color);
            else snprintf(ng->name, sizeof ng->name, "comm-n%d", k.nranks);
        }
        shs__nccl_group_t *gr = &c->groups[g];
        x->group = g;
        if (gr->nranks != x->f.nranks) {
            snprintf(a, sizeof a, "%d", x->f.nranks);
            snprintf(b, sizeof b, "%d (line %lld)", gr->nranks, (long long)first_line[g]);
            st = perr(name, x->line, "communicator with two sizes: nranks %s here, %s", a, b);
            break;
        }
        int had = gr->procs[x->f.rank];
        if (had >= 0 && had != x->proc) {
            if (k.kind == 0)
                snprintf(a, sizeof a, "rank %d of commId %llx is claimed by process %s", x->f.rank,
                         (unsigned long long)k.id, procs->keys[x->proc]);
            else
                snprintf(a, sizeof a, "rank %d of communicator %s is claimed by process %s", x->f.rank, gr->name,
                         procs->keys[x->proc]);
            snprintf(b, sizeof b, "%s%s", procs->keys[had],
                     k.kind == 2 ? " (NCCL before 2.18 prints no commId: two communicators of one size cannot be told "
                                   "apart)" : "");
            st = perr(name, x->line, "duplicate rank: %s and, earlier, by %s", a, b);
            break;
        }
        gr->procs[x->f.rank] = x->proc;
    }
    /* the world: the largest group; a process's global rank is its rank there */
    c->world = 0;
    for (int g = 1; g < c->ngroups && st == SHS_OK; g++)
        if (c->groups[g].nranks > c->groups[c->world].nranks) c->world = g;
    for (size_t p = 0; p < procs->n && st == SHS_OK; p++) c->global[p] = -1;
    if (st == SHS_OK && c->ngroups) {
        shs__nccl_group_t *w = &c->groups[c->world];
        snprintf(w->name, sizeof w->name, "world");
        for (int r = 0; r < w->nranks; r++)
            if (w->procs[r] >= 0) c->global[w->procs[r]] = r;
    }
    /* declare the groups: the world is the identity (a per-rank file shows one member only) */
    for (int g = 0; g < c->ngroups && st == SHS_OK; g++) {
        shs__nccl_group_t *gr = &c->groups[g];
        if (g == c->world) {
            if (shs_trace_grow_identity_comm(t, "world", gr->nranks, &gr->tcomm) != SHS_OK)
                st = perr(name, first_line[g], "bad communicator: %s%s", shs_last_error(), "");
            continue;
        }
        int *members = malloc((size_t)gr->nranks * sizeof *members);
        if (!members) { st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", name); break; }
        for (int r = 0; r < gr->nranks && st == SHS_OK; r++) {
            int p = gr->procs[r];
            if (p < 0) {
                snprintf(a, sizeof a, "rank %d of communicator %s (first at line %lld) has no 'Init COMPLETE' line", r,
                         gr->name, (long long)first_line[g]);
                st = perr(name, first_line[g], "incomplete communicator: %s%s", a, "");
            } else if (c->global[p] < 0) {
                snprintf(a, sizeof a, "process %s (rank %d of %s) has no rank in the largest communicator", procs->keys[p],
                         r, gr->name);
                st = perr(name, first_line[g], "%s, so its global rank is unknown%s", a, "");
            } else {
                members[r] = c->global[p];
            }
        }
        if (st == SHS_OK && shs_trace_add_comm(t, gr->name, gr->nranks, members, &gr->tcomm) != SHS_OK)
            st = perr(name, first_line[g], "bad communicator: %s%s", shs_last_error(), "");
        free(members);
    }
    free(keys);
    free(first_line);
    return st;
}
