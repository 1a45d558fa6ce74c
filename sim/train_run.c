/* train_run.c - the phases of one `shardsim train` run (see train_run.h). */
#include "train_run.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "compare_plot.h"
#include "test_fault.h"
#include "train_report.h"
#include "train_trace.h"
#include "shardsim/checkpoint.h"
#include "shardsim/clock.h"
#include "shardsim/comm_mpi.h"
#include "shardsim/safetensors.h"
#include "shardsim/units.h"
#include "shardsim/world.h"

void sim_train_report_error(const char *what) {
    sim_error("train", "%s%s%s", what ? what : "", what ? ": " : "", shs_last_error());
}

/* Join the MPI job: the world size is the job's, rank 0 alone writes stdout.
 * Returns -1 to go on, else an exit code (usage errors: 2, as on threads). */
static int mpi_start(train_opts_t *o, sim_mpi_job_t *m) {
    if (shs_mpi_init(NULL, NULL) != SHS_OK) {
        sim_train_report_error("--backend mpi");
        return SIM_EXIT_ERROR;
    }
    int size = shs_mpi_world_size();
    m->rank = shs_mpi_world_rank();
    if (o->world_given && o->cfg.world_size != size) {
        return sim_usage_error("train", "--world %d differs from the MPI job's %d processes (start as many: mpirun "
                               "-np %d ...; or leave --world out)", o->cfg.world_size, size, o->cfg.world_size);
    }
    o->cfg.world_size = size;
    int rc = sim_train_check_shard_group(&o->cfg);
    if (rc >= 0) return rc;
    if (m->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        sim_error("train", "rank %d: cannot silence stdout: %s", m->rank, strerror(errno));
        return SIM_EXIT_ERROR;
    }
    if (shs_comm_mpi_create(&m->world, o->cfg.timeout_ms, "world") != SHS_OK ||
        (o->check_ddp && (shs_comm_mpi_create(&m->ref, o->cfg.timeout_ms, "world") != SHS_OK ||
                          shs_comm_mpi_create(&m->check, o->cfg.timeout_ms, "check") != SHS_OK))) {
        sim_train_report_error("--backend mpi");
        return SIM_EXIT_ERROR;
    }
    o->cfg.comm = m->world;
    return -1;
}

int sim_train_run_begin(sim_train_run_t *r, train_opts_t *o) {
    memset(r, 0, sizeof *r);
    r->o = o;
    r->cfg = &o->cfg;
    shs_train_config_t *cfg = r->cfg;
    int rc;
    if (o->backend_mpi && (rc = mpi_start(o, &r->mpi)) >= 0) shs_mpi_abort(rc);
    if (o->backend_mpi && r->mpi.rank != 0) o->progress_s = 0; /* rank 0 speaks for the job, as on stdout */
    if (cfg->backend != SHS_WORLD_CPU) { /* --backend cuda: fail early and clearly without a GPU */
        int gpus;
        if (shs_cuda_device_count(&gpus) != SHS_OK) {
            sim_train_report_error(cfg->backend == SHS_WORLD_CUDA ? "--backend cuda"
                                   : o->backend_mpi               ? "--backend mpi-nccl"
                                                                  : "--backend cuda-nccl");
            if (o->backend_mpi) shs_mpi_abort(SIM_EXIT_ERROR); /* every process, none left waiting */
            return SIM_EXIT_ERROR;
        }
    }

    if (!o->device_mem_given && cfg->backend == SHS_WORLD_CPU) { /* CUDA: the GPU's own limit */
        /* Simulated devices live in host RAM: share 3/4 of it among all ranks
         * (of both runs under --check), so an oversized model or world fails
         * with a clean out-of-memory error naming the rank. */
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (ram > 0) cfg->device_mem = (size_t)(ram * 0.75 / cfg->world_size / (o->check_ddp ? 2 : 1));
    }

    if (o->model_file) {
        if (shs_model_file_load(&r->model_file, o->model_file) != SHS_OK) {
            sim_train_report_error(NULL);
            return SIM_EXIT_ERROR;
        }
        cfg->model_file = r->model_file;
    }

    if (o->data_path) {
        if (shs_corpus_load(&r->corpus, o->data_path) != SHS_OK) {
            sim_train_report_error(NULL);
            shs_model_file_free(r->model_file);
            return SIM_EXIT_ERROR;
        }
    } else {
        shs_corpus_builtin(&r->corpus);
    }
    /* not exact by design, so --check ddp reports the drift instead of failing */
    r->drift_why = o->check_ddp ? shs_check_inexact_reason(cfg) : NULL;
    return -1;
}

