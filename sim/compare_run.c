/* compare_run.c - `shardsim compare`'s rows (compare.h): per strategy and
 * variant one meta run, its closed forms, the notes on where they differ,
 * the step-time estimate and the recompute's FLOPs.
 * What it is not: the meta run or the time model (src/meta/), the output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "compare.h"
#include "shardsim/optim.h"
#include "shardsim/units.h"

#define usage_error(...) sim_usage_error("compare", __VA_ARGS__)

static void add_note(char *notes, size_t n, const char *text) {
    size_t len = strlen(notes);
    snprintf(notes + len, n - len, "%s%s", len ? "; " : "", text);
}

static void fill_row(sim_compare_row_t *r, const shs_gpu_mem_preset_t *gmp, const shs_hw_t *hw,
                     const shs_time_opts_t *topts) {
    const shs_train_config_t *tc = &r->cfg.train;
    const shs_meta_rank_result_t *w = r->worst = shs_meta_worst_rank(&r->res);
    int N = tc->world_size;
    int hybrid = r->kind == SHS_HYBRID_SHARD || r->kind == SHS_HYBRID_SHARD_ZERO2;
    int n = hybrid ? (tc->strategy.shard_group_size ? tc->strategy.shard_group_size : N) : N;
    double psi = (double)r->res.num_params;
    int spp = shs_optim_state_per_param(&tc->strategy.optim);
    shs_dtype_t pd = tc->strategy.param_dtype ? tc->strategy.param_dtype : SHS_F32;
    double width = (double)shs_dtype_size(pd);
    int grad_width = (int)shs_dtype_size(tc->strategy.grad_accum_dtype ? tc->strategy.grad_accum_dtype : pd);
    r->form = shs_gpu_states(r->kind, r->framework, psi, n, spp, r->offload, (int)width, grad_width);
    r->paper = shs_zero_paper_states(r->kind, psi, n);
    r->paper_total = shs_zero_paper_total(r->kind, psi, n);
    /* measured in the paper's categories: the f32 master moves from the
     * parameters to the optimizer states (its K) */
    const shs_mem_stats_t *m = &w->gpu.alloc; /* what the framework's GPU run holds */
    r->paper_measured = (shs_zero_states_t){
        .params = (double)(m->peak[SHS_MEM_PARAMS] - w->master_bytes),
        .grads = (double)m->peak[SHS_MEM_GRADS],
        .optim = (double)(m->peak[SHS_MEM_OPTIM] + w->master_bytes)};
    r->paper_sent = shs_zero_paper_sent(r->kind, psi, N, n, width);
    r->sent_total = r->calls = 0;
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        if (op == SHS_OP_SPLIT || op == SHS_OP_BARRIER) continue;
        r->sent[op] = w->last_step_comm.bytes_sent[op];
        r->sent_total += r->sent[op];
        r->calls += w->last_step_comm.calls[op];
    }
    shs_gpu_mem_report(gmp, w, r->kind, N, n, &r->gm);
    r->fits = r->gm.fits;
    shs_estimate_step(&r->cfg, &r->res, w, hw, topts, &r->est);
    /* why measured differs from the closed forms */
    char b[64], t[160];
    double states = (double)(m->peak[SHS_MEM_PARAMS] + m->peak[SHS_MEM_GRADS] + m->peak[SHS_MEM_OPTIM]);
    double form = r->form.params + r->form.grads + r->form.optim;
    r->notes[0] = 0;
    if (states != form) {
        snprintf(t, sizeof t, "padding %+.0f B (units padded to multiples of %d: %zu elements)", states - form, n,
                 r->res.padded_params - r->res.num_params);
        add_note(r->notes, sizeof r->notes, t);
    }
    /* against the paper's own byte widths (2-byte params and grads, K = 12
     * with the f32 master inside it): with a 2-byte param dtype shardsim
     * holds the same, except DDP (no persistent 2-byte copy), an f32
     * gradient buffer, and an optimizer other than AdamW */
    if (r->offload == SHS_OFFLOAD_NONE && fabs(form - r->paper_total) > 0.005 * r->paper_total) {
        snprintf(t, sizeof t, "model states %+.3g%% vs the paper's 2+2+12 total: %s", 100.0 * (form - r->paper_total) / r->paper_total,
                 width == 4 ? "f32 params/grads where it holds 2-byte ones"
                 : spp != 2 ? "optimizer state other than Adam's"
                 : r->framework == SHS_FRAMEWORK_DEEPSPEED && grad_width < 4 ? "DeepSpeed's f32 gradient copy for the optimizer step"
                 : grad_width == 4 ? "an f32 gradient buffer (--grad-accum-dtype f32)"
                 : "no persistent 2-byte parameter copy (cast at each use)");
        add_note(r->notes, sizeof r->notes, t);
    }
    if (r->offload != SHS_OFFLOAD_NONE) {
        snprintf(t, sizeof t, "offload: %s on host", r->offload == SHS_OFFLOAD_PARAMS ? "params+optimizer" : "optimizer");
        add_note(r->notes, sizeof r->notes, t);
    }
    snprintf(t, sizeof t, "+activations %s, buffers %s not in the formula",
             shs_format_bytes(b, sizeof b, (double)m->peak[SHS_MEM_ACTIVATIONS]),
             shs_format_bytes(b + 32, 32, (double)m->peak[SHS_MEM_COMM]));
    add_note(r->notes, sizeof r->notes, t);
    if ((double)r->sent_total != r->paper_sent) {
        snprintf(t, sizeof t, "comm %+.4g%% vs paper", 100.0 * ((double)r->sent_total - r->paper_sent) / r->paper_sent);
        add_note(r->notes, sizeof r->notes, t);
        if (hybrid && N / n > 1) add_note(r->notes, sizeof r->notes, "replica all-reduce of the shard over N/G ranks");
        if (tc->strategy.reduce_dtype && tc->strategy.reduce_dtype != tc->strategy.param_dtype)
            add_note(r->notes, sizeof r->notes, "gradients reduced in reduce dtype");
        if (r->res.padded_params != r->res.num_params) add_note(r->notes, sizeof r->notes, "padding");
        if (r->kind != SHS_DDP && w->last_step_comm.bytes_sent[SHS_OP_ALL_REDUCE] && !hybrid) {
            snprintf(t, sizeof t, "all_reduce of loss/norm scalars %llu B",
                     (unsigned long long)w->last_step_comm.bytes_sent[SHS_OP_ALL_REDUCE]);
            add_note(r->notes, sizeof r->notes, t);
        } else if (r->kind == SHS_DDP) {
            add_note(r->notes, sizeof r->notes, "+ the loss all-reduce (4 B)");
        }
    }
}

