"""What the offline judge reads beyond word overlap: paraphrase, dialogue act and voice.

Two groups of numbers join the hand-made features (``offline_features``):

- **Paraphrase similarities** (``SIMILARITIES``): cosine similarity of sentence
  embeddings (``offline_embed``) between the turn and the request, the answer, and each
  of their sentences. A re-ask in new words is close to the request and far from the
  answer; a continuation of the answer is close to its sentences; a follow-up sits close
  to one answer sentence it asks about.
- **Act and voice head** (``Head``): a multinomial logistic regression from the turn's own
  embedding and its hashed word and character n-grams to the eight labels. It learns how
  each behaviour is phrased ("double-check", "as a table", "Here's a thinking process",
  "We need to verify") without a hand-written cue for each; its probabilities enter the
  forest as features. Inside a fit they are out-of-fold, so the forest never learns
  from a head that saw the row.

Context-side embeddings are cached per conversation, since a run judges several samples
of one context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer

from userturn.judges.offline_embed import Encoder, encoder
from userturn.judges.offline_features import Feature, numbers, sentences
from userturn.judges.rules_features import context_key, context_view
from userturn.types import Message

SIMILARITIES = (
    "emb_q",
    "emb_a",
    "emb_q_sent",
    "emb_a_sent",
    "emb_a_first",
    "emb_a_last",
    "emb_prior_user",
    "emb_gap",
    "emb_a_top3",
    "emb_a_second",
    "emb_reask_numbers",
    "emb_q_over_prior",
)
"""Turn vs request, answer, best request sentence, best answer sentence, the answer's
first and last sentences, the best earlier user turn, answer minus request; the mean of
the three closest answer sentences and the second closest (a continuation is close to
several, a follow-up to one); similarity to the request when the turn keeps some of its
numbers and changes others (a re-ask with one number changed); request minus earlier
user turns."""
HEAD_CLASSES = (
    "plausible_followup",
    "previous_turn_restate",
    "assistant_turn_restate",
    "meta_planning",
    "new_task_prompt",
    "malformed_artifact",
    "degenerate_short",
    "other",
)
HASH_FEATURES = 2**10
MAX_SENTENCES = 24
"""Sentences of a long answer compared one by one (the rest count through the whole)."""


@lru_cache(maxsize=1)
def hasher() -> HashingVectorizer:
    """Word 1-2 grams and character 2-4 grams of the turn, hashed (stateless, no vocabulary)."""
    return HashingVectorizer(
        n_features=HASH_FEATURES,
        analyzer="char_wb",
        ngram_range=(2, 4),
        alternate_sign=False,
        norm="l2",
        lowercase=True,
    )


@dataclass(frozen=True)
class ContextEmbeddings:
    question: np.ndarray
    answer: np.ndarray
    q_sents: np.ndarray
    a_sents: np.ndarray
    prior_users: np.ndarray
    question_numbers: frozenset[str]


@lru_cache(maxsize=2048)
def _context(key: tuple[tuple[str, str], ...]) -> ContextEmbeddings:
    enc = encoder()
    ctx = context_view([{"role": r, "content": c} for r, c in key])
    users = [c for r, c in key if r == "user"]
    q_sents = sentences(ctx.question)[:MAX_SENTENCES] or [""]
    a_sents = sentences(ctx.answer)[:MAX_SENTENCES] or [""]
    prior = users[:-1] or [""]
    vecs = enc.encode([ctx.question, ctx.answer, *q_sents, *a_sents, *prior])
    nq, na = len(q_sents), len(a_sents)
    return ContextEmbeddings(
        question=vecs[0],
        answer=vecs[1],
        q_sents=vecs[2 : 2 + nq],
        a_sents=vecs[2 + nq : 2 + nq + na],
        prior_users=vecs[2 + nq + na :],
        question_numbers=numbers(ctx.question),
    )


def context_embeddings(messages: Sequence[Message]) -> ContextEmbeddings:
    return _context(context_key(messages))


@dataclass(frozen=True)
class TurnMeaning:
    """A turn's similarities (``SIMILARITIES`` order) and its own embedding."""

    similarities: np.ndarray
    embedding: np.ndarray


