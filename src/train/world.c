/* world.c - persistent rank threads and job dispatch (see world.h). */
#include "shardsim/log.h"
#include "shardsim/world.h"

#include "shardsim/comm_cuda.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    shs_world_t *world;
    shs_rank_ctx_t ctx;
    pthread_t thread;
    int started;
    shs_status_t status;
    char error[1024];
} rank_slot_t;

struct shs_world {
    int n;
    int local;                   /* shs_world_create_local: one slot, jobs on the caller's thread */
    int owns_comm;               /* local: the slot's communicator is the world's (NCCL over MPI) */
    rank_slot_t *slots;          /* (n), or (1) when local */
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv;
    unsigned long job_gen;       /* bumped for each job */
    int pending;                 /* ranks still running the current job */
    int quit;
    shs_rank_fn fn;
    void *arg;
};

static void *rank_main(void *p) {
    rank_slot_t *slot = p;
    shs_world_t *w = slot->world;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->quit && w->job_gen == seen) pthread_cond_wait(&w->job_cv, &w->mu);
        if (w->quit) {
            pthread_mutex_unlock(&w->mu);
            return NULL;
        }
        seen = w->job_gen;
        shs_rank_fn fn = w->fn;
        void *arg = w->arg;
        pthread_mutex_unlock(&w->mu);

        shs_set_last_error_text("");
        shs_log_set_rank(slot->ctx.rank);
        shs_status_t st = fn(&slot->ctx, arg);
        if (st != SHS_OK) {
            snprintf(slot->error, sizeof slot->error, "%s", shs_last_error()[0] ? shs_last_error() : shs_strerror(st));
            /* Wake ranks that wait for this one in a collective. */
            if (st != SHS_ABORTED && st != SHS_MISMATCH && st != SHS_TIMEOUT)
                shs_comm_abort(slot->ctx.comm, slot->error);
        }
        pthread_mutex_lock(&w->mu);
        slot->status = st;
        if (--w->pending == 0) pthread_cond_signal(&w->done_cv);
        pthread_mutex_unlock(&w->mu);
    }
}

static int default_threads_per_rank(int n) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    long t = cores / n;
    return t < 1 ? 1 : (int)t;
}

/* This process's index among the job's processes on its node, as the common
 * launchers export it (OpenMPI, MPICH/Hydra, Slurm); 0 when none does. */
static int node_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end == '\0' && x >= 0 && x < 65536) return (int)x;
        }
    }
    return 0;
}

/* CUDA devices and a CUDA communicator for every rank (world.h's backends). */
static shs_status_t create_cuda_ranks(shs_world_t *w, const shs_world_config_t *cfg) {
    int nccl = cfg->backend == SHS_WORLD_CUDA_NCCL;
    const char *name = cfg->name ? cfg->name : "world";
    shs_comm_id_t *id = NULL;
    shs_device_t **devs = calloc((size_t)w->n, sizeof *devs);
    shs_comm_t **comms = calloc((size_t)w->n, sizeof *comms);
    shs_status_t st = devs && comms ? SHS_OK : shs_set_error(SHS_HOST_OOM, "cannot allocate world");
    if (st == SHS_OK && (cfg->backend < SHS_WORLD_CPU || cfg->backend > SHS_WORLD_CUDA_NCCL))
        st = shs_set_error(SHS_INVALID_ARG, "unknown world backend %d", (int)cfg->backend);
    if (st == SHS_OK)
        st = nccl ? shs_comm_id_create_nccl(&id, w->n, cfg->timeout_ms, name)
                  : shs_comm_id_create_cuda_local(&id, w->n, cfg->timeout_ms, name);
    for (int r = 0; st == SHS_OK && r < w->n; r++) {
        rank_slot_t *s = &w->slots[r];
        s->world = w;
        s->ctx.rank = r;
        s->ctx.world_size = w->n;
        st = shs_device_create_cuda(&s->ctx.dev, r, cfg->gpu + (nccl ? r : 0), cfg->device_mem);
        devs[r] = s->ctx.dev;
    }
    if (st == SHS_OK) st = shs_comm_init_all_cuda(comms, id, devs, w->n);
    for (int r = 0; st == SHS_OK && r < w->n; r++) {
        w->slots[r].ctx.comm = comms[r];
        comms[r] = NULL;
    }
    for (int r = 0; st == SHS_OK && r < w->n; r++) st = shs_comm_set_reduce_order(w->slots[r].ctx.comm, cfg->reduce_order);
    if (id) shs_comm_id_release(id);
    free(devs);
    free(comms);
    return st; /* on failure shs_world_destroy frees what the slots hold */
}

