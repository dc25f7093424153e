"""Batches from Python (docs/batch.md): dtensor.plan_batch, BatchPlan, simulate(batch)."""
import json

import pytest

import dtensor


def _pairs(mesh, n_small=6):
    pairs = [(dtensor.Layout(mesh, [64, 32], "S(0)S(1)", dtype="bf16"), dtensor.Layout(mesh, [64, 32], "RS(1)", dtype="bf16"))]
    for i in range(n_small):
        shape = [8 + i, 3]
        pairs.append((dtensor.Layout(mesh, shape, "S(0)R"), dtensor.Layout(mesh, shape, "RR")))
    pairs.append((dtensor.Layout(mesh, [9, 5], "P(sum)R"), dtensor.Layout(mesh, [9, 5], "S(0)R")))
    return pairs


def test_plan_batch_coalesces_and_every_tensor_is_exact():
    mesh = dtensor.Mesh("dp=2,tp=4")
    b = dtensor.plan_batch(_pairs(mesh))
    assert len(b) == 8 and len(b.plans) == 8
    assert b.collectives < b.separate_collectives
    assert b.total_cost_us < b.separate_cost_us
    assert any(s.coalesced and len(s.members) >= 2 for s in b.stages)
    for s in b.stages:
        for t, k in s.members:
            assert b.plans[t].steps[k].kind == s.kind or not s.coalesced
    res = dtensor.simulate(b)
    assert res.verified and res.mismatch == [""] * 8
    assert res.collectives == b.collectives
    assert "collective(s) against" in b.explain()


def test_batch_plan_json_round_trip_and_tampering():
    mesh = dtensor.Mesh("2x2")
    b = dtensor.plan_batch(_pairs(mesh, 3))
    back = dtensor.BatchPlan.from_json(b.to_json())
    assert back == b and back.hash == b.hash
    j = json.loads(b.to_json())
    j["total_cost_us"] = 0.5
    with pytest.raises(ValueError, match="total_cost_us"):
        dtensor.BatchPlan.from_json(json.dumps(j))
    j = json.loads(b.to_json())
    j["stages"] = j["stages"][1:]
    with pytest.raises(ValueError, match="batch plan"):
        dtensor.BatchPlan.from_json(json.dumps(j))


def test_plan_batch_bad_input():
    m4, m22 = dtensor.Mesh("4"), dtensor.Mesh("2x2")
    with pytest.raises(ValueError, match="at least one"):
        dtensor.plan_batch([])
    mixed = [(dtensor.Layout(m4, [8], "S(0)"), dtensor.Layout(m4, [8], "R")),
             (dtensor.Layout(m22, [8], "S(0)R"), dtensor.Layout(m22, [8], "RR"))]
    with pytest.raises(ValueError, match="batch entry 1"):
        dtensor.plan_batch(mixed)
    with pytest.raises(TypeError):
        dtensor.plan_batch([("S(0)", "R")])
    with pytest.raises(ValueError, match="memory_limit"):
        dtensor.simulate(dtensor.plan_batch(mixed[:1]), memory_limit=-1)


def test_batch_plan_cache():
    mesh = dtensor.Mesh("2x2")
    pairs = _pairs(mesh, 3)
    cache = dtensor.BatchPlanCache(2)
    first = cache.get(pairs)
    assert first == dtensor.plan_batch(pairs)
    assert cache.get(pairs) is first  # the cached plan itself
    assert cache.stats() == {"hits": 1, "misses": 1, "evictions": 0, "size": 1}
    assert cache.get(pairs[::-1]) != first  # another order is another batch
    assert cache.get(pairs, cost_model="pytorch").cost_model == "pytorch"
    assert cache.stats()["evictions"] == 1 and cache.capacity == 2
    with pytest.raises(TypeError):
        cache.get([pairs[0][0]])  # not a pair
    with pytest.raises(ValueError):
        cache.get([])  # an empty batch, as plan_batch refuses it
    with pytest.raises(ValueError):
        dtensor.BatchPlanCache(0)
    cache.clear()
    assert cache.stats()["size"] == 0


def test_large_tensors_run_as_one_grouped_stage():
    # packing 4 MB shards would cost more than the launches it saves: the members' own all_gathers
    # are launched as one group (no staging), and every tensor is exact
    mesh = dtensor.Mesh("2")
    pairs = [(dtensor.Layout(mesh, [2048, 1024 + 64 * i], "S(0)", dtype="bf16"),
              dtensor.Layout(mesh, [2048, 1024 + 64 * i], "R", dtype="bf16")) for i in range(3)]
    b = dtensor.plan_batch(pairs)
    assert [(s.grouped, s.coalesced, len(s.members)) for s in b.stages] == [(True, False, 3)]
    assert b.collectives == 1 and b.separate_collectives == 3 and b.staging_bytes == 0
    assert "launched as one group" in b.explain()
    res = dtensor.simulate(b)
    assert res.verified and res.collectives == 1
    assert dtensor.BatchPlan.from_json(b.to_json()) == b
