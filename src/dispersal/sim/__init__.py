"""Simulations that check the analytic model by brute force (NumPy draws, the standard library's heapq
event queue: SimPy's per-event process overhead would make 1.2 million chips slow)."""

from dispersal.sim.resilience_des import MeanEstimate, SimulationResult, simulate

__all__ = ["MeanEstimate", "SimulationResult", "simulate"]
