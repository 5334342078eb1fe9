"""The analytic model: pure Python + NumPy. Imports nothing from the testbed, CLI or app."""
