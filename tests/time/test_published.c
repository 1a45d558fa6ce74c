/* test_published.c - the step-time model against published training runs:
 * each row's throughput from the publication (typed here with its source),
 * shardsim's from a meta run of the same job priced on the same GPU, the
 * ratio printed with what each mechanism contributed. Rows the model meets
 * are held to 15%; rows it does not meet are listed with the mechanism it
 * lacks and held to being outside 15% (a row that comes within must move
 * to the first kind), and to what the model must get right about them
 * anyway (their direction).
 *
 * Sources:
 *   llm-foundry: mosaicml/llm-foundry scripts/train/benchmarking/README.md
 *     (commit c90b9b31), MPT models of 12 L C^2 + 13 L C + (V + T) C + 2 C
 *     parameters (the NumParams column, exactly: GPT-2's shape with learned
 *     positions and biases, V = 50368, head dim 128), amp_bf16 (bf16
 *     autocast; FSDP MixedPrecision DEFAULT: bf16 parameters, f32 reduce;
 *     the A100 70B row bf16 PURE: bf16 reduce), flash attention,
 *     FULL_SHARD (ZeRO-3) or SHARD_GRAD_OP (ZeRO-2), activation
 *     checkpointing of whole blocks where the row says True. The
 *     calibration rows (gpu_preset.c's one constant per generation) are
 *     the 7B, seq 2048, micro-batch 6 rows on H100 and A100.
 *   torchtitan: pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md,
 *     Llama 3.1 8B, 8 x H100 (96 GB HBM2e, 2.4 TB/s, 500 W: gpu_preset.c's
 *     h100-hbm2e), FSDP, local batch 2, seq 8192, bf16, selective
 *     activation checkpointing, 5,762 tokens/s/GPU.
 *   Megatron-LM: Narayanan et al. 2021, "Efficient Large-Scale Language
 *     Model Training on GPU Clusters Using Megatron-LM", Table 2: GPT-3
 *     175B (96 layers, hidden 12288, 96 heads, vocabulary 51200, seq 2048)
 *     under ZeRO-3 without model parallelism, global batch 1536, A100
 *     (Selene: DGX A100, 8 x HDR per node), fp16, activation recomputation:
 *     384 GPUs (micro-batch 4) 144, 768 (2) 88, 1536 (1) 44 TFLOP/s per GPU,
 *     counted by the paper's Eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh) per
 *     step.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/model_preset.h"
#include "shardsim/step_time.h"
#include "shardsim/train.h"

typedef enum { PUB_TOKENS, PUB_TFLOPS_MEGATRON } pub_unit_t;

typedef struct {
    const char *name;
    const char *gpu;
    int world, micro_batch, grad_accum;
    int layers, channels, heads, context, vocab; /* the GPT; layers 0: the Llama preset `llama` */
    const char *llama;
    shs_strategy_kind_t kind;
    shs_dtype_t param, reduce, autocast;
    shs_recompute_t recompute;
    shs_attention_kind_t attention;
    pub_unit_t unit;
    double published;  /* tokens/s/GPU, or TFLOP/s per GPU */
    const char *missing; /* NULL: held to 15%; else the mechanism the model lacks */
} row_t;

#define MPT(name, gpu, N, mb, ga, L, C, NH, T, kind, reduce, ac, pub)                                                  \
    {name, gpu, N, mb, ga, L, C, NH, T, 50368, NULL, kind, SHS_BF16, reduce, SHS_BF16,                                \
     ac ? SHS_RECOMPUTE_FULL : SHS_RECOMPUTE_NONE, SHS_ATTENTION_FLASH, PUB_TOKENS, pub, NULL}

