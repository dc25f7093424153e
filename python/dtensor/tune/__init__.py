"""Fitting dtensor's cost model to your cluster, and checking that it picks the fastest plans.

    import dtensor, dtensor.tune
    result = dtensor.tune.fit(["all_gather.log", "all_reduce.log"])
    open("mycluster.json", "w").write(result.model.to_json())
    dtensor.plan(src, dst, cost_model=result.model)

Under torchrun, `python -m dtensor.tune measure|fit|validate` measures the collectives dtensor
runs, fits a profile to them and validates its plan ranking on the torch.distributed backend
(NCCL on GPUs, gloo on CPU): docs/cost-model.md, "Validating on your cluster". The functions
behind it: `measure` and `validate` (dtensor.tune._torch, imported on use: they need torch).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from .._core import CostModel
from .._core.tune import (Candidate, CaseResult, Log, LogFit, PlanResult, ProfileFit, Rounds, TimeSummary, ValidateCase,
                          ValidationReport, cases_from_json, fit_profile, parse_nccl_log, predict_plan_us,
                          render_fit_report, validate_cases, validation_candidates)
from .._core.tune import read_nccl_log as _read_nccl_log

__all__ = ["Candidate", "CaseResult", "Log", "LogFit", "PlanResult", "ProfileFit", "Rounds", "TimeSummary", "ValidateCase",
           "ValidationReport", "cases_from_json", "fit", "fit_profile", "measure", "parse_nccl_log", "predict_plan_us",
           "read_nccl_log", "render_fit_report", "validate", "validate_cases", "validation_candidates"]


def read_nccl_log(path: Union[str, os.PathLike], *, collective: Optional[str] = None, ranks: Optional[int] = None,
                  ranks_per_node: Optional[int] = None) -> Log:
    """Reads and parses one nccl-tests log file (ValueError naming the file for what it cannot read)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"a log path must be a str or os.PathLike, not {type(path).__name__}")
    # the library's reader (the CLI's): ValueError naming the file when it is missing, not a
    # regular file, above 64 MiB or unreadable
    return _read_nccl_log(os.fsdecode(path), collective, ranks, ranks_per_node)


def fit(paths: Sequence[Union[str, os.PathLike]], *, base: Union[str, CostModel] = "default",
        collective: Optional[str] = None, ranks: Optional[int] = None,
        ranks_per_node: Optional[int] = None) -> ProfileFit:
    """Fits one curve per log (one log per collective and link class) onto `base`'s links:
    `.model` is the fitted CostModel, `.logs` the per-log reports (rows used, bands, errors,
    ignored rows)."""
    logs = [read_nccl_log(p, collective=collective, ranks=ranks, ranks_per_node=ranks_per_node) for p in paths]
    return fit_profile(logs, base)


def measure(device_mesh, **kwargs):
    """Times dtensor's collectives on `device_mesh` (every rank calls it): see dtensor.tune._torch.measure."""
    from ._torch import measure as _measure
    return _measure(device_mesh, **kwargs)


def validate(device_mesh, **kwargs):
    """The plan-ranking validation on `device_mesh` (every rank calls it): see dtensor.tune._torch.validate."""
    from ._torch import validate as _validate
    return _validate(device_mesh, **kwargs)
