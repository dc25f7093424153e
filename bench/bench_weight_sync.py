"""Planning a train -> serve weight sync at cluster size (docs/weight-sync.md), no process group:
a 70B-like model (80 layers; hidden 8,192, 64 query heads and 8 KV heads of 128, FFN 28,672, bf16)
trained with FSDP x TP 8 on N ranks, into 8 engines of TP 8 on the next 64 ranks (fused qkv and
gate_up, row-parallel o and down, replicated norms). Prints the planning time (median of
--repeats), the pieces, and the figures the plan promises.

    python bench/bench_weight_sync.py [--trainer 256] [--layers 80] [--repeats 3] [--fp8]
"""
import argparse
import statistics
import time

import torch

import dtensor
import dtensor.torch.weight_sync as ws


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", type=int, default=256, help="trainer ranks (a multiple of 8: FSDP x TP 8)")
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fp8", action="store_true", help="matrices to float8_e4m3fn")
    a = ap.parse_args()
    if a.trainer < 8 or a.trainer % 8 or a.layers < 1 or a.repeats < 1:
        ap.error("--trainer a positive multiple of 8, --layers and --repeats positive")
    H, HEADS, KV, D, F, TP, ENGINES = 8192, 64, 8, 128, 28672, 8, 8
    mesh = dtensor.Mesh(f"{a.trainer // TP}x{TP}")
    ranks = list(range(a.trainer))
    layouts = {}

    def lay(shape, pl):
        key = (shape, pl)
        if key not in layouts:
            layouts[key] = dtensor.Layout(mesh, list(shape), pl, "bf16")
        return layouts[key]

    sources = {}
    for layer in range(a.layers):
        p = f"layers.{layer}."
        for name, shape, pl in (("wq", (HEADS * D, H), "S(0)S(0)"), ("wk", (KV * D, H), "S(0)S(0)"),
                                ("wv", (KV * D, H), "S(0)S(0)"), ("wo", (H, HEADS * D), "S(0)S(1)"),
                                ("w_gate", (F, H), "S(0)S(0)"), ("w_up", (F, H), "S(0)S(0)"),
                                ("w_down", (H, F), "S(0)S(1)"), ("attn_norm", (H,), "S(0)R"), ("ffn_norm", (H,), "S(0)R")):
            sources[p + name] = (lay(shape, pl), ranks, shape, torch.bfloat16)
    mat = torch.float8_e4m3fn if a.fp8 else torch.bfloat16
    spec = {}
    q, kv, f, c = HEADS * D // TP, KV * D // TP, F // TP, HEADS * D // TP
    for e in range(ENGINES):
        for j in range(TP):
            bufs = []
            for layer in range(a.layers):
                p = f"layers.{layer}."
                bufs += [ws.Buffer(p + "qkv", (q + 2 * kv, H), mat, (
                             ws.Part(p + "wq", ((j * q, (j + 1) * q), (0, H))),
                             ws.Part(p + "wk", ((j * kv, (j + 1) * kv), (0, H)), offset=q),
                             ws.Part(p + "wv", ((j * kv, (j + 1) * kv), (0, H)), offset=q + kv))),
                         ws.Buffer(p + "gate_up", (2 * f, H), mat, (
                             ws.Part(p + "w_gate", ((j * f, (j + 1) * f), (0, H))),
                             ws.Part(p + "w_up", ((j * f, (j + 1) * f), (0, H)), offset=f))),
                         ws.Buffer(p + "o", (H, c), mat, (ws.Part(p + "wo", ((0, H), (j * c, (j + 1) * c)), dim=1),)),
                         ws.Buffer(p + "down", (H, f), mat, (ws.Part(p + "w_down", ((0, H), (j * f, (j + 1) * f)), dim=1),)),
                         ws.Buffer(p + "attn_norm", (H,), torch.bfloat16, (ws.Part(p + "attn_norm", ((0, H),)),)),
                         ws.Buffer(p + "ffn_norm", (H,), torch.bfloat16, (ws.Part(p + "ffn_norm", ((0, H),)),))]
            spec[a.trainer + e * TP + j] = bufs
    times, plan = [], None
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        plan = ws.plan_layouts(sources, spec, a.trainer + ENGINES * TP)
        times.append(time.perf_counter() - t0)
    pieces = sum(len(plan.pieces[e[3]]) for e in plan.entries)
    print(f"weight sync plan: {a.layers} layers, {a.trainer} trainer ranks ({a.trainer // TP}x{TP}) -> {ENGINES} engines x "
          f"TP {TP}, {'fp8' if a.fp8 else 'bf16'}: median {statistics.median(times):.3f} s of {a.repeats} "
          f"(min {min(times):.3f}); {pieces} pieces")
    print(f"  {plan.explain()}; busiest sender / bound {plan.busiest_sender_bytes / plan.sender_bound_bytes:.4f}")


if __name__ == "__main__":
    main()
