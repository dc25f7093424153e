"""dtensor: optimal redistribution plans for distributed tensors, and their execution.

    >>> import dtensor
    >>> mesh = dtensor.Mesh("dp=2,tp=4")
    >>> src = dtensor.Layout(mesh, [1024, 512], "S(0)R", dtype="bf16")
    >>> dst = dtensor.Layout(mesh, [1024, 512], "RS(1)", dtype="bf16")
    >>> p = dtensor.plan(src, dst)
    >>> p.trace, p.total_cost_us

Layouts follow PyTorch DTensor's semantics (Shard, _StridedShard, Replicate, Partial, shard
orders), and veScale's RaggedShard (`RaggedLayout`, `plan_ragged`; single owners and
`plan_owners`). `dtensor.tune` fits the cost model to nccl-tests logs. `dtensor.torch` (imported on
demand; needs torch) plans and runs redistributions of
torch DTensors through torch.distributed. Bad input raises ValueError with the library's message;
a failing backend raises dtensor.BackendError (a RuntimeError).
"""
from ._core import (  # noqa: F401
    BackendError,
    BatchPlan,
    BatchSimulationResult,
    BatchStage,
    CostModel,
    CrossMeshMessage,
    CrossMeshPlan,
    CrossMeshSimulationResult,
    Layout,
    LoadPart,
    LoadPlan,
    LoadRequest,
    Mesh,
    Placement,
    Plan,
    BatchPlanCache,
    PlanCache,
    OwnerPlan,
    RaggedLayout,
    RaggedPlan,
    SavedTensor,
    SimulatedRank,
    SimulationResult,
    Step,
    dtypes,
    equivalent,
    bucket_of,
    evaluate_owners,
    exchange_received,
    flat_bucket_layouts,
    itemsize,
    newton_schulz_us,
    owner_layout,
    plan,
    plan_batch,
    plan_cross_mesh,
    plan_load,
    plan_load_part,
    plan_owners,
    plan_ragged,
    ragged_intermediate,
    simulate,
)
from ._ragged import RaggedShard, ragged_layout  # noqa: F401

__all__ = [
    "BackendError", "BatchPlan", "BatchSimulationResult", "BatchStage", "CostModel", "CrossMeshMessage", "CrossMeshPlan",
    "CrossMeshSimulationResult", "Layout", "Mesh", "Placement", "Plan", "PlanCache", "BatchPlanCache", "SimulatedRank",
    "SimulationResult", "Step", "dtypes", "equivalent", "itemsize", "plan", "plan_batch", "plan_cross_mesh", "simulate",
    "RaggedShard", "RaggedLayout", "RaggedPlan", "OwnerPlan", "ragged_layout", "plan_ragged", "plan_owners",
    "evaluate_owners", "newton_schulz_us", "owner_layout", "exchange_received", "flat_bucket_layouts", "bucket_of",
    "LoadPart", "LoadPlan", "LoadRequest", "SavedTensor", "plan_load", "plan_load_part", "ragged_intermediate",
]
__version__ = "0.1.0"
