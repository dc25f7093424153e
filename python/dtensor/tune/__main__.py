"""python -m dtensor.tune measure|fit|validate: `dtensor tune` for torch users, under torchrun.

    torchrun --nproc-per-node 8 -m dtensor.tune measure --mesh 8 -o logs/
    python -m dtensor.tune fit logs/*.txt -o mycluster.json --report fit.html
    torchrun --nproc-per-node 8 -m dtensor.tune validate --mesh 2x4 --profile mycluster.json --report validate.html

measure and validate run on every rank of the job (NCCL on GPUs, gloo on CPU; outside torchrun a
world of one); rank 0 writes the logs and prints the report. Errors print `error: ...` and exit 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

from .. import _core


def _bytes(text: str, flag: str = "") -> int:
    """1024, 64K, 16M, 1G (1024-based), at most 2^62; ValueError naming `flag` otherwise."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in ("K", "M", "G", "T") else t
    where = f"{flag} " if flag else ""
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 20:
        raise ValueError(f"{where}{text!r} is not a byte size (e.g. 1024, 64K, 16M)")
    value = int(digits) * scale
    if value > 1 << 62:
        raise ValueError(f"{where}{text!r} is too large: at most 2^62 bytes")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dtensor.tune", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def dist_flags(s):
        s.add_argument("--backend", default="auto", help="auto (nccl with GPUs, else gloo), nccl or gloo")
        s.add_argument("--timeout", type=float, default=300, help="seconds a rank waits for its peers (default 300)")
        s.add_argument("--mesh", help="mesh shape over the job's ranks: 8, 2x4 or dp=2,tp=4")

    m = sub.add_parser("measure", help="time dtensor's collectives and write nccl-tests logs")
    dist_flags(m)
    m.add_argument("--sizes", default="1K:16M", help="MIN:MAX bytes, doubling (default 1K:16M)")
    m.add_argument("--iters", type=int, default=5, help="timed iterations per size (default 5)")
    m.add_argument("--devices-per-host", type=int, help="ranks per host (default: torchrun's LOCAL_WORLD_SIZE)")
    m.add_argument("-o", "--output", required=True, help="directory for the logs")

    f = sub.add_parser("fit", help="fit size-band curves to nccl-tests logs and write a profile")
    f.add_argument("logs", nargs="+", help="nccl-tests logs (measure's, or nccl-tests' own)")
    f.add_argument("--ranks", type=int, help="ranks of logs without a run header")
    f.add_argument("--ranks-per-node", type=int, help="ranks per node (default: from the device list)")
    f.add_argument("--collective", help="the collective, for logs that do not say")
    f.add_argument("--base", default="default", help="profile whose links and copy bandwidth the fit keeps")
    f.add_argument("--strict", action="store_true",
                   help="fail (exit 2, nothing written) when a fit's median error exceeds 20%% or a band hits a limit")
    f.add_argument("-o", "--output", required=True, help="the profile to write (JSON)")
    f.add_argument("--report", help="also write an HTML page with plots of the fit")
    f.add_argument("--format", default="text", choices=["text", "json"])

    v = sub.add_parser("validate", help="run the chosen plans against their competitors: predicted vs measured")
    dist_flags(v)
    v.add_argument("--profile", default="default", help="the profile validated: default, pytorch or a profile file")
    v.add_argument("--against", action="append", default=[], help="another profile whose best plan competes (repeatable)")
    v.add_argument("--bytes", default="64K,4M", help="tensor sizes of the built-in cases (default 64K,4M)")
    v.add_argument("--cases", help="a batch file (`dtensor plan --batch` JSON): every pair a case, and all together")
    v.add_argument("--memory-budget", help="the workspace every plan must keep within (bytes)")
    v.add_argument("--sim-memory-limit", help="the host memory this host's ranks may hold on CPU devices, checked "
                   "before allocating (default: half of this machine's memory)")
    v.add_argument("--min-rounds", type=int, default=8)
    v.add_argument("--max-rounds", type=int, default=50)
    v.add_argument("--format", default="text", choices=["text", "json"])
    v.add_argument("--report", help="also write an HTML page: predicted vs measured per plan")
    return p


