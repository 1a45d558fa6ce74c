/* progress.h - say on stderr what a command is doing while one of its
 * phases (setup, a training step, a save) runs longer than a threshold:
 * "shardsim train: running step 1/2 on 1024 rank threads ... (5 s so far)",
 * again at 2x, 4x, ... the threshold. Quiet phases print nothing, so short
 * runs' output is unchanged. A helper thread watches the clock; the caller
 * marks phases and prints its own output only between them.
 * What it is not: a log (nothing is printed when a phase ends). */
#ifndef SHARDSIM_SIM_PROGRESS_H
#define SHARDSIM_SIM_PROGRESS_H

typedef struct sim_progress sim_progress_t;

/* A watcher for command cmd that speaks after after_s seconds of one phase.
 * NULL when after_s <= 0 (never speak) or on failure: every call below
 * then does nothing. */
sim_progress_t *sim_progress_start(const char *cmd, double after_s);
/* A phase begins: what (printf format) names it in the line. */
void sim_progress_begin(sim_progress_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_progress_end(sim_progress_t *p);
/* End the watcher thread and free p (NULL: nothing). */
void sim_progress_stop(sim_progress_t *p);

#endif
