"""The testbed: train a small GPT with several workers over an emulated WAN (optional extra).

Needs torch: ``pip install 'dispersal[train]'``. Importing this package without torch raises an
ImportError that names that command; ``dispersal.model`` never imports the testbed.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only on the core install
    raise ImportError("the testbed needs torch: pip install 'dispersal[train]'") from exc

INSTALL_HINT = "pip install 'dispersal[train]'"

__all__ = ["INSTALL_HINT"]
