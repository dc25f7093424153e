"""What dtensor's explicit-order mends (dtensor/torch/_order_mends.py) cost the ops they handle:
per-call time of `detach`, `clone`, `add_` and `copy_` on a DTensor, medians of one run, ratios from
the same run. One process, a fake process group of world 4 (rank 0 of a 2x2 mesh: nothing moves
between ranks, so the time is the host's), 64x64 f32 locals (128x128 global).

    python bench/order_mends.py [--iters 2000]

Rows: a DTensor without an explicit order (`S(0)S(1)`), timed with torch's own dispatch (`torch`)
and with the mend's handler installed (`mended`: the handler hands the call back to torch); and
one with an explicit order (`S(0)[1]S(0)[0]`), where torch's own dispatch moves or relabels the
data (wrong) and the mend runs the op on the local shard. No target: the figures say what a
DTensor without an explicit order pays once dtensor has made one with an explicit order
(docs/python.md).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist


def per_call_us(fn, iters):
    for _ in range(20):
        fn()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    a = ap.parse_args()
    if a.iters < 1:
        ap.error(f"--iters must be at least 1, got {a.iters}")
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from dtensor.torch import _order_mends
    dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
    mesh = init_device_mesh("cpu", (2, 2))
    meta = TensorMeta(torch.Size([128, 128]), (128, 1), torch.float32)
    plain = DTensorSpec(mesh, (Shard(0), Shard(1)), tensor_meta=meta)
    explicit = DTensorSpec(mesh, (Shard(0), Shard(0)), tensor_meta=TensorMeta(torch.Size([256, 64]), (64, 1), torch.float32),
                           shard_order=(ShardOrderEntry(0, (1, 0)),))
    _order_mends.install()
    print(f"torch {torch.__version__}; per call, µs (median of 5 runs of {a.iters})")
    print(f"{'op':8s} {'layout':18s} {'torch':>8s} {'mended':>8s} {'ratio':>6s}")
    for name, spec in (("S(0)S(1)", plain), ("S(0)[1]S(0)[0]", explicit)):
        x = DTensor(torch.ones(64, 64), spec, requires_grad=False)
        y = DTensor(torch.ones(64, 64), spec, requires_grad=False)
        ops = {"detach": lambda: x.detach(), "clone": lambda: x.clone(), "add_": lambda: x.add_(y),
               "copy_": lambda: x.copy_(y)}
        for op, fn in ops.items():
            mended = per_call_us(fn, a.iters)
            with _order_mends.without_op_mends():
                raw = per_call_us(fn, a.iters)
            print(f"{op:8s} {name:18s} {raw:8.2f} {mended:8.2f} {mended / raw:6.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
