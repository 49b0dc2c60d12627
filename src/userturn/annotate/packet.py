"""Annotation packets: a blinded folder for annotators, and a key kept apart from it.

A packet folder holds ``packet.json`` (format, a random packet id, the count) and
``examples.jsonl`` with ONLY ``{"id", "messages": [{"role", "content"}], "user_turn"}``
per line: no model, dataset, temperature, perturbation, reference turn, judge verdict or
hash, because any of those can anchor a human's judgment (the paper's annotators saw the
context and the user turn only). Ids are random tokens, not derived from record keys, so
they can't be looked up in records.jsonl either. The key that maps them back to records
lives outside the folder (default ``PACKET.key.json`` beside it), so the folder can be
handed to an annotator as is; the server later writes ``annotations.sqlite`` into it.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from userturn.annotate.sampling import Pick, Sampling, arrange, choose, eligible
from userturn.datasets.base import read_jsonl, require
from userturn.errors import UserError, check_readable, read_text
from userturn.judges import normalize_judge_spec
from userturn.run.outputs import write_json
from userturn.rundir.lines import iter_records
from userturn.rundir.store import open_run
from userturn.types import LABELS, Message

log = logging.getLogger(__name__)

PACKET_FORMAT = "userturn-annotation-packet"
KEY_FORMAT = "userturn-annotation-key"
EXAMPLES_NAME = "examples.jsonl"
META_NAME = "packet.json"


@dataclass(frozen=True)
class ExportOptions:
    n: int = 100
    sampling: Sampling | Literal["auto"] = "disagreement"
    """``auto``: disagreement sampling when the run has two judges, else prevalence."""
    judges: tuple[str, ...] = ()
    seed: int = 0
    share: float = 0.5
    duplicates: int = 5


@dataclass(frozen=True)
class ExportResult:
    packet: Path
    key: Path
    examples: int
    duplicates: int
    strata: dict[str, int] = field(default_factory=dict)
    note: str | None = None
    """Why the sampling differs from the one asked for (``auto`` with one judge)."""


def default_key_path(packet: Path) -> Path:
    return packet.parent / (packet.name + ".key.json")


def export_packet(
    run_dir: Path, packet: Path, opts: ExportOptions, key_path: Path | None = None
) -> ExportResult:
    """Sample a run into a blinded packet folder plus a key file outside it."""
    key_path = key_path or default_key_path(packet)
    _check_destinations(packet, key_path)
    records = eligible(_read_records(run_dir))
    sampling, note = _resolve_sampling(records, opts)
    opts = replace(opts, sampling=sampling)
    judges = _resolve_judges(run_dir, records, opts)
    rng = random.Random(opts.seed)
    picks = choose(records, opts.n, sampling, rng, judges=judges, share=opts.share)
    order = arrange(picks, opts.duplicates, rng)
    by_id = {str(r["id"]): r for r in records}
    entries = _assign_ids(order)
    packet_id = secrets.token_hex(8)
    write_json(key_path, _key(packet_id, run_dir, judges, opts, entries))
    _write_packet(packet, packet_id, [(i, by_id[p.record_id]) for i, p, _ in entries])
    strata: Counter[str] = Counter(p.stratum for p in picks)
    return ExportResult(
        packet, key_path, len(entries), len(entries) - len(picks), dict(strata), note
    )


def _resolve_sampling(
    records: list[dict[str, Any]], opts: ExportOptions
) -> tuple[Sampling, str | None]:
    """``auto``: disagreements need two judges; a run judged once (the default run) gets
    prevalence sampling, said in one line, rather than an error."""
    if opts.sampling != "auto":
        return opts.sampling, None
    known = sorted({str(j.get("judge")) for r in records for j in r.get("judgments") or []})
    if len(set(opts.judges)) >= 2 or (not opts.judges and len(known) >= 2):
        return "disagreement", None
    if opts.judges:
        raise UserError("--judges needs two judges for disagreement sampling", field="--judges")
    note = (
        f"the run has {len(known) or 'no'} judge{'s' if len(known) != 1 else ''}"
        f"{' (' + ', '.join(known) + ')' if known else ''}, so the packet samples by "
        "prevalence (uniformly); judge the run with a second judge for disagreement sampling"
    )
    return "prevalence", note


def _key(
    packet_id: str,
    run_dir: Path,
    judges: tuple[str, ...],
    opts: ExportOptions,
    entries: list[tuple[str, Pick, str | None]],
) -> dict[str, Any]:
    """The key: how the packet was drawn, and each opaque id's record and stratum."""
    return {
        "format": KEY_FORMAT,
        "version": 1,
        "packet_id": packet_id,
        "run": str(run_dir.resolve()),
        "sampling": opts.sampling,
        "judges": list(judges),
        "disagreement_share": opts.share if opts.sampling == "disagreement" else None,
        "seed": opts.seed,
        "n_requested": opts.n,
        "duplicates_planted": sum(dup is not None for _, _, dup in entries),
        "examples": [
            {"id": i, "record_id": p.record_id, "stratum": p.stratum, "duplicate_of": dup}
            for i, p, dup in entries
        ],
    }


def _check_destinations(packet: Path, key_path: Path) -> None:
    if packet.exists() and (not packet.is_dir() or any(packet.iterdir())):
        raise UserError(
            "packet folder exists and is not empty; choose a new --out",
            file=str(packet),
            field="out",
        )
    if key_path.resolve().is_relative_to(packet.resolve()):
        raise UserError(
            "the key must be stored outside the packet folder, or annotators would receive it",
            file=str(key_path),
            field="key",
        )
    if key_path.exists():
        raise UserError(
            "key file exists; refusing to orphan the packet it belongs to",
            file=str(key_path),
            field="key",
        )


