/* train_report.c - what `shardsim train` prints (see train_report.h). */
#include "train_report.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model_choice.h"
#include "options.h"
#include "shardsim/clock.h"
#include "shardsim/shard.h"
#include "shardsim/units.h"
#include "shardsim/world.h"

/* "model L=4 C=128 NH=4 T=64, 0.834M params" (or the file's, or the config's) */
static void describe_model(const sim_train_run_t *r, char *buf, size_t n) {
    const shs_train_config_t *cfg = r->cfg;
    const shs_layout_t *lo = shs_trainer_layout(r->main_run);
    if (r->model_file)
        snprintf(buf, n, "model %s T=%d, %zu params", r->o->model_file, cfg->model.context, lo->num_params);
    else if (r->o->hf_config)
        sim_model_describe(buf, n, r->o->hf_config, cfg, lo->num_params);
    else
        snprintf(buf, n, "model L=%d C=%d NH=%d T=%d, %.3fM params", cfg->model.num_layers, cfg->model.channels,
                 cfg->model.num_heads, cfg->model.context, (double)lo->num_params / 1e6);
}

void sim_train_print_header(const sim_train_run_t *r) {
    const train_opts_t *o = r->o;
    const shs_train_config_t *cfg = r->cfg;
    const shs_layout_t *lo = shs_trainer_layout(r->main_run);
    char b1[32], b2[32];
    char model_desc[320];
    describe_model(r, model_desc, sizeof model_desc);
    char alias[160] = "";
    if (o->strategy_alias)
        snprintf(alias, sizeof alias, " (given as %s%s)", o->strategy_alias,
                 cfg->strategy.keep_after_forward ? ", parameters kept from forward to backward" : "");
    printf("shardsim train: %d ranks (%s%s), strategy %s%s, %s in %d units\n", cfg->world_size,
           cfg->backend == SHS_WORLD_CUDA ? "cuda, one GPU" : cfg->backend == SHS_WORLD_CUDA_NCCL ? "cuda, nccl" : "cpu",
           o->backend_mpi ? ", mpi: one process per rank" : "", shs_strategy_name(cfg->strategy.kind), alias,
           model_desc, lo->num_units);
    if (o->hf_config)
        printf("  hf config %s: model_type %s, torch_dtype %s (train computes in --param-dtype %s)%s%s\n", o->hf_config,
               o->hf.model_type, o->hf.torch_dtype ? shs_dtype_name(o->hf.torch_dtype) : "not given",
               shs_dtype_name(cfg->strategy.param_dtype ? cfg->strategy.param_dtype : SHS_F32),
               o->hf.not_applied[0] ? "; not applied: " : "", o->hf.not_applied);
    if (o->hf_config && o->hf.notes[0]) printf("  hf config notes: %s\n", o->hf.notes);
    char optim_desc[128];
    const shs_optim_config_t *opt = &cfg->strategy.optim;
    if (opt->kind == SHS_OPTIM_ADAMW)
        snprintf(optim_desc, sizeof optim_desc, "adamw lr %g betas (%g, %g) eps %g wd %g", (double)opt->lr,
                 (double)opt->beta1, (double)opt->beta2, (double)opt->eps, (double)opt->weight_decay);
    else
        snprintf(optim_desc, sizeof optim_desc, "sgd lr %g momentum %g wd %g", (double)opt->lr, (double)opt->momentum,
                 (double)opt->weight_decay);
    printf("  data %s (%s), micro-batch %d x %d tokens per rank, %s, seed %llu, device memory %s per rank\n",
           r->corpus.source, shs_format_bytes(b1, sizeof b1, (double)r->corpus.len), cfg->micro_batch,
           cfg->model.context, optim_desc, (unsigned long long)cfg->strategy.seed,
           cfg->device_mem == SIZE_MAX ? "unlimited" : shs_format_bytes(b2, sizeof b2, (double)cfg->device_mem));
    if (cfg->attention != SHS_ATTENTION_EAGER || cfg->autocast || cfg->dropout > 0 || cfg->recompute) {
        char rl[48];
        printf("  activations: attention %s, autocast %s, dropout %g, recompute %s (%s)\n",
               shs_attention_name(cfg->attention), cfg->autocast ? shs_dtype_name(cfg->autocast) : "off",
               (double)cfg->dropout, shs_recompute_label(rl, sizeof rl, cfg->recompute, cfg->recompute_every),
               cfg->arch == SHS_ARCH_LLAMA ? "llama.h" : "gpt.h");
        if (sim_recompute_note(cfg)) printf("  note: %s\n", sim_recompute_note(cfg));
    }
    if (cfg->strategy.lr_schedule.kind != SHS_LR_CONSTANT) {
        char sched[320];
        shs_lr_schedule_describe(&cfg->strategy.lr_schedule, (double)opt->lr, sched, sizeof sched);
        printf("  lr schedule (each applied optimizer step, lr_schedule.h): %s\n", sched);
    }
    if (o->ds_path) {
        char desc[8192];
        shs_ds_config_describe(&o->ds, cfg, o->ds_src, "  ", desc, sizeof desc);
        printf("%s", desc);
    }
    const char *norm_desc = shs_train_loss_norm(cfg) == SHS_LOSS_NORM_GLOBAL_TOKENS ? "over the global batch's tokens"
                                                                                   : "per micro-batch";
    const shs_documents_t *docs = shs_trainer_documents(r->main_run);
    if (docs)
        printf("  documents: %s, separator byte 0x%02x kept as EOS: %zu in %s, %zu empty (the separator alone), %zu "
               "longer than T=%d (%s); loss normalized %s (train.h)\n",
               cfg->data_mode == SHS_DATA_PACK ? "packed" : "padded", cfg->doc_sep, docs->documents, r->corpus.source,
               docs->empty, docs->cut, cfg->model.context,
               cfg->data_mode == SHS_DATA_PACK ? "split into pieces of T" : "their first T tokens taken", norm_desc);
    else if (cfg->loss_norm != SHS_LOSS_NORM_DEFAULT)
        printf("  loss normalized %s (train.h)\n", norm_desc);
}

