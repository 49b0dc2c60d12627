"""``openai:MODEL`` as the model under test: prompts rendered here, sent to /v1/completions.

The main check runs the same item through the in-process llama.cpp backend and through
a real llama-cpp-python server with the same GGUF, and requires the same prompt token ids
and the same T=0 answer and user turn. A second check shows why that can hold: on this
CPU build, llama.cpp's logits are bit-identical whether a prompt reuses the KV cache of a
previous generation or is evaluated fresh, so the cache policy of either side doesn't
change greedy outputs. Log-likelihood scores from the server's echo are checked against
llama.cpp evaluated in-process. Request bodies, refused fields, the revision and a dead
server are checked against tests/fault_server.py and a port nothing listens on.

Run: ``.venv/bin/python -m pytest tests/backends/test_openai.py -q`` (~1-2 min on a busy
2-core machine; the fault-server tests take seconds).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from fault_server import FaultServer, fake_logprob, fake_tokens
from userturn.backends import load_backend, parse_model_spec
from userturn.backends.base import TemplateOptions
from userturn.backends.llamacpp_batch import eval_prompt
from userturn.backends.openai import (
    SPECIAL,
    CompletionShape,
    OpenAIBackend,
    adapt_completion,
)
from userturn.chat import answer_prompt, user_turn_prompt
from userturn.cli import main
from userturn.config import RunConfig
from userturn.errors import UserError
from userturn.http import CallResult
from userturn.run.driver import run
from userturn.types import GenRequest, SamplingParams, ScoreRequest

DATE = dt.date(2026, 1, 1)
Q = [{"role": "user", "content": "What is 2 + 3? Answer briefly."}]
OPENAI_COM = "https://api.openai.com/v1"


@pytest.fixture(scope="module")
def smollm2_template(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """The GGUF's own chat template as a file, for ``--chat-template``."""
    source = load_backend(f"llamacpp:{smollm2_path}").builtin_template()[0]
    path = tmp_path_factory.mktemp("tpl") / "smollm2.jinja"
    path.write_text(source, encoding="utf-8")
    return path


def test_no_template_is_a_clear_startup_error(tmp_path: Path) -> None:
    backend = load_backend("openai:m?base_url=http://127.0.0.1:9/v1")
    with pytest.raises(UserError, match="chat endpoint can only write assistant turns"):
        backend.template(TemplateOptions(date=DATE))
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "messages": Q}) + "\n")
    code = main(
        [
            "run",
            "--model",
            "openai:m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--dataset",
            f"jsonl:{items}",
            "--judge",
            "rules",
            "--out",
            str(tmp_path / "run"),
        ]
    )
    assert code == 2


def test_samples_get_their_own_seed_and_neutral_sampling() -> None:
    with FaultServer(lifetime=60) as srv:
        backend = load_backend(f"openai:m?base_url={srv.base_url}")
        params = SamplingParams(temperature=0.7, max_tokens=8, stop=("<|im_end|>",), top_k=5)
        req = GenRequest("hello", "user", params, seeds=(11, 12, 13))
        (res,) = backend.generate([req])
        payload = backend._payload(req, 11)
        sent = [h.params for h in srv.hits]
    assert [c.text.split()[-2] for c in res.completions] == ["seed=11", "seed=12", "seed=13"]
    assert payload["extra_body"] == {
        "repeat_penalty": 1.0,
        "repetition_penalty": 1.0,
        "min_p": 0.0,
        "top_k": 5,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }
    assert payload["stop"] == ["<|im_end|>"] and res.prompt_tokens > 0
    # extra_body's fields go at the top level of the JSON body, and extra_body never does
    assert all(p["skip_special_tokens"] is False and p["min_p"] == 0.0 for p in sent)
    assert all("extra_body" not in p for p in sent)


def test_request_body_per_shape_and_host() -> None:
    """Pure: which optional groups each shape sends, and what a refusal removes."""
    req = GenRequest("p", "user", SamplingParams(max_tokens=3, top_k=7))
    local = load_backend("openai:m?base_url=http://127.0.0.1:9/v1")
    assert isinstance(local, OpenAIBackend)
    full = local._payload(req, None, CompletionShape())
    assert SPECIAL.items() <= full["extra_body"].items() and full["extra_body"]["top_k"] == 7
    assert "extra_body" not in local._payload(req, None, CompletionShape(False, False))
    hosted = OpenAIBackend(parse_model_spec("openai:gpt-x?api_key_env=HOME"), OPENAI_COM)
    hosted_shape = hosted.shapes.start
    assert hosted_shape == CompletionShape(special_tokens=False, neutral=False)
    assert "extra_body" not in hosted._payload(req, None, hosted_shape)
    refusal = CallResult(
        error="HTTP 400",
        status_code=400,
        body="Unrecognized request argument supplied: skip_special_tokens",
    )
    assert adapt_completion(CompletionShape(), refusal) == CompletionShape(special_tokens=False)
    assert adapt_completion(CompletionShape(special_tokens=False), refusal) is None


