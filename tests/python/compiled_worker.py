"""One rank of the compiled-region checks (spawned by test_compiled_mp.py and by
scripts/compiled-check.py): torch.compile with dtensor switched in, on gloo.

  pairs  seeded random src -> dst pairs: `x.redistribute(mesh, dst).to_local()` compiled
         (fullgraph) under dtensor.torch.enabled(), against the oracle (layouts.owned) and equal
         bit for bit to the same call run eagerly (dtensor's executor);
  graph  a recording backend: the captured forward graph holds the functional collectives of
         dtensor's plan, in plan order and with its group sizes; torch's own
         redistribute_local_tensor is never called;
  strided  a _StridedShard pair torch gets wrong: right compiled under enabled(); torch's own
         compiled result recorded;
  train  a TP/SP transformer block (examples/python/train_fsdp_tp.py's Block, tensor and sequence
         parallel on a 1-d mesh) compiled with aot_eager: 10 SGD steps, losses against eager's.

Each rank writes rank{r}.json with what it checked and what differed."""
from __future__ import annotations

import datetime
import json
import math
import os
import sys
import traceback

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


def _compile(fn, backend):
    from torch import _dynamo
    _dynamo.reset()  # a fresh cache per function: no recompile limit, no stale graphs
    return torch.compile(fn, backend=backend, fullgraph=True)


def run_pairs(mesh_of, cases, backend, result, world):
    import dtensor.torch as dt
    from mp_worker import _gather, _input, check
    for i, (mesh_shape, ranks, src, dst, dtype) in enumerate(cases):
        mesh = mesh_of(mesh_shape, ranks)
        dpl, _ = dst.torch()
        name = f"{src!r} -> {dst.text()} ({dtype})" + ("" if ranks == sorted(ranks) else f" mesh ranks {ranks}")
        try:
            x = _input(mesh, src, dtype, mesh.get_coordinate())
            dt.reset_stats()
            with dt.enabled():
                got = _compile(lambda t: t.redistribute(mesh, dpl).to_local(), backend)(x)
                traced = dt.stats()["traced"]
                eager = x.redistribute(mesh, dpl).to_local()
            err = check(dst, dtype, _gather(got, world, ranks))
            if not err and not torch.equal(got, eager):
                err = f"compiled {got.flatten().tolist()[:8]} but eager {eager.flatten().tolist()[:8]}"
            if not err and dt.stats()["fallbacks"]:
                err = f"fell back: {dt.stats()['fallbacks']}"
            # (torch's redistribute returns x itself when the placements are already the target's:
            # nothing reaches the switch then)
            if not err and traced < 1 and src.placements != dst.placements:
                err = "nothing was traced"
        except Exception as e:  # noqa: BLE001: reported with the case
            err = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        if err:
            result["wrong"].append(f"case {i}: {name}: {err}")
        result["checked"] += 1


_COLLECTIVES = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
                "all_reduce": "all_reduce", "all_to_all_single": "all_to_all"}


def _graph_collectives(gm):
    """(kind, group size) of each functional collective in a captured graph, in graph order."""
    from torch.distributed.distributed_c10d import _resolve_process_group
    out = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        if name in _COLLECTIVES:
            group = node.args[-1]
            out.append((_COLLECTIVES[name], _resolve_process_group(group).size()))
        elif "redistribute" in name:
            out.append((name, 0))
    return out


def run_graph(mesh_of, cases, result):
    """Per case: the captured forward graph's collectives == the plan's (a direct step: one
    all_to_all_single over its group)."""
    import dtensor.torch as dt
    from dtensor.torch import _dropin
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from mp_worker import _input
    for i, (mesh_shape, ranks, src, dst, dtype) in enumerate(cases):
        mesh = mesh_of(mesh_shape, ranks)
        dpl, _ = dst.torch()
        graphs = []

        def record(gm, example_inputs):
            graphs.append(gm)
            return make_boxed_func(gm.forward)
        backend = aot_autograd(fw_compiler=record)
        x = _input(mesh, src, dtype, mesh.get_coordinate())
        calls = []
        dt.reset_stats()
        try:
            with dt.enabled():
                real = _dropin._switch.original

                def counting(*a, **k):
                    calls.append(1)
                    return real(*a, **k)
                _dropin._switch.original = counting  # where a fallback would go
                try:
                    _compile(lambda t: t.redistribute(mesh, dpl).to_local(), backend)(x)
                finally:
                    _dropin._switch.original = real
            got = [c for g in graphs for c in _graph_collectives(g)]
            layouts = (dt.layout_of(x), dt.layout_of(mesh, dpl, x.shape, x.dtype))
            plan = dt._cache.get(layouts[0], layouts[1], "default")
            want = []
            for st in plan.steps:
                if st.kind == "direct":  # over the mesh dims its source shards
                    lay = dt._core.Layout(layouts[0].mesh, list(x.shape), st.src, dtype=layouts[0].dtype)
                    want.append(("all_to_all", math.prod(mesh_shape[m] for m, p in enumerate(lay.placements)
                                                         if p.kind in ("shard", "strided_shard"))))
                elif st.kind in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all"):
                    n = math.prod(mesh_shape[m] for m in st.mesh_dims)
                    if n > 1:
                        want.append((st.kind, n))
            err = ""
            if got != want:
                err = f"graph collectives {got}, plan's {want} (plan {[s.kind for s in plan.steps]})"
            elif calls:
                err = f"torch's redistribute_local_tensor was called {len(calls)} times"
            elif dt.stats()["traced"] < 1 or dt.stats()["fallbacks"]:
                err = f"stats {dt.stats()}"
            result["graph_kinds"].extend(k for k, _ in got)
        except Exception as e:  # noqa: BLE001
            err = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        if err:
            result["wrong"].append(f"graph {i}: {src!r} -> {dst.text()}: {err}")
        result["graph_checked"] += 1


