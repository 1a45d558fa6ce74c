/* thread_split.c - the thread backend's split (ncclCommSplit): a
 * child shared state per color, made by its leader.
 * What it is not: the sync core (thread_sync.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm/thread/thread_impl.h"

/* ---- split ------------------------------------------------------------
 * Like ncclCommSplit. A color's members are the ranks posting that color,
 * ranked by (key, parent rank); its leader is the member of lowest parent rank.
 *   post+check  every rank posts (color, key), barrier, compare calls.
 *   create      each leader names the child (shs__split_name) and builds its
 *               shared state holding one reference per member and posts it
 *               in its slot; barrier.
 *   attach      each member takes its reference through a new handle.
 *   exit        barrier: leaders' slots stay readable until all attached.
 * If the create barrier fails nobody attached and the leader frees the child;
 * if the exit barrier fails every member drops its new handle.
 */
shs_status_t shs__thread_split(shs_comm_t *comm, const shs__call_t *call, shs_comm_t **newcomm, int *member_ranks) {
    shared_t *sh = ((rank_ctx_t *)comm->ctx)->sh;
    int n = sh->nranks, r = comm->rank, color = call->color;
    SHS_CHECK(shs__thread_begin(comm, call));

    int leader = -1, members = 0, newrank = 0;
    shs__split_member_t *order = color != SHS_SPLIT_NOCOLOR ? malloc((size_t)n * sizeof *order) : NULL;
    if (color != SHS_SPLIT_NOCOLOR) {
        for (int j = 0; j < n; j++) {
            const shs__call_t *c = POSTED(sh, j, call);
            if (c->color != color) continue;
            if (leader < 0) leader = j;
            if (order) order[members] = (shs__split_member_t){c->key, j};
            members++;
            if (c->key < call->key || (c->key == call->key && j < r)) newrank++;
        }
    }
    int sorted = order != NULL; /* the members are known (else: out of host memory) */
    if (order) {
        shs__split_order(order, members, member_ranks);
        free(order);
    }
    shared_t *child = NULL;
    if (leader == r && sorted) {
        char name[256];
        shs__split_name(comm, color, member_ranks, members, name, sizeof name);
        child = shs__thread_shared_create(members, sh->timeout_ms, name, members);
        atomic_store_explicit(&sh->slots[r].split_child, child, memory_order_release);
    }
    shs_status_t s = shs__thread_barrier_wait(comm, call);
    if (s != SHS_OK) {
        if (child) shs__thread_shared_free(child);
        return s;
    }

    shs_comm_t *mine = NULL;
    shs_status_t attach_status = SHS_OK;
    if (leader >= 0) {
        child = atomic_load_explicit(&sh->slots[leader].split_child, memory_order_acquire);
        if (!child) {
            attach_status = shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory "
                                          "creating the child for color %d", r, (unsigned long long)call->seq,
                                          sh->name, color);
        } else if (!sorted || !(mine = shs__comm_new(&shs__comm_thread_iface))) {
            shs__thread_shared_unref(child);
            attach_status = shs_set_error(SHS_HOST_OOM, "rank %d: split seq %llu on comm '%s': out of host memory",
                                          r, (unsigned long long)call->seq, sh->name);
        } else {
            atomic_store(&child->slots[newrank].taken, 1);
            attach_status = shs__thread_attach(mine, child, newrank);
            if (attach_status != SHS_OK) {
                free(mine);
                mine = NULL;
                shs__thread_shared_unref(child);
            }
        }
    }
    s = shs__thread_finish(comm, call, 1);
    if (s == SHS_OK) s = attach_status;
    if (s != SHS_OK) {
        if (mine) {
            shs__thread_destroy(mine);
            free(mine);
        }
        return s;
    }
    *newcomm = mine;
    return SHS_OK;
}
