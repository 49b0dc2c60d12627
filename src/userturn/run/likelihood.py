"""The likelihood probe: what does the model believe comes next, under its own user header?

For a context whose real next user turn is known (held-out conversations, MT-Bench's
scripted second turn, ``jsonl`` rows with ``reference_turn``), the probe renders exactly
the prompt the generation probe continues and scores candidate next user turns:

- ``real``: the person's actual next turn;
- ``previous_turn_restate``: the previous user turn, verbatim;
- ``assistant_turn_restate``: the opening of the assistant's answer (its first sentence,
  at most ``OPENING_WORDS`` words);
- ``new_task_prompt``: one fixed unrelated request, the first user message of another
  item of the same dataset (chosen by a hash of the item id, so it never changes).

Version 2 (the default) scores the real turn and the controls under more than one
condition (``likelihood_plan``): counterfactual answers (answer PMI) and the template's
assistant header (role contrast), each comparing the same text with itself. The
candidates' ranking by mean per-token log-likelihood (``prefers_real``, ``margin``) is
kept as a secondary field: it mostly measures how easy each text is to copy, so the real
turn almost never wins it. Version 1 records (ranking only, end marker scored) still
read. Candidates are built deterministically and versioned (``CANDIDATES_VERSION``,
beside the record type in ``userturn.rundir.records``), and every record stores its
candidates, conditions and scores.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from userturn.run.likelihood_plan import opening, scored_text
from userturn.rundir.records import CandidateKind, ScoredCandidate
from userturn.types import Item, Message, ScoreRequest, ScoreResult


def unrelated_item(item: Item, pool: list[Item]) -> Item | None:
    """The other item the unrelated request comes from, fixed per item (hash of its id)."""
    others = [it for it in pool if it.id != item.id]
    if not others:
        return None
    pick = int(hashlib.sha256(item.id.encode()).hexdigest()[:8], 16) % len(others)
    return others[pick]


def unrelated(item: Item, pool: list[Item]) -> str | None:
    """The first user message of another item, fixed per item (hash of its id)."""
    source = unrelated_item(item, pool)
    if source is None:
        return None
    first = next((m for m in source.messages if m["role"] == "user"), None)
    return None if first is None else str(first["content"])


def candidates(
    item: Item, context: list[Message], pool: list[Item]
) -> list[tuple[CandidateKind, str]]:
    """The candidates for one context (which ends with the assistant turn), real first.
    Empty when the item has no real next turn, or a candidate can't be built."""
    users = [str(m["content"]) for m in context if m["role"] == "user"]
    other = unrelated(item, pool)
    if item.reference_turn is None or not users or other is None:
        return []
    return [
        ("real", item.reference_turn),
        ("previous_turn_restate", users[-1]),
        ("assistant_turn_restate", opening(str(context[-1]["content"]))),
        ("new_task_prompt", other),
    ]


CF_KINDS: tuple[CandidateKind, ...] = ("real", "new_task_prompt")
"""Scored under each counterfactual answer: the real turn and its unrelated control."""
ASSISTANT_KINDS: tuple[CandidateKind, ...] = ("real", "assistant_turn_restate")
"""Scored under the assistant header: the real turn and the answer's opening."""


def conditioned(
    cands: list[tuple[CandidateKind, str]], n_counterfactuals: int, assistant: bool = True
) -> tuple[ScoredCandidate, ...]:
    """Every (candidate, condition) pair a version 2 record scores, unscored, grouped by
    condition: all four under the user header, ``ASSISTANT_KINDS`` under the assistant
    header (left out where the template refuses two assistant turns in a row), then
    ``CF_KINDS`` under each counterfactual. The order is the requests' order."""
    text = dict(cands)
    out = [ScoredCandidate(k, t, 0.0, 0, "user") for k, t in cands]
    if assistant:
        out += [ScoredCandidate(k, text[k], 0.0, 0, "assistant") for k in ASSISTANT_KINDS]
    for i in range(n_counterfactuals):
        out += [ScoredCandidate(k, text[k], 0.0, 0, f"cf{i}") for k in CF_KINDS]
    return tuple(out)


def conditions(cands: tuple[ScoredCandidate, ...]) -> list[str]:
    """The conditions in the order their requests are sent."""
    return list(dict.fromkeys(c.condition for c in cands))


def score_requests(
    cands: tuple[ScoredCandidate, ...], prompts: dict[str, str], end: str
) -> list[ScoreRequest]:
    """One request per condition (its prompt, its candidates in order)."""
    return [
        ScoreRequest(
            prompt=prompts[cond],
            continuations=tuple(scored_text(c.text, end) for c in cands if c.condition == cond),
        )
        for cond in conditions(cands)
    ]


def filled(
    cands: tuple[ScoredCandidate, ...], results: list[ScoreResult]
) -> tuple[ScoredCandidate, ...]:
    """The candidates with the scores of ``score_requests``' results (same order)."""
    by_cond = {cond: list(res.scores) for cond, res in zip(conditions(cands), results, strict=True)}
    out = []
    for c in cands:
        s = by_cond[c.condition].pop(0)
        out.append(replace(c, logprob=s.logprob, n_tokens=s.n_tokens))
    return tuple(out)
