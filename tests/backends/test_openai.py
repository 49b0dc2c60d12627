"""``openai:MODEL`` as the model under test: prompts rendered here, sent to /v1/completions.

The main check runs the same item through the in-process llama.cpp backend and through
a real llama-cpp-python server with the same GGUF, and requires the same prompt token ids
and the same T=0 answer and user turn. A second check shows why that can hold: on this
CPU build, llama.cpp's logits are bit-identical whether a prompt reuses the KV cache of a
previous generation or is evaluated fresh, so the cache policy of either side doesn't
change greedy outputs.

Run: ``.venv/bin/python -m pytest tests/backends/test_openai.py -q`` (~1-2 min on a busy
2-core machine; the fault-server tests take seconds).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from fault_server import FaultServer
from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.chat import answer_prompt, user_turn_prompt
from userturn.cli import main
from userturn.config import RunConfig
from userturn.errors import UserError
from userturn.runner import run
from userturn.types import GenRequest, SamplingParams

DATE = dt.date(2026, 1, 1)
Q = [{"role": "user", "content": "What is 2 + 3? Answer briefly."}]


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
    assert [c.text.split()[-2] for c in res.completions] == ["seed=11", "seed=12", "seed=13"]
    assert payload["extra_body"] == {
        "repeat_penalty": 1.0,
        "repetition_penalty": 1.0,
        "min_p": 0.0,
        "top_k": 5,
    }
    assert payload["stop"] == ["<|im_end|>"] and res.prompt_tokens > 0


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


def test_kv_reuse_does_not_change_llama_cpp_logits(smollm2_path: Path) -> None:
    """Cache policy: prefix reuse after generating the answer vs a fresh evaluation."""
    import llama_cpp

    backend = load_backend("smollm2-135m")
    tpl = backend.template(TemplateOptions(date=DATE))
    llm = llama_cpp.Llama(model_path=str(smollm2_path), n_ctx=512, n_threads=1, verbose=False)
    out = llm.create_completion(
        prompt=backend.tokenize(answer_prompt(tpl, Q)),
        max_tokens=12,
        temperature=0.0,
        repeat_penalty=1.0,
        top_k=0,
        min_p=0.0,
    )
    ctx = [*Q, {"role": "assistant", "content": out["choices"][0]["text"]}]
    tokens = backend.tokenize(user_turn_prompt(tpl, ctx).prompt)
    cached = list(llm._input_ids[: llm.n_tokens])
    common = next(
        (i for i, (x, y) in enumerate(zip(cached, tokens, strict=False)) if x != y),
        min(len(cached), len(tokens)),
    )
    assert common > 20  # the answer's KV entries (decoded one token at a time) are reused
    llm.n_tokens = common
    llm.eval(tokens[common:])
    reused = np.array(llm.scores[llm.n_tokens - 1])
    llm.reset()
    llm.eval(tokens)
    fresh = np.array(llm.scores[llm.n_tokens - 1])
    assert np.array_equal(reused, fresh)
