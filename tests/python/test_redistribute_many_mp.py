"""dtensor.torch.redistribute_many: a batch of DTensors redistributed together on 4 CPU processes
(gloo), each result equal to torch's own redistribute of that tensor; small tensors' collectives
coalesced (fewer collectives than the tensors' plans one by one); gradients through it equal torch's."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import distribute_tensor, DTensor, Partial, Replicate, Shard
        import dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=60))
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        shapes = [(8, 6), (5, 3), (7,), (9, 4), (4, 4), (3, 5), (6,), (2, 9)]
        xs, targets = [], []
        for i, shape in enumerate(shapes):
            g = torch.arange(float(torch.Size(shape).numel())).reshape(shape) + i
            src = [Shard(0), Shard(len(shape) - 1)] if i % 2 == 0 else [Shard(0), Replicate()]
            xs.append(distribute_tensor(g, mesh, src))
            targets.append([Replicate(), Replicate()] if i % 3 else [Replicate(), Shard(0)])
        batch = dt.plan_many(xs, targets)
        assert batch.collectives < batch.separate_collectives, (batch.collectives, batch.separate_collectives)
        ys = dt.redistribute_many(xs, targets)
        for i, (x, y, t) in enumerate(zip(xs, ys, targets)):
            want = x.redistribute(mesh, t)
            assert y.placements == want.placements, (i, y.placements, want.placements)
            assert torch.equal(y.to_local(), want.to_local()), (rank, i, y.to_local(), want.to_local())
        # a second call finds its batch plan and its batch executor cached: no new executor, and
        # the same results
        runner = dt._runner(mesh, torch.device("cpu"))
        made = len(runner.executors)
        again = dt.redistribute_many(xs, targets)
        assert len(runner.executors) == made, (made, len(runner.executors))
        assert dt.plan_many(xs, targets) is dt.plan_many(xs, targets)
        for y, z in zip(ys, again):
            assert torch.equal(y.to_local(), z.to_local())
        # gradients: torch's rule per tensor (a Partial source dim comes back Replicate), the
        # backward moving them as one batch; compared with torch's own redistribute's gradients
        gsrc = [[Shard(0), Shard(1)], [Partial(), Shard(0)], [Shard(0), Replicate()], [Replicate(), Shard(0)]]
        gdst = [[Replicate(), Replicate()], [Replicate(), Replicate()], [Replicate(), Shard(1)], [Shard(1), Replicate()]]
        gx, tx, gouts = [], [], []
        for i, (s, t) in enumerate(zip(gsrc, gdst)):
            g = torch.arange(float(6 * 5)).reshape(6, 5) * (i + 1)
            if any(p.is_partial() for p in s):  # each rank's own addend (rows by its tp coordinate)
                a = DTensor.from_local(torch.arange(15.0).reshape(3, 5) + rank, mesh, s, run_check=False)
            else:
                a = distribute_tensor(g, mesh, s)
            gx.append(a.clone().requires_grad_(i != 2))  # xs[2] without grad: its result has none
            tx.append(a.clone().requires_grad_(i != 2))
            gouts.append(distribute_tensor(torch.arange(30.0).reshape(6, 5) - i, mesh, t))
        gy = dt.redistribute_many(gx, gdst)
        assert gy[2].grad_fn is None and not gy[2].requires_grad
        want_y = [x.redistribute(mesh, t) for x, t in zip(tx, gdst)]
        live = [i for i in range(4) if i != 2]
        got = torch.autograd.grad([gy[i] for i in live], [gx[i] for i in live], [gouts[i] for i in live])
        want = torch.autograd.grad([want_y[i] for i in live], [tx[i] for i in live], [gouts[i] for i in live])
        for i, a, b in zip(live, got, want):
            assert a.placements == b.placements, (i, a.placements, b.placements)
            assert torch.equal(a.to_local(), b.to_local()), (rank, i, a.to_local(), b.to_local())
            assert torch.equal(a.full_tensor(), b.full_tensor()), (rank, i)
        try:
            dt.redistribute_many(xs, targets[:-1])
            raise AssertionError("a length mismatch was accepted")
        except ValueError as e:
            assert "8 tensors but 7 placements" in str(e), e
        if rank == 0:
            print(f"MANY ok {batch.collectives} collectives against {batch.separate_collectives}; gradients of 3 tensors "
                  f"equal torch's", flush=True)
        dist.barrier()
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, nprocs=4)
""")


def test_redistribute_many_matches_torch(tmp_path):
    script = tmp_path / "many.py"
    script.write_text(SCRIPT)
    r = run_script(script, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MANY ok" in r.stdout, r.stdout + r.stderr
