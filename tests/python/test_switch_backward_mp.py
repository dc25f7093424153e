"""The switched backward where ranks see different gradient strides (gloo, 4 processes): with
dtensor's switch on, `y = x.redistribute(mesh, [_S(1, 3), _S(0, 2)])` of a 3x2 `x` laid out
`[_S(1, 2), S(1)]` on a 2x2 mesh, then `(y.to_local() * w).sum().backward()`. torch's `to_local`
backward works the gradient's global stride out from each rank's local stride (an empty shard
gives another one), so autograd's `.grad` accumulation redistributed (a collective) on some ranks
only and the backward hung on torch 2.11; dtensor gives the gradient its forward spec's stride,
which every rank shares (dtensor/torch/_order_mends.py). x.grad must be W laid out as x, on
every rank, within the gloo timeout."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_rank_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank, shape):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.tensor.placement_types import _StridedShard
        import dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=30))
        mesh = init_device_mesh("cpu", (2, 2))
        n = shape[0] * shape[1]
        W = (torch.arange(n, dtype=torch.float64) * 7 % 11 + 1).reshape(shape)
        G = torch.arange(float(n), dtype=torch.float64).reshape(shape)
        src = [_StridedShard(1, split_factor=2), Shard(1)]
        dst = [_StridedShard(1, split_factor=3), _StridedShard(0, split_factor=2)]
        x = distribute_tensor(G, mesh, src, src_data_rank=None).requires_grad_()
        with dt.enabled():
            y = x.redistribute(mesh, dst)
            assert torch.equal(y.to_local(), dt.distribute(G, mesh, dst).to_local()), (rank, "forward")
            (y.to_local() * dt.distribute(W, mesh, dst).to_local()).sum().backward()
        assert tuple(x.grad.placements) == tuple(src), (rank, x.grad.placements)
        assert torch.equal(x.grad.to_local(), dt.distribute(W, mesh, src).to_local()), (rank, x.grad.to_local().tolist())
        assert x.grad.stride() == x.stride(), (rank, x.grad.stride(), x.stride())
        dist.barrier()
        if rank == 0:
            print(f"SWITCHED BACKWARD ok {shape}", flush=True)
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, args=([int(s) for s in sys.argv[1].split("x")],), nprocs=4)
""")


@pytest.mark.parametrize("shape", ["3x2", "5x6"])
def test_switched_backward_agrees_across_ranks(tmp_path, shape):
    run_rank_script(tmp_path, SCRIPT, shape, ok=f"SWITCHED BACKWARD ok [{shape.replace('x', ', ')}]", timeout=180)
