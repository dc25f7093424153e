"""RaggedShard in Python: the values, layouts, plans and owners (no processes), and a gloo world of
4 running random ragged pairs through dtensor.torch.redistribute_local against the arange oracle."""
import json
import random

import pytest

import dtensor


def test_layout_text_json_and_pieces():
    mesh = dtensor.Mesh("4")
    l = dtensor.RaggedLayout(mesh, [8, 6], "RaggedShard((0,),(1,3,0,0))")
    assert l.is_ragged and l.ragged_mesh_dim == 0 and l.dims == [0] and l.local_units == [1, 3, 0, 0]
    assert [l.local_shape(r) for r in range(4)] == [[2, 6], [6, 6], [0, 6], [0, 6]]
    assert l.piece(1) == (12, 48) and l.owned_runs(1) == [(12, 48)]
    assert dtensor.RaggedLayout.parse(str(l)) == l
    assert dtensor.RaggedLayout.from_json(l.to_json()) == l
    # the Python value spells the same text; a plain layout converts
    v = dtensor.RaggedShard((0,), (1, 3, 0, 0))
    assert str(v) == "RaggedShard((0,),(1,3,0,0))"
    assert dtensor.ragged_layout(mesh, [8, 6], [v]) == l
    two = dtensor.ragged_layout(dtensor.Mesh("2x2"), [4, 4], [dtensor.RaggedShard((0, 1), (1, 1)), dtensor.Placement.shard(1)])
    assert two.placements_str == "RaggedShard((0,1),(1,1))S(1)"
    assert not dtensor.RaggedLayout(dtensor.Layout(mesh, [8], "S(0)")).is_ragged


def test_vescale_rule_pieces_hold_whole_rows():
    # the unit (3 elements) cuts the 3x2 block's rows of 2; every piece is whole rows: accepted
    l = dtensor.RaggedLayout(dtensor.Mesh("2x2"), [3, 2], "RRaggedShard((0,),(2,0))")
    assert l.local_shape(0) == [3, 2] and l.local_shape(1) == [0, 2]
    assert dtensor.RaggedLayout(dtensor.Mesh("3"), [4, 4, 6], "RaggedShard((0,1),(3,0,3))").local_shape(2) == [8, 6]
    with pytest.raises(ValueError, match=r"piece of rank 1 .*cuts a trailing row of 3 elements"):
        dtensor.RaggedLayout(dtensor.Mesh("3"), [2, 3], "RaggedShard((0,),(0,2,1))")


def test_bad_input_names_the_value():
    mesh = dtensor.Mesh("4")
    with pytest.raises(ValueError, match="has 3 entries"):
        dtensor.RaggedLayout(mesh, [8], "RaggedShard((0,),(1,1,1))")
    with pytest.raises(ValueError, match="does not divide"):
        dtensor.RaggedLayout(mesh, [9], "RaggedShard((0,),(1,1,1,1))")
    with pytest.raises(ValueError, match="all zero"):
        dtensor.RaggedLayout(mesh, [8], "RaggedShard((0,),(0,0,0,0))")
    with pytest.raises(TypeError, match="ints"):
        dtensor.RaggedShard((0,), (1, "2"))
    with pytest.raises(TypeError, match="tuple of ints"):
        dtensor.RaggedShard(0, (1, 2))
    with pytest.raises(ValueError, match="compute time"):
        dtensor.plan_owners([dtensor.Layout(mesh, [8], "S(0)")], 0, compute_us=[-1.0])
    with pytest.raises(TypeError):
        dtensor.plan_ragged("S(0)", dtensor.Layout(mesh, [8], "R"))
    # a float extent is refused (it was truncated: [8.9, 6] made an 8x6 layout), as Layout refuses it
    with pytest.raises(TypeError, match="8.9"):
        dtensor.ragged_layout(dtensor.Mesh("2"), [8.9, 6], [dtensor.RaggedShard((0,), (1, 1))])
    assert dtensor.ragged_layout(dtensor.Mesh("2"), [8, 6], [dtensor.RaggedShard((0,), (1, 1))]).shape == [8, 6]


