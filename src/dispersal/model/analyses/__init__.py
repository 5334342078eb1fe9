"""Analyses layer: questions asked of the planner and kernel (uncertainty, countermeasures, detection,
resilience) and the quality fit."""
