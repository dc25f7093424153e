"""The core package (no torch needed): layouts, plans, the cache, simulation, cost models, errors."""
import json
import pathlib
import threading

import pytest

import dtensor


def test_mesh_and_layout_text_forms():
    m = dtensor.Mesh("dp=2,tp=4")
    assert m.shape == [2, 4] and m.names == ["dp", "tp"] and m.num_ranks == 8
    assert m.coord_of(5) == [1, 1] and m.rank_at([1, 1]) == 5
    assert dtensor.Mesh([2, 4], names=["dp", "tp"]) == m
    l = dtensor.Layout(m, [9, 5], "S(0)[1]S(0)[0]", dtype="bf16")
    assert str(l) == "dp=2,tp=4 9x5 bf16 S(0)[1]S(0)[0]"
    assert dtensor.Layout.parse(str(l)) == l
    assert l.shard_order == [(0, [1, 0])]
    assert dtensor.Layout.from_json(l.to_json()) == l


def test_uneven_and_strided_ownership():
    # the notation's example: arange(9), sf = 2, n = 4 gives [0 1 5] [2 3 6] [4 7] [8]
    l = dtensor.Layout(dtensor.Mesh("4"), [9], "_S(0, 2)")
    got = [[i for a, b in l.owned_runs(r)[0] for i in range(a, b)] for r in range(4)]
    assert got == [[0, 1, 5], [2, 3, 6], [4, 7], [8]]
    # empty shards report the dim's size as offset (PyTorch's convention)
    e = dtensor.Layout.parse("4x2 39x2 f32 _S(0, 3)_S(0, 4)")
    assert e.local_shape([3, 1]) == [0, 2] and e.global_offset([3, 1]) == [39, 0]
    assert dtensor.equivalent(dtensor.Layout.parse("4x2 8x4 f32 _S(0, 2)S(0)"),
                              dtensor.Layout.parse("4x2 8x4 f32 S(0)[1]S(0)[0]"))


def test_plan_matches_its_own_record():
    m = dtensor.Mesh("dp=2,tp=4")
    src = dtensor.Layout(m, [1024, 512], "S(0)R", "bf16")
    dst = dtensor.Layout(m, [1024, 512], "RS(1)", "bf16")
    p = dtensor.plan(src, dst)
    assert p.src == src and p.dst == dst
    assert p.trace.startswith("S(0)R") and p.trace.endswith("RS(1)")
    assert p.total_cost_us == pytest.approx(sum(s.cost_us for s in p.steps))
    assert all(s.kind in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "local_chunk", "local_fill",
                          "direct", "relabel") for s in p.steps)
    assert "step" in p.explain().lower()
    back = dtensor.Plan.from_json(p.to_json())
    assert back == p and back.hash == p.hash
    assert json.loads(p.to_json())["total_cost_us"] == pytest.approx(p.total_cost_us)
    # deterministic: the same request gives the same plan
    assert dtensor.plan(src, dst) == p
    # the pytorch profile and edge set
    q = dtensor.plan(src, dst, cost_model="pytorch")
    assert q.edges == "pytorch" and q.cost_model == "pytorch"


def test_simulate_is_exact():
    m = dtensor.Mesh("2x2")
    for a, b in [("S(0)S(0)", "RR"), ("P(sum)S(1)", "S(0)R"), ("_S(0, 3)S(0)", "RS(0)")]:
        p = dtensor.plan(dtensor.Layout(m, [5, 3], a, "f64"), dtensor.Layout(m, [5, 3], b, "f64"))
        r = dtensor.simulate(p)
        assert r.verified, r.mismatch
        assert len(r.ranks) == 4 and all(len(x.data) == x.local_shape[0] * x.local_shape[1] for x in r.ranks)


