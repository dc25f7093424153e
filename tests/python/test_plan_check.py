"""dtensor.torch compares the ranks' plans on every call when asked (set_plan_check("every_call")
or DTENSOR_PLAN_CHECK=every_call): a rank that asks for another target than
its peers, after both plans were cached on every rank, fails on every rank with the plan-hash
message (also when its own plan moves nothing), and the process group stays usable."""
import re
import textwrap

import pytest

pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank, mode):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard
        import dtensor, dtensor.torch as dt
        dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=20))
        mesh = init_device_mesh("cpu", (2,))
        g = torch.arange(32.0).reshape(8, 4)
        x = dt.distribute(g, mesh, [Shard(0)])
        targets = {"gather": [Replicate()], "transpose": [Shard(1)], "same": [Shard(0)]}
        for t in targets.values():  # every plan cached and run once, agreeing, checked on first use
            dt.redistribute(x, t)
        dt.set_plan_check(mode)  # the cached calls must take the new mode
        rounds = [("gather", "transpose"), ("gather", "same"), ("same", "transpose")]
        for mine in rounds:
            t0 = time.time()
            try:
                dt.redistribute(x, targets[mine[rank]])
                outcome = "ran"
            except dtensor.BackendError as e:
                outcome = "different plans" if "different plans" in str(e) else "other: " + str(e)[:200]
            print(f"RANK {rank} {mine[0]}/{mine[1]}: {outcome} in {time.time() - t0:.1f} s", flush=True)
        y = dt.redistribute(x, [Replicate()])  # the group still works after the refusals
        assert torch.equal(y.to_local(), g)
        print(f"RANK {rank} after: ok", flush=True)
        dist.destroy_process_group()
        import os
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, args=(sys.argv[1],), nprocs=2)
""")


def test_every_call_check_refuses_disagreeing_ranks(tmp_path):
    script = tmp_path / "plan_check.py"
    script.write_text(SCRIPT)
    r = run_script(script, "every_call", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    # the two processes' lines may interleave: find each report wherever it is
    reports = {(int(k), rnd): (what, float(sec))
               for k, rnd, what, sec in re.findall(r"RANK (\d) (\w+/\w+): (.*?) in ([0-9.]+) s", r.stdout)}
    for rank in (0, 1):
        for rnd in ("gather/transpose", "gather/same", "same/transpose"):
            assert (rank, rnd) in reports, r.stdout
            what, sec = reports[(rank, rnd)]
            assert what == "different plans", (rank, rnd, what)
            assert sec < 10, (rank, rnd, sec)  # refused, not timed out
        assert f"RANK {rank} after: ok" in r.stdout


def test_set_plan_check_refuses_unknown_modes():
    import dtensor.torch as dt
    with pytest.raises(ValueError, match="first_use"):
        dt.set_plan_check("sometimes")
