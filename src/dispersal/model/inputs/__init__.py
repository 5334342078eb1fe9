"""Inputs layer: what a run is (Scenario and its fields), the catalogues, units, model parameters, presets.

Imports nothing from the other model layers except the kernel's integer codes."""
