"""The drop-in switch as a training stack uses it, on the running torch (scripts/python-versions.sh
runs this on every minor): random pairs on gloo world 4 (DTENSOR_SWITCH_PAIRS, default 200) and
world 8 (half as many), each through torch's own API under dtensor.torch.enabled(): the forward
x.redistribute, full_tensor(), an implicit redistribution and the gradient, against the oracle
(tests/python/mp_worker.py: run_switch). Pairs torch's public API refuses on this minor are left
out (_versions). pytorch/pytorch#194457's pair (uneven S(0)S(0) -> RR, 5x3 on 2x2, wrong on
torch 2.13's own redistribute) is always in."""
import json
import os

import pytest

torch = pytest.importorskip("torch")

from layouts import Spec  # noqa: E402
from test_redistribute_mp import make_cases, spawn_fn  # noqa: E402

PAIRS = int(os.environ.get("DTENSOR_SWITCH_PAIRS", "200"))
ISSUE_194457 = ([2, 2], [0, 1, 2, 3], Spec([2, 2], [5, 3], [("S", 0), ("S", 0)], {0: [0, 1]}),
                Spec([2, 2], [5, 3], [("R",), ("R",)], {}), "f32")


@pytest.mark.parametrize("world,meshes,seed,count", [
    (4, [[4], [2, 2]], 41, PAIRS),
    (8, [[8], [2, 4], [4, 2], [2, 2, 2]], 42, PAIRS // 2),
])
def test_switch_on_random_pairs(world, meshes, seed, count, tmp_path):
    import mp_worker
    from mp_worker import torch_api_takes
    cases = [c for c in make_cases(seed, meshes, 3 * count) if not c[3].explicit_order and torch_api_takes(c[2], c[3])]
    cases = cases[:count]
    if world == 4:
        cases.append(ISSUE_194457)
    why = spawn_fn(mp_worker.run_switch, world, (cases, str(tmp_path)), 120 + 3 * count)
    if why:
        pytest.fail(f"world {world}: {why}")
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    wrong = sorted({w for r in results for w in r["wrong"]}, key=lambda w: int(w.split(":")[0].split()[1]))
    assert all(r["checked"] == len(cases) for r in results)
    assert not wrong, f"{len(wrong)} of {len(cases)} pairs wrong:\n" + "\n".join(wrong[:10])
    assert all(not r["fallbacks"] for r in results), results[0]["fallbacks"]
    print(f"\ntorch {torch.__version__}, world {world}: {len(cases)} pairs exact through the switch (forward, "
          f"full_tensor, implicit redistribution, gradient); {results[0]['routed']} redistributions routed, 0 fallbacks")
