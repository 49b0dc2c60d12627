"""vLLM request building, without vLLM or a GPU.

Run: ``.venv/bin/python -m pytest tests/backends/test_vllm.py -q`` (a few seconds).
The pure functions are tested directly; the ``generate`` glue is tested against a
recording stand-in for the ``vllm`` module, with the real SmolLM2 tokenizer. The real
engine is exercised by ``tests/gpu`` (``tests/gpu/run_vllm_check.sh`` on a GPU machine).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from userturn import registry
from userturn.backends import load_backend
from userturn.backends import vllm as vllm_backend
from userturn.backends.vllm import (
    Call,
    ScoreCall,
    VLLMBackend,
    VLLMOptions,
    collect,
    collect_scores,
    engine_args,
    plan_calls,
    plan_scores,
    sampling_args,
    score_args,
    score_engine_args,
)
from userturn.errors import UserError
from userturn.spec import parse_spec
from userturn.types import GenRequest, SamplingParams, ScoreRequest

HOT = SamplingParams(temperature=1.0, top_p=0.9, top_k=0, max_tokens=8, stop=("<|im_end|>",))
GREEDY = SamplingParams(temperature=0.0, top_p=0.9, top_k=40, max_tokens=8)


def spec(raw: str) -> VLLMOptions:
    """The typed options of a vLLM spec, as the backend receives them."""
    return registry.MODELS["vllm"].typed(VLLMOptions, parse_spec(raw, kinds={"vllm"}).options)


def test_engine_args_parallelism_and_ray() -> None:
    one = engine_args(spec("vllm:Qwen/Qwen3-8B"), "Qwen/Qwen3-8B", local_gpus=8)
    assert one == {
        "model": "Qwen/Qwen3-8B",
        "enable_prefix_caching": True,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
    }
    big = engine_args(spec("vllm:m?tp=8&pp=2&dtype=bfloat16&max_model_len=8192"), "m", local_gpus=8)
    assert big["distributed_executor_backend"] == "ray"  # 16 GPUs > 8 on this node
    assert (big["tensor_parallel_size"], big["pipeline_parallel_size"]) == (8, 2)
    assert (big["dtype"], big["max_model_len"]) == ("bfloat16", 8192)
    local = engine_args(spec("vllm:m?tp=4"), "m", local_gpus=8)
    assert "distributed_executor_backend" not in local
    forced = engine_args(spec("vllm:m?ray=1&gpu_memory_utilization=0.5"), "m", local_gpus=8)
    assert forced["distributed_executor_backend"] == "ray"
    assert forced["gpu_memory_utilization"] == 0.5
    for spelling in ("on", "yes", "True", "TRUE", "1", "true"):  # each validates: each is honoured
        asked = engine_args(spec(f"vllm:m?ray={spelling}"), "m", local_gpus=8)
        assert asked["distributed_executor_backend"] == "ray", spelling
    for spelling in ("off", "no", "False", "0"):
        assert "distributed_executor_backend" not in engine_args(
            spec(f"vllm:m?ray={spelling}"), "m", local_gpus=8
        )
    with pytest.raises(UserError, match="integer"):
        engine_args(spec("vllm:m?tp=two"), "m", local_gpus=1)
    with pytest.raises(UserError, match=">= 1"):
        engine_args(spec("vllm:m?pp=0"), "m", local_gpus=1)


def test_engine_args_lora(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 32}))
    args = engine_args(spec(f"vllm:m?adapter={tmp_path}"), "m", local_gpus=1)
    assert args["enable_lora"] is True and args["max_lora_rank"] == 32
    with pytest.raises(UserError, match="adapter_config"):
        engine_args(spec(f"vllm:m?adapter={tmp_path / 'nope'}"), "m", local_gpus=1)


def test_sampling_args_match_llamacpp_semantics() -> None:
    hot = sampling_args(HOT, 123)
    assert (hot["n"], hot["seed"], hot["temperature"], hot["top_p"]) == (1, 123, 1.0, 0.9)
    assert hot["top_k"] == -1 and hot["stop"] == ["<|im_end|>"]
    assert hot["repetition_penalty"] == 1.0 and hot["min_p"] == 0.0
    assert hot["skip_special_tokens"] is False  # artifacts stay visible to the judge
    assert hot["spaces_between_special_tokens"] is False
    assert hot["include_stop_str_in_output"] is False
    greedy = sampling_args(GREEDY, 5)
    assert (greedy["seed"], greedy["top_k"], greedy["top_p"]) == (None, -1, 1.0)


def test_plan_calls_per_seed_n_and_greedy() -> None:
    reqs = [
        GenRequest("a", "user", HOT, seeds=(1, 2, 3)),
        GenRequest("b", "user", GREEDY, seeds=(9,)),
    ]
    ids = [[1, 2], [3]]
    per_seed = plan_calls(reqs, ids, "seed")
    assert [(c.request, c.samples, c.sampling["seed"], c.sampling["n"]) for c in per_seed] == [
        (0, (0,), 1, 1),
        (0, (1,), 2, 1),
        (0, (2,), 3, 1),
        (1, (0,), None, 1),
    ]
    assert per_seed[0].prompt_token_ids == (1, 2) and per_seed[-1].copies
    n_mode = plan_calls(reqs, ids, "n")
    assert [(c.samples, c.sampling["n"], c.sampling["seed"]) for c in n_mode] == [
        ((0, 1, 2), 3, 1),
        ((0,), 1, None),
    ]


def _out(prompt: list[int], texts: list[tuple[str, str]], cached: int = 0) -> Any:
    outs = [
        SimpleNamespace(text=t, finish_reason=f, token_ids=[0] * len(t.split())) for t, f in texts
    ]
    return SimpleNamespace(prompt_token_ids=prompt, outputs=outs, num_cached_tokens=cached)


def test_collect_orders_samples_and_counts_cache() -> None:
    reqs = [
        GenRequest("a", "user", HOT, seeds=(1, 2)),
        GenRequest("b", "user", GREEDY, seeds=(7, 8)),
    ]
    calls = [
        Call(0, (1,), (1, 2, 3), {}),
        Call(0, (0,), (1, 2, 3), {}),
        Call(1, (0, 1), (4,), {}, copies=True),
    ]
    outs = [
        _out([1, 2, 3], [("second one", "stop")], cached=2),
        _out([1, 2, 3], [("first", "length")], cached=2),
        _out([4], [("same", "abort")]),
    ]
    a, b = collect(reqs, calls, outs)
    assert [c.text for c in a.completions] == ["first", "second one"]
    assert [c.finish for c in a.completions] == ["length", "stop"]
    assert (a.prompt_tokens, a.prompt_tokens_reused) == (6, 4)
    assert [c.text for c in b.completions] == ["same", "same"]
    assert b.completions[0].finish == "error"
    assert b.prompt_tokens == 2


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_says_how_to_install() -> None:
    with pytest.raises(UserError, match=r"pip install 'userturn\[vllm\]'"):
        load_backend("vllm:smollm2-135m")


class _FakeVLLM(types.ModuleType):
    """Records what the backend hands vLLM; answers with fixed outputs."""

    def __init__(self) -> None:
        super().__init__("vllm")
        self.engine: dict[str, Any] = {}
        self.calls: list[tuple[list[Any], list[Any]]] = []
        fake = self

        class LLM:
            def __init__(self, **kwargs: Any) -> None:
                fake.engine = kwargs

            def generate(self, prompts: list[Any], params: list[Any], use_tqdm: bool) -> list[Any]:
                fake.calls.append((prompts, params))
                return [
                    _scored(p["prompt_token_ids"])
                    if q.get("prompt_logprobs") is not None
                    else _out(p["prompt_token_ids"], [(f"s{q['seed']}", "stop")])
                    for p, q in zip(prompts, params, strict=True)
                ]

        self.LLM = LLM
        self.SamplingParams = dict


def test_generate_glue_with_recording_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    monkeypatch.setattr(vllm_backend, "vllm_installed", lambda: True)
    backend = load_backend("vllm:smollm2-135m?tp=1")
    assert isinstance(backend, VLLMBackend)
    backend.tokenizer  # noqa: B018 - load the real tokenizer before vllm is faked
    fake = _FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    assert backend.model_id == "vllm:smollm2-135m" and backend.family == "smollm"
    prompt = (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n"
    )
    (res,) = backend.generate([GenRequest(prompt, "user", HOT, seeds=(4, 5))])
    assert [c.text for c in res.completions] == ["s4", "s5"]
    assert fake.engine["enable_prefix_caching"] is True
    assert Path(fake.engine["model"]).name == "smollm2-135m-hf"
    prompts, params = fake.calls[0]
    assert prompts[0]["prompt_token_ids"] == backend.tokenize(prompt)
    assert prompts[0]["prompt_token_ids"][0] == 1  # <|im_start|>, not an added BOS
    assert [p["seed"] for p in params] == [4, 5]
    assert backend.describe()["engine_args"]["tensor_parallel_size"] == 1  # type: ignore[index]


def _lp(token: int) -> float:
    """A made-up log-probability for a token: what the stand-in engine "computes"."""
    return -token / 1000


def _scored(prompt: list[int], cached: int = 0) -> Any:
    """A RequestOutput with ``prompt_logprobs`` as vLLM shapes them: None at position 0,
    then a dict holding (at least) the actual token's ``Logprob``."""
    rows: list[Any] = [None]
    rows += [
        {t: SimpleNamespace(logprob=_lp(t)), 7: SimpleNamespace(logprob=-0.1)} for t in prompt[1:]
    ]
    return SimpleNamespace(
        prompt_token_ids=prompt, prompt_logprobs=rows, outputs=[], num_cached_tokens=cached
    )


