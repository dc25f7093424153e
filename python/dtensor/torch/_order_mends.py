"""Where torch loses the explicit shard order of a DTensor, and how dtensor.torch mends it.

dtensor.torch makes DTensors whose spec carries an explicit, non-default shard order
(`S(0)[1]S(0)[0]`: `shard_order` set and `use_strided_shard_as_shard_order` False). torch's own
public API makes none, and three of its paths lose the order while the local data stays laid out
in it, so the spec misdescribes the data (docs/torch-defects.md records each per version):

  `to_local`'s backward (2.11-2.15) rebuilds the gradient with `DTensor.from_local`, which takes
      no order;
  `DTensor.__tensor_unflatten__`, which rebuilds a DTensor entering a compiled region: 2.11 drops
      the order (the trace computes with the default one: wrong values, or ranks falling back
      differently and hanging); 2.15 keeps a plain order but raises on a `_StridedShard` spec
      with an explicit order;
  layout-preserving ops (`detach`, `alias`, `clone`, `contiguous`, `zero_`, `fill_`, and what
      autograd's `.grad` accumulation calls: `new_empty_strided` + `copy_`, `add_`, `add`): torch
      chooses their sharding one mesh dim at a time, which cannot express an order, so 2.15
      redistributes the input to another layout (an `S(0)[1]S(0)[0]` leaf's `.grad` comes out
      `[Replicate, Shard(0)]`) and 2.11 keeps the data under the default order.

`install()` puts the three mends in place, once per process; dtensor calls it when it makes the
first DTensor with an explicit order (and `enable()` installs the unflatten mend). Each mend acts
only on specs with an explicit, non-default order and leaves every other DTensor to torch exactly
as before (the op handlers hand those back to torch's own dispatch).
"""

from __future__ import annotations

import threading
from typing import Optional

import torch
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor.placement_types import _StridedShard

_lock = threading.Lock()
_installed = {"to_local": False, "unflatten": False, "ops": False}
_originals: dict = {}  # torch's own functions the mends wrap (tests compare against them)


def explicit_order(placements, order) -> bool:
    """Whether `order` (a `shard_order`) is an explicit one for `placements`: set beside
    `_StridedShard` placements, or other than the default."""
    if order is None:
        return False
    if any(isinstance(p, _StridedShard) for p in placements):
        return True
    return tuple(order) != tuple(DTensorSpec.compute_default_shard_order(tuple(placements)))


def explicit(spec: DTensorSpec) -> bool:
    """Whether `spec` carries an explicit shard order torch's per-dim rules cannot express: its
    `shard_order` holds the order (not its `_StridedShard` placements) and differs from the
    default, or it holds one beside `_StridedShard` placements."""
    return not spec.use_strided_shard_as_shard_order and explicit_order(spec.placements, spec.shard_order)


def with_order(spec: DTensorSpec, order, tensor_meta=None) -> DTensorSpec:
    """`spec` with the explicit shard order `order` (and `tensor_meta` when given)."""
    meta = spec.tensor_meta if tensor_meta is None else tensor_meta
    strided = any(isinstance(p, _StridedShard) for p in spec.placements)
    return DTensorSpec(spec.mesh, tuple(spec.placements), tensor_meta=meta, shard_order=tuple(order),
                       **({"use_strided_shard_as_shard_order": False} if strided else {}))


# ---------------------------------------------------------------- to_local's backward

def _keep_order_through_to_local() -> None:
    """torch's `to_local` backward (`_ToTorchTensor`) rebuilds the gradient with
    `DTensor.from_local`: where the forward's spec had an order the rebuilt gradient lost (same
    placements otherwise), the gradient gets the order back. It also works out the gradient's
    global stride from the rank's own local stride (an empty or strided shard gives another one
    than its peers'), and autograd's `.grad` accumulation then copies (a redistribution: a
    collective) on some ranks and not on others, which hangs (2.11: `_S(1,2)S(1) ->
    _S(1,3)_S(0,2)` of 3x2); a stride that differs from the forward spec's is replaced by that
    spec's, which every rank shares. DTensors whose gradient agrees with the forward's spec are
    never touched."""
    from torch.distributed.tensor import _api
    original = _originals["to_local"] = _api._ToTorchTensor.backward

    def backward(ctx, grad_output):
        grad, *rest = original(ctx, grad_output)
        spec = getattr(ctx, "dtensor_spec", None)
        if not isinstance(grad, DTensor) or spec is None or spec.tensor_meta is None:
            return (grad, *rest)
        g = grad._spec
        meta = g.tensor_meta
        if meta is not None and meta.shape == spec.tensor_meta.shape and meta.stride != spec.tensor_meta.stride:
            meta = TensorMeta(meta.shape, spec.tensor_meta.stride, meta.dtype)
        order = g.shard_order
        if not spec.use_strided_shard_as_shard_order:
            want = tuple(Replicate() if p.is_partial() else p for p in spec.placements)
            if tuple(g.placements) == want and g.shard_order != spec.shard_order:
                order = spec.shard_order
        if meta is not g.tensor_meta or order != g.shard_order:
            fixed = with_order(g, order, meta) if order is not None and explicit_order(g.placements, order) \
                else DTensorSpec(g.mesh, tuple(g.placements), tensor_meta=meta, shard_order=g.shard_order,
                                 use_strided_shard_as_shard_order=g.use_strided_shard_as_shard_order)
            grad = DTensor(grad._local_tensor, fixed, requires_grad=grad.requires_grad)
        return (grad, *rest)

    _api._ToTorchTensor.backward = staticmethod(backward)


