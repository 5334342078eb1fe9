"""Maintenance commands for the repository (not part of the model or the CLI): `update_golden`."""
