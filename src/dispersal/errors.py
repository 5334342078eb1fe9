"""Errors dispersal raises for bad input (the model re-exports them as `dispersal.model.inputs.errors`).
Expected infeasibility is never an exception."""

from __future__ import annotations


class InputError(ValueError):
    """A user-supplied value is invalid.

    The message is one line that names the field and what is allowed, e.g.
    ``bandwidth: must be > 0 bit/s, got -5``. The CLI prints it and exits with status 2.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def require(condition: bool, field: str, message: str) -> None:
    """Raise InputError(field, message) unless condition holds."""
    if not condition:
        raise InputError(field, message)
