/* compare_print.c - `shardsim compare`'s output (compare.h): the text table
 * with its notes and legend, CSV, JSON.
 * What it is not: the runs (compare_run.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "compare.h"
#include "options.h"
#include "shardsim/optim.h"
#include "shardsim/units.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

/* ---- output -------------------------------------------------------------------- */

static double unit_div(size_t maxb, const char **name) {
    if (maxb >= ((size_t)1 << 30)) { *name = "GiB"; return 1073741824.0; }
    if (maxb >= ((size_t)1 << 20)) { *name = "MiB"; return 1048576.0; }
    *name = "KiB";
    return 1024.0;
}

/* --accounting zero-paper: each row in the ZeRO paper's categories (2-byte
 * parameters, 2-byte gradients, K = 12 optimizer states holding the f32
 * master), measured beside the paper's (2+2+K)Psi forms, per rank, GB. */
static void print_zero_paper(FILE *out, const sim_compare_row_t *rows, int nrows, int w) {
    fprintf(out, "ZeRO paper accounting (Rajbhandari et al. 2020, §3.1 and §5; K = 12; GB = 1e9 bytes per rank), "
                 "measured | paper:\n");
    fprintf(out, "%-*s %-9s %17s %17s %17s %17s %8s\n", w, "strategy", "stage", "params (2)", "grads (2)",
            "optimizer (K)", "total", "diff");
    for (int i = 0; i < nrows; i++) {
        const sim_compare_row_t *r = &rows[i];
        const shs_stage_t *st = shs_strategy_stage(r->kind);
        const char *stage = st->shards_params ? "Pos+g+p" : st->shards_grads ? "Pos+g" : st->shards_optimizer ? "Pos" : "baseline";
        const shs_zero_states_t *m = &r->paper_measured, *f = &r->paper;
        double mt = m->params + m->grads + m->optim;
        fprintf(out, "%-*s %-9s %8.4g|%-8.4g %8.4g|%-8.4g %8.4g|%-8.4g %8.4g|%-8.4g %+7.2f%%\n", w, r->name, stage,
                m->params / 1e9, f->params / 1e9, m->grads / 1e9, f->grads / 1e9, m->optim / 1e9, f->optim / 1e9,
                mt / 1e9, r->paper_total / 1e9, 100.0 * (mt - r->paper_total) / r->paper_total);
    }
    fprintf(out, "  measured params: the param-dtype copy (f32 with --param-dtype f32); optimizer: optimizer state\n"
                 "  + the f32 master parameters; offloaded state is on the host and not counted\n");
}

