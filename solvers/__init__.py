"""The optimization models of [serving-models] (docs/design.md), solved exactly: plain numbers in, a Plan out.

    from solvers import Candidates, GpuType, Problem, solve
    plan = solve(Problem(gpu_types=[GpuType("h100", 8, [Candidates(224, [1, 64], [0.004, 0.05], [0.3, 0.4])])],
                         images={224: 100_000}, deadline_s=60))

No torch, no profiling, no perfmodel: a scheduler can import this package alone.
"""

from solvers.errors import InfeasibleProblem, ProblemError, SolverError, SolverFailure
from solvers.plan import Assignment, Diagnosis, Plan
from solvers.problem import Candidates, GpuType, Problem
from solvers.solve import solve

__all__ = [
    "Assignment",
    "Candidates",
    "Diagnosis",
    "GpuType",
    "InfeasibleProblem",
    "Plan",
    "Problem",
    "ProblemError",
    "SolverError",
    "SolverFailure",
    "solve",
]
