"""One rank of the multi-process redistribution test (spawned by test_redistribute_mp.py): every
case is redistributed with dtensor.torch.redistribute over gloo, and every rank's result is
checked against the expected shard computed from an arange tensor with the notation's oracle
(layouts.owned). torch's own DTensor.redistribute runs on the same cases; where it disagrees with
the expected shard it is recorded (a known torch defect), not failed."""
from __future__ import annotations

import datetime
import json
import math
import os
import traceback

import torch
import torch.distributed as dist

from layouts import Spec, coords, owned

DTYPES = {"f64": torch.float64, "f32": torch.float32, "i32": torch.int32}


def _global(spec, dtype):
    n = math.prod(spec.shape)
    return torch.arange(n, dtype=torch.float64).reshape(spec.shape).to(DTYPES[dtype])


def _take(g, idx):
    t = g
    for d, ix in enumerate(idx):
        t = t.index_select(d, torch.tensor(ix, dtype=torch.long))
    return t


def local_input(spec, dtype, coord):
    """This rank's local tensor of `spec` holding the arange tensor; on Partial mesh dims every rank
    holds a different contribution whose reduction is exact."""
    t = _take(_global(spec, dtype), owned(spec, coord)).clone()
    pd = spec.partial_dims()
    if not pd:
        return t
    q, size = 0, 1
    for m in pd:
        q = q * spec.mesh_shape[m] + coord[m]
        size *= spec.mesh_shape[m]
    op = spec.partial_op()
    if op == "sum":
        delta = q if q > 0 else -sum(range(1, size))
        return (t if q == 0 else torch.zeros_like(t)) + delta
    if op == "avg":
        return t + (q if q > 0 else -sum(range(1, size)))
    if op == "max":
        return t - q
    return t + q  # min


def reduce(op, ts):
    acc = ts[0].to(torch.float64)
    for t in ts[1:]:
        t = t.to(torch.float64)
        acc = acc + t if op in ("sum", "avg") else (torch.maximum(acc, t) if op == "max" else torch.minimum(acc, t))
    return acc / len(ts) if op == "avg" else acc


def check(spec, dtype, locals_by_rank):
    """'' when every rank's local tensor (by mesh position) is its expected shard, else the first difference."""
    g = _global(spec, dtype).to(torch.float64)
    pd = spec.partial_dims()
    cs = dict(coords(spec.mesh_shape))
    for r, coord in cs.items():
        expect = _take(g, owned(spec, coord))
        got = locals_by_rank[r]
        if list(got.shape) != list(expect.shape):
            return f"rank {r}: local shape {list(got.shape)}, expected {list(expect.shape)}"
        if pd:
            group = [q for q, c in cs.items() if all(c[m] == coord[m] for m in range(len(coord)) if m not in pd)]
            got = reduce(spec.partial_op(), [locals_by_rank[q] for q in group])
        if not torch.equal(got.to(torch.float64), expect):
            return f"rank {r}: {got.flatten().tolist()[:12]} expected {expect.flatten().tolist()[:12]}"
    return ""


def grad_spec(src, dst, default_order=False, torch_rule=False):
    """The layout of x's gradient after y = redistribute(x, dst) and y.backward(g with dst's layout):
    a Partial source dim becomes Replicate where the gradient is not Partial; the source's shard
    order (`default_order`: ascending, as torch's own backward builds it). `torch_rule`: torch's
    backward (x.redistribute), whose rule differs by minor (dtensor/torch/_versions.py): where
    the target is a _StridedShard, torch 2.11 keeps the Partial."""
    from dtensor.torch import _versions
    keep = torch_rule and not _versions.current().strided_grad_replicates_partial
    placements = [("R",) if p[0] == "P" and q[0] != "P" and not (keep and q[0] == "SS") else p
                  for p, q in zip(src.placements, dst.placements)]
    order = {d: (sorted(ms) if default_order else list(ms)) for d, ms in src.order.items()}
    return Spec(src.mesh_shape, src.shape, placements, order)