def test_plan_cache_hits_and_threads():
    cache = dtensor.PlanCache(8)
    m = dtensor.Mesh("2x4")
    src, dst = dtensor.Layout(m, [64, 64], "S(0)S(1)"), dtensor.Layout(m, [64, 64], "RR")
    first = cache.get(src, dst)
    assert cache.get(src, dst) is first  # the cached plan itself (a shared_ptr<const Plan>), not a copy
    s = cache.stats()
    assert s["hits"] == 1 and s["misses"] == 1 and s["size"] == 1
    # planning releases the GIL: threads plan concurrently and agree
    out = []
    ts = [threading.Thread(target=lambda: out.append(dtensor.plan(src, dst).hash)) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(set(out)) == 1 and out[0] == first.hash
    cache.clear()  # a plan handed out outlives its cache entry
    del cache
    assert first.trace and first.hash == out[0]


def test_max_memory_and_edges():
    m = dtensor.Mesh("4")
    src, dst = dtensor.Layout(m, [1024], "S(0)"), dtensor.Layout(m, [1024], "R")
    with pytest.raises(ValueError, match="max_memory"):
        dtensor.plan(src, dst, max_memory=-1)
    assert dtensor.plan(src, dst, max_memory=0).peak_bytes == 0  # a zero-copy all_gather
    s2, d2 = dtensor.Layout(m, [64, 64], "S(0)"), dtensor.Layout(m, [64, 64], "S(1)")
    with pytest.raises(ValueError, match="smallest budget"):
        dtensor.plan(s2, d2, max_memory=1)  # an all_to_all needs packing space
    assert dtensor.plan(s2, d2, max_memory=6144).peak_bytes <= 6144
    with pytest.raises(ValueError, match="edge"):
        dtensor.plan(src, dst, edges="some")


def test_cost_models(tmp_path):
    d = dtensor.CostModel.load("default")
    assert d.name == "default" and d.devices_per_host == 8
    assert d.predict_us("all_gather", 8, 1 << 20) > d.predict_us("all_gather", 8, 1 << 10) > 0
    f = tmp_path / "p.json"
    f.write_text(d.to_json())
    assert dtensor.CostModel.load(str(f)) == d
    m = dtensor.Mesh("4")
    src, dst = dtensor.Layout(m, [1024], "S(0)"), dtensor.Layout(m, [1024], "R")
    assert dtensor.plan(src, dst, cost_model=pathlib.Path(f)).total_cost_us == dtensor.plan(src, dst).total_cost_us
    assert dtensor.plan(src, dst, cost_model=d) == dtensor.plan(src, dst)
    # a profile file is loaded once and reused until it changes on disk
    slow = dtensor.CostModel.from_json(d.to_json().replace('"bw_GBps":360.0', '"bw_GBps":3.5'))
    assert slow != d
    f.write_text(slow.to_json() + "\n\n")  # another size: seen as changed whatever the clock's resolution
    assert dtensor.plan(src, dst, cost_model=str(f)).total_cost_us > dtensor.plan(src, dst).total_cost_us
    with pytest.raises(ValueError, match="collective"):
        d.predict_us("allgather_fast", 8, 1024)


@pytest.mark.parametrize("call,needle", [
    (lambda: dtensor.Mesh("2x0"), "0"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "S(1)"), "S(1)"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "Q"), "Q"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "R", dtype="f128"), "f128"),
    (lambda: dtensor.Layout.parse("2x2 4 f32 RR junk"), "junk"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "R").local_shape(2), "rank 2"),
    (lambda: dtensor.plan(dtensor.Layout(dtensor.Mesh("2"), [4], "R"), dtensor.Layout(dtensor.Mesh("2"), [5], "R")), "5"),
    (lambda: dtensor.plan(dtensor.Layout(dtensor.Mesh("2"), [4], "R"), dtensor.Layout(dtensor.Mesh("2"), [4], "R"),
                          cost_model="/nonexistent.json"), "nonexistent"),
    (lambda: dtensor.Plan.from_json("{"), ""),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "R").local_shape(2 ** 80), "rank"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "R").local_shape([2 ** 80]), "coordinate"),
    (lambda: dtensor.Layout.parse("2x2 8x8 S(0)R"), "no dtype before the placements"),
    (lambda: dtensor.Layout(dtensor.Mesh("3"), [8, 7], "P(avg)", dtype="i8"), "Partial(avg)"),
    (lambda: dtensor.Layout(dtensor.Mesh("2"), [4], "R" * 80000), "limit"),
])
def test_bad_input_is_a_value_error_naming_it(call, needle):
    with pytest.raises(ValueError) as e:
        call()
    assert needle in str(e.value)


