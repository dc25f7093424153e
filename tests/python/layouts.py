"""Random layouts for the Python tests, and an ownership oracle written from the notation rules
alone (docs/notation.md), independent of dtensor's C++ code and of torch."""
from __future__ import annotations

import math
import random

OPS = ["sum", "avg", "max", "min"]


class Spec:
    """One layout: per mesh dim ('R',) ('P', op) ('S', d) or ('SS', d, sf); per sharded tensor dim
    its mesh dims in split order."""

    def __init__(self, mesh_shape, shape, placements, order):
        self.mesh_shape, self.shape, self.placements, self.order = list(mesh_shape), list(shape), placements, order

    @property
    def strided(self):
        return any(p[0] == "SS" for p in self.placements)

    @property
    def explicit_order(self):
        return any(ms != sorted(ms) for ms in self.order.values())

    def text(self):
        out = []
        for m, p in enumerate(self.placements):
            if p[0] == "R":
                out.append("R")
            elif p[0] == "P":
                out.append(f"P({p[1]})")
            else:
                tok = f"S({p[1]})" if p[0] == "S" else f"_S({p[1]}, {p[2]})"
                ms = self.order[p[1]]
                if self.explicit_order:
                    if len(ms) > 1 or ms != sorted(ms):
                        tok += f"[{ms.index(m)}]"
                out.append(tok)
        return "".join(out)

    def torch(self):
        from torch.distributed.tensor import Partial, Replicate, Shard
        from torch.distributed.tensor._dtensor_spec import ShardOrderEntry
        from torch.distributed.tensor.placement_types import _StridedShard
        pl = []
        for p in self.placements:
            if p[0] == "R":
                pl.append(Replicate())
            elif p[0] == "P":
                pl.append(Partial(p[1]))
            elif p[0] == "S":
                pl.append(Shard(p[1]))
            else:
                pl.append(_StridedShard(p[1], split_factor=p[2]))
        order = tuple(ShardOrderEntry(d, tuple(ms)) for d, ms in sorted(self.order.items()))
        return tuple(pl), (order if self.explicit_order else None)

    def partial_dims(self):
        return [m for m, p in enumerate(self.placements) if p[0] == "P"]

    def partial_op(self):
        ops = {p[1] for p in self.placements if p[0] == "P"}
        return ops.pop() if ops else None

    def __repr__(self):
        return f"{'x'.join(map(str, self.mesh_shape))} {'x'.join(map(str, self.shape)) or '()'} {self.text()}"


def random_spec(rng: random.Random, mesh_shape, *, sizes=(1, 2, 3, 5, 7, 8, 12), strided=True, partial=True,
                max_ndim=3, ops=OPS, shape=None, op=None) -> Spec:
    """A random layout; `shape` and `op` (the Partial reduce op) fixed when given."""
    if shape is None:
        shape = [rng.choice(sizes) for _ in range(rng.randint(1, max_ndim))]
    shape = list(shape)
    nd = len(shape)
    op = op or rng.choice(ops)
    placements, order = [], {}
    for m in range(len(mesh_shape)):
        r = rng.random()
        if r < 0.25:
            placements.append(("R",))
        elif r < 0.4 and partial:
            placements.append(("P", op))
        elif r < 0.6 and strided:
            d = rng.randrange(nd)
            placements.append(("SS", d, rng.choice([2, 3])))
            order.setdefault(d, []).append(m)
        else:
            d = rng.randrange(nd)
            placements.append(("S", d))
            order.setdefault(d, []).append(m)
    s = Spec(mesh_shape, shape, placements, order)
    if not s.strided:  # torch: a _StridedShard layout carries its order in the placements
        for d, ms in order.items():
            if len(ms) > 1 and rng.random() < 0.5:
                rng.shuffle(ms)
    return s


def _chunk(lst, n, i):
    c = math.ceil(len(lst) / n) if lst else 0
    return lst[i * c:(i + 1) * c]


def owned(spec: Spec, coord):
    """Per tensor dim, the global indices the rank at `coord` holds, in local order."""
    out = []
    for d, length in enumerate(spec.shape):
        cur = list(range(length))
        for m in spec.order.get(d, []):
            p, n, i = spec.placements[m], spec.mesh_shape[m], coord[m]
            if p[0] == "S":
                cur = _chunk(cur, n, i)
            else:
                sf = p[2]
                pieces = [_chunk(cur, sf, j) for j in range(sf)]
                cur = [x for piece in pieces for x in _chunk(piece, n, i)]
        out.append(cur)
    return out


def coords(mesh_shape):
    n = math.prod(mesh_shape)
    for r in range(n):
        c, rest = [], r
        for s in reversed(mesh_shape):
            c.append(rest % s)
            rest //= s
        yield r, list(reversed(c))
