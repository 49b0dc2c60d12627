"""Lenient parsing of judge replies, and reasoning that must never be read as the verdict.

Pure functions, no model: ``.venv/bin/python -m pytest tests/judges/test_parse.py -q`` (<1 s).
"""

from __future__ import annotations

import json

import pytest

from userturn.judges.parse import ParseFailure, Verdict, parse_verdict, strip_reasoning

FINAL = '{"genuine_followup": true, "label": "plausible_followup", "rationale": "asks why"}'
DRAFT = '{"genuine_followup": false, "label": "new_task_prompt", "rationale": "draft"}'


@pytest.mark.parametrize(
    "text,genuine,label",
    [
        (FINAL, True, "plausible_followup"),
        (
            'Sure!\n```json\n{"genuine_followup": "no", "label": "Previous turn restate"}\n```',
            False,
            "previous_turn_restate",
        ),
        (
            '{"genuine_followup": false, "label": "assistant_turn_restate", "rationale": "cop',
            False,
            "assistant_turn_restate",
        ),  # cut off by max_tokens: verdict still readable
        ('genuine_followup: yes\nlabel: "plausible follow-up"', True, "plausible_followup"),
        ('{"label": "new_task_prompt", "rationale": "unrelated"}', False, "new_task_prompt"),
    ],
)
def test_lenient_parse_accepts_unambiguous_replies(text: str, genuine: bool, label: str) -> None:
    v = parse_verdict(text)
    assert isinstance(v, Verdict), v
    assert (v.genuine, v.label) == (genuine, label)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I think it is a follow-up.",
        '{"genuine_followup": true, "label": "great_question"}',
        '{"genuine_followup": "maybe", "label": "other"}',
        '{"genuine_followup": true}',
    ],
)
def test_unreadable_replies_are_failures_not_labels(text: str) -> None:
    assert isinstance(parse_verdict(text), ParseFailure)


def test_inconsistent_verdict_is_kept_and_flagged() -> None:
    v = parse_verdict('{"genuine_followup": true, "label": "new_task_prompt"}')
    assert isinstance(v, Verdict) and v.genuine and v.label == "plausible_followup"
    assert any(n.startswith("genuine and label disagree") for n in v.notes)


# reasoning ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        f"<think>The verdict is {FINAL}</think>",  # JSON only inside a closed block
        f"<think>Let me draft: {FINAL} and check the context",  # unclosed: cut off
        f"<think>{FINAL}</think>\n\n",
        f"Drafting {FINAL} before the block ends.</think>",  # the template opened it
        f"<|channel|>analysis<|message|>Draft: {FINAL}<|end|>",  # gpt-oss, no final
        f"\u25c1think\u25b7{FINAL}\u25c1/think\u25b7",  # Kimi's markers
    ],
)
def test_a_verdict_only_inside_reasoning_is_never_read(text: str) -> None:
    got = parse_verdict(text)
    assert isinstance(got, ParseFailure), got
    assert "only reasoning" in got.reason


@pytest.mark.parametrize(
    "text",
    [
        f"<think>First guess: {DRAFT}. No, they ask why.</think>\n{FINAL}",
        f"Hmm, {DRAFT}? Not quite.</think>{FINAL}",
        f"<think>{DRAFT}</think>\n```json\n{FINAL}\n```",
        (
            f"<|channel|>analysis<|message|>Draft {DRAFT}<|end|><|start|>assistant"
            f"<|channel|>final<|message|>{FINAL}<|return|>"
        ),
        f"analysisThe draft was {DRAFT}.assistantfinal{FINAL}",  # gpt-oss, tokens skipped
    ],
)
def test_the_final_verdict_wins_over_a_draft_in_reasoning(text: str) -> None:
    got = parse_verdict(text)
    assert isinstance(got, Verdict), got
    assert (got.genuine, got.label, got.rationale) == (True, "plausible_followup", "asks why")


def test_a_pure_json_reply_quoting_think_tags_is_read_whole() -> None:
    """The rubric's malformed_artifact cases: the rationale quotes the turn's markup."""
    reply = json.dumps(
        {
            "genuine_followup": False,
            "label": "malformed_artifact",
            "rationale": "the turn is '</think> Sure! <think>' leaked markup",
        }
    )
    assert strip_reasoning(reply) == reply
    got = parse_verdict(reply)
    assert isinstance(got, Verdict) and got.label == "malformed_artifact"
    assert "</think>" in got.rationale


# the optional challenges_answer attribute ---------------------------------------------
@pytest.mark.parametrize(
    ("text", "challenges"),
    [
        ('{"genuine_followup": true, "label": "plausible_followup", "challenges_answer": 1}', None),
        (FINAL.replace("}", ', "challenges_answer": true}'), True),
        (FINAL.replace("}", ', "challenges_answer": "no"}'), False),
        (FINAL, None),  # missing: not assessed, never False
        ('{"genuine_followup": false, "label": "other", "challenges_answer": null}', None),
        ('genuine_followup: yes\nlabel: "plausible_followup"\nchallenges_answer: yes', True),
        (  # cut off in the rationale: the attribute came before it
            '{"genuine_followup": true, "label": "plausible_followup", '
            '"challenges_answer": false, "rationale": "asks wh',
            False,
        ),
    ],
)
def test_challenges_answer_is_read_leniently(text: str, challenges: bool | None) -> None:
    v = parse_verdict(text)
    assert isinstance(v, Verdict), v
    assert v.challenges_answer is challenges


def test_an_unreadable_challenges_answer_keeps_the_verdict() -> None:
    v = parse_verdict(
        '{"genuine_followup": true, "label": "plausible_followup", "challenges_answer": "maybe"}'
    )
    assert isinstance(v, Verdict) and (v.genuine, v.label) == (True, "plausible_followup")
    assert v.challenges_answer is None and "challenges_answer unreadable" in v.notes
    # the attribute alone is no verdict
    assert isinstance(parse_verdict('{"challenges_answer": true}'), ParseFailure)