static void print_table(FILE *out, const sim_compare_row_t *rows, int nrows, const shs_meta_config_t *base, const char *model_name,
                        const shs_gpu_mem_preset_t *gmp, int board_given, const shs_hw_t *hw, double eff,
                        const char *algo_name, const char *proto_name, int zero_paper) {
    shs_kernel_env_t env = shs_kernel_env(&base->train, hw, eff);
    char eff_text[64];
    snprintf(eff_text, sizeof eff_text, "%.1f%%%s", 100 * env.gemm_eff, eff > 0 ? " (--efficiency)" : "");
    size_t maxb = 0, device_mem = (size_t)gmp->board_bytes;
    for (int i = 0; i < nrows; i++)
        if ((size_t)rows[i].gm.total > maxb) maxb = (size_t)rows[i].gm.total;
    const char *u;
    double d = unit_div(maxb, &u);
    char b1[32];
    const shs_train_config_t *tc = &base->train;
    char suffix[24], label[48];
    sim_compare_ckpt_suffix(suffix, sizeof suffix, tc);
    fprintf(out, "shardsim compare: %s, %zu parameters (Psi), world %d, micro-batch %d x %d tokens, param dtype %s, %s\n",
           model_name, rows[0].res.num_params, tc->world_size, tc->micro_batch, tc->model.context,
           shs_dtype_name(tc->strategy.param_dtype), shs_optim_name(tc->strategy.optim.kind));
    char b2[32], b3[32];
    fprintf(out, "  %d wrap units; board memory %s (%s, %s); per-rank %s; memory: what each row's framework "
           "holds on the GPU, measured | closed form (ZeRO paper §5 partitioning, the framework's widths)\n",
           rows[0].res.num_units, shs_format_bytes(b1, sizeof b1, (double)device_mem), gmp->name,
           board_given ? "--device-mem" : "nvidia-smi's total", u);
    fprintf(out, "  fixed per rank: CUDA context %s + NCCL %s per communicator (NCCL_BUFFSIZE %s x %d channels x 2 ring "
           "peers%s); reserved: PyTorch's caching allocator (modelled); total = reserved + fixed; fits: total <= board\n",
           shs_format_bytes(b1, sizeof b1, gmp->cuda_context_bytes),
           shs_format_bytes(b2, sizeof b2, shs_gpu_nccl_comm_bytes(gmp, 3)), shs_format_bytes(b3, sizeof b3, gmp->nccl_buffsize),
           gmp->nccl_channels, gmp->nvls_bytes > 0 ? " + NVLink SHARP buffers" : "");
    int w = 8; /* the name column fits the longest row name */
    for (int i = 0; i < nrows; i++)
        if ((int)strlen(rows[i].name) > w) w = (int)strlen(rows[i].name);
    fprintf(out, "%-*s %17s %17s %17s %9s %9s %9s %9s %9s %4s | %9s %9s %9s %9s %6s | %9s %9s %8s %8s %9s %5s %5s\n", w,
            "strategy", "params", "grads", "optimizer", "activ.", "comm buf", "alloc", "reserved", "total", "fits",
            "AG sent", "RS sent",
            "AR sent", "paper", "calls", "step s", "compute", "overlap+", "exposed", "tok/s/GPU", "MFU", "HFU");
    for (int i = 0; i < nrows; i++) {
        const sim_compare_row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc;
        fprintf(out, "%-*s %8.3f|%-8.3f %8.3f|%-8.3f %8.3f|%-8.3f %9.3f %9.3f %9.3f %9.3f %9.3f %4s | %9.3f %9.3f %9.3f %9.3f "
               "%6llu | %9.4g %9.4g %8.3g %8.3g %9.0f %4.1f%% %4.1f%%\n",
               w, r->name, m->peak[SHS_MEM_PARAMS] / d, r->form.params / d, m->peak[SHS_MEM_GRADS] / d, r->form.grads / d,
               m->peak[SHS_MEM_OPTIM] / d, r->form.optim / d, m->peak[SHS_MEM_ACTIVATIONS] / d,
               m->peak[SHS_MEM_COMM] / d, m->total_peak / d, r->gm.reserved / d, r->gm.total / d, r->fits ? "yes" : "NO",
               r->sent[SHS_OP_ALL_GATHER] / d,
               r->sent[SHS_OP_REDUCE_SCATTER] / d, r->sent[SHS_OP_ALL_REDUCE] / d, r->paper_sent / d,
               (unsigned long long)r->calls, r->est.step_s, r->est.compute_s, r->est.slowdown_s, r->est.exposed_comm_s,
               r->est.step_s > 0 ? r->est.tokens / r->est.step_s : 0, 100 * r->est.mfu, 100 * r->hfu);
    }
    if (zero_paper) print_zero_paper(out, rows, nrows, w);
    fprintf(out, "notes (where measured differs from the closed forms):\n");
    for (int i = 0; i < nrows; i++) fprintf(out, "  %-*s %s\n", w, rows[i].name, rows[i].notes);
    fprintf(out, "frameworks (whose GPU run each row's memory is; this CPU emulation holds more: its f32 views and working "
                 "copies, train's report):\n");
    for (int i = 0; i < nrows; i++) {
        const sim_compare_row_t *r = &rows[i];
        const shs_strategy_config_t *sc = &r->cfg.train.strategy;
        shs_dtype_t rpd = sc->param_dtype ? sc->param_dtype : SHS_F32, gd = sc->grad_accum_dtype ? sc->grad_accum_dtype : rpd;
        char e[32], pk[32];
        fprintf(out, "  %-*s %s: params %s, grads %s reduced in %s; loss %s; emulation +%s (process peak %s)\n", w, r->name,
                shs_framework_describe(r->framework, r->kind), shs_dtype_name(rpd), shs_dtype_name(gd),
                shs_dtype_name(sc->reduce_dtype ? sc->reduce_dtype : rpd),
                r->cfg.train.loss_kernel == SHS_LOSS_FUSED ? "fused cross-entropy" : "torch cross_entropy on f32 logits",
                shs_format_bytes(e, sizeof e, (double)r->worst->gpu.emulation_peak),
                shs_format_bytes(pk, sizeof pk, (double)r->worst->mem.total_peak));
    }
    fprintf(out, "closed forms: Rajbhandari et al. 2020 §5: DDP (2+2+K)Psi, ZeRO-1 2Psi+2Psi+K Psi/N, ZeRO-2 2Psi+(2+K)Psi/N,\n"
           "  ZeRO-3 (2+2+K)Psi/N (hybrid: N -> shard group G); paper volume per rank: 2Psi (DDP, ZeRO-1/2), 3Psi (ZeRO-3)\n"
           "  x (N-1)/N x param-dtype bytes; sent = ring algorithm, nccl-tests busbw convention.\n"
           "step time (s, last of %d steps; see include/shardsim/step_time.h): compute = the step's kernels (GEMMs at %s of\n"
           "  the %s peak with tile and wave quantization, FlashAttention-2's efficiency, the rest at HBM bandwidth);\n"
           "  collectives as NCCL 2.20.3's tuning model prices them (%s, %s); overlap+ = compute slowed while NCCL holds\n"
           "  SMs; exposed = communication the compute did not hide (prefetch per unit); + offload.\n"
           "  MFU = (6 Psi + 12 L C T) x tokens / (step time x peak), C = heads x head dim, T min(T, window) on windowed\n"
           "  layers; HFU adds the recompute's FLOPs (measured against the same run keeping every activation)\n"
           "activations: attention %s, autocast %s, dropout %g, %s recompute %s (%s)%s\n",
           base->steps, eff_text, env.matmul_dtype == SHS_F32 ? "TF32" : shs_dtype_name(env.matmul_dtype), algo_name,
           proto_name, shs_attention_name(tc->attention),
           tc->autocast ? shs_dtype_name(tc->autocast) : "off", (double)tc->dropout, suffix,
           shs_recompute_label(label, sizeof label, tc->recompute, tc->recompute_every),
           tc->arch == SHS_ARCH_LLAMA ? "llama.h" : "gpt.h",
           tc->arch == SHS_ARCH_LLAMA && !tc->model_file ? "; the Llama family's defaults: flash, bf16 autocast "
                                                           "(--attention eager, --autocast off change them)" : "");
    if (sim_recompute_note(tc)) fprintf(out, "  note: %s\n", sim_recompute_note(tc));
}