# ---------------------------------------------------------------- a DTensor entering a trace

def carried_order(ctx) -> Optional[tuple]:
    """The explicit shard order a `__tensor_flatten__` context carries (None: none, or a context
    of a form not known here). Two forms are known: (spec, requires_grad) (2.11, the whole spec)
    and (placements, tensor_meta, shard_order, requires_grad) (2.15, the order alone: with
    `_StridedShard` placements a set order can only be an explicit one, since a spec whose
    placements carry the order holds none)."""
    if not isinstance(ctx, tuple) or not ctx:
        return None
    if isinstance(ctx[0], DTensorSpec):
        return tuple(ctx[0].shard_order) if explicit(ctx[0]) else None
    if len(ctx) == 4 and isinstance(ctx[2], tuple) and ctx[2]:
        return tuple(ctx[2]) if explicit_order(ctx[0], ctx[2]) else None
    return None


def _keep_order_through_unflatten() -> None:
    """`DTensor.__tensor_unflatten__` keeps the order `__tensor_flatten__` carried (2.11 drops it;
    2.15 raises on a `_StridedShard` spec with one: torch is handed the context without the order
    there and the order is put back on its result)."""
    original = _originals["unflatten"] = DTensor.__tensor_unflatten__

    def unflatten(inner_tensors, flatten_spec, outer_size, outer_stride):
        order = carried_order(flatten_spec)
        if order is None:
            return original(inner_tensors, flatten_spec, outer_size, outer_stride)
        ctx = flatten_spec
        if not isinstance(ctx[0], DTensorSpec) and any(isinstance(p, _StridedShard) for p in ctx[0]):
            ctx = (ctx[0], ctx[1], None, ctx[3])
        out = original(inner_tensors, ctx, outer_size, outer_stride)
        spec = out._spec
        if not spec.use_strided_shard_as_shard_order and spec.shard_order == order:
            return out
        return DTensor(out._local_tensor, with_order(spec, order), requires_grad=out.requires_grad)

    DTensor.__tensor_unflatten__ = staticmethod(unflatten)


# ---------------------------------------------------------------- layout-preserving ops

aten = torch.ops.aten
# in-place ops return their first argument; the others a new DTensor of the input's layout
_IN_PLACE = (aten.zero_.default, aten.fill_.Scalar, aten.copy_.default, aten.add_.Tensor)
_NEW = (aten.detach.default, aten.alias.default, aten.clone.default, aten.contiguous.default,
        aten.new_empty_strided.default, aten.empty_like.default, aten.zeros_like.default, aten.add.Tensor)


def _one_spec(op, args, kwargs) -> Optional[DTensorSpec]:
    """The spec every DTensor argument of this call shares (the first argument's, whose explicit
    order `_handler` has checked), when it holds no Partial, every other argument is a plain value
    (no tensor), and a size argument is the global shape; None otherwise (torch's own dispatch
    takes the call)."""
    spec = None
    for a in (*args, *kwargs.values()):
        if isinstance(a, DTensor):
            s = a._spec
            if spec is None:
                spec = s
            elif (s.mesh != spec.mesh or tuple(s.placements) != tuple(spec.placements)
                  or s.shard_order != spec.shard_order
                  or s.use_strided_shard_as_shard_order != spec.use_strided_shard_as_shard_order
                  or s.tensor_meta is None or spec.tensor_meta is None or s.tensor_meta.shape != spec.tensor_meta.shape):
                return None
        elif isinstance(a, torch.Tensor):
            return None
    if spec is None or spec.tensor_meta is None or any(p.is_partial() for p in spec.placements):
        return None
    if op is aten.new_empty_strided.default and list(args[1]) != list(spec.tensor_meta.shape):
        return None
    return spec


