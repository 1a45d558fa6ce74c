/* comm.c - the public collective API: names, argument checks, sequence
 * numbers and per-rank stats, then dispatch to the backend's vtable
 * (comm_impl.h).
 *
 * What it is: everything about a call that one rank can decide alone.
 * Argument errors return SHS_INVALID_ARG on that rank only, consume no
 * sequence number and leave the communicator usable (as NCCL's
 * ncclInvalidArgument); the other ranks, already inside the collective, then
 * wait for this rank until it calls again correctly or the timeout fires.
 * Stats count completed calls only.
 * What it is not: data movement or cross-rank checks (see comm_thread.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/names.h"
#include "shardsim/log.h"
#include "shardsim/clock.h"

#define SHS_NAME_COL2(id, name) name,
#define SHS_NAME_COL3(id, name, kind) name,
static const char *const redop_names[] = {SHS_REDOP_MAP(SHS_NAME_COL2)};
static const char *const reduce_order_names[] = {SHS_REDUCE_ORDER_MAP(SHS_NAME_COL2)};
static const char *const coll_op_names[] = {SHS_COMM_OP_MAP(SHS_NAME_COL3) SHS_TRACE_OP_MAP(SHS_NAME_COL3)};
#define SHS_KIND_COL(id, name, kind) SHS_OPK_##kind,
static const shs_op_kind_t coll_op_kinds[] = {SHS_COMM_OP_MAP(SHS_KIND_COL) SHS_TRACE_OP_MAP(SHS_KIND_COL)};
#undef SHS_KIND_COL

const char *shs_reduce_order_name(shs_reduce_order_t order) {
    return shs__name_of(reduce_order_names, SHS_NUM_REDUCE_ORDERS, (int)order, "invalid");
}

int shs_reduce_order_parse(const char *name, shs_reduce_order_t *out) {
    int k = shs__name_find(reduce_order_names, SHS_NUM_REDUCE_ORDERS, name);
    if (k >= 0) *out = (shs_reduce_order_t)k;
    return k >= 0 ? 0 : -1;
}

static int redop_valid(shs_redop_t op) { return (int)op >= 0 && op < SHS_NUM_REDOPS; }

const char *shs_redop_name(shs_redop_t op) { return shs__name_of(redop_names, SHS_NUM_REDOPS, (int)op, "invalid"); }

int shs_redop_parse(const char *name, shs_redop_t *out) {
    int k = shs__name_find(redop_names, SHS_NUM_REDOPS, name);
    if (k >= 0) *out = (shs_redop_t)k;
    return k >= 0 ? 0 : -1;
}

const char *shs_coll_op_name(shs_coll_op_t op) { return shs__name_of(coll_op_names, SHS_NUM_OPS, (int)op, "invalid"); }

int shs_coll_op_parse(const char *name, shs_coll_op_t *out) {
    int k = shs__name_find(coll_op_names, SHS_NUM_OPS, name);
    if (k >= 0) *out = (shs_coll_op_t)k;
    return k >= 0 ? 0 : -1;
}

shs_op_kind_t shs_coll_op_kind(shs_coll_op_t op) {
    return (int)op >= 0 && op < SHS_NUM_OPS ? coll_op_kinds[op] : SHS_OPK_WAIT;
}

int shs_coll_op_is_p2p(shs_coll_op_t op) { return shs_coll_op_kind(op) == SHS_OPK_P2P; }
int shs_coll_op_is_collective(shs_coll_op_t op) { return (int)op >= 0 && op < SHS_NUM_OPS && coll_op_kinds[op] == SHS_OPK_COLL; }

/* ---- call tags --------------------------------------------------------- */

static const char *const tag_kind_names[] = {SHS_TAG_KIND_MAP(SHS_NAME_COL2)};

