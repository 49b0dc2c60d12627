"""Which judge card a run's cells are corrected with.

A card describes one judge at one version (its sensitivity and specificity on reference
labels, as confusion counts). A run's cells use, per judge, the card for the version that
judged them: first a card written into the run directory (``userturn judge card --run
DIR``, for LLM judges), else the card shipped with a built-in judge. No card, no
correction (``rate_corrected`` stays null); a card for another version is never used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from userturn.errors import UserError
from userturn.judges.card import card_filename, load_card
from userturn.rundir.store import Store

CARDS_DIR = "judge_cards"


def run_card(run_dir: Path, judge: str, version: str) -> dict[str, Any] | None:
    path = run_dir / CARDS_DIR / card_filename(judge)
    if not path.is_file():
        return None
    try:
        card: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        _ = [int(card["sigma"][k]) for k in ("tp", "fn", "fp", "tn")]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a judge card ({exc})", file=str(path)) from exc
    return card if card.get("version") == version else None


def judge_cards(store: Store) -> dict[str, dict[str, Any]]:
    """judge id -> the card matching the version that judged most of its verdicts."""
    run_dir = store.path.parent
    out = {}
    for judge, version in store.judge_versions().items():
        card = run_card(run_dir, judge, version) or load_card(judge, version)
        if card is not None:
            out[judge] = card
    return out