def test_strict_server_refusals_are_found_once_then_never_sent() -> None:
    with FaultServer(strict_fields=True, lifetime=60) as srv:
        spec = f"openai:m?base_url={srv.base_url}&backoff=0.01&concurrency=4"
        params = SamplingParams(max_tokens=4, stop=("<|end|>",))
        reqs = [GenRequest(f"p{i}", "user", params, seeds=(1, 2)) for i in range(3)]
        out = load_backend(spec).generate(reqs)
        load_backend(spec).generate(reqs[:1])  # a second backend: already known
        refused, sent = srv.state.refused, [h.params for h in srv.hits]
    assert all(len(r.completions) == 2 for r in out)
    # all unknown fields are named at once; special tokens go first, then sampling
    assert len(refused) == 2 and "skip_special_tokens" in refused[0]
    assert len(sent) == 8
    assert all(
        set(p) <= {"model", "max_tokens", "temperature", "top_p", "stop", "seed"} for p in sent
    )


def test_failed_completion_stops_instead_of_writing_an_empty_turn() -> None:
    with FaultServer(lifetime=60) as srv:
        backend = load_backend(f"openai:m?base_url={srv.base_url}&max_retries=1&backoff=0.01")
        req = GenRequest("[[fault:500]] x", "user", SamplingParams(max_tokens=4))
        with pytest.raises(UserError, match="rerun to resume"):
            backend.generate([req])


def test_tokenizer_option_reads_the_template_offline(smollm2_path: Path) -> None:
    local = load_backend(f"llamacpp:{smollm2_path}")
    with FaultServer(lifetime=120) as srv:  # no tokenize route: BOS comes from the tokenizer
        remote = load_backend(f"openai:m?base_url={srv.base_url}&tokenizer={smollm2_path}")
        tpl = remote.template(TemplateOptions(date=DATE))
        assert remote.tokenize("x") is None
    source, _, bos, eos = local.builtin_template()
    assert (tpl.source, tpl.bos_token, tpl.eos_token) == (source, bos, eos)
    assert tpl.runtime_adds_bos is False


def test_same_token_ids_as_in_process(llama_server: str, smollm2_template: Path) -> None:
    local = load_backend("smollm2-135m")
    remote = load_backend(f"openai:smollm2?base_url={llama_server}")
    tpl = remote.template(TemplateOptions(date=DATE, path=str(smollm2_template)))
    assert remote.runtime_adds_bos == local.runtime_adds_bos
    ctx = [*Q, {"role": "assistant", "content": "2 + 3 = 5. <|im_end|> stays text?"}]
    for prompt in (answer_prompt(tpl, Q), user_turn_prompt(tpl, ctx).prompt):
        assert remote.tokenize(prompt) == local.tokenize(prompt)


def test_t0_outputs_equal_in_process(
    llama_server: str, smollm2_template: Path, tmp_path: Path
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "messages": Q}) + "\n")
    common = {
        "datasets": [f"jsonl:{items}"],
        "temperatures": [0.0],
        "judges": [],
        "max_answer_tokens": 24,
        "max_user_tokens": 16,
        "chat_template": str(smollm2_template),
    }
    runs = {}
    for name, model, base_url in (
        ("local", "smollm2-135m", None),
        ("server", "openai:smollm2", llama_server),
    ):
        cfg = RunConfig(models=[model], base_url=base_url, **common)
        result = run(cfg, tmp_path / name)
        runs[name] = [json.loads(x) for x in (result.out / "records.jsonl").open()]
    (a,), (b,) = runs["local"], runs["server"]
    assert a["prompt_sha"] == b["prompt_sha"]
    assert (a["answer"], a["user_turn"]) == (b["answer"], b["user_turn"])
    assert a["answer"] and a["user_turn"] is not None