def test_score_args_are_raw_full_softmax() -> None:
    args = score_args()
    assert args["prompt_logprobs"] == 0 and args["max_tokens"] == 1
    assert (args["temperature"], args["top_p"], args["top_k"], args["min_p"]) == (1.0, 1.0, -1, 0.0)
    assert args["repetition_penalty"] == 1.0 and args["detokenize"] is False


def test_plan_and_collect_scores() -> None:
    prompts = [[1, 2, 3], [4]]
    conts = [[[10, 11], [], [12]], [[13]]]
    calls = plan_scores(prompts, conts)
    assert calls == [
        ScoreCall(0, 0, (1, 2, 3, 10, 11), 3),
        ScoreCall(0, 2, (1, 2, 3, 12), 3),
        ScoreCall(1, 0, (4, 13), 1),
    ]
    outs = [_scored(list(c.prompt_token_ids), cached=2) for c in calls]
    first, second = collect_scores(prompts, conts, calls, outs)
    assert [s.token_logprobs for s in first.scores] == [(_lp(10), _lp(11)), (), (_lp(12),)]
    assert first.scores[0].logprob == pytest.approx(_lp(10) + _lp(11))
    assert [s.n_tokens for s in first.scores] == [2, 0, 1]
    assert (first.prompt_tokens, first.prompt_tokens_reused) == (9, 4)
    assert (second.prompt_tokens, second.prompt_tokens_reused) == (1, 1)  # capped at the prompt


