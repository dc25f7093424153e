"""The drop-in switch: enable() routes torch's redistribute_local_tensor through dtensor."""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import _are_we_tracing
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
from torch.distributed.tensor.placement_types import _StridedShard

from .. import _core
from . import _execution as _ex
from . import _order_mends, _traced, _versions
from ._execution import _Call, _default_group, _model_key, _programs, _recall, _remember, _routes, _runner
from ._layout import _REDUCE_OPS, _TO_DTYPE, _spec_of, layout_of


# ---------------------------------------------------------------- the drop-in switch

# where torch calls redistribute_local_tensor (every module that imported it by name) and its
# signature: the same on every supported minor (_versions)
_TORCH_MODULES = _versions.REDISTRIBUTE_MODULES
_P = inspect.Parameter
_TESTED_SIGNATURE = list(_versions.REDISTRIBUTE_SIGNATURE)
_MODELLED = (Shard, _StridedShard, Replicate, Partial)


class _Switch:
    def __init__(self):
        self.originals: dict = {}  # module -> torch's own function it held
        self.original = None
        self.cost_model: Any = "default"
        self.model_key: Any = "default"


_switch = _Switch()
_switch_lock = threading.RLock()
_stats = {"routed": 0, "traced": 0, "plan_cache_hits": 0, "plan_cache_misses": 0}
_fallbacks: dict = {}


def stats() -> dict:
    """What the switch did since the last reset_stats(): redistributions dtensor ran ("routed"),
    redistributions lowered into a captured graph ("traced": once per graph, at trace time;
    compiled calls do not come back to Python), how many eager calls found their plan (and
    executor) cached, and the calls handed to torch's own function ("fallbacks", by reason)."""
    return {**_stats, "fallbacks": dict(_fallbacks)}


def reset_stats() -> None:
    for k in _stats:
        _stats[k] = 0
    _fallbacks.clear()


def is_enabled() -> bool:
    return _switch.original is not None