shs_status_t shs_world_create(shs_world_t **out, const shs_world_config_t *cfg) {
    *out = NULL;
    if (cfg->world_size < 1 || cfg->world_size > SHS_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "world size must be in 1..%d (got %d)", SHS_MAX_WORLD, cfg->world_size);
    shs_world_t *w = calloc(1, sizeof *w);
    if (!w) return shs_set_error(SHS_HOST_OOM, "cannot allocate world");
    w->n = cfg->world_size;
    w->slots = calloc((size_t)w->n, sizeof *w->slots);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->job_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    shs_status_t st = SHS_OK;
    shs_comm_id_t *id = NULL;
    if (!w->slots) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate world");
        goto fail;
    }
    if (cfg->backend != SHS_WORLD_CPU) {
        SHS_CHECK_GOTO(create_cuda_ranks(w, cfg), st, fail);
        goto start;
    }
    SHS_CHECK_GOTO(shs_comm_id_create(&id, w->n, cfg->timeout_ms, cfg->name ? cfg->name : "world"), st, fail);
    int threads = default_threads_per_rank(w->n);
    for (int r = 0; r < w->n; r++) {
        rank_slot_t *s = &w->slots[r];
        s->world = w;
        s->ctx.rank = r;
        s->ctx.world_size = w->n;
        SHS_CHECK_GOTO(shs_device_create_cpu(&s->ctx.dev, r, cfg->device_mem, threads), st, fail);
        SHS_CHECK_GOTO(shs_comm_init_rank(&s->ctx.comm, id, r), st, fail);
        SHS_CHECK_GOTO(shs_comm_set_reduce_order(s->ctx.comm, cfg->reduce_order), st, fail);
    }
start:
    for (int r = 0; r < w->n; r++) {
        /* small stacks: 64 ranks must not cost 512 MiB of address space */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)2 << 20);
        int rc = pthread_create(&w->slots[r].thread, &attr, rank_main, &w->slots[r]);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            st = shs_set_error(SHS_SYSTEM, "cannot start thread for rank %d: %s", r, strerror(rc));
            goto fail;
        }
        w->slots[r].started = 1;
    }
    shs_comm_id_release(id);
    *out = w;
    return SHS_OK;
fail:
    if (id) shs_comm_id_release(id);
    shs_world_destroy(w);
    return st;
}

