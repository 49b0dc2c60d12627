"""LLM judge: the fault-injecting server, request shapes (response_format, reasoning
models, chat_template_kwargs), the cache, and real judges (llama-cpp-python's server and
in-process llama.cpp with SmolLM2). Parsing is in test_parse.py.

Run: ``.venv/bin/python -m pytest tests/judges/test_llm.py -q`` (~1-2 min, most of it the
real model reading the rubric on a busy 2-core machine).
"""

from __future__ import annotations

import json
import logging
import re
import socket
from pathlib import Path

import pytest

import fault_server
from fault_server import FaultServer
from userturn.cli import main
from userturn.errors import UserError
from userturn.http import CallResult, HTTPOptions, OpenAIClient
from userturn.judges import load_judge
from userturn.judges.cache import DiskCache
from userturn.judges.chat_models import (
    ChatShape,
    HTTPChatModel,
    adapt_chat,
    chat_body,
    defuse,
)
from userturn.judges.rubric import RUBRIC_VERSION, SCHEMA, judge_messages, shorten
from userturn.types import LABELS, JudgeInput

Q = {"role": "user", "content": "What is 12 * 4?"}
A = {"role": "assistant", "content": "12 * 4 = 48."}
FAST = "backoff=0.01&timeout=1&max_retries=2&rate_limit_retries=3&cache=off"


def inp(i: int, turn: str) -> JudgeInput:
    return JudgeInput(id=f"ex{i}", messages=(Q, A), user_turn=turn)


def test_rubric_shows_context_and_turn_only() -> None:
    msgs = judge_messages(inp(0, "Why 48?"))
    assert msgs[0]["role"] == "system" and all(lab in msgs[0]["content"] for lab in LABELS)
    assert "What is 12 * 4?" in msgs[1]["content"] and "Why 48?" in msgs[1]["content"]
    # the optional attribute is defined in the prompt and asked for by the schema (strict
    # JSON-schema mode needs every key required; the parser still treats it as optional)
    assert "challenges_answer" in msgs[0]["content"] and "challenges_answer" in SCHEMA["required"]
    assert list(SCHEMA["properties"])[-1] == "rationale"  # verdict keys first
    long = shorten("x" * 10_000, 600)
    assert len(long) < 700 and "9400 characters omitted" in long
    assert defuse("a<|im_end|>b<end_of_turn>") == "a<\u200b|im_end|>b<\u200bend_of_turn>"


# the fault-injecting server -----------------------------------------------------------
CASES = [  # (user turn, expected status, expected label)
    ("[[label:plausible_followup]] Why 48 and not 36?", "ok", "plausible_followup"),
    ("[[fault:429,ok]][[label:new_task_prompt]] Tell me a joke", "ok", "new_task_prompt"),
    ("[[fault:500,500,ok]][[label:previous_turn_restate]] x", "ok", "previous_turn_restate"),
    ("[[fault:timeout,ok]][[label:malformed_artifact]] y", "ok", "malformed_artifact"),
    ("[[fault:garbage,ok]][[label:degenerate_short]] ok", "ok", "degenerate_short"),
    ("[[fault:offmenu,ok]][[label:meta_planning]] z", "ok", "meta_planning"),
    ("[[fault:badjson]] w", "unparseable", None),
    ("[[fault:offmenu]] v", "unparseable", None),
    ("[[fault:500]] u", "error", None),
    ("[[fault:429]] t", "error", None),
]


def test_fault_server_run_finishes_with_nothing_defaulted() -> None:
    with FaultServer(retry_after="1", timeout_sleep=2.0, lifetime=120) as srv:
        judge = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}")
        srv.state.retry_after = "1"
        out = judge.judge([inp(i, t) for i, (t, _, _) in enumerate(CASES)])
        judge.close()
        hits = srv.hits
    for (turn, status, label), j in zip(CASES, out, strict=True):
        assert j.status == status, (turn, j)
        assert j.challenges_answer is None  # the server never says: not assessed
        assert "challenges_answer" not in j.to_json()
        if status == "ok":
            assert j.label == label and j.genuine == (label == "plausible_followup")
        else:
            assert j.genuine is None and j.label is None and j.to_json()["label"] is None
            assert j.rationale  # the reason is kept
    assert {h.response_format for h in hits} == {"json_schema"}  # vLLM/OpenAI form works
    sent = hits[0].params["response_format"]["json_schema"]["schema"]
    assert sent == SCHEMA and "challenges_answer" in sent["properties"]
    throttled = [h for h in hits if h.step == "429" and h.attempt == 1]
    for first in throttled:
        after = [h.at for h in hits if h.key == first.key and h.attempt == 2]
        assert after and after[0] - first.at >= 0.95, "Retry-After: 1 was not honoured"


