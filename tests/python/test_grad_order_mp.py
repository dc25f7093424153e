"""Gradients through `to_local()` of a redistribution to an explicit shard order (gloo, 4
processes): `y = dt.redistribute(x, [S(1), S(1)], shard_order=S(1)[1]S(1)[0])`, then
`(y.to_local() * w).sum().backward()` must give x.grad == W (w: W laid out as y), on an even shape
(4x8, where the order was once silently dropped: a wrong x.grad) and an uneven one (1x2, where it
raised on some ranks only). Also through torch.autograd.grad with a DTensor gradient, a 1-d
Shard(0) of the same order family on a 4-rank mesh dim pair, and a Partial source."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_rank_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank, shape):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Partial, Replicate, Shard
        from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
        import dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=30))
        mesh = init_device_mesh("cpu", (2, 2))
        n = shape[0] * shape[1]
        W = (torch.arange(n, dtype=torch.float64) * 7 % 11 + 1).reshape(shape)
        G = torch.arange(float(n), dtype=torch.float64).reshape(shape)
        checked = 0
        for dim in (0, 1):
            order = (ShardOrderEntry(tensor_dim=dim, mesh_dims=(1, 0)),)
            dst = [Shard(dim), Shard(dim)]
            for src in ([Replicate(), Replicate()], [Shard(1 - dim), Replicate()], [Partial(), Replicate()]):
                x = dt.distribute(G, mesh, src).requires_grad_()
                y = dt.redistribute(x, dst, shard_order=order)
                assert torch.equal(y.to_local(), dt.distribute(G, mesh, dst, shard_order=order).to_local())
                w = dt.distribute(W, mesh, dst, shard_order=order).to_local()
                (y.to_local() * w).sum().backward()
                # x.grad is W in x's layout (a Partial source dim: Replicate, torch's rule)
                gsrc = [Replicate() if p.is_partial() else p for p in src]
                want = dt.distribute(W, mesh, gsrc).to_local()
                assert torch.equal(x.grad.to_local(), want), (rank, shape, dim, src, x.grad.to_local().tolist(), want.tolist())
                # torch.autograd.grad with the gradient as a DTensor in y's own spec
                x2 = dt.distribute(G, mesh, src).requires_grad_()
                y2 = dt.redistribute(x2, dst, shard_order=order)
                g2, = torch.autograd.grad(y2, x2, dt.distribute(W, mesh, dst, shard_order=order))
                assert torch.equal(g2.to_local(), want), (rank, shape, dim, src, "autograd.grad")
                checked += 2
        dist.barrier()
        if rank == 0:
            print(f"GRAD ORDER ok {shape}: {checked} gradients", flush=True)
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        shape = [int(s) for s in sys.argv[1].split("x")]
        mp.spawn(rank_main, args=(shape,), nprocs=4)
""")


@pytest.mark.parametrize("shape", ["4x8", "1x2", "5x3"])
def test_gradient_through_to_local_keeps_the_order(tmp_path, shape):
    run_rank_script(tmp_path, SCRIPT, shape, ok=f"GRAD ORDER ok [{shape.replace('x', ', ')}]", timeout=240)
