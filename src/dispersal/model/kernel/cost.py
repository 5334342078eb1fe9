"""Cost and energy of a run (spec/model.md sec. 7): chips x price x capex multiplier, or rental by
the chip-hour; energy at TDP x PUE, costed outside paper mode and never on top of a rental."""

from __future__ import annotations

import numpy as np

from dispersal.model.kernel.context import Arr, Inputs

#: The outputs of this stage.
COST_OUTPUTS = ("hardware_usd", "rental_usd", "energy_kwh", "energy_usd", "cost_usd", "power_per_node_w")


def cost(inp: Inputs, N: Arr, run_s: Arr) -> dict[str, Arr]:
    """Hardware, rental and energy cost of N nodes running run_s seconds (US dollars, kWh, W)."""
    g = inp.g
    chips = g("chips_per_node")
    chips_total = N * chips
    hours = run_s / 3600.0
    hardware_usd = chips_total * g("price_usd_per_chip") * g("capex_multiplier")
    rental_usd = chips_total * g("rental_usd_per_chip_hour") * hours
    power_node_w = chips * g("tdp_w") * g("pue")
    energy_kwh = N * power_node_w * hours / 1000.0
    renting = g("rental") > 0
    # A rental price already includes the provider's power bill.
    price_kwh = g("electricity_usd_per_kwh")
    # Energy is not costed at price 0 (paper mode), even for a run of unbounded length.
    energy_usd = np.where(renting | (price_kwh <= 0), 0.0, energy_kwh * price_kwh)
    return {
        "hardware_usd": hardware_usd,
        "rental_usd": rental_usd,
        "energy_kwh": energy_kwh,
        "energy_usd": energy_usd,
        "cost_usd": np.where(renting, rental_usd, hardware_usd) + energy_usd,
        "power_per_node_w": power_node_w,
    }
