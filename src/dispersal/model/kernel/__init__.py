"""Kernel layer: the vectorised evaluation of configurations (time, memory, quality, cost, traffic).
Depends on `inputs` only; the per-site pre-pass (`sites`) and the scalar wrapper `estimate` (`run`)
stand above it."""
