"""A gloo world of 2 in which rank 1 never joins dtensor.tune.validate (it leaves at once): rank 0
must fail within its process group's timeout with dtensor's BackendError, not hang."""
import datetime
import os
import sys
import time

import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank: int, world: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=5))
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    if rank == 1:
        os._exit(0)  # a rank that dies before the validation
    import dtensor
    import dtensor.tune
    t0 = time.monotonic()
    try:
        dtensor.tune.validate(mesh, bytes=[4096], max_rounds=8)
    except dtensor.BackendError as e:
        print(f"rank 0: BackendError after {time.monotonic() - t0:.1f} s: {e}", flush=True)
        os._exit(0)
    print("rank 0: validate returned", flush=True)
    os._exit(1)


if __name__ == "__main__":
    mp.start_processes(run, args=(2,), nprocs=2, join=True, start_method="spawn")
    sys.exit(0)
