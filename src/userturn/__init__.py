"""userturn: probe interaction awareness with user-turn generation.

A chat model answers a benchmark item; the same weights then write the next *user* turn
in their own chat template, and a judge decides whether it is a genuine follow-up.
"""

from __future__ import annotations

__version__ = "0.1.0"
