"""Runners (a communicator, its executors and workspace per mesh and device), the calls they run, and the module's caches."""

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
from ._communicator import _Failing, _TorchComm
from ._layout import _mesh_info, _meshes, _mesh_lock, _spec_of, layout_of


# When the ranks' plans are compared: "first_use" (the default: once per plan and process group,
# when its executor is made) or "every_call" (also one exchange of plan hashes over the mesh, an
# all_reduce of one int64 per rank, at the start of every redistribution, so a rank that asks for
# another target than its peers after both plans were cached fails on every rank with the
# plan-hash message; on gloo that exchange costs about as much as a small collective, see
# docs/python.md). DTENSOR_PLAN_CHECK sets it for a process; set_plan_check takes effect on the
# next call, cached calls included.
_PLAN_CHECKS = ("first_use", "every_call")


def set_plan_check(mode: str) -> None:
    """"first_use" (the default) or "every_call": when the ranks' plans are compared (see above)."""
    global _plan_check
    if mode not in _PLAN_CHECKS:
        raise ValueError(f"plan check {mode!r}: expected \"first_use\" or \"every_call\"")
    _plan_check = mode  # read on every call: cached calls take it at once


_plan_check = os.environ.get("DTENSOR_PLAN_CHECK") or "first_use"
if _plan_check not in _PLAN_CHECKS:
    raise ValueError(f"DTENSOR_PLAN_CHECK={_plan_check!r}: expected \"first_use\" or \"every_call\"")


class _Runner:
    """dtensor's communicator over one DeviceMesh's process groups on one device, the executors of
    the plans it ran, and one workspace they share (grown to the largest plan's need)."""

    def __init__(self, device_mesh: DeviceMesh, device: torch.device, host_copies: bool):
        self.host_copies = host_copies
        self.info = _mesh_info(device_mesh)
        self.impl = _TorchComm(device_mesh, self.info, device)
        self.comm = _core._PyCommunicator(self.info.mesh, self.info.dense[self.impl.my_rank], self.impl, host_copies)
        self.executors: OrderedDict = OrderedDict()
        self.lock = threading.Lock()
        self.device = device
        self.world = _default_group()
        self.workspaces: dict = {}  # stream (GPU) or None (CPU) -> uint8 tensor
        # (output, work) of an async_op call (CPU) whose last collective is in flight, the work
        # registered on the output with torch's functional-collective registry: waited (once,
        # through the registry) before the next run
        self.in_flight = None

    def executor(self, plan: _core.Plan):
        """The executor of `plan` on this runner, made (a collective: the plan hashes are compared)
        on its first use only; the every_call check is made per call by run()."""
        key = (plan.hash, str(plan.src), str(plan.dst), plan.cost_model)
        return self._cached(key, lambda: _core._Executor(plan, self.comm, True, False))

    def batch_executor(self, batch: _core.BatchPlan):
        """The batch executor of `batch` on this runner, made (a collective: the batch hashes are
        compared) on its first use only."""
        key = ("batch", batch.hash, len(batch), batch.cost_model)
        return self._cached(key, lambda: _core._BatchExecutor(batch, self.comm))

    def _cached(self, key, make):
        """The executor under `key`, made by make() on a miss; the 256 most recently used are kept."""
        ex = _recall(self.executors, key)
        if ex is None:
            ex = make()
            _remember(self.executors, key, ex, 256)
        return ex

    def set_buffers(self, *tensors) -> None:
        """The call's buffers (None and empty ones left out), the same list to both sides: the C++
        communicator locates the executor's addresses in them, the Python one views them."""
        ts = [t for t in tensors if t is not None and t.numel() > 0]
        self.impl.set_buffers(*ts)
        self.comm._set_buffers([(t.data_ptr(), t.numel() * t.element_size()) for t in ts])

    def _workspace(self, nbytes: int) -> Optional[torch.Tensor]:
        if nbytes <= 0:
            return None
        # on a GPU the work is ordered on the current stream: one workspace per stream, so a call
        # on another stream never overwrites one still in use
        stream = torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else None
        ws = self.workspaces.get(stream)
        if ws is None or ws.numel() < nbytes:
            ws = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
            self.workspaces[stream] = ws
        return ws

    def drain(self) -> None:
        """Waits for the collective an async_op call left in flight (it may read the workspace).

        The work is registered on the call's output, which waits for it on first use as well:
        both go through torch's registry (wait_tensor pops the work), so whichever comes first
        waits and the other finds nothing. A work waited twice would block: gloo's send/recv
        works wait for a second completion that never comes."""
        pending, self.in_flight = self.in_flight, None
        if pending is not None:
            with _Failing(self.impl, "the wait for an async_op call's last collective", None):
                torch.ops._c10d_functional.wait_tensor(pending[0])

    def run(self, ex, local: torch.Tensor, out: torch.Tensor, async_op: bool = False, check: Optional[int] = None):
        """Runs `ex`; with async_op on CPU, returns the work of its last collective left in flight
        (None when everything completed). `check`: a plan hash compared over the mesh first."""
        with self.lock:
            self.drain()
            if check is not None:  # before anything moves
                self.comm.check_plans_agree(check)
            need = ex.workspace_bytes
            ws = self._workspace(need)
            self.set_buffers(local, out, ws)
            defer = async_op and self.device.type == "cpu" and ex.ends_with_collective
            if defer:
                self.impl.begin_async(ex.collectives - 1)
            work = None
            try:
                ex.execute(local.data_ptr(), local.numel() * local.element_size(), out.data_ptr(),
                           out.numel() * out.element_size(), 0 if ws is None else ws.data_ptr(), max(need, 0))
            finally:
                if defer:
                    work = self.impl.end_async()
                self.impl.buffers = ()
                self.impl.views = None
            if work is not None:
                # as torch's funcol does: the tensor waits for its collective on first use
                torch._C._distributed_c10d._register_work(out, work)
                self.in_flight = (out, work)
            return work


