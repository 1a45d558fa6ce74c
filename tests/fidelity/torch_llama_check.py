#!/usr/bin/python3
"""torch_llama_check.py - shardsim's Llama against PyTorch, loss and one AdamW step.

What it is: an optional fidelity check (`make torch-check`). It writes a
tiny Llama config.json (grouped-query attention, untied head) and a corpus of
exactly T+1 bytes (so every sequence the sampler draws is that text), runs
`shardsim train --hf-config` for 0 and 1 steps with --export-safetensors,
and recomputes the same model in PyTorch from the exported initial weights:
the loss of the first batch and one torch.optim.AdamW step. The PyTorch
model below is written here from the Hugging Face LlamaForCausalLM
definition (RMSNorm in f32, rotate_half RoPE, repeat_kv, SwiGLU); it runs in
float64, so it is an oracle for shardsim's f32 arithmetic.
What it is not: part of `make test` (it needs Debian's python3-torch, which
imports only in the system /usr/bin/python3).

Pass: loss within 1e-5 relative; every tensor after one AdamW step within
1e-5 relative (Frobenius norm of the difference over the norm of the tensor).
Prints the measured figures.
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


def llama_loss(p, cfg, tokens, targets):
    C = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    NKV = cfg["num_key_value_heads"]
    HD = C // NH
    L = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    B, T = tokens.shape
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = p["model.embed_tokens.weight"][tokens]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = (h @ p[pre + "self_attn.q_proj.weight"].T).view(B, T, NH, HD).transpose(1, 2)
        k = (h @ p[pre + "self_attn.k_proj.weight"].T).view(B, T, NKV, HD).transpose(1, 2)
        v = (h @ p[pre + "self_attn.v_proj.weight"].T).view(B, T, NKV, HD).transpose(1, 2)
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


def run(args):
    r = subprocess.run([BIN] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"shardsim {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    T, B = 16, 2
    cfg = {
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
    }
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
                  "--context", str(T), "--strategy", "ddp", "--lr", str(lr), "--weight-decay", str(wd)]
        run(common + ["--steps", "0", "--export-safetensors", os.path.join(d, "init.safetensors")])
        out = run(common + ["--steps", "1", "--export-safetensors", os.path.join(d, "step1.safetensors")])
        m = re.search(r"step\s+1/1 \| loss ([0-9.]+)", out)
        if not m:
            sys.exit("no step-1 loss in shardsim's output:\n" + out)
        shs_loss = float(m.group(1))
        p0 = read_safetensors(os.path.join(d, "init.safetensors"))
        p1 = read_safetensors(os.path.join(d, "step1.safetensors"))

    tok = torch.tensor(list(text[:T]), dtype=torch.long).repeat(B, 1)
    tgt = torch.tensor(list(text[1:]), dtype=torch.long).repeat(B, 1)
    params = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    loss = llama_loss(params, cfg, tok, tgt)
    rel_loss = abs(shs_loss - loss.item()) / abs(loss.item())
    print(f"loss: shardsim {shs_loss:.6f} (printed to 6 decimals), torch float64 {loss.item():.9f}, "
          f"relative difference {rel_loss:.2e}")
    opt = torch.optim.AdamW(list(params.values()), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
    loss.backward()
    opt.step()
    worst, worst_name, worst_upd = 0.0, "", 0.0
    for name, t in params.items():
        ref = t.detach()
        rel = (p1[name] - ref).norm().item() / ref.norm().item()
        upd = ((p1[name] - p0[name]) - (ref - p0[name])).norm().item() / (ref - p0[name]).norm().item()
        worst_upd = max(worst_upd, upd)
        if rel > worst:
            worst, worst_name = rel, name
    print(f"one AdamW step: worst tensor relative difference {worst:.2e} ({worst_name}), over {len(params)} tensors;"
          f" the update itself (new - initial) differs by at most {worst_upd:.2e} relative")
    ok = rel_loss <= TOL and worst <= TOL
    print("torch-check:", "PASS" if ok else "FAIL", f"(tolerance {TOL:g} relative)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
