"""RaggedShard as a Python value, and layouts built from placement lists that hold one.

    >>> import dtensor
    >>> mesh = dtensor.Mesh("4")
    >>> l = dtensor.ragged_layout(mesh, [8, 6], [dtensor.RaggedShard((0,), (1, 3, 0, 0))])
    >>> l.local_shape(1)
    [6, 6]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import _core


def _int_tuple(name: str, v) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError(f"RaggedShard {name} must be a tuple of ints, not {type(v).__name__}")
    out = tuple(v)
    for x in out:
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"RaggedShard {name} must hold ints, not {x!r}")
    return out


@dataclass(frozen=True)
class RaggedShard:
    """veScale's placement: on one mesh dim, each rank's whole local block (the other placements
    split first, this mesh dim read as Replicate), flattened, cut into contiguous pieces of
    ``local_units[i]`` units; ``dims`` = (0, ..., k-1), the leading tensor dims a cut may cross.
    The values are checked (against the mesh and shape) when a layout is made."""

    dims: tuple
    local_units: tuple

    def __post_init__(self):
        object.__setattr__(self, "dims", _int_tuple("dims", self.dims))
        object.__setattr__(self, "local_units", _int_tuple("local_units", self.local_units))

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.dims) + ("," if len(self.dims) == 1 else "")
        return f"RaggedShard(({dims}),({','.join(str(u) for u in self.local_units)}))"

    def is_shard(self, dim=None) -> bool:  # torch's Placement protocol: not a Shard
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op=None) -> bool:
        return False


def placements_text(placements: Sequence) -> str:
    """dtensor's placement text of a list of dtensor.Placement / RaggedShard values."""
    out = []
    for p in placements:
        if isinstance(p, (RaggedShard, _core.Placement)):
            out.append(str(p))
        else:
            raise TypeError(f"placement {p!r} is not a dtensor.Placement or dtensor.RaggedShard")
    return "".join(out)


def ragged_layout(mesh: _core.Mesh, shape: Sequence[int], placements, dtype: str = "f32") -> _core.RaggedLayout:
    """A RaggedLayout from dtensor's placement text or a list of Placement / RaggedShard values."""
    text = placements if isinstance(placements, str) else placements_text(placements)
    return _core.RaggedLayout(mesh, _shape_arg(shape), text, dtype)


def _shape_arg(shape) -> list:
    """`shape` as a list of ints: integers only (a float such as 8.9 is a TypeError naming it, as
    Layout gives, never truncated to 8)."""
    import numbers
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape: expected a sequence of integers, got {type(shape).__name__}")
    out = []
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"shape: expected integers, got {s!r} ({type(s).__name__})")
        out.append(int(s))
    return out
