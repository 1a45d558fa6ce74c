/* checkpoint.c - sharded checkpoints: one file per rank with that rank's
 * shards, a text index written last, and resume at any world size, stage
 * and alignment by rebuilding every unit's full arrays on the host.
 * The format is described in README.md ("Checkpoints").
 * This file: CRC-32, the run's metadata, resume; the writer is
 * checkpoint_write.c, the reader checkpoint_read.c. */
#include "shardsim/checkpoint.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checkpoint_impl.h"
#include "shardsim/durable.h"
#include "core/le_bytes.h"
#include "shardsim/shard.h"

/* ---- CRC-32 ------------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t shs_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* ---- meta -------------------------------------------------------------------- */

void shs_checkpoint_meta_of(shs_trainer_t *t, shs_checkpoint_meta_t *m) {
    const shs_train_config_t *c = shs_trainer_config(t);
    memset(m, 0, sizeof *m);
    m->layout = shs_trainer_layout(t);
    const shs_llama_config_t *l = &c->llama;
    if (c->model_file) snprintf(m->model, sizeof m->model, "netdesc context=%d", c->model.context);
    else if (c->arch == SHS_ARCH_LLAMA)
        snprintf(m->model, sizeof m->model,
                 "llama L=%d C=%d NH=%d NKV=%d I=%d V=%d T=%d eps=%.9g theta=%.17g scaling=%d:%.17g:%.17g:%.17g:%d "
                 "tied=%d qkv_bias=%d", l->num_layers, l->hidden, l->num_heads, l->num_kv_heads, l->intermediate,
                 l->vocab, c->model.context, (double)l->rms_norm_eps, l->rope_theta, (int)l->rope_scaling.kind,
                 l->rope_scaling.factor, l->rope_scaling.low_freq_factor, l->rope_scaling.high_freq_factor,
                 l->rope_scaling.original_max_position_embeddings, l->tie_word_embeddings, l->qkv_bias);
    else
        snprintf(m->model, sizeof m->model, "gpt layers=%d heads=%d channels=%d context=%d", c->model.num_layers,
                 c->model.num_heads, c->model.channels, c->model.context);
    m->world_size = c->world_size;
    /* hybrid sharding: the first replica's G ranks hold one copy of every
     * shard, so the checkpoint is a G-rank one (the other replicas hold the
     * same bits, checked by --check ddp's replica comparison) */
    if (shs_strategy_is_hybrid(c->strategy.kind) && c->strategy.shard_group_size > 0)
        m->world_size = c->strategy.shard_group_size;
    m->shard_align = c->strategy.shard_align ? c->strategy.shard_align : 1;
    m->strategy = c->strategy.kind;
    m->optim = c->strategy.optim;
    m->state_per_param = shs_optim_state_per_param(&c->strategy.optim);
    m->step = shs_trainer_steps_done(t);
    m->seed = c->strategy.seed;
    m->micro_batch = c->micro_batch;
    m->grad_accum = c->grad_accum > 1 ? c->grad_accum : 1;
    m->clip_norm = c->strategy.clip_norm > 0 ? c->strategy.clip_norm : 0.0f;
    m->norm_type = c->strategy.clip_norm > 0 ? (c->strategy.norm_type ? c->strategy.norm_type : 2) : 0; /* 0 means 2; -1 inf */
    shs__ck_resolve_dtypes(c->strategy.param_dtype, c->strategy.reduce_dtype, &m->param_dtype, &m->reduce_dtype);
    m->scaler = c->strategy.scaler;
    shs_loss_scaler_fill_defaults(&m->scaler); /* the kind's defaults for the zeros (strategy.h) */
    m->loss_scale = shs_trainer_loss_scale(t);
    m->lr_schedule = c->strategy.lr_schedule.kind;
    m->lr_schedule_known = 1;
    m->lr_steps = shs_trainer_lr_steps(t);
}

/* ---- resume ------------------------------------------------------------------ */

