"""What the likelihood probe scores for one context (version 2), before any scoring.

Comparing different texts by their likelihood mostly measures how easy each is to
predict: copied text is nearly free. Version 2 therefore compares *the same text* under
two conditions, so that its own predictability cancels out:

- **Answer PMI.** ``log p(u | q, a) - mean_k log p(u | q, a'_k)``: the real next turn ``u``
  under the real answer ``a`` against a fixed set of counterfactual answers ``a'``. The
  counterfactuals are the same item's answer under a perturbation where one applies
  (truncated at half, or with an injected error), so the topic stays, and other items'
  answers to fill the set (seeded by the item id). The same is computed for an unrelated
  request (``new_task_prompt``): a model that reads the answer raises the real turn more.
- **Role contrast.** ``log p(u | context, user header) - log p(u | context, assistant
  header)``, both headers rendered by the template itself, for the real turn and for the
  answer's opening (text the assistant itself would write).

The end marker is never scored (``END_MARKER_SCORED``): it is a nearly free token that
only dilutes per-token means, and in the role contrast it would differ between the two
headers for reasons that have nothing to do with the text. A reference turn that equals a
turn of the context is left out of the probe (and counted): it would be a copy.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from userturn.chat import place_system, sha256
from userturn.chat.markers import TurnMarkers
from userturn.chat.template import ChatTemplate
from userturn.errors import UserError
from userturn.perturb import load_perturbation
from userturn.rundir.records import Counterfactual
from userturn.types import Item, Message

COUNTERFACTUALS = 3
"""Counterfactual answers per context (same-item perturbations first, then others)."""
END_MARKER_SCORED = False
"""Whether a candidate is scored with the template's end marker after it (see above)."""
SAME_ITEM = ("inject-error", "truncate:0.5")
"""The perturbations that give a same-item counterfactual, where they apply."""
_ASSISTANT_SENTINEL = "\x00ut-assistant-sentinel\x00"


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def copies_context(reference: str, context: list[Message]) -> bool:
    """Whether the reference turn equals a turn of the context (whitespace and case
    aside): such a turn is a copy, and every contrast of it would be about copying."""
    ref = _norm(reference)
    return any(_norm(str(m.get("content") or "")) == ref for m in context)


def counterfactuals(
    item: Item, answer: str, pool: list[Item], avoid: frozenset[str] = frozenset()
) -> tuple[Counterfactual, ...]:
    """The fixed counterfactual answers for one context (see the module docstring).
    Items in ``avoid`` give none: the unrelated request's own item, whose answer would
    make that request the expected next turn and the control meaningless."""
    out: list[Counterfactual] = []
    for spec in SAME_ITEM:
        pert = load_perturbation(spec)
        seed = int(sha256(f"{item.id}/{spec}")[:8], 16)
        done = pert.perturb(answer, item, seed)
        applied = done.detail is None or done.detail.get("applied", True)
        if applied and done.text.strip() and _norm(done.text) != _norm(answer):
            out.append(Counterfactual(pert.id, done.text))
    others = [it for it in pool if it.id != item.id and it.id not in avoid and _given_answer(it)]
    rng = random.Random(int(hashlib.sha256(item.id.encode()).hexdigest()[:8], 16))
    rng.shuffle(others)
    for it in others[: max(0, COUNTERFACTUALS - len(out))]:
        out.append(Counterfactual(f"other:{it.id}", _given_answer(it) or ""))
    return tuple(out[:COUNTERFACTUALS])


def _given_answer(item: Item) -> str | None:
    """An item's own assistant turn (held-out conversations carry one), else None."""
    if item.messages and item.messages[-1]["role"] == "assistant":
        text = str(item.messages[-1].get("content") or "")
        return text if text.strip() else None
    return None


def with_answer(context: list[Message], answer: str) -> list[Message]:
    """The context with its last (assistant) turn's text replaced."""
    last = {k: v for k, v in context[-1].items() if k != "reasoning_content"}
    last["content"] = answer
    return [*context[:-1], last]  # type: ignore[list-item]


def assistant_turn_prompt(
    tpl: ChatTemplate,
    context: list[Message],
    markers: TurnMarkers,
    user_prompt: str,
    *,
    system_placement: Any = "template",
    **kwargs: Any,
) -> str | None:
    """The context followed by the template's own *assistant* header, rendered exactly as
    the user-turn prompt is (same messages, a sentinel turn cut off), so the two prompts
    differ only in the role of the turn that follows. None where the template refuses an
    assistant turn after an assistant turn (templates that enforce alternation, e.g.
    Gemma's and Mistral's), merges the two into one turn (Apertus: then the prompt does
    not extend ``user_prompt`` without its user header) or rewrites the sentinel: there
    the role contrast is not measured, rather than measured on a prompt the template would
    never produce."""
    messages, _ = place_system(context, markers, system_placement)
    turn = {"role": "assistant", "content": _ASSISTANT_SENTINEL}
    try:
        full = tpl.render([*messages, turn], **kwargs)
    except UserError:
        return None
    if full.count(_ASSISTANT_SENTINEL) != 1:
        return None
    prompt = tpl.strip_bos(full[: full.index(_ASSISTANT_SENTINEL)])
    head = user_prompt.removesuffix(markers.user_header)
    if head == user_prompt or not prompt.startswith(head) or prompt == head:
        return None
    return prompt


def scored_text(text: str, end: str) -> str:
    """A candidate as it is scored: the one place the end marker's role is decided."""
    return text + end if END_MARKER_SCORED else text


CHARS_PER_TOKEN = 4.0
"""For the dry run's estimate only (no tokenizer is loaded there): English BPE text
runs at about 4 characters per token."""


def scored_characters(item: Item, pool: list[Item]) -> tuple[int, int]:
    """(continuations, characters) a version 2 record of this item scores: the real turn
    under the user header, the assistant header and each counterfactual; the unrelated
    request under the user header and each counterfactual; the previous user turn once;
    the answer's opening twice (when the item carries its answer). Items without a real
    next turn score nothing."""
    users = [str(m["content"]) for m in item.messages if m["role"] == "user"]
    if item.reference_turn is None or not users:
        return 0, 0
    given = _given_answer(item)
    n_cf = COUNTERFACTUALS
    other = next((str(m["content"]) for it in pool if it.id != item.id
                  for m in it.messages if m["role"] == "user"), "")  # fmt: skip
    parts = [(item.reference_turn, 2 + n_cf), (other, 1 + n_cf), (users[-1], 1)]
    if given is not None:
        parts.append((opening(given), 2))
    return sum(k for _, k in parts), sum(len(text) * k for text, k in parts)


OPENING_WORDS = 40
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.S)


def opening(answer: str) -> str:
    """The assistant answer's first sentence, at most ``OPENING_WORDS`` words."""
    text = answer.strip()
    match = _SENTENCE.match(text)
    first = match.group(1) if match else text
    words = first.split()
    return " ".join(words[:OPENING_WORDS])