void sim_train_print_resumed(const sim_train_run_t *r) {
    long done = shs_trainer_steps_done(r->main_run);
    printf("  resumed from %s after step %ld: steps %ld..%ld\n", r->o->resume_dir, done, done + 1, done + r->o->steps);
}

void sim_train_print_check_intro(const sim_train_run_t *r) {
    const shs_layout_t *lo = shs_trainer_layout(r->main_run);
    if (r->drift_why)
        printf("  check: DDP on the same data%s; %s is not bit-exact by design: drift of the loss and of all "
               "%zu parameters from DDP each step (replicas still compared bit for bit)\n",
               r->cfg->reduce_order == SHS_REDUCE_ORDER_RING ? ", both in ring reduce order" : "", r->drift_why,
               (size_t)lo->num_params);
    else
        printf("  check: DDP on the same data, loss and all %zu parameters compared bit for bit each step\n",
               (size_t)lo->num_params);
}

void sim_train_print_step(const sim_train_run_t *r, const sim_train_step_t *s) {
    const shs_train_config_t *cfg = r->cfg;
    long tokens_per_step = sim_train_tokens_per_step(cfg);
    const int step_width = (int)snprintf(NULL, 0, "%ld", r->last);
    printf("step %*ld/%ld | loss %.6f | %8.1f ms | %7.0f tok/s", step_width, s->step, r->last, (double)s->loss,
           s->seconds * 1e3, (double)tokens_per_step / s->seconds);
    if (r->o->loss_bits) {
        uint32_t bits;
        memcpy(&bits, &s->loss, sizeof bits);
        printf(" | loss bits 0x%08" PRIx32, bits);
    }
    shs_strategy_t *s0 = shs_trainer_strategy(r->main_run, r->first_rank);
    if (cfg->strategy.param_dtype == SHS_F16)
        printf(" | scale %g%s", (double)shs_strategy_loss_scale(s0).scale,
               shs_strategy_step_skipped(s0) ? " (overflow: step skipped)" : "");
    if (cfg->strategy.clip_norm > 0 && !shs_strategy_step_skipped(s0))
        printf(" | grad norm %.6g", (double)shs_trainer_last_grad_norm(r->main_run));
    if (cfg->strategy.lr_schedule.kind != SHS_LR_CONSTANT && !shs_strategy_step_skipped(s0))
        printf(" | lr %.6g", shs_trainer_last_lr(r->main_run));
}

