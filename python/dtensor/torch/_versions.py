"""What differs between the torch minors dtensor.torch runs on (2.11 through 2.15), in one table.

Every fact here was found by running that torch, and each is checked on the running torch by
tests/python/test_torch_versions.py (scripts/python-versions.sh runs it on every minor). The rest
of the package reads the facts from here; it holds no version test of its own.

Facts the same on every supported minor (checked per version as well):
  - `redistribute_local_tensor(local_tensor, current_spec, target_spec, *, async_op=False,
    use_graph_based_transform=None, is_explicit=False)`, bound by name in the four modules of
    `REDISTRIBUTE_MODULES` (the drop-in switch replaces it in each);
  - a `DTensorSpec` carries its shard order as `shard_order` (a tuple of `ShardOrderEntry`) and
    `use_strided_shard_as_shard_order` (then the `_StridedShard` placements carry it);
  - `_StridedShard(dim, split_factor)`: the dim is cut into `split_factor` pieces (torch.chunk),
    each piece into the mesh dim's size, and a rank holds its chunk of every piece, in order;
    uneven sizes follow torch.chunk (ceil-sized chunks, trailing ones short or empty) — dtensor's
    `_S(d, sf)` (tests/python/test_layouts_vs_torch.py, thousands of layouts per version);
  - the functional collectives `all_gather_tensor`, `reduce_scatter_tensor`, `all_reduce`,
    `all_to_all_single` (split sizes along dim 0) and `wait_tensor`, as compiled regions use them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Optional

import torch

FIRST, LAST = (2, 11), (2, 15)
RANGE = f"{FIRST[0]}.{FIRST[1]} to {LAST[0]}.{LAST[1]}"

REDISTRIBUTE_MODULES = ("torch.distributed.tensor._redistribute", "torch.distributed.tensor._api",
                        "torch.distributed.tensor._dispatch", "torch.distributed.tensor.experimental._tp_transform")
# (name, kind, default) of each parameter of redistribute_local_tensor, as inspect.signature gives them
_P = inspect.Parameter
REDISTRIBUTE_SIGNATURE = (("local_tensor", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                          ("current_spec", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                          ("target_spec", _P.POSITIONAL_OR_KEYWORD, _P.empty),
                          ("async_op", _P.KEYWORD_ONLY, False),
                          ("use_graph_based_transform", _P.KEYWORD_ONLY, None),
                          ("is_explicit", _P.KEYWORD_ONLY, False))


@dataclass(frozen=True)
class Facts:
    """What one torch minor does where minors differ."""
    minor: tuple
    # The backward of a redistribution whose source is Partial on a mesh dim where the target is a
    # _StridedShard: True, torch asks for Replicate there (its rule tests `_is_shard_like`); False,
    # the gradient keeps the Partial (its rule tests `is_shard()`, which is False for
    # _StridedShard), so x.grad comes back Partial(sum) on that dim, its sum exact.
    strided_grad_replicates_partial: bool
    # DTensor.redistribute takes a Partial(sum) target from a Shard source (False: torch raises
    # "redistributing to Partial is for internal use only").
    shard_to_partial_api: bool
    # Where a process group's timeout is set: torch.distributed.set_timeout, or
    # distributed_c10d._set_pg_timeout before it became public.
    public_set_timeout: bool
    # _StridedShard's own offsets function takes an offset mode (_StridedShardOffsetMode).
    strided_offset_mode: bool
    # DTensor.__tensor_unflatten__ (a DTensor entering a compiled region) keeps an explicit order
    # of Shard placements (False: the trace sees the default order). A _StridedShard spec with an
    # explicit order loses it silently (2.11) or raises ValueError (2.12 on) on every minor.
    # dtensor mends both (_order_mends).
    unflatten_keeps_order: bool
    # What torch's layout-preserving ops (detach, clone, .grad accumulation) do to a DTensor with an
    # explicit order: True, redistribute the data to another layout ([Replicate, Shard(0)] for
    # S(0)[1]S(0)[0]); False, keep the data and label it with the default order. Wrong either way;
    # dtensor mends both (_order_mends).
    order_ops_move_data: bool


_TABLE = {
    (2, 11): Facts((2, 11), strided_grad_replicates_partial=False, shard_to_partial_api=False,
                   public_set_timeout=False, strided_offset_mode=False,
                   unflatten_keeps_order=False, order_ops_move_data=False),
    (2, 12): Facts((2, 12), strided_grad_replicates_partial=True, shard_to_partial_api=False,
                   public_set_timeout=False, strided_offset_mode=False,
                   unflatten_keeps_order=True, order_ops_move_data=False),
    (2, 13): Facts((2, 13), strided_grad_replicates_partial=True, shard_to_partial_api=False,
                   public_set_timeout=False, strided_offset_mode=True,
                   unflatten_keeps_order=True, order_ops_move_data=False),
    (2, 14): Facts((2, 14), strided_grad_replicates_partial=True, shard_to_partial_api=True,
                   public_set_timeout=True, strided_offset_mode=True,
                   unflatten_keeps_order=True, order_ops_move_data=True),
    (2, 15): Facts((2, 15), strided_grad_replicates_partial=True, shard_to_partial_api=True,
                   public_set_timeout=True, strided_offset_mode=True,
                   unflatten_keeps_order=True, order_ops_move_data=True),
}


def minor_of(version: str) -> Optional[tuple]:
    """(major, minor) of a torch version string such as "2.15.0+cu132"; None when unreadable."""
    try:
        parts = str(version).split("+")[0].split(".")
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def facts_for(version: str) -> Facts:
    """The facts of torch `version`; RuntimeError naming it and the supported range otherwise."""
    got = _TABLE.get(minor_of(version))
    if got is None:
        raise RuntimeError(f"dtensor.torch: torch {version} is outside the versions it supports ({RANGE}); "
                           f"their DTensor specs and redistribution hooks are the ones it is tested with")
    return got


def current() -> Facts:
    """The facts of the running torch (RuntimeError outside the supported range)."""
    return facts_for(torch.__version__)