int sim_train_run_setup(sim_train_run_t *r) {
    shs_train_config_t *cfg = r->cfg;
    r->pg = sim_progress_start("train", r->o->progress_s);
    if (r->o->trace_dir && sim_trace_start(cfg, &r->trace_rec) != SHS_OK) {
        sim_train_report_error("--trace");
        return SIM_EXIT_ERROR;
    }
    sim_progress_begin(r->pg, "setting up %d rank%s (devices, model, strategy state)", cfg->world_size,
                       cfg->world_size == 1 ? "" : "s");
    shs_status_t create_st = shs_trainer_create(&r->main_run, cfg, &r->corpus);
    sim_progress_end(r->pg);
    if (create_st != SHS_OK) {
        sim_train_report_error(NULL);
        char b[32];
        if (!r->o->device_mem_given && strstr(shs_last_error(), "out of device memory"))
            sim_note("train", "the %d simulated devices share this machine's RAM (%s each); "
                            "use a smaller --world or model, or set --device-mem",
                    cfg->world_size * (r->o->check_ddp ? 2 : 1), shs_format_bytes(b, sizeof b, (double)cfg->device_mem));
        return SIM_EXIT_ERROR;
    }
    return -1;
}

int sim_train_run_resume(sim_train_run_t *r) {
    const train_opts_t *o = r->o;
    if (o->resume_dir) {
        sim_progress_begin(r->pg, "loading checkpoint %s", o->resume_dir);
        shs_status_t st = shs_checkpoint_resume(r->main_run, o->resume_dir);
        sim_progress_end(r->pg);
        if (st != SHS_OK) {
            sim_train_report_error("--resume");
            return SIM_EXIT_ERROR;
        }
        sim_train_print_resumed(r);
    }
    /* steps are numbered from the checkpoint's: step first+1 .. last */
    r->first = shs_trainer_steps_done(r->main_run);
    r->last = r->first + o->steps;
    if (o->inject_bitflip && (o->inject_bitflip <= r->first || o->inject_bitflip > r->last))
        return sim_usage_error("train", "--inject-bitflip %ld is not a step of this run (%ld..%ld)", o->inject_bitflip,
                               r->first + 1, r->last);
    return -1;
}

int sim_train_run_checker(sim_train_run_t *r) {
    if (!r->o->check_ddp) return -1;
    sim_progress_begin(r->pg, "setting up the reference DDP run (%d ranks)", r->cfg->world_size);
    shs_status_t st = shs_checker_create(&r->checker, r->cfg, &r->corpus, r->mpi.ref, r->mpi.check);
    if (st == SHS_OK && r->o->resume_dir &&
        (st = shs_checkpoint_resume(shs_checker_reference(r->checker), r->o->resume_dir)) != SHS_OK)
        shs_set_error(st, "reference DDP run: %s", shs_last_error());
    sim_progress_end(r->pg);
    if (st != SHS_OK) {
        sim_train_report_error(NULL);
        return SIM_EXIT_ERROR;
    }
    sim_train_print_check_intro(r);
    return -1;
}

int sim_train_run_ready(sim_train_run_t *r) {
    shs_trainer_local_ranks(r->main_run, &r->first_rank, &r->local_count);
    if (sim_test_fault_plant(&r->o->fault, r->mpi.rank, r->mpi.world, r->cfg->timeout_ms) != SHS_OK) {
        sim_train_report_error("SHS_TEST_FAULT");
        return SIM_EXIT_ERROR;
    }
    if (r->o->metrics_path && r->mpi.rank == 0 && sim_train_metrics_open(&r->metrics, r->o->metrics_path) != SHS_OK) {
        sim_train_report_error("--metrics");
        return SIM_EXIT_ERROR;
    }
    return -1;
}

