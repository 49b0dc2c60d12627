"""userturn: probe interaction awareness with user-turn generation.

A chat model answers a benchmark item; the same weights then write the next *user* turn
in their own chat template, and a judge decides whether it is a genuine follow-up.

Importing the package loads nothing heavy (the CLI starts fast and optional extras stay
optional): ``userturn.load_run`` is resolved lazily on first use, because it needs
pandas from the ``report`` extra.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_run"]


def __getattr__(name: str) -> Any:
    if name == "load_run":
        from userturn.analysis.loading import load_run

        return load_run
    raise AttributeError(f"module 'userturn' has no attribute {name!r}")
