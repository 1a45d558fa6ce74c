#!/usr/bin/python3
"""torch_llama_check.py - shardsim's Llama family against PyTorch, loss and one AdamW step.

What it is: an optional fidelity check (`make torch-check`). It writes
tiny config.json files - Llama (GQA with an untied head; MQA with a tied
head and Llama 3.1's rope_scaling), Qwen2's q/k/v biases, and one per
decoder family shardsim reads beyond them (Mistral's window, Qwen2's
use_sliding_window, Qwen3, Gemma, Gemma 2, Gemma 3, Phi-3 with partial
rotary and LongRoPE, OLMo 2, InternLM2) - and a corpus of exactly T+1
bytes (so every sequence the sampler draws is that text), runs `shardsim
train --hf-config` for 0 and 1 steps (AdamW, and SGD with lr 1000 to read
the gradient) with --export-safetensors, and recomputes the same model in
PyTorch from the exported initial weights: the loss of the first batch, its
gradient, and one torch.optim.AdamW step. The PyTorch model below is
written here from the Hugging Face definitions (modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py, modeling_qwen3.py,
modeling_gemma.py, modeling_gemma2.py, modeling_gemma3.py,
modeling_phi3.py, modeling_olmo2.py, modeling_rope_utils.py and InternLM2's
modeling_internlm2.py): RMSNorm in f32 (w, or 1 + w for Gemma), rotate_half
RoPE on the rotary channels, repeat_kv, the window mask t - t2 < W, tanh soft
caps, SwiGLU / GeGLU (gelu approximate='tanh'), Phi-3's fused projections
and InternLM2's grouped wqkv; it runs in float64, so it is an oracle for
shardsim's f32 arithmetic.
Autocast: the same batch with `--autocast bf16` (f32 parameters) against
the model run under torch.autocast("cpu", dtype=torch.bfloat16) as Hugging
Face's LlamaForCausalLM runs it (RMSNorm upcast to f32, q*cos +
rotate_half(q)*sin promoted to f32, eager attention with the softmax in
f32, the loss on logits.float()); torch 1.13's CPU autocast casts linear,
matmul and bmm to bf16 and runs cross_entropy in f32, as its CUDA autocast
does. The two round at nearly the same points but not all of them (torch
also rounds the attention scores and silu(gate) before their products, and
rounds every backward matmul's output to bf16; shardsim keeps f32
gradients), so the comparison is at bf16's resolution, u = 2^-8:
  - loss within u/16 (2.4e-4) relative: the loss averages log-softmax over
    the batch's tokens of bf16-rounded logits (|z| < 1 at this init); each
    rounding moves a term by under 2^-9 |z| and the terms' errors partly
    cancel (measured: torch-bf16 vs exact 9e-6 .. 4e-5);
  - the gradient of all weights within 2u (7.8e-3) relative (Frobenius):
    every gradient element torch computes is rounded to bf16 at least once
    (the weight-gradient matmul writes bf16) on top of the forward's
    roundings, which shardsim shares: about one rounding apart. Where
    the family has more bf16 tensors on the gradient's path than Llama
    (Qwen3's and Gemma 3's q/k norms, OLMo 2's, Gemma 2/3's and OLMo 2's
    output norms, Gemma 2's bf16 soft caps), torch's backward rounds the
    gradient once more at each (a norm's x.float() casts its gradient back
    to bf16), which shardsim does not (f32 gradients): there the gradients
    must instead be closer than two independent errors of their sizes
    would be, |shs - torch| < 0.85 sqrt(e_torch^2 + e_shs^2) (they share the
    forward's roundings; measured 0.48 .. 0.73; an unrounded f32 run gives
    1.0);
  - and the emulation is real: shardsim-bf16's gradient error against the
    exact model is between 1/4 and 4 times torch-bf16's (an f32 run would
    be near 1e-4 of it).
What it is not: part of `make test` (it needs Debian's python3-torch, which
imports only in the system /usr/bin/python3).

Pass: loss within 1e-5 relative; every tensor's gradient within 1e-5
relative (read from a one-step SGD run with lr 1000: new = init - 1000 g); all
weights after one AdamW step within 1e-5 relative (Frobenius norm of the
difference over the weights' norm). Prints each figure, the worst single
tensor after AdamW, and any element whose AdamW update differs by more than
1 % of lr: AdamW's first update is lr*g/(|g|+eps), so an element whose true
gradient is below eps follows the f32 rounding of g, not the model.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SHARDSIM", os.path.join(ROOT, "build", "shardsim"))
TOL = 1e-5
SGD_LR = 1000.0


def read_safetensors(path):
    """name -> float64 tensor, from a safetensors file of F32 tensors (format:
    u64 LE header length, JSON header, little-endian data)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        buf = bytearray(raw[base + a : base + b])
        t = torch.frombuffer(buf, dtype=torch.float32).reshape(info["shape"])
        out[name] = t.to(torch.float64)
    return out


