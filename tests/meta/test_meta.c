/* test_meta.c - the meta backend (device.h, comm_meta.h, meta_run.h) against the
 * CPU backend, and the model presets (model_preset.h).
 *
 * The reference for every count is an independent source: the CPU trainer
 * (shs_trainer_mem_stats / shs_trainer_comm_stats / offload stats) running
 * the same configuration with real buffers and N threads; the parameter
 * count closed form and the published counts; FSDP's call counts derived
 * by hand for size-based wrapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/comm_meta.h"
#include "shardsim/meta_run.h"
#include "shardsim/model_preset.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"

typedef struct {
    const char *what;
    shs_strategy_kind_t kind;
    int N, G;
    shs_dtype_t param_dtype, grad_accum_dtype;
    shs_offload_t offload;
    int checkpoint, accum, prefetch_fwd;
    float clip;
    shs_recompute_t recompute;
    int every;          /* recompute_every */
    shs_attention_kind_t attention;
    shs_dtype_t autocast;
    float dropout;
    int llama;          /* a tiny GQA Llama (untied) instead of the GPT */
    int reshard;        /* reshard_after_forward_size */
    shs_framework_t framework;
    shs_zero_knobs_t zero;
} mcase_t;

static shs_train_config_t small_config(const mcase_t *c) {
    shs_train_config_t cfg = shs_train_default_config();
    /* C = 24: units of 14,712 (block), 7,296 (embed) and 48 (lnf)
     * elements, so N = 5 pads every unit and N = 3 some */
    cfg.model = (shs_gpt_config_t){.num_layers = 2, .num_heads = 2, .channels = 24, .context = 16};
    cfg.world_size = c->N;
    cfg.micro_batch = 2;
    cfg.strategy.kind = c->kind;
    cfg.strategy.shard_group_size = c->G;
    cfg.strategy.param_dtype = c->param_dtype;
    cfg.strategy.grad_accum_dtype = c->grad_accum_dtype;
    cfg.strategy.offload = c->offload;
    cfg.checkpoint_activations = c->checkpoint;
    cfg.recompute = c->recompute;
    cfg.recompute_every = c->every;
    cfg.attention = c->attention;
    cfg.autocast = c->autocast;
    cfg.dropout = c->dropout;
    cfg.grad_accum = c->accum;
    cfg.strategy.forward_prefetch = c->prefetch_fwd;
    cfg.strategy.clip_norm = c->clip;
    cfg.strategy.reshard_after_forward_size = c->reshard;
    cfg.strategy.framework = c->framework;
    cfg.strategy.zero = c->zero;
    cfg.strategy.bucket_bytes = 16 << 10; /* several DDP buckets */
    if (c->llama) {
        cfg.arch = SHS_ARCH_LLAMA;
        cfg.llama = (shs_llama_config_t){.num_layers = 2, .hidden = 24, .num_heads = 4, .num_kv_heads = 2,
                                         .intermediate = 40, .vocab = 256, .max_position = 16, .rms_norm_eps = 1e-5f,
                                         .rope_theta = 10000.0};
    }
    return cfg;
}

