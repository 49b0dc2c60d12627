"""LLM judge: any backend as the judge (``llm:<model spec>``; ``openai:M`` is shorthand).

Examples: ``llm:openai:gpt-5.4-mini``, ``llm:openai:qwen?base_url=http://127.0.0.1:8000/v1``,
``llm:llamacpp:/models/judge.gguf``, ``llm:smollm2-135m``.

The judge sees the rubric (``rubric.py``), the context and the candidate turn, and must
return ``{"genuine_followup", "label", "challenges_answer", "rationale"}``
(``challenges_answer`` is optional when reading: missing is None, not assessed). A reply
that still can't be read after ``parse_retries`` more tries is ``unparseable``; a call
that fails after the client's retries is ``error`` with the reason. Neither is ever
folded into a label.

Judge options go in the same query string as the model's and are removed before the
model sees them: ``cache=off``, ``parse_retries=N`` (default 1), ``max_tokens=N``
(default 256; a reasoning model's budget includes its reasoning), ``max_chars=N`` (per
message shown to the judge, default 6000), ``thinking=on|off`` (default off: thinking
templates are rendered with ``enable_thinking`` false, locally or through the server's
``chat_template_kwargs``). Transport options (``base_url``, ``api_key_env``,
``concurrency``, ...) are not part of the judge's id, so moving a server doesn't create
a new judge column; the cache key does include the server and its model fingerprint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from userturn import registry
from userturn.backends import load_backend, parse_model_spec
from userturn.errors import UserError
from userturn.http import TRANSPORT_OPTIONS, OpenAIClient, http_options, price_for
from userturn.judges.base import Judge
from userturn.judges.cache import JudgeCache, open_cache
from userturn.judges.chat_models import ChatModel, HTTPChatModel, LocalChatModel
from userturn.judges.parse import Verdict, parse_verdict
from userturn.judges.rubric import RUBRIC_VERSION, judge_messages, rubric_fingerprint
from userturn.redact import redact
from userturn.rundir.keys import content_key
from userturn.spec import Spec
from userturn.types import JudgeInput, Judgment

log = logging.getLogger(__name__)

JUDGE_OPTIONS = frozenset(registry.JUDGE_LLM)
ASSUMED_PROMPT_TOKENS = 1200
"""For ``--dry-run`` cost estimates only: rubric (~550 tokens) plus a typical context."""
ASSUMED_COMPLETION_TOKENS = 60


def split_options(raw: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """``openai:m?base_url=u&cache=off`` -> (``openai:m``, model options, judge options).

    Split before the model spec is parsed: the model's option schema doesn't know the
    judge's options."""
    body, _, query = raw.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True)) if query else {}
    judge = {k: v for k, v in options.items() if k in JUDGE_OPTIONS}
    model = {k: v for k, v in options.items() if k not in JUDGE_OPTIONS}
    return body, model, judge


def judge_model_spec(raw: str) -> Spec:
    """The judging model's spec, judge options removed."""
    body, model, _ = split_options(raw)
    return parse_model_spec(body + (f"?{urlencode(model)}" if model else ""))


def canonical_id(prefix: str, target: str) -> str:
    """The judge's name in stores and label files: no transport or cache options."""
    body, model, judge = split_options(target)
    kept = {
        k: v
        for k, v in sorted({**model, **judge}.items())
        if k not in TRANSPORT_OPTIONS and k != "cache"
    }
    return f"{prefix}:{body}" + (f"?{urlencode(kept)}" if kept else "")


@dataclass(frozen=True)
class JudgeOptions:
    """The judge's own options (``registry.JUDGE_LLM``), typed."""

    cache: bool = True
    parse_retries: int = 1
    max_tokens: int = 256
    max_chars: int = 6000
    thinking: bool = False


