"""async_op=True on CPU (gloo, 4 processes) for a plan ending in every kind of collective step:
all_gather, all_to_all, reduce_scatter, all_reduce and a `direct` (send/recv) step where a rank has
exactly one send or receive (the case whose work was once waited twice and blocked until the
timeout). Each case runs in each order of use and next call (the result used before the next
call; the next call before the result is used), with a late peer, and through torch's own
`x.redistribute(..., async_op=True)` under dtensor.torch.enabled(); every result is checked
against the expected local shard (dtensor.torch.distribute of the global tensor)."""
import textwrap

import pytest

torch = pytest.importorskip("torch")

from procs import run_script  # noqa: E402

SCRIPT = textwrap.dedent("""
    import datetime, os, time, torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Partial, Replicate, Shard
        from torch.distributed.tensor.placement_types import _StridedShard
        import json, dtensor, dtensor.torch as dt
        from torch.distributed._functional_collectives import AsyncCollectiveTensor
        # the default profile prices an all_to_all and a `direct` step alike (and takes `direct`):
        # a profile with slow point-to-point links plans the all_to_all
        j = json.loads(dtensor.CostModel.load("default").to_json())
        for link in j["links"].values():
            link["p2p_bw_GBps"] = 1.0
        j["name"] = "slow-p2p"
        slow_p2p = dtensor.CostModel.from_json(json.dumps(j))
        dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=30))
        mesh = init_device_mesh("cpu", (2, 2))
        # (shape, source, target, cost model): each plan's last step is a collective
        cases = [
            ((2, 3), [Shard(0), Replicate()], [Replicate(), Replicate()], "default"),                  # all_gather
            ((1, 3), [Shard(0), Replicate()], [Replicate(), Replicate()], "default"),                  # direct, uneven
            ((1, 3), [Shard(0), Replicate()], [_StridedShard(1, split_factor=2), Shard(1)], "default"),  # direct
            ((4, 4), [Partial(), Replicate()], [Shard(0), Replicate()], "default"),                   # reduce_scatter
            ((4, 4), [Partial(), Replicate()], [Replicate(), Replicate()], "default"),                # all_reduce
            ((4, 8), [Shard(0), Replicate()], [Shard(1), Replicate()], "default"),                    # direct
            ((8, 4), [Shard(1), Replicate()], [Shard(0), Replicate()], slow_p2p),                     # all_to_all
            ((5, 4), [Shard(1), Replicate()], [Shard(0), Replicate()], slow_p2p),                     # all_to_all, uneven
        ]
        kinds, deferred = set(), set()
        t0 = time.time()
        for shape, src, dst, model in cases:
            g = torch.arange(float(shape[0] * shape[1]), dtype=torch.float64).reshape(shape)
            x = dt.distribute(g, mesh, src)
            want = dt.distribute(g, mesh, dst).to_local()
            other = [Replicate(), Replicate()] if dst != [Replicate(), Replicate()] else [Shard(1), Replicate()]
            want_other = dt.distribute(g, mesh, other).to_local()
            plan = dt.plan_for(x, dst, cost_model=model)
            last = plan.steps[-1].kind
            kinds.add(last)
            name = f"{list(shape)} {plan.trace} (last step {last})"
            def same(a, b, what):
                assert torch.equal(a, b), f"rank {rank}: {name}: {what}: {a.tolist()} != {b.tolist()}"
            for late in (False, True):
                if late and rank == 1:
                    time.sleep(0.3)
                # the result used, then the next call
                y1 = dt.redistribute(x, dst, cost_model=model, async_op=True)
                if isinstance(y1._local_tensor, AsyncCollectiveTensor):
                    deferred.add(last)
                same(y1.to_local() + 0, want, "used before the next call")
                same(dt.redistribute(x, dst, cost_model=model).to_local(), want, "the next (sync) call")
                # the next call, then the result used
                y1 = dt.redistribute(x, dst, cost_model=model, async_op=True)
                y2 = dt.redistribute(x, other, cost_model=model, async_op=True)
                same(y1.to_local() + 0, want, "used after the next call")
                same(y2.to_local() + 0, want_other, "the next (async) call")
                # never used, then the next call
                dt.redistribute(x, dst, cost_model=model, async_op=True)
                same(dt.redistribute(x, other, cost_model=model).to_local(), want_other, "the call after an unused result")
                # torch's API with dtensor switched in
                if isinstance(model, str) and not any(p.is_partial() for p in src):
                    with dt.enabled():
                        ye = x.redistribute(mesh, dst, async_op=True)
                        same(ye.to_local() + 0, want, "x.redistribute under dt.enabled()")
                        same(x.redistribute(mesh, dst).to_local(), want, "the next x.redistribute")
        missing = {"all_gather", "direct", "reduce_scatter", "all_reduce", "all_to_all"} - kinds
        assert not missing, f"no case ends in {missing}: {kinds}"
        dist.barrier()
        if rank == 0:
            print(f"ASYNC STEPS ok: last steps {sorted(kinds)}, left in flight {sorted(deferred)} "
                  f"in {time.time() - t0:.1f} s", flush=True)
        dist.destroy_process_group()
        os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)

    if __name__ == "__main__":
        mp.spawn(rank_main, nprocs=4)
""")


def test_async_op_every_final_step_kind(tmp_path):
    script = tmp_path / "async_steps.py"
    script.write_text(SCRIPT)
    r = run_script(script, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ASYNC STEPS ok" in r.stdout, r.stdout + r.stderr
