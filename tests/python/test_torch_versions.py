"""The version table (dtensor/torch/_versions.py) against the running torch: every fact of its row,
and every fact the table says all supported minors share, checked by running this torch
(scripts/python-versions.sh runs this file on each minor, 2.11 to 2.15)."""
import inspect

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from dtensor.torch import _versions  # noqa: E402


@pytest.fixture(scope="module")
def mesh():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import DeviceMesh
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    yield DeviceMesh("cpu", torch.arange(2))
    dist.destroy_process_group()
    import dtensor.torch as dt
    dt.clear_caches()


def test_running_torch_has_a_row():
    f = _versions.current()
    assert f.minor == _versions.minor_of(torch.__version__)
    assert _versions.FIRST <= f.minor <= _versions.LAST


def test_outside_the_range_is_refused_naming_version_and_range():
    for v in ("2.10.0", "2.16.0+cu130", "3.0.0", "garbage"):
        with pytest.raises(RuntimeError, match=r"torch .* outside .*2\.11 to 2\.15"):
            _versions.facts_for(v)
    assert _versions.facts_for("2.13.0+cpu").minor == (2, 13)


def test_redistribute_local_tensor_signature_and_modules():
    import importlib
    from torch.distributed.tensor import _redistribute
    fn = _redistribute.redistribute_local_tensor
    got = tuple((p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values())
    assert got == _versions.REDISTRIBUTE_SIGNATURE
    for name in _versions.REDISTRIBUTE_MODULES:
        assert importlib.import_module(name).redistribute_local_tensor is fn, name
    # and no other torch.distributed.tensor module binds it by name (the switch would miss it)
    import pkgutil
    import torch.distributed.tensor as pkg
    holders = set()
    for m in pkgutil.walk_packages(pkg.__path__, "torch.distributed.tensor."):
        try:
            mod = importlib.import_module(m.name)
        except Exception:  # noqa: BLE001 - optional modules (e.g. needing other packages)
            continue
        if getattr(mod, "redistribute_local_tensor", None) is fn:
            holders.add(m.name)
    assert holders == set(_versions.REDISTRIBUTE_MODULES)


def test_spec_carries_its_order(mesh):
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from torch.distributed.tensor.placement_types import _StridedShard
    from torch.distributed.device_mesh import DeviceMesh
    mesh2 = DeviceMesh("cpu", torch.arange(4).reshape(2, 2))
    meta = TensorMeta(torch.Size([8]), (1,), torch.float32)
    order = (ShardOrderEntry(0, (1, 0)),)
    spec = DTensorSpec(mesh2, (Shard(0), Shard(0)), tensor_meta=meta, shard_order=order)
    assert tuple(spec.shard_order) == order and not spec.use_strided_shard_as_shard_order
    strided = DTensorSpec(mesh2, (_StridedShard(0, split_factor=2), Shard(0)), tensor_meta=meta)
    assert strided.use_strided_shard_as_shard_order


def test_strided_split_factor_meaning(mesh):
    """_StridedShard(0, sf) over n ranks: sf pieces (torch.chunk), each cut into n, a rank holding
    its chunk of every piece in order; checked on the arange of uneven lengths, empty chunks too."""
    from torch.distributed.tensor.placement_types import _StridedShard
    import math
    for length in range(0, 14):
        for sf in (2, 3):
            for n in (2, 3):
                shards, _ = _StridedShard(0, split_factor=sf)._split_tensor(torch.arange(length), n, with_padding=False)
                pieces = list(torch.arange(length).chunk(sf)) if length else []
                for i in range(n):
                    want = []
                    for piece in pieces:
                        c = math.ceil(piece.numel() / n)
                        want += piece[i * c:(i + 1) * c].tolist()
                    assert shards[i].tolist() == want, (length, sf, n, i)


def _spied_backward(mesh, src, dst):
    """The target placements torch's backward of x.redistribute(dst) asks redistribute_local_tensor for."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor import _redistribute
    real, seen = _redistribute.redistribute_local_tensor, []

    def spy(local, current_spec, target_spec, **kw):
        seen.append(tuple(target_spec.placements))
        return real(local, current_spec, target_spec, **kw)
    x = DTensor.from_local(torch.ones(2, 2, requires_grad=True), mesh, src, run_check=False)
    y = x.redistribute(mesh, dst)
    _redistribute.redistribute_local_tensor = spy
    try:
        y.to_local().sum().backward()
    finally:
        _redistribute.redistribute_local_tensor = real
    return seen


def test_backward_of_partial_to_strided(mesh):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    # (FSDP+TP's form: torch 2.11 cannot read a lone _StridedShard on a 1-d mesh as a shard order)
    mesh2 = DeviceMesh("cpu", torch.arange(4).reshape(2, 2))
    seen = _spied_backward(mesh2, [Partial(), Shard(0)], [_StridedShard(0, split_factor=2), Shard(0)])
    assert seen, "the backward never redistributed"
    want = Replicate() if _versions.current().strided_grad_replicates_partial else Partial()
    assert seen[-1] == (want, Shard(0)), seen
    # a plain Shard target gives Replicate on every minor
    assert _spied_backward(mesh, [Partial()], [Shard(0)])[-1] == (Replicate(),)


def test_shard_to_partial_through_the_public_api(mesh):
    from torch.distributed.tensor import DTensor, Partial, Shard
    x = DTensor.from_local(torch.ones(2, 2), mesh, [Shard(0)], run_check=False)
    if _versions.current().shard_to_partial_api:
        assert x.redistribute(mesh, [Partial()]).placements == (Partial(),)
    else:
        with pytest.raises(RuntimeError, match="internal use only"):
            x.redistribute(mesh, [Partial()])


def test_process_group_timeout_setter():
    from torch.distributed import distributed_c10d
    assert hasattr(dist, "set_timeout") == _versions.current().public_set_timeout
    assert callable(distributed_c10d._set_pg_timeout)  # the fallback exists on every minor


def test_strided_offset_mode():
    from torch.distributed.tensor import placement_types
    assert hasattr(placement_types, "_StridedShardOffsetMode") == _versions.current().strided_offset_mode


def test_functional_collectives_take_what_compiled_regions_pass():
    import torch.distributed._functional_collectives as funcol
    want = {"all_gather_tensor": ["self", "gather_dim", "group"], "reduce_scatter_tensor": ["self", "reduceOp", "scatter_dim", "group"],
            "all_reduce": ["self", "reduceOp", "group"],
            "all_to_all_single": ["self", "output_split_sizes", "input_split_sizes", "group"], "wait_tensor": ["tensor"]}
    for name, params in want.items():
        got = list(inspect.signature(getattr(funcol, name)).parameters)
        assert got[:len(params)] == params, (name, got)


def _explicit_dtensors():
    """Two rank-0 DTensors of shape 8x3 on a 2x2 mesh with an explicit order: S(0)[1]S(0)[0], and
    the same order beside a _StridedShard placement."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from torch.distributed.tensor.placement_types import _StridedShard
    mesh2 = DeviceMesh("cpu", torch.arange(4).reshape(2, 2))
    meta = TensorMeta(torch.Size([8, 3]), (3, 1), torch.float64)
    order = (ShardOrderEntry(0, (1, 0)),)
    plain = DTensorSpec(mesh2, (Shard(0), Shard(0)), tensor_meta=meta, shard_order=order)
    strided = DTensorSpec(mesh2, (_StridedShard(0, split_factor=2), Shard(0)), tensor_meta=meta, shard_order=order,
                          use_strided_shard_as_shard_order=False)
    local = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    return [DTensor(local.clone(), s, requires_grad=False) for s in (plain, strided)], order


def test_unflatten_and_its_mend(mesh):
    """torch's own __tensor_unflatten__ as the table says; with dtensor's mend, both DTensors come
    back with their order (what a compiled region sees of an input)."""
    from torch.distributed.tensor import DTensor
    from dtensor.torch import _order_mends
    _order_mends.install(ops=False)
    (plain, strided), order = _explicit_dtensors()

    def round_trip(x, unflatten):
        names, ctx = x.__tensor_flatten__()
        return unflatten({n: getattr(x, n) for n in names}, ctx, x.shape, x.stride())
    raw = round_trip(plain, _order_mends.torch_unflatten())
    assert (tuple(raw._spec.shard_order) == order) == _versions.current().unflatten_keeps_order
    if _versions.current().unflatten_keeps_order:  # 2.12 on: refused; 2.11: the order dropped
        with pytest.raises(ValueError, match="shard_order"):
            round_trip(strided, _order_mends.torch_unflatten())
    else:
        assert round_trip(strided, _order_mends.torch_unflatten())._spec.shard_order is None
    for x in (plain, strided):
        y = round_trip(x, DTensor.__tensor_unflatten__)
        assert y._spec == x._spec and tuple(y._spec.shard_order) == order, y._spec
        assert torch.equal(y._local_tensor, x._local_tensor)


def test_layout_preserving_ops_and_their_mend(mesh):
    """torch's own detach of an explicit-order DTensor as the table says (moves the data, or drops
    the order); with dtensor's mend, detach, clone, zero_, .grad accumulation (twice) keep spec and
    data on every minor."""
    from torch.distributed.tensor import DTensor
    from dtensor.torch import _order_mends
    _order_mends.install()
    for x in _explicit_dtensors()[0]:
        with _order_mends.without_op_mends():
            raw = x.detach()
        if _versions.current().order_ops_move_data:
            assert raw._spec.placements != x._spec.placements or raw._local_tensor.shape != x._local_tensor.shape
        else:
            assert torch.equal(raw._local_tensor, x._local_tensor) and raw._spec.shard_order != x._spec.shard_order
        for y in (x.detach(), x.detach().clone()):
            assert y._spec == x._spec and torch.equal(y._local_tensor, x._local_tensor), y._spec
        z = x.detach().clone().zero_()
        assert z._spec == x._spec and not z._local_tensor.any()
        leaf = DTensor(x._local_tensor.clone(), x._spec, requires_grad=True)
        g = DTensor(x._local_tensor + 100, x._spec, requires_grad=False)
        leaf.backward(g)
        leaf.backward(g)
        assert leaf.grad._spec == x._spec and torch.equal(leaf.grad._local_tensor, 2 * (x._local_tensor + 100))