int sim_train_run_metrics(sim_train_run_t *r, const sim_train_step_t *s) {
    if (!r->metrics.open) return -1;
    const shs_train_config_t *cfg = r->cfg;
    shs_strategy_t *s0 = shs_trainer_strategy(r->main_run, r->first_rank);
    int skipped = shs_strategy_step_skipped(s0);
    sim_train_metrics_row_t row = {
        .step = s->step, .loss = s->loss, .grad_norm = skipped ? -1.0f : shs_trainer_last_grad_norm(r->main_run),
        .lr = skipped ? NAN : (float)shs_trainer_last_lr(r->main_run), /* the f32 lr the update applied */
        .loss_scale = cfg->strategy.param_dtype == SHS_F16 ? shs_strategy_loss_scale(s0).scale : 0.0f,
        .skipped = skipped, .tokens = sim_train_tokens_per_step(cfg), .seconds = s->seconds};
    for (int i = 0; i < r->local_count; i++) {
        shs_mem_stats_t m;
        shs_trainer_mem_stats(r->main_run, r->first_rank + i, &m);
        if (m.total_current > row.mem_bytes) row.mem_bytes = m.total_current;
        if (m.total_peak > row.mem_peak_bytes) row.mem_peak_bytes = m.total_peak;
    }
    if (sim_train_metrics_write(&r->metrics, &row) != SHS_OK) {
        printf("\n");
        sim_train_report_error("--metrics");
        return SIM_EXIT_ERROR;
    }
    return -1;
}

int sim_train_run_step(sim_train_run_t *r, long index, sim_train_step_t *s) {
    s->step = r->first + index + 1;
    double t0 = shs_now_seconds();
    sim_progress_begin(r->pg, "running step %ld/%ld on %d rank%s", s->step, r->last, r->local_count,
                       r->local_count == 1 ? "" : r->cfg->backend == SHS_WORLD_CPU ? " threads" : "s");
    shs_status_t step_st = shs_trainer_step(r->main_run, &s->loss);
    sim_progress_end(r->pg);
    if (step_st != SHS_OK) {
        char what[64];
        snprintf(what, sizeof what, "step %ld", s->step);
        size_t n = strlen(what); /* the trainer's own message may name the step already */
        sim_train_report_error(!strncmp(shs_last_error(), what, n) && shs_last_error()[n] == ':' ? NULL : what);
        return SIM_EXIT_ERROR;
    }
    s->seconds = shs_now_seconds() - t0;
    if (!isfinite(s->loss)) {
        sim_error("train", "step %ld: the loss is %g: training diverged (try a lower --lr)", s->step, (double)s->loss);
        return SIM_EXIT_ERROR;
    }
    return -1;
}

int sim_train_run_bitflip(sim_train_run_t *r, long step) {
    if (r->o->inject_bitflip != step) return -1;
    if (shs_trainer_flip_param_bit(r->main_run, 0, 0) != SHS_OK) { /* wte[0][0] */
        printf("\n");
        sim_train_report_error("bit flip");
        return SIM_EXIT_ERROR;
    }
    return -1;
}

int sim_train_run_check(sim_train_run_t *r, const sim_train_step_t *s) {
    if (!r->checker) return -1;
    shs_check_step_t cs;
    sim_progress_begin(r->pg, "running step %ld/%ld of the reference DDP run", s->step, r->last);
    shs_status_t check_st = shs_checker_step(r->checker, r->main_run, s->loss, &cs);
    sim_progress_end(r->pg);
    sim_train_print_check_step(r, check_st, &cs);
    if (check_st == SHS_NOT_EQUAL) return SIM_EXIT_NOT_EQUAL;
    if (check_st != SHS_OK) {
        sim_train_report_error(NULL);
        return SIM_EXIT_ERROR;
    }
    if (r->drift_why) r->worst = cs.worst;
    return -1;
}

/* Total bytes of the regular files in dir (a saved checkpoint), and how many. */
static double dir_bytes(const char *dir, int *files) {
    double total = 0;
    *files = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    char path[4352];
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (double)st.st_size;
            (*files)++;
        }
    }
    closedir(d);
    return total;
}

