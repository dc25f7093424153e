"""A peer that dies, or never comes, during dtensor.torch's collectives (gloo, 4 processes): the
ranks left fail with a dtensor.BackendError (a RuntimeError) naming the collective, the mesh dims
and the peer ranks, wrapping gloo's own text, within the job's timeout."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank, how):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard
        import dtensor, dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=5))
        mesh = init_device_mesh("cpu", (2, 2))
        g = torch.arange(48.0).reshape(8, 6)
        x = dt.distribute(g, mesh, [Shard(0), Replicate()])
        assert torch.equal(dt.redistribute(x, [Replicate(), Replicate()]).to_local(), g)  # executor made
        dist.barrier()
        if rank == 2:  # rank 0's peer on mesh dim 0
            if how == "dies":
                os._exit(0)
            time.sleep(8)  # never comes within the 5 s timeout
            os._exit(0)
        t0 = time.time()
        try:
            dt.redistribute(x, [Replicate(), Replicate()])
            err = None
        except dtensor.BackendError as e:
            err = str(e)
        if rank == 0:
            assert err is not None, "rank 0 completed without its peer"
            assert "all_gather over mesh dims [0]" in err and "peer ranks [2]" in err, err
            print(f"PEER FAILURE ok ({how}, {time.time() - t0:.1f} s): {err[:300]}", flush=True)
        os._exit(0)

    if __name__ == "__main__":
        mp.spawn(rank_main, args=(sys.argv[1],), nprocs=4, join=True)
""")


@pytest.mark.parametrize("how", ["dies", "late"])
def test_peer_failure_is_a_backend_error(tmp_path, how):
    script = tmp_path / "peer_failure.py"
    script.write_text(SCRIPT)
    r = run_script(script, how, timeout=120)
    assert "PEER FAILURE ok" in r.stdout, r.stdout + r.stderr
