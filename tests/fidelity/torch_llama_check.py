#!/usr/bin/python3
"""torch_llama_check.py - shardsim's Llama against PyTorch, loss and one AdamW step.

What it is: an optional fidelity check (`make torch-check`). It writes
tiny config.json files (GQA with an untied head; MQA with a tied head and
Llama 3.1's rope_scaling; Qwen2's q/k/v biases) and a corpus of
exactly T+1 bytes (so every sequence the sampler draws is that text), runs
`shardsim train --hf-config` for 0 and 1 steps (AdamW, and SGD with lr 1000
to read the gradient) with --export-safetensors, and recomputes the same
model in PyTorch from the exported initial weights: the loss of the first
batch, its gradient, and one torch.optim.AdamW step. The PyTorch
model below is written here from the Hugging Face LlamaForCausalLM
definition (RMSNorm in f32, rotate_half RoPE, repeat_kv, SwiGLU); it runs in
float64, so it is an oracle for shardsim's f32 arithmetic.
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
    roundings, which shardsim shares: about one rounding apart;
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


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def inv_freq_of(cfg, HD):
    """RoPE inverse frequencies, with Llama 3.1's rope_scaling (type llama3)
    as transformers' _compute_llama3_parameters defines it."""
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD))
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    assert rs["rope_type"] == "llama3"
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wavelen, hi_wavelen = old / lo, old / hi
    wavelen = 2 * torch.pi / inv
    scaled = torch.where(wavelen > lo_wavelen, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < hi_wavelen) & ~(wavelen > lo_wavelen)
    return torch.where(medium, smoothed, scaled)


def llama_loss(p, cfg, tokens, targets):
    C = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    NKV = cfg["num_key_value_heads"]
    HD = C // NH
    L = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    B, T = tokens.shape
    inv_freq = inv_freq_of(cfg, HD)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = p["model.embed_tokens.weight"][tokens]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        def proj(name, heads):
            y = h @ p[pre + f"self_attn.{name}.weight"].T
            if pre + f"self_attn.{name}.bias" in p:  # Qwen2's q/k/v biases
                y = y + p[pre + f"self_attn.{name}.bias"]
            return y.view(B, T, heads, HD).transpose(1, 2)

        q, k, v = proj("q_proj", NH), proj("k_proj", NKV), proj("v_proj", NKV)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / HD**0.5 + mask, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + o @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        g = h @ p[pre + "mlp.gate_proj.weight"].T
        u = h @ p[pre + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    logits = x @ head.T
    return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-100)


def rms_norm_autocast(x, w, eps):
    """Hugging Face LlamaRMSNorm: the statistics in f32, weight times the
    normalized input cast back to the input's dtype."""
    dt = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(dt)


def llama_loss_autocast(p, cfg, tokens, targets):
    """The loss of the f32 parameters p under torch.autocast(bf16) on the
    CPU, with Hugging Face's dtype handling (the RoPE tables in f32 with
    autocast off, the causal mask in the embeddings' f32, eager attention's
    softmax in f32 cast back to the query's dtype, logits upcast for the loss)."""
    F = torch.nn.functional
    C, NH, NKV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HD, L, eps = C // NH, cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    B, T = tokens.shape
    with torch.autocast("cpu", enabled=False):
        ang = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq_of(cfg, HD).to(torch.float32)[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf"), dtype=torch.float32).triu(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = p["model.embed_tokens.weight"][tokens]
        for l in range(L):
            pre = f"model.layers.{l}."
            h = rms_norm_autocast(x, p[pre + "input_layernorm.weight"], eps)

            def proj(name, heads):
                y = F.linear(h, p[pre + f"self_attn.{name}.weight"], p.get(pre + f"self_attn.{name}.bias"))
                return y.view(B, T, heads, HD).transpose(1, 2)

            q, k, v = proj("q_proj", NH), proj("k_proj", NKV), proj("v_proj", NKV)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(NH // NKV, dim=1)
            v = v.repeat_interleave(NH // NKV, dim=1)
            att = torch.matmul(q, k.transpose(2, 3)) * HD**-0.5 + mask
            att = torch.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(o, p[pre + "self_attn.o_proj.weight"])
            h = rms_norm_autocast(x, p[pre + "post_attention_layernorm.weight"], eps)
            gate = F.linear(h, p[pre + "mlp.gate_proj.weight"])
            up = F.linear(h, p[pre + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(gate) * up, p[pre + "mlp.down_proj.weight"])
        x = rms_norm_autocast(x, p["model.norm.weight"], eps)
        head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
        logits = F.linear(x, head)
    return F.cross_entropy(logits.float().reshape(B * T, -1), targets.reshape(-1))


U = 2.0**-8  # bf16's unit in the last place, relative


def check_autocast(cfg, p0, pa, shs_loss, tok, tgt):
    """shardsim --autocast bf16 (loss shs_loss; weights after one SGD step
    of lr SGD_LR from p0 in pa) against torch.autocast and the float64
    model. True when within the tolerances of the docstring."""
    exact = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    l64 = llama_loss(exact, cfg, tok, tgt)
    l64.backward()
    p32 = {k: v.to(torch.float32).clone().requires_grad_(True) for k, v in p0.items()}
    lbf = llama_loss_autocast(p32, cfg, tok, tgt)
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
    print(f"  gradient of all weights: shardsim vs torch.autocast {d:.2e} (tolerance {2 * U:.2e}); against "
          f"float64: torch.autocast {e_torch:.2e}, shardsim {e_shs:.2e} (ratio {e_shs / e_torch:.2f}, "
          f"within 1/4..4)")
    return rel_loss <= U / 16 and d <= 2 * U and 0.25 <= e_shs / e_torch <= 4


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
