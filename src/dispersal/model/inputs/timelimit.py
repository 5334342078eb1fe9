"""The longest rational training run (Epoch AI, "The Longest Training Run", 2022).

A run that takes longer than L is beaten by one that starts later on better hardware, software and
a larger budget: L = 1 / ((g_H + g_S + g_I) ln 10) years, with each g the growth in orders of
magnitude per year (log10 of the yearly factor).
"""

from __future__ import annotations

import math

from dispersal.model.inputs.errors import require
from dispersal.model.inputs.units import SECONDS_PER_YEAR

#: Unregulated growth per year: hardware 1.37x, software (algorithms) 3.0x, investment 3.5x
#: (Epoch AI; Rahman 2026 sec. 6) -> ~0.375 years.
UNREGULATED = (1.37, 3.0, 3.5)
#: Treaty scenario of Rahman 2026 sec. 6: +6%, +50%, +3% per year -> 2.03 years = 740 days.
TREATY = (1.06, 1.50, 1.03)


def max_run_length_s(hardware_growth: float, software_growth: float, investment_growth: float) -> float:
    """L = 1 / ((log10 g_H + log10 g_S + log10 g_I) ln 10) years, returned in seconds.

    Growth factors are per year (1.5 = +50%/yr); their product must exceed 1.
    """
    for name, g in (
        ("hardware_growth", hardware_growth),
        ("software_growth", software_growth),
        ("investment_growth", investment_growth),
    ):
        require(g > 0 and math.isfinite(g), name, f"must be a positive yearly factor, got {g}")
    total = math.log10(hardware_growth) + math.log10(software_growth) + math.log10(investment_growth)
    require(total > 0, "growth", f"the combined yearly growth must exceed 1x, got {10**total:.4g}x")
    return 1.0 / (total * math.log(10.0)) * SECONDS_PER_YEAR