shs_status_t shs_world_create_local(shs_world_t **out, const shs_world_config_t *cfg, shs_comm_t *comm) {
    *out = NULL;
    if (!comm || cfg->world_size != shs_comm_size(comm))
        return shs_set_error(SHS_INVALID_ARG, "world size %d differs from the communicator's %d ranks",
                             cfg->world_size, shs_comm_size(comm));
    shs_world_t *w = calloc(1, sizeof *w);
    if (w) w->slots = calloc(1, sizeof *w->slots);
    if (!w || !w->slots) {
        free(w);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate world");
    }
    w->n = cfg->world_size;
    w->local = 1;
    rank_slot_t *s = &w->slots[0];
    s->world = w;
    s->ctx.rank = shs_comm_rank(comm);
    s->ctx.world_size = w->n;
    shs_status_t st = SHS_OK;
    if (cfg->backend == SHS_WORLD_CUDA_NCCL) {
        st = shs_device_create_cuda(&s->ctx.dev, s->ctx.rank, cfg->gpu + node_local_rank(), cfg->device_mem);
        if (st == SHS_OK) st = shs_comm_nccl_create_mpi(&s->ctx.comm, comm, s->ctx.dev);
        w->owns_comm = s->ctx.comm != NULL;
        if (st == SHS_OK) st = shs_comm_set_reduce_order(s->ctx.comm, cfg->reduce_order);
    } else if (cfg->backend != SHS_WORLD_CPU) {
        st = shs_set_error(SHS_INVALID_ARG, "rank %d: a multi-process world runs on CPU devices or on one GPU per "
                           "process over NCCL (the device-local CUDA backend shares one process)", s->ctx.rank);
    } else {
        st = shs_comm_set_reduce_order(comm, cfg->reduce_order);
        if (st == SHS_OK) st = shs_device_create_cpu(&s->ctx.dev, s->ctx.rank, cfg->device_mem, default_threads_per_rank(w->n));
        s->ctx.comm = comm;
    }
    if (st != SHS_OK) {
        shs_world_destroy(w);
        return st;
    }
    *out = w;
    return SHS_OK;
}

void shs_world_destroy(shs_world_t *w) {
    if (!w) return;
    if (w->local) { /* the communicator is borrowed, unless it is NCCL's over the borrowed one */
        if (w->owns_comm) shs_comm_destroy(w->slots[0].ctx.comm);
        shs_device_destroy(w->slots[0].ctx.dev);
        free(w->slots);
        free(w);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->job_cv);
    pthread_mutex_unlock(&w->mu);
    for (int r = 0; w->slots && r < w->n; r++) {
        if (w->slots[r].started) pthread_join(w->slots[r].thread, NULL);
        shs_comm_destroy(w->slots[r].ctx.comm);
        shs_device_destroy(w->slots[r].ctx.dev);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->job_cv);
    pthread_cond_destroy(&w->done_cv);
    free(w->slots);
    free(w);
}

int shs_world_size(const shs_world_t *w) { return w->n; }
shs_rank_ctx_t *shs_world_rank(shs_world_t *w, int rank) {
    if (w->local) return rank == w->slots[0].ctx.rank ? &w->slots[0].ctx : NULL;
    return &w->slots[rank].ctx;
}

void shs_world_local_ranks(const shs_world_t *w, int *first, int *count) {
    *first = w->local ? w->slots[0].ctx.rank : 0;
    *count = w->local ? 1 : w->n;
}

/* The local world's one rank, on the caller's thread, failing as rank_main does. */
static shs_status_t run_local(shs_world_t *w, shs_rank_fn fn, void *arg) {
    rank_slot_t *slot = &w->slots[0];
    shs_set_last_error_text("");
    shs_log_set_rank(slot->ctx.rank);
    shs_status_t st = fn(&slot->ctx, arg);
    if (st != SHS_OK && st != SHS_ABORTED && st != SHS_MISMATCH && st != SHS_TIMEOUT) {
        snprintf(slot->error, sizeof slot->error, "%s", shs_last_error()[0] ? shs_last_error() : shs_strerror(st));
        shs_comm_abort(slot->ctx.comm, slot->error);
        shs_set_last_error_text(slot->error);
    }
    return st;
}

shs_status_t shs_world_run(shs_world_t *w, shs_rank_fn fn, void *arg) {
    if (w->local) return run_local(w, fn, arg);
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->arg = arg;
    w->pending = w->n;
    w->job_gen++;
    pthread_cond_broadcast(&w->job_cv);
    while (w->pending > 0) pthread_cond_wait(&w->done_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);

    int cause = -1;
    for (int r = 0; r < w->n; r++) {
        shs_status_t st = w->slots[r].status;
        if (st == SHS_OK) continue;
        if (cause < 0 || (w->slots[cause].status == SHS_ABORTED && st != SHS_ABORTED)) cause = r;
    }
    if (cause < 0) return SHS_OK;
    shs_set_last_error_text(w->slots[cause].error);
    return w->slots[cause].status;
}
