"""The drop-in switch on one gloo rank (run by test_torch_switch.py in a fresh process): each check
prints `CHECK <name> ok` or `CHECK <name> FAIL <why>`. World 1 moves no data, so what is checked
here is the switch itself: what it replaces and restores, what it routes and what it hands back
to torch (and why), the fast path, aliasing and errors. Data movement through the switch is
checked on worlds 4 and 8 in test_redistribute_mp.py."""
import os
import sys
import traceback

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import dtensor.torch as dt

MODULES = dt._TORCH_MODULES
checks = []


def check(fn):
    checks.append(fn)
    return fn


def functions():
    import importlib
    return {m: importlib.import_module(m).redistribute_local_tensor for m in MODULES}


@check
def enable_disable_restores_torch():
    before = functions()
    assert len(set(before.values())) == 1, before  # all four modules hold torch's one function
    dt.enable()
    try:
        assert dt.is_enabled()
        assert all(f is dt._routed for f in functions().values()), functions()
        dt.enable("pytorch")  # enabling again only changes the cost model
        assert dt._switch.cost_model == "pytorch"
    finally:
        dt.disable()
    assert not dt.is_enabled()
    assert functions() == before


@check
def context_manager_restores_after_exception():
    before = functions()
    try:
        with dt.enabled():
            assert all(f is dt._routed for f in functions().values())
            raise KeyError("inside")
    except KeyError:
        pass
    assert not dt.is_enabled() and functions() == before
    dt.enable("pytorch")
    try:
        with dt.enabled():
            assert dt._switch.cost_model == "default"
        assert dt.is_enabled() and dt._switch.cost_model == "pytorch"  # the outer state is back
    finally:
        dt.disable()
    assert functions() == before


@check
def routes_explicit_and_implicit_redistributions():
    mesh = init_device_mesh("cpu", (1, 1))
    g = torch.arange(64.0).reshape(8, 8)
    x = distribute_tensor(g, mesh, [Shard(0), Shard(1)])
    want = x.redistribute(mesh, [Replicate(), Shard(0)]).to_local()
    dt.reset_stats()
    with dt.enabled():
        ys = [x.redistribute(mesh, [Replicate(), Shard(0)]) for _ in range(5)]
        full = x.full_tensor()
        # implicit: a matmul of a column-sharded by a row-sharded tensor makes a Partial result,
        # and adding a Replicate tensor redistributes it
        a = distribute_tensor(g, mesh, [Shard(1), Replicate()])
        b = distribute_tensor(g, mesh, [Shard(0), Replicate()])
        c = torch.mm(a, b) + distribute_tensor(g, mesh, [Replicate(), Replicate()])
        c_full = c.full_tensor()
    s = dt.stats()
    for y in ys:
        assert torch.equal(y.to_local(), want)
    assert torch.equal(full, g)
    assert torch.allclose(c_full, g @ g + g)
    assert s["routed"] >= 7, s
    assert s["plan_cache_hits"] >= 4 and s["plan_cache_misses"] >= 2, s
    assert s["routed"] == s["plan_cache_hits"] + s["plan_cache_misses"] - sum(s["fallbacks"].values()), s


@check
def disabled_means_torch_alone():
    mesh = init_device_mesh("cpu", (1,))
    x = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    dt.reset_stats()
    x.redistribute(mesh, [Replicate()])
    x.full_tensor()
    assert dt.stats() == {"routed": 0, "traced": 0, "plan_cache_hits": 0, "plan_cache_misses": 0, "fallbacks": {}}


@check
def falls_back_on_layouts_dtensor_does_not_model():
    mesh = init_device_mesh("cpu", (1,))
    g = torch.arange(16.0)
    x = distribute_tensor(g, mesh, [Shard(0)])
    dt.reset_stats()
    with dt.enabled():
        n = torch.linalg.vector_norm(x)  # a _NormPartial result
        assert any(type(p).__name__ == "_NormPartial" for p in n.placements), n.placements
        got = n.full_tensor()
    assert torch.allclose(got, torch.linalg.vector_norm(g))
    assert dt.stats()["fallbacks"].get("placement _NormPartial", 0) >= 1, dt.stats()


