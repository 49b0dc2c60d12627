"""P8: batched vs sequential k-sample decoding on llama.cpp (issue N, item 4).

``p8_batched_speedup``: generated tokens/s of ``smollm2-135m?batch_samples=on&n_seq=8``
(k samples of a prompt decoded together) ÷ ``smollm2-135m?batch_samples=off`` (one after
another, the default), k=8, T=1, on
real user-turn prompts (gsm8k items with their reference answer). Goal ≥ 1.8. The k=4
figure is ``p8_speedup_k4``. Both backends get the same requests in the same order, so
their texts must be equal (``p8_texts_equal``). The two take turns context by context
(a burst of load hits both) and the median ratio over rounds is reported.

Each prompt is put in the cache first (a 1-token request, untimed), as in a run, where
the user-turn prompt extends the answer just generated; the timed call then pays for the
samples, not for a cold prompt.

Run: ``.venv/bin/python bench/p8_batched.py`` (about 1-2 minutes on 2 idle cores). Last
line: JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
import time
from typing import Any

from userturn.backends.base import Backend, TemplateOptions
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.chat import user_turn_prompt
from userturn.datasets import load_dataset
from userturn.spec import Spec
from userturn.types import GenRequest, SamplingParams

DATE = TemplateOptions(date=dt.date(2026, 1, 1))
N_CONTEXTS = 2
MAX_TOKENS = 48
ROUNDS = 2


def gsm8k_contexts(n: int, exchanges: int = 1) -> list[list[dict[str, Any]]]:
    """Conversations of ``exchanges`` gsm8k questions, each answered with its reference
    solution (calculator annotations and the ``####`` line removed)."""
    items = load_dataset("gsm8k").load()[: n * exchanges]
    out = []
    for i in range(n):
        msgs: list[dict[str, Any]] = []
        for item in items[i * exchanges : (i + 1) * exchanges]:
            answer = re.sub(r"<<[^>]*>>", "", (item.reference or {})["answer"])
            answer = answer.split("####")[0].strip()
            msgs += [*item.messages, {"role": "assistant", "content": answer}]
        out.append(msgs)
    return out


def _requests(be: Backend, k: int) -> tuple[list[GenRequest], list[GenRequest]]:
    tpl = be.template(DATE)
    warm, timed = [], []
    for ctx in gsm8k_contexts(N_CONTEXTS):
        up = user_turn_prompt(tpl, ctx)
        params = SamplingParams(temperature=1.0, max_tokens=MAX_TOKENS, stop=up.stop)
        seeds = tuple(range(100, 100 + k))
        warm.append(GenRequest(up.prompt, "user", SamplingParams(max_tokens=1), seeds=(0,)))
        timed.append(GenRequest(up.prompt, "user", params, seeds=seeds))
    return warm, timed


def _round(batched: Backend, sequential: Backend, k: int) -> tuple[float, float, bool]:
    """(batched tokens/s, sequential tokens/s, same texts), the two backends taking turns
    context by context so that a burst of load on the machine hits both."""
    secs, tokens = [0.0, 0.0], [0, 0]
    texts: list[list[str]] = [[], []]
    warm, timed = _requests(batched, k)
    for w, req in zip(warm, timed, strict=True):
        for i, be in enumerate((batched, sequential)):
            be.generate([w])  # the prompt is cached, as after its answer in a run
            start = time.perf_counter()
            (res,) = be.generate([req])
            secs[i] += time.perf_counter() - start
            tokens[i] += sum(c.completion_tokens for c in res.completions)
            texts[i] += [c.text for c in res.completions]
    return tokens[0] / secs[0], tokens[1] / secs[1], texts[0] == texts[1]


def main() -> dict[str, Any]:
    opts = {"n_ctx": "2048"}
    on = {**opts, "batch_samples": "on", "n_seq": "8"}
    batched = LlamaCppBackend(Spec("llamacpp", "smollm2-135m", on))
    sequential = LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {**opts, "batch_samples": "off"}))
    out: dict[str, Any] = {}
    equal = True
    for k in (4, 8):
        ratios, rates_b, rates_s = [], [], []
        for _ in range(ROUNDS):
            rate_b, rate_s, same = _round(batched, sequential, k)
            equal &= same
            rates_b.append(rate_b)
            rates_s.append(rate_s)
            ratios.append(rate_b / rate_s)
        out[f"p8_k{k}_batched_tok_s"] = round(statistics.median(rates_b), 1)
        out[f"p8_k{k}_sequential_tok_s"] = round(statistics.median(rates_s), 1)
        out[f"p8_speedup_k{k}"] = round(statistics.median(ratios), 3)
    out["p8_batched_speedup"] = out["p8_speedup_k8"]
    out["p8_texts_equal"] = equal
    batched.close()
    sequential.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