static void check_case(const mcase_t *c) {
    shs_train_config_t cfg = small_config(c);
    const int steps = 2; /* the second step prefetches by the recorded order */
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    for (int s = 0; s < steps; s++) {
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    }
    shs_meta_config_t mc = {.train = cfg, .steps = steps};
    shs_meta_result_t r;
    assert_int_equal(shs_meta_run(&mc, &r), SHS_OK);
    assert_int_equal(r.num_ranks, c->N > 1 ? 2 : 1);
    for (int k = 0; k < r.num_ranks; k++) {
        const shs_meta_rank_result_t *m = &r.ranks[k];
        int rank = k == 0 ? 0 : c->N - 1;
        assert_int_equal(m->rank, rank);
        shs_mem_stats_t cm;
        shs_comm_stats_t cc;
        shs_trainer_mem_stats(t, rank, &cm);
        shs_trainer_comm_stats(t, rank, &cc);
        for (int cat = 0; cat < SHS_MEM_NUM_CATEGORIES; cat++) {
            if (m->mem.peak[cat] != cm.peak[cat] || m->mem.current[cat] != cm.current[cat])
                fail_msg("%s N=%d rank %d %s: meta peak %zu current %zu, cpu peak %zu current %zu", c->what, c->N, rank,
                         shs_mem_category_name((shs_mem_category_t)cat), m->mem.peak[cat], m->mem.current[cat],
                         cm.peak[cat], cm.current[cat]);
        }
        assert_int_equal(m->mem.total_peak, cm.total_peak);
        assert_int_equal(m->mem.num_allocs, cm.num_allocs);
        /* the modelled GPU's ledger and its caching allocator model: the same sequence, the same books */
        shs_gpu_mem_stats_t cg;
        shs_trainer_gpu_mem_stats(t, rank, &cg);
        for (int cat = 0; cat < SHS_MEM_NUM_CATEGORIES; cat++) {
            if (m->gpu.alloc.peak[cat] != cg.alloc.peak[cat] || m->gpu.alloc.current[cat] != cg.alloc.current[cat])
                fail_msg("%s N=%d rank %d GPU ledger %s: meta peak %zu current %zu, cpu peak %zu current %zu", c->what,
                         c->N, rank, shs_mem_category_name((shs_mem_category_t)cat), m->gpu.alloc.peak[cat],
                         m->gpu.alloc.current[cat], cg.alloc.peak[cat], cg.alloc.current[cat]);
        }
        assert_int_equal(m->gpu.alloc.total_peak, cg.alloc.total_peak);
        assert_int_equal(m->gpu.alloc.num_allocs, cg.alloc.num_allocs);
        assert_int_equal(m->gpu.reserved_peak, cg.reserved_peak);
        assert_int_equal(m->gpu.emulation_peak, cg.emulation_peak);
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            if (m->comm.calls[op] != cc.calls[op] || m->comm.bytes[op] != cc.bytes[op] ||
                m->comm.bytes_sent[op] != cc.bytes_sent[op])
                fail_msg("%s N=%d rank %d %s: meta %llu calls %llu bytes, cpu %llu calls %llu bytes", c->what, c->N,
                         rank, shs_coll_op_name((shs_coll_op_t)op), (unsigned long long)m->comm.calls[op],
                         (unsigned long long)m->comm.bytes[op], (unsigned long long)cc.calls[op],
                         (unsigned long long)cc.bytes[op]);
        }
        uint64_t h2d, d2h;
        shs_mem_stats_t host;
        shs_strategy_offload_stats(shs_trainer_strategy(t, rank), &h2d, &d2h, &host);
        assert_int_equal(m->h2d_bytes, h2d);
        assert_int_equal(m->d2h_bytes, d2h);
        for (int cat = 0; cat < SHS_MEM_NUM_CATEGORIES; cat++) assert_int_equal(m->host.peak[cat], host.peak[cat]);
        /* the timeline's collectives are the last step's counts */
        uint64_t calls = 0;
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++)
            if (op != SHS_OP_SPLIT && op != SHS_OP_BARRIER) calls += m->last_step_comm.calls[op];
        assert_int_equal(m->num_calls, calls);
        assert_true(m->num_segments > 3);
        assert_true(m->kernels.flops > 0);
    }
    shs_meta_result_free(&r);
    shs_trainer_destroy(t);
}

static void test_meta_equals_cpu_stages(void **state) {
    static const int sizes[] = {1, 2, 3, 5};
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            mcase_t c = {.what = shs_strategy_name(kinds[k]), .kind = kinds[k], .N = sizes[i]};
            check_case(&c);
        }
}