def torch_api_takes(src, dst):
    """Whether torch's DTensor.redistribute accepts the target: a Partial mesh dim only where the
    source has the same Partial, or (where the running torch takes it, _versions) from Shard as
    Partial(sum)."""
    from dtensor.torch import _versions
    s2p = _versions.current().shard_to_partial_api
    return all(q[0] != "P" or p == q or (s2p and p[0] == "S" and q[1] == "sum")
               for p, q in zip(src.placements, dst.placements))


def _gather(t, world, ranks):
    outs = [None] * world
    dist.all_gather_object(outs, t.detach())
    return [outs[r] for r in ranks]


def _input(mesh, src, dtype, coord, requires_grad=False):
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    pl, order = src.torch()
    shape = src.shape
    stride = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    meta = TensorMeta(torch.Size(shape), tuple(stride), DTYPES[dtype])
    if src.strided:
        spec = DTensorSpec(mesh, pl, tensor_meta=meta)
    else:
        spec = DTensorSpec(mesh, pl, tensor_meta=meta, shard_order=order)
    return DTensor(local_input(src, dtype, coord), spec, requires_grad=requires_grad)


def mesh_maker():
    """mesh_of(shape, ranks): the DeviceMesh with torch rank ranks[i] at row-major position i,
    made once per (shape, ranks) and reused."""
    from torch.distributed.device_mesh import DeviceMesh
    meshes = {}

    def mesh_of(shape, ranks):
        key = (tuple(shape), tuple(ranks))
        if key not in meshes:
            meshes[key] = DeviceMesh("cpu", torch.tensor(ranks).reshape(shape))
        return meshes[key]
    return mesh_of


