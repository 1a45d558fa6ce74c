/* cmd_train.c - `shardsim train`: the main job. Trains the GPT on a world of
 * simulated GPUs under one strategy, prints loss and time per step and a
 * summary of memory and communication; with --check ddp it prints the
 * verdict of the reference DDP run after every step (check.h).
 * What it is not: the training loop (src/train/train.c), the check
 * (src/train/check.c) or the options (train_options.c).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>

#include "args.h"
#include "compare_plot.h"
#include "progress.h"
#include "test_fault.h"
#include "train_trace.h"
#include "commands.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "shardsim/units.h"
#include "shardsim/world.h"
#include "shardsim/clock.h"
#include "shardsim/check.h"
#include "shardsim/checkpoint.h"
#include "shardsim/features.h"
#include "shardsim/comm_mpi.h"
#include "shardsim/safetensors.h"
#include "shardsim/durable.h"

#include "model_choice.h"
#include "train_options.h"

/* steps: this run's; the trainer knows how many the checkpoint had before */
static void print_summary(shs_trainer_t *t, float final_loss, long steps) {
    int first, n; /* the ranks this process runs: all of them on threads, its own under MPI */
    shs_trainer_local_ranks(t, &first, &n);
    char b[32];
    long done = shs_trainer_steps_done(t);
    if (steps == 0)
        printf("\nsummary\n  no step run (--steps 0): the weights as of step %ld\n", done);
    else if (done != steps)
        printf("\nsummary\n  final loss %.6f after step %ld (%ld step%s in this run)\n", final_loss, done, steps,
               steps == 1 ? "" : "s");
    else
        printf("\nsummary\n  final loss %.6f after %ld step%s\n", final_loss, steps, steps == 1 ? "" : "s");
    printf("  peak device memory per rank (MiB)\n    %-6s", "rank");
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11s", shs_mem_category_name((shs_mem_category_t)c));
    printf(" %11s\n", "total");
    int shown = n <= 16 ? n : 8;
    for (int i = 0; i < n; i++) {
        if (i == shown && i < n - 1) {
            printf("    ... (%d more ranks)\n", n - shown - 1);
            i = n - 1;
        }
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, first + i, &m);
        printf("    %-6d", first + i);
        for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11.3f", (double)m.peak[c] / 1048576.0);
        printf(" %11.3f\n", (double)m.total_peak / 1048576.0);
    }
    if (shs_trainer_config(t)->strategy.offload != SHS_OFFLOAD_NONE) {
        uint64_t h2d, d2h;
        shs_mem_stats_t hm;
        shs_strategy_offload_stats(shs_trainer_strategy(t, first), &h2d, &d2h, &hm);
        char b2[32], b3[32];
        printf("  offload (rank 0): peak host memory params %s, grads %s, optim %s; copied host->device %s, "
               "device->host %s over the run\n", shs_format_bytes(b, sizeof b, (double)hm.peak[SHS_MEM_PARAMS]),
               shs_format_bytes(b2, sizeof b2, (double)hm.peak[SHS_MEM_GRADS]),
               shs_format_bytes(b3, sizeof b3, (double)hm.peak[SHS_MEM_OPTIM]),
               shs_format_bytes((char[32]){0}, 32, (double)h2d), shs_format_bytes((char[32]){0}, 32, (double)d2h));
    }
    shs_comm_stats_t cs, sum = {0};
    for (int i = 0; i < n; i++) {
        shs_trainer_comm_stats(t, first + i, &cs);
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            sum.calls[op] += cs.calls[op];
            sum.bytes[op] += cs.bytes[op];
            sum.bytes_sent[op] += cs.bytes_sent[op];
        }
    }
    printf("  communication per rank over the run (bytes sent: ring algorithm, as nccl-tests busbw)\n");
    printf("    %-16s %8s %14s %14s\n", "collective", "calls", "buffer", "sent/rank");
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        if (!sum.calls[op]) continue;
        char b2[32];
        printf("    %-16s %8llu %14s %14s\n", shs_coll_op_name((shs_coll_op_t)op),
               (unsigned long long)(sum.calls[op] / (uint64_t)n), shs_format_bytes(b, sizeof b, (double)sum.bytes[op] / n),
               shs_format_bytes(b2, sizeof b2, (double)sum.bytes_sent[op] / n));
    }
}