def run_strided(mesh_of, result, world):
    """2x2 3 _S(0, 2)_S(0, 2) -> RR: torch 2.15 gives rank 0 [0, 1, 0] (docs/torch-defects.md)."""
    import dtensor.torch as dt
    from layouts import Spec
    from mp_worker import _gather, _input, check
    src = Spec([2, 2], [3], [("SS", 0, 2), ("SS", 0, 2)], {0: [0, 1]})
    dst = Spec([2, 2], [3], [("R",), ("R",)], {})
    mesh = mesh_of([2, 2], list(range(4)))
    dpl, _ = dst.torch()
    x = _input(mesh, src, "f32", mesh.get_coordinate())
    with dt.enabled():
        got = _compile(lambda t: t.redistribute(mesh, dpl).to_local(), "aot_eager")(x)
    err = check(dst, "f32", _gather(got, world, list(range(4))))
    if err:
        result["wrong"].append(f"strided: dtensor compiled: {err}")
    try:
        torch_got = _compile(lambda t: t.redistribute(mesh, dpl).to_local(), "aot_eager")(x)
        result["torch_strided"] = check(dst, "f32", _gather(torch_got, world, list(range(4)))) or "right"
    except Exception as e:  # noqa: BLE001: torch's own result is recorded, never failed
        result["torch_strided"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    result["strided_checked"] += 1


def run_train(result, steps=10):
    """TP/SP block compiled (aot_eager) vs eager, both under dtensor.torch.enabled()."""
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)
    import dtensor.torch as dt
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))
    from train_fsdp_tp import Block
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    def make():
        torch.manual_seed(0)
        block = Block(dim=64, heads=4, hidden=256)
        parallelize_module(block, mesh, {
            "norm1": SequenceParallel(), "norm2": SequenceParallel(),
            "wq": ColwiseParallel(input_layouts=Shard(1)), "wk": ColwiseParallel(input_layouts=Shard(1)),
            "wv": ColwiseParallel(input_layouts=Shard(1)), "wo": RowwiseParallel(output_layouts=Shard(1)),
            "w1": ColwiseParallel(input_layouts=Shard(1)), "w2": RowwiseParallel(output_layouts=Shard(1)),
        })
        return block

    g = torch.Generator().manual_seed(7)
    data = [(torch.randn(2, 8, 64, generator=g), torch.randn(2, 8, 64, generator=g)) for _ in range(steps)]
    rank = dist.get_rank()
    data = [(x.chunk(world, dim=1)[rank].contiguous(), y.chunk(world, dim=1)[rank].contiguous()) for x, y in data]

    def train(compiled):
        block = make()
        step_fn = block
        if compiled:
            from torch import _dynamo
            _dynamo.reset()
            step_fn = torch.compile(block, backend="aot_eager")
        opt = torch.optim.SGD(block.parameters(), lr=0.05)
        losses = []
        for x, y in data:
            out = step_fn(x)
            loss = F.mse_loss(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            total = loss.detach().clone()
            dist.all_reduce(total)
            losses.append(float(total) / world)
        return losses

    dt.reset_stats()
    with dt.enabled():
        eager = train(False)
        routed = dt.stats()["routed"]
        compiled = train(True)
    stats = dt.stats()
    diff = max(abs(a - b) for a, b in zip(eager, compiled))
    result["train"] = {"eager": eager, "compiled": compiled, "largest_difference": diff, "traced": stats["traced"],
                       "routed_eager": routed, "fallbacks": stats["fallbacks"]}
    scale = max(abs(v) for v in eager)
    if not diff <= 1e-5 * scale:
        result["wrong"].append(f"train: compiled losses differ from eager's by {diff} (losses ~{scale:.3g})")
    if stats["traced"] < 1:
        result["wrong"].append(f"train: nothing was traced ({stats})")
    if any(k == "tracing" or k == "tensor subclass" for k in stats["fallbacks"]):
        result["wrong"].append(f"train: traced redistributions fell back: {stats['fallbacks']}")


def run(rank, world, port, modes, cases, graph_cases, out_dir, backend="aot_eager"):
    sys.path.insert(0, HERE)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    from mp_worker import mesh_maker
    mesh_of = mesh_maker()
    result = {"checked": 0, "graph_checked": 0, "strided_checked": 0, "graph_kinds": [], "wrong": []}
    try:
        if "pairs" in modes:
            run_pairs(mesh_of, cases, backend, result, world)
        if "graph" in modes:
            run_graph(mesh_of, graph_cases, result)
        if "strided" in modes:
            run_strided(mesh_of, result, world)
        if "train" in modes:
            run_train(result)
    except Exception as e:  # noqa: BLE001
        result["wrong"].append(f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}")
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)