uint64_t shs_comm_tag_pack(shs_tag_kind_t kind, int unit, int micro, long step) {
    uint64_t u = unit < 0 ? 0 : ((uint64_t)unit + 1) & 0xffff, m = micro < 0 ? 0 : (uint64_t)micro & 0xff;
    return ((uint64_t)kind & 0xff) << 56 | m << 48 | u << 32 | ((uint64_t)step & 0xffffffffu);
}

void shs_comm_tag_format(char *buf, size_t size, uint64_t tag) {
    unsigned kind = (unsigned)(tag >> 56);
    if (tag == 0) snprintf(buf, size, "untagged");
    else if (kind == SHS_TAG_RAW) snprintf(buf, size, "tag %llu", (unsigned long long)tag);
    else if (kind >= SHS_NUM_TAG_KINDS) snprintf(buf, size, "tag 0x%016llx", (unsigned long long)tag);
    else {
        size_t len = 0;
        unsigned unit = (unsigned)(tag >> 32) & 0xffff, step = (unsigned)(tag & 0xffffffffu);
        if (size) buf[0] = '\0';
        shs__appendf(buf, size, &len, "[%s", tag_kind_names[kind]);
        if (unit) shs__appendf(buf, size, &len, " unit %u", unit - 1);
        shs__appendf(buf, size, &len, " micro %u", (unsigned)(tag >> 48) & 0xff);
        if (step) shs__appendf(buf, size, &len, " step %u", step);
        shs__appendf(buf, size, &len, "]");
    }
}

void shs_comm_set_tag(shs_comm_t *comm, uint64_t tag) {
    if (comm) comm->tag = tag;
}

uint64_t shs_comm_tag(const shs_comm_t *comm) { return comm ? comm->tag : 0; }

static void call_fields_format(char *buf, size_t size, const shs__call_t *c) {
    const char *name = shs_coll_op_name(c->op), *dt = shs_dtype_name(c->dtype), *rd = shs_redop_name(c->redop);
    unsigned long long n = (unsigned long long)c->count;
    switch (c->op) {
    case SHS_OP_ALL_GATHER: snprintf(buf, size, "%s(count=%llu, dtype=%s)", name, n, dt); break;
    case SHS_OP_REDUCE_SCATTER:
    case SHS_OP_ALL_REDUCE:
        snprintf(buf, size, "%s(count=%llu, dtype=%s, op=%s%s)", name, n, dt, rd,
                 c->order == SHS_REDUCE_ORDER_RING ? ", order=ring" : "");
        break;
    case SHS_OP_BROADCAST: snprintf(buf, size, "%s(count=%llu, dtype=%s, root=%d)", name, n, dt, c->root); break;
    case SHS_OP_REDUCE:
        snprintf(buf, size, "%s(count=%llu, dtype=%s, op=%s, root=%d)", name, n, dt, rd, c->root);
        break;
    case SHS_OP_SEND:
    case SHS_OP_RECV: snprintf(buf, size, "%s(count=%llu, dtype=%s, peer=%d)", name, n, dt, c->root); break;
    default: snprintf(buf, size, "%s()", name); break;
    }
}

void shs__call_format(char *buf, size_t size, const shs__call_t *c) {
    call_fields_format(buf, size, c);
    size_t len = strlen(buf);
    if (c->tag && len + 1 < size) {
        buf[len++] = ' ';
        shs_comm_tag_format(buf + len, size - len, c->tag);
    }
}

/* Every field of comm.h's check but the tag. */
static int call_fields_match(const shs__call_t *a, const shs__call_t *b) {
    return a->op == b->op && a->seq == b->seq && a->count == b->count && a->dtype == b->dtype &&
           a->redop == b->redop && a->root == b->root && a->order == b->order;
}

