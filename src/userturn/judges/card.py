"""Judge cards: how far to trust a judge, measured on reference labels, as data.

A rate measured by a judge is only as good as the judge: a judge that calls 55% of turns
genuine where the reference says 32% inflates every table. A card records the judge's
sensitivity and specificity for σ with Wilson CIs, the full label confusion and its
accuracy on the planted control set, with the confusion counts themselves so every
figure can be recomputed from the card alone. ``method`` says how the verdicts were
obtained (a shipped learned judge's card comes from out-of-fold verdicts, never from
its own training rows).

Schema (others read it; keep the keys): ``card_id`` (``judge@version``), ``judge``,
``version``, ``method``, ``references`` (``file``, ``sha256``, ``n``), ``sigma`` (``tp``,
``fn``, ``fp``, ``tn``), ``sensitivity`` and ``specificity`` (``value``, ``ci_low``,
``ci_high``), ``labels`` (the 8, in order), ``label_confusion`` (rows reference, columns
judge), ``control_set`` (``n``, ``sigma_accuracy``, ``label_accuracy``) or null,
``created`` (YYYY-MM-DD); plus ``excluded`` (verdicts not ok, left out of every count),
``ci_method`` and ``strata`` (per ``model``, ``dataset``, ``style`` and reference ``file``
of the rows: ``sigma``, ``sensitivity``, ``specificity``, ``reference_rate``,
``judged_rate``; a ``dataset`` stratum also has ``by_model``, its ``sigma`` counts per
model). ``style`` is ``protocol.style``: model output, a real person's turn, or a turn
written in a model's or a person's manner.
Corrected rates use the dataset and model strata (``analysis.strata``): ``by_model``
gives their cross counts, so that the two are fit jointly (``analysis.mixed``) and a
model is not credited with the datasets it happened to write.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from userturn.errors import UserError, read_text
from userturn.judges import protocol
from userturn.judges.base import Judge
from userturn.stats import wilson
from userturn.types import LABELS, JudgeInput, Judgment

STRATA = ("model", "dataset", "style", "file")
"""Reference-row fields a card breaks σ down by: a judge's error rates differ between
the models that wrote the turns, the datasets they answered and the manner of the turn
(a fluent model's, a person's), and a pooled card hides that from the one user it
matters to. ``style`` and ``file`` are derived (``protocol.style``, the file's name)."""
REFERENCE_KEYS = ("id", "messages", "user_turn", "genuine_followup", "label")
CI_METHOD = "wilson"
IN_SAMPLE = "the judge as given, on the reference files"


@dataclass(frozen=True)
class RefRow:
    """What a card needs of a reference row: the judge's input and the reference verdict."""

    input: JudgeInput
    genuine: bool
    label: str
    groups: tuple[tuple[str, str], ...] = ()
    """The row's ``model``, ``dataset`` (where the file gives them), ``style`` and
    ``file`` (for ``strata``)."""


def reference_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of a reference-label file (``judge_dev.jsonl`` format), each
    row checked: JSON, every key present, a label of the 8 that agrees with σ."""
    rows = []
    for n, line in enumerate(read_text(path, "reference file").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"invalid JSON: {exc.msg}", file=str(path), line=n) from exc
        missing = [k for k in REFERENCE_KEYS if not isinstance(r, dict) or k not in r]
        if missing:
            raise UserError("missing", file=str(path), line=n, field=missing[0])
        if (
            r["label"] not in LABELS
            or (r["label"] == "plausible_followup") != r["genuine_followup"]
        ):
            why = f"{r['label']!r} is not one of the 8 labels or disagrees with genuine_followup"
            raise UserError(why, file=str(path), line=n, field="label")
        rows.append((n, r))
    return rows


def read_reference(path: Path) -> list[RefRow]:
    """The rows of a reference-label file as a card counts them."""
    rows = []
    for n, r in reference_rows(path):
        try:
            rows.append(
                RefRow(
                    JudgeInput.of_row(r),
                    bool(r["genuine_followup"]),
                    str(r["label"]),
                    _groups(r, path),
                )
            )
        except (TypeError, ValueError) as exc:
            raise UserError(f"not a reference row ({exc})", file=str(path), line=n) from exc
    return rows


def _groups(row: dict[str, Any], path: Path) -> tuple[tuple[str, str], ...]:
    given = {k: str(row[k]) for k in ("model", "dataset") if row.get(k) is not None}
    derived = {"style": protocol.style(row), "file": path.name}
    return tuple((k, v) for k, v in (given | derived).items())


def interval(count: int, n: int) -> dict[str, float | None]:
    """A proportion with its Wilson CI (None where there is nothing to estimate)."""
    low, high = wilson(count, n)
    if low is None or high is None:
        return {"value": None, "ci_low": None, "ci_high": None}
    return {"value": round(count / n, 4), "ci_low": round(low, 4), "ci_high": round(high, 4)}


def confusion(rows: Sequence[RefRow], verdicts: Sequence[Judgment]) -> dict[str, Any]:
    """σ counts and the label confusion over verdicts with status ok."""
    sigma = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    matrix = [[0] * len(LABELS) for _ in LABELS]
    excluded = 0
    for row, v in zip(rows, verdicts, strict=True):
        if v.status != "ok" or v.genuine is None or v.label is None:
            excluded += 1
            continue
        key = ("t" if v.genuine == row.genuine else "f") + ("p" if v.genuine else "n")
        sigma[key] += 1
        if row.label in LABELS:
            matrix[LABELS.index(row.label)][LABELS.index(v.label)] += 1  # type: ignore[arg-type]
    return {"sigma": sigma, "label_confusion": matrix, "excluded": excluded}


def sigma_block(sigma: dict[str, int]) -> dict[str, Any]:
    """σ counts with sensitivity, specificity and the reference and judged rates."""
    n = sum(sigma.values())
    return {
        "sigma": sigma,
        "sensitivity": interval(sigma["tp"], sigma["tp"] + sigma["fn"]),
        "specificity": interval(sigma["tn"], sigma["tn"] + sigma["fp"]),
        "reference_rate": round((sigma["tp"] + sigma["fn"]) / n, 4) if n else None,
        "judged_rate": round((sigma["tp"] + sigma["fp"]) / n, 4) if n else None,
    }


def _split(
    rows: Sequence[RefRow], verdicts: Sequence[Judgment], field: str
) -> dict[str, tuple[list[RefRow], list[Judgment]]]:
    parts: dict[str, tuple[list[RefRow], list[Judgment]]] = {}
    for r, v in zip(rows, verdicts, strict=True):
        name = dict(r.groups).get(field)
        if name is not None:
            part = parts.setdefault(name, ([], []))
            part[0].append(r)
            part[1].append(v)
    return dict(sorted(parts.items()))


def strata(rows: Sequence[RefRow], verdicts: Sequence[Judgment]) -> dict[str, Any]:
    """σ per model, dataset, style and file of the reference rows (``STRATA``); each
    dataset stratum also breaks its σ counts down by model (``by_model``)."""
    out: dict[str, dict[str, Any]] = {}
    for field in STRATA:
        out[field] = {name: sigma_block(confusion(*part)["sigma"])
                      for name, part in _split(rows, verdicts, field).items()}  # fmt: skip
    for name, part in _split(rows, verdicts, "dataset").items():
        out["dataset"][name]["by_model"] = {
            model: confusion(*cell)["sigma"] for model, cell in _split(*part, "model").items()
        }
    return out


def control_summary(judge: Judge, path: Path) -> dict[str, Any]:
    rows = read_reference(path)
    verdicts = judge.judge([r.input for r in rows])
    pairs = list(zip(rows, verdicts, strict=True))
    sigma = sum(v.status == "ok" and v.genuine == r.genuine for r, v in pairs)
    label = sum(v.status == "ok" and v.label == r.label for r, v in pairs)
    n = len(rows)
    return {"n": n, "sigma_accuracy": round(sigma / n, 4) if n else None,
            "label_accuracy": round(label / n, 4) if n else None}  # fmt: skip


def file_entry(path: Path, n: int) -> dict[str, Any]:
    return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "n": n}


def build_card(
    judge: Judge,
    ref_paths: Sequence[Path],
    control_path: Path | None = None,
    method: str = IN_SAMPLE,
    limit: int | None = None,
) -> dict[str, Any]:
    """The card of ``judge`` on the reference files (and the control set, if given);
    ``limit``: only the first N rows of each file (a quick, rough card)."""
    refs, rows = [], []
    for path in ref_paths:
        part = read_reference(Path(path))[:limit]
        refs.append(file_entry(Path(path), len(part)))
        rows += part
    verdicts = judge.judge([r.input for r in rows])
    counts = confusion(rows, verdicts)
    pooled = sigma_block(counts["sigma"])
    return {
        "card_id": f"{judge.id}@{judge.version}",
        "judge": judge.id,
        "version": judge.version,
        "method": method,
        "references": refs,
        "sigma": pooled["sigma"],
        "sensitivity": pooled["sensitivity"],
        "specificity": pooled["specificity"],
        "strata": strata(rows, verdicts),
        "labels": list(LABELS),
        "label_confusion": counts["label_confusion"],
        "control_set": None if control_path is None else control_summary(judge, control_path),
        "created": date.today().isoformat(),
        "excluded": counts["excluded"],
        "ci_method": CI_METHOD,
    }


def card_digest(card: dict[str, Any]) -> str:
    """A short digest of what a card measured (every field but ``created``).

    ``card_id`` names the judge and its version, not the measurement: re-measuring one
    judge on grown reference files changes its counts, and so every corrected rate, under
    the same id. A run records this digest beside the id, so two corrected figures can be
    told apart by the card that produced them."""
    body = {k: v for k, v in card.items() if k != "created"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def card_filename(judge_id: str) -> str:
    """A file name for a judge id (``llm:openai:m`` -> ``llm_openai_m.json``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", judge_id).strip("_") + ".json"


def write_card(card: dict[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / card_filename(str(card["judge"]))
    path.write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return path


def load_card(judge_id: str, version: str) -> dict[str, Any] | None:
    """The card shipped for a built-in judge, if it describes exactly this version."""
    entry = resources.files("userturn.judges").joinpath("cards", card_filename(judge_id))
    if not entry.is_file():
        return None
    card: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return card if card.get("version") == version else None
