"""Errors the model raises for bad input (`dispersal.errors`, on the ground floor so that the file
input and output every layer shares, `dispersal._io`, raises the same error without importing the
model)."""

from __future__ import annotations

from dispersal.errors import InputError, require

__all__ = ["InputError", "require"]
