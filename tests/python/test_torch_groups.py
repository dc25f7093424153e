"""dtensor.torch's process groups wait as long as the world does (init_process_group's timeout),
not the backend's 30-minute default: a stalled peer ends the call within the job's timeout. The
timeout is set where the running torch sets it (the version table: `dist.set_timeout` from 2.14,
`distributed_c10d._set_pg_timeout` before); CI runs this on torch 2.15 and 2.11."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import distribute_tensor, Replicate, Shard
        import dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=20))
        mesh = init_device_mesh("cpu", (2, 2))
        g = torch.arange(48.0).reshape(8, 6)
        # a flattened all_gather over both mesh dims, then an all_gather over mesh dim 0 alone
        for src, dst in [([Shard(0), Shard(1)], [Replicate(), Replicate()]), ([Shard(0), Replicate()], [Replicate(), Replicate()])]:
            y = dt.redistribute(distribute_tensor(g, mesh, src), dst)
            assert torch.equal(y.to_local(), g)
        runner = next(iter(dt._runners.values()))
        cpu = torch.device("cpu")
        timeouts = {k: dt._timeout_of(v[0], cpu) for k, v in runner.impl.groups.items()}
        assert (0, 1) in timeouts and (0,) in timeouts, timeouts
        bad = {k: t for k, t in timeouts.items() if t != datetime.timedelta(seconds=20)}
        assert not bad, f"rank {rank}: groups with another timeout: {bad}"
        if rank == 0:
            print("TIMEOUTS", sorted((k, t.total_seconds()) for k, t in timeouts.items()), flush=True)
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, nprocs=4)
""")


def test_groups_take_the_world_timeout(tmp_path):
    script = tmp_path / "groups.py"
    script.write_text(SCRIPT)
    r = run_script(script, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TIMEOUTS [((0,), 20.0), ((0, 1), 20.0)]" in r.stdout, r.stdout
