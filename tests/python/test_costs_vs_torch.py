"""dtensor.plan(..., cost_model="pytorch") costs exactly what torch 2.15's graph planner finds, on
seeded random pairs (torch's planner run here on a fake process group, hosts of 8 devices as
dtensor's pytorch profile assumes)."""
import math
import random

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import os  # noqa: E402
import sys  # noqa: E402

import dtensor  # noqa: E402
from layouts import random_spec  # noqa: E402

# torch's graph-planner cost, shared with scripts/pin_torch_costs.py (which pins the C++ test's costs)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))

MESHES = [[4], [8], [2, 4], [4, 2], [2, 2, 2], [2, 4, 4]]


@pytest.fixture(scope="module")
def fake_world():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import _mesh_resources
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=64)
    saved = _mesh_resources.num_devices_per_host
    _mesh_resources.num_devices_per_host = lambda device_type: 8
    yield
    _mesh_resources.num_devices_per_host = saved
    dist.destroy_process_group()


def torch_cost(mesh, src, dst, shape):
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from pin_torch_costs import graph_planner_cost
    stride = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    meta = TensorMeta(torch.Size(shape), tuple(stride), torch.bfloat16)
    specs = []
    for s in (src, dst):
        pl, _ = s.torch()
        so = tuple(ShardOrderEntry(d, tuple(ms)) for d, ms in sorted(s.order.items()))
        specs.append(DTensorSpec(mesh, pl, tensor_meta=meta, shard_order=so, use_strided_shard_as_shard_order=False))
    return graph_planner_cost(mesh, meta, *specs)


def test_pytorch_costs_equal_torch_graph_planner(fake_world):
    from torch.distributed.device_mesh import DeviceMesh
    rng = random.Random(99)
    meshes, compared = {}, 0
    for _ in range(400):
        if compared >= 60:
            break
        mesh_shape = rng.choice(MESHES)
        src = random_spec(rng, mesh_shape, sizes=(1, 3, 8, 64, 1000), strided=False, ops=["sum", "max", "avg"])
        dst = random_spec(rng, mesh_shape, shape=src.shape, strided=False, op=src.partial_op())
        key = tuple(mesh_shape)
        if key not in meshes:
            meshes[key] = DeviceMesh("cpu", torch.arange(math.prod(mesh_shape)).reshape(mesh_shape))
        try:
            expect = torch_cost(meshes[key], src, dst, src.shape)
        except Exception:  # noqa: BLE001: torch refuses or fails on this pair; nothing to compare
            continue
        if not math.isfinite(expect):
            continue
        m = dtensor.Mesh(mesh_shape)
        p = dtensor.plan(dtensor.Layout(m, src.shape, src.text(), "bf16"), dtensor.Layout(m, dst.shape, dst.text(), "bf16"),
                         cost_model="pytorch", runner_up=False)
        assert p.total_cost_us == pytest.approx(expect, rel=1e-9, abs=1e-9), f"{src!r} -> {dst.text()}: {p.trace}"
        compared += 1
    assert compared >= 60