int shs__check_calls(int n, shs__call_get_fn get, const void *ctx, const char *comm_name, char *detail,
                     size_t size) {
    shs__call_t buf_ref, buf_j, buf_bad;
    const shs__call_t *ref = get(ctx, 0, &buf_ref);
    int ref_rank = 0, first_bad = -1, nbad = 0;
    for (int j = 1; j < n; j++) {
        if (call_fields_match(ref, get(ctx, j, &buf_j))) continue;
        if (first_bad < 0) first_bad = j;
        nbad++;
    }
    if (first_bad < 0) { /* fields agree: the nonzero tags against the first one */
        ref_rank = -1;
        for (int j = 0; j < n; j++) {
            const shs__call_t *c = get(ctx, j, ref_rank < 0 ? &buf_ref : &buf_j);
            if (!c->tag) continue;
            if (ref_rank < 0) {
                ref = c;
                ref_rank = j;
            } else if (c->tag != ref->tag) {
                if (first_bad < 0) first_bad = j;
                nbad++;
            }
        }
        if (first_bad < 0) return 1;
    }
    const shs__call_t *bad = get(ctx, first_bad, &buf_bad);
    char a[256], b[256];
    shs__call_format(a, sizeof a, ref);
    shs__call_format(b, sizeof b, bad);
    size_t len = 0;
    if (size) detail[0] = '\0';
    if (ref->seq == bad->seq)
        shs__appendf(detail, size, &len, "comm '%s' seq %llu: rank %d called %s but rank %d called %s", comm_name,
                     (unsigned long long)ref->seq, ref_rank, a, first_bad, b);
    else
        shs__appendf(detail, size, &len, "comm '%s': rank %d called %s at seq %llu but rank %d called %s at seq %llu",
                     comm_name, ref_rank, a, (unsigned long long)ref->seq, first_bad, b,
                     (unsigned long long)bad->seq);
    if (nbad > 1) shs__appendf(detail, size, &len, " (%d ranks differ from rank %d)", nbad, ref_rank);
    return 0;
}

static int member_cmp(const void *a, const void *b) {
    const shs__split_member_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

void shs__split_order(shs__split_member_t *m, int n, int *ranks) {
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    for (int i = 0; i < n; i++) ranks[i] = m[i].rank;
}

void shs__call_prefix(char *buf, size_t size, int rank, const shs__call_t *call, const char *comm_name) {
    if (shs_coll_op_is_p2p(call->op))
        snprintf(buf, size, "rank %d: %s %s rank %d seq %llu on comm '%s': ", rank, shs_coll_op_name(call->op),
                 call->op == SHS_OP_SEND ? "to" : "from", call->root, (unsigned long long)call->seq, comm_name);
    else
        snprintf(buf, size, "rank %d: %s seq %llu on comm '%s': ", rank, shs_coll_op_name(call->op),
                 (unsigned long long)call->seq, comm_name);
}

/* ---- communicator lifetime ------------------------------------------- */

shs_comm_t *shs__comm_new(const shs__comm_iface_t *iface) {
    shs_comm_t *comm = calloc(1, sizeof *comm);
    if (comm) comm->iface = iface;
    return comm;
}

void shs_comm_id_release(shs_comm_id_t *id) {
    if (!id) return;
    id->iface->id_release(id->ctx);
    shs__job_unref(id->job);
    free(id);
}

shs_status_t shs_comm_init_rank(shs_comm_t **comm, shs_comm_id_t *id, int rank) {
    if (!comm || !id) return shs_set_error(SHS_INVALID_ARG, "shs_comm_init_rank: %s is NULL", comm ? "id" : "comm");
    *comm = NULL;
    shs_comm_t *c = shs__comm_new(id->iface);
    if (!c) return shs_set_error(SHS_HOST_OOM, "shs_comm_init_rank: out of host memory");
    shs_status_t s = id->iface->init_rank(c, id->ctx, rank);
    if (s != SHS_OK) { free(c); return s; }
    if (id->job && (s = shs__job_join(c, id->job, NULL)) != SHS_OK) {
        shs_comm_destroy(c);
        return s;
    }
    shs_log_set_rank(rank);
    SHS_LOG(INFO, COMM, "comm '%s' created: rank %d of %d (%s)", shs_comm_name(c), shs_comm_rank(c), shs_comm_size(c),
            id->iface->name);
    *comm = c;
    return SHS_OK;
}

void shs_comm_destroy(shs_comm_t *comm) {
    if (!comm) return;
    shs__job_leave(comm); /* first: a failing job no longer reaches this handle */
    comm->iface->destroy(comm);
    free(comm->p2p_seq);
    free(comm);
}

int shs_comm_rank(const shs_comm_t *comm) { return comm ? comm->rank : -1; }
int shs_comm_size(const shs_comm_t *comm) { return comm ? comm->nranks : 0; }
const char *shs_comm_name(const shs_comm_t *comm) { return comm ? comm->name : ""; }

void shs_comm_get_stats(const shs_comm_t *comm, shs_comm_stats_t *out) {
    if (!out) return;
    if (!comm) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = comm->stats;
    /* ring model, from the exact byte totals (rounded down once, not per call) */
    uint64_t n = (uint64_t)comm->nranks;
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        uint64_t num = op == SHS_OP_ALL_REDUCE ? 2 * (n - 1) : op == SHS_OP_SEND ? n : op == SHS_OP_RECV ? 0 : n - 1;
        out->bytes_sent[op] = (uint64_t)((unsigned __int128)out->bytes[op] * num / n);
    }
}