def _check_torch(fn) -> None:
    """The switch runs on the torch minors of the version table (_versions: 2.11 to 2.15), whose
    redistribute_local_tensor has the signature it is tested with."""
    _versions.current()  # RuntimeError naming the version and the range
    got = [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    if got != _TESTED_SIGNATURE:
        raise RuntimeError(
            f"dtensor.torch.enable(): torch {torch.__version__}'s redistribute_local_tensor{inspect.signature(fn)} "
            f"differs from the one dtensor's switch is tested with (torch {_versions.RANGE}); "
            "use dtensor.torch.redistribute() instead")


def enable(cost_model: Any = "default") -> None:
    """Routes torch's redistributions through dtensor: replaces torch's redistribute_local_tensor
    in every torch module that imported it, so explicit `x.redistribute(...)`, `full_tensor()`,
    the implicit redistributions of sharding propagation and their backward passes all run
    dtensor's plan (under `cost_model`) on torch.distributed; under torch.compile (and make_fx)
    the plan is lowered into the traced graph. Layouts dtensor does not model, meta tensors,
    other tensor subclasses and ranks not on the mesh fall back to torch's own function (see
    stats()). RuntimeError on a torch outside 2.11-2.15 (the
    version table, _versions), or whose function's signature differs from the tested one."""
    import importlib
    if isinstance(cost_model, (str, os.PathLike)) and os.fspath(cost_model) not in ("default", "pytorch"):
        _core.CostModel.load(os.fspath(cost_model))  # a bad profile fails here, naming it, not inside torch
    key = _model_key(cost_model)
    if key is None:
        raise TypeError(f"cost_model: expected \"default\", \"pytorch\", a profile path or a dtensor.CostModel, "
                        f"got {type(cost_model).__name__}")
    with _switch_lock:
        if _switch.original is None:
            base = importlib.import_module(_TORCH_MODULES[0])
            original = base.redistribute_local_tensor
            _check_torch(original)
            for name in _TORCH_MODULES:
                try:
                    mod = importlib.import_module(name)
                except ImportError:
                    continue
                if getattr(mod, "redistribute_local_tensor", None) is original:
                    _switch.originals[mod] = original
                    mod.redistribute_local_tensor = _routed
            _switch.original = original
            # a DTensor entering a compiled region keeps its explicit order (_order_mends)
            _order_mends.install(ops=False)
        _switch.cost_model, _switch.model_key = cost_model, key


def disable() -> None:
    """Restores torch's own redistribute_local_tensor everywhere enable() replaced it."""
    with _switch_lock:
        for mod, fn in _switch.originals.items():
            mod.redistribute_local_tensor = fn
        _switch.originals.clear()
        _switch.original = None
        _switch.cost_model, _switch.model_key = "default", "default"


@contextlib.contextmanager
def enabled(cost_model: Any = "default"):
    """`with dtensor.torch.enabled(): ...`: enable() for the block; on leaving it (also by an
    exception) the switch is as it was before, torch's function restored if it was off."""
    with _switch_lock:
        was_on, before = is_enabled(), _switch.cost_model
        enable(cost_model)
    try:
        yield
    finally:
        with _switch_lock:
            if was_on:
                enable(before)
            else:
                disable()


def _fallback_reason(local_tensor: torch.Tensor, current_spec, target_spec) -> Optional[str]:
    """Why dtensor does not run this redistribution (None: it does); checked once per spec pair."""
    if current_spec.mesh != target_spec.mesh:
        return "mesh change"
    if not current_spec.mesh._is_current_rank_part_of_mesh():
        return "rank not on mesh"
    if local_tensor.device.type == "meta":
        return "meta tensor"
    for p in (*current_spec.placements, *target_spec.placements):
        if type(p) not in _MODELLED:
            return f"placement {type(p).__name__}"
    ops = {p.reduce_op for p in (*current_spec.placements, *target_spec.placements) if type(p) is Partial}
    if len(ops) > 1:
        return "mixed partial ops"
    if ops and next(iter(ops)) not in _REDUCE_OPS:
        return f"Partial({next(iter(ops))})"
    if current_spec.tensor_meta is None:
        return "no tensor meta"
    if current_spec.tensor_meta.dtype not in _TO_DTYPE:
        return f"dtype {current_spec.tensor_meta.dtype}"
    if any(not isinstance(n, int) for n in current_spec.tensor_meta.shape):
        return "symbolic shape"  # a trace with dynamic shapes: plans need concrete sizes
    return None


def _spec_layout(spec: DTensorSpec) -> _core.Layout:
    meta = spec.tensor_meta
    order = None if spec.use_strided_shard_as_shard_order else spec.shard_order
    return layout_of(spec.mesh, spec.placements, meta.shape, meta.dtype, order)


def _route_key(local_tensor, current_spec, target_spec) -> tuple:
    """What a routed call's decision depends on: both specs, how each carries its order, the cost
    model and the device."""
    return (current_spec, target_spec, current_spec.use_strided_shard_as_shard_order,
            target_spec.use_strided_shard_as_shard_order, _switch.model_key, local_tensor.device)


def _route_plan(local_tensor, current_spec, target_spec):
    """(source layout, target layout, plan) for this spec pair, or the reason to fall back (str)."""
    reason = _fallback_reason(local_tensor, current_spec, target_spec)
    if reason is not None:
        return reason
    try:
        src = _spec_layout(current_spec)
        dst = layout_of(target_spec.mesh, target_spec.placements, current_spec.tensor_meta.shape,
                        current_spec.tensor_meta.dtype,
                        None if target_spec.use_strided_shard_as_shard_order else target_spec.shard_order)
    except ValueError as e:
        return f"layout ({str(e).splitlines()[0][:80]})"
    return src, dst, _ex._cache.get(src, dst, _switch.cost_model)


def _route(local_tensor, current_spec, target_spec):
    """The _Call for this spec pair, or the reason to fall back."""
    routed = _route_plan(local_tensor, current_spec, target_spec)
    if isinstance(routed, str):
        return routed
    src, dst, plan = routed
    return _Call(current_spec.mesh, src, dst, plan, local_tensor.device)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _named(e: Exception, current_spec, target_spec) -> Exception:
    """`e` with the placements, mesh and rank of the redistribution it came from."""
    rank = dist.get_rank() if dist.is_initialized() else "?"
    msg = (f"dtensor.torch: {list(current_spec.placements)} -> {list(target_spec.placements)} on "
           f"{current_spec.mesh}, rank {rank}: {e}")
    try:
        return type(e)(msg)
    except Exception:  # noqa: BLE001 - an exception type with another constructor
        return RuntimeError(msg)


def _routed(local_tensor, current_spec, target_spec, *, async_op=False, use_graph_based_transform=None,
            is_explicit=False):
    """torch's redistribute_local_tensor, run by dtensor (installed by enable())."""
    original = _switch.original
    if original is None:  # disabled while a reference to this function was held
        original = sys.modules[_TORCH_MODULES[0]].redistribute_local_tensor
        if original is _routed:
            raise RuntimeError("dtensor.torch: torch's redistribute_local_tensor is not known")
        return original(local_tensor, current_spec, target_spec, async_op=async_op,
                        use_graph_based_transform=use_graph_based_transform, is_explicit=is_explicit)
    if _are_we_tracing():
        # torch.compile / make_fx: dtensor's plan as functional collectives and views (_traced)
        reason = _traced.traceable(local_tensor)
        if reason is None:
            reason = _traced_run(local_tensor, current_spec, target_spec)
            if not isinstance(reason, str):
                return reason
    elif type(local_tensor) not in _PLAIN:
        reason = "tensor subclass"  # async-collective and other wrapper tensors
    else:
        key = _route_key(local_tensor, current_spec, target_spec)
        call = _recall(_routes, key)
        if call is None or (type(call) is _Call and call.world is not _default_group()):
            _stats["plan_cache_misses"] += 1
            try:
                call = _route(local_tensor, current_spec, target_spec)
            except Exception as e:
                raise _named(e, current_spec, target_spec) from e
            _remember(_routes, key, call)
        elif type(call) is _Call:
            _stats["plan_cache_hits"] += 1
        if type(call) is _Call:
            if local_tensor.shape == call.src_shape:
                _stats["routed"] += 1
                try:
                    return call.run(local_tensor, bool(async_op))
                except Exception as e:
                    raise _named(e, current_spec, target_spec) from e
            reason = "uneven local shape"  # e.g. DTensor.from_local with shapes torch's rules do not give
        else:
            reason = call
    _fallbacks[reason] = _fallbacks.get(reason, 0) + 1
    return original(local_tensor, current_spec, target_spec, async_op=async_op,
                    use_graph_based_transform=use_graph_based_transform, is_explicit=is_explicit)


def _traced_run(local_tensor, current_spec, target_spec):
    """The redistribution lowered to traceable ops (a tensor), or the reason to fall back (str)."""
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():  # planning and process groups are host work, outside the trace
        try:
            routed = _route_plan(local_tensor, current_spec, target_spec)
            if isinstance(routed, str):
                return routed
            src, _, plan = routed
            runner = _runner(current_spec.mesh, local_tensor.device)
        except Exception as e:
            raise _named(e, current_spec, target_spec) from e
    if list(local_tensor.shape) != list(src.local_shape(runner.comm.rank)):
        return "uneven local shape"  # as in eager mode: a from_local shard torch's rules do not give
    if all(st.kind == "relabel" for st in plan.steps):
        out = local_tensor  # nothing moves (as eager: the input itself)
    else:
        key = (*_route_key(local_tensor, current_spec, target_spec), id(_default_group()))
        try:
            out = _traced.traced(key, plan, runner, local_tensor, _programs, _remember, _recall)
        except Exception as e:
            raise _named(e, current_spec, target_spec) from e
    if _traced.is_capture():
        _stats["traced"] += 1
    return out