class LLMJudge(Judge):
    version = RUBRIC_VERSION

    def __init__(
        self,
        spec: Spec,
        base_url: str | None = None,
        models: list[str] | None = None,
        cache: JudgeCache | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(spec)
        if not spec.target:
            raise UserError("llm judge needs a model: llm:<model spec>", field="judge")
        body, model_opts, opts = split_options(spec.target)
        self._id = canonical_id("llm", spec.target)
        self.options = registry.typed(JudgeOptions, registry.JUDGE_LLM, opts, "judge")
        self.parse_retries = self.options.parse_retries
        self.max_tokens = self.options.max_tokens
        self.max_chars = self.options.max_chars
        self.thinking = self.options.thinking
        self.model_spec = judge_model_spec(spec.target)
        self.model = self._open_model(body, model_opts, base_url)
        self.cache = open_cache(self.options.cache, cache)
        self._own_cache = cache is None
        self._warn_if_self_judging(models or [])

    def _open_model(self, body: str, options: dict[str, str], base_url: str | None) -> ChatModel:
        if self.model_spec.kind == "openai":
            client = OpenAIClient(self.model_spec.target, http_options(options), base_url)
            return HTTPChatModel(client, thinking=self.thinking)
        query = f"?{urlencode(options)}" if options else ""
        return LocalChatModel(load_backend(body + query), thinking=self.thinking)

    def _warn_if_self_judging(self, models: list[str]) -> None:
        mine = (self.model_spec.kind, self.model_spec.target)
        for raw in models:
            other = parse_model_spec(raw)
            if (other.kind, other.target) == mine:
                log.warning(
                    "judge %s is the model under test (%s): its verdicts on its own "
                    "turns may be biased",
                    self.id,
                    redact(raw),
                )

    @property
    def id(self) -> str:
        return self._id

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        out: list[Judgment | None] = [None] * len(inputs)
        for i, verdict in self.judge_each(inputs):
            out[i] = verdict
        assert all(j is not None for j in out)
        return [j for j in out if j is not None]

    def judge_each(self, inputs: list[JudgeInput]) -> Iterator[tuple[int, Judgment]]:
        """Cached verdicts first, then each call's as it returns, its cache row written
        before it is yielded (here, in the caller's thread: the run's store is a cache
        too, and its SQLite connection belongs to that thread)."""
        keys = [self._key(inp) if self.cache is not None else "" for inp in inputs]
        todo = []
        for i, key in enumerate(keys):
            hit = self._cached(key)
            if hit is None:
                todo.append(i)
            else:
                yield i, hit
        for j, verdict in self.model.each(self._judge_one, [inputs[i] for i in todo]):
            i = todo[j]
            if self.cache is not None and verdict.status == "ok":
                self.cache.cache_put(keys[i], {**verdict.to_json(), "usage": verdict.usage})
            yield i, verdict

    def _key(self, inp: JudgeInput) -> str:
        messages = judge_messages(inp, self.max_chars)
        return content_key(
            "llm-judge",
            self.model.key,
            RUBRIC_VERSION,
            rubric_fingerprint(),
            messages,
            self.max_tokens,
        )

    def _cached(self, key: str) -> Judgment | None:
        hit = self.cache.cache_get(key) if self.cache is not None else None
        if hit is None:
            return None
        return Judgment(
            self.id,
            hit["genuine_followup"],
            hit["label"],
            hit["rationale"],
            status="ok",
            usage={"calls": 0, "cached": True},
            challenges_answer=hit.get("challenges_answer"),
        )

    def _judge_one(self, inp: JudgeInput) -> Judgment:
        messages = judge_messages(inp, self.max_chars)
        usage: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        reason, text = "", ""
        for _ in range(1 + self.parse_retries):
            reply = self.model.complete(messages, self.max_tokens)
            for k in ("calls", "prompt_tokens", "completion_tokens"):
                usage[k] += int(reply.usage.get(k) or 0)
            if reply.usage.get("cost_usd") is not None:
                usage["cost_usd"] = usage.get("cost_usd", 0.0) + reply.usage["cost_usd"]
            if reply.error is not None:
                return Judgment(
                    self.id,
                    None,
                    None,
                    f"judge call failed: {reply.error}",
                    status="error",
                    usage=usage,
                )
            verdict = parse_verdict(reply.text)
            if isinstance(verdict, Verdict):
                if verdict.notes:
                    usage["parse_notes"] = list(verdict.notes)
                return Judgment(
                    self.id,
                    verdict.genuine,
                    verdict.label,
                    verdict.rationale,
                    usage=usage,
                    challenges_answer=verdict.challenges_answer,
                )
            reason, text = verdict.reason, reply.text or ""
        return Judgment(
            self.id,
            None,
            None,
            f"unparseable after {1 + self.parse_retries} tries: {reason}; reply: {text[:300]!r}",
            status="unparseable",
            usage=usage,
        )

    def check_reachable(self) -> None:
        """Ask an HTTP judge's server for its model list now (one attempt), so a dead
        judge server stops a run before generation, not after it. In-process judges are
        loaded already; ``--dry-run`` shouldn't call this."""
        if isinstance(self.model, HTTPChatModel):
            self.model.client.server_entry()

    def estimate(self, n_turns: int) -> dict[str, float | int | None]:
        """Calls and cost before any call is made (``--dry-run``); the token counts are
        assumptions, stated in the result, since contexts aren't known yet."""
        cost: float | None = 0.0
        if self.model_spec.kind == "openai":
            price = price_for(self.model_spec.target, http_options(self.model_spec.options))
            cost = (
                price.cost(ASSUMED_PROMPT_TOKENS, ASSUMED_COMPLETION_TOKENS) * n_turns
                if price
                else None
            )
        return {
            "calls": n_turns,
            "cost_usd": cost,
            "assumed_prompt_tokens": ASSUMED_PROMPT_TOKENS,
            "assumed_completion_tokens": ASSUMED_COMPLETION_TOKENS,
        }

    def close(self) -> None:
        self.model.close()
        closer = getattr(self.cache, "close", None)
        if self._own_cache and callable(closer):
            closer()  # a cache passed in (e.g. a run's Store) belongs to the caller