static void test_meta_equals_cpu_features(void **state) {
    const mcase_t cases[] = {
        {.what = "hybrid_shard G=2", .kind = SHS_HYBRID_SHARD, .N = 4, .G = 2},
        {.what = "hybrid_shard_zero2 G=2", .kind = SHS_HYBRID_SHARD_ZERO2, .N = 4, .G = 2},
        {.what = "zero3 bf16", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16},
        {.what = "ddp bf16", .kind = SHS_DDP, .N = 2, .param_dtype = SHS_BF16},
        {.what = "zero2 offload optimizer", .kind = SHS_ZERO2, .N = 3, .offload = SHS_OFFLOAD_OPTIMIZER},
        {.what = "zero3 offload params", .kind = SHS_ZERO3, .N = 3, .offload = SHS_OFFLOAD_PARAMS},
        {.what = "zero3 checkpointing", .kind = SHS_ZERO3, .N = 2, .checkpoint = 1},
        {.what = "zero2 grad accum 2", .kind = SHS_ZERO2, .N = 3, .accum = 2},
        {.what = "zero3 forward prefetch", .kind = SHS_ZERO3, .N = 5, .prefetch_fwd = 1},
        {.what = "zero1 clip f16", .kind = SHS_ZERO1, .N = 2, .clip = 1.0f, .param_dtype = SHS_F16},
        {.what = "zero2 bf16 f32 grad accum", .kind = SHS_ZERO2, .N = 3, .accum = 2, .param_dtype = SHS_BF16,
         .grad_accum_dtype = SHS_F32},
        {.what = "ddp bf16 f32 grad accum", .kind = SHS_DDP, .N = 2, .accum = 2, .param_dtype = SHS_BF16,
         .grad_accum_dtype = SHS_F32},
        {.what = "hybrid_shard bf16 G=2", .kind = SHS_HYBRID_SHARD, .N = 4, .G = 2, .param_dtype = SHS_BF16},
        {.what = "zero3 bf16 offload optimizer", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16,
         .offload = SHS_OFFLOAD_OPTIMIZER, .clip = 1.0f},
        {.what = "zero3 bf16 offload params", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16,
         .offload = SHS_OFFLOAD_PARAMS},
        {.what = "zero1 bf16 clip accum 2", .kind = SHS_ZERO1, .N = 5, .param_dtype = SHS_BF16, .clip = 1.0f, .accum = 2},
        {.what = "zero3 flash autocast bf16 dropout", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16,
         .attention = SHS_ATTENTION_FLASH, .autocast = SHS_BF16, .dropout = 0.1f},
        {.what = "zero2 selective eager dropout autocast f32 params", .kind = SHS_ZERO2, .N = 2,
         .recompute = SHS_RECOMPUTE_SELECTIVE, .autocast = SHS_BF16, .dropout = 0.1f},
        {.what = "ddp full recompute flash", .kind = SHS_DDP, .N = 2, .recompute = SHS_RECOMPUTE_FULL,
         .attention = SHS_ATTENTION_FLASH},
        /* FSDP2's reshard_after_forward=2 (the reshard groups' all-gathers in backward) */
        {.what = "zero3 reshard 2 of 4", .kind = SHS_ZERO3, .N = 4, .reshard = 2},
        {.what = "zero3 bf16 reshard 2 of 4 accum 2", .kind = SHS_ZERO3, .N = 4, .reshard = 2, .param_dtype = SHS_BF16,
         .accum = 2},
        {.what = "hybrid_shard G=4 reshard 2 of 8", .kind = SHS_HYBRID_SHARD, .N = 8, .G = 4, .reshard = 2},
        /* the GPU ledger of each framework (device.h): the CPU run keeps the same books */
        {.what = "ddp bf16 deepspeed", .kind = SHS_DDP, .N = 2, .param_dtype = SHS_BF16,
         .framework = SHS_FRAMEWORK_DEEPSPEED},
        {.what = "zero3 bf16 deepspeed clip", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16, .clip = 1.0f,
         .framework = SHS_FRAMEWORK_DEEPSPEED},
        {.what = "zero2 bf16 torch", .kind = SHS_ZERO2, .N = 3, .param_dtype = SHS_BF16, .framework = SHS_FRAMEWORK_TORCH},
        {.what = "ddp bf16 f32 grads torch accum 2", .kind = SHS_DDP, .N = 2, .param_dtype = SHS_BF16,
         .grad_accum_dtype = SHS_F32, .accum = 2, .framework = SHS_FRAMEWORK_TORCH},
        /* DeepSpeed's ZeRO knobs: buckets, the ipg buffer, prefetch by budget, the reuse distance */
        {.what = "zero3 bf16 deepspeed knobs", .kind = SHS_ZERO3, .N = 3, .param_dtype = SHS_BF16, .accum = 2,
         .framework = SHS_FRAMEWORK_DEEPSPEED,
         .zero = {.reduce_bucket = 20000, .contiguous_gradients = 1, .prefetch_bucket = 20000, .max_live = 40000,
                  .max_reuse = 20000}},
        {.what = "zero2 bf16 deepspeed buckets overlap", .kind = SHS_ZERO2, .N = 5, .param_dtype = SHS_BF16,
         .framework = SHS_FRAMEWORK_DEEPSPEED,
         .zero = {.reduce_bucket = 9000, .overlap_comm = 1, .contiguous_gradients = 1, .allgather_bucket = 500}},
        {.what = "zero3 op-level SAC flash dropout", .kind = SHS_ZERO3, .N = 3, .recompute = SHS_RECOMPUTE_SELECTIVE_OP,
         .attention = SHS_ATTENTION_FLASH, .dropout = 0.1f},
        {.what = "zero2 every 2nd block autocast", .kind = SHS_ZERO2, .N = 2, .recompute = SHS_RECOMPUTE_EVERY_N,
         .every = 2, .autocast = SHS_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

static void test_meta_equals_cpu_llama(void **state) {
    const mcase_t cases[] = {
        {.what = "llama ddp", .kind = SHS_DDP, .N = 2, .llama = 1},
        {.what = "llama zero3", .kind = SHS_ZERO3, .N = 3, .llama = 1},
        {.what = "llama zero2 accum 2", .kind = SHS_ZERO2, .N = 3, .accum = 2, .llama = 1},
        {.what = "llama zero3 flash full recompute prefetch", .kind = SHS_ZERO3, .N = 5, .llama = 1,
         .attention = SHS_ATTENTION_FLASH, .recompute = SHS_RECOMPUTE_FULL, .prefetch_fwd = 1},
        {.what = "llama zero1 selective bf16", .kind = SHS_ZERO1, .N = 2, .llama = 1,
         .recompute = SHS_RECOMPUTE_SELECTIVE, .param_dtype = SHS_BF16},
        {.what = "llama zero3 autocast bf16 f32 params", .kind = SHS_ZERO3, .N = 3, .llama = 1,
         .autocast = SHS_BF16},
        {.what = "llama zero2 autocast bf16 bf16 params flash full recompute", .kind = SHS_ZERO2, .N = 2,
         .llama = 1, .autocast = SHS_BF16, .param_dtype = SHS_BF16, .attention = SHS_ATTENTION_FLASH,
         .recompute = SHS_RECOMPUTE_FULL},
        {.what = "llama ddp autocast f16 f16 params selective", .kind = SHS_DDP, .N = 2, .llama = 1,
         .autocast = SHS_F16, .param_dtype = SHS_F16, .recompute = SHS_RECOMPUTE_SELECTIVE},
        {.what = "llama zero3 autocast bf16 bf16 params op-level SAC flash", .kind = SHS_ZERO3, .N = 3, .llama = 1,
         .autocast = SHS_BF16, .param_dtype = SHS_BF16, .recompute = SHS_RECOMPUTE_SELECTIVE_OP,
         .attention = SHS_ATTENTION_FLASH},
        {.what = "llama zero1 every 2nd layer eager", .kind = SHS_ZERO1, .N = 2, .llama = 1,
         .recompute = SHS_RECOMPUTE_EVERY_N, .every = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

/* Size-based wrapping: min_params 1 gives one block per unit (identical to
 * block wrapping); two blocks' worth groups L=6 blocks into 3 units. ZeRO-3
 * without prefetch in one step all-gathers embed, each unit, lnf, embed
 * again for the tied head (kept into backward), then lnf and each unit in
 * backward: 2P + 4 all-gathers, and P + 2 reduce-scatters. */
static void test_meta_wrap_size(void **state) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 6, .num_heads = 2, .channels = 16, .context = 8};
    cfg.world_size = 4;
    cfg.micro_batch = 1;
    cfg.strategy.kind = SHS_ZERO3;
    cfg.device_mem = SIZE_MAX;
    size_t block = 12 * 16 * 16 + 13 * 16;
    shs_meta_result_t a, b, g;
    shs_meta_config_t mc = {.train = cfg, .steps = 1};
    assert_int_equal(shs_meta_run(&mc, &a), SHS_OK);
    mc.train.wrap_min_params = 1;
    assert_int_equal(shs_meta_run(&mc, &b), SHS_OK);
    assert_int_equal(a.num_units, 8);
    assert_int_equal(b.num_units, 8);
    assert_memory_equal(&a.ranks[0].mem, &b.ranks[0].mem, sizeof a.ranks[0].mem);
    assert_memory_equal(&a.ranks[0].comm, &b.ranks[0].comm, sizeof a.ranks[0].comm);
    mc.train.wrap_min_params = 2 * block;
    assert_int_equal(shs_meta_run(&mc, &g), SHS_OK);
    int P = 3;
    assert_int_equal(g.num_units, P + 2);
    assert_int_equal(g.ranks[0].comm.calls[SHS_OP_ALL_GATHER], 2 * P + 4);
    assert_int_equal(g.ranks[0].comm.calls[SHS_OP_REDUCE_SCATTER], P + 2);
    assert_int_equal(a.ranks[0].comm.calls[SHS_OP_ALL_GATHER], 2 * 6 + 4);
    /* a gathered unit of two blocks: the transient peak grows */
    assert_true(g.ranks[0].mem.peak[SHS_MEM_COMM] > a.ranks[0].mem.peak[SHS_MEM_COMM]);
    assert_int_equal(g.num_params, a.num_params);
    shs_meta_result_free(&a);
    shs_meta_result_free(&b);
    shs_meta_result_free(&g);
}

/* Every preset: the layout's count (summing its tensors) equals the closed
 * form 12 L C^2 + 13 L C + (V + T) C + 2 C and the published count. */
static void test_presets(void **state) {
    int n;
    const shs_model_preset_t *p = shs_model_presets(&n);
    assert_int_equal(n, 35); /* 13 GPTs, then the 22 Llama-family presets (tests/model/test_hf_config.c) */
    n = 13;
    static const char *names[] = {"gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b",
                                  "mpt-1b", "mpt-3b", "mpt-7b", "mpt-13b", "mpt-30b", "mpt-70b"};
    /* hand-computed from the closed form; the MPT rows are the NumParams column of mosaicml/llm-foundry
     * scripts/train/benchmarking/README.md (its rows at SeqLen 2048), which the closed form meets exactly */
    static const uint64_t expect[] = {124439808ull, 354823168ull, 774030080ull, 1557611200ull,
                                      6658404352ull, 12853386240ull, 174604259328ull,
                                      1315950592ull, 2651837440ull, 6658859008ull, 12853954560ull, 29975214080ull,
                                      64862437376ull};
    for (int i = 0; i < n; i++) {
        assert_string_equal(p[i].name, names[i]);
        assert_int_equal(p[i].arch, SHS_ARCH_GPT);
        assert_ptr_equal(shs_model_preset_find(names[i]), &p[i]);
        shs_layout_t lo;
        assert_int_equal(shs_gpt_layout_create(&lo, &p[i].cfg), SHS_OK);
        assert_int_equal(lo.num_params, expect[i]);
        assert_int_equal(shs_gpt_num_params(&p[i].cfg), expect[i]);
        uint64_t u = p[i].published_unit;
        assert_int_equal((expect[i] + u / 2) / u * u, p[i].published_params);
        shs_layout_free(&lo);
    }
    assert_int_equal(p[0].published_params, 124439808ull); /* exact, as the issue states */
    assert_null(shs_model_preset_find("gpt4"));
}

/* GPT-3 175B on 1024 ranks, ZeRO-3 in bf16: per-rank parameter, gradient
 * and optimizer state bytes are 4 + 2 (f32 master and bf16 shard), 2 (bf16
 * gradient shard) and 8 bytes per element of the rank's shards (sum over
 * units of ceil(numel / N)): the ZeRO paper's (2 + 2 + 12) per element. */
static void test_meta_175b(void **state) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = shs_model_preset_find("gpt3-175b")->cfg;
    cfg.world_size = 1024;
    cfg.micro_batch = 1;
    cfg.strategy.kind = SHS_ZERO3;
    cfg.strategy.param_dtype = SHS_BF16;
    cfg.device_mem = SIZE_MAX;
    shs_meta_config_t mc = {.train = cfg};
    shs_meta_result_t r;
    assert_int_equal(shs_meta_run(&mc, &r), SHS_OK);
    assert_int_equal(r.num_params, 174604259328ull);
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg.model), SHS_OK);
    size_t S = 0;
    for (int u = 0; u < lo.num_units; u++) S += shs_shard_size(lo.units[u].numel, 1024, 1);
    assert_int_equal(r.ranks[0].mem.peak[SHS_MEM_PARAMS], (4 + 2) * S);
    assert_int_equal(r.ranks[1].mem.peak[SHS_MEM_GRADS], 2 * S);
    assert_int_equal(r.ranks[1].mem.peak[SHS_MEM_OPTIM], 8 * S);
    /* all-gathers in bf16, forward and backward: 2 (N S) elements plus the
     * embedding twice more (head in forward): bytes = 2 x (2 Σ N S_u + ...) */
    assert_true(r.ranks[0].comm.bytes[SHS_OP_ALL_GATHER] >= 2 * 2 * 1024 * (uint64_t)S);
    assert_int_equal(r.ranks[0].comm.bytes[SHS_OP_REDUCE_SCATTER], 2 * 1024 * (uint64_t)S);
    /* FLOPs: at least 6 Psi per token for the matmuls (Kaplan et al. 2020) */
    assert_true(r.ranks[0].kernels.matmul_flops >= 6ull * 174604259328ull / 2 * 2048 / 2);
    shs_layout_free(&lo);
    shs_meta_result_free(&r);
}

/* Worlds past the CPU threads' limit: a meta run costs two ranks whatever N
 * is. ZeRO-3 in bf16 at N = 1536 and 65536 holds per rank 4 + 2 (f32
 * master and bf16 shard), 2 and 8 bytes per shard element (shard.h:
 * ceil(numel / N) per unit), and moves in each reduce-scatter N x the
 * shard (comm.h's stats convention); N = 65537 is refused by name. */
static void test_meta_large_world(void **state) {
    static const int worlds[] = {1536, 65536};
    for (int i = 0; i < 2; i++) {
        mcase_t c = {.what = "zero3 bf16", .kind = SHS_ZERO3, .N = worlds[i], .param_dtype = SHS_BF16};
        shs_meta_config_t mc = {.train = small_config(&c), .steps = 1};
        shs_meta_result_t r;
        assert_int_equal(shs_meta_run(&mc, &r), SHS_OK);
        assert_int_equal(r.num_ranks, 2);
        assert_int_equal(r.ranks[1].rank, worlds[i] - 1);
        shs_layout_t lo;
        assert_int_equal(shs_gpt_layout_create(&lo, &mc.train.model), SHS_OK);
        size_t S = 0;
        for (int u = 0; u < lo.num_units; u++) S += shs_shard_size(lo.units[u].numel, worlds[i], 1);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(r.ranks[k].mem.peak[SHS_MEM_PARAMS], (4 + 2) * S);
            assert_int_equal(r.ranks[k].mem.peak[SHS_MEM_GRADS], 2 * S);
            assert_int_equal(r.ranks[k].mem.peak[SHS_MEM_OPTIM], 8 * S);
            assert_int_equal(r.ranks[k].master_bytes, 4 * S);
            assert_int_equal(r.ranks[k].comm.bytes[SHS_OP_REDUCE_SCATTER], 2 * (uint64_t)worlds[i] * S);
        }
        shs_layout_free(&lo);
        shs_meta_result_free(&r);
    }
    mcase_t c = {.what = "too large", .kind = SHS_ZERO3, .N = 65537};
    shs_meta_config_t mc = {.train = small_config(&c)};
    shs_meta_result_t r;
    assert_int_equal(shs_meta_run(&mc, &r), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "world size must be in 1..65536 (got 65537)"));
}