static int same_f32(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

shs_status_t shs_checkpoint_check_compatible(const shs_checkpoint_t *ck, const shs_checkpoint_meta_t *run) {
    const shs_checkpoint_meta_t *m = &ck->meta;
    const char *d = ck->dir;
    if (strcmp(m->model, run->model) != 0)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s holds model '%s'; this run is '%s'", d, m->model, run->model);
    const shs_layout_t *a = m->layout, *b = run->layout;
    if (a->num_units != b->num_units || a->num_tensors != b->num_tensors)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s: layout of %d units and %d tensors; this run has %d and %d", d,
                             a->num_units, a->num_tensors, b->num_units, b->num_tensors);
    for (int u = 0; u < a->num_units; u++)
        if (strcmp(a->units[u].name, b->units[u].name) != 0 || a->units[u].numel != b->units[u].numel ||
            a->units[u].num_tensors != b->units[u].num_tensors)
            return shs_set_error(SHS_INVALID_ARG,
                                 "checkpoint %s: unit %d is '%s' of %zu elements; this run's is '%s' of %zu", d, u,
                                 a->units[u].name, a->units[u].numel, b->units[u].name, b->units[u].numel);
    for (int i = 0; i < a->num_tensors; i++) {
        const shs_tensor_info_t *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) != 0 || x->rows != y->rows || x->cols != y->cols || x->offset != y->offset)
            return shs_set_error(SHS_INVALID_ARG,
                                 "checkpoint %s: tensor %d is %s (%d, %d) at %zu; this run's is %s (%d, %d) at %zu", d,
                                 i, x->name, x->rows, x->cols, x->offset, y->name, y->rows, y->cols, y->offset);
    }
    if (m->optim.kind != run->optim.kind)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with optimizer %s; this run uses %s", d,
                             shs_optim_name(m->optim.kind), shs_optim_name(run->optim.kind));
    static const struct {
        const char *name;
        size_t off;
    } hp[] = {{"lr", offsetof(shs_optim_config_t, lr)},
              {"beta1", offsetof(shs_optim_config_t, beta1)},
              {"beta2", offsetof(shs_optim_config_t, beta2)},
              {"eps", offsetof(shs_optim_config_t, eps)},
              {"momentum", offsetof(shs_optim_config_t, momentum)},
              {"weight_decay", offsetof(shs_optim_config_t, weight_decay)}};
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        float x, y;
        memcpy(&x, (const char *)&m->optim + hp[i].off, sizeof x);
        memcpy(&y, (const char *)&run->optim + hp[i].off, sizeof y);
        if (!same_f32(x, y))
            return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with %s %.9g; this run has %.9g", d,
                                 hp[i].name, (double)x, (double)y);
    }
    if (m->optim.no_bias_correction != run->optim.no_bias_correction)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with Adam bias correction %s; this run has it %s",
                             d, m->optim.no_bias_correction ? "off" : "on", run->optim.no_bias_correction ? "off" : "on");
    if (m->seed != run->seed)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with seed %" PRIu64 "; this run has %" PRIu64, d,
                             m->seed, run->seed);
    float ca = m->clip_norm > 0 ? m->clip_norm : 0.0f, cb = run->clip_norm > 0 ? run->clip_norm : 0.0f;
    if (!same_f32(ca, cb) || (ca > 0 && m->norm_type != run->norm_type))
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with gradient clipping max norm %.9g, norm type %d; this run has "
                             "%.9g, %d (0: off)", d, (double)ca, m->norm_type, (double)cb, run->norm_type);
    if (m->param_dtype != run->param_dtype || m->reduce_dtype != run->reduce_dtype)
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with param dtype %s, reduce dtype %s; this run has %s, %s", d,
                             shs_dtype_name(m->param_dtype), shs_dtype_name(m->reduce_dtype),
                             shs_dtype_name(run->param_dtype), shs_dtype_name(run->reduce_dtype));
    if (m->param_dtype == SHS_F16 &&
        (!same_f32(m->scaler.init_scale, run->scaler.init_scale) ||
         !same_f32(m->scaler.growth_factor, run->scaler.growth_factor) ||
         !same_f32(m->scaler.backoff_factor, run->scaler.backoff_factor) ||
         m->scaler.growth_interval != run->scaler.growth_interval || m->scaler.kind != run->scaler.kind ||
         m->scaler.hysteresis != run->scaler.hysteresis ||
         m->scaler.consecutive_hysteresis != run->scaler.consecutive_hysteresis ||
         !same_f32(m->scaler.min_scale, run->scaler.min_scale)))
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with loss scaler %s (init %.9g, growth %.9g, backoff %.9g, interval "
                             "%d, hysteresis %d, consecutive %d, min %.9g); this run has %s (%.9g, %.9g, %.9g, %d, %d, "
                             "%d, %.9g)", d, shs_scaler_name(m->scaler.kind), (double)m->scaler.init_scale,
                             (double)m->scaler.growth_factor, (double)m->scaler.backoff_factor,
                             m->scaler.growth_interval, m->scaler.hysteresis, m->scaler.consecutive_hysteresis,
                             (double)m->scaler.min_scale, shs_scaler_name(run->scaler.kind),
                             (double)run->scaler.init_scale, (double)run->scaler.growth_factor,
                             (double)run->scaler.backoff_factor, run->scaler.growth_interval, run->scaler.hysteresis,
                             run->scaler.consecutive_hysteresis, (double)run->scaler.min_scale);
    if (m->lr_schedule_known && m->lr_schedule != run->lr_schedule)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with lr schedule %s; this run has %s (its "
                             "position, %ld applied steps, counts in that schedule)", d,
                             shs_lr_schedule_name(m->lr_schedule), shs_lr_schedule_name(run->lr_schedule), m->lr_steps);
    if (m->state_per_param != run->state_per_param)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s has %d optimizer-state arrays; this run needs %d", d,
                             m->state_per_param, run->state_per_param);
    return SHS_OK;
}

