"""The LLM judge's rubric: our own wording of the definitions in ``paper.md``.

The paper's prompt was not released, so this text is ours. It is versioned: the version
is part of every judgment's cache key and of the stored judgment, so editing the text
(bump ``RUBRIC_VERSION``) re-judges instead of mixing verdicts from two rubrics.

Design choices:
- The judge sees the conversation and the candidate turn only (``JudgeInput``): no
  model name, dataset, temperature or reference turn, so nothing leaks into the verdict.
- The verdict keys come first in the schema and the rationale last, so a reply cut off
  by the token limit still carries a verdict the lenient parser can read.
- ``challenges_answer`` is required by the schema (strict JSON-schema mode requires
  every key) but optional to the parser: an unconstrained reply without it still has a
  verdict, and its attribute is None (not assessed), never False.
- Long turns are shortened in the middle with an explicit marker; the judge is told so.
"""

from __future__ import annotations

import json
from typing import Any

from userturn.types import LABELS, JudgeInput, Message

RUBRIC_VERSION = "ut-rubric-3"
"""3: a ``challenges_answer`` attribute (does the turn dispute the answer's correctness?),
asked independently of the verdict. 2: paraphrased re-asks are restatements; same-topic
questions that don't need the answer are new tasks; "the previous user turn" for
multi-turn contexts; ``other`` is degenerate."""

SYSTEM = """\
You evaluate one message in a conversation between a user and an AI assistant. The user \
asked something, the assistant replied, and then a language model wrote a candidate for \
the user's NEXT message. Decide whether that candidate is a genuine follow-up from the \
user.

A genuine follow-up (genuine_followup = true) is something a real user could plausibly \
send next AND it engages with specific content of this conversation: it asks for \
clarification, challenges a claim or a number, asks for a revision or a different format, \
digs into one part of the answer, or reacts to it and moves the conversation on. It must \
be written as the user, to the assistant. Short turns count: a brief question about a \
detail of the reply, or a request to present it differently, is genuine.

Everything else is degenerate (genuine_followup = false). Pick the single label that \
describes the candidate best:
- previous_turn_restate: asks the previous user turn again, verbatim or paraphrased \
(other words, the same request or question), as if the assistant's reply had not \
happened.
- assistant_turn_restate: copies, paraphrases or continues the assistant's reply while \
speaking as the user (the writer has slipped into the assistant's role), including \
answering the question itself.
- meta_planning: assistant-style reasoning or planning in the user's place, e.g. "Here's \
a thinking process", "Let me check the constraints", drafting how to answer.
- new_task_prompt: starts a new task or question that does not depend on the \
assistant's reply, even on the same topic: a new word problem of the same kind, a quiz \
question ("What is the answer to this question: ..."), a general question about the \
subject that could be asked without having read the reply.
- malformed_artifact: chat-template or role tokens, broken markup, repeated loops, or \
text that is not meaningful language.
- degenerate_short: empty, or too short to carry any content (e.g. "ok", "Thanks").
- plausible_followup: the genuine case described above (use it exactly when \
genuine_followup is true).
- other: degenerate (genuine_followup = false) for a reason not listed above, e.g. an \
incoherent message in the user's voice; never use it for a genuine follow-up.

Judge only the candidate message. Do not reward politeness or length; a short, specific \
question about the answer is genuine, while a long message that merely repeats the \
conversation is not.

Separately, say whether the candidate challenges the answer (challenges_answer = true): \
it disputes, doubts or asks to re-check whether the assistant's answer is correct ("Are \
you sure?", "That's wrong", "Can you check step 2?", "Isn't it 45?"), or recomputes it \
to test it. Questions that accept the answer (asking why, asking for more, another \
format, a what-if) do not challenge it, nor does a restated question. Decide this \
whatever the label is.

Reply with one JSON object and nothing else, with exactly these keys:
{"genuine_followup": true or false, "label": "<one of the labels above>", \
"challenges_answer": true or false, "rationale": "<one short sentence>"}"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "genuine_followup": {"type": "boolean"},
        "label": {"type": "string", "enum": list(LABELS)},
        "challenges_answer": {"type": "boolean"},
        "rationale": {"type": "string"},
    },
    "required": ["genuine_followup", "label", "challenges_answer", "rationale"],
    "additionalProperties": False,
}


def shorten(text: str, max_chars: int) -> str:
    """Keep the start and the end of a long text, and say how much was left out."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - max_chars} characters omitted ...]\n{text[-tail:]}"


def _block(role: str, content: str) -> str:
    return f"<{role}>\n{content}\n</{role}>"


def judge_messages(inp: JudgeInput, max_chars: int = 6000) -> list[Message]:
    """The chat sent to the judge model for one candidate turn."""
    context = "\n\n".join(
        _block(str(m["role"]).upper(), shorten(str(m.get("content") or ""), max_chars))
        for m in inp.messages
    )
    candidate = shorten(inp.user_turn, max_chars)
    user = (
        f"CONVERSATION SO FAR:\n{context}\n\n"
        f"CANDIDATE NEXT USER MESSAGE (between the markers, possibly empty):\n"
        f"<<<\n{candidate}\n>>>\n\n"
        f"Return the JSON object."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def rubric_fingerprint() -> str:
    """What the cache key covers besides the version: the exact text and schema."""
    return json.dumps([RUBRIC_VERSION, SYSTEM, SCHEMA], sort_keys=True)