/* The name a checkpointing row carries: +ckpt (full), +sel (Megatron's
 * selective), +sac-op, +sac-N (torchtitan's selective). */
void sim_compare_ckpt_suffix(char *buf, size_t n, const shs_train_config_t *tc) {
    switch (tc->recompute) {
    case SHS_RECOMPUTE_SELECTIVE: snprintf(buf, n, "+sel"); break;
    case SHS_RECOMPUTE_SELECTIVE_OP: snprintf(buf, n, "+sac-op"); break;
    case SHS_RECOMPUTE_EVERY_N: snprintf(buf, n, "+sac-%d", tc->recompute_every); break;
    default: snprintf(buf, n, "+ckpt");
    }
}

/* The recompute's FLOPs: the row's measured FLOPs minus those of the same
 * run keeping every activation (a second meta run; same rank); HFU counts
 * them (Korthikanti et al. 2022 §6: hardware FLOPs include recomputation),
 * MFU does not. */
static int row_hfu(sim_compare_row_t *r, const shs_hw_t *hw) {
    const shs_train_config_t *tc = &r->cfg.train;
    shs_kernel_env_t env = shs_kernel_env(tc, hw, 0);
    double peak = env.matmul_dtype == SHS_F32 ? hw->peak_flops_32 : hw->peak_flops_16;
    double steps = r->cfg.steps > 0 ? r->cfg.steps : 1;
    r->recompute_flops = 0;
    if (tc->recompute != SHS_RECOMPUTE_NONE) {
        shs_meta_config_t plain = r->cfg;
        plain.train.recompute = SHS_RECOMPUTE_NONE;
        shs_meta_result_t res;
        if (shs_meta_run(&plain, &res) != SHS_OK) {
            sim_error("compare", "%s without recompute: %s", r->name, shs_last_error());
            return SIM_EXIT_ERROR;
        }
        int k = (int)(r->worst - r->res.ranks);
        r->recompute_flops = ((double)r->worst->kernels.flops - (double)res.ranks[k].kernels.flops) / steps;
        shs_meta_result_free(&res);
    }
    r->hfu = r->est.step_s > 0 ? (r->est.model_flops + r->recompute_flops) / (r->est.step_s * peak) : 0;
    return SIM_EXIT_OK;
}

