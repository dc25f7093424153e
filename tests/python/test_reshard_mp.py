"""dtensor.torch.reshard: a DTensor moved to another DeviceMesh (torch refuses it), on 4 CPU
processes over gloo: nested, disjoint and identical-but-reshaped rank sets, a Partial source, and
the ranks off the target getting None, and one mesh on both sides. Every target rank's part is compared with the global tensor."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank):
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor import DTensor, distribute_tensor, Partial, Replicate, Shard
        import dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=60))
        g = torch.arange(70.0).reshape(7, 10)
        everyone = DeviceMesh("cpu", torch.arange(4).reshape(2, 2), mesh_dim_names=("dp", "tp"))
        front = DeviceMesh("cpu", torch.tensor([0, 1]))
        back = DeviceMesh("cpu", torch.tensor([2, 3]))
        backwards = DeviceMesh("cpu", torch.tensor([3, 2, 1, 0]))
        def expect(y, mesh, dim):
            coord = mesh.get_coordinate()
            if coord is None:
                assert y is None, f"rank {rank}: expected None off the target mesh"
                return
            part = g.tensor_split(mesh.size(0), dim=dim)[coord[0]] if dim is not None else g
            assert torch.equal(y.to_local(), part), (rank, y.to_local(), part)
        # 1. FSDP+TP on all four ranks -> one engine on ranks 2, 3 (nested)
        x = distribute_tensor(g, everyone, [Shard(0), Shard(1)])
        expect(dt.reshard(x, back, [Shard(1)]), back, 1)
        # 2. a Partial source on ranks 0, 1 -> replicated on ranks 2, 3 (disjoint)
        local = (g / 2) if front.get_coordinate() is not None else torch.empty(0)
        xp = DTensor.from_local(local, front, [Partial()], run_check=False, shape=g.shape, stride=g.stride())
        expect(dt.reshard(xp, back, [Replicate()]), back, None)
        # 3. the same four ranks, reshaped and in reverse order
        xr = distribute_tensor(g, everyone, [Shard(0), Replicate()])
        expect(dt.reshard(xr, backwards, [Shard(0)]), backwards, 0)
        # 4. the same DeviceMesh on both sides (one runner, locked once)
        expect(dt.reshard(distribute_tensor(g, front, [Shard(1)]), front, [Shard(0)]), front, 0)
        plan = dt.plan_reshard(xr, backwards, [Shard(0)])
        assert plan.src_ranks == [0, 1, 2, 3] and plan.dst_ranks == [0, 1, 2, 3], (plan.src_ranks, plan.dst_ranks)
        if rank == 0:
            print("RESHARD ok", flush=True)
        dist.barrier()
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, nprocs=4)
""")


def test_reshard_across_meshes(tmp_path):
    script = tmp_path / "reshard.py"
    script.write_text(SCRIPT)
    r = run_script(script, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RESHARD ok" in r.stdout, r.stdout + r.stderr
