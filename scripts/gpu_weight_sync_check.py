"""The GPU check's weight-sync smoke (run.sh of the GPU bundle): dtensor.torch.weight_sync with the
trainer and the engine colocated on one GPU (world 1 over NCCL: every piece a local copy into the
engine's buffers on the device), bf16, fp8 per tensor and fp8 per 128 x 128 block of the global
fused tensor, each engine tensor checked bit for bit against the same quantization on the host.
Also runs on CPU/gloo (`--device cpu`), which is how it is tested without a GPU.

    torchrun --nproc-per-node 1 scripts/gpu_weight_sync_check.py [--device cuda]

Prints one `RESULT ...` line when every check passed; exits non-zero naming the first failure.
"""
import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

import dtensor.torch.weight_sync as ws


def quantize_blocks(g: torch.Tensor, block: int) -> torch.Tensor:
    nb = [-(-z // block) for z in g.shape]
    pad = torch.zeros([n * block for n in nb])
    pad[:g.shape[0], :g.shape[1]] = g.abs()
    amax = pad.view(nb[0], block, nb[1], block).amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
    s = scale.repeat_interleave(block, 0).repeat_interleave(block, 1)[:g.shape[0], :g.shape[1]]
    return (g / s).clamp(-448, 448).to(torch.float8_e4m3fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    if a.device == "cuda":
        torch.cuda.set_device(0)
    device = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")
    mesh = init_device_mesh(a.device, (1, 1))
    gen = torch.Generator().manual_seed(5)
    H, Q, KV = 256, 384, 128  # a fused qkv of 640 x 256: blocks of 128 split q, k and v alike
    full = {"wq": torch.randn(Q, H, generator=gen), "wk": torch.randn(KV, H, generator=gen),
            "wv": torch.randn(KV, H, generator=gen)}
    full = {n: t.to(torch.bfloat16) for n, t in full.items()}
    state = {n: distribute_tensor(t.to(device), mesh, (Shard(0), Shard(0))) for n, t in full.items()}
    glob = torch.cat([full["wq"], full["wk"], full["wv"]]).float()
    results = []
    for label, dtype, block in (("bf16", torch.bfloat16, None), ("fp8", torch.float8_e4m3fn, None),
                                ("fp8 blocks", torch.float8_e4m3fn, 128)):
        parts = (ws.Part("wq", ((0, Q), (0, H)), at=(0, 0) if block else None),
                 ws.Part("wk", ((0, KV), (0, H)), offset=Q, at=(Q, 0) if block else None),
                 ws.Part("wv", ((0, KV), (0, H)), offset=Q + KV, at=(Q + KV, 0) if block else None))
        spec = {0: [ws.Buffer("qkv", (Q + 2 * KV, H), dtype, parts, block=block)]}
        plan = ws.plan_sync(state, spec)
        buf = torch.zeros(Q + 2 * KV, H, dtype=dtype, device=device)
        ws.sync(plan, state, {"qkv": buf})
        if dtype == torch.bfloat16:
            want = glob.to(torch.bfloat16)
        elif block is None:
            amax = glob.abs().max()
            want = (glob / (amax / 448)).clamp(-448, 448).to(torch.float8_e4m3fn)
        else:
            want = quantize_blocks(glob, block)
        if not torch.equal(buf.cpu().view(torch.uint8), want.view(torch.uint8)):
            raise SystemExit(f"gpu_weight_sync_check: FAILED {label}: the engine's qkv differs")
        if plan.wire_bytes != 0 or plan.local_bytes != buf.numel() * buf.element_size():
            raise SystemExit(f"gpu_weight_sync_check: FAILED {label}: {plan.explain()}")
        results.append(label)
    print(f"RESULT weight sync on {a.device} (world 1, colocated): {', '.join(results)} exact")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