def test_plans_and_owners():
    mesh = dtensor.Mesh("4")
    src = dtensor.Layout(mesh, [8, 6], "S(0)")
    own = dtensor.owner_layout(src, 0, 2)
    assert own.local_units == [0, 0, 1, 0]
    p = dtensor.plan_ragged(src, own)
    assert p.stages == ["exchange"] and p.total_cost_us > 0 and "=>" in p.trace
    assert dtensor.exchange_received(dtensor.RaggedLayout(src), own) == [0, 0, 36, 0]
    assert dtensor.RaggedPlan.from_json(p.to_json()) == p
    with pytest.raises(ValueError, match="bytes_sent is 1"):
        import json as _json
        j = _json.loads(p.to_json())
        j["stages"][0]["bytes_sent"] = 1
        dtensor.RaggedPlan.from_json(_json.dumps(j))
    layouts = [dtensor.Layout(mesh, [n, 64], "S(0)") for n in (512, 256, 256, 128, 64)]
    o = dtensor.plan_owners(layouts, 0)
    assert o.exact and len(o.owners) == 5 and o.makespan_us == max(o.load_us)
    rr = dtensor.evaluate_owners(layouts, 0, [i % 4 for i in range(5)])
    assert o.makespan_us <= rr.makespan_us
    # Newton-Schulz compute from the shapes: 5 iterations of 2*(2 min^2 max + min^3) flops
    ns = dtensor.newton_schulz_us(layouts, 5, 1e6)
    assert ns[0] == 5 * 2 * (2 * 64 * 64 * 512 + 64 ** 3) / 1e6
    with_ns = dtensor.plan_owners(layouts, 0, compute="newton_schulz", flops_per_us=1e6)
    assert with_ns.owners == dtensor.plan_owners(layouts, 0, compute_us=ns).owners
    assert with_ns.makespan_us > o.makespan_us
    for kwargs, message in [({"compute": "svd", "flops_per_us": 1.0}, "newton_schulz"),
                            ({"compute": "newton_schulz"}, "needs flops_per_us"),
                            ({"compute": "newton_schulz", "flops_per_us": 0.0}, "flops_per_us 0"),
                            ({"compute": "newton_schulz", "flops_per_us": 1.0, "iterations": 0}, "iterations 0"),
                            ({"compute": "newton_schulz", "flops_per_us": 1.0, "compute_us": ns}, "one or the other"),
                            ({"flops_per_us": 1.0}, "without compute")]:
        with pytest.raises(ValueError, match=message):
            dtensor.plan_owners(layouts, 0, **kwargs)


def test_flat_bucket():
    mesh = dtensor.Mesh("4")
    members = dtensor.flat_bucket_layouts(mesh, 0, [[6, 4], [10]])
    flat, offsets = dtensor.bucket_of(members)
    assert offsets == [0, 24] and flat.local_units == [9, 9, 9, 7]
    p = dtensor.plan_ragged(flat, dtensor.Layout(mesh, [34], "R"))
    assert p.stages == ["exchange"]
    assert dtensor.bucket_of([members[1], members[0]]) is None  # out of order: not one bucket
    with pytest.raises(ValueError, match="empty"):
        dtensor.flat_bucket_layouts(mesh, 0, [[4, 0]])


def _cases(seed, count, world):
    rng = random.Random(seed)
    meshes = [[world], [2, world // 2]]
    out = []
    while len(out) < count:
        mesh_shape = rng.choice(meshes)
        nd = rng.randint(1, 3)
        shape = [rng.randint(1, 6) for _ in range(nd)]

        def text(ragged):
            md = len(mesh_shape)
            r = rng.randrange(md) if ragged else -1
            s = ""
            for m in range(md):
                if m == r:
                    units = ",".join(str(rng.randint(0, 2)) for _ in range(mesh_shape[m]))
                    k = rng.randint(1, nd)
                    s += f"RaggedShard(({','.join(str(d) for d in range(k))},),({units}))"
                elif m < r or rng.random() < 0.4:
                    s += "R"
                else:
                    s += f"S({rng.randrange(nd)})"
            return s
        side = rng.randint(0, 2)
        src, dst = text(side != 1), text(side != 0)
        mesh = dtensor.Mesh(mesh_shape)
        try:
            dtensor.RaggedLayout(mesh, shape, src)
            dtensor.RaggedLayout(mesh, shape, dst)
        except ValueError:
            continue  # units that do not divide, shards before the ragged dim: drawn again
        out.append((mesh_shape, shape, src, dst, rng.choice(["f32", "f64", "bf16"])))
    return out


def test_redistribute_local_world4(tmp_path):
    pytest.importorskip("torch")
    import ragged_worker
    from test_redistribute_mp import spawn_fn
    # veScale's rule: units cutting a row (3 of 2, 2 of 6, 8 of 6) with every piece whole rows
    cut_units = [([2, 2], [3, 2], "RRaggedShard((0,),(2,0))", "S(0)R", "f32"),
                 ([4], [3, 6], "RaggedShard((0,),(3,3,3,0))", "S(1)", "bf16"),
                 ([2, 2], [4, 4, 6], "RaggedShard((0,1),(3,3))S(0)", "RaggedShard((0,),(1,0))R", "f64"),
                 ([4], [3, 6], "S(0)", "RaggedShard((0,),(0,3,6,0))", "f32")]
    cases = cut_units + _cases(53, 40, 4)
    err = spawn_fn(ragged_worker.run, 4, (cases, str(tmp_path)), 540)
    assert err == "", err
    for r in range(4):
        res = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert res["wrong"] == [], res["wrong"]
        assert res["checked"] == len(cases) and res["distribute_checked"] == 4