def measure_meaning(
    messages: Sequence[Message], turn: str, enc: Encoder | None = None
) -> TurnMeaning:
    """Similarities of ``turn`` to the conversation, and the turn's embedding."""
    enc = enc or encoder()
    ctx = context_embeddings(messages)
    sents = sentences(turn)[:MAX_SENTENCES]
    vecs = enc.encode([turn, *sents])
    whole, parts = vecs[0], vecs[1:] if len(vecs) > 1 else vecs[:1]
    sim_q, sim_a = float(whole @ ctx.question), float(whole @ ctx.answer)
    to_answer = np.sort(whole @ ctx.a_sents.T)[::-1]
    prior = float((whole @ ctx.prior_users.T).max())
    own = numbers(turn)
    changed = bool(own - ctx.question_numbers) and bool(own & ctx.question_numbers)
    values = [
        sim_q,
        sim_a,
        float((parts @ ctx.q_sents.T).max()),
        float((parts @ ctx.a_sents.T).max()),
        float(whole @ ctx.a_sents[0]),
        float(whole @ ctx.a_sents[-1]),
        float((whole @ ctx.prior_users.T).max()),
        sim_a - sim_q,
        float(to_answer[:3].mean()),
        float(to_answer[1] if len(to_answer) > 1 else to_answer[0]),
        sim_q if changed else 0.0,
        sim_q - prior,
    ]
    return TurnMeaning(np.round(np.array(values), 4), whole)


def head_inputs(turns: Sequence[str], embeddings: np.ndarray) -> sparse.csr_matrix:
    """What the head reads: the turn's embedding beside its hashed n-grams."""
    grams = hasher().transform(list(turns))
    return sparse.hstack([sparse.csr_matrix(embeddings), grams], format="csr")


@dataclass(frozen=True)
class Head:
    """A fitted multinomial logistic regression, as arrays (shipped as JSON)."""

    classes: tuple[str, ...]
    coef: np.ndarray
    intercept: np.ndarray

    def proba(self, x: sparse.csr_matrix) -> np.ndarray:
        z = np.asarray(x @ self.coef.T) + self.intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        out: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "classes": list(self.classes),
            "coef": [[round(float(v), 5) for v in row] for row in self.coef],
            "intercept": [round(float(v), 5) for v in self.intercept],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Head:
        return cls(
            classes=tuple(data["classes"]),
            coef=np.asarray(data["coef"], dtype=np.float64),
            intercept=np.asarray(data["intercept"], dtype=np.float64),
        )


HEAD_NAMES = tuple(f"head_{c}" for c in HEAD_CLASSES)
MEANING_FEATURES: tuple[Feature, ...] = (
    Feature("emb_q", "paraphrase similarity to the user's request"),
    Feature("emb_a", "paraphrase similarity to the answer"),
    Feature("emb_q_sent", "paraphrase similarity to a sentence of the request"),
    Feature("emb_a_sent", "paraphrase similarity to a sentence of the answer"),
    Feature("emb_a_first", "paraphrase similarity to the answer's opening"),
    Feature("emb_a_last", "paraphrase similarity to the answer's close"),
    Feature("emb_prior_user", "paraphrase similarity to an earlier user turn"),
    Feature("emb_gap", "closer to the answer than to the request"),
    Feature("emb_a_top3", "paraphrase similarity to several answer sentences"),
    Feature("emb_a_second", "paraphrase similarity to a second answer sentence"),
    Feature("emb_reask_numbers", "close to the request with a number changed"),
    Feature("emb_q_over_prior", "closer to the request than to earlier user turns"),
    *(
        Feature(n, f"reads as {c.replace('_', ' ')}")
        for n, c in zip(HEAD_NAMES, HEAD_CLASSES, strict=True)
    ),
)
