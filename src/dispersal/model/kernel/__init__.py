"""Kernel layer: the vectorised evaluation of configurations (time, memory, quality, cost, traffic) and
its scalar wrapper `estimate`. Depends on `inputs` only."""