static const row_t rows[] = {
    MPT("MPT-70B 512 x H100 mb 8 AC", "h100-sxm", 512, 8, 1, 80, 8192, 64, 2048, SHS_ZERO3, SHS_F32, 1, 1007),
    MPT("MPT-30B 8 x H100 mb 3 AC", "h100-sxm", 8, 3, 21, 48, 7168, 56, 2048, SHS_ZERO3, SHS_F32, 1, 2002),
    MPT("MPT-13B 8 x H100 mb 2", "h100-sxm", 8, 2, 1, 40, 5120, 40, 2048, SHS_ZERO3, SHS_F32, 0, 4792),
    MPT("MPT-7B 8 x H100 T 2048 mb 6 (cal.)", "h100-sxm", 8, 6, 1, 32, 4096, 32, 2048, SHS_ZERO3, SHS_F32, 0, 10643),
    MPT("MPT-7B 8 x H100 T 8192 mb 8 AC", "h100-sxm", 8, 8, 2, 32, 4096, 32, 8192, SHS_ZERO3, SHS_F32, 1, 6935),
    {"MPT-7B 8 x H100 T 65536 mb 1 AC", "h100-sxm", 8, 1, 2, 32, 4096, 32, 65536, 50368, NULL, SHS_ZERO3, SHS_BF16,
     SHS_F32, SHS_BF16, SHS_RECOMPUTE_FULL, SHS_ATTENTION_FLASH, PUB_TOKENS, 1956,
     "the run's attention kernel at 65536 tokens: 2/3 of this row's modelled time is FlashAttention-2 at the "
     "paper's H100 figure (335 TFLOP/s); llm-foundry's kernel (attn_impl triton by default in "
     "submit_benchmarks.py) reached about half of that; a per-implementation attention table is missing"},
    MPT("MPT-3B 512 x H100 mb 8 ZeRO-2", "h100-sxm", 512, 8, 1, 32, 2560, 20, 2048, SHS_ZERO2, SHS_F32, 0, 21664),
    {"MPT-70B 64 x A100 mb 8 AC", "a100", 64, 8, 4, 80, 8192, 64, 2048, 50368, NULL, SHS_ZERO3, SHS_BF16, SHS_BF16,
     SHS_BF16, SHS_RECOMPUTE_FULL, SHS_ATTENTION_FLASH, PUB_TOKENS, 410, NULL},
    MPT("MPT-7B 8 x A100 T 2048 mb 6 (cal.)", "a100", 8, 6, 2, 32, 4096, 32, 2048, SHS_ZERO3, SHS_F32, 0, 4641),
    {"torchtitan Llama 3.1 8B 8 x H100", "h100-hbm2e", 8, 2, 1, 0, 0, 0, 8192, 0, "llama3-8b", SHS_ZERO3, SHS_BF16,
     SHS_F32, 0, SHS_RECOMPUTE_SELECTIVE, SHS_ATTENTION_FLASH, PUB_TOKENS, 5762,
     "op-level selective activation checkpointing (torchtitan's 'op' policy recomputes every other matmul and "
     "the elementwise ops) and eager PyTorch's unfused elementwise kernels (RMSNorm, RoPE, SwiGLU as several "
     "kernels each); the model prices fused kernels and no recompute under flash attention"},
#define MEGATRON(N, mb, pub)                                                                                           \
    {"Megatron 175B ZeRO-3 " #N " x A100", "a100", N, mb, 1, 96, 12288, 96, 2048, 51200, NULL, SHS_ZERO3, SHS_F16,  \
     SHS_F16, SHS_F16, SHS_RECOMPUTE_FULL, SHS_ATTENTION_EAGER, PUB_TFLOPS_MEGATRON, pub,                            \
     "DeepSpeed 2021's ZeRO-3 engine: its per-parameter gathers and host-side coordination; priced at NCCL's own "     \
     "ring bandwidth (the node's 8 NICs) and latency, ZeRO-3's 3 Psi per step hides under the compute at every "      \
     "scale, so the model scales where the run did not"}
    MEGATRON(384, 4, 144),
    MEGATRON(768, 2, 88),
    MEGATRON(1536, 1, 44),
#undef MEGATRON
};
#define NROWS (sizeof rows / sizeof rows[0])

typedef struct {
    double value, ratio, mfu_foundry;
    shs_step_estimate_t e;
} got_t;

static got_t run_row(const row_t *r) {
    shs_meta_config_t mc = {.steps = 2};
    shs_train_config_t *tc = &mc.train;
    *tc = shs_train_default_config();
    if (r->layers) {
        tc->model = (shs_gpt_config_t){.num_layers = r->layers, .num_heads = r->heads, .channels = r->channels,
                                       .context = r->context, .vocab = r->vocab};
    } else {
        const shs_model_preset_t *p = shs_model_preset_find(r->llama);
        assert_non_null(p);
        tc->arch = SHS_ARCH_LLAMA;
        tc->llama = p->llama;
        tc->model.context = r->context;
    }
    tc->world_size = r->world;
    tc->micro_batch = r->micro_batch;
    tc->grad_accum = r->grad_accum;
    tc->strategy.kind = r->kind;
    tc->strategy.param_dtype = r->param;
    tc->strategy.reduce_dtype = r->reduce;
    tc->autocast = r->layers ? r->autocast : 0; /* autocast: the GPT's */
    tc->recompute = r->recompute;
    tc->attention = r->attention;
    tc->device_mem = SIZE_MAX;
    shs_meta_result_t res;
    if (shs_meta_run(&mc, &res) != SHS_OK) fail_msg("%s: %s", r->name, shs_last_error());
    shs_hw_t hw;
    assert_int_equal(shs_hw_preset(r->gpu, &hw), SHS_OK);
    got_t g;
    shs_estimate_step(&mc, &res, shs_meta_worst_rank(&res), &hw, NULL, &g.e);
    double tps = g.e.tokens / g.e.step_s;
    g.value = tps;
    if (r->unit == PUB_TFLOPS_MEGATRON) {
        double B = (double)r->micro_batch, s = r->context, l = r->layers, h = r->channels, V = r->vocab;
        g.value = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / g.e.step_s / 1e12;
    }
    /* llm-foundry's MFU: (6 N + 12 L d s) per token over the 16-bit peak, N every parameter */
    g.mfu_foundry = r->layers ? tps * (6.0 * (double)res.num_params + 12.0 * r->layers * r->channels * r->context) /
                                    hw.peak_flops_16
                              : 0;
    g.ratio = g.value / r->published;
    shs_meta_result_free(&res);
    return g;
}