def test_one_token_evaluation_makes_logits_independent_of_the_cache(smollm2_path: Path) -> None:
    """Why ``llama_server_unbatched`` exists: evaluating one token at a time, the user-turn
    prompt's logits are the same whether its prefix (the answer prompt and the answer's
    generated tokens) comes from the cache or from a fresh evaluation.

    With batched prompt evaluation (llama.cpp's default) they are not: a generated token's
    cache entry comes from a one-token pass, a prompt token's from a many-token pass, and
    the two kernels differ (up to 1.5 in a logit on SmolLM2's Q4_1 weights here,
    2026-12-02; docs/reliability.md), so a T=0 completion can depend on what the server
    evaluated before it.
    """
    import llama_cpp

    from userturn.datasets import load_dataset

    # a GSM8K answer of 48 tokens: with batched evaluation this prompt's logits differ
    # (a two-line answer like Q's happens not to)
    (item,) = load_dataset("gsm8k").load_first(1)
    question = list(item.messages)
    backend = load_backend("smollm2-135m")
    tpl = backend.template(TemplateOptions(date=DATE))
    llm = llama_cpp.Llama(
        model_path=str(smollm2_path),
        n_ctx=1024,
        n_batch=1,
        n_ubatch=1,
        logits_all=True,  # without it llama-cpp-python leaves ``scores`` unwritten
        verbose=False,
    )
    out = llm.create_completion(
        prompt=backend.tokenize(answer_prompt(tpl, question)),
        max_tokens=48,
        temperature=0.0,
        repeat_penalty=1.0,
        top_k=0,
        min_p=0.0,
    )
    ctx = [*question, {"role": "assistant", "content": out["choices"][0]["text"]}]
    tokens = backend.tokenize(user_turn_prompt(tpl, ctx).prompt)
    common = eval_prompt(llm, tokens)  # the backend's own prefix reuse
    assert common > 20  # the answer's cache entries (decoded one token at a time) are reused
    reused = np.array(llm.scores[: len(tokens)])
    llm.reset()
    llm.eval(tokens)
    fresh = np.array(llm.scores[: len(tokens)])
    assert np.abs(fresh).max() > 1  # live logits, not an unwritten buffer
    assert np.array_equal(reused, fresh)


def test_special_token_options_are_kept_on_a_server_that_ignores_them(
    llama_server: str, smollm2_template: Path
) -> None:
    """llama-cpp-python ignores unknown fields: the options stay on, output is intact."""
    backend = load_backend(f"openai:smollm2?base_url={llama_server}")
    assert isinstance(backend, OpenAIBackend)
    tpl = backend.template(TemplateOptions(date=DATE, path=str(smollm2_template)))
    stop = ("<|im_end|>",)
    req = GenRequest(answer_prompt(tpl, Q), "assistant", SamplingParams(max_tokens=12, stop=stop))
    (res,) = backend.generate([req])
    assert backend.shapes.shape == CompletionShape(special_tokens=True, neutral=True)
    assert res.completions[0].text and "<|im_end|>" not in res.completions[0].text


def test_revision_keys_on_server_and_served_model(llama_server: str) -> None:
    first = load_backend(f"openai:smollm2?base_url={llama_server}")
    same = load_backend(f"openai:smollm2?base_url={llama_server}")
    other_url = load_backend(
        f"openai:smollm2?base_url={llama_server.replace('127.0.0.1', 'localhost')}"
    )
    assert first.revision == same.revision and first.revision.startswith("server:")
    assert other_url.revision != first.revision
    served = first.describe()["server"]
    assert isinstance(served, dict) and served["models_entry"]["id"].endswith(".gguf")
    with FaultServer(lifetime=30) as srv:
        srv.state.models = [{"id": "smollm2", "root": "/ckpt/step-1000"}]
        step_1000 = load_backend(f"openai:smollm2?base_url={srv.base_url}").revision
        srv.state.models = [{"id": "smollm2", "root": "/ckpt/step-2000"}]
        step_2000 = load_backend(f"openai:smollm2?base_url={srv.base_url}").revision
    assert step_1000 != step_2000  # another checkpoint under the same name: new keys