static void print_csv(FILE *out, const sim_compare_row_t *rows, int nrows, int zero_paper) {
    fprintf(out, "name,strategy,checkpointing,offload,params_bytes,params_formula,grads_bytes,grads_formula,optimizer_bytes,"
           "optimizer_formula,paper_total,activations_bytes,comm_buffers_bytes,other_bytes,peak_bytes,fits,"
           "all_gather_sent,reduce_scatter_sent,all_reduce_sent,comm_bytes_per_step,paper_comm_bytes,collectives,"
           "compute_s,comm_s,exposed_comm_s,offload_s,step_time_s,mfu,recompute_flops,hfu,gemm_s,attention_s,"
           "elementwise_s,optimizer_s,overlap_slowdown_s,tokens_per_s,framework,reserved_bytes,fixed_bytes,total_bytes,"
           "process_peak_bytes%s\n",
            zero_paper ? ",paper_params_measured,paper_params,paper_grads_measured,paper_grads,paper_optimizer_measured,"
                         "paper_optimizer" : "");
    for (int i = 0; i < nrows; i++) {
        const sim_compare_row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc; /* what the framework's GPU run holds */
        fprintf(out, "%s,%s,%d,%s,%zu,%.0f,%zu,%.0f,%zu,%.0f,%.0f,%zu,%zu,%zu,%zu,%d,%llu,%llu,%llu,%llu,%.0f,%llu,%.6g,%.6g,"
               "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g",
               r->name, shs_strategy_name(r->kind), r->ckpt,
               r->offload == SHS_OFFLOAD_NONE ? "none" : r->offload == SHS_OFFLOAD_PARAMS ? "params" : "optimizer",
               m->peak[SHS_MEM_PARAMS], r->form.params, m->peak[SHS_MEM_GRADS], r->form.grads, m->peak[SHS_MEM_OPTIM],
               r->form.optim, r->paper_total, m->peak[SHS_MEM_ACTIVATIONS], m->peak[SHS_MEM_COMM],
               m->peak[SHS_MEM_OTHER], m->total_peak, r->fits, (unsigned long long)r->sent[SHS_OP_ALL_GATHER],
               (unsigned long long)r->sent[SHS_OP_REDUCE_SCATTER], (unsigned long long)r->sent[SHS_OP_ALL_REDUCE],
               (unsigned long long)r->sent_total, r->paper_sent, (unsigned long long)r->calls, r->est.compute_s,
               r->est.comm_s, r->est.exposed_comm_s, r->est.offload_s, r->est.step_s, r->est.mfu, r->recompute_flops, r->hfu,
               r->est.gemm_s, r->est.attention_s, r->est.elementwise_s, r->est.optimizer_s, r->est.slowdown_s,
               r->est.step_s > 0 ? r->est.tokens / r->est.step_s : 0);
        fprintf(out, ",%s,%.0f,%.0f,%.0f,%zu", shs_framework_name(r->framework), r->gm.reserved, r->gm.context + r->gm.nccl,
                r->gm.total, r->worst->mem.total_peak);
        if (zero_paper)
            fprintf(out, ",%.0f,%.0f,%.0f,%.0f,%.0f,%.0f", r->paper_measured.params, r->paper.params,
                    r->paper_measured.grads, r->paper.grads, r->paper_measured.optim, r->paper.optim);
        fputc('\n', out);
    }
}

