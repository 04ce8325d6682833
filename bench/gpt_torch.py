#!/usr/bin/env python3
"""bench/gpt_torch.py: the bench-only PyTorch side of bench_bf16_torch.sh.

GPT-small as pipetrain's bench_bf16 trains it (4 layers, 6 heads, 384
channels, context 256, vocabulary 256, tied head, GELU tanh, AdamW), one
process with torch.set_num_threads(2), 16 samples a step (4096 tokens), the
forward under torch.autocast("cpu", dtype=torch.bfloat16) (or in float32
with --fp32; --compile runs the model through torch.compile, whose first
step, the warm-up, compiles it). Prints "torch <mode> tokens/s X" for the
median step after a warm-up. Not a test: torch is installed only into the
bench's own venv."""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

L, H, C, T, V, B = 4, 6, 384, 256, 256, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(x.shape[0], T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(x.shape[0], T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for p in (self.wte.weight, self.wpe.weight):
            nn.init.normal_(p, std=0.02)  # GPT-2's

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1))


def main():
    fp32 = "--fp32" in sys.argv
    compiled = "--compile" in sys.argv
    steps = int(next((a for a in sys.argv[1:] if a.isdigit()), "4"))
    torch.set_num_threads(2)
    torch.manual_seed(1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    run = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, V, (B, T + 1), generator=g)
    times = []
    for s in range(steps + 1):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not fp32):
            loss = run(tokens[:, :-1], tokens[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    mode = ("fp32" if fp32 else "bf16-autocast") + (" compiled" if compiled else " eager")
    print(f"torch {torch.__version__} {mode} tokens/s {B * T / step:.0f} (step {step:.3f} s, loss {loss.item():.4f})")


if __name__ == "__main__":
    main()