def _default_group():
    return dist.distributed_c10d._world.default_pg


_cache = _core.PlanCache(4096)
# Batch plans by their pairs: a training loop moves the same tensors every step.
_batch_cache = _core.BatchPlanCache(256)
# the drop-in switch's routed calls by (source spec, target spec, cost model, device): a _Call, or
# the reason (str) to fall back to torch's function
_routes: OrderedDict = OrderedDict()
_runners: dict[tuple, _Runner] = {}
# the switch's traced calls (torch.compile): each one's recorded program (_traced._Program)
_programs: OrderedDict = OrderedDict()
_runners_lock = threading.Lock()


class _Call:
    """One redistribution as it runs every time: (source, target, cost model) on one mesh and
    device, with its executor, the local shapes and the target's DTensorSpec worked out once."""

    __slots__ = ("runner", "ex", "src_shape", "out_shape", "alias", "spec", "world", "src", "dst", "plan_hash", "shared")

    def __init__(self, device_mesh, src: _core.Layout, dst: _core.Layout, plan: _core.Plan, device: torch.device):
        self.runner = _runner(device_mesh, device)
        self.world = self.runner.world
        rank = self.runner.comm.rank
        self.src, self.dst = src, dst
        self.src_shape = torch.Size(src.local_shape(rank))
        self.out_shape = tuple(dst.local_shape(rank))
        # equivalent layouts (a plan of relabel steps only) give every rank the same data: the
        # output is the input tensor itself, as torch's redistribute returns it
        self.alias = all(s.kind == "relabel" for s in plan.steps)
        self.ex = None if self.alias else self.runner.executor(plan)
        self.plan_hash = plan.hash
        self.shared = self.runner.info.mesh.num_ranks > 1  # peers whose plan must agree
        self.spec = None

    def run(self, local: torch.Tensor, async_op: bool = False) -> torch.Tensor:
        if local.shape != self.src_shape:
            raise ValueError(f"rank {dist.get_rank()}: local tensor of shape {list(local.shape)}, but the layout "
                             f"{self.src} gives this rank {list(self.src_shape)}")
        if self.alias:
            # nothing moves, but a peer may be running another plan: the hashes still meet
            if self.shared and _plan_check == "every_call":
                with self.runner.lock:
                    self.runner.comm.check_plans_agree(self.plan_hash)
            return local
        if not local.is_contiguous():
            local = local.contiguous()
        out = torch.empty(self.out_shape, dtype=local.dtype, device=local.device)
        work = self.runner.run(self.ex, local, out, async_op,
                               self.plan_hash if self.shared and _plan_check == "every_call" else None)
        if work is None:
            return out
        # registered on `out` by the runner: the tensor waits for its collective on first use
        from torch.distributed._functional_collectives import AsyncCollectiveTensor
        return AsyncCollectiveTensor(out)


