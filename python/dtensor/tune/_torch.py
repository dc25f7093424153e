"""`tune measure` and `tune validate` on the torch.distributed backend: the C++ protocols (the
same as `dtensor tune` under mpirun) running dtensor's collectives through dtensor.torch's
communicator, on buffers that are torch tensors (GPU tensors under NCCL, CPU tensors under gloo)."""

from __future__ import annotations

import ctypes
import os
from typing import Iterable, Optional, Sequence, Union

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from .. import _core
from ..torch._communicator import _TorchComm
from ..torch._layout import _mesh_info

__all__ = ["measure", "validate"]


class _TuneComm(_TorchComm):
    """_TorchComm whose buffers the C++ side allocates (as torch tensors on the mesh's device) and
    fills; the collectives and copies are _TorchComm's, as dtensor.torch runs them."""

    def __init__(self, device_mesh: DeviceMesh, device: torch.device):
        super().__init__(device_mesh, _mesh_info(device_mesh), device)
        self.owned: list = []

    def _set_owned(self) -> None:
        self.buffers = tuple(self.owned)
        self.views = None

    def allocate(self, nbytes: int):
        t = torch.zeros(nbytes, dtype=torch.uint8, device=self.device)
        self.owned.append(t)
        self._set_owned()
        return len(self.owned) - 1, t.data_ptr()

    def release(self, index: int) -> None:
        self.owned[index] = torch.empty(0, dtype=torch.uint8, device=self.device)
        self._set_owned()

    def upload(self, loc, address: int, nbytes: int) -> None:
        host = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address), dtype=torch.uint8)
        self._view(loc, nbytes).copy_(host)

    def download(self, loc, nbytes: int) -> torch.Tensor:
        return self._view(loc, nbytes).to("cpu", copy=True)

    def wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _device_of(device_mesh: DeviceMesh) -> torch.device:
    if device_mesh.device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    if device_mesh.device_type != "cpu":
        raise ValueError(f"device mesh on {device_mesh.device_type!r}: dtensor.tune runs on cuda (NCCL) or cpu (gloo)")
    return torch.device("cpu")


def _communicator(device_mesh: DeviceMesh):
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"device_mesh: expected a torch DeviceMesh, got {type(device_mesh).__name__}")
    device = _device_of(device_mesh)
    impl = _TuneComm(device_mesh, device)
    info = impl.info
    return _core._PyCommunicator(info.mesh, info.dense[impl.my_rank], impl, device.type == "cpu"), impl


def _devices_per_host(devices_per_host: Optional[int]) -> int:
    if devices_per_host is None:
        # torchrun's processes per node; one host otherwise
        devices_per_host = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    if isinstance(devices_per_host, bool) or not isinstance(devices_per_host, int) or devices_per_host < 1:
        raise ValueError(f"devices_per_host must be a positive int, not {devices_per_host!r}")
    return devices_per_host


def oversubscribed(device_mesh: DeviceMesh) -> str:
    """A note when this host's ranks outnumber its cores on CPU (the measured times say little)."""
    if device_mesh.device_type != "cpu":
        return ""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    cores = os.cpu_count() or 0
    if cores and local > cores:
        return (f"{local} ranks share {cores} cores here: the ranks take turns, so the measured times say little about "
                f"a cluster (the protocol runs end to end)")
    return ""


def measure(device_mesh: DeviceMesh, *, min_bytes: int = 1024, max_bytes: int = 16 << 20, warmup: int = 1,
            iters: int = 5, devices_per_host: Optional[int] = None) -> list:
    """Times all_gather, reduce_scatter, all_reduce, alltoall and sendrecv as dtensor.torch runs
    them, over the mesh dims within a host and those across hosts (`devices_per_host`: torchrun's
    LOCAL_WORLD_SIZE by default), sizes doubling from min_bytes to max_bytes. Every rank of the
    mesh calls it; rank 0 of the mesh gets [(file name, nccl-tests text)], the others []."""
    for name, v in (("min_bytes", min_bytes), ("max_bytes", max_bytes), ("warmup", warmup), ("iters", iters)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    comm, _ = _communicator(device_mesh)
    return _core.tune._measure(comm, min_bytes, max_bytes, warmup, iters, _devices_per_host(devices_per_host))


def validate(device_mesh: DeviceMesh, *, profile: Union[str, _core.CostModel] = "default", against: Sequence = (),
             bytes: Iterable[int] = (64 << 10, 4 << 20), cases: Optional[Sequence[_core.tune.ValidateCase]] = None,
             memory_budget: Optional[int] = None, min_rounds: int = 8, max_rounds: int = 50,
             ci_target: float = 0.05, memory_limit: Optional[int] = None) -> _core.tune.ValidationReport:
    """The plan-ranking validation (`dtensor tune validate`) on `device_mesh`: every case's chosen
    plan under `profile` against the runner-up, the optimal plan on PyTorch's edges, the best plan
    of each profile in `against` and a batch's per-tensor plans, run as dtensor.torch runs them in
    rotated rounds. Every rank calls it with the same arguments and gets the same report. On CPU
    devices the host memory this host's ranks would hold (the mesh's need times LOCAL_WORLD_SIZE
    over the world size) is checked against `memory_limit` (default: half of this machine's
    memory) before anything is allocated: ValueError on every rank, naming the case and both."""
    comm, _ = _communicator(device_mesh)
    mesh = _mesh_info(device_mesh).mesh
    if cases is None:
        cases = _core.tune.validate_cases(mesh, list(bytes))
    cases = list(cases)
    for c in cases:
        for src, _dst in c.pairs:
            if src.mesh != mesh:
                raise ValueError(f"case {c.name!r} is on mesh {src.mesh}, not the device mesh's {mesh}")
    if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(memory_limit, int)
                                     or memory_limit <= 0):
        raise ValueError(f"memory_limit must be a positive number of bytes, not {memory_limit!r}")
    if device_mesh.device_type == "cpu":
        limit = memory_limit if memory_limit is not None else _core.tune.default_memory_limit()
        world = dist.get_world_size()
        local = max(1, min(world, int(os.environ.get("LOCAL_WORLD_SIZE", world) or world)))
        for c in cases:
            try:
                candidates = _core.tune.validation_candidates(c, profile, list(against), max_peak_bytes=memory_budget)
            except (ValueError, RuntimeError):
                continue  # skipped in the report, holding nothing
            need = _core.tune.validation_bytes(candidates) * local // max(1, mesh.num_ranks)
            if need > limit:
                raise ValueError(f"validate: case {c.name!r} ({len(candidates)} plans) needs about {need} bytes of host "
                                 f"memory on this host's {local} ranks, above the limit of {limit} bytes "
                                 f"(--sim-memory-limit, memory_limit)")
    report = _core.tune._validate(comm, profile, cases, list(against), memory_budget, min_rounds, max_rounds, ci_target)
    report.backend = f"torch.distributed {dist.get_backend()}"
    report.clock = "wall clock"
    report.note = oversubscribed(device_mesh)
    return report