def run(rank, world, port, cases, out_dir, mode="dtensor", start=0, torch_copies=False):
    """mode "dtensor": every case through dtensor.torch.redistribute, results in rank{r}.json
    (`torch_copies`: the executor's local copies as torch ops, the GPU path, on CPU tensors).
    mode "torch": torch's own redistribute from case `start` on, one JSON line per case in
    rank{r}.jsonl ("begin" before it runs, so a hang or crash can be attributed)."""
    import dtensor.torch as dt

    # the executor's local copies as torch ops (what runs on GPU tensors) instead of C++ memcpy
    assert hasattr(dt, "_torch_local_copies_on_cpu"), "the installed dtensor.torch has no torch-copies switch"
    dt._torch_local_copies_on_cpu = torch_copies

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60 if mode == "dtensor" else 10))
    mesh_of = mesh_maker()
    result = {"checked": 0, "grad_checked": 0, "to_local_checked": 0, "enabled_checked": 0, "wrong": [], "distribute_checked": 0,
              "distribute_wrong": []}
    lines = open(os.path.join(out_dir, f"rank{rank}.jsonl"), "a", buffering=1) if mode == "torch" else None
    for i, (mesh_shape, ranks, src, dst, dtype) in enumerate(cases):
        if i < start:
            continue
        mesh = mesh_of(mesh_shape, ranks)  # ranks: the torch rank at each mesh position
        x = _input(mesh, src, dtype, mesh.get_coordinate())
        dpl, dorder = dst.torch()
        name = f"{src!r} -> {dst.text()} ({dtype})" + ("" if ranks == sorted(ranks) else f" mesh ranks {ranks}")
        if mode == "dtensor":
            # torch's distribute_tensor (each rank cuts its own piece: src_data_rank=None, no
            # communication) against the expected shard, for layouts it takes (placements only,
            # no Partial): recorded, not failed
            if not src.explicit_order and not src.partial_dims():
                from torch.distributed.tensor import distribute_tensor
                result["distribute_checked"] += 1
                why = ""
                try:
                    d = distribute_tensor(_global(src, dtype), mesh, list(src.torch()[0]), src_data_rank=None)
                    expect = _take(_global(src, dtype), owned(src, mesh.get_coordinate()))
                    if not torch.equal(d._local_tensor, expect):
                        why = f"{d._local_tensor.flatten().tolist()[:8]} expected {expect.flatten().tolist()[:8]}"
                except Exception as e:  # noqa: BLE001
                    why = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                if why:
                    result["distribute_wrong"].append(
                        {"case": i, "name": repr(src) + ("" if ranks == sorted(ranks) else f" mesh ranks {ranks}"),
                         "why": f"rank {rank}: {why}"})
            try:
                y = dt.redistribute(x, dpl, shard_order=dorder)
                assert tuple(y.placements) == tuple(dpl), f"placements {y.placements}"
                outs = [None] * world
                dist.all_gather_object(outs, y._local_tensor)
                err = check(dst, dtype, [outs[r] for r in ranks])
            except Exception as e:  # noqa: BLE001: reported with the case
                err = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            if err:
                result["wrong"].append(f"case {i}: {name}: {err}")
            result["checked"] += 1
            if dtype == "i32":
                continue
            # the gradient: y = redistribute(x) is differentiable; the gradient of y holding the arange
            # tensor in y's layout gives x's gradient = that tensor in x's (normalized) layout
            # (torch.autograd.grad: x.grad's accumulation may re-lay it out, torch's choice)
            try:
                xg = _input(mesh, src, dtype, mesh.get_coordinate(), requires_grad=True)
                y = dt.redistribute(xg, dpl, shard_order=dorder)
                g, = torch.autograd.grad(y, xg, _input(mesh, dst, dtype, mesh.get_coordinate()))
                err = check(grad_spec(src, dst), dtype, _gather(g._local_tensor, world, ranks))
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            if err:
                result["wrong"].append(f"case {i}: {name}: gradient: {err}")
            result["grad_checked"] += 1
            # the same gradient through y.to_local(), a plain tensor (torch's to_local backward
            # rebuilds y's gradient; an explicit target order must survive it): d/dy sum(y * w) = w;
            # every target with an explicit order, and a sample of a quarter of the others
            if not dst.partial_dims() and (dst.explicit_order or i % 4 == 0):
                try:
                    xg = _input(mesh, src, dtype, mesh.get_coordinate(), requires_grad=True)
                    y = dt.redistribute(xg, dpl, shard_order=dorder)
                    w = _input(mesh, dst, dtype, mesh.get_coordinate())._local_tensor
                    g, = torch.autograd.grad((y.to_local() * w).sum(), xg)
                    err = check(grad_spec(src, dst), dtype, _gather(g._local_tensor, world, ranks))
                except Exception as e:  # noqa: BLE001
                    err = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
                if err:
                    result["wrong"].append(f"case {i}: {name}: gradient through to_local: {err}")
                result["to_local_checked"] += 1
            # torch's own API with dtensor switched in: forward and backward through dtensor (the
            # pairs its public redistribute takes: default target order, Partial only from
            # Shard as Partial(sum))
            if dst.explicit_order or not torch_api_takes(src, dst):
                continue
            try:
                with dt.enabled():
                    xe = _input(mesh, src, dtype, mesh.get_coordinate(), requires_grad=True)
                    ye = xe.redistribute(mesh, dpl)
                    err = check(dst, dtype, _gather(ye._local_tensor, world, ranks))
                    g, = torch.autograd.grad(ye, xe, _input(mesh, dst, dtype, mesh.get_coordinate()))
                err = err or check(grad_spec(src, dst, default_order=True, torch_rule=True), dtype, _gather(g._local_tensor, world, ranks))
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            if err:
                result["wrong"].append(f"case {i}: {name}: x.redistribute under dtensor.torch.enabled(): {err}")
            result["enabled_checked"] += 1
            continue
        # torch's own redistribute: its public API takes placements only (default shard order)
        if dst.explicit_order:
            lines.write(json.dumps({"case": i, "status": "skipped"}) + "\n")
            continue
        lines.write(json.dumps({"case": i, "status": "begin"}) + "\n")
        grad = None
        try:
            if dtype != "i32":
                x = _input(mesh, src, dtype, mesh.get_coordinate(), requires_grad=True)
            yt = x.redistribute(mesh, dpl)
            err = check(dst, dtype, _gather(yt._local_tensor, world, ranks))
            status = "wrong" if err else "right"
            if dtype != "i32":  # torch's gradient, recorded beside its forward
                g, = torch.autograd.grad(yt, x, _input(mesh, dst, dtype, mesh.get_coordinate()))
                grad = "wrong" if check(grad_spec(src, dst, default_order=True, torch_rule=True), dtype,
                                        _gather(g._local_tensor, world, ranks)) else "right"
        except Exception as e:  # noqa: BLE001
            err, status = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}", "error"
        lines.write(json.dumps({"case": i, "status": status, "name": name, "detail": err, "grad": grad}) + "\n")
        dist.barrier()
    if mode == "dtensor":
        # the copies really ran where the test asked (torch ops or C++)
        modes = {r.host_copies for r in dt._runners.values()}
        if modes != {not torch_copies}:
            result["wrong"].append(f"case {len(cases)}: executors ran with host copies {modes}, asked {not torch_copies}")
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    if lines is not None:
        lines.close()
    dist.destroy_process_group()
    exit_now()


