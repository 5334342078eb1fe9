"""Run layer: `estimate(scenario) -> Estimate`, every figure of one run as a typed result, from the
kernel evaluated on the scenario's inputs (through the `sites` pre-pass when it lists sites or churn).
Depends on `inputs`, `kernel` and `sites`."""
