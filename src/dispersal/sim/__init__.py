"""Simulations that check the analytic model by brute force (may use simpy and NumPy)."""

from dispersal.sim.resilience_des import Estimate, SimulationResult, simulate

__all__ = ["Estimate", "SimulationResult", "simulate"]