def rms_norm(x, w, eps, style="llama"):
    """RMSNorm as the family's module writes it, the statistics in the
    parameters' dtype (f64, or f32 under autocast): LlamaRMSNorm (and
    Mistral's, Qwen2/3's, Phi-3's, InternLM2's) w * normed.to(input dtype);
    GemmaRMSNorm (normed * (1 + w)).type_as(x); Olmo2RMSNorm
    (w * normed).to(input dtype). In float64 the casts are no-ops."""
    dt, up = x.dtype, w.dtype
    h = x.to(up)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if style == "gemma":
        return (h * (1.0 + w)).to(dt)
    if style == "olmo2":
        return (w * h).to(dt)
    return w * h.to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


FAMILY = {  # transformers' defaults: eps, theta, tied, head_dim (0: C // NH), window
    "llama": (1e-6, 10000.0, False, 0, None), "mistral": (1e-6, 10000.0, False, 0, 4096),
    "qwen2": (1e-6, 10000.0, False, 0, 4096), "qwen3": (1e-6, 10000.0, False, 128, 4096),
    "gemma": (1e-6, 10000.0, True, 256, None), "gemma2": (1e-6, 10000.0, True, 256, 4096),
    "gemma3_text": (1e-6, 1000000.0, True, 256, 4096), "phi3": (1e-5, 10000.0, False, 0, None),
    "olmo2": (1e-5, 10000.0, False, 0, None), "internlm2": (1e-6, 10000.0, False, 0, None),
}


