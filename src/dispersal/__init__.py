"""dispersal: how far can frontier-scale AI training spread across small, separate sites?

The stable API is the analytic model (pure Python + NumPy). The testbed (torch) and the web app
live in optional extras and are never imported from here.
"""

from __future__ import annotations

__version__ = "0.1.0"

from dispersal.model import (
    Algorithm,
    Estimate,
    InputError,
    Mode,
    ModelParams,
    Scenario,
    estimate,
)

__all__ = ["Algorithm", "Estimate", "InputError", "Mode", "ModelParams", "Scenario", "__version__", "estimate"]