int sim_train_run_save(sim_train_run_t *r, const char *dir, const char *what) {
    long step = shs_trainer_steps_done(r->main_run);
    sim_progress_begin(r->pg, "saving checkpoint %s (step %ld)", dir, step);
    shs_status_t st = shs_checkpoint_save(r->main_run, dir);
    sim_progress_end(r->pg);
    if (st != SHS_OK) {
        sim_train_report_error(what);
        return SIM_EXIT_ERROR;
    }
    int files;
    char b[32];
    double bytes = dir_bytes(dir, &files);
    printf("saved checkpoint %s (step %ld, %s in %d files)\n", dir, step, shs_format_bytes(b, sizeof b, bytes), files);
    fflush(stdout);
    return -1;
}

/* --memory-timeline: rank 0's phases of the last step as SVG (under MPI,
 * rank 0's process draws it). -1 or an exit code. */
static int write_timeline(sim_train_run_t *r) {
    const train_opts_t *o = r->o;
    const shs_train_config_t *cfg = r->cfg;
    if (!o->timeline_path || (o->backend_mpi && r->mpi.rank != 0)) return -1;
    shs_meta_rank_result_t r0 = {0};
    r0.segments = (shs_step_segment_t *)shs_trainer_timeline(r->main_run, &r0.num_segments);
    char title[128];
    snprintf(title, sizeof title, "train: %s, world %d, rank 0, step %ld", shs_strategy_name(cfg->strategy.kind),
             cfg->world_size, shs_trainer_steps_done(r->main_run));
    sim_plot_row_t row = {shs_strategy_name(cfg->strategy.kind), &r0, cfg->device_mem == SIZE_MAX ? 0 : cfg->device_mem, 0};
    if (r0.num_segments == 0 || sim_compare_plot(o->timeline_path, title, &row, 1) != 0) {
        sim_error("train", "--memory-timeline: cannot write %s: %s", o->timeline_path,
                  r0.num_segments ? shs_last_error() : "no step was recorded");
        return SIM_EXIT_ERROR;
    }
    printf("wrote %s (%d phases of rank 0's last step)\n", o->timeline_path, r0.num_segments);
    return -1;
}

int sim_train_run_outputs(sim_train_run_t *r) {
    const train_opts_t *o = r->o;
    int rc;
    if (o->save_dir && (rc = sim_train_run_save(r, o->save_dir, "--save")) >= 0) return rc;
    if (o->export_path) {
        sim_progress_begin(r->pg, "exporting %s", o->export_path);
        shs_status_t st = shs_export_safetensors(r->main_run, o->export_path);
        sim_progress_end(r->pg);
        if (st != SHS_OK) {
            sim_train_report_error("--export-safetensors");
            return SIM_EXIT_ERROR;
        }
        printf("exported %s\n", o->export_path);
    }
    if (r->trace_rec) {
        shs_status_t trace_st = sim_trace_finish(r->trace_rec, o->trace_dir);
        r->trace_rec = NULL;
        if (trace_st != SHS_OK) {
            sim_train_report_error("--trace");
            return SIM_EXIT_ERROR;
        }
    }
    return write_timeline(r);
}

long sim_train_tokens_per_step(const shs_train_config_t *cfg) {
    return (long)cfg->world_size * cfg->micro_batch * cfg->model.context * (cfg->grad_accum > 1 ? cfg->grad_accum : 1);
}

int sim_train_run_end(sim_train_run_t *r, int exit_code) {
    const train_opts_t *o = r->o;
    sim_progress_stop(r->pg);
    if (sim_train_metrics_close(&r->metrics, exit_code == SIM_EXIT_OK) != SHS_OK) {
        sim_train_report_error("--metrics");
        if (exit_code == SIM_EXIT_OK) exit_code = SIM_EXIT_ERROR;
    }
    exit_code = sim_finish_output("train", exit_code); /* before MPI's abort below: a lost report fails the job */
    /* MPI: after an error other processes may wait in a collective that will
     * never complete; MPI_Abort ends them all (comm_mpi.h) */
    if (o->backend_mpi && exit_code != SIM_EXIT_OK) shs_mpi_abort(exit_code);
    shs_checker_destroy(r->checker);
    shs_trace_recorder_free(r->trace_rec);
    shs_trainer_destroy(r->main_run);
    shs_corpus_free(&r->corpus);
    shs_model_file_free(r->model_file);
    if (o->backend_mpi) {
        shs_comm_destroy(r->mpi.check);
        shs_comm_destroy(r->mpi.ref);
        shs_comm_destroy(r->mpi.world);
        shs_mpi_finalize();
    }
    return exit_code;
}
