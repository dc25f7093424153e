"""PyTorch integration: dtensor layouts of torch DTensors, and redistributions planned by dtensor
and run as torch.distributed collectives.

    import dtensor.torch as dt
    y = dt.redistribute(x, [Shard(1), Replicate()])          # x: a torch DTensor
    print(dt.plan_for(x, [Shard(1), Replicate()]).explain())

Placements are torch's own (``Shard``, ``_StridedShard``, ``Replicate``, ``Partial``). A shard
order is torch's form too: a tuple of ``ShardOrderEntry(tensor_dim, mesh_dims)`` with each sharded
tensor dim's mesh dims in split order (first = outermost split); ``None`` means ascending mesh
dim order. Layouts with ``_StridedShard`` carry their order in the placements (torch's
convention), so they take no separate shard order.

``redistribute`` runs on the tensor's own device and the process groups of ``x.device_mesh``
(gloo on CPU, NCCL on GPU): dtensor's executor decides every copy and collective (from the plan)
and torch.distributed moves the data. Every rank must call it with the same arguments, as for any
collective. It is differentiable with torch's rule.

``enable()`` / ``disable()`` / ``with enabled():`` put dtensor inside torch's own loop: torch's
``redistribute_local_tensor`` is replaced, so ``x.redistribute``, ``full_tensor()``, the implicit
redistributions of DTensor ops and their backward passes run dtensor's plans; ``stats()`` says
how many, and which calls fell back to torch's function and why.
"""
# The package by concern: _layout (layouts of DTensors and back), _communicator (dtensor's
# Communicator on torch.distributed), _execution (runners, calls and the module's caches), _api
# (redistribute, many tensors, cross-mesh) and _dropin (the switch). Every name the module had
# before it became a package is here; the three that are rebound at run time (the plan caches,
# released at exit, and the plan-check mode) are read live from _execution.
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

__all__ = ["layout_of", "placements_of", "distribute", "redistribute", "redistribute_many", "plan_many", "reshard",
           "plan_reshard", "plan_for", "clear_caches", "enable", "disable", "enabled", "is_enabled", "stats", "reset_stats",
           "set_plan_check", "RaggedShard", "redistribute_local", "plan_local"]

# For tests: run the executor's local copies as torch ops (the GPU path) on CPU tensors too (read
# by _execution._runner on this package).
_torch_local_copies_on_cpu = False

from . import _execution  # noqa: E402 (the live names below)
from ._layout import (  # noqa: E402,F401
    _FROM_DTYPE, _IDENTITY, _MeshInfo, _REDUCE_OPS, _TO_DTYPE, _dtype_name,
    _mesh_info, _mesh_lock, _meshes, _shard_order_arg, _spec_of,
    _to_core_placement, distribute, layout_of, placements_of,
)
from ._communicator import (  # noqa: E402,F401
    _Failing, _TorchComm, _set_timeout, _timeout_of,
)
from ._execution import (  # noqa: E402,F401
    _CALLS_MAX, _Call, _PLAN_CHECKS, _Runner, _at_exit, _call_for, _calls, _default_group,
    _model_key, _placements_arg, _remember, _routes, _runner, _runners, _runners_lock,
    _target_layout, clear_caches, set_plan_check,
)
from ._api import (  # noqa: E402,F401
    _Redistribute, _RedistributeMany, _redistribute_many, _world_mesh, _world_meshes, plan_for,
    plan_many, plan_reshard, redistribute, redistribute_many, reshard,
)
from ._ragged import RaggedShard, plan_local, redistribute_local  # noqa: E402,F401
from ._dropin import (  # noqa: E402,F401
    _MODELLED, _P, _PLAIN, _Switch, _TESTED_SIGNATURE, _TORCH_MODULES, _check_torch,
    _fallback_reason, _fallbacks, _named, _route, _routed, _spec_layout, _stats, _switch,
    _switch_lock, disable, enable, enabled, is_enabled, reset_stats, stats,
)


def __getattr__(name: str):
    if name in ("_cache", "_batch_cache", "_plan_check"):  # rebound at run time: read live
        return getattr(_execution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"_cache", "_batch_cache", "_plan_check"})