def _init(args):
    """The process group (torchrun's environment, or a world of one) and the device mesh."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"--backend {args.backend!r}: auto, nccl or gloo")
    if not (args.timeout > 0):
        raise ValueError(f"--timeout {args.timeout}: must be positive seconds")
    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:  # not under torchrun: a world of one
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29531")
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=args.timeout))
    world = dist.get_world_size()
    if args.mesh is None:
        mesh = _core.Mesh([world])
    elif isinstance(args.mesh, _core.Mesh):
        mesh = args.mesh
    else:
        mesh = _core.Mesh(args.mesh)
    if mesh.num_ranks != world:
        raise ValueError(f"--mesh {args.mesh or mesh} has {mesh.num_ranks} ranks but the job has {world} processes "
                         f"(torchrun --nproc-per-node ...)")
    names = tuple(mesh.names) if any(mesh.names) else None
    return init_device_mesh("cuda" if backend == "nccl" else "cpu", tuple(mesh.shape), mesh_dim_names=names)


def _write(path: str, text: str, what: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise ValueError(f"{what} {path!r} cannot be written: {e.strerror}") from None


def _measure(args) -> None:
    import torch.distributed as dist
    from . import _torch
    lo, sep, hi = args.sizes.partition(":")
    if not sep:
        raise ValueError(f"--sizes {args.sizes!r} must be MIN:MAX (e.g. 1K:16M)")
    device_mesh = _init(args)
    logs = _torch.measure(device_mesh, min_bytes=_bytes(lo, "--sizes"), max_bytes=_bytes(hi, "--sizes"), iters=args.iters,
                          devices_per_host=args.devices_per_host)
    if dist.get_rank() != 0:
        return
    os.makedirs(args.output, exist_ok=True)
    for name, text in logs:
        path = os.path.join(args.output, name)
        _write(path, text, "log")
        print(f"wrote {path}")
    if not logs:
        print("nothing to measure: every mesh dim has one rank")
    note = _torch.oversubscribed(device_mesh)
    if note:
        print(f"note: {note}")


def _fit(args) -> None:
    from . import fit
    fitted = fit(args.logs, base=args.base, collective=args.collective, ranks=args.ranks,
                 ranks_per_node=args.ranks_per_node)
    warnings = _core.tune.fit_warnings(fitted)
    for w in warnings:  # as `dtensor tune fit` warns
        print(f"warning: {w}", file=sys.stderr)
    if args.strict and warnings:
        raise ValueError(f"--strict: {len(warnings)} warning(s), no profile written")
    _write(args.output, json.dumps(json.loads(fitted.model.to_json()), indent=2) + "\n", "-o")
    if args.report:
        _write(args.report, _core.tune.render_fit_report(fitted, args.output), "--report")
    if args.format == "json":
        print(_core.tune.fit_json(fitted, args.output))
        return
    print(_core.tune.fit_text(fitted), end="")
    if args.report:
        print(f"report {args.report}")
    print(f"wrote {args.output}")


def _validate(args) -> None:
    import torch.distributed as dist
    from . import _torch
    cases = None
    if args.cases:
        try:
            with open(args.cases) as f:
                text = f.read((64 << 20) + 1)
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--cases {args.cases!r} cannot be read: {e}") from None
        if len(text) > 64 << 20:
            raise ValueError(f"--cases {args.cases!r} is larger than 64 MiB")
        cases = _core.tune.cases_from_json(text)
        if args.mesh is None:
            args.mesh = cases[0].pairs[0][0].mesh
    sizes = [_bytes(b, "--bytes") for b in args.bytes.split(",")]
    against = [_core.CostModel.load(a) for a in args.against]
    budget = _bytes(args.memory_budget, "--memory-budget") if args.memory_budget else None
    limit = _bytes(args.sim_memory_limit, "--sim-memory-limit") if args.sim_memory_limit else None
    _core.CostModel.load(args.profile)  # a profile that does not load: refused before any process group
    _core.tune.Rounds(1, args.min_rounds, args.max_rounds)  # checked before any process group
    if args.mesh is not None and cases is None:  # the sizes too
        try:
            _core.tune.validate_cases(args.mesh if isinstance(args.mesh, _core.Mesh) else _core.Mesh(args.mesh), sizes)
        except ValueError as e:
            raise ValueError(f"--bytes {args.bytes!r}: {e}") from None
    device_mesh = _init(args)
    report = _torch.validate(device_mesh, profile=args.profile, against=against, bytes=sizes, cases=cases,
                             memory_budget=budget, min_rounds=args.min_rounds, max_rounds=args.max_rounds,
                             memory_limit=limit)
    if dist.get_rank() == 0:
        if args.report:
            _write(args.report, report.html(), "--report")
        print(report.to_json() if args.format == "json" else report.text(), end="\n" if args.format == "json" else "")
        if args.report and args.format != "json":
            print(f"report {args.report}")
    if not report.all_verified():
        raise _core.BackendError("validate: a plan's output is wrong on some rank (marked OUTPUT WRONG)")


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        {"measure": _measure, "fit": _fit, "validate": _validate}[args.command](args)
    except (ValueError, TypeError, _core.BackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()
        except ImportError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
