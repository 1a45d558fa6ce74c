/* test_kernel_log.c - the meta run's per-segment kernel records
 * (meta_run.h's kernel_log, device.h's shs_kernel_info_t): they add up to
 * each segment's counted FLOPs, and the GEMMs and the attention core carry
 * the shapes the GPT's closed forms give (B sequences of T tokens, width C,
 * NH heads: a block's forward is the four matmuls (BT x 3C x C), (BT x C x
 * C), (BT x 4C x C), (BT x C x 4C); each matmul's backward the weight
 * gradient (OC x C x BT) and the input gradient (BT x C x OC)).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/meta_run.h"
#include "shardsim/train.h"

enum { L = 2, C = 24, NH = 2, T = 16, B = 2 };

static shs_meta_result_t run(shs_recompute_t recompute, shs_attention_kind_t attention) {
    shs_meta_config_t mc = {.steps = 2};
    mc.train = shs_train_default_config();
    mc.train.model = (shs_gpt_config_t){.num_layers = L, .num_heads = NH, .channels = C, .context = T};
    mc.train.world_size = 4;
    mc.train.micro_batch = B;
    mc.train.strategy.kind = SHS_ZERO3;
    mc.train.recompute = recompute;
    mc.train.attention = attention;
    shs_meta_result_t res;
    assert_int_equal(shs_meta_run(&mc, &res), SHS_OK);
    return res;
}

/* launches of GEMM (m, n, k) named `name` in segments of `kind` */
static uint64_t gemms(const shs_meta_rank_result_t *r, shs_step_seg_kind_t kind, const char *name, double m, double n,
                      double k) {
    uint64_t c = 0;
    for (size_t i = 0; i < r->num_kernel_log; i++) {
        const shs_meta_kernel_t *e = &r->kernel_log[i];
        if (r->segments[e->segment].kind == kind && e->info.cls == SHS_KERNEL_GEMM && !strcmp(e->info.name, name) &&
            e->info.m == m && e->info.n == n && e->info.k == k) {
            assert_true(e->info.flops == 2 * m * n * k * (double)e->count);
            c += e->count;
        }
    }
    return c;
}

static void test_records_sum_to_segments(void **state) {
    (void)state;
    for (int rc = 0; rc < 2; rc++) {
        shs_meta_result_t res = run(rc ? SHS_RECOMPUTE_FULL : SHS_RECOMPUTE_NONE, SHS_ATTENTION_EAGER);
        for (int k = 0; k < res.num_ranks; k++) {
            const shs_meta_rank_result_t *r = &res.ranks[k];
            assert_true(r->num_kernel_log > 0);
            for (int s = 0; s < r->num_segments; s++) {
                double f = 0;
                for (size_t i = 0; i < r->num_kernel_log; i++)
                    if (r->kernel_log[i].segment == s) f += r->kernel_log[i].info.flops;
                if (f != (double)r->segments[s].flops)
                    fail_msg("rank %d segment %d (%s): records %.17g FLOPs, segment %llu", r->rank, s,
                             r->segments[s].label, f, (unsigned long long)r->segments[s].flops);
            }
        }
        shs_meta_result_free(&res);
    }
}

static void test_gemm_and_attention_shapes(void **state) {
    (void)state;
    shs_meta_result_t res = run(SHS_RECOMPUTE_NONE, SHS_ATTENTION_FLASH);
    const shs_meta_rank_result_t *r = &res.ranks[0];
    const double bt = B * T;
    /* one micro-batch, L blocks: each block matmul once forward */
    assert_int_equal(gemms(r, SHS_STEP_SEG_FORWARD, "matmul_forward", bt, 3 * C, C), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_FORWARD, "matmul_forward", bt, C, C), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_FORWARD, "matmul_forward", bt, 4 * C, C), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_FORWARD, "matmul_forward", bt, C, 4 * C), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_BACKWARD, "matmul_backward dweight", 3 * C, C, bt), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_BACKWARD, "matmul_backward dinp", bt, C, 3 * C), L);
    assert_int_equal(gemms(r, SHS_STEP_SEG_BACKWARD, "matmul_backward dweight", C, 4 * C, bt), L);
    int fwd = 0, bwd = 0;
    for (size_t i = 0; i < r->num_kernel_log; i++) {
        const shs_kernel_info_t *k = &r->kernel_log[i].info;
        if (k->cls != SHS_KERNEL_ATTENTION) continue;
        assert_true(k->flash && k->m == B * NH && k->n == T && k->k == C / NH);
        *(k->backward ? &bwd : &fwd) += (int)r->kernel_log[i].count;
    }
    assert_int_equal(fwd, L);
    assert_int_equal(bwd, L);
    shs_meta_result_free(&res);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_sum_to_segments),
        cmocka_unit_test(test_gemm_and_attention_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