@check
def falls_back_on_uneven_from_local_shards():
    mesh = init_device_mesh("cpu", (1,))
    # a local tensor of 3 rows claiming a global 5: torch's from_local takes it unchecked
    x = DTensor.from_local(torch.ones(3, 4), mesh, [Shard(0)], run_check=False, shape=(5, 4), stride=(4, 1))
    dt.reset_stats()
    with dt.enabled():
        y = x.redistribute(mesh, [Replicate()])
    assert y.to_local().shape == (3, 4)  # torch's own answer, unchanged
    assert dt.stats()["fallbacks"] == {"uneven local shape": 1}, dt.stats()
    assert dt.stats()["routed"] == 0
    # the same under a trace: handed to torch, not lowered
    from torch.fx.experimental.proxy_tensor import make_fx
    mod = __import__("torch.distributed.tensor._redistribute", fromlist=["x"])
    target = distribute_tensor(torch.ones(5, 4), mesh, [Replicate()])._spec
    with dt.enabled():
        make_fx(lambda t: mod.redistribute_local_tensor(t, x._spec, target))(torch.ones(3, 4))
    assert dt.stats()["fallbacks"] == {"uneven local shape": 2}, dt.stats()
    assert dt.stats()["traced"] == 0


@check
def meta_and_subclasses_fall_back_traces_lower():
    """meta tensors and tensor subclasses other than the tracing ones go to torch; under a trace
    (fake mode, make_fx) the plan is lowered to traceable ops, counted as traced once captured."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    mod = __import__("torch.distributed.tensor._redistribute", fromlist=["x"])
    mesh = init_device_mesh("cpu", (1,))
    a = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])._spec
    b = distribute_tensor(torch.ones(4, 4), mesh, [Replicate()])._spec

    class Sub(torch.Tensor):
        pass
    dt.reset_stats()
    with dt.enabled():
        meta = mod.redistribute_local_tensor(torch.empty(4, 4, device="meta"), a, b)
        sub = mod.redistribute_local_tensor(torch.ones(4, 4).as_subclass(Sub), a, b)
        with FakeTensorMode():
            fake = mod.redistribute_local_tensor(torch.empty(4, 4), a, b)
        gm = make_fx(lambda t: mod.redistribute_local_tensor(t, a, b))(torch.ones(4, 4))
    assert meta.device.type == "meta" and type(sub) is Sub and list(fake.shape) == [4, 4]
    f = dt.stats()["fallbacks"]
    assert f == {"meta tensor": 1, "tensor subclass": 1}, f
    assert dt.stats()["traced"] == 1 and dt.stats()["routed"] == 0, dt.stats()
    assert torch.equal(gm(torch.arange(16.0).reshape(4, 4)), torch.arange(16.0).reshape(4, 4))


@check
def refuses_a_torch_whose_function_differs():
    import torch.distributed.tensor._redistribute as mod
    real = mod.redistribute_local_tensor

    def other(local_tensor, current_spec, target_spec, *, async_op=False):
        return real(local_tensor, current_spec, target_spec, async_op=async_op)
    mod.redistribute_local_tensor = other
    try:
        try:
            dt.enable()
        except RuntimeError as e:
            assert torch.__version__ in str(e) and "2.11 to 2.15" in str(e), str(e)
        else:
            raise AssertionError("enable() took a function with another signature")
        assert not dt.is_enabled() and mod.redistribute_local_tensor is other
    finally:
        mod.redistribute_local_tensor = real


@check
def refuses_another_torch_version():
    # minors outside the version table (2.11 to 2.15) are refused by enable() and by every entry
    # point that reads a spec, naming the version and the range: a signature alone says too little
    real = torch.__version__
    mesh = init_device_mesh("cpu", (1,))
    lay = dt.layout_of(mesh, [Replicate()], [4])
    for other in ["2.10.2+cu128", "2.16.0", "3.15.0", "nightly"]:
        torch.__version__ = other
        try:
            for attempt in (dt.enable, lambda: dt.layout_of(mesh, [Replicate()], [4], torch.float32),
                            lambda: dt.placements_of(lay)):
                try:
                    attempt()
                except RuntimeError as e:
                    assert other in str(e) and "2.11 to 2.15" in str(e), str(e)
                else:
                    raise AssertionError(f"torch {other} was taken")
        finally:
            torch.__version__ = real
        assert not dt.is_enabled()
    for inside in ["2.11.0+cu130", "2.13.0", "2.15.1"]:  # every supported minor is taken
        torch.__version__ = inside
        try:
            dt.enable()
            assert dt.is_enabled()
            dt.disable()
        finally:
            torch.__version__ = real
    dt.enable()  # the real version is taken
    assert dt.is_enabled()
    dt.disable()


@check
def refuses_bad_cost_models():
    for bad, kind in [("/nonexistent/profile.json", ValueError), (3, TypeError)]:
        try:
            dt.enable(bad)
        except kind as e:
            assert str(bad) in str(e) or type(bad).__name__ in str(e), str(e)
        else:
            raise AssertionError(f"enable({bad!r}) was accepted")
        assert not dt.is_enabled()


@check
def errors_name_placements_mesh_and_rank():
    mesh = init_device_mesh("cpu", (1,))
    x = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    with dt.enabled():
        dt._switch.cost_model, dt._switch.model_key = object(), "broken"  # the planner refuses it
        try:
            x.redistribute(mesh, [Replicate()])
        except (TypeError, ValueError) as e:
            msg = str(e)
            assert "Shard(dim=0)" in msg and "Replicate()" in msg and "rank 0" in msg and "DeviceMesh" in msg, msg
        else:
            raise AssertionError("a broken cost model was accepted")
    assert not dt.is_enabled()


@check
def fast_path_makes_no_autograd_node():
    mesh = init_device_mesh("cpu", (1,))
    x = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    assert dt.redistribute(x, [Replicate()]).grad_fn is None
    xg = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)]).requires_grad_()
    with torch.no_grad():
        assert dt.redistribute(xg, [Replicate()]).grad_fn is None
    y = dt.redistribute(xg, [Replicate()])
    assert y.grad_fn is not None and "Redistribute" in type(y.grad_fn).__name__, y.grad_fn
    (y.to_local() * torch.arange(16.0).reshape(4, 4)).sum().backward()
    assert torch.equal(xg.grad.to_local(), torch.arange(16.0).reshape(4, 4))


@check
def equivalent_layouts_alias_as_torch_does():
    mesh = init_device_mesh("cpu", (1, 1))
    x = distribute_tensor(torch.arange(64.0).reshape(8, 8), mesh, [Shard(0), Shard(1)])
    y = dt.redistribute(x, [Shard(1), Shard(0)])
    assert y.to_local().data_ptr() == x.to_local().data_ptr()
    assert torch.equal(y.to_local(), x.to_local())
    assert tuple(y.placements) == (Shard(1), Shard(0))


@check
def async_op_is_accepted():
    mesh = init_device_mesh("cpu", (1,))
    x = distribute_tensor(torch.arange(16.0).reshape(4, 4), mesh, [Partial()])
    assert torch.equal(dt.redistribute(x, [Replicate()], async_op=True).to_local(), x.to_local())
    with dt.enabled():
        assert torch.equal(x.redistribute(mesh, [Replicate()], async_op=True).to_local(), x.to_local())


if __name__ == "__main__":
    dist.init_process_group("gloo", rank=0, world_size=1)
    for fn in checks:
        try:
            fn()
            print(f"CHECK {fn.__name__} ok", flush=True)
        except Exception as e:  # noqa: BLE001 - reported per check
            why = f"{type(e).__name__}: {e} | {traceback.format_exc()[-1500:]}".replace("\n", " | ")
            print(f"CHECK {fn.__name__} FAIL {why}", flush=True)
        finally:
            if dt.is_enabled():
                dt.disable()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # torch's own exit-time abort (tests/python/mp_worker.py: exit_now)