shs_status_t shs_comm_set_reduce_order(shs_comm_t *comm, shs_reduce_order_t order) {
    if (!comm) return shs_set_error(SHS_INVALID_ARG, "shs_comm_set_reduce_order: comm is NULL");
    if ((int)order < 0 || order >= SHS_NUM_REDUCE_ORDERS)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: shs_comm_set_reduce_order on comm '%s': unknown order %d",
                             comm->rank, comm->name, (int)order);
    comm->reduce_order = order;
    return SHS_OK;
}

shs_reduce_order_t shs_comm_reduce_order(const shs_comm_t *comm) {
    return comm ? comm->reduce_order : SHS_REDUCE_ORDER_RANK;
}

void shs_comm_abort(shs_comm_t *comm, const char *reason) {
    if (!comm) return;
    comm->iface->abort(comm, reason ? reason : "(no reason given)");
    char detail[1024];
    snprintf(detail, sizeof detail, "rank %d aborted comm '%s': %s", comm->rank, comm->name,
             reason ? reason : "(no reason given)");
    shs__job_fail(comm, detail);
}

/* ---- argument checks --------------------------------------------------- */

shs_status_t shs__comm_arg_error(const shs_comm_t *comm, shs_coll_op_t op, const char *what) {
    return shs_set_error(SHS_INVALID_ARG, "rank %d: %s on comm '%s': %s", comm->rank, shs_coll_op_name(op),
                         comm->name, what);
}

shs_status_t shs__copy_host(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memcpy(dst, src, bytes);
    return SHS_OK;
}

/* Byte ranges [a, a+an) and [b, b+bn) share a byte. */
static int overlaps(const void *a, size_t an, const void *b, size_t bn) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return an && bn && pa < pb + bn && pb < pa + an;
}

shs_status_t shs__comm_check_call(const shs_comm_t *comm, const shs__call_t *c, int needs_redop, size_t *bytes) {
    size_t esize = shs_dtype_size(c->dtype); /* 0: invalid */
    if (esize == 0) return shs__comm_arg_error(comm, c->op, "invalid dtype");
    if (needs_redop && !redop_valid(c->redop)) return shs__comm_arg_error(comm, c->op, "invalid reduction op");
    if (c->count > SIZE_MAX / esize / (size_t)comm->nranks)
        return shs__comm_arg_error(comm, c->op, "count too large (byte size overflows)");
    *bytes = c->count * esize;
    return SHS_OK;
}

