"""The web app's fixed page text: field placeholders, number-input steps and the page CSS (kept out of
`streamlit_app` so the page's flow reads top to bottom)."""

from __future__ import annotations

PLACEHOLDERS = {
    "tokens_t": "fill the time budget",
    "active_params_b": "dense (= total)",
    "chip_tflops": "catalogue",
    "chip_memory_gb": "catalogue",
    "chip_price_usd": "catalogue",
    "chip_tdp_w": "catalogue",
    "mfu": "model default",
    "res_down_for_days": "for ever",
    "res_run_days": "training time",
}
STEPS = {
    "chip_tflops": 10.0,
    "chip_memory_gb": 8.0,
    "chip_price_usd": 1000.0,
    "chip_tdp_w": 50.0,
    "mfu": 0.01,
    "params_b": 1.0,
    "active_params_b": 1.0,
    "tokens_t": 0.1,
    "up_mbps": 10.0,
    "down_mbps": 10.0,
    "latency_ms": 5.0,
    "compression_ratio": 1.0,
    "activation_compression": 1.0,
    "regional_mbps": 10.0,
    "regional_latency_ms": 1.0,
    "pp_mbps": 10.0,
    "pp_latency_ms": 1.0,
    "duration_days": 1.0,
    "growth_hardware": 0.01,
    "growth_software": 0.01,
    "growth_investment": 0.01,
    "capex_multiplier": 0.01,
    "pue": 0.01,
    "electricity_usd_per_kwh": 0.001,
    "res_chip_mtbf_h": 1000.0,
    "res_restart_h": 0.05,
    "res_max_chips": 1000.0,
    "res_lose_at_days": 1.0,
    "res_down_for_days": 1.0,
    "res_run_days": 1.0,
}
#: Text colours with >= 4.5:1 contrast on white (WCAG 2.1 AA) for the help and caption text that
#: Streamlit draws in a lighter grey by default.
CSS = """
<style>
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p,
[data-testid="stWidgetLabel"] p, [data-testid="stTooltipIcon"], [data-testid="stTooltipHoverTarget"] svg,
.stTooltipIcon, [data-testid="stMarkdownContainer"] small, [data-testid="stCaptionContainer"] code
{ color: #3d3d3d !important; }
[data-testid="stCaptionContainer"] { opacity: 1 !important; }
input::placeholder, textarea::placeholder { color: #5c5c5c !important; opacity: 1 !important; }
.block-container { max-width: 100%; overflow-x: hidden; }
[data-testid="stTable"] { overflow-x: auto; }
[data-testid="stTable"] table { width: 100%; table-layout: auto; }
[data-testid="stTable"] td, [data-testid="stTable"] th { white-space: normal !important; overflow-wrap: anywhere;
  word-break: break-word; max-width: 28em; }
@media print { [data-testid="stSidebar"] { display: none; } [data-testid="stTable"] { overflow: visible; } }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { overflow-wrap: anywhere; }
[data-testid="stMarkdownContainer"] code { white-space: pre-wrap !important; overflow-wrap: anywhere; }
</style>
"""
