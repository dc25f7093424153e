"""dtensor's layouts against torch's own, on thousands of random layouts (meshes up to 3-d, uneven
sizes, empty shards, _StridedShard, shard orders): local shape and global offset against
torch's compute_local_shape_and_global_offset, owned elements against torch's split primitives
applied in shard order, and both against the notation's oracle (layouts.owned)."""
import random

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import dtensor  # noqa: E402
from layouts import coords, owned, random_spec  # noqa: E402

MESHES = [[2], [3], [4], [2, 2], [2, 3], [3, 2], [2, 4], [2, 2, 2], [3, 2, 2]]


@pytest.fixture(scope="module")
def fake_world():
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=64)
    yield
    dist.destroy_process_group()
    import dtensor.torch as dt
    dt.clear_caches()


def torch_owned(spec, placements, coord):
    """torch's own split primitive, applied per tensor dim in the layout's shard order: Shard's
    _local_shard_size_and_offset; for _StridedShard its offsets function where the running torch
    has one taking an offset mode (2.15), else its _split_tensor on the indices (_versions)."""
    from dtensor.torch import _versions
    from torch.distributed.tensor.placement_types import _StridedShard
    offset_mode = _versions.current().strided_offset_mode
    out = []
    for d, length in enumerate(spec.shape):
        cur = list(range(length))
        for m in spec.order.get(d, []):
            p = placements[m]
            if isinstance(p, _StridedShard) and offset_mode:
                from torch.distributed.tensor.placement_types import _StridedShardOffsetMode
                size, offs = p._local_shard_size_and_offset(len(cur), spec.mesh_shape[m], coord[m],
                                                            _StridedShardOffsetMode.ALL)
                cur = [cur[i] for i in offs] if size else []
            elif isinstance(p, _StridedShard):
                shards, _ = _StridedShard(0, split_factor=p.split_factor)._split_tensor(
                    torch.tensor(cur, dtype=torch.long), spec.mesh_shape[m], with_padding=False)
                cur = shards[coord[m]].tolist() if coord[m] < len(shards) else []
            else:
                size, off = p._local_shard_size_and_offset(len(cur), spec.mesh_shape[m], coord[m])
                cur = cur[off:off + size]
        out.append(cur)
    return out


def expand(runs):
    return [i for a, b in runs for i in range(a, b)]


def test_layouts_match_torch(fake_world):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset
    import dtensor.torch as dt

    rng = random.Random(2024)
    meshes = {}
    checked = shape_checked = ranks_checked = 0
    for _ in range(2400):
        mesh_shape = rng.choice(MESHES)
        spec = random_spec(rng, mesh_shape)
        key = tuple(mesh_shape)
        if key not in meshes:
            n = 1
            for s in mesh_shape:
                n *= s
            meshes[key] = DeviceMesh("cpu", torch.arange(n).reshape(mesh_shape))
        placements, order = spec.torch()
        layout = dt.layout_of(meshes[key], placements, spec.shape, torch.float32, order)
        # the text form names the same layout
        assert layout == dtensor.Layout(dtensor.Mesh(mesh_shape), spec.shape, spec.text(), "f32"), repr(spec)
        # and maps back to torch's placements and order
        back, back_order = dt.placements_of(layout)
        assert back == placements and back_order == order, repr(spec)
        for rank, coord in coords(mesh_shape):
            ours = [expand(r) for r in layout.owned_runs(coord)]
            assert ours == owned(spec, coord), f"{spec} rank {rank}: dtensor {ours} vs the notation's oracle"
            assert ours == torch_owned(spec, placements, coord), f"{spec} rank {rank}: dtensor vs torch's splits"
            if not spec.explicit_order:  # torch's function applies mesh dims left to right only
                shape, offset = _compute_local_shape_and_global_offset(spec.shape, mesh_shape, coord, placements)
                assert list(shape) == layout.local_shape(coord), f"{spec} rank {rank}: local shape"
                assert list(offset) == layout.global_offset(coord), f"{spec} rank {rank}: global offset"
                shape_checked += 1
            else:
                assert layout.local_shape(coord) == [len(x) for x in ours]
            ranks_checked += 1
        checked += 1
    assert checked >= 2000
    print(f"\n{checked} layouts, {ranks_checked} ranks; {shape_checked} ranks also against "
          "compute_local_shape_and_global_offset")