void sim_train_print_check_step(const sim_train_run_t *r, shs_status_t status, const shs_check_step_t *cs) {
    if (status == SHS_NOT_EQUAL) {
        static const char *const line_end[] = {
            [SHS_CHECK_GRAD_NORM] = "\n", [SHS_CHECK_LOSS] = " | ddp check: LOSS DIFFERS\n",
            [SHS_CHECK_PARAMS] = " | ddp check: PARAMETERS DIFFER\n",
            [SHS_CHECK_REPLICAS] = " | ddp check: REPLICAS DIFFER\n"};
        printf("%s", line_end[cs->differs]);
        fprintf(stderr, "shardsim train: check failed at %s\n", shs_last_error());
    } else if (status != SHS_OK) {
        printf("\n");
    } else if (r->drift_why) {
        printf(" | drift vs ddp: loss %+.3e, params max abs %.3e, max rel %.3e", cs->drift.loss, cs->drift.max_abs,
               cs->drift.max_rel);
    } else {
        printf(" | ddp check: bit-identical");
    }
}

void sim_train_print_step_end(const sim_train_run_t *r, long index, double run_start) {
    long steps = r->o->steps;
    printf(" | eta %.0f s\n", (shs_now_seconds() - run_start) / (double)(index + 1) * (double)(steps - index - 1));
    fflush(stdout);
}

void sim_train_print_mean_step(const sim_train_run_t *r, double total_seconds) {
    if (r->o->steps > 0) printf("mean step time %.1f ms\n", total_seconds / (double)r->o->steps * 1e3);
}

/* Peak memory per rank (at most 16 rows), offload traffic, communication. */
static void print_resources(shs_trainer_t *t) {
    int first, n; /* the ranks this process runs: all of them on threads, its own under MPI */
    shs_trainer_local_ranks(t, &first, &n);
    char b[32];
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
    { /* the emulation's own buffers, and what the GPU run it emulates holds (device.h's two ledgers) */
        shs_gpu_mem_stats_t g;
        shs_trainer_gpu_mem_stats(t, first, &g);
        const shs_strategy_config_t *sc = &shs_trainer_config(t)->strategy;
        printf("  of which emulation (rank %d): up to %.3f MiB of f32 views and working copies a GPU run does not "
               "hold; the %s GPU run would peak at %.3f MiB allocated (compare reports it)\n", first,
               (double)g.emulation_peak / 1048576.0, shs_framework_describe(sc->framework, sc->kind),
               (double)g.alloc.total_peak / 1048576.0);
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

void sim_train_print_summary(const sim_train_run_t *r, float loss) {
    const char *strategy = shs_strategy_name(r->cfg->strategy.kind);
    long steps = r->o->steps; /* this run's; the trainer knows how many the checkpoint had before */
    long done = shs_trainer_steps_done(r->main_run);
    if (steps == 0)
        printf("\nsummary\n  no step run (--steps 0): the weights as of step %ld\n", done);
    else if (done != steps)
        printf("\nsummary\n  final loss %.6f after step %ld (%ld step%s in this run)\n", loss, done, steps,
               steps == 1 ? "" : "s");
    else
        printf("\nsummary\n  final loss %.6f after %ld step%s\n", loss, steps, steps == 1 ? "" : "s");
    print_resources(r->main_run);
    if (r->o->backend_mpi) printf("  (MPI: rank 0's own memory and traffic; every process measures its own rank)\n");
    if (r->checker && r->drift_why)
        printf("check: %s: %s drifted from DDP by at most %.3e in loss, %.3e (abs) and %.3e (rel) "
               "in parameters over %ld steps\n", r->drift_why, strategy, r->worst.loss, r->worst.max_abs,
               r->worst.max_rel, steps);
    else if (r->checker)
        printf("check: %s matched DDP bit for bit at all %ld steps\n", strategy, steps);
}
