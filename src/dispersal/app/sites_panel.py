"""The app's mixed-sites panel (an editable [[site]] table, its TOML and a scenario upload) and its
glossary: Streamlit widgets the main script (`streamlit_app.py`) draws in the sidebar and at the foot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from dispersal.app import logic

#: The columns of the editable sites table (the [[site]] keys, SI units as in a scenario file).
SITE_COLUMNS = (
    "name",
    "nodes",
    "region",
    "hardware",
    "chips_per_node",
    "bandwidth_up_bits_per_s",
    "bandwidth_down_bits_per_s",
    "latency_s",
)


def on_upload(ui: Callable[[], dict[str, Any]]) -> None:
    """A scenario TOML upload replaces the sidebar's scenario (sites included), like a preset."""
    import tempfile

    from dispersal.model.inputs.presets import load_scenario

    up = st.session_state.get("upload")
    if up is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "upload.toml"
        path.write_bytes(up.getvalue())
        try:
            scen = load_scenario(str(path))
        except ValueError as exc:
            st.session_state["_upload_error"] = f"{up.name}: {logic.one_line(exc)}"
            return
    st.session_state.pop("_upload_error", None)
    new = logic.ui_from_scenario(scen)
    for k in logic.SCENARIO_KEYS:
        if k in new:
            st.session_state[k] = new[k]
    st.session_state["_origin"] = {"label": f"upload {up.name}", "inputs": logic.scenario_inputs(ui())}


def sites_editor(sb: Any, ui: Callable[[], dict[str, Any]]) -> None:
    """Mixed sites: an editable table of the [[site]] rows (written back as TOML), the TOML itself and
    a scenario file upload."""
    text = str(st.session_state.get("sites_toml") or "")
    with sb.expander("Mixed sites ([[site]])", expanded=bool(text.strip())):
        try:
            d = logic.parse_sites_toml(text)
        except ValueError:
            d = None
        if d:
            rows = [{c: r.get(c) for c in SITE_COLUMNS} for r in d["site"]]
            edited = st.data_editor(rows, key="sites_table", num_rows="dynamic", hide_index=True)
            new_rows = [{k: v for k, v in r.items() if v is not None and v == v} for r in edited]
            if new_rows != [{k: v for k, v in r.items() if v is not None} for r in rows]:
                st.session_state["sites_toml"] = logic.sites_toml({**d, "site": new_rows})
        widget_area = st.text_area(
            logic.FIELD_BY_KEY["sites_toml"].label,
            key="sites_toml",
            height=160,
            help=logic.FIELD_BY_KEY["sites_toml"].help,
        )
        del widget_area
        st.file_uploader(
            "Upload a scenario (TOML)",
            type=["toml"],
            key="upload",
            on_change=on_upload,
            args=(ui,),
            help="A scenario file as `dispersal estimate --scenario FILE` reads it ([[site]] tables allowed).",
        )
        if st.session_state.get("_upload_error"):
            st.error(st.session_state["_upload_error"])


def glossary() -> None:
    """The glossary (docs/glossary.md) as an expander of anchored paragraphs."""
    path = Path(__file__).resolve().parents[3] / "docs" / "glossary.md"
    with st.expander("Glossary", expanded=False):
        if not path.is_file():
            st.caption("The glossary is docs/glossary.md in the source repository.")
            return
        import html
        import re

        for para in path.read_text(encoding="utf-8").split("\n\n"):
            m = re.match(r"\*\*(.+?)\*\*", para.strip())
            if not m:
                continue
            st.markdown(f"<span id='g-{logic.slug(m.group(1))}'></span>", unsafe_allow_html=True)
            st.markdown(html.unescape(para.strip()))
