"""Regexes over user-controlled text stay linear: each pattern that was quadratic is run on
the 2M-character string that made it so, and the judges judge 2M-character turns.

The ``timeout`` marks are hang guards, not speed checks: a quadratic pattern on these
strings runs for hours, a linear one for well under a second; the limit is far from both.

Run: ``.venv/bin/python -m pytest tests/judges/test_linear_regexes.py -q``
"""

from __future__ import annotations

import re

import pytest

from userturn.judges import offline_cues as cue
from userturn.judges import rules_features as rf
from userturn.judges.parse import _FENCE, parse_verdict, strip_reasoning
from userturn.judges.rules import RulesJudge
from userturn.spec import Spec
from userturn.types import JudgeInput

N = 2_000_000
B64 = ("QUJDRGVmZ2hpams0NTY3OCsv" * (N // 24 + 1))[:N]
"""A long run without spaces: base64, the case that took 53 s at 50k characters."""

CASES = [
    ("glued role", rf._LEAKS[1], B64 + "user\n"),
    ("glued role, no newline", rf._LEAKS[1], "Ã" * N),
    ("role line with tabs", rf._LEAKS[0], "user" + "\t" * N + "x"),
    ("line-start planning", rf.META_PLANNING[1], "\n" * N),
    ("line-start let me", rf.META_PLANNING[3], "\n" * N),
    ("line-start to solve", rf.ASSISTANT_VOICE[0], "\n" * N),
    ("line-start sure", rf.ASSISTANT_VOICE[1], "\n" * N),
    ("line-start let's", rf.ASSISTANT_VOICE[2], "\n" * N),
    ("line-start step", rf.ASSISTANT_VOICE[3], "\n" * N),
    ("line-start bold list", rf.ASSISTANT_VOICE[8], "\n" * N),
    ("self-answered question", rf.ASSISTANT_VOICE[10], "?" + "\n" * N),
    ("challenge line start", cue.CHALLENGE, "\n" * N),
    ("revision line start", cue.REVISION, "\n" * N),
    ("clarify line start", cue.CLARIFY, "\n" * N),
    ("report back line start", cue.REPORT_BACK, "\n" * N),
    ("framed task q", cue.FRAMED_TASK, "q" + "\n" * N),
    ("generic line start", cue.GENERIC, "\n" * N),
    ("markdown line start", cue.MARKDOWN, "\n" * N),
    ("fence then whitespace", _FENCE, "```" + "\n" * N),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("pattern", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pattern_is_linear_on_its_adversarial_string(pattern: re.Pattern[str], text: str) -> None:
    list(pattern.finditer(text))


def test_glued_role_token_is_the_whole_run() -> None:
    """The linear rewrite finds what ``\\S*[^\\W\\d_](?:user|model|assistant)`` found."""
    assert rf.find_artifact("ok then mendatangmodel\nmore", "") == "mendatangmodel"
    assert rf.find_artifact("a remodel\n", "") is None  # a real word
    assert rf.find_artifact("xyzuser \nq", "the xyzuser \n") is None  # copied from context
    assert rf.find_artifact("**beliauuser\n", "") == "**beliauuser"


def test_rewritten_patterns_still_match() -> None:
    assert rf.first_match(rf.ASSISTANT_VOICE, "Is it 4?\n\n  Yes, it is.") is not None
    assert rf.first_match(rf.META_PLANNING, "intro\n\n-- Let me think about it") is not None
    assert cue.FRAMED_TASK.search("Question 3: what is 2+2") is not None
    assert cue.FRAMED_TASK.search("q:") is not None
    assert cue.MARKDOWN.search("text\n\n  - item") is not None
    assert rf.find_artifact("Sure\nuser \t\n", "") == "user"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "turn",
    [B64, "\n" * N, "?" + "\n" * N, B64[: N // 2] + "user\n" + B64[: N // 2]],
    ids=["base64", "newlines", "question-newlines", "glued-role"],
)
def test_rules_judge_judges_a_2m_character_turn(turn: str) -> None:
    judge = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    ctx = ({"role": "user", "content": B64}, {"role": "assistant", "content": "\n" * N})
    (j,) = judge.judge([JudgeInput("x", ctx, turn)])
    assert j.status == "ok" and j.label is not None


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "reply",
    ["<think>" * (N // 7), "```" + " " * N, "{" * N, '{"' * (N // 2), "[" * N + '{"label": 1}'],
    ids=["openers", "fence-space", "braces", "keys", "deep"],
)
def test_judge_reply_parsing_is_bounded(reply: str) -> None:
    strip_reasoning(reply)
    assert not hasattr(parse_verdict(reply), "genuine")  # none of these is a verdict


def test_think_blocks_are_still_removed() -> None:
    assert strip_reasoning('<think>a</think>{"x": 1} <think>b</think>tail') == '{"x": 1} tail'
    assert strip_reasoning("answer<think>unfinished") == "answer"