def exit_now():
    """Ends a rank process right away. torch 2.15 itself aborts now and then at interpreter exit
    after destroy_process_group ("terminate called without an active exception": 8 of 30 runs of
    a torch-only gloo script under mp.spawn, none with this exit; docs/python.md), which would
    fail the run after every check passed."""
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_switch(rank, world, port, cases, out_dir):
    """Every case through torch's own API with dtensor switched in (dtensor.torch.enabled()): the
    forward `x.redistribute(mesh, dst)`, `full_tensor()` of the source, an implicit
    redistribution (x + y with y in the target layout: sharding propagation redistributes one
    side) and the gradient of the forward, each against the oracle; rank{r}.json holds the counts
    and the differences."""
    import dtensor.torch as dt
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    mesh_of = mesh_maker()
    result = {"checked": 0, "wrong": [], "routed": 0, "fallbacks": {}}
    dt.reset_stats()
    for i, (mesh_shape, ranks, src, dst, dtype) in enumerate(cases):
        mesh = mesh_of(mesh_shape, ranks)
        coord = mesh.get_coordinate()
        dpl, _ = dst.torch()
        name = f"{src!r} -> {dst.text()} ({dtype})" + ("" if ranks == sorted(ranks) else f" mesh ranks {ranks}")
        full = _global(src, dtype)
        try:
            with dt.enabled():
                x = _input(mesh, src, dtype, coord, requires_grad=dtype != "i32")
                y = x.redistribute(mesh, dpl)
                err = check(dst, dtype, _gather(y._local_tensor, world, ranks))
                if not err and not torch.equal(x.full_tensor(), full):
                    err = "full_tensor() of the source differs from the tensor"
                if not err:
                    z = (x + _input(mesh, dst, dtype, coord)).full_tensor()
                    if not torch.equal(z, full + full):
                        err = f"x + y (implicit redistribution): {z.flatten().tolist()[:8]} expected {(full + full).flatten().tolist()[:8]}"
                if not err and dtype != "i32":
                    g, = torch.autograd.grad(y, x, _input(mesh, dst, dtype, coord))
                    err = check(grad_spec(src, dst, default_order=True, torch_rule=True), dtype,
                                _gather(g._local_tensor, world, ranks))
                    err = f"gradient: {err}" if err else ""
        except Exception as e:  # noqa: BLE001: reported with the case
            err = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
        if err:
            result["wrong"].append(f"case {i}: {name}: {err}")
        result["checked"] += 1
    stats = dt.stats()
    result["routed"], result["fallbacks"] = stats["routed"], stats["fallbacks"]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
    exit_now()
