"""Checks layer: the model against published figures (validation) and the paper's tables (reproduction)."""