static shs_status_t check_root(const shs_comm_t *comm, const shs__call_t *c) {
    if (c->root < 0 || c->root >= comm->nranks) {
        char what[64];
        snprintf(what, sizeof what, "root %d out of range [0, %d)", c->root, comm->nranks);
        return shs__comm_arg_error(comm, c->op, what);
    }
    return SHS_OK;
}

static shs__call_t new_call(shs_comm_t *comm, shs_coll_op_t op, const void *sendbuf, void *recvbuf, size_t count,
                            shs_dtype_t dtype, shs_redop_t redop, int root) {
    return (shs__call_t){.op = op, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype,
                         .redop = redop, .root = root, .tag = comm->tag};
}

/* A tag as the error text writes it, by value (for a log line's argument). */
typedef struct { char s[80]; } tag_text_t;
static tag_text_t tag_text(uint64_t tag) {
    tag_text_t t;
    shs_comm_tag_format(t.s, sizeof t.s, tag);
    return t;
}

void shs__comm_account(shs_comm_t *comm, const shs__call_t *c, uint64_t bytes, shs_status_t s, double t0) {
    if (s == SHS_OK) {
        comm->stats.calls[c->op]++;
        comm->stats.bytes[c->op] += bytes;
    }
    if (comm->recorder) {
        shs_comm_call_info_t info = {.op = c->op, .count = c->count, .dtype = c->dtype, .redop = c->redop,
                                     .root = c->root, .seq = c->seq, .bytes = c->count * shs_dtype_size(c->dtype),
                                     .t_start = t0, .t_end = shs_now_seconds(), .marker = comm->marker, .status = s};
        if (c->op == SHS_OP_BARRIER) info.bytes = 0;
        comm->recorder(comm->recorder_user, comm, &info);
    }
}

/* Numbers the call, dispatches, counts it in the stats on success, fails
 * the job on failure. */
static shs_status_t run(shs_comm_t *comm, shs__call_t *c, uint64_t bytes,
                        shs_status_t (*fn)(shs_comm_t *, const shs__call_t *)) {
    c->seq = comm->seq++;
    SHS_LOG(TRACE, COMM, "%s seq %llu count %zu dtype %s on comm '%s' %s", shs_coll_op_name(c->op),
            (unsigned long long)c->seq, c->count, shs_dtype_name(c->dtype), comm->name, tag_text(c->tag).s);
    double t0 = comm->recorder ? shs_now_seconds() : 0;
    shs_status_t s = fn(comm, c);
    if (s != SHS_OK) shs__job_fail(comm, shs_last_error());
    shs__comm_account(comm, c, bytes, s, t0);
    return s;
}

void shs_comm_set_recorder(shs_comm_t *comm, shs_comm_recorder_fn fn, void *user) {
    if (!comm) return;
    comm->recorder = fn;
    comm->recorder_user = user;
}

void shs_comm_set_marker(shs_comm_t *comm, const char *marker) {
    if (comm) snprintf(comm->marker, sizeof comm->marker, "%s", marker ? marker : "");
}

const char *shs_comm_marker(const shs_comm_t *comm) { return comm ? comm->marker : ""; }

#define CHECK_COMM(comm, op)                                                                     \
    do {                                                                                         \
        if (!(comm)) return shs_set_error(SHS_INVALID_ARG, "%s: comm is NULL", shs_coll_op_name(op)); \
        if (shs__group_active())                                                                 \
            return shs__comm_arg_error((comm), (op), "called inside a group (shs_group_start): a group holds " \
                             "sends and receives only");                                         \
    } while (0)

/* ---- collectives ----------------------------------------------------- */

