"""Presentation: results as table rows, figures, text and reports, shared by the CLI, the web app and
the HTML report.

Layers: `dispersal.model` computes; this package lays results out (`rows`, `figures`, `provenance`,
`export`, `report`, `resilience`) and formats every number through one formatter (`formats`); the
CLI (`dispersal.cli`) and the web app (`dispersal.app`) only call it. Nothing here imports the CLI,
the web app or streamlit.
"""