int sim_compare_run(const sim_compare_job_t *job, sim_compare_row_t **rows_out, int *nrows_out) {
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD,
                                                SHS_HYBRID_SHARD_ZERO2};
    const shs_meta_config_t *base = &job->base;
    const shs_train_config_t *tc = &base->train;
    const char *strategies = job->strategies;
    const shs_time_opts_t topts = {job->eff, job->algo, job->proto};
    char ckpt_suffix[24];
    sim_compare_ckpt_suffix(ckpt_suffix, sizeof ckpt_suffix, tc);
    sim_compare_row_t *rows = calloc(4 * SHS_NUM_STRATEGIES, sizeof *rows);
    *rows_out = rows;
    *nrows_out = 0;
    if (!rows) return SIM_EXIT_ERROR;
    int nrows = 0, rc = SIM_EXIT_OK;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (strategies) {
            char item[64];
            int found = 0;
            for (const char *p = strategies; !found && sim_list_next(&p, item, sizeof item);)
                found = !strcmp(item, shs_strategy_name(kinds[k]));
            if (!found) continue;
        }
        for (int var = 0; var < (job->ds_rows ? 1 : job->variants_all ? 4 : 1); var++) {
            sim_compare_row_t *r = &rows[nrows];
            r->kind = kinds[k];
            r->ckpt = var & 1;
            int off = job->ds_rows ? tc->strategy.offload != SHS_OFFLOAD_NONE : (var & 2) != 0;
            r->offload = job->ds_rows ? tc->strategy.offload
                         : !off ? SHS_OFFLOAD_NONE
                         : (kinds[k] == SHS_ZERO3 || kinds[k] == SHS_HYBRID_SHARD) ? SHS_OFFLOAD_PARAMS : SHS_OFFLOAD_OPTIMIZER;
            snprintf(r->name, sizeof r->name, "%s%s%s", shs_strategy_name(r->kind), r->ckpt ? ckpt_suffix : "",
                     off ? "+offload" : "");
            r->cfg = *base;
            r->cfg.train.strategy.kind = r->kind;
            r->cfg.train.recompute = r->ckpt ? job->recompute : SHS_RECOMPUTE_NONE;
            r->cfg.train.strategy.offload = r->offload;
            /* the framework the row's memory models, and the dtypes its gradients take there unless given:
             * PyTorch's DDP and FSDP2 keep f32 gradients of their f32 parameters and reduce them in f32
             * (torchtitan's FSDP2 default, reduce_dtype float32) */
            shs_strategy_config_t *sc = &r->cfg.train.strategy;
            sc->framework = job->framework ? job->framework : shs_strategy_stage(r->kind)->framework;
            r->framework = sc->framework;
            int torch_f32_grads = sc->framework == SHS_FRAMEWORK_TORCH && !job->ds &&
                                  (r->kind == SHS_DDP || shs_strategy_stage(r->kind)->shards_params);
            if (torch_f32_grads && !job->grad_accum_dtype_given) sc->grad_accum_dtype = SHS_F32;
            if (torch_f32_grads && !job->reduce_dtype_given) sc->reduce_dtype = SHS_F32;
            r->cfg.gpu_reserve_limit =
                (size_t)(job->gmp.board_bytes - shs_gpu_fixed_bytes(&job->gmp, r->kind, tc->world_size,
                                                                    tc->strategy.shard_group_size));
            if (job->ds && !shs_strategy_stage(r->kind)->shards_params) { /* the stage-3 keys: stage 3 only */
                r->cfg.train.replicate_below = shs_train_default_config().replicate_below;
                r->cfg.train.strategy.backward_prefetch = shs_train_default_config().strategy.backward_prefetch;
            }
            if (shs_meta_run(&r->cfg, &r->res) != SHS_OK) {
                sim_error("compare", "%s: %s", r->name, shs_last_error());
                rc = SIM_EXIT_ERROR;
                goto done;
            }
            nrows++;
            fill_row(r, &job->gmp, &job->hw, &topts);
            if ((rc = row_hfu(r, &job->hw)) != SIM_EXIT_OK) goto done;
        }
    }
    if (!nrows) {
        rc = usage_error("no strategy selected by --strategies %s", strategies);
    }
done:
    *nrows_out = nrows;
    return rc;
}

void sim_compare_free(sim_compare_row_t *rows, int nrows) {
    for (int i = 0; i < nrows && rows; i++) shs_meta_result_free(&rows[i].res);
    free(rows);
}
