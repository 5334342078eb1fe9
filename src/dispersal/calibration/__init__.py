"""Calibration: measure the model's penalties with real (small) training and fit its forms.

Pure-NumPy parts (importable without torch): `effective` (DDP scaling curve, effective compute),
`fit` (functional-form fits, bootstrap), `tomlio` (the calibration file, `load_calibration`).
`runner` and `sweep` need the ``train`` extra (torch); `report` writes the docs and plots.
"""

from __future__ import annotations

from dispersal.calibration.tomlio import load_calibration

__all__ = ["load_calibration"]
