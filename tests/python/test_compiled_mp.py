"""Compiled regions with dtensor switched in (tests/python/compiled_worker.py on gloo world 4):
x.redistribute inside torch.compile runs dtensor's plan as functional collectives.

CI runs a sample (compiling costs seconds per graph on 2 cores): DTENSOR_COMPILED_PAIRS random
pairs (default 6), the graph check on one pair per collective kind (a direct step included), the
_StridedShard pair torch gets wrong, and the TP/SP block's 10 compiled steps against eager.
Sources with an explicit shard order (`S(0)[1]S(0)[0]`) have a test of their own, run on torch
2.15 here and on 2.11 by scripts/python-test.sh (2.11 drops the order when a DTensor enters a
compiled region, which dtensor mends: dtensor/torch/_order_mends.py): the pairs that were wrong or
hung there, and DTENSOR_COMPILED_EXPLICIT random explicit-source pairs (default 3).
The full set: `scripts/compiled-check.sh` (docs/python.md)."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
from layouts import Spec  # noqa: E402
from test_redistribute_mp import make_cases, spawn_fn  # noqa: E402

PAIRS = int(os.environ.get("DTENSOR_COMPILED_PAIRS", "6"))
EXPLICIT = int(os.environ.get("DTENSOR_COMPILED_EXPLICIT", "3"))
BACKEND = os.environ.get("DTENSOR_COMPILED_BACKEND", "aot_eager")

GRAPH_CASES = [  # (mesh, ranks, src, dst, dtype): one per collective kind of dtensor's plans
    ([2, 2], [0, 1, 2, 3], Spec([2, 2], [8, 6], [("S", 0), ("S", 1)], {0: [0], 1: [1]}),
     Spec([2, 2], [8, 6], [("R",), ("R",)], {}), "f32"),                                    # all_gather
    ([2, 2], [3, 2, 1, 0], Spec([2, 2], [8], [("P", "sum"), ("R",)], {}),
     Spec([2, 2], [8], [("S", 0), ("R",)], {0: [0]}), "f32"),                               # reduce_scatter
    ([4], [0, 1, 2, 3], Spec([4], [8], [("P", "sum")], {}), Spec([4], [8], [("R",)], {}), "f64"),  # all_reduce
    ([4], [2, 0, 3, 1], Spec([4], [8, 4], [("S", 0)], {0: [0]}),
     Spec([4], [8, 4], [("S", 1)], {1: [0]}), "f32"),                                       # all_to_all
    ([4], [0, 1, 2, 3], Spec([4], [8], [("SS", 0, 3)], {0: [0]}),
     Spec([4], [8], [("SS", 0, 2)], {0: [0]}), "f32"),                                      # direct
]


def spawn(world, modes, cases, graph_cases, out, timeout_s):
    import compiled_worker
    why = spawn_fn(compiled_worker.run, world, (modes, cases, graph_cases, str(out), BACKEND), timeout_s)
    if why:
        pytest.fail(f"world {world}: {why}")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def test_compiled_redistribute(tmp_path):
    from mp_worker import torch_api_takes
    cases = [c for c in make_cases(31, [[4], [2, 2]], 4 * PAIRS)
             if not c[3].explicit_order and torch_api_takes(c[2], c[3]) and c[4] != "i32"][:PAIRS]
    results = spawn(4, ["pairs", "graph", "strided", "train"], cases, GRAPH_CASES, tmp_path, 200 + 60 * PAIRS)
    wrong = sorted({w for r in results for w in r["wrong"]})
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong[:10])
    assert all(r["checked"] == len(cases) and r["graph_checked"] == len(GRAPH_CASES) and r["strided_checked"] == 1
               for r in results)
    kinds = set(results[0]["graph_kinds"])
    assert kinds == {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}, kinds
    t = results[0]["train"]
    print(f"\n{len(cases)} random pairs compiled ({BACKEND}) exact and equal to eager; graphs hold the plans' "
          f"collectives ({sorted(kinds)}); the _StridedShard pair torch gets wrong is right compiled (torch's own "
          f"compiled: {results[0]['torch_strided'][:80]}); TP/SP block, 10 compiled steps: largest loss difference "
          f"from eager {t['largest_difference']:.3g}, {t['traced']} redistributions traced, fallbacks {t['fallbacks'] or 'none'}")


def _order(d):  # S(d)[1]S(d)[0] on a 2x2 mesh: mesh dim 1 splits tensor dim d first
    return {d: [1, 0]}


M = [2, 2]
EXPLICIT_CASES = [  # (mesh, ranks, src, dst, dtype): wrong (or hung) compiled on torch 2.11 before the mend
    (M, [0, 1, 2, 3], Spec(M, [12, 3], [("S", 0), ("S", 0)], _order(0)),
     Spec(M, [12, 3], [("S", 1), ("S", 1)], {1: [0, 1]}), "f64"),
    (M, [0, 1, 2, 3], Spec(M, [6, 6, 4], [("S", 2), ("S", 2)], _order(2)),
     Spec(M, [6, 6, 4], [("S", 1), ("R",)], {1: [0]}), "f64"),
    (M, [0, 1, 2, 3], Spec(M, [1, 3], [("S", 1), ("S", 1)], _order(1)),
     Spec(M, [1, 3], [("S", 0), ("S", 0)], {0: [0, 1]}), "f32"),
    (M, [0, 1, 2, 3], Spec(M, [12], [("S", 0), ("S", 0)], _order(0)), Spec(M, [12], [("SS", 0, 2), ("R",)], {0: [0]}), "f64"),
    (M, [2, 3, 0, 1], Spec(M, [4, 4], [("S", 0), ("S", 0)], _order(0)),
     Spec(M, [4, 4], [("SS", 1, 4), ("S", 0)], {1: [0], 0: [1]}), "f64"),
    (M, [0, 1, 2, 3], Spec(M, [2], [("S", 0), ("S", 0)], _order(0)),                       # hung
     Spec(M, [2], [("SS", 0, 2), ("S", 0)], {0: [0, 1]}), "f64"),
    (M, [0, 1, 2, 3], Spec(M, [6], [("S", 0), ("S", 0)], _order(0)),                       # hung
     Spec(M, [6], [("SS", 0, 3), ("S", 0)], {0: [0, 1]}), "f64"),
]


def test_compiled_explicit_source_orders(tmp_path):
    from mp_worker import torch_api_takes
    assert all(c[2].explicit_order for c in EXPLICIT_CASES)
    rand = [c for c in make_cases(47, [[2, 2]], 400)
            if c[2].explicit_order and not c[3].explicit_order and torch_api_takes(c[2], c[3]) and c[4] != "i32"]
    cases = EXPLICIT_CASES + rand[:EXPLICIT]
    results = spawn(4, ["pairs"], cases, [], tmp_path, 200 + 40 * len(cases))
    wrong = sorted({w for r in results for w in r["wrong"]})
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong[:10])
    assert all(r["checked"] == len(cases) for r in results)
    print(f"\n{len(cases)} pairs with an explicit source order compiled ({BACKEND}) on torch {torch.__version__}: "
          f"exact on every rank and equal to eager")