@pytest.mark.parametrize("where", ["0", 1.0, None, [0.0], ["0"], True])
def test_layout_queries_with_the_wrong_type_are_type_errors(where):
    layout = dtensor.Layout(dtensor.Mesh("2"), [4], "S(0)")
    with pytest.raises(TypeError):
        layout.local_shape(where)


def test_error_messages_survive_non_ascii_and_nul():
    # a message cut after 80 characters inside a multi-byte character, and a NUL in a name
    with pytest.raises(ValueError) as e:
        dtensor.Layout(dtensor.Mesh("2"), [4], "R" + "é" * 100)
    assert "é" in str(e.value)
    with pytest.raises(ValueError) as e:
        dtensor.Mesh([2], ["a\x00b"], [])
    assert "\\x00" in str(e.value) and "b" in str(e.value)


def test_simulate_memory_limit():
    m = dtensor.Mesh("2x2")
    p = dtensor.plan(dtensor.Layout(m, [64, 64], "S(0)S(1)"), dtensor.Layout(m, [64, 64], "RR"))
    assert dtensor.simulate(p).verified
    with pytest.raises(ValueError, match="memory_limit"):
        dtensor.simulate(p, memory_limit=1000)
    assert dtensor.simulate(p, threads=True, memory_limit=1 << 30).verified


def test_type_stubs_ship_with_the_package():
    stub = pathlib.Path(dtensor.__file__).with_name("_core.pyi")
    assert stub.exists(), "the _core.pyi stub is missing from the installed package"
    text = stub.read_text()
    assert "def plan(" in text and "class Layout" in text
    assert pathlib.Path(dtensor.__file__).with_name("py.typed").exists()


DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "nccl"


def test_tune_fit_from_logs(tmp_path):
    import dtensor.tune
    r = dtensor.tune.fit([DATA / "all_reduce_8ranks.txt"])
    assert len(r.logs) == 1
    lf = r.logs[0]
    assert lf.log.collective == "all_reduce" and lf.log.ranks == 8 and lf.rows_used > 0
    assert lf.median_rel_error < 0.1 and 1 <= len(lf.bands) <= 4
    # the fitted model predicts what the log measured, and plans with it
    bytes_, t, _ = lf.log.rows[len(lf.log.rows) // 2]
    assert r.model.predict_us("all_reduce", 8, bytes_) == pytest.approx(t, rel=0.25)
    (tmp_path / "fitted.json").write_text(r.model.to_json())
    assert dtensor.CostModel.load(str(tmp_path / "fitted.json")) == r.model
    m = dtensor.Mesh("8")
    assert dtensor.plan(dtensor.Layout(m, [4096], "P(sum)"), dtensor.Layout(m, [4096], "R"), cost_model=r.model).steps
    # bad input: a log without a run header names the missing rank count
    with pytest.raises(ValueError, match="--ranks|ranks"):
        dtensor.tune.fit([DATA / "all_reduce_noheader.txt"])
    with pytest.raises(ValueError, match="does not exist"):
        dtensor.tune.fit([tmp_path / "missing.txt"])
    # not a readable log file: a ValueError naming it, never an OSError (here a directory)
    with pytest.raises(ValueError, match="not a regular file"):
        dtensor.tune.fit([tmp_path])
    with pytest.raises(TypeError, match="str or os.PathLike"):
        dtensor.tune.fit([42])
    with pytest.raises(ValueError, match="two logs"):
        dtensor.tune.fit([DATA / "all_reduce_8ranks.txt", DATA / "all_reduce_8ranks.txt"])