shs_status_t shs_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount, shs_dtype_t dtype,
                            shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_ALL_GATHER);
    shs__call_t c = new_call(comm, SHS_OP_ALL_GATHER, sendbuf, recvbuf, sendcount, dtype, SHS_SUM, 0);
    size_t bytes, n = (size_t)comm->nranks;
    SHS_CHECK(shs__comm_check_call(comm, &c, 0, &bytes));
    if (bytes && (!sendbuf || !recvbuf)) return shs__comm_arg_error(comm, c.op, "NULL buffer with count > 0");
    if (overlaps(sendbuf, bytes, recvbuf, n * bytes) && (const char *)sendbuf != (char *)recvbuf + comm->rank * bytes)
        return shs__comm_arg_error(comm, c.op, "buffers overlap but are not in place (sendbuf == recvbuf + rank*sendcount)");
    return run(comm, &c, n * bytes, comm->iface->all_gather);
}

shs_status_t shs_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, shs_dtype_t dtype,
                                shs_redop_t op, shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_REDUCE_SCATTER);
    shs__call_t c = new_call(comm, SHS_OP_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0);
    c.order = comm->reduce_order;
    size_t bytes, n = (size_t)comm->nranks;
    SHS_CHECK(shs__comm_check_call(comm, &c, 1, &bytes));
    if (bytes && (!sendbuf || !recvbuf)) return shs__comm_arg_error(comm, c.op, "NULL buffer with count > 0");
    if (overlaps(sendbuf, n * bytes, recvbuf, bytes) && (char *)recvbuf != (const char *)sendbuf + comm->rank * bytes)
        return shs__comm_arg_error(comm, c.op, "buffers overlap but are not in place (recvbuf == sendbuf + rank*recvcount)");
    return run(comm, &c, n * bytes, comm->iface->reduce_scatter);
}

shs_status_t shs_all_reduce(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, shs_redop_t op,
                            shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_ALL_REDUCE);
    shs__call_t c = new_call(comm, SHS_OP_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0);
    c.order = comm->reduce_order;
    size_t bytes;
    SHS_CHECK(shs__comm_check_call(comm, &c, 1, &bytes));
    if (bytes && (!sendbuf || !recvbuf)) return shs__comm_arg_error(comm, c.op, "NULL buffer with count > 0");
    if (sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
        return shs__comm_arg_error(comm, c.op, "buffers overlap but are not in place (sendbuf == recvbuf)");
    return run(comm, &c, bytes, comm->iface->all_reduce);
}

shs_status_t shs_broadcast(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, int root,
                           shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_BROADCAST);
    shs__call_t c = new_call(comm, SHS_OP_BROADCAST, sendbuf, recvbuf, count, dtype, SHS_SUM, root);
    size_t bytes;
    SHS_CHECK(shs__comm_check_call(comm, &c, 0, &bytes));
    SHS_CHECK(check_root(comm, &c));
    int is_root = comm->rank == root;
    if (bytes && (!recvbuf || (is_root && !sendbuf))) return shs__comm_arg_error(comm, c.op, "NULL buffer with count > 0");
    if (is_root && sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
        return shs__comm_arg_error(comm, c.op, "buffers overlap but are not in place (sendbuf == recvbuf)");
    return run(comm, &c, bytes, comm->iface->broadcast);
}

