"""The GPU check's Python part (run.sh of the GPU bundle): dtensor.torch on CUDA tensors over
NCCL, world 1 (one GPU: NCCL refuses two ranks on one device), against torch's own
redistribute and the global tensor. Also runs on CPU/gloo (`--device cpu`), which is how it is
tested without a GPU.

    torchrun --nproc-per-node 1 scripts/gpu_python_check.py [--device cuda]

Prints one `RESULT ...` line when every check passed; exits non-zero naming the first failure.
"""
import argparse
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard

import dtensor.torch as dt

CASES = [((1,), [Shard(0)], [Shard(1)]),
         ((1,), [Shard(0)], [Replicate()]),
         ((1,), [Partial()], [Replicate()]),
         ((1,), [Partial("avg")], [Shard(1)]),
         ((1, 1), [Shard(0), Shard(1)], [Shard(1), Shard(0)]),
         ((1, 1), [Shard(0), Replicate()], [Replicate(), Replicate()]),
         ((1, 1), [Partial(), Replicate()], [Replicate(), Replicate()]),
         ((1, 1), [Shard(0), _StridedShard(0, split_factor=1)], [Replicate(), Shard(1)])]
SHAPES = [(64, 64), (1000, 17), (1024, 4096), (0, 8)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32]


def check(cond, what):
    if not cond:
        raise SystemExit(f"gpu_python_check: FAILED {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = ap.parse_args()
    dev = args.device
    dist.init_process_group("nccl" if dev == "cuda" else "gloo")
    if dev == "cuda":
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}")
    try:
        with dt.enabled():
            switch = True
    except RuntimeError as e:
        switch = False
        print(f"switch refused (expected on a torch other than the tested one): {e}")
    meshes = {s: init_device_mesh(dev, s) for s in [(1,), (1, 1)]}
    ok = 0
    for mesh_shape, src, dst in CASES:
        mesh = meshes[mesh_shape]
        for shape in SHAPES:
            for dtype in DTYPES:
                if dtype == torch.int32 and any(p.is_partial() and p.reduce_op == "avg" for p in src):
                    continue  # Partial(avg) on integers is refused (checked below)
                g = torch.arange(shape[0] * shape[1], dtype=torch.float64).reshape(shape).to(dtype).to(dev)
                x = distribute_tensor(g, mesh, src)
                what = f"{mesh_shape} {src} -> {dst} {shape} {dtype}"
                y = dt.redistribute(x, dst)
                check(y.placements == tuple(dst), f"placements {what}: {y.placements}")
                check(y.to_local().device == g.device, f"device {what}: {y.to_local().device}")
                check(torch.equal(y.full_tensor(), x.full_tensor()), f"full tensor {what}")
                if not any(isinstance(p, _StridedShard) for p in src):
                    check(torch.equal(y.to_local(), x.redistribute(mesh, dst).to_local()), f"against torch {what}")
                if switch:
                    with dt.enabled():
                        z = x.redistribute(mesh, dst)
                    check(torch.equal(z.to_local(), y.to_local()), f"switched {what}")
                a = dt.redistribute(x, dst, async_op=True)
                check(torch.equal(a.to_local(), y.to_local()), f"async_op {what}")
                ok += 1
    # autograd: the gradient comes back in the source layout (Partial becoming Replicate)
    for mesh_shape, src, dst in CASES:
        mesh = meshes[mesh_shape]
        g = torch.randn(64, 48, generator=torch.Generator().manual_seed(1)).to(dev)
        x = distribute_tensor(g, mesh, src).detach().requires_grad_(True)
        y = dt.redistribute(x, dst)
        (y.to_local() * 3).sum().backward()
        xt = distribute_tensor(g, mesh, src).detach().requires_grad_(True)
        (xt.redistribute(mesh, dst).to_local() * 3).sum().backward()
        check(x.grad is not None and x.grad.placements == xt.grad.placements,
              f"grad placements {src} -> {dst}: {None if x.grad is None else x.grad.placements} vs {xt.grad.placements}")
        check(torch.equal(x.grad.to_local(), xt.grad.to_local()), f"grad values {src} -> {dst}")
        ok += 1
    # many tensors at once
    mesh = meshes[(1, 1)]
    xs = [distribute_tensor(torch.randn(n, 32).to(dev), mesh, [Shard(0), Replicate()]) for n in (64, 5, 130)]
    ys = dt.redistribute_many(xs, [[Replicate(), Shard(1)]] * len(xs))
    for i, (x, y) in enumerate(zip(xs, ys)):
        check(torch.equal(y.full_tensor(), x.full_tensor()) and y.placements == (Replicate(), Shard(1)), f"many [{i}]")
        ok += 1
    # refusals stay refusals on the device
    x = distribute_tensor(torch.ones(8, 8, dtype=torch.int32, device=dev), meshes[(1,)], [Replicate()])
    try:
        dt.redistribute(x, [Partial("avg")])
        check(False, "Partial(avg) on int32 accepted")
    except ValueError:
        ok += 1
    print(f"RESULT {ok} exact on {dev} (dt vs torch vs the global tensor; async_op; autograd; many; "
          f"switch {'on' if switch else 'refused by this torch'})")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