# redistributions by (source spec, target, cost model, device): the per-call path is one lookup
_calls: OrderedDict = OrderedDict()
_CALLS_MAX = 4096


# The one eviction rule of the module's caches (calls, the switch's routes, a runner's executors):
# least recently used first, past a bound; _recall is a lookup that counts as a use.
def _remember(table: OrderedDict, key, value, limit: int = _CALLS_MAX) -> None:
    table[key] = value
    table.move_to_end(key)
    if len(table) > limit:
        table.popitem(last=False)


def _recall(table: OrderedDict, key):
    value = table.get(key)
    if value is not None:
        table.move_to_end(key)
    return value


def clear_caches() -> None:
    """Forgets cached plans, executors, workspaces and process groups (e.g. after
    destroy_process_group)."""
    _cache.clear()
    _batch_cache.clear()
    _calls.clear()
    _routes.clear()
    _programs.clear()
    with _runners_lock:
        _runners.clear()
    with _mesh_lock:
        _meshes.clear()


def _at_exit() -> None:
    """Releases executors, communicators and the module's plan cache before the interpreter
    tears the extension down (nanobind reports instances still alive then as leaks)."""
    global _cache, _batch_cache
    clear_caches()
    _cache = None
    _batch_cache = None


atexit.register(_at_exit)


def _runner(device_mesh: DeviceMesh, device: torch.device) -> _Runner:
    # (a test switch, set on the package: dtensor.torch._torch_local_copies_on_cpu)
    host_copies = device.type == "cpu" and not sys.modules[__package__]._torch_local_copies_on_cpu
    key = (id(device_mesh), str(device), id(_default_group()), host_copies)
    with _runners_lock:
        r = _runners.get(key)
        if r is None or r.impl.device_mesh is not device_mesh:
            r = _Runner(device_mesh, device, host_copies)
            _runners[key] = r
        return r


def _model_key(cost_model) -> Any:
    """A hashable stand-in for a cost model argument that changes when the model does (a profile
    file: its path, size and modification time), or None when there is none."""
    if isinstance(cost_model, str):
        if cost_model in ("default", "pytorch"):
            return cost_model
        try:
            st = os.stat(cost_model)
        except OSError:
            return None
        return (cost_model, st.st_mtime_ns, st.st_size)
    if isinstance(cost_model, _core.CostModel):
        return ("profile", cost_model.fingerprint)
    if hasattr(cost_model, "__fspath__"):
        return _model_key(os.fspath(cost_model))
    return None


def _target_layout(x: DTensor, placements, shard_order) -> _core.Layout:
    if isinstance(placements, str):  # dtensor's own notation, e.g. "RS(0)" or "S(0)[1]S(0)[0]"
        if shard_order is not None:
            raise ValueError("shard_order= goes with a list of placements; the text form carries [k] positions itself")
        src = layout_of(x)
        return _core.Layout(src.mesh, list(src.shape), placements, dtype=src.dtype)
    return layout_of(x.device_mesh, placements, x.shape, x.dtype, shard_order)


def _placements_arg(placements):
    if isinstance(placements, str):
        return placements
    try:
        return tuple(placements)
    except TypeError:
        raise ValueError(f"placements: expected a sequence of torch placements or dtensor's text form, "
                         f"got {type(placements).__name__}") from None


def _call_for(x: DTensor, placements, shard_order, cost_model, cache) -> _Call:
    spec = x._spec
    device = x._local_tensor.device
    key = None
    if cache is None:
        mk = _model_key(cost_model)
        if mk is not None:
            try:
                key = (spec, spec.use_strided_shard_as_shard_order, placements, shard_order, mk, device)
                call = _recall(_calls, key)
            except TypeError:  # an unhashable argument (e.g. a shard order of lists): no caching
                key, call = None, None
            if call is not None and call.world is _default_group():
                return call
    src, dst = layout_of(x), _target_layout(x, placements, shard_order)
    plan = (cache if cache is not None else _cache).get(src, dst, cost_model)
    call = _Call(x.device_mesh, src, dst, plan, device)
    call.spec = _spec_of(x.device_mesh, dst)
    if key is not None:
        _remember(_calls, key, call)
    return call