/* Meta device basics: fake unique addresses, accounting, zeros to the host. */
static void test_meta_device(void **state) {
    shs_device_t *d;
    assert_int_equal(shs_device_create_meta(&d, 3, 1000), SHS_OK);
    assert_true(shs_device_is_meta(d));
    assert_string_equal(shs_device_backend(d), "meta");
    void *a, *b, *z;
    assert_int_equal(shs_device_alloc(d, &a, 600, SHS_MEM_PARAMS, "a"), SHS_OK);
    assert_int_equal(shs_device_alloc(d, &z, 0, SHS_MEM_OTHER, "z"), SHS_OK);
    assert_int_equal(shs_device_alloc(d, &b, 600, SHS_MEM_GRADS, "b"), SHS_OUT_OF_MEMORY);
    assert_int_equal(shs_device_alloc(d, &b, 400, SHS_MEM_GRADS, "b"), SHS_OK);
    assert_true(a != b && a != z && b != z);
    assert_true((uintptr_t)b >= (uintptr_t)a + 600);
    float host[4] = {1, 2, 3, 4};
    assert_int_equal(shs_memcpy_d2h(d, host, a, sizeof host), SHS_OK);
    for (int i = 0; i < 4; i++) assert_true(host[i] == 0.0f);
    shs_matmul_forward(d, (float *)a, (float *)a, (float *)b, NULL, 3, 5, 7);
    shs_kernel_stats_t k;
    assert_int_equal(shs_device_kernel_stats(d, &k), SHS_OK);
    assert_int_equal(k.flops, 2 * 3 * 5 * 7);
    assert_int_equal(k.kernels, 1);
    assert_int_equal(shs_device_window_peak(d), 1000);
    shs_device_free(d, b);
    assert_int_equal(shs_device_window_peak(d), 1000);
    assert_int_equal(shs_device_window_peak(d), 600);
    shs_mem_stats_t m;
    shs_device_mem_stats(d, &m);
    assert_int_equal(m.peak[SHS_MEM_GRADS], 400);
    assert_int_equal(m.current[SHS_MEM_GRADS], 0);
    shs_device_destroy(d);
    shs_device_t *cpu;
    assert_int_equal(shs_device_create_cpu(&cpu, 0, SIZE_MAX, 1), SHS_OK);
    assert_false(shs_device_is_meta(cpu));
    assert_int_equal(shs_device_kernel_stats(cpu, &k), SHS_UNSUPPORTED);
    shs_device_destroy(cpu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_device),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_meta_equals_cpu_stages),
        cmocka_unit_test(test_meta_equals_cpu_features),
        cmocka_unit_test(test_meta_equals_cpu_llama),
        cmocka_unit_test(test_meta_wrap_size),
        cmocka_unit_test(test_meta_175b),
        cmocka_unit_test(test_meta_large_world),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
