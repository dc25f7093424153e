"""dtensor.plan_cross_mesh and dtensor.simulate on cross-mesh plans (docs/cross-mesh.md)."""
import json

import pytest

import dtensor


def layout(mesh, shape, placements, dtype="f32"):
    return dtensor.Layout(dtensor.Mesh(mesh), shape, placements, dtype=dtype)


def test_training_to_engine_is_verified_on_every_target_rank():
    src = layout("dp=2,tp=4", [64, 48], "S(0)S(1)", "bf16")
    dst = layout("tp=4", [64, 48], "S(1)", "bf16")
    plan = dtensor.plan_cross_mesh(src, dst, src_ranks=list(range(8)), dst_ranks=[8, 9, 10, 11])
    assert plan.world_size == 12
    assert plan.dst_ranks == [8, 9, 10, 11]
    assert plan.busiest_bytes >= plan.balanced_bound_bytes
    assert plan.transfer_bytes == 64 * 48 * 2  # disjoint ranks: every element crosses exactly once here
    assert sum(m.elements for m in plan.messages) == 64 * 48
    assert "transfer" in plan.explain()
    doc = json.loads(plan.to_json())
    assert doc["kind"] == "cross_mesh" and doc["hash"] == f"{plan.hash:016x}"
    result = dtensor.simulate(plan)
    assert result.verified, result.mismatch
    back = dtensor.CrossMeshPlan.from_json(plan.to_json())
    assert back == plan
    doc["total_cost_us"] = doc["total_cost_us"] + 1
    with pytest.raises(ValueError, match="total_cost_us"):
        dtensor.CrossMeshPlan.from_json(json.dumps(doc))


def test_default_ranks_overlap_and_partial_source():
    src = layout("2x2", [9, 5], "P(sum)S(0)")
    dst = layout("2", [9, 5], "R")
    plan = dtensor.plan_cross_mesh(src, dst)  # ranks 0-3 and 0-1: overlapping
    assert plan.pre.steps, "a Partial source is reduced inside the source mesh first"
    assert dtensor.simulate(plan).verified
    assert plan == dtensor.plan_cross_mesh(src, dst)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(dst_ranks=[4, 4]), "target world rank 4 is listed twice"),
        (dict(dst_ranks=[-1, 2]), "target world rank -1 is negative"),
        (dict(dst_ranks=[2]), "has 1 entries"),
        (dict(dst_ranks=[2, 3], world_size=3), "target world rank 3 does not exist in a world of 3 ranks"),
        (dict(world_size=0), "world_size: must be >= 1, got 0"),
    ],
)
def test_bad_ranks_are_value_errors_naming_the_value(kwargs, message):
    src = layout("2", [8], "S(0)")
    dst = layout("2", [8], "R")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dtensor.plan_cross_mesh(src, dst, **kwargs)


def test_shape_and_dtype_must_match():
    with pytest.raises(ValueError, match="source shape 8 and target shape 9 differ"):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [9], "R"))
    with pytest.raises(ValueError, match="dtype f32 and target dtype bf16 differ"):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [8], "R", "bf16"))
    with pytest.raises(TypeError):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [8], "R"), src_ranks="0,1")
    with pytest.raises(TypeError, match="dst_ranks holds ints, not bool"):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [8], "R"), dst_ranks=[True, False])
    with pytest.raises(TypeError, match="world_size must be an int, not bool"):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [8], "R"), world_size=True)
    with pytest.raises(ValueError, match="world rank 1180591620717411303424 is out of range"):
        dtensor.plan_cross_mesh(layout("2", [8], "S(0)"), layout("2", [8], "R"), dst_ranks=[0, 2**70])
