/* progress.c - the watcher thread of progress.h. */
#include "progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct sim_progress {
    const char *cmd;
    double after_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* a phase began or ended, or stop */
    int active, quit;
    unsigned long phase; /* counts begins: a wakeup from an older phase says nothing */
    double start;        /* the phase's start, CLOCK_MONOTONIC seconds */
    char what[256];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *watch(void *arg) {
    sim_progress_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        if (!p->active) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        unsigned long phase = p->phase;
        double next = p->after_s;
        while (!p->quit && p->active && p->phase == phase) {
            double at = p->start + next;
            struct timespec ts = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
            if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            if (p->quit || !p->active || p->phase != phase || now_s() < at) continue;
            fprintf(stderr, "shardsim %s: %s ... (%.3g s so far)\n", p->cmd, p->what, next);
            next *= 2;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

sim_progress_t *sim_progress_start(const char *cmd, double after_s) {
    if (!(after_s > 0)) return NULL;
    sim_progress_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->cmd = cmd;
    p->after_s = after_s;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&p->cv, &ca) == 0;
    if (!ok) {
        free(p);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, watch, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void sim_progress_begin(sim_progress_t *p, const char *fmt, ...) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what, sizeof p->what, fmt, ap);
    va_end(ap);
    p->active = 1;
    p->phase++;
    p->start = now_s();
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void sim_progress_end(sim_progress_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->active = 0;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void sim_progress_stop(sim_progress_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
