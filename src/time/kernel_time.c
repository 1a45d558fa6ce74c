/* kernel_time.c - one kernel's time on a GPU by its class and shape
 * (step_time.h: GEMMs by tile and wave quantization, FlashAttention-2 by
 * its efficiency and causal blocks, the rest at HBM bandwidth).
 * What it is not: the step's schedule (step_time.c).
 */
#include "shardsim/step_time.h"

#include <math.h>

shs_kernel_env_t shs_kernel_env(const shs_train_config_t *tc, const shs_hw_t *hw, double gemm_eff) {
    shs_dtype_t pd = tc->strategy.param_dtype, ac = tc->autocast;
    int low_ac = ac == SHS_BF16 || ac == SHS_F16, low_pd = pd == SHS_BF16 || pd == SHS_F16;
    shs_kernel_env_t e = {.matmul_dtype = low_ac ? ac : low_pd ? pd : SHS_F32, .act_bytes = low_ac || low_pd ? 2 : 4,
                          .gemm_eff = gemm_eff > 0 ? gemm_eff : hw->gemm_eff};
    return e;
}

static double peak(const shs_hw_t *hw, const shs_kernel_env_t *env) {
    return env->matmul_dtype == SHS_F32 ? hw->peak_flops_32 : hw->peak_flops_16;
}

/* the share of `waves` x SMs slots that `blocks` thread blocks fill */
static double wave_share(double blocks, int sms) {
    if (blocks <= 0) return 1;
    double waves = ceil(blocks / sms);
    return blocks / (waves * sms);
}

static double tiles_q(double m, double n, double tm, double tn, int sms) {
    double tiles_m = ceil(m / tm), tiles_n = ceil(n / tn);
    double tiles = tiles_m * tiles_n;
    return m * n / (tiles * tm * tn) * wave_share(tiles, sms);
}

double shs_gemm_quantization(const shs_hw_t *hw, double m, double n) {
    if (m <= 0 || n <= 0) return 1;
    double a = tiles_q(m, n, hw->tile_m, hw->tile_n, hw->sms), b = tiles_q(m, n, hw->tile_n, hw->tile_m, hw->sms);
    return a > b ? a : b;
}

/* one GEMM launch of (m x n x k) */
static double gemm_time(const shs_hw_t *hw, const shs_kernel_env_t *env, double m, double n, double k) {
    double width = env->matmul_dtype == SHS_F32 ? 4 : 2;
    double compute = 2 * m * n * k / (peak(hw, env) * env->gemm_eff * shs_gemm_quantization(hw, m, n));
    double memory = (m * k + k * n + m * n) * width / hw->hbm_bw;
    return compute > memory ? compute : memory;
}

/* the flash kernel's causal blocks and waves: the useful share of its work */
static double flash_quantization(const shs_hw_t *hw, double heads, double T) {
    double blk = hw->attn_block, nb = ceil(T / blk);
    double causal = T * (T + 1) / (nb * (nb + 1) * blk * blk);
    return causal * wave_share(heads * nb, hw->sms);
}

double shs_kernel_time(const shs_hw_t *hw, const shs_kernel_env_t *env, const shs_kernel_info_t *k, uint64_t count) {
    double act = env->act_bytes / 4.0, c = (double)count;
    switch (k->cls) {
    case SHS_KERNEL_GEMM: return c * gemm_time(hw, env, k->m, k->n, k->k);
    case SHS_KERNEL_ATTENTION:
        if (k->flash) {
            double eff = k->backward ? hw->attn_bwd_eff : hw->attn_fwd_eff;
            return k->flops / (peak(hw, env) * eff * flash_quantization(hw, k->m, k->n));
        } else {
            /* scores and output: per head a (T x T x HD) and a (T x HD x T) GEMM forward, twice that backward */
            double per = (k->backward ? 4 : 2) * k->m * gemm_time(hw, env, k->n, k->n, k->k);
            return c * per + k->bytes * act / hw->hbm_bw;
        }
    case SHS_KERNEL_OPTIMIZER: return k->bytes / hw->hbm_bw;
    default: return k->bytes * act / hw->hbm_bw;
    }
}