static void report_error(const char *what) {
    sim_error("train", "%s%s%s", what ? what : "", what ? ": " : "", shs_last_error());
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

/* Save a checkpoint of t into dir and say so: "saved checkpoint DIR (step S,
 * SIZE in N files)". what names the option in an error. 0, or -1 reported. */
static int save_checkpoint(shs_trainer_t *t, const char *dir, const char *what, sim_progress_t *pg) {
    long step = shs_trainer_steps_done(t);
    sim_progress_begin(pg, "saving checkpoint %s (step %ld)", dir, step);
    shs_status_t st = shs_checkpoint_save(t, dir);
    sim_progress_end(pg);
    if (st != SHS_OK) {
        report_error(what);
        return -1;
    }
    int files;
    char b[32];
    double bytes = dir_bytes(dir, &files);
    printf("saved checkpoint %s (step %ld, %s in %d files)\n", dir, step, shs_format_bytes(b, sizeof b, bytes), files);
    fflush(stdout);
    return 0;
}

/* --backend mpi: the communicators of this process's rank (comm_mpi.h). */
typedef struct {
    shs_comm_t *world;     /* the trained run */
    shs_comm_t *ref;       /* --check ddp: the DDP run's own world */
    shs_comm_t *check;     /* --check ddp: merging snapshots and verdicts across processes */
    int rank;
} mpi_job_t;

/* Join the MPI job: the world size is the job's, rank 0 alone writes stdout.
 * Returns -1 to go on, else an exit code (usage errors: 2, as on threads). */
static int mpi_start(train_opts_t *o, mpi_job_t *m) {
    if (shs_mpi_init(NULL, NULL) != SHS_OK) {
        report_error("--backend mpi");
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
        report_error("--backend mpi");
        return SIM_EXIT_ERROR;
    }
    o->cfg.comm = m->world;
    return -1;
}

int sim_cmd_train(int argc, char **argv) {
    train_opts_t o = {0};
    int rc = sim_train_parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    shs_train_config_t *cfg = &o.cfg;
    mpi_job_t mpi = {0};
    if (o.backend_mpi && (rc = mpi_start(&o, &mpi)) >= 0) shs_mpi_abort(rc);
    if (cfg->backend != SHS_WORLD_CPU) { /* --backend cuda: fail early and clearly without a GPU */
        int gpus;
        if (shs_cuda_device_count(&gpus) != SHS_OK) {
            report_error(cfg->backend == SHS_WORLD_CUDA ? "--backend cuda"
                         : o.backend_mpi                ? "--backend mpi-nccl"
                                                        : "--backend cuda-nccl");
            if (o.backend_mpi) shs_mpi_abort(SIM_EXIT_ERROR); /* every process, none left waiting */
            return SIM_EXIT_ERROR;
        }
    }

    if (!o.device_mem_given && cfg->backend == SHS_WORLD_CPU) { /* CUDA: the GPU's own limit */
        /* Simulated devices live in host RAM: share 3/4 of it among all ranks
         * (of both runs under --check), so an oversized model or world fails
         * with a clean out-of-memory error naming the rank. */
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (ram > 0) cfg->device_mem = (size_t)(ram * 0.75 / cfg->world_size / (o.check_ddp ? 2 : 1));
    }

    shs_model_file_t *nd = NULL;  /* outlives the trainers */
    if (o.model_file) {
        if (shs_model_file_load(&nd, o.model_file) != SHS_OK) {
            report_error(NULL);
            return SIM_EXIT_ERROR;
        }
        cfg->model_file = nd;
    }

    shs_corpus_t corpus;
    if (o.data_path) {
        if (shs_corpus_load(&corpus, o.data_path) != SHS_OK) {
            report_error(NULL);
            shs_model_file_free(nd);
            return SIM_EXIT_ERROR;
        }
    } else {
        shs_corpus_builtin(&corpus);
    }

    shs_trainer_t *main_run = NULL;
    shs_checker_t *checker = NULL; /* --check ddp */
    /* not exact by design, so --check ddp reports the drift instead of failing */
    const char *drift_why = o.check_ddp ? shs_check_inexact_reason(cfg) : NULL;
    shs_check_drift_t worst = {0, 0, 0};
    shs_trace_recorder_t *trace_rec = NULL;
    int exit_code = SIM_EXIT_ERROR;
    char b1[32], b2[32];

    sim_progress_t *pg = sim_progress_start("train", o.progress_s);
    if (o.trace_dir && sim_trace_start(cfg, &trace_rec) != SHS_OK) {
        report_error("--trace");
        goto done;
    }
    sim_progress_begin(pg, "setting up %d rank%s (devices, model, strategy state)", cfg->world_size,
                       cfg->world_size == 1 ? "" : "s");
    shs_status_t create_st = shs_trainer_create(&main_run, cfg, &corpus);
    sim_progress_end(pg);
    if (create_st != SHS_OK) {
        report_error(NULL);
        if (!o.device_mem_given && strstr(shs_last_error(), "out of device memory"))
            sim_note("train", "the %d simulated devices share this machine's RAM (%s each); "
                            "use a smaller --world or model, or set --device-mem\n",
                    cfg->world_size * (o.check_ddp ? 2 : 1), shs_format_bytes(b1, sizeof b1, (double)cfg->device_mem));
        goto done;
    }
    const shs_layout_t *lo = shs_trainer_layout(main_run);
    char model_desc[320];
    if (nd)
        snprintf(model_desc, sizeof model_desc, "model %s T=%d, %zu params", o.model_file, cfg->model.context,
                 lo->num_params);
    else if (o.hf_config)
        sim_model_describe(model_desc, sizeof model_desc, o.hf_config, cfg, lo->num_params);
    else
        snprintf(model_desc, sizeof model_desc, "model L=%d C=%d NH=%d T=%d, %.3fM params", cfg->model.num_layers,
                 cfg->model.channels, cfg->model.num_heads, cfg->model.context, (double)lo->num_params / 1e6);
    printf("shardsim train: %d ranks (%s%s), strategy %s, %s in %d units\n", cfg->world_size,
           cfg->backend == SHS_WORLD_CUDA ? "cuda, one GPU" : cfg->backend == SHS_WORLD_CUDA_NCCL ? "cuda, nccl" : "cpu",
           o.backend_mpi ? ", mpi: one process per rank" : "",
           shs_strategy_name(cfg->strategy.kind), model_desc, lo->num_units);
    if (o.hf_config)
        printf("  hf config %s: model_type %s, torch_dtype %s (train computes in --param-dtype %s)%s%s\n", o.hf_config,
               o.hf.model_type, o.hf.torch_dtype ? shs_dtype_name(o.hf.torch_dtype) : "not given",
               shs_dtype_name(cfg->strategy.param_dtype ? cfg->strategy.param_dtype : SHS_F32),
               o.hf.not_applied[0] ? "; not applied: " : "", o.hf.not_applied);
    char optim_desc[128];
    if (cfg->strategy.optim.kind == SHS_OPTIM_ADAMW)
        snprintf(optim_desc, sizeof optim_desc, "adamw lr %g betas (%g, %g) eps %g wd %g", (double)cfg->strategy.optim.lr,
                 (double)cfg->strategy.optim.beta1, (double)cfg->strategy.optim.beta2, (double)cfg->strategy.optim.eps,
                 (double)cfg->strategy.optim.weight_decay);
    else
        snprintf(optim_desc, sizeof optim_desc, "sgd lr %g momentum %g wd %g", (double)cfg->strategy.optim.lr,
                 (double)cfg->strategy.optim.momentum, (double)cfg->strategy.optim.weight_decay);
    printf("  data %s (%s), micro-batch %d x %d tokens per rank, %s, seed %llu, device memory %s per rank\n",
           corpus.source, shs_format_bytes(b1, sizeof b1, (double)corpus.len), cfg->micro_batch, cfg->model.context,
           optim_desc, (unsigned long long)cfg->strategy.seed,
           cfg->device_mem == SIZE_MAX ? "unlimited" : shs_format_bytes(b2, sizeof b2, (double)cfg->device_mem));
    if (cfg->attention != SHS_ATTENTION_EAGER || cfg->autocast || cfg->dropout > 0 || cfg->recompute)
        printf("  activations: attention %s, autocast %s, dropout %g, recompute %s (gpt.h)\n",
               shs_attention_name(cfg->attention), cfg->autocast ? shs_dtype_name(cfg->autocast) : "off",
               (double)cfg->dropout, shs_recompute_name(cfg->recompute));
    if (o.ds_path) {
        char desc[8192];
        shs_ds_config_describe(&o.ds, cfg, o.ds_src, "  ", desc, sizeof desc);
        printf("%s", desc);
    }
    const char *norm_desc = shs_train_loss_norm(cfg) == SHS_LOSS_NORM_GLOBAL_TOKENS ? "over the global batch's tokens"
                                                                                   : "per micro-batch";
    const shs_documents_t *docs = shs_trainer_documents(main_run);
    if (docs)
        printf("  documents: %s, separator byte 0x%02x kept as EOS: %zu in %s, %zu empty (the separator alone), %zu "
               "longer than T=%d (%s); loss normalized %s (train.h)\n",
               cfg->data_mode == SHS_DATA_PACK ? "packed" : "padded", cfg->doc_sep, docs->documents, corpus.source,
               docs->empty, docs->cut, cfg->model.context,
               cfg->data_mode == SHS_DATA_PACK ? "split into pieces of T" : "their first T tokens taken", norm_desc);
    else if (cfg->loss_norm != SHS_LOSS_NORM_DEFAULT)
        printf("  loss normalized %s (train.h)\n", norm_desc);
    if (o.resume_dir) {
        sim_progress_begin(pg, "loading checkpoint %s", o.resume_dir);
        shs_status_t st = shs_checkpoint_resume(main_run, o.resume_dir);
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error("--resume");
            goto done;
        }
        printf("  resumed from %s after step %ld: steps %ld..%ld\n", o.resume_dir, shs_trainer_steps_done(main_run),
               shs_trainer_steps_done(main_run) + 1, shs_trainer_steps_done(main_run) + o.steps);
    }
    /* steps are numbered from the checkpoint's: step first+1 .. last */
    const long first = shs_trainer_steps_done(main_run), last = first + o.steps;
    if (o.inject_bitflip && (o.inject_bitflip <= first || o.inject_bitflip > last)) {
        exit_code = sim_usage_error("train", "--inject-bitflip %ld is not a step of this run (%ld..%ld)",
                                    o.inject_bitflip, first + 1, last);
        goto done;
    }
    if (o.check_ddp) {
        sim_progress_begin(pg, "setting up the reference DDP run (%d ranks)", cfg->world_size);
        shs_status_t st = shs_checker_create(&checker, cfg, &corpus, mpi.ref, mpi.check);
        if (st == SHS_OK && o.resume_dir &&
            (st = shs_checkpoint_resume(shs_checker_reference(checker), o.resume_dir)) != SHS_OK)
            shs_set_error(st, "reference DDP run: %s", shs_last_error());
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error(NULL);
            goto done;
        }
        if (drift_why)
            printf("  check: DDP on the same data%s; %s is not bit-exact by design: drift of the loss and of all "
                   "%zu parameters from DDP each step (replicas still compared bit for bit)\n",
                   cfg->reduce_order == SHS_REDUCE_ORDER_RING ? ", both in ring reduce order" : "", drift_why,
                   (size_t)lo->num_params);
        else
            printf("  check: DDP on the same data, loss and all %zu parameters compared bit for bit each step\n",
                   (size_t)lo->num_params);
    }
    fflush(stdout);

    int first_rank, local_count; /* this process's ranks: 0.. on threads, its own under MPI */
    shs_trainer_local_ranks(main_run, &first_rank, &local_count);
    if (sim_test_fault_plant(&o.fault, mpi.rank, mpi.world, cfg->timeout_ms) != SHS_OK) {
        report_error("SHS_TEST_FAULT");
        goto done;
    }
    float loss = NAN;
    double total_time = 0;
    long tokens_per_step = (long)cfg->world_size * cfg->micro_batch * cfg->model.context *
                           (cfg->grad_accum > 1 ? cfg->grad_accum : 1);
    double run_start = shs_now_seconds();
    const int step_width = (int)snprintf(NULL, 0, "%ld", last);
    for (long step = 0; step < o.steps; step++) {
        const long gstep = first + step + 1; /* the step's number, counted from the first run */
        double t0 = shs_now_seconds();
        sim_progress_begin(pg, "running step %ld/%ld on %d rank%s", gstep, last, local_count,
                           cfg->backend == SHS_WORLD_CPU ? " threads" : "s");
        shs_status_t step_st = shs_trainer_step(main_run, &loss);
        sim_progress_end(pg);
        if (step_st != SHS_OK) {
            char what[64];
            snprintf(what, sizeof what, "step %ld", gstep);
            size_t n = strlen(what); /* the trainer's own message may name the step already */
            report_error(!strncmp(shs_last_error(), what, n) && shs_last_error()[n] == ':' ? NULL : what);
            goto done;
        }
        double dt = shs_now_seconds() - t0;
        total_time += dt;
        if (!isfinite(loss)) {
            sim_error("train", "step %ld: the loss is %g: training diverged (try a lower --lr)", gstep, (double)loss);
            goto done;
        }
        printf("step %*ld/%ld | loss %.6f | %8.1f ms | %7.0f tok/s", step_width, gstep, last, (double)loss, dt * 1e3,
               (double)tokens_per_step / dt);
        if (o.loss_bits) {
            uint32_t bits;
            memcpy(&bits, &loss, sizeof bits);
            printf(" | loss bits 0x%08" PRIx32, bits);
        }
        if (cfg->strategy.param_dtype == SHS_F16) {
            shs_strategy_t *s0 = shs_trainer_strategy(main_run, first_rank);
            printf(" | scale %g%s", (double)shs_strategy_loss_scale(s0).scale,
                   shs_strategy_step_skipped(s0) ? " (overflow: step skipped)" : "");
        }
        if (cfg->strategy.clip_norm > 0 && !shs_strategy_step_skipped(shs_trainer_strategy(main_run, first_rank)))
            printf(" | grad norm %.6g", (double)shs_trainer_last_grad_norm(main_run));
        if (o.inject_bitflip == gstep) {
            if (shs_trainer_flip_param_bit(main_run, 0, 0) != SHS_OK) { /* wte[0][0] */
                printf("\n");
                report_error("bit flip");
                goto done;
            }
        }
        if (checker) {
            shs_check_step_t cs;
            sim_progress_begin(pg, "running step %ld/%ld of the reference DDP run", gstep, last);
            shs_status_t check_st = shs_checker_step(checker, main_run, loss, &cs);
            sim_progress_end(pg);
            if (check_st == SHS_NOT_EQUAL) {
                static const char *const line_end[] = {
                    [SHS_CHECK_GRAD_NORM] = "\n", [SHS_CHECK_LOSS] = " | ddp check: LOSS DIFFERS\n",
                    [SHS_CHECK_PARAMS] = " | ddp check: PARAMETERS DIFFER\n",
                    [SHS_CHECK_REPLICAS] = " | ddp check: REPLICAS DIFFER\n"};
                printf("%s", line_end[cs.differs]);
                fprintf(stderr, "shardsim train: check failed at %s\n", shs_last_error());
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            if (check_st != SHS_OK) {
                printf("\n");
                report_error(NULL);
                goto done;
            }
            if (drift_why) {
                printf(" | drift vs ddp: loss %+.3e, params max abs %.3e, max rel %.3e", cs.drift.loss,
                       cs.drift.max_abs, cs.drift.max_rel);
                worst = cs.worst;
            } else {
                printf(" | ddp check: bit-identical");
            }
        }
        printf(" | eta %.0f s\n", (shs_now_seconds() - run_start) / (double)(step + 1) * (double)(o.steps - step - 1));
        fflush(stdout);
        if (o.save_every && gstep % o.save_every == 0 && step + 1 < o.steps &&
            save_checkpoint(main_run, o.save_dir, "--save-every", pg) != 0)
            goto done;
    }
    if (o.steps > 0)
        printf("mean step time %.1f ms\n", total_time / (double)o.steps * 1e3);
    if (o.save_dir && save_checkpoint(main_run, o.save_dir, "--save", pg) != 0) goto done;
    if (o.export_path) {
        sim_progress_begin(pg, "exporting %s", o.export_path);
        shs_status_t st = shs_export_safetensors(main_run, o.export_path);
        sim_progress_end(pg);
        if (st != SHS_OK) {
            report_error("--export-safetensors");
            goto done;
        }
        printf("exported %s\n", o.export_path);
    }
    if (trace_rec) {
        shs_status_t trace_st = sim_trace_finish(trace_rec, o.trace_dir);
        trace_rec = NULL;
        if (trace_st != SHS_OK) {
            report_error("--trace");
            goto done;
        }
    }
    if (o.timeline_path && (!o.backend_mpi || mpi.rank == 0)) { /* rank 0's timeline: under MPI, rank 0's process */
        shs_meta_rank_result_t r0 = {0};
        r0.segments = (shs_step_segment_t *)shs_trainer_timeline(main_run, &r0.num_segments);
        char title[128];
        snprintf(title, sizeof title, "train: %s, world %d, rank 0, step %ld", shs_strategy_name(cfg->strategy.kind),
                 cfg->world_size, shs_trainer_steps_done(main_run));
        sim_plot_row_t row = {shs_strategy_name(cfg->strategy.kind), &r0,
                              cfg->device_mem == SIZE_MAX ? 0 : cfg->device_mem, 0};
        if (r0.num_segments == 0 || sim_compare_plot(o.timeline_path, title, &row, 1) != 0) {
            sim_error("train", "--memory-timeline: cannot write %s: %s", o.timeline_path,
                    r0.num_segments ? shs_last_error() : "no step was recorded");
            goto done;
        }
        printf("wrote %s (%d phases of rank 0's last step)\n", o.timeline_path, r0.num_segments);
    }
    print_summary(main_run, loss, o.steps);
    if (o.backend_mpi)
        printf("  (MPI: rank 0's own memory and traffic; every process measures its own rank)\n");
    if (checker && drift_why)
        printf("check: %s: %s drifted from DDP by at most %.3e in loss, %.3e (abs) and %.3e (rel) "
               "in parameters over %ld steps\n", drift_why, shs_strategy_name(cfg->strategy.kind), worst.loss, worst.max_abs,
               worst.max_rel, o.steps);
    else if (checker)
        printf("check: %s matched DDP bit for bit at all %ld steps\n", shs_strategy_name(cfg->strategy.kind), o.steps);
    exit_code = SIM_EXIT_OK;
done:
    sim_progress_stop(pg);
    exit_code = sim_finish_output("train", exit_code); /* before MPI's abort below: a lost report fails the job */
    /* MPI: after an error other processes may wait in a collective that will
     * never complete; MPI_Abort ends them all (comm_mpi.h) */
    if (o.backend_mpi && exit_code != SIM_EXIT_OK) shs_mpi_abort(exit_code);
    shs_checker_destroy(checker);
    shs_trace_recorder_free(trace_rec);
    shs_trainer_destroy(main_run);
    shs_corpus_free(&corpus);
    shs_model_file_free(nd);
    if (o.backend_mpi) {
        shs_comm_destroy(mpi.check);
        shs_comm_destroy(mpi.ref);
        shs_comm_destroy(mpi.world);
        shs_mpi_finalize();
    }
    return exit_code;
}