def _read_records(run_dir: Path) -> list[dict[str, Any]]:
    with open_run(run_dir) as store:
        return list(iter_records(store))


def _resolve_judges(
    run_dir: Path, records: list[dict[str, Any]], opts: ExportOptions
) -> tuple[str, ...]:
    """The judges whose disagreements we sample: as given, or all judges in the run."""
    if opts.sampling == "prevalence":
        if opts.judges:
            raise UserError("--judges only applies to --sampling disagreement", field="judges")
        return ()
    known = sorted({str(j.get("judge")) for r in records for j in r.get("judgments") or []})
    judges = tuple(normalize_judge_spec(j) for j in opts.judges) or tuple(known)
    unknown = [j for j in judges if j not in known]
    if unknown:
        raise UserError(
            f"judge {unknown[0]!r} has no judgments in this run (judges: "
            f"{', '.join(known) or 'none'})",
            file=str(run_dir),
            field="judges",
        )
    if len(set(judges)) < 2:
        raise UserError(
            f"disagreement sampling needs two judges; this run has "
            f"{', '.join(known) or 'none'} (use --sampling prevalence, or "
            "judge the run again with a second judge)",
            file=str(run_dir),
            field="judges",
        )
    return judges


def _assign_ids(order: list[Pick]) -> list[tuple[str, Pick, str | None]]:
    """Random opaque ids; a replanted duplicate points at its original's id (key only)."""
    used: set[str] = set()
    first: dict[str, str] = {}
    out: list[tuple[str, Pick, str | None]] = []
    for pick in order:
        ex_id = secrets.token_hex(5)
        while ex_id in used:
            ex_id = secrets.token_hex(5)
        used.add(ex_id)
        dup = first.get(pick.record_id) if pick.duplicate else None
        first.setdefault(pick.record_id, ex_id)
        out.append((ex_id, pick, dup))
    return out


def blind(record: dict[str, Any]) -> dict[str, Any]:
    """What an annotator may see of a record: roles, contents and the user turn."""
    messages = [
        {"role": str(m.get("role")), "content": _text(m.get("content"))}
        for m in record.get("messages") or []
    ]
    return {"messages": messages, "user_turn": str(record.get("user_turn") or "")}


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _write_packet(packet: Path, packet_id: str, examples: list[tuple[str, dict[str, Any]]]) -> None:
    packet.mkdir(parents=True, exist_ok=True)
    with (packet / EXAMPLES_NAME).open("w", encoding="utf-8") as f:
        for ex_id, rec in examples:
            f.write(json.dumps({"id": ex_id, **blind(rec)}, ensure_ascii=False) + "\n")
    write_json(
        packet / META_NAME,
        {
            "format": PACKET_FORMAT,
            "version": 1,
            "packet_id": packet_id,
            "n_examples": len(examples),
            "labels": list(LABELS),
        },
    )


@dataclass(frozen=True)
class Example:
    id: str
    messages: tuple[Message, ...]
    user_turn: str


@dataclass(frozen=True)
class Packet:
    path: Path
    packet_id: str
    examples: tuple[Example, ...]

    def ids(self) -> list[str]:
        return [e.id for e in self.examples]


def load_packet(path: Path) -> Packet:
    """Read a packet folder written by :func:`export_packet`."""
    meta_path = path / META_NAME
    if not meta_path.is_file():
        raise UserError(
            f"not an annotation packet (no {META_NAME})", file=str(path), field="packet"
        )
    meta = _json_file(meta_path, "packet file")
    if not isinstance(meta, dict) or meta.get("format") != PACKET_FORMAT:
        raise UserError(
            f"format is {meta.get('format') if isinstance(meta, dict) else None!r}, "
            f"expected {PACKET_FORMAT!r}",
            file=str(meta_path),
            field="format",
        )
    examples_path = path / EXAMPLES_NAME
    examples = [
        _example(obj, examples_path, line)
        for line, obj in read_jsonl(check_file(examples_path, "packet examples file"))
    ]
    return Packet(path, str(meta.get("packet_id")), tuple(examples))


def check_file(path: Path, what: str) -> Path:
    check_readable(path, what)
    return path


def _json_file(path: Path, what: str) -> Any:
    """A whole JSON file, or one line naming it (damaged, truncated, not UTF-8)."""
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as exc:
        raise UserError(f"damaged {what}: {exc.msg}", file=str(path), line=exc.lineno) from exc


def _example(obj: dict[str, Any], path: Path, line: int) -> Example:
    ex_id = require(obj, "id", str, path, line)
    messages = require(obj, "messages", list, path, line)
    if not all(isinstance(m, dict) for m in messages):
        raise UserError("expected message objects", file=str(path), line=line, field="messages")
    return Example(ex_id, tuple(messages), require(obj, "user_turn", str, path, line))


def load_key(key_path: Path, packet: Packet) -> dict[str, Any]:
    """Read a key and check it belongs to ``packet`` (same random packet id)."""
    if not key_path.is_file():
        raise UserError("key file not found", file=str(key_path), field="key")
    key = _json_file(key_path, "key file")
    if not isinstance(key, dict) or key.get("format") != KEY_FORMAT:
        raise UserError("not an annotation key", file=str(key_path), field="format")
    if key.get("packet_id") != packet.packet_id:
        raise UserError(
            f"key is for packet {key.get('packet_id')}, not {packet.packet_id}",
            file=str(key_path),
            field="packet_id",
        )
    return key
