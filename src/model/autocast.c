/* autocast.c - the autocast emulation the decoders share (autocast.h). */
#include "model/autocast.h"

void shs__amp_setup(shs__amp_t *amp, shs_device_t *dev, const shs_gpt_exec_t *ex) {
    int on = ex->autocast == SHS_BF16 || ex->autocast == SHS_F16;
    amp->dev = dev;
    amp->A = on ? ex->autocast : SHS_F32;
    amp->R = on && ex->param_dtype == ex->autocast ? ex->autocast : SHS_F32;
    amp->round_weights = on && ex->param_dtype != ex->autocast;
    amp->ww = NULL;
}

const float *shs__amp_view(const shs__amp_t *amp, const void *stored, shs_dtype_t dt, float *work, size_t n) {
    if (dt == SHS_F32) return stored;
    shs_cast(amp->dev, work, SHS_F32, stored, dt, n);
    return work;
}

float *shs__amp_target(void *stored, shs_dtype_t dt, float *work) { return dt == SHS_F32 ? stored : work; }

void shs__amp_commit(const shs__amp_t *amp, void *stored, shs_dtype_t dt, const float *work, size_t n) {
    if (dt != SHS_F32) shs_cast(amp->dev, stored, dt, work, SHS_F32, n);
}

const float *shs__amp_weights(const shs__amp_t *amp, const float *w, size_t n, size_t off) {
    if (!amp->round_weights || !w) return w;
    shs_memcpy_d2d(amp->dev, amp->ww + off, w, n * sizeof(float));
    shs_round(amp->dev, amp->ww + off, amp->A, n);
    return amp->ww + off;
}

void shs__amp_matmul(const shs__amp_t *amp, float *out, const float *inp, const float *w, const float *bias, int BT,
                     int C, int OC, int round_out) {
    const float *wr = shs__amp_weights(amp, w, (size_t)OC * C, 0);
    const float *br = shs__amp_weights(amp, bias, (size_t)OC, (size_t)OC * C);
    shs_matmul_forward(amp->dev, out, inp, wr, br, BT, C, OC);
    if (round_out && amp->A != SHS_F32) shs_round(amp->dev, out, amp->A, (size_t)BT * OC);
}

void shs__amp_matmul_backward(const shs__amp_t *amp, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, int BT, int C, int OC) {
    shs_matmul_backward(amp->dev, dinp, dw, db, dout, inp, shs__amp_weights(amp, w, (size_t)OC * C, 0), BT, C, OC);
}
