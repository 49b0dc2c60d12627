"""Cascade judge: offline settles the clear degenerate cases, the LLM judge the rest.

Run: ``.venv/bin/python -m pytest tests/judges/test_cascade.py -q`` (~5 s; the LLM side is
tests/fault_server.py on 127.0.0.1, so every LLM call is counted).
"""

from __future__ import annotations

from fault_server import FaultServer
from userturn.judges import load_judge
from userturn.judges.cascade import evidence
from userturn.types import JudgeInput

Q = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
    "clips in May. How many clips did Natalia sell altogether in April and May?"
)
A = "In May she sold 48 / 2 = 24 clips. Altogether she sold 48 + 24 = 72 clips."
CTX = ({"role": "user", "content": Q}, {"role": "assistant", "content": A})


def inp(i: int, turn: str) -> JudgeInput:
    return JudgeInput(id=f"c{i}", messages=CTX, user_turn=turn)


def test_evidence_is_strict() -> None:
    assert evidence(inp(0, "  "), "degenerate_short") == "empty output"
    assert evidence(inp(0, "Thanks!"), "degenerate_short") == "at most two words"
    assert evidence(inp(0, "Why 24?"), "degenerate_short") is None  # a question
    assert evidence(inp(0, "ok <|im_end|>"), "malformed_artifact") == "template token '<|im_end|>'"
    leaked = "What about May?\nibleymodel\nIn May she sold"
    assert evidence(inp(0, leaked), "malformed_artifact") is not None
    assert evidence(inp(0, "The result looks odd to me"), "malformed_artifact") is None
    assert evidence(inp(0, Q), "previous_turn_restate") is not None
    assert evidence(inp(0, Q), "assistant_turn_restate") is None  # copied q, not a
    assert (
        evidence(inp(0, "How many clips did she sell in June?"), "previous_turn_restate") is None
    )  # too short to be sure
    assert evidence(inp(0, Q), "new_task_prompt") is None  # never settled without an LLM


def test_cascade_settles_clear_cases_and_sends_the_rest() -> None:
    turns = [
        "",  # empty: offline
        Q,  # verbatim prompt: offline
        "[[label:plausible_followup]] Why did you divide 48 by 2 for May?",  # LLM
        "[[label:new_task_prompt]] Write a poem about the sea.",  # LLM
    ]
    with FaultServer(lifetime=60) as srv:
        judge = load_judge(f"cascade:openai:fault-model?base_url={srv.base_url}&cache=off")
        out = judge.judge([inp(i, t) for i, t in enumerate(turns)])
        asked = len(srv.hits)
        judge.close()
    assert judge.id == "cascade:openai:fault-model"
    assert [j.status for j in out] == ["ok"] * 4
    assert [j.genuine for j in out] == [False, False, True, False]
    assert out[0].label == "degenerate_short" and out[1].label == "previous_turn_restate"
    assert [j.usage["settled_by"] for j in out] == ["offline", "offline", "llm", "llm"]
    assert out[0].rationale.startswith("offline (empty output)")
    assert judge.calls_saved() == 2 and asked == 2
    assert out[2].label == "plausible_followup" and out[3].label == "new_task_prompt"
