"""Per-call time of dtensor's redistribution from PyTorch against torch's own, on CPU processes
with gloo: medians of one run, ratios from the same run, the slowest rank's median.

    torchrun --nproc-per-node 4 bench/python_redistribute.py [--iters 500] [--big 2048]
    torchrun --nproc-per-node 1 bench/python_redistribute.py --device cuda [--iters 1000]

With `--device cuda` (one GPU: NCCL refuses two ranks on one device) only table 1 runs, on CUDA
tensors over NCCL, twice: host time per call (the GPU idle when each call starts; the call's
kernels queued, not awaited) and end-to-end time per call (synchronised after the call, inside
the timed region). Where torch's redistribute_local_tensor differs from the tested version's,
enable() refuses and the `enabled` column says so.

Three tables (cached plans; every case runs once before timing):

1. Host overhead, where nothing moves: world 1 (rank 0 alone on one-rank meshes `1` and `1x1`,
   the other ranks waiting), 64x64 f32, the three timed interleaved.
   `dt` is dtensor.torch.redistribute, `torch` is torch's x.redistribute, `enabled` is
   x.redistribute under dtensor.torch.enabled(). Targets: dt/torch <= 0.5, enabled/torch <= 1.0.
2. Real traffic, world 4 on a 2x2 mesh, 64x64 f32, dt, torch and enabled timed interleaved (one
   call of each per iteration, barriers between). Target: dt/torch and enabled/torch <= 1.05.
   `checked` is dt with set_plan_check("every_call") (the plan hashes exchanged on every call),
   interleaved with the others; it has no target (docs/python.md says what it costs and why).
3. Bandwidth, the same cases at --big x --big f32: dt against the raw torch.distributed
   collective(s) its plan runs, the raw call allocating its output as a redistribute does.
   Target: dt/raw <= 1.05.
"""
import argparse
import contextlib
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard

import dtensor.torch as dt


def slowest_median(times, group=None):
    out = torch.tensor([statistics.median(times)], dtype=torch.float64)
    if group is not False:
        dist.all_reduce(out, op=dist.ReduceOp.MAX)
    return float(out)


def timed(fns, iters, barrier=True, collective=True, cuda=None):
    """Medians (us; the slowest rank's when `collective`) of each function in `fns`, called in
    turn every iteration. An entry may be (fn, context): the context (e.g. dtensor.torch.enabled)
    is entered and left around the call, outside the timed region. `cuda`: "host" synchronises
    the device before each call, outside the timed region; "end-to-end" also after it, inside."""
    fns = [f if isinstance(f, tuple) else (f, None) for f in fns]
    for fn, ctx in fns:  # warm-up: plans, executors, process groups
        with ctx() if ctx else contextlib.nullcontext():
            fn()
    times = [[] for _ in fns]
    for _ in range(iters):
        for k, (fn, ctx) in enumerate(fns):
            with ctx() if ctx else contextlib.nullcontext():
                if barrier:
                    dist.barrier()
                if cuda:
                    torch.cuda.synchronize()
                t = time.perf_counter()
                fn()
                if cuda == "end-to-end":
                    torch.cuda.synchronize()
                times[k].append((time.perf_counter() - t) * 1e6)
    return [slowest_median(t, None if collective else False) for t in times]


def ratio(a, b):
    return f"{a / b:8.2f}" if a is not None and b else f"{'-':>8}"


def us(a):
    return f"{a:8.1f}" if a is not None else f"{'-':>8}"


CASES = [("S(0)S(1) -> S(1)S(0)", [Shard(0), Shard(1)], [Shard(1), Shard(0)]),
         ("S(0)R -> RR", [Shard(0), Replicate()], [Replicate(), Replicate()]),
         ("P(sum)R -> RR", [Partial(), Replicate()], [Replicate(), Replicate()])]


def switch_refusal():
    """None where dtensor.torch.enable() accepts this torch, else its RuntimeError's message."""
    try:
        with dt.enabled():
            return None
    except RuntimeError as e:
        return str(e)


def host_overhead(rank, iters, device="cpu", cuda=None):
    """World 1: rank 0 alone on its own one-rank meshes (the other ranks wait), nothing moves: the
    whole time is host overhead. dt, torch and torch under enabled() interleaved (enabled()
    left out, its column None, where the switch refuses this torch)."""
    rows = []
    # every rank makes its own one-rank meshes (mesh creation is collective); rank 0 times
    mesh1 = DeviceMesh(device, torch.tensor([rank]))
    mesh11 = DeviceMesh(device, torch.tensor([[rank]]))
    switch = switch_refusal() is None
    if rank == 0:
        g = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)).to(device)
        cases = [(f"{name} (1x1)", mesh11, src, dst) for name, src, dst in CASES]
        cases += [("S(0) -> R (1)", mesh1, [Shard(0)], [Replicate()]),
                  ("P(sum) -> R (1)", mesh1, [Partial()], [Replicate()])]
        for name, mesh, src, dst in cases:
            x = dt.distribute(g, mesh, src)
            fns = [lambda: dt.redistribute(x, dst), lambda: x.redistribute(mesh, dst)]
            if switch:
                fns.append((lambda: x.redistribute(mesh, dst), dt.enabled))
            got = timed(fns, iters, barrier=False, collective=False, cuda=cuda)
            rows.append((name, got[0], got[1], got[2] if switch else None))
    dist.barrier()
    return rows


