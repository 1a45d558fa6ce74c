/* comm_job.c - the job every communicator belongs to (comm.h JOB FAILURE):
 * the handles made from one rendezvous and every split of them, so that the
 * first failing call fails all of them at once, and the names of split
 * children, unique within the job.
 *
 * What it is: a member list (every handle of every rank in this process),
 * a failed flag with the first failure's text, and a count per child name.
 * A failure reaches each other member through its backend's job_failed
 * slot, which wakes that communicator's waiters; the MPI backend's also
 * tells the other processes (their abort messages), whose own jobs then
 * fail the same way.
 * What it is not: a detector of failures (the backends are) or a mesh.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"

#define JOB_TEXT 1024

typedef struct {
    char *name;
    int count;
} name_count_t;

struct shs__job {
    pthread_mutex_t mu;
    int refs;                  /* the id (or creator) + one per member */
    shs_comm_t **members;
    int nmembers, cap;
    int failed;
    char detail[JOB_TEXT];     /* the first failure */
    name_count_t *names;       /* child names made so far */
    int nnames, names_cap;
};

shs__job_t *shs__job_create(void) {
    shs__job_t *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_mutex_init(&job->mu, NULL);
    job->refs = 1;
    return job;
}

void shs__job_ref(shs__job_t *job) {
    if (!job) return;
    pthread_mutex_lock(&job->mu);
    job->refs++;
    pthread_mutex_unlock(&job->mu);
}

void shs__job_unref(shs__job_t *job) {
    if (!job) return;
    pthread_mutex_lock(&job->mu);
    int last = --job->refs == 0;
    pthread_mutex_unlock(&job->mu);
    if (!last) return;
    for (int i = 0; i < job->nnames; i++) free(job->names[i].name);
    free(job->names);
    free(job->members);
    pthread_mutex_destroy(&job->mu);
    free(job);
}

shs_status_t shs__job_join(shs_comm_t *comm, shs__job_t *job, const int *root_ranks) {
    int *ranks = malloc((size_t)(comm->nranks > 0 ? comm->nranks : 1) * sizeof *ranks);
    if (!ranks) return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", comm->rank, comm->name);
    for (int i = 0; i < comm->nranks; i++) ranks[i] = root_ranks ? root_ranks[i] : i;
    pthread_mutex_lock(&job->mu);
    if (job->nmembers == job->cap) {
        int cap = job->cap ? 2 * job->cap : 16;
        shs_comm_t **m = realloc(job->members, (size_t)cap * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&job->mu);
            free(ranks);
            return shs_set_error(SHS_HOST_OOM, "rank %d: comm '%s': out of host memory", comm->rank, comm->name);
        }
        job->members = m;
        job->cap = cap;
    }
    job->members[job->nmembers++] = comm;
    job->refs++;
    comm->job = job;
    comm->root_ranks = ranks;
    comm->owns_root_ranks = 1;
    if (job->failed) comm->iface->job_failed(comm, job->detail);
    pthread_mutex_unlock(&job->mu);
    return SHS_OK;
}

void shs__job_leave(shs_comm_t *comm) {
    shs__job_t *job = comm->job;
    int member = comm->owns_root_ranks; /* a borrower owns nothing and is on no list */
    if (member) free(comm->root_ranks);
    comm->root_ranks = NULL;
    comm->job = NULL;
    comm->owns_root_ranks = 0;
    if (!job || !member) return;
    pthread_mutex_lock(&job->mu);
    for (int i = 0; i < job->nmembers; i++)
        if (job->members[i] == comm) {
            job->members[i] = job->members[--job->nmembers];
            break;
        }
    pthread_mutex_unlock(&job->mu);
    shs__job_unref(job);
}

void shs__job_fail(shs_comm_t *comm, const char *detail) {
    shs__job_t *job = comm->job;
    if (!job) return;
    pthread_mutex_lock(&job->mu);
    if (!job->failed) {
        job->failed = 1;
        snprintf(job->detail, sizeof job->detail, "%s", detail);
        /* under the lock: no member leaves (and is freed) meanwhile; the
         * backends' job_failed slots never take it */
        for (int i = 0; i < job->nmembers; i++)
            if (job->members[i] != comm) job->members[i]->iface->job_failed(job->members[i], job->detail);
    }
    pthread_mutex_unlock(&job->mu);
}

void shs__comm_borrow_job(shs_comm_t *inner, const shs_comm_t *outer) {
    inner->job = outer->job;
    inner->root_ranks = outer->root_ranks;
    inner->owns_root_ranks = 0;
}

void shs__split_name(const shs_comm_t *parent, int color, const int *members, int n, char *name, size_t size) {
    size_t len = 0;
    if (size) name[0] = '\0';
    shs__appendf(name, size, &len, "split(color=%d)", color);
    /* the members' root ranks as a set: "[0-1,4]" */
    int hi = -1;
    for (int i = 0; i < n; i++) {
        int g = parent->root_ranks ? parent->root_ranks[members[i]] : members[i];
        if (g > hi) hi = g;
    }
    unsigned char *in_set = calloc((size_t)hi + 2, 1);
    if (in_set) {
        for (int i = 0; i < n; i++) in_set[parent->root_ranks ? parent->root_ranks[members[i]] : members[i]] = 1;
        shs__append_rank_set(name, size, &len, in_set, hi + 1);
        free(in_set);
    } else {
        shs__appendf(name, size, &len, "[%d ranks]", n);
    }
    shs__job_t *job = parent->job;
    if (!job) return;
    pthread_mutex_lock(&job->mu);
    int k = 0;
    while (k < job->nnames && strcmp(job->names[k].name, name) != 0) k++;
    if (k == job->nnames && job->nnames == job->names_cap) {
        int cap = job->names_cap ? 2 * job->names_cap : 16;
        name_count_t *nn = realloc(job->names, (size_t)cap * sizeof *nn);
        if (nn) {
            job->names = nn;
            job->names_cap = cap;
        }
    }
    if (k < job->nnames) {
        int repeat = ++job->names[k].count;
        shs__appendf(name, size, &len, "#%d", repeat);
    } else if (k < job->names_cap && (job->names[k].name = strdup(name)) != NULL) {
        job->names[k].count = 1;
        job->nnames++;
    }
    pthread_mutex_unlock(&job->mu);
}