def test_loglikelihood_glue_with_recording_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompt + continuation as one request; the end marker is one special token."""
    pytest.importorskip("transformers")
    monkeypatch.setattr(vllm_backend, "vllm_installed", lambda: True)
    backend = load_backend("vllm:smollm2-135m")
    assert isinstance(backend, VLLMBackend) and backend.capabilities.loglikelihood
    backend.tokenizer  # noqa: B018 - load the real tokenizer before vllm is faked
    fake = _FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    prompt = (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n"
    )
    (res,) = backend.loglikelihood([ScoreRequest(prompt, ("Thanks!<|im_end|>", ""))])
    prompts, params = fake.calls[0]
    assert len(prompts) == 1 and params[0]["prompt_logprobs"] == 0
    p_ids = backend.tokenize(prompt)
    sent = prompts[0]["prompt_token_ids"]
    tail = sent[len(p_ids) :]
    assert sent[: len(p_ids)] == p_ids
    assert tail[-1] == backend.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert res.scores[0].token_logprobs == tuple(_lp(t) for t in tail)
    assert (res.scores[1].n_tokens, res.scores[1].logprob) == (0, 0.0)


def test_scoring_engine_has_prefix_caching_off() -> None:
    args = engine_args(spec("vllm:m?tp=2"), "m", local_gpus=2)
    assert args["enable_prefix_caching"] is True
    scoring = score_engine_args(args)
    assert scoring == {**args, "enable_prefix_caching": False}


def test_score_requests_in_two_orders_give_the_same_calls_and_values() -> None:
    """The calls for a batch are a function of each pair alone: reversing the requests
    reverses the calls, and the scores collected back per request are equal."""
    prompts = [[1, 2, 3], [4, 5], [6]]
    conts = [[[10, 11], [12]], [[13, 14, 15]], [[16], []]]
    order = [2, 0, 1]
    calls = plan_scores(prompts, conts)
    again = plan_scores([prompts[i] for i in order], [conts[i] for i in order])
    key = {(c.prompt_token_ids, c.start) for c in calls}
    assert key == {(c.prompt_token_ids, c.start) for c in again}
    first = collect_scores(
        prompts, conts, calls, [_scored(list(c.prompt_token_ids)) for c in calls]
    )
    second = collect_scores(
        [prompts[i] for i in order],
        [conts[i] for i in order],
        again,
        [_scored(list(c.prompt_token_ids)) for c in again],
    )
    assert [second[order.index(i)].scores for i in range(3)] == [r.scores for r in first]


def test_loglikelihood_runs_on_an_engine_without_prefix_caching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The recorded request shapes: scoring builds its engine with caching off, sends one
    prompt + continuation per pair with ``prompt_logprobs=0``; generating afterwards gets
    the caching engine back."""
    pytest.importorskip("transformers")
    monkeypatch.setattr(vllm_backend, "vllm_installed", lambda: True)
    backend = load_backend("vllm:smollm2-135m")
    assert isinstance(backend, VLLMBackend)
    backend.tokenizer  # noqa: B018 - load the real tokenizer before vllm is faked
    fake = _FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
    backend.loglikelihood([ScoreRequest(prompt + "<|im_start|>user\n", ("Thanks!", "Why?"))])
    assert fake.engine["enable_prefix_caching"] is False
    prompts, params = fake.calls[-1]
    assert len(prompts) == 2 and all(p["prompt_logprobs"] == 0 for p in params)
    backend.generate([GenRequest(prompt + "<|im_start|>user\n", "user", HOT, seeds=(1,))])
    assert fake.engine["enable_prefix_caching"] is True