shs_status_t shs_reduce(const void *sendbuf, void *recvbuf, size_t count, shs_dtype_t dtype, shs_redop_t op, int root,
                        shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_REDUCE);
    shs__call_t c = new_call(comm, SHS_OP_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
    size_t bytes;
    SHS_CHECK(shs__comm_check_call(comm, &c, 1, &bytes));
    SHS_CHECK(check_root(comm, &c));
    int is_root = comm->rank == root;
    if (bytes && (!sendbuf || (is_root && !recvbuf))) return shs__comm_arg_error(comm, c.op, "NULL buffer with count > 0");
    if (is_root && sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
        return shs__comm_arg_error(comm, c.op, "buffers overlap but are not in place (sendbuf == recvbuf)");
    if (!is_root) c.recvbuf = NULL;
    return run(comm, &c, bytes, comm->iface->reduce);
}

shs_status_t shs_barrier(shs_comm_t *comm) {
    CHECK_COMM(comm, SHS_OP_BARRIER);
    shs__call_t c = new_call(comm, SHS_OP_BARRIER, NULL, NULL, 0, SHS_I8, SHS_SUM, 0);
    return run(comm, &c, 0, comm->iface->barrier);
}

shs_status_t shs_comm_split(shs_comm_t *comm, int color, int key, shs_comm_t **newcomm) {
    CHECK_COMM(comm, SHS_OP_SPLIT);
    if (!newcomm) return shs__comm_arg_error(comm, SHS_OP_SPLIT, "newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != SHS_SPLIT_NOCOLOR)
        return shs__comm_arg_error(comm, SHS_OP_SPLIT, "color must be >= 0 or SHS_SPLIT_NOCOLOR");
    int *members = malloc((size_t)comm->nranks * sizeof *members), *roots = NULL;
    if (!members) /* before the call is numbered: the rank may try again */
        return shs_set_error(SHS_HOST_OOM, "rank %d: split on comm '%s': out of host memory", comm->rank, comm->name);
    shs__call_t c = new_call(comm, SHS_OP_SPLIT, NULL, NULL, 0, SHS_I8, SHS_SUM, 0);
    c.color = color;
    c.key = key;
    c.seq = comm->seq++;
    double t0 = comm->recorder ? shs_now_seconds() : 0;
    shs_status_t s = comm->iface->split(comm, &c, newcomm, members);
    if (s == SHS_OK && *newcomm && comm->job) {
        /* the child's members by their root ranks, for its job */
        int n = (*newcomm)->nranks;
        if (!(roots = malloc((size_t)n * sizeof *roots))) {
            s = shs_set_error(SHS_HOST_OOM, "rank %d: split on comm '%s': out of host memory", comm->rank, comm->name);
        } else {
            for (int i = 0; i < n; i++) roots[i] = comm->root_ranks[members[i]];
            s = shs__job_join(*newcomm, comm->job, roots);
        }
        if (s != SHS_OK) {
            shs_comm_destroy(*newcomm);
            *newcomm = NULL;
        }
    }
    free(roots);
    free(members);
    if (s != SHS_OK) shs__job_fail(comm, shs_last_error());
    if (s == SHS_OK) comm->stats.calls[SHS_OP_SPLIT]++;
    if (s == SHS_OK && *newcomm) {
        SHS_LOG(INFO, COMM, "comm '%s' split (color %d, key %d): '%s', rank %d of %d", shs_comm_name(comm), color, key,
                shs_comm_name(*newcomm), shs_comm_rank(*newcomm), shs_comm_size(*newcomm));
        (*newcomm)->reduce_order = comm->reduce_order;
        shs_comm_set_recorder(*newcomm, comm->recorder, comm->recorder_user);
    }
    if (comm->recorder) {
        shs_comm_call_info_t info = {.op = SHS_OP_SPLIT, .dtype = c.dtype, .redop = c.redop, .seq = c.seq,
                                     .t_start = t0, .t_end = shs_now_seconds(), .marker = comm->marker, .status = s,
                                     .color = color, .newcomm = s == SHS_OK ? *newcomm : NULL};
        comm->recorder(comm->recorder_user, comm, &info);
    }
    return s;
}

/* ---- error-text helpers shared by the communicator backends ---- */

void shs__appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n < size - *len ? (size_t)n : size - *len;
}

/* "[0-2,5]" for the ranks with in_set[r] != 0. */
void shs__append_rank_set(char *buf, size_t size, size_t *len, const unsigned char *in_set, int n) {
    shs__appendf(buf, size, len, "[");
    int first = 1;
    for (int r = 0; r < n; r++) {
        if (!in_set[r]) continue;
        int end = r;
        while (end + 1 < n && in_set[end + 1]) end++;
        shs__appendf(buf, size, len, first ? "%d" : ",%d", r);
        if (end > r) shs__appendf(buf, size, len, "-%d", end);
        first = 0;
        r = end;
    }
    shs__appendf(buf, size, len, "]");
}