def dead_url() -> str:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_dead_model_server_fails_fast_with_one_line(
    tmp_path: Path,
    smollm2_template: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = dead_url()
    caplog.set_level(logging.WARNING)
    backend = load_backend(f"openai:m?base_url={url}")
    with pytest.raises(UserError, match=f"cannot reach {url}: connection refused"):
        backend.template(TemplateOptions(date=DATE, path=str(smollm2_template)))
    assert not caplog.records  # no BOS warning (or any other) before the real error
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "messages": Q}) + "\n")
    argv = ["run", "--model", "openai:m", "--base-url", url, "--dataset", f"jsonl:{items}"]
    argv += ["--judge", "rules", "--chat-template", str(smollm2_template)]
    code = main([*argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert [x for x in err.strip().splitlines() if not x.startswith("progress ")] == [
        f"error: field 'base_url': cannot reach {url}: connection refused"
    ]


# log-likelihood -------------------------------------------------------------------------
def _in_process_logprobs(smollm2_path: Path, prompt: str, continuation: str) -> list[float]:
    """The continuation's token log-probabilities, from llama.cpp evaluated in-process."""
    import llama_cpp

    # The server fixture's thread count, and a prompt shorter than any batch: both sides
    # then run the same kernels on the same batch shape, so their logits coincide (the
    # tolerance below covers only float32 log-softmax and JSON rounding, not the engine's
    # batch-shape variance, which this comparison avoids rather than bounds).
    llm = llama_cpp.Llama(
        model_path=str(smollm2_path),
        n_ctx=64,
        n_threads=os.cpu_count() or 2,
        logits_all=True,
        verbose=False,
    )
    full = llm.tokenize((prompt + continuation).encode(), special=True)
    n_prompt = len(llm.tokenize(prompt.encode(), special=True))
    llm.eval(full)
    logprobs = llama_cpp.Llama.logits_to_logprobs(np.array(llm.scores[: llm.n_tokens]))
    llm.close()
    return [float(logprobs[i - 1][full[i]]) for i in range(n_prompt, len(full))]


def test_loglikelihood_equals_in_process_llama_cpp(llama_server: str, smollm2_path: Path) -> None:
    """A short SmolLM2-format prompt: the server sorts the whole vocabulary per echoed
    token, so every token costs about a second on a busy 2-core machine."""
    backend = load_backend(f"openai:smollm2?base_url={llama_server}")
    prompt = "<|im_start|>assistant\n5.<|im_end|>\n<|im_start|>user\n"
    cont = "Why?<|im_end|>"
    (res,) = backend.loglikelihood([ScoreRequest(prompt, (cont,))])
    (score,) = res.scores
    truth = _in_process_logprobs(smollm2_path, prompt, cont)
    assert score.n_tokens == len(truth) == 3
    assert np.allclose(score.token_logprobs, truth, atol=1e-4)
    assert score.logprob == pytest.approx(sum(truth), abs=1e-3)
    assert res.prompt_tokens > 0


def test_loglikelihood_refuses_misaligned_echo(llama_server: str) -> None:
    """llama-cpp-python shifts echo log-probabilities by one when the prompt has no BOS."""
    backend = load_backend(f"openai:smollm2?base_url={llama_server}")
    with pytest.raises(UserError, match="misaligned echo log-probabilities"):
        backend.loglikelihood([ScoreRequest("Hello world. The answer", (" is",))])


def test_loglikelihood_sums_the_tokens_after_the_prompt() -> None:
    """Offsets that index the text (vLLM-style): a token straddling the boundary is the
    prompt's, the generated token is no one's."""
    prompt, clean, straddle = "Q: why?\nA:", " Because 2 + 3 = 5.", "ok then"
    with FaultServer(lifetime=30) as srv:
        backend = load_backend(f"openai:m?base_url={srv.base_url}")
        (res,) = backend.loglikelihood([ScoreRequest(prompt, (clean, straddle))])
        (bare,) = backend.loglikelihood([ScoreRequest("abc", ("def ghi",))])
        echoed = [h.params for h in srv.hits]
    expected = [fake_logprob(t) for t in fake_tokens(clean)]
    assert res.scores[0].token_logprobs == pytest.approx(expected)
    assert res.scores[0].n_tokens == len(fake_tokens(clean))
    assert res.scores[1].n_tokens == len(fake_tokens(straddle))  # ":" ends the prompt
    # "abcdef" starts inside the prompt: only " " and "ghi" are the continuation's
    assert bare.scores[0].logprob == pytest.approx(fake_logprob(" ") + fake_logprob("ghi"))
    assert all(p["echo"] is True and p["max_tokens"] == 1 and p["logprobs"] == 1 for p in echoed)
    assert len(echoed) == 3  # offsets index the text: no prompt-only requests


@pytest.mark.parametrize(
    "mode,message",
    [
        ("reject", "refuses echo\\+logprobs on /v1/completions"),
        ("ignore", "returns no echo log-probabilities"),
        ("shifted", "misaligned echo log-probabilities"),
    ],
)
def test_loglikelihood_without_usable_echo_is_one_line(mode: str, message: str) -> None:
    with FaultServer(echo_mode=mode, lifetime=30) as srv:
        backend = load_backend(f"openai:m?base_url={srv.base_url}&backoff=0.01")
        reqs = [ScoreRequest(f"prompt {i} ", ("a", "b")) for i in range(4)]
        with pytest.raises(UserError, match=message) as err:
            backend.loglikelihood(reqs)
        asked = len(srv.hits) + len(srv.state.refused)
    assert "\n" not in str(err.value) and srv.base_url in str(err.value)
    assert asked == 1  # the first request is the capability check; nothing else is sent
