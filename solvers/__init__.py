"""The optimization models of [serving-models] (docs/design.md), solved exactly: plain numbers in, a Plan out.

    from solvers import Candidates, GpuType, Problem, solve
    plan = solve(Problem(gpu_types=[GpuType("h100", 8, [Candidates(224, [1, 64], [0.004, 0.05], [0.3, 0.4])])],
                         images={224: 100_000}, deadline_s=60))

Online serving (a request rate and a latency SLO in; GPUs, max batch and queue delay out) is
solve_online(OnlineProblem(...)) in solvers/online_solve.py.

No torch, no profiling, no perfmodel: a scheduler can import this package alone.
"""

from solvers.batch_problem import Candidates, GpuType, Problem
from solvers.batch_solution import Assignment, Diagnosis, Plan
from solvers.batch_solve import solve
from solvers.errors import InfeasibleProblem, ProblemError, SolverError, SolverFailure
from solvers.online_solve import OnlineDiagnosis, OnlineGpuType, OnlinePlan, OnlineProblem, ServiceTimes, solve_online

__all__ = [
    "Assignment",
    "Candidates",
    "Diagnosis",
    "GpuType",
    "InfeasibleProblem",
    "OnlineDiagnosis",
    "OnlineGpuType",
    "OnlinePlan",
    "OnlineProblem",
    "Plan",
    "Problem",
    "ProblemError",
    "SolverError",
    "ServiceTimes",
    "SolverFailure",
    "solve",
    "solve_online",
]