shs_status_t shs_checkpoint_load_rank(const shs_checkpoint_t *ck, shs_strategy_t *s) {
    for (int u = 0; u < ck->layout.num_units; u++)
        SHS_CHECK(shs_strategy_load_state(s, u, shs_checkpoint_params(ck, u), shs_checkpoint_state(ck, u)));
    return SHS_OK;
}

static shs_status_t load_job(shs_rank_ctx_t *ctx, void *arg) {
    shs__ck_job_arg_t *a = arg;
    shs_strategy_t *s = shs_trainer_strategy(a->t, ctx->rank);
    if (shs_strategy_state_per_param(s) != a->ck->meta.state_per_param)
        return shs_set_error(SHS_INTERNAL, "rank %d: strategy keeps %d state arrays, the checkpoint %d", ctx->rank,
                             shs_strategy_state_per_param(s), a->ck->meta.state_per_param);
    return shs_checkpoint_load_rank(a->ck, s);
}

shs_status_t shs_checkpoint_resume(shs_trainer_t *t, const char *dir) {
    shs_checkpoint_t *ck;
    SHS_CHECK(shs_checkpoint_open(&ck, dir));
    shs_checkpoint_meta_t run;
    shs_checkpoint_meta_of(t, &run);
    shs_status_t st = shs_checkpoint_check_compatible(ck, &run);
    if (st == SHS_OK) {
        shs__ck_job_arg_t a = {.t = t, .ck = ck};
        st = shs_trainer_run(t, load_job, &a);
    }
    if (st == SHS_OK) st = shs_trainer_set_loss_scale(t, ck->meta.loss_scale);
    if (st == SHS_OK) st = shs_trainer_set_lr_steps(t, ck->meta.lr_steps);
    if (st == SHS_OK) shs_trainer_set_steps_done(t, ck->meta.step);
    shs_checkpoint_close(ck);
    return st;
}
