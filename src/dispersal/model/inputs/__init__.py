"""Inputs layer: what a run is (Scenario and its fields), the catalogues, units, model parameters, presets
and the integer codes the kernel reads (`codes`). Imports nothing from the other model layers."""
