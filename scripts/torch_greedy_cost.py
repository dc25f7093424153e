#!/usr/bin/env python3
"""PyTorch's own cost of its default (greedy) redistribution path for one pair: torch's
`redistribute_cost`, on hosts of 8 devices (the host size dtensor's `pytorch` profile assumes),
so that it compares with `dtensor plan --cost-model pytorch`. Needs torch (e.g. the test venv,
/opt/dtensor-venv/bin/python, which scripts/test.sh creates).

    python3 scripts/torch_greedy_cost.py --mesh 2x4 --shape 8192x8192 --from 'S(0)S(1)' --to 'S(1)S(0)'
"""
import argparse, math, os, re, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--to", dest="dst", required=True)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16", "f64"])
    a = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        sys.exit("error: torch is not installed (use the test venv: /opt/dtensor-venv/bin/python)")
    from torch_planner_compare import to_torch
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.distributed.device_mesh import DeviceMesh, _mesh_resources
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor._collective_utils import redistribute_cost

    try:
        dims = [int(x) for x in re.split(r"[x,]", re.sub(r"\w+=", "", a.mesh))]
        shape = [int(x) for x in a.shape.split("x")]
    except ValueError:
        sys.exit(f"error: --mesh {a.mesh!r} or --shape {a.shape!r} is not like 2x4 / 8192x8192")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=math.prod(dims))
    _mesh_resources.num_devices_per_host = lambda device_type: 8
    mesh = DeviceMesh("cpu", torch.arange(math.prod(dims)).reshape(dims))
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}[a.dtype]
    meta = TensorMeta(torch.Size(shape), tuple(math.prod(shape[i + 1:]) for i in range(len(shape))), dtype)
    specs = []
    for text in (a.src, a.dst):
        pl, so = to_torch(text, len(dims))
        specs.append(DTensorSpec(mesh, pl, tensor_meta=meta, shard_order=so, use_strided_shard_as_shard_order=False))
    print(f"torch greedy (redistribute_cost): {redistribute_cost(specs[0], specs[1]):.3f} us")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
