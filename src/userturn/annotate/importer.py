"""Turn a packet's annotations back into label files that ``userturn agree`` reads.

Opaque ids go back to record ids through the key, so ``agree human.jsonl judge.jsonl``
matches a human file against ``export labels`` output by the records.jsonl ``id``. A
planted duplicate is scored, never emitted: the pair's agreement is the annotator's
consistency, and the label file keeps the first showing (or the replant, if the first
was skipped), so no record counts twice. Inter-annotator κ is computed pairwise on the
records both annotators labelled.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from userturn.annotate.db import DB_NAME, Annotation, AnnotationDB
from userturn.annotate.packet import load_key, load_packet
from userturn.errors import UserError
from userturn.run.outputs import write_json
from userturn.stats import kappa

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnotatorReport:
    annotator: str
    file: str
    labelled: int
    unlabelled: int
    duplicate_pairs: int
    sigma_consistency: float | None
    label_consistency: float | None


@dataclass(frozen=True)
class PairReport:
    a: str
    b: str
    n: int
    agreement: float | None
    kappa: float | None
    label_agreement: float | None
    label_kappa: float | None


@dataclass(frozen=True)
class ImportResult:
    annotators: list[AnnotatorReport]
    pairs: list[PairReport]


def import_annotations(packet_dir: Path, key_path: Path, out_dir: Path) -> ImportResult:
    """Write ``OUT/<annotator>.jsonl`` per annotator, plus the consistency summaries."""
    packet = load_packet(packet_dir)
    key = load_key(key_path, packet)
    if not (packet_dir / DB_NAME).is_file():
        raise UserError(
            f"no {DB_NAME}: nobody has annotated this packet yet",
            file=str(packet_dir),
            field="packet",
        )
    db = AnnotationDB.in_packet(packet_dir)
    try:
        by_annotator = _group(db.all(), {e["id"] for e in key["examples"]})
    finally:
        db.close()
    if not by_annotator:
        raise UserError("the packet has no annotations yet", file=str(packet_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    reports, labels = [], {}
    for name, file in zip(by_annotator, _file_names(list(by_annotator)), strict=True):
        rows, report = _annotator_labels(name, by_annotator[name], key["examples"])
        _write_jsonl(out_dir / file, rows)
        reports.append(AnnotatorReport(annotator=name, file=file, **report))
        labels[name] = {r["id"]: r for r in rows}
    pairs = [_pair(a, b, labels[a], labels[b]) for a, b in combinations(labels, 2)]
    summary = {
        "annotators": [asdict(r) for r in reports],
        "inter_annotator": [asdict(p) for p in pairs],
    }
    write_json(out_dir / "import_summary.json", summary)
    if pairs:
        write_json(out_dir / "inter_annotator.json", {"pairs": [asdict(p) for p in pairs]})
    return ImportResult(reports, pairs)


def _group(rows: list[Annotation], known: set[str]) -> dict[str, dict[str, Annotation]]:
    out: dict[str, dict[str, Annotation]] = {}
    for a in rows:
        if a.example_id not in known:
            log.warning(
                "annotation by %s for id %s is not in the key; ignored", a.annotator, a.example_id
            )
            continue
        out.setdefault(a.annotator, {})[a.example_id] = a
    return out


def _annotator_labels(
    name: str,
    got: dict[str, Annotation],
    examples: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Label rows (one per record) and the within-annotator duplicate consistency."""
    replants: dict[str, list[str]] = {}
    for e in examples:
        if e["duplicate_of"] is not None:
            replants.setdefault(e["duplicate_of"], []).append(e["id"])
    rows, sigma, label = [], [], []
    for e in examples:
        if e["duplicate_of"] is not None:
            continue
        showings = [got[i] for i in [e["id"], *replants.get(e["id"], [])] if i in got]
        if showings:
            rows.append(_label_row(e["record_id"], showings[0]))
        for other in showings[1:]:
            sigma.append(other.genuine == showings[0].genuine)
            label.append(other.label == showings[0].label)
    originals = sum(e["duplicate_of"] is None for e in examples)
    return rows, {
        "labelled": len(rows),
        "unlabelled": originals - len(rows),
        "duplicate_pairs": len(sigma),
        "sigma_consistency": _mean(sigma),
        "label_consistency": _mean(label),
    }


def _label_row(record_id: str, a: Annotation) -> dict[str, Any]:
    return {
        "id": record_id,
        "genuine_followup": a.genuine,
        "label": a.label,
        "rationale": a.note,
        "status": "ok",
    }


def _pair(
    a: str, b: str, la: dict[str, dict[str, Any]], lb: dict[str, dict[str, Any]]
) -> PairReport:
    common = sorted(set(la) & set(lb))
    sa = [int(la[i]["genuine_followup"]) for i in common]
    sb = [int(lb[i]["genuine_followup"]) for i in common]
    ya = [la[i]["label"] for i in common]
    yb = [lb[i]["label"] for i in common]
    return PairReport(
        a,
        b,
        len(common),
        _mean([x == y for x, y in zip(sa, sb, strict=True)]),
        kappa(sa, sb),
        _mean([x == y for x, y in zip(ya, yb, strict=True)]),
        kappa(ya, yb),
    )


def _mean(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _file_names(names: list[str]) -> list[str]:
    """A safe, unique file name per annotator (names may hold spaces or accents)."""
    out: list[str] = []
    for name in names:
        stem = re.sub(r"[^\w.-]+", "_", name).strip("._") or "annotator"
        cand, i = stem, 2
        while f"{cand}.jsonl" in out:
            cand, i = f"{stem}_{i}", i + 1
        out.append(f"{cand}.jsonl")
    return out


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