def _global_meta(op, args, kwargs) -> TensorMeta:
    """The output's global shape, stride and dtype: the op on meta tensors of the global shapes."""
    def meta(a):
        if isinstance(a, DTensor):
            m = a._spec.tensor_meta
            return torch.empty_strided(m.shape, m.stride, dtype=m.dtype, device="meta")
        return a
    kw = {k: meta(v) for k, v in kwargs.items()}
    if "device" in kw:
        kw["device"] = "meta"
    out = op(*[meta(a) for a in args], **kw)
    return TensorMeta(out.shape, out.stride(), out.dtype)


def _local_call(op, args, kwargs):
    local = [a._local_tensor if isinstance(a, DTensor) else a for a in args]
    kw = {k: (v._local_tensor if isinstance(v, DTensor) else v) for k, v in kwargs.items()}
    if op is aten.new_empty_strided.default:
        # the rank's own shard: its local shape, contiguous
        shard = local[0]
        return shard.new_empty(shard.shape, **{k: v for k, v in kw.items() if k != "pin_memory"})
    return op(*local, **kw)


def _torch_dispatch(op, args, kwargs):
    """torch's own dispatch of `op` (this module's handler stands aside for the one call: it is
    taken out of the handler table and put back, so a call of the same op from another thread in
    that window goes to torch's dispatch too, which is what it would do without the mend)."""
    handlers = DTensor._op_dispatcher._custom_op_handlers
    removed = handlers.pop(op, None)  # one atomic step under the GIL: no lock on this path
    if removed is not None and removed is not _handler:
        handlers.setdefault(op, removed)  # not ours (cannot happen: installed only where absent)
        removed = None
    try:
        return op(*args, **kwargs)
    finally:
        if removed is not None:
            handlers.setdefault(op, _handler)


_explicit_memo: dict = {}  # spec -> explicit(spec): the first argument's spec, checked on every call


def _first_is_explicit(args) -> bool:
    a = args[0] if args else None
    if type(a) is not DTensor:
        return False
    spec = a._spec
    got = _explicit_memo.get(spec)
    if got is None:
        if len(_explicit_memo) >= 4096:
            _explicit_memo.clear()
        got = _explicit_memo[spec] = explicit(spec)
    return got


def _handler(op, args, kwargs):
    if not _first_is_explicit(args):  # the common case: straight back to torch
        return _torch_dispatch(op, args, kwargs)
    spec = _one_spec(op, args, kwargs)
    if spec is None:
        return _torch_dispatch(op, args, kwargs)
    out = _local_call(op, args, kwargs)
    if op in _IN_PLACE:
        return args[0]
    return DTensor(out, with_order(spec, spec.shard_order, _global_meta(op, args, kwargs)), requires_grad=False)


def _keep_order_through_ops() -> None:
    handlers = DTensor._op_dispatcher._custom_op_handlers
    for op in (*_IN_PLACE, *_NEW):
        if op not in handlers:  # never in place of a handler torch (or a user) installed
            handlers[op] = _handler


# ---------------------------------------------------------------- installing

def install(ops: bool = True) -> None:
    """The mends above, each once per process (`ops=False`: all but the op handlers)."""
    with _lock:
        todo = [k for k in ("to_local", "unflatten") + (("ops",) if ops else ()) if not _installed[k]]
        for k in todo:
            _installed[k] = True
    for k in todo:
        {"to_local": _keep_order_through_to_local, "unflatten": _keep_order_through_unflatten,
         "ops": _keep_order_through_ops}[k]()


def torch_unflatten():
    """torch's own `DTensor.__tensor_unflatten__` (for tests: what torch does without the mend)."""
    return _originals.get("unflatten", DTensor.__tensor_unflatten__)


class without_op_mends:
    """`with without_op_mends(): ...`: torch's own dispatch of the mended ops for the block (for
    tests, in one thread: what torch does without the mend)."""

    def __enter__(self):
        handlers = DTensor._op_dispatcher._custom_op_handlers
        with _lock:
            self.removed = [op for op in (*_IN_PLACE, *_NEW) if handlers.get(op) is _handler]
            for op in self.removed:
                del handlers[op]
        return self

    def __exit__(self, *exc):
        handlers = DTensor._op_dispatcher._custom_op_handlers
        with _lock:
            for op in self.removed:
                handlers.setdefault(op, _handler)