static got_t got[NROWS];

static void test_published_rows(void **state) {
    (void)state;
    printf("%-38s %10s %10s %6s | %8s %8s %8s %8s %8s %8s %8s\n", "published run", "published", "shardsim", "ratio",
           "step s", "GEMM", "attn", "elemwise", "optim", "overlap+", "exposed");
    for (size_t i = 0; i < NROWS; i++) {
        got[i] = run_row(&rows[i]);
        const shs_step_estimate_t *e = &got[i].e;
        printf("%-38s %10.0f %10.0f %6.3f | %8.3g %8.3g %8.3g %8.3g %8.3g %8.3g %8.3g%s\n", rows[i].name,
               rows[i].published, got[i].value, got[i].ratio, e->step_s, e->gemm_s, e->attention_s, e->elementwise_s,
               e->optimizer_s, e->slowdown_s, e->exposed_comm_s, rows[i].missing ? "  (not met)" : "");
    }
    printf("(tokens/s/GPU; the Megatron rows TFLOP/s per GPU by the paper's Eq. 3)\n");
    int failed = 0;
    for (size_t i = 0; i < NROWS; i++) {
        int within = fabs(got[i].ratio - 1) <= 0.15;
        if (!rows[i].missing && !within) {
            printf("FAIL %s: ratio %.3f outside 15%%\n", rows[i].name, got[i].ratio);
            failed = 1;
        }
        if (rows[i].missing && within) {
            printf("FAIL %s: ratio %.3f now within 15%%: move it to the rows held to 15%%\n", rows[i].name,
                   got[i].ratio);
            failed = 1;
        }
        if (rows[i].missing) printf("not met: %s (ratio %.3f): missing %s\n", rows[i].name, got[i].ratio, rows[i].missing);
    }
    assert_false(failed);
}

static int row_named(const char *prefix) {
    for (size_t i = 0; i < NROWS; i++)
        if (!strncmp(rows[i].name, prefix, strlen(prefix))) return (int)i;
    fail_msg("no row %s", prefix);
    return -1;
}

/* What the model must get right about the rows it does not meet:
 *  - MPT-7B's MFU falls from seq 2048 to 65536 (published 46.44% -> 28.59%):
 *    attention FLOPs at FlashAttention-2's efficiency, not the GEMMs';
 *  - Megatron's TFLOP/s per GPU falls as the GPUs double at a fixed batch
 *    (144 -> 88 -> 44): ZeRO-3's volume and the ring's latency do not
 *    shrink with the per-GPU batch;
 *  - the torchtitan row without op-level recompute and eager overheads is
 *    an upper bound: faster than the run. */
static void test_directions(void **state) {
    (void)state;
    int k2 = row_named("MPT-7B 8 x H100 T 2048"), k64 = row_named("MPT-7B 8 x H100 T 65536");
    printf("MPT-7B llm-foundry MFU: T 2048 %.2f%% (published 46.44%%), T 65536 %.2f%% (published 28.59%%)\n",
           100 * got[k2].mfu_foundry, 100 * got[k64].mfu_foundry);
    assert_true(got[k64].mfu_foundry < got[k2].mfu_foundry);
    int m1 = row_named("Megatron 175B ZeRO-3 384"), m2 = row_named("Megatron 175B ZeRO-3 768"),
        m3 = row_named("Megatron 175B ZeRO-3 1536");
    printf("Megatron 175B ZeRO-3: 768 -> 1536 GPUs throughput x%.2f (published x%.2f: 88 x 768 -> 44 x 1536)\n",
           got[m3].value * 1536 / (got[m2].value * 768), 44.0 * 1536 / (88.0 * 768));
    assert_true(got[m1].value > got[m2].value && got[m2].value > got[m3].value);
    int tt = row_named("torchtitan");
    assert_true(got[tt].ratio > 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_rows),
        cmocka_unit_test(test_directions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