CHALLENGE = re.compile(r"\[\[challenge:(true|false)\]\]")


def test_challenges_answer_reaches_judgments_and_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that fills the attribute (``[[challenge:true]]`` in the turn scripts it):
    the verdict carries it, the cached copy too, and a reply without it stays None."""
    plain = fault_server._verdict

    def with_challenge(text: str, step: str) -> str:
        reply, m = plain(text, step), CHALLENGE.search(text)
        if m is None or step != "ok":
            return reply
        return json.dumps({**json.loads(reply), "challenges_answer": m.group(1) == "true"})

    monkeypatch.setattr(fault_server, "_verdict", with_challenge)
    turns = [
        "[[challenge:true]][[label:plausible_followup]] Are you sure it's 48?",
        "[[challenge:false]][[label:plausible_followup]] Why 48?",
        "[[label:new_task_prompt]] Tell me a joke",
    ]
    cache = DiskCache(tmp_path / "cache.sqlite")
    with FaultServer(lifetime=60) as srv:
        spec = f"llm:openai:fault-model?base_url={srv.base_url}&backoff=0.01"
        first = load_judge(spec, cache=cache).judge([inp(i, t) for i, t in enumerate(turns)])
        calls = len(srv.hits)
        second = load_judge(spec, cache=cache).judge([inp(i, t) for i, t in enumerate(turns)])
        assert len(srv.hits) == calls  # all three came from the cache
    for out in (first, second):
        assert [j.challenges_answer for j in out] == [True, False, None]
        assert [j.to_json().get("challenges_answer") for j in out] == [True, False, None]
    assert all(j.usage.get("cached") for j in second)


def test_llamacpp_style_server_detected_once() -> None:
    turns = [f"[[label:plausible_followup]] question {i}?" for i in range(6)]
    with FaultServer(schema_mode="llamacpp", lifetime=60) as srv:
        judge = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}")
        out = judge.judge([inp(i, t) for i, t in enumerate(turns)])
        assert all(j.status == "ok" for j in out)
        # the rejected json_schema request is not counted as a server step; all real
        # requests used the json_object+schema form, and no judgment needed a retry
        assert {h.response_format for h in srv.hits} == {"json_object"}
        assert all(j.usage["calls"] == 1 for j in out[1:])


def test_cache_by_model_rubric_and_content(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "cache.sqlite")
    turns = ["[[label:new_task_prompt]] a", "[[fault:badjson]] b"]
    with FaultServer(lifetime=60) as srv:
        spec = f"llm:openai:fault-model?base_url={srv.base_url}&backoff=0.01&parse_retries=0"
        first = load_judge(spec, cache=cache).judge([inp(i, t) for i, t in enumerate(turns)])
        n_hits = len(srv.hits)
        second = load_judge(spec, cache=cache).judge([inp(i, t) for i, t in enumerate(turns)])
        assert len(srv.hits) == n_hits + 1  # only the unparseable one is asked again
    assert second[0].to_json() == first[0].to_json() and second[0].usage["cached"]
    assert second[1].status == "unparseable"


def test_judge_id_warning_and_estimate(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("USERTURN_PRICES", '{"m1": {"input": 1.0, "output": 10.0}}')
    caplog.set_level(logging.WARNING)
    judge = load_judge(
        "openai:m1?base_url=http://127.0.0.1:9/v1&cache=off&max_tokens=99",
        models=["openai:m1?base_url=http://127.0.0.1:9/v1"],
    )
    assert judge.id == "llm:openai:m1?max_tokens=99"  # no transport options in the id
    assert judge.version == RUBRIC_VERSION
    assert "is the model under test" in caplog.text
    est = judge.estimate(100)
    assert est["calls"] == 100 and est["cost_usd"] == pytest.approx(100 * (1200 + 600) / 1e6)


def test_cli_judge_in_out_contract(tmp_path: Path) -> None:
    examples = tmp_path / "ex.jsonl"
    examples.write_text(
        "".join(
            json.dumps({"id": f"e{i}", "messages": [Q, A], "user_turn": t, "model": "hidden"})
            + "\n"
            for i, t in enumerate(["[[label:plausible_followup]] Why?", "[[fault:badjson]] q"])
        )
    )
    out = tmp_path / "labels.jsonl"
    with FaultServer(lifetime=60) as srv:
        code = main(
            [
                "judge",
                "--in",
                str(examples),
                "--out",
                str(out),
                "--judge",
                "openai:fault-model?cache=off&backoff=0.01",
                "--judge-base-url",
                srv.base_url,
            ]
        )
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [set(r) for r in rows] == [
        {"id", "genuine_followup", "label", "rationale", "status"}
    ] * 2
    assert rows[0]["status"] == "ok" and rows[0]["genuine_followup"] is True
    assert rows[1] | {"rationale": ""} == {
        "id": "e1",
        "genuine_followup": None,
        "label": None,
        "rationale": "",
        "status": "unparseable",
    }


# real models --------------------------------------------------------------------------
REAL = [inp(0, "Why did you multiply instead of adding?"), inp(1, "What is 12 * 4?")]


def _check_real(out: list) -> None:
    for j in out:
        assert j.status in ("ok", "unparseable"), j  # SmolLM2's quality is not the point
        if j.status == "ok":
            assert j.label in LABELS and isinstance(j.genuine, bool)
            assert j.challenges_answer in (True, False, None)
        else:
            assert j.label is None and j.genuine is None


def test_real_llama_cpp_server_judge(llama_server: str) -> None:
    judge = load_judge(f"llm:openai:smollm2?base_url={llama_server}&cache=off&max_tokens=40")
    out = judge.judge(REAL[:1])
    shape = judge.model.shapes.shape
    judge.close()
    _check_real(out)
    # llama-cpp-python refuses json_schema (HTTP 500) and ignores chat_template_kwargs
    assert shape == ChatShape(form="json_object_schema")
    assert out[0].status == "ok", "schema-constrained output should always parse"
    assert out[0].usage["prompt_tokens"] > 500  # the rubric was sent


@pytest.mark.slow  # the llama.cpp server judge covers this path in make test
def test_real_in_process_llamacpp_judge() -> None:
    judge = load_judge("llm:smollm2-135m?cache=off&max_tokens=40&n_threads=1")
    out = judge.judge(REAL[:1])
    judge.close()
    _check_real(out)
    assert out[0].usage["calls"] >= 1


def test_judge_run_adds_a_cell_per_judge(tmp_path: Path) -> None:
    """``userturn judge --run``: judgments are added to stored user turns, several judges
    coexist, and unparseable/error verdicts are counted in summary.json, not labelled."""
    from userturn.rundir.records import AnswerRecord, UserTurnRecord
    from userturn.rundir.store import Store

    run = tmp_path / "run"
    run.mkdir()
    store = Store(run / "store.sqlite")
    text = str(A["content"])
    store.put_answer(AnswerRecord("ans", "item0", "d", "m", "c", text, text, "stop"))
    turns = ["[[label:plausible_followup]] Why 48?", "[[fault:badjson]] hmm", "[[fault:400]] boom"]
    for i, turn in enumerate(turns):
        store.put_user_turn(
            UserTurnRecord(
                f"k{i}", "ans", "item0", "m", "d", "c", 0.0, i, None, "none", (Q, A), user_turn=turn
            )
        )
    store.close()
    with FaultServer(lifetime=60) as srv:
        specs = (f"openai:fault-model?base_url={srv.base_url}&{FAST}", "rules")
        codes = [main(["judge", "--run", str(run), "--judge", spec]) for spec in specs]
    assert codes == [1, 0]  # the LLM judge left 2 turns without a verdict: not a success
    cells = json.loads((run / "summary.json").read_text())["cells"]
    by_judge = {c["judge"]: c for c in cells}
    assert set(by_judge) == {"llm:openai:fault-model", "rules"}
    llm = by_judge["llm:openai:fault-model"]
    assert (llm["n_total"], llm["n"], llm["unparseable"], llm["errors"]) == (3, 1, 1, 1)
    assert llm["genuine"] == 1 and llm["labels"] == {"plausible_followup": 1}
    records = [json.loads(x) for x in (run / "records.jsonl").open()]
    assert all(len(r["judgments"]) == 2 for r in records)


# request shapes -----------------------------------------------------------------------
def refusal(status: int, message: str, param: str | None = None) -> CallResult:
    body = json.dumps({"error": {"message": message, "param": param}})
    return CallResult(error=f"HTTP {status}", status_code=status, body=body)


def test_chat_body_in_each_shape() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    full = chat_body(ChatShape(), msgs, 99)
    assert full["max_tokens"] == 99 and full["temperature"] == 0.0
    assert full["response_format"]["type"] == "json_schema"
    assert full["extra_body"] == {"chat_template_kwargs": {"enable_thinking": False}}
    assert chat_body(ChatShape(), msgs, 99, thinking=True)["extra_body"] == {
        "chat_template_kwargs": {"enable_thinking": True}
    }
    bare = chat_body(
        ChatShape("none", "max_completion_tokens", temperature=False, template_kwargs=False),
        msgs,
        99,
    )
    assert bare == {"messages": msgs, "max_completion_tokens": 99}


def test_adapt_chat_reads_what_the_server_refuses() -> None:
    start = ChatShape()
    o_series = refusal(
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "max_tokens",
    )
    assert adapt_chat(start, o_series) == ChatShape(token_field="max_completion_tokens")
    temp = refusal(400, "Unsupported value: 'temperature' does not support 0.0", "temperature")
    assert adapt_chat(start, temp) == ChatShape(temperature=False)
    kwargs = refusal(400, "Unrecognized request argument supplied: chat_template_kwargs")
    assert adapt_chat(start, kwargs) == ChatShape(template_kwargs=False)
    llamacpp = CallResult(error="HTTP 500", status_code=500, body="'response_format' json_schema")
    assert adapt_chat(start, llamacpp) == ChatShape(form="json_object_schema")
    # not refusals of anything we sent: these settle nothing
    too_long = refusal(400, "max_tokens is too large: 9999 > 4096", "max_tokens")
    assert adapt_chat(start, too_long) is None
    assert adapt_chat(start, refusal(503, "temperature unsupported", "temperature")) is None
    assert adapt_chat(ChatShape(temperature=False), temp) is None


def test_reasoning_model_adapts_once_per_server() -> None:
    turns = [f"[[label:plausible_followup]] question {i}?" for i in range(6)]
    with FaultServer(reasoning=True, lifetime=60) as srv:
        judge = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}&concurrency=4")
        out = judge.judge([inp(i, t) for i, t in enumerate(turns)])
        again = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}")
        again.judge([inp(9, "[[label:other]] another")])
        judge.close()
        again.close()
        refused, hits = srv.state.refused, srv.hits
    assert [j.status for j in out] == ["ok"] * 6
    assert refused == ["max_tokens", "temperature"]  # found once, not per request
    assert all("max_tokens" not in h.params and "temperature" not in h.params for h in hits)
    assert {h.params["max_completion_tokens"] for h in hits} == {256}


def test_server_refusing_chat_template_kwargs_is_not_sent_them_again() -> None:
    with FaultServer(strict_fields=True, lifetime=60) as srv:
        judge = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}")
        out = judge.judge([inp(i, f"[[label:meta_planning]] plan {i}") for i in range(4)])
        judge.close()
        refused, hits = srv.state.refused, srv.hits
    assert [j.label for j in out] == ["meta_planning"] * 4
    assert refused == ["chat_template_kwargs"]
    assert all("chat_template_kwargs" not in h.params for h in hits)


def test_self_hosted_judge_gets_thinking_off_and_hosted_gets_nothing() -> None:
    with FaultServer(lifetime=60) as srv:
        judge = load_judge(f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}")
        judge.judge([inp(0, "[[label:other]] hm")])
        judge.close()
        (hit,) = srv.hits
    assert hit.params["chat_template_kwargs"] == {"enable_thinking": False}
    hosted = HTTPChatModel(
        OpenAIClient("gpt-x", HTTPOptions(api_key_env="HOME"), "https://api.openai.com/v1")
    )
    assert hosted.shapes.start == ChatShape(template_kwargs=False)


def test_reasoning_drafts_are_not_read_as_verdicts() -> None:
    turns = [
        "[[fault:thinkdraft]][[label:plausible_followup]] Why 48?",
        "[[fault:thinkonly]][[label:plausible_followup]] Why 48?",
    ]
    with FaultServer(lifetime=60) as srv:
        spec = f"llm:openai:fault-model?base_url={srv.base_url}&{FAST}&parse_retries=0"
        judge = load_judge(spec)
        draft, only = judge.judge([inp(i, t) for i, t in enumerate(turns)])
        judge.close()
    assert (draft.status, draft.label) == ("ok", "plausible_followup")  # not the draft's
    assert only.status == "unparseable" and "only reasoning" in only.rationale


# a dead server ------------------------------------------------------------------------
def dead_url() -> str:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_dead_judge_server_is_one_user_error_not_a_warning_per_item(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = dead_url()
    caplog.set_level(logging.WARNING)
    judge = load_judge(f"llm:openai:m?base_url={url}&{FAST}")
    assert judge.estimate(4)["calls"] == 4  # a dry run needs no server
    with pytest.raises(UserError, match=f"cannot reach {url}: connection refused"):
        judge.check_reachable()  # what a run does before generating
    with pytest.raises(UserError, match=f"cannot reach {url}: connection refused") as err:
        judge.judge([inp(i, f"turn {i}") for i in range(4)])
    judge.close()
    assert "\n" not in str(err.value)
    assert not caplog.records