def say_host_overhead(say, what, rows):
    """Table 1 (host_overhead's rows) under the heading `what`."""
    say(f"\n1. {what}, world 1 (rank 0 on one-rank meshes; nothing moves)")
    say(f"{'case':<28} {'dt':>8} {'torch':>8} {'enabled':>8} {'dt/torch':>8} {'en/torch':>8}")
    for name, a, b, c in rows:
        say(f"{name:<28} {us(a)} {us(b)} {us(c)} {ratio(a, b)} {ratio(c, b)}")


def on_2x2(n, row):
    """`row(name, x, mesh, dst)` for every case, x cut from one n x n tensor on the 2x2 mesh."""
    mesh = init_device_mesh("cpu", (2, 2))
    g = torch.randn(n, n, generator=torch.Generator().manual_seed(0))
    return [row(f"{name} (2x2)", dt.distribute(g, mesh, src), mesh, dst) for name, src, dst in CASES]


@contextlib.contextmanager
def every_call():
    """dtensor.torch's plan-hash exchange on every call (set_plan_check), for one call."""
    dt.set_plan_check("every_call")
    try:
        yield
    finally:
        dt.set_plan_check("first_use")


def real_traffic(iters, n):
    def row(name, x, mesh, dst):
        return (name, *timed([lambda: dt.redistribute(x, dst), lambda: x.redistribute(mesh, dst),
                              (lambda: x.redistribute(mesh, dst), dt.enabled),
                              (lambda: dt.redistribute(x, dst), every_call)], iters))
    return on_2x2(n, row)


def raw_baseline(name, x, mesh):
    """The torch.distributed call(s) dtensor's plan runs for the case, allocating the output."""
    local = x.to_local()
    if name.startswith("S(0)R "):  # all_gather over mesh dim 0
        group = mesh.get_group(0)
        n = dist.get_world_size(group)

        def run():
            out = torch.empty((local.shape[0] * n, *local.shape[1:]), dtype=local.dtype)
            dist.all_gather_into_tensor(out, local, group=group)
        return run
    if name.startswith("P(sum)R "):  # all_reduce over mesh dim 0
        group = mesh.get_group(0)

        def run():
            out = local.clone()
            dist.all_reduce(out, group=group)
        return run
    # S(0)S(1) -> S(1)S(0): the block at (i, j) goes to (j, i) (the plan's one `direct` step)
    i, j = mesh.get_coordinate()
    peer = int(mesh.mesh[j, i])

    def run():
        out = torch.empty_like(local)
        if peer == dist.get_rank():
            out.copy_(local)
            return
        for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, local, peer), dist.P2POp(dist.irecv, out, peer)]):
            req.wait()
    return run


def bandwidth(iters, n):
    def row(name, x, mesh, dst):
        return (name, *timed([lambda: dt.redistribute(x, dst), raw_baseline(name, x, mesh)], iters),
                dt.plan_for(x, dst).trace)
    return on_2x2(n, row)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--big", type=int, default=2048)
    ap.add_argument("--big-iters", type=int, default=50)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: table 1 only, on CUDA tensors over NCCL (any world; rank 0 times)")
    args = ap.parse_args()
    if args.device == "cuda":
        return main_cuda(args)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 4:
        raise SystemExit("run with torchrun --nproc-per-node 4")
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"torch {torch.__version__}, gloo, {world} ranks, {args.iters} iterations (64x64 f32) and "
        f"{args.big_iters} ({args.big}x{args.big} f32); medians in us, the slowest rank's")
    say_host_overhead(say, "host overhead", host_overhead(rank, args.iters))
    say("\n2. real traffic, 2x2 mesh, 64x64 f32 (interleaved)")
    say(f"{'case':<28} {'dt':>8} {'torch':>8} {'enabled':>8} {'dt/torch':>8} {'en/torch':>8} {'checked':>8} "
        f"{'chk/torch':>9}")
    for name, a, b, c, d in real_traffic(args.iters, 64):
        say(f"{name:<28} {a:8.1f} {b:8.1f} {c:8.1f} {ratio(a, b)} {ratio(c, b)} {d:8.1f} {ratio(d, b):>9}")
    say(f"\n3. bandwidth, 2x2 mesh, {args.big}x{args.big} f32: dt against the raw collective(s) of its plan")
    say(f"{'case':<28} {'dt':>8} {'raw':>8} {'dt/raw':>8}  plan")
    for name, a, b, trace in bandwidth(args.big_iters, args.big):
        say(f"{name:<28} {a:8.1f} {b:8.1f} {ratio(a, b)}  {trace}")
    dist.destroy_process_group()


def main_cuda(args):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
        f"{torch.cuda.get_device_name()}, {args.iters} iterations, 64x64 f32; medians in us")
    refusal = switch_refusal()
    if refusal:
        say(f"enable() refused on this torch (the `enabled` column is empty): {refusal}")
    for mode, what in [("host", "host time per call (device idle at the call; its kernels queued, not awaited)"),
                       ("end-to-end", "end-to-end per call (synchronised after the call, inside the timing)")]:
        say_host_overhead(say, what, host_overhead(rank, args.iters, "cuda", mode))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
