"""Per-call time of dtensor.torch.redistribute against torch's own DTensor.redistribute and the
raw collective, on CPU processes with gloo (medians of one run, ratios from the same run).

    torchrun --nproc-per-node 4 bench/python_redistribute.py [--iters 50] [--numel 1048576]

Rank 0 prints one row per case: dtensor, torch and (where one collective is the whole job) the
raw torch.distributed call, in microseconds, and dtensor's ratio to each. On gloo the
collectives dominate; what is measured beyond them is the Python binding's per-step overhead
(each step's collective is issued from Python) and the plan-cache lookup.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
from torch.distributed.tensor.placement_types import _StridedShard

import dtensor.torch as dt


def median_us(fn, iters):
    fn()  # warm-up: plans, executors, process groups
    dist.barrier()
    times = []
    for _ in range(iters):
        dist.barrier()
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e6)
    # the slowest rank's median
    out = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(out, op=dist.ReduceOp.MAX)
    return float(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--numel", type=int, default=1 << 20)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    rank = dist.get_rank()
    mesh1 = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    rows = max(world * 4, args.numel // 1024)
    g = torch.arange(rows * 1024, dtype=torch.float32).reshape(rows, 1024)
    cases = []
    # 1-d all_gather: S(0) -> R, with the raw all_gather_into_tensor beside it
    x = dt.distribute(g, mesh1, [Shard(0)])
    out = torch.empty_like(g)
    cases.append(("S(0) -> R (mesh 4)", lambda: dt.redistribute(x, [Replicate()]),
                  lambda: x.redistribute(mesh1, [Replicate()]),
                  lambda: dist.all_gather_into_tensor(out, x.to_local())))
    # 2-d transpose of the sharding
    y = dt.distribute(g, mesh2, [Shard(0), Shard(1)])
    cases.append(("S(0)S(1) -> S(1)S(0) (2x2)", lambda: dt.redistribute(y, [Shard(1), Shard(0)]),
                  lambda: y.redistribute(mesh2, [Shard(1), Shard(0)]), None))
    # FSDP+TP unshard with a shard order (torch's public redistribute takes no target order)
    order = (ShardOrderEntry(0, (1, 0)),)
    z = dt.distribute(g, mesh2, [Shard(0), Shard(0)], shard_order=order)
    cases.append(("S(0)[1]S(0)[0] -> RS(0) (2x2)", lambda: dt.redistribute(z, [Replicate(), Shard(0)]), None, None))
    # strided source (torch's own result is wrong on some of these; timed anyway where it runs)
    s = dt.distribute(g, mesh2, [_StridedShard(0, split_factor=2), Shard(0)])
    cases.append(("_S(0, 2)S(0) -> RS(0) (2x2)", lambda: dt.redistribute(s, [Replicate(), Shard(0)]),
                  lambda: s.redistribute(mesh2, [Replicate(), Shard(0)]), None))
    if rank == 0:
        print(f"{world} ranks, gloo, {rows}x1024 f32 ({rows * 4} KiB), {args.iters} iterations; medians in us")
        print(f"{'case':<32} {'dtensor':>10} {'torch':>10} {'raw':>10} {'dt/torch':>9} {'dt/raw':>8}")
    for name, ours, theirs, raw in cases:
        a = median_us(ours, args.iters)
        b = median_us(theirs, args.iters) if theirs else None
        c = median_us(raw, args.iters) if raw else None
        if rank == 0:
            fmt = lambda v: f"{v:10.1f}" if v is not None else f"{'-':>10}"  # noqa: E731
            ratio = lambda u, v: f"{u / v:9.2f}" if v else f"{'-':>9}"  # noqa: E731
            print(f"{name:<32} {fmt(a)} {fmt(b)} {fmt(c)} {ratio(a, b)} {ratio(a, c):>8}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
