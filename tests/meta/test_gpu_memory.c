/* test_gpu_memory.c - a GPU run's fixed memory and the fit (gpu_memory.h),
 * by hand from the cited constants; compare's refusals of bad memory
 * options before any rank runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/gpu_memory.h"

#define MiB (1024.0 * 1024.0)

/* nvidia-smi's totals, PyTorch's lazy CUDA context, NCCL's buffers, by hand. */
static void test_presets_and_fixed_costs(void **state) {
    (void)state;
    shs_gpu_mem_preset_t h, a, p0;
    assert_int_equal(shs_gpu_mem_preset("h100-sxm", &h), SHS_OK);
    assert_int_equal(shs_gpu_mem_preset("a100", &a), SHS_OK);
    assert_true(h.board_bytes == 81559 * MiB);      /* wilicc/gpu-burn#114 */
    assert_true(a.board_bytes == 81920 * MiB);      /* dexmal/dexbotic#41 */
    assert_true(h.cuda_context_bytes == 287047680); /* pytorch/pytorch#86509 */
    /* one communicator of 8: 4 MiB x 24 channels x 2 ring peers + NVLS 201326592 B on H100; two ranks: 1 peer */
    assert_true(shs_gpu_nccl_comm_bytes(&h, 8) == 4 * MiB * 24 * 2 + 201326592.0);
    assert_true(shs_gpu_nccl_comm_bytes(&h, 2) == 4 * MiB * 24 + 201326592.0);
    assert_true(shs_gpu_nccl_comm_bytes(&h, 1) == 0);
    assert_true(shs_gpu_nccl_comm_bytes(&a, 8) == 4 * MiB * 24 * 2); /* no NVLink SHARP on A100 */
    /* hybrid sharding over 16 ranks in groups of 8: the world, the shard group and a 2-rank replica group */
    double want = 287047680.0 + 2 * (192 * MiB + 201326592.0) + (96 * MiB + 201326592.0);
    assert_true(shs_gpu_fixed_bytes(&h, SHS_HYBRID_SHARD, 16, 8) == want);
    assert_true(shs_gpu_fixed_bytes(&h, SHS_ZERO3, 16, 8) == 287047680.0 + 192 * MiB + 201326592.0);
    assert_int_equal(shs_gpu_mem_preset("tpu", &a), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "h100-sxm, h200, a100"));
    /* torchtitan's 96 GB HBM2e H100: no published nvidia-smi total, so the run must name it */
    assert_int_equal(shs_gpu_mem_preset("h100-hbm2e", &p0), SHS_OK);
    assert_int_equal(shs_gpu_mem_check(&p0), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "GPU h100-hbm2e lacks its board memory (nvidia-smi memory.total): give "
                                             "--device-mem"));
    /* a preset lacking a constant names the option that gives it */
    shs_gpu_mem_preset_t p = h;
    p.board_bytes = 0;
    assert_int_equal(shs_gpu_mem_check(&p), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "--device-mem"));
    p = h;
    p.nccl_channels = 0;
    assert_int_equal(shs_gpu_mem_check(&p), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "--nccl-channels"));
    p = h;
    p.nccl_buffsize = 0;
    assert_int_equal(shs_gpu_mem_check(&p), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "--nccl-buffsize"));
    assert_int_equal(shs_gpu_mem_check(&h), SHS_OK);
    /* the fit: reserved + context + NCCL against the board */
    shs_meta_rank_result_t r = {0};
    r.gpu.alloc.total_peak = (size_t)(70000 * MiB);
    r.gpu.reserved_peak = (size_t)(81000 * MiB);
    shs_gpu_mem_report_t g;
    shs_gpu_mem_report(&h, &r, SHS_ZERO3, 8, 8, &g);
    assert_true(g.total == 81000 * MiB + 287047680.0 + 192 * MiB + 201326592.0);
    assert_false(g.fits); /* 81000 + 273.75 + 384 MiB > 81559 MiB */
    r.gpu.reserved_peak = (size_t)(80900 * MiB); /* 81557.75 MiB: fits */
    shs_gpu_mem_report(&h, &r, SHS_ZERO3, 8, 8, &g);
    assert_true(g.fits);
}

/* Bad memory options: exit 2 naming the option, before any rank runs. */
static void test_bad_options(void **state) {
    (void)state;
    static const char *const bad[][3] = {
        {"--framework", "megatron", "--framework must be torch or deepspeed, not megatron"},
        {"--loss-kernel", "liger", "--loss-kernel must be torch or fused, not liger"},
        {"--reshard-after-forward", "maybe", "--reshard-after-forward must be true, false or a group size"},
        {"--reshard-after-forward", "0", "--reshard-after-forward must be true, false or a group size"},
        {"--reshard-after-forward", "3", "--reshard-after-forward 3 must divide the shard group (--world 8)"},
        {"--nccl-channels", "0", "--nccl-channels: 0 is out of range"},
        {"--nccl-buffsize", "-1", "--nccl-buffsize: -1 is out of range"},
        {"--cuda-context-mib", "-5", "--cuda-context-mib: -5 is out of range"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const test_proc_t *p = test_shardsim(30, "compare", bad[k][0], bad[k][1], NULL);
        if (p->exit_code != 2 || !strstr(p->err, bad[k][2]))
            fail_msg("%s %s: want exit 2 and '%s', got %d: %s", bad[k][0], bad[k][1], bad[k][2], p->exit_code, p->err);
        if (p->out[0]) fail_msg("%s %s: output before the refusal:\n%s", bad[k][0], bad[k][1], p->out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_and_fixed_costs),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