#ifdef SHS_HAVE_JANSSON
static int print_json(FILE *out, const sim_compare_row_t *rows, int nrows, const shs_meta_config_t *base, const char *model_name,
                      const shs_gpu_mem_preset_t *gmp, const shs_hw_t *hw, double eff, shs_net_algo_t algo,
                      shs_nccl_proto_t proto, int zero_paper) {
    size_t device_mem = (size_t)gmp->board_bytes;
    const shs_train_config_t *tc = &base->train;
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "model", json_string(model_name));
    json_object_set_new(root, "num_params", json_integer((json_int_t)rows[0].res.num_params));
    json_object_set_new(root, "world_size", json_integer(tc->world_size));
    json_object_set_new(root, "micro_batch", json_integer(tc->micro_batch));
    json_object_set_new(root, "param_dtype", json_string(shs_dtype_name(tc->strategy.param_dtype)));
    json_object_set_new(root, "device_mem", json_integer((json_int_t)device_mem));
    json_object_set_new(root, "gpu", json_string(hw->name));
    shs_kernel_env_t env = shs_kernel_env(tc, hw, eff);
    json_object_set_new(root, "gemm_efficiency", json_real(env.gemm_eff));
    json_object_set_new(root, "matmul_dtype", json_string(env.matmul_dtype == SHS_F32 ? "tf32" : shs_dtype_name(env.matmul_dtype)));
    json_object_set_new(root, "nccl_algo", json_string(algo == SHS_NUM_ALGOS ? "auto" : shs_net_algo_name(algo)));
    json_object_set_new(root, "nccl_proto", json_string(proto == SHS_NUM_PROTOS ? "auto" : shs_nccl_proto_name(proto)));
    json_object_set_new(root, "num_units", json_integer(rows[0].res.num_units));
    json_object_set_new(root, "gpu_memory", json_pack("{s:f,s:f,s:i,s:f}", "cuda_context", gmp->cuda_context_bytes,
                                                      "nccl_buffsize", gmp->nccl_buffsize, "nccl_channels",
                                                      gmp->nccl_channels, "nvls_per_communicator", gmp->nvls_bytes));
    for (int i = 0; i < nrows; i++) {
        const sim_compare_row_t *r = &rows[i];
        const shs_mem_stats_t *m = &r->worst->gpu.alloc; /* what the framework's GPU run holds */
        json_t *o = json_object(), *pr = json_object(), *cf = json_object(), *cm = json_object();
        json_object_set_new(o, "name", json_string(r->name));
        json_object_set_new(o, "strategy", json_string(shs_strategy_name(r->kind)));
        json_object_set_new(o, "checkpointing", json_boolean(r->ckpt));
        json_object_set_new(o, "offload", json_string(r->offload == SHS_OFFLOAD_NONE ? "none"
                                                      : r->offload == SHS_OFFLOAD_PARAMS ? "params" : "optimizer"));
        json_object_set_new(pr, "params", json_integer((json_int_t)m->peak[SHS_MEM_PARAMS]));
        json_object_set_new(pr, "grads", json_integer((json_int_t)m->peak[SHS_MEM_GRADS]));
        json_object_set_new(pr, "optimizer", json_integer((json_int_t)m->peak[SHS_MEM_OPTIM]));
        json_object_set_new(pr, "activations", json_integer((json_int_t)m->peak[SHS_MEM_ACTIVATIONS]));
        json_object_set_new(pr, "comm_buffers", json_integer((json_int_t)m->peak[SHS_MEM_COMM]));
        json_object_set_new(pr, "other", json_integer((json_int_t)m->peak[SHS_MEM_OTHER]));
        json_object_set_new(pr, "peak", json_integer((json_int_t)m->total_peak));
        json_object_set_new(pr, "reserved", json_integer((json_int_t)r->gm.reserved));
        json_object_set_new(pr, "cuda_context", json_integer((json_int_t)r->gm.context));
        json_object_set_new(pr, "nccl", json_integer((json_int_t)r->gm.nccl));
        json_object_set_new(pr, "total", json_integer((json_int_t)r->gm.total));
        json_object_set_new(o, "per_rank_bytes", pr);
        json_object_set_new(o, "framework", json_string(shs_framework_name(r->framework)));
        json_object_set_new(o, "process_bytes", json_pack("{s:I,s:I}", "peak", (json_int_t)r->worst->mem.total_peak,
                                                          "emulation_peak", (json_int_t)r->worst->gpu.emulation_peak));
        json_object_set_new(cf, "params", json_real(r->form.params));
        json_object_set_new(cf, "grads", json_real(r->form.grads));
        json_object_set_new(cf, "optimizer", json_real(r->form.optim));
        json_object_set_new(cf, "paper_total", json_real(r->paper_total));
        json_object_set_new(cf, "paper_comm_bytes", json_real(r->paper_sent));
        json_object_set_new(o, "closed_form_bytes", cf);
        if (zero_paper)
            json_object_set_new(o, "zero_paper_bytes",
                                json_pack("{s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "measured", "params",
                                          r->paper_measured.params, "grads", r->paper_measured.grads, "optimizer",
                                          r->paper_measured.optim, "paper", "params", r->paper.params, "grads",
                                          r->paper.grads, "optimizer", r->paper.optim));
        json_object_set_new(o, "fits", json_boolean(r->fits));
        json_object_set_new(o, "host_bytes", json_integer((json_int_t)r->worst->host.total_peak));
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            if (op == SHS_OP_SPLIT || op == SHS_OP_BARRIER) continue;
            /* sends and receives only where a layout makes them (none of today's) */
            if (shs_coll_op_is_p2p((shs_coll_op_t)op) && !r->worst->last_step_comm.calls[op]) continue;
            json_object_set_new(cm, shs_coll_op_name((shs_coll_op_t)op),
                                json_pack("{s:I,s:I,s:I}", "calls", (json_int_t)r->worst->last_step_comm.calls[op],
                                          "bytes", (json_int_t)r->worst->last_step_comm.bytes[op], "bytes_sent",
                                          (json_int_t)r->sent[op]));
        }
        json_object_set_new(o, "collectives", cm);
        json_object_set_new(o, "comm_bytes_per_step", json_integer((json_int_t)r->sent_total));
        json_object_set_new(o, "num_collectives", json_integer((json_int_t)r->calls));
        json_object_set_new(o, "flops", json_integer((json_int_t)(r->worst->kernels.flops / (uint64_t)(r->cfg.steps))));
        json_object_set_new(o, "compute_s", json_real(r->est.compute_s));
        json_object_set_new(o, "comm_s", json_real(r->est.comm_s));
        json_object_set_new(o, "exposed_comm_s", json_real(r->est.exposed_comm_s));
        json_object_set_new(o, "offload_s", json_real(r->est.offload_s));
        json_object_set_new(o, "gemm_s", json_real(r->est.gemm_s));
        json_object_set_new(o, "attention_s", json_real(r->est.attention_s));
        json_object_set_new(o, "elementwise_s", json_real(r->est.elementwise_s));
        json_object_set_new(o, "optimizer_s", json_real(r->est.optimizer_s));
        json_object_set_new(o, "overlap_slowdown_s", json_real(r->est.slowdown_s));
        json_object_set_new(o, "step_time_s", json_real(r->est.step_s));
        json_object_set_new(o, "tokens_per_s", json_real(r->est.step_s > 0 ? r->est.tokens / r->est.step_s : 0));
        json_object_set_new(o, "mfu", json_real(r->est.mfu));
        char label[48];
        json_object_set_new(o, "recompute", json_string(shs_recompute_label(label, sizeof label, r->cfg.train.recompute,
                                                                            r->cfg.train.recompute_every)));
        json_object_set_new(o, "recompute_flops", json_real(r->recompute_flops));
        json_object_set_new(o, "hfu", json_real(r->hfu));
        json_object_set_new(o, "notes", json_string(r->notes));
        json_t *tl = json_array();
        for (int s = 0; s < r->worst->num_segments; s++) {
            const shs_step_segment_t *g = &r->worst->segments[s];
            json_t *seg = json_object(), *mem = json_object();
            static const char *const kinds[] = {"setup", "forward", "backward", "optim", "loss"};
            json_object_set_new(seg, "label", json_string(g->label));
            json_object_set_new(seg, "phase", json_string(kinds[g->kind]));
            json_object_set_new(seg, "unit", json_integer(g->unit));
            for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++)
                json_object_set_new(mem, shs_mem_category_name((shs_mem_category_t)c), json_integer((json_int_t)g->gpu_mem_end[c]));
            json_object_set_new(seg, "mem_end", mem);
            json_object_set_new(seg, "peak_total", json_integer((json_int_t)g->gpu_peak_total));
            json_object_set_new(seg, "flops", json_integer((json_int_t)g->flops));
            json_object_set_new(seg, "collectives", json_integer((json_int_t)(g->calls_end - g->calls_begin)));
            json_array_append_new(tl, seg);
        }
        json_object_set_new(o, "timeline", tl);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "strategies", arr);
    char *s = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!s) return SIM_EXIT_ERROR;
    fprintf(out, "%s\n", s);
    free(s);
    return SIM_EXIT_OK;
}
#endif

int sim_compare_print(FILE *out, const sim_compare_job_t *job, const sim_compare_row_t *rows, int nrows) {
    if (!strcmp(job->format, "csv")) {
        print_csv(out, rows, nrows, job->zero_paper);
        return SIM_EXIT_OK;
    }
#ifdef SHS_HAVE_JANSSON
    if (!strcmp(job->format, "json"))
        return print_json(out, rows, nrows, &job->base, job->model_name, &job->gmp, &job->hw, job->eff, job->algo,
                          job->proto, job->zero_paper);
#endif
    if (job->ds) {
        char desc[8192];
        shs_ds_config_describe(job->ds, &job->base.train, job->ds_src, "", desc, sizeof desc);
        fprintf(out, "%s", desc);
    }
    print_table(out, rows, nrows, &job->base, job->model_name, &job->gmp, job->board_given, &job->hw, job->eff,
                job->algo == SHS_NUM_ALGOS ? "algorithm: NCCL's choice" : shs_net_algo_name(job->algo),
                job->proto == SHS_NUM_PROTOS ? "protocol: NCCL's choice" : shs_nccl_proto_name(job->proto),
                job->zero_paper);
    return SIM_EXIT_OK;
}
