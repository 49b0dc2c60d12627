"""The records.jsonl line codec: one line per user turn, then one per likelihood-probe
context, each carrying every stored field (``userturn recover`` reads them back).

The keys of a line are the output contract; they are built here from the typed records,
so writer and reader share one definition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from userturn.rundir.records import (
    AnswerRecord,
    LikelihoodRecord,
    Transcript,
    UserTurnRecord,
    answer_fields,
)
from userturn.rundir.store import Store
from userturn.types import Judgment

LINE_RECORDS: dict[str, type[LikelihoodRecord]] = {"likelihood": LikelihoodRecord}
"""The lines that are not user turns, by their ``probe`` value: a likelihood-probe
context has a line shape of its own."""


def line_record(obj: Mapping[str, Any]) -> type[UserTurnRecord] | type[LikelihoodRecord]:
    """The record a records.jsonl line holds (its ``probe`` field says which)."""
    return LINE_RECORDS.get(str(obj.get("probe")), UserTurnRecord)


def record_line(
    turn: UserTurnRecord, answer: AnswerRecord | None, judgments: list[Judgment]
) -> dict[str, Any]:
    """One records.jsonl line (the documented keys, plus every other stored field, so the
    store can be rebuilt from the lines), in a stable key order."""
    return {
        "id": turn.key,
        "item_id": turn.item_id,
        "model": turn.model,
        "context_model": turn.context_model,
        "family": turn.family,
        "dataset": turn.dataset,
        "config": turn.config,
        "probe": turn.probe,
        "turn": turn.turn,
        "temperature": turn.temperature,
        "sample": turn.sample,
        "seed": turn.seed,
        "perturbation": turn.perturbation,
        "perturbation_version": turn.perturbation_version,
        "perturbation_detail": turn.perturbation_detail,
        "messages": list(turn.messages),
        "answer_key": turn.answer_key,
        **answer_fields(answer),
        "user_turn": turn.user_turn,
        "user_finish": turn.user_finish,
        "user_tokens": turn.user_tokens,
        "thinking_markup": turn.thinking_markup,
        "content_survived": turn.content_survived,
        "removed": turn.removed,
        "prompt_sha": turn.prompt_sha,
        "template_sha": turn.template_sha,
        "prompt_tokens": turn.prompt_tokens,
        "prompt_tokens_reused": turn.prompt_tokens_reused,
        "reference_turn": turn.reference_turn,
        "candidates": None if turn.candidates is None else list(turn.candidates),
        "judgments": [j.to_row() for j in judgments],
    }


def likelihood_line(rec: LikelihoodRecord, answer: AnswerRecord | None) -> dict[str, Any]:
    """One likelihood-probe records.jsonl line: the record's own line plus its token
    counts and the answer it followed (a generated one, e.g. MT-Bench's, is referenced by
    no user turn, so without it here a recovered run would generate it again)."""
    return {
        **rec.to_line(),
        "prompt_tokens": rec.prompt_tokens,
        "prompt_tokens_reused": rec.prompt_tokens_reused,
        **answer_fields(answer),
    }


def transcripts(store: Store) -> Iterator[Transcript]:
    """Every user turn with its verdicts, in store order."""
    judgments = store.judgments()
    for turn in store.user_turns():
        yield Transcript(turn, tuple(judgments.get(turn.key, [])))


def iter_records(store: Store) -> Iterator[dict[str, Any]]:
    """One records.jsonl line per user turn, then one per likelihood-probe context, each
    with its answer and its item's content hash (``item_sha``): together every stored
    field (``userturn recover`` reads them back)."""
    answers = {a.key: a for a in store.answers()}
    judgments = store.judgments()
    items = store.all_item_hashes()
    for turn in store.user_turns():
        line = record_line(turn, answers.get(turn.answer_key), judgments.get(turn.key, []))
        yield {**line, "item_sha": items.get((turn.dataset, turn.item_id))}
    for rec in store.likelihoods():
        line = likelihood_line(rec, answers.get(rec.answer_key))
        yield {**line, "item_sha": items.get((rec.dataset, rec.item_id))}
