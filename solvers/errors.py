"""The solver's own errors: plain exceptions, so a scheduler can use solvers/ without perfmodel."""

from __future__ import annotations


class SolverError(Exception):
    """Base of every error solvers/ raises on purpose."""


class ProblemError(SolverError, ValueError):
    """The problem as given is malformed (a negative latency, an unknown mode ...)."""


class InfeasibleProblem(SolverError):
    """No plan meets the deadline with the GPUs given; `diagnosis` says why and what would help."""

    def __init__(self, diagnosis) -> None:
        super().__init__(diagnosis.reason)
        self.diagnosis = diagnosis


class SolverFailure(SolverError, RuntimeError):
    """HiGHS stopped without a usable answer, or a plan failed its own re-check (a bug)."""


class SolverTimeLimit(SolverFailure):
    """HiGHS reached the time limit before it found any solution."""