def inv_freq_of(cfg, R, theta, scaled=True, seq_len=0):
    """RoPE inverse frequencies over R rotary channels with the rope_scaling
    types of transformers' modeling_rope_utils.py: llama3
    (_compute_llama3_parameters), linear, longrope (short or long factors by
    the sequence length against original_max_position_embeddings)."""
    inv = 1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    rs = cfg.get("rope_scaling")
    if not rs or not scaled:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return inv / rs["factor"]
    if kind in ("longrope", "su"):
        orig = cfg["original_max_position_embeddings"]
        ext = torch.tensor(rs["long_factor"] if seq_len > orig else rs["short_factor"], dtype=torch.float64)
        return 1.0 / (ext * theta ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    if kind == "dynamic":
        return inv
    assert kind == "llama3"
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wavelen, hi_wavelen = old / lo, old / hi
    wavelen = 2 * torch.pi / inv
    scaled_inv = torch.where(wavelen > lo_wavelen, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled_inv / factor + smooth * scaled_inv
    medium = ~(wavelen < hi_wavelen) & ~(wavelen > lo_wavelen)
    return torch.where(medium, smoothed, scaled_inv)


def windows(cfg, L):
    """Each layer's window (0: full): Mistral and Phi-3 on every layer,
    Qwen2/3 from max_window_layers on (use_sliding_window), Gemma 2 on even
    layers, Gemma 3 on all but every sliding_window_pattern-th."""
    mt = cfg["model_type"]
    W = cfg.get("sliding_window", FAMILY[mt][4])
    if not W:
        return [0] * L
    if mt in ("qwen2", "qwen3"):
        if not cfg.get("use_sliding_window"):
            return [0] * L
        return [W if l >= cfg.get("max_window_layers", 28) else 0 for l in range(L)]
    if mt == "gemma2":
        return [W if l % 2 == 0 else 0 for l in range(L)]
    if mt == "gemma3_text":
        P = cfg.get("sliding_window_pattern", 6)
        return [W if (l + 1) % P else 0 for l in range(L)]
    return [W] * L


def llama_loss(p, cfg, tokens, targets):
    """The mean loss of parameters p: float64 (an oracle of shardsim's f32
    arithmetic), or float32 run inside torch.autocast(bf16) with Hugging
    Face's dtype handling (RoPE tables in f32 made with autocast off, the
    norms as rms_norm says, q*cos + rotate_half(q)*sin promoted to f32,
    eager attention's softmax in f32 cast back to the query's dtype, the
    embedding's normalizer a tensor of its dtype, logits upcast for the loss)."""
    mt = cfg["model_type"]
    eps0, theta0, tied0, hd0, _ = FAMILY[mt]
    C, NH, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    NKV = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim") or hd0 or C // NH
    R = int(HD * cfg.get("partial_rotary_factor", 1.0))
    eps, theta = cfg.get("rms_norm_eps", eps0), cfg.get("rope_theta", theta0)
    tied = cfg.get("tie_word_embeddings", tied0)
    gemma = mt.startswith("gemma")
    post = mt in ("gemma2", "gemma3_text")
    qpas = cfg.get("query_pre_attn_scalar", 256) if post else HD
    acap = cfg.get("attn_logit_softcapping", 50.0 if mt == "gemma2" else None)
    fcap = cfg.get("final_logit_softcapping", 30.0 if mt == "gemma2" else None)
    B, T = tokens.shape
    fdt = next(iter(p.values())).dtype  # float64, or float32 under autocast
    F = torch.nn.functional
    style = "gemma" if mt.startswith("gemma") else "olmo2" if mt == "olmo2" else "llama"
    mscale = 1.0
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) in ("longrope", "su"):
        f = cfg["max_position_embeddings"] / cfg["original_max_position_embeddings"]
        mscale = rs.get("attention_factor") or (math.sqrt(1 + math.log(f) / math.log(cfg["original_max_position_embeddings"])) if f > 1 else 1.0)

    def cos_sin(inv, m):
        with torch.autocast("cpu", enabled=False):
            ang = torch.arange(T, dtype=fdt)[:, None] * inv.to(fdt)[None, :]
            emb = torch.cat((ang, ang), dim=-1)
            return emb.cos() * m, emb.sin() * m

    cs_global = cos_sin(inv_freq_of(cfg, R, theta, True, T), mscale)
    cs_local = cos_sin(inv_freq_of(cfg, R, cfg.get("rope_local_base_freq", 10000.0), False), 1.0)
    names = "internlm2" if mt == "internlm2" else "phi3" if mt == "phi3" else "hf"
    emb_name = "model.tok_embeddings.weight" if names == "internlm2" else "model.embed_tokens.weight"
    x = p[emb_name][tokens]
    if gemma:
        x = x * torch.tensor(math.sqrt(C), dtype=x.dtype)
    win = windows(cfg, L)
    t = torch.arange(T)
    diff = t[:, None] - t[None, :]
    act = (lambda g: F.gelu(g, approximate="tanh")) if gemma else F.silu
    for l in range(L):
        pre = f"model.layers.{l}."
        w = lambda n: p[pre + n]
        h = x
        if mt != "olmo2":
            h = rms_norm(x, w("attention_norm.weight" if names == "internlm2" else "input_layernorm.weight"), eps, style)
        if names == "internlm2":  # 'b q (h gs d) -> b q h gs d', gs = NH/NKV + 2
            G = NH // NKV
            qkv = F.linear(h, w("attention.wqkv.weight"), p.get(pre + "attention.wqkv.bias"))
            qkv = qkv.view(B, T, NKV, G + 2, HD)
            q = qkv[..., :G, :].reshape(B, T, NH * HD)
            k, v = qkv[..., -2, :].reshape(B, T, NKV * HD), qkv[..., -1, :].reshape(B, T, NKV * HD)
        elif names == "phi3":
            qkv = F.linear(h, w("self_attn.qkv_proj.weight"))
            q, k, v = qkv[..., :NH * HD], qkv[..., NH * HD:(NH + NKV) * HD], qkv[..., (NH + NKV) * HD:]
        else:
            def proj(name):
                # Qwen2's q/k/v biases, attention_bias's
                return F.linear(h, w(f"self_attn.{name}.weight"), p.get(pre + f"self_attn.{name}.bias"))
            q, k, v = proj("q_proj"), proj("k_proj"), proj("v_proj")
        if mt == "olmo2":  # q_norm / k_norm over the whole projections
            q, k = rms_norm(q, w("self_attn.q_norm.weight"), eps, style), rms_norm(k, w("self_attn.k_norm.weight"), eps, style)
        q = q.view(B, T, NH, HD).transpose(1, 2)
        k = k.view(B, T, NKV, HD).transpose(1, 2)
        v = v.view(B, T, NKV, HD).transpose(1, 2)
        if mt in ("qwen3", "gemma3_text"):  # per head, before RoPE
            q, k = rms_norm(q, w("self_attn.q_norm.weight"), eps, style), rms_norm(k, w("self_attn.k_norm.weight"), eps, style)
        cos, sin = cs_local if (mt == "gemma3_text" and win[l]) else cs_global
        qr = q[..., :R] * cos + rotate_half(q[..., :R]) * sin  # f32 under autocast (cos, sin f32)
        kr = k[..., :R] * cos + rotate_half(k[..., :R]) * sin
        q, k = torch.cat((qr, q[..., R:].to(qr.dtype)), dim=-1), torch.cat((kr, k[..., R:].to(kr.dtype)), dim=-1)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        s = q @ k.transpose(-1, -2) * qpas ** -0.5
        if acap:
            s = torch.tanh(s / acap) * acap
        allowed = (diff >= 0) & ((diff < win[l]) if win[l] else True)
        s = s.masked_fill(~allowed, float("-inf"))
        o = (torch.softmax(s, dim=-1, dtype=fdt).to(q.dtype) @ v).transpose(1, 2).reshape(B, T, NH * HD)
        if names == "internlm2":
            o = F.linear(o, w("attention.wo.weight"), p.get(pre + "attention.wo.bias"))
        else:
            o = F.linear(o, w("self_attn.o_proj.weight"), p.get(pre + "self_attn.o_proj.bias"))
        if post or mt == "olmo2":
            o = rms_norm(o, w("post_attention_layernorm.weight"), eps, style)
        x = x + o
        h = x
        if mt != "olmo2":
            h = rms_norm(x, w("ffn_norm.weight" if names == "internlm2" else "pre_feedforward_layernorm.weight" if post
                              else "post_attention_layernorm.weight"), eps, style)
        if names == "internlm2":
            m = F.linear(act(F.linear(h, w("feed_forward.w1.weight"))) * F.linear(h, w("feed_forward.w3.weight")),
                         w("feed_forward.w2.weight"))
        elif names == "phi3":
            gate, up = F.linear(h, w("mlp.gate_up_proj.weight")).chunk(2, dim=-1)
            m = F.linear(up * act(gate), w("mlp.down_proj.weight"))
        else:
            m = F.linear(act(F.linear(h, w("mlp.gate_proj.weight"))) * F.linear(h, w("mlp.up_proj.weight")),
                         w("mlp.down_proj.weight"))
        if post or mt == "olmo2":
            m = rms_norm(m, w("post_feedforward_layernorm.weight"), eps, style)
        x = x + m
    x = rms_norm(x, p["model.norm.weight"], eps, style)
    head = p[emb_name] if tied else p["output.weight" if names == "internlm2" else "lm_head.weight"]
    logits = F.linear(x, head)
    if fcap:
        logits = torch.tanh(logits / fcap) * fcap
    return F.cross_entropy(logits.to(fdt).reshape(B * T, -1), targets.reshape(-1), ignore_index=-100)


U = 2.0**-8  # bf16's unit in the last place, relative


EXTRA_BWD_ROUNDING = ("qwen3", "gemma2", "gemma3_text", "olmo2")  # see the docstring


def check_autocast(cfg, p0, pa, shs_loss, tok, tgt):
    """shardsim --autocast bf16 (loss shs_loss; weights after one SGD step
    of lr SGD_LR from p0 in pa) against torch.autocast and the float64
    model. True when within the tolerances of the docstring."""
    exact = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    l64 = llama_loss(exact, cfg, tok, tgt)
    l64.backward()
    p32 = {k: v.to(torch.float32).clone().requires_grad_(True) for k, v in p0.items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lbf = llama_loss(p32, cfg, tok, tgt)
    lbf.backward()
    rel_loss = abs(shs_loss - lbf.item()) / abs(lbf.item())
    d = e_torch = e_shs = n = 0.0
    for name in p0:
        g64, gt, gs = exact[name].grad, p32[name].grad.double(), (p0[name] - pa[name]) / SGD_LR
        d += (gs - gt).pow(2).sum().item()
        e_torch += (gt - g64).pow(2).sum().item()
        e_shs += (gs - g64).pow(2).sum().item()
        n += g64.pow(2).sum().item()
    d, e_torch, e_shs = (d / n) ** 0.5, (e_torch / n) ** 0.5, (e_shs / n) ** 0.5
    print(f"autocast bf16: loss shardsim {shs_loss:.6f}, torch.autocast {lbf.item():.7f} (relative difference "
          f"{rel_loss:.2e}, tolerance {U / 16:.2e}), float64 {l64.item():.7f}")
    indep = (e_torch**2 + e_shs**2) ** 0.5
    extra = cfg["model_type"] in EXTRA_BWD_ROUNDING
    ok_d = d <= 0.85 * indep if extra else d <= 2 * U
    print(f"  gradient of all weights: shardsim vs torch.autocast {d:.2e} ("
          + (f"{d / indep:.2f} of independent errors' {indep:.2e}, below 0.85" if extra else f"tolerance {2 * U:.2e}")
          + f"); against float64: torch.autocast {e_torch:.2e}, shardsim {e_shs:.2e} (ratio {e_shs / e_torch:.2f}, "
          f"within 1/4..4)")
    return rel_loss <= U / 16 and ok_d and 0.25 <= e_shs / e_torch <= 4


def run(args):
    r = subprocess.run([BIN] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"shardsim {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


CASES = [
    ("llama, GQA 4/2, untied head", {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
    }),
    ("llama, MQA 4/1, tied head, Llama 3.1 rope_scaling", {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 16},
    }),
    ("qwen2, q/k/v biases, GQA 4/2, tied head", {
        "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True, "torch_dtype": "float32",
    }),
    ("mistral, a window of 5 keys on every layer", {
        "model_type": "mistral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "sliding_window": 5, "torch_dtype": "float32",
    }),
    ("qwen2, use_sliding_window from layer 1", {
        "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "use_sliding_window": True, "sliding_window": 6, "max_window_layers": 1, "torch_dtype": "float32",
    }),
    ("qwen3, head_dim 32 (QD 128 > C), q/k head norms, attention bias", {
        "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 256,
        "max_position_embeddings": 64, "attention_bias": True, "tie_word_embeddings": True, "torch_dtype": "float32",
    }),
    ("gemma, GeGLU, (1 + w) norms, scaled embedding, MQA, tied", {
        "model_type": "gemma", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 256,
        "max_position_embeddings": 64, "hidden_act": "gelu", "torch_dtype": "float32",
    }),
    ("gemma2, four norms, soft caps, query_pre_attn_scalar, windows on even layers", {
        "model_type": "gemma2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
        "max_position_embeddings": 64, "sliding_window": 6, "query_pre_attn_scalar": 24,
        "attn_logit_softcapping": 1.5, "final_logit_softcapping": 2.0, "torch_dtype": "float32",
    }),
    ("gemma3_text, q/k head norms, local theta, linear rope_scaling, windows but every 3rd layer", {
        "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 256,
        "max_position_embeddings": 64, "sliding_window": 6, "sliding_window_pattern": 3,
        "rope_local_base_freq": 100.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
        "query_pre_attn_scalar": 16, "torch_dtype": "float32",
    }),
    ("phi3, fused qkv/gate_up, partial rotary 0.5, longrope (long factors: T 16 > 8), window 7", {
        "model_type": "phi3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "original_max_position_embeddings": 8, "partial_rotary_factor": 0.5, "sliding_window": 7,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 3.0, 5.0, 9.0]},
        "torch_dtype": "float32",
    }),
    ("olmo2, post-norms, q/k norms over the whole projections", {
        "model_type": "olmo2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "torch_dtype": "float32",
    }),
    ("internlm2, wqkv grouped per key/value head, bias", {
        "model_type": "internlm2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "bias": True, "torch_dtype": "float32",
    }),
]


def main():
    ok = True
    for name, cfg in CASES:
        print(f"== {name}")
        ok = check(cfg) and ok
    print("torch-check:", "PASS" if ok else "FAIL", f"(tolerance {TOL:g} relative; autocast bf16 as above)")
    sys.exit(0 if ok else 1)


def check(cfg):
    T, B = 16, 2
    text = b"First Citizen: Before we proceed"[: T + 1]
    assert len(text) == T + 1
    lr, wd = 1e-3, 0.01
    with tempfile.TemporaryDirectory() as d:
        cpath, dpath = os.path.join(d, "config.json"), os.path.join(d, "corpus.txt")
        with open(cpath, "w") as f:
            json.dump(cfg, f)
        with open(dpath, "wb") as f:
            f.write(text)
        common = ["train", "--hf-config", cpath, "--data", dpath, "--world", "1", "--micro-batch", str(B),
                  "--context", str(T), "--strategy", "ddp"]
        adamw = ["--lr", str(lr), "--weight-decay", str(wd)]
        st = lambda n: os.path.join(d, n + ".safetensors")
        run(common + adamw + ["--steps", "0", "--export-safetensors", st("init")])
        out = run(common + adamw + ["--steps", "1", "--export-safetensors", st("adamw")])
        # SGD with lr 1000, no momentum or decay: new = init - 1000 g, so the gradient is (init - new) / 1000
        # (a large lr so that the f32 result is dominated by the update, not by the weight's own rounding)
        sgd = ["--optimizer", "sgd", "--lr", str(SGD_LR), "--weight-decay", "0", "--steps", "1"]
        run(common + sgd + ["--export-safetensors", st("sgd")])
        out_ac = run(common + sgd + ["--autocast", "bf16", "--export-safetensors", st("autocast")])
        m_ac = re.search(r"step\s+1/1 \| loss ([0-9.]+)", out_ac)
        if not m_ac:
            sys.exit("no step-1 loss in shardsim's autocast output:\n" + out_ac)
        m = re.search(r"step\s+1/1 \| loss ([0-9.]+)", out)
        if not m:
            sys.exit("no step-1 loss in shardsim's output:\n" + out)
        shs_loss = float(m.group(1))
        p0, p1, ps = read_safetensors(st("init")), read_safetensors(st("adamw")), read_safetensors(st("sgd"))
        pa = read_safetensors(st("autocast"))

    tok = torch.tensor(list(text[:T]), dtype=torch.long).repeat(B, 1)
    tgt = torch.tensor(list(text[1:]), dtype=torch.long).repeat(B, 1)
    params = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    loss = llama_loss(params, cfg, tok, tgt)
    rel_loss = abs(shs_loss - loss.item()) / abs(loss.item())
    print(f"loss: shardsim {shs_loss:.6f} (printed to 6 decimals), torch float64 {loss.item():.9f}, "
          f"relative difference {rel_loss:.2e}")
    loss.backward()
    grads = {k: t.grad.clone() for k, t in params.items()}
    worst_g, worst_g_name = 0.0, ""
    for name, g in grads.items():
        rel = ((p0[name] - ps[name]) / SGD_LR - g).norm().item() / g.norm().item()
        if rel > worst_g:
            worst_g, worst_g_name = rel, name
    print(f"gradient: worst tensor relative difference {worst_g:.2e} ({worst_g_name}), over {len(grads)} tensors")
    opt = torch.optim.AdamW(list(params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
    opt.step()
    num = den = 0.0
    worst, worst_name, flips = 0.0, "", []
    for name, t in params.items():
        ref = t.detach()
        num += (p1[name] - ref).pow(2).sum().item()
        den += ref.pow(2).sum().item()
        rel = (p1[name] - ref).norm().item() / ref.norm().item()
        if rel > worst:
            worst, worst_name = rel, name
        # elements whose update differs by more than 1 % of the learning rate
        bad = ((p1[name] - ref).abs() > 0.01 * lr).nonzero()
        flips += [grads[name][tuple(i)].abs().item() for i in bad]
    rel_w = (num / den) ** 0.5
    print(f"one AdamW step: all weights relative difference {rel_w:.2e}; worst tensor {worst:.2e} ({worst_name})")
    if flips:
        print(f"  {len(flips)} element(s) updated differently by > 1 % of lr: their float64 |gradient| is at most "
              f"{max(flips):.1e}, below AdamW's eps 1e-8, where lr*g/(|g|+eps) follows the gradient's f32 rounding")
    ok_ac = check_autocast(cfg, p0, pa, float(m_ac.group(1)), tok, tgt)
    return rel_loss <= TOL and worst_g <= TOL and rel_w <= TOL and ok_ac


if __name__ == "__main__":
    main()
