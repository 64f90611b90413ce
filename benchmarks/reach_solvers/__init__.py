"""Scripted MiniWoB++ solvers that use only the agent's action vocabulary (see `kit`)."""

from reach_solvers import solvers_geometry, solvers_tap, solvers_type
from reach_solvers.kit import SOLVERS, Episode, Solver, SolverPolicy, run_episode

__all__ = ["SOLVERS", "Episode", "Solver", "SolverPolicy", "run_episode", "solvers_geometry",
           "solvers_tap", "solvers_type"]  # fmt: skip
