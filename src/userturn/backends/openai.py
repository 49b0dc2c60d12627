"""OpenAI-compatible server as the model under test (``openai:MODEL``).

Why ``/v1/completions`` and a local template: a chat endpoint can only write assistant
turns, so the user-turn prompt is rendered here, by the same chat module as every other
backend, and sent as raw text. That needs the model's template: ``--chat-template FILE``,
or ``?tokenizer=HF_ID_OR_PATH`` (its ``chat_template``; a local folder or a ``.gguf``
file works offline).
Answers go to ``/v1/completions`` too, so both stages see exactly the prompts the other
backends see.

- **Tokens.** ``tokenize`` asks the server (llama-cpp-python ``/extras/tokenize``, vLLM
  ``/tokenize``, llama.cpp ``/tokenize``), so prompts can be checked at token level. Whether
  the server adds BOS is probed the same way (tokenize the empty string), since only then
  may a rendered BOS text be stripped (``?add_bos=true|false`` overrides).
- **Sampling.** llama.cpp's server defaults to ``repeat_penalty=1.1``, ``min_p=0.05``,
  ``top_k=40``; unless the host is api.openai.com we send neutral values (and ``top_k``),
  so a served model samples like the in-process one. One request per sample, each with
  its own seed.
- **Failures** after the client's bounded retries stop the run with a ``UserError``: an
  empty completion would be judged as a degenerate turn, a silently defaulted verdict.
  The store keeps everything finished, so rerunning resumes.

Options: ``base_url``, ``api_key_env``, ``tokenizer``, ``add_bos``, ``concurrency``,
``timeout``, ``max_retries``, ``price_in``/``price_out``, ``family``.
"""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from userturn.backends.base import Backend, Capabilities, TemplateOptions
from userturn.chat import ChatTemplate
from userturn.errors import UserError, missing_extra
from userturn.http import OpenAIClient
from userturn.spec import Spec
from userturn.types import Completion, Finish, GenRequest, GenResult

log = logging.getLogger(__name__)

NEUTRAL = {"repeat_penalty": 1.0, "repetition_penalty": 1.0, "min_p": 0.0}
TOKENIZE_ROUTES = ("/extras/tokenize", "/tokenize")


class OpenAIBackend(Backend):
    capabilities = Capabilities(raw_completion=True, n_samples=True, seeds=True, prefix_cache=False)
    batch_items = 256
    """Large chunks: the client runs a chunk's requests concurrently."""

    def __init__(self, spec: Spec, base_url: str | None = None) -> None:
        super().__init__(spec)
        if not spec.target:
            raise UserError("openai backend needs a model name: openai:MODEL", field="model")
        self.client = OpenAIClient(spec.target, spec.options, base_url)
        host = urlparse(self.client.server).hostname or ""
        self.neutral_sampling = not host.endswith("openai.com")
        self._tokenize_route: str | None = None

    @property
    def model_id(self) -> str:
        return self.spec.target

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": self.client.describe(),
            "capabilities_note": "seeds are honoured only if the server does",
        }

    # template -------------------------------------------------------------------------
    def template(self, opts: TemplateOptions) -> ChatTemplate:
        if not opts.path and not self.spec.option("tokenizer"):
            raise UserError(
                "openai:MODEL needs the model's chat template to write user turns: a chat "
                "endpoint can only write assistant turns, so userturn renders the prompt "
                "itself and sends it to /v1/completions. Pass --chat-template FILE or "
                "?tokenizer=HF_ID_OR_PATH",
                field="model",
            )
        return super().template(opts)

    @cached_property
    def _hf_tokenizer(self) -> Any:
        name = str(self.spec.option("tokenizer"))
        try:
            from transformers import AutoTokenizer
        except ModuleNotFoundError as exc:
            raise missing_extra("hf", "transformers") from exc
        path = Path(name)
        try:
            if path.suffix == ".gguf" and path.is_file():  # offline: a GGUF's own tokenizer
                return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            return AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot load tokenizer {name!r}: {exc}", field="tokenizer") from exc

    def builtin_template(self) -> tuple[str, str, str, str]:
        """The ``?tokenizer=``'s template and special tokens ("" when there is none)."""
        if not self.spec.option("tokenizer"):
            return "", f"openai:{self.model_id}", "", ""
        tok = self._hf_tokenizer
        source = tok.chat_template
        if isinstance(source, dict):
            source = source.get("default")
        return (
            str(source or ""),
            f"{self.spec.option('tokenizer')}#chat_template",
            str(tok.bos_token or ""),
            str(tok.eos_token or ""),
        )

    @cached_property
    def runtime_adds_bos(self) -> bool:  # type: ignore[override]
        forced = self.spec.option("add_bos")
        if forced is not None:
            return forced.lower() in ("1", "true", "yes")
        empty = self.tokenize("")
        if empty is not None:
            return len(empty) > 0
        if self.spec.option("tokenizer"):
            return len(self._hf_tokenizer("")["input_ids"]) > 0
        log.warning(
            "%s: cannot tell whether the server adds BOS (no tokenize endpoint, no "
            "?tokenizer=); assuming it doesn't. Set ?add_bos= to be sure.",
            self.client.server,
        )
        return False

    # tokens ---------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int] | None:
        """Token ids as the server will see them, or None if it has no tokenize route."""
        routes = [self._tokenize_route] if self._tokenize_route else list(TOKENIZE_ROUTES)
        body = {
            "input": text,
            "prompt": text,
            "content": text,
            "model": self.model_id,
            "add_special_tokens": True,
            "add_special": True,
            "parse_special": True,
        }
        for route in routes:
            if route is None:
                continue
            reply = self.client.post_json(route, body)
            if isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
                self._tokenize_route = route
                return [int(t) for t in reply["tokens"]]
        return None

    # generation -----------------------------------------------------------------------
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        jobs = [(i, seed) for i, req in enumerate(requests) for seed in req.seeds]
        done = self.client.map(lambda job: self._one(requests[job[0]], job[1]), jobs)
        per_req: dict[int, list[tuple[Completion, int]]] = {}
        for (i, _), result in zip(jobs, done, strict=True):
            per_req.setdefault(i, []).append(result)
        out = []
        for i in range(len(requests)):
            got = per_req.get(i, [])
            out.append(GenResult(tuple(c for c, _ in got), prompt_tokens=sum(p for _, p in got)))
        return out

    def _payload(self, req: GenRequest, seed: int | None) -> dict[str, Any]:
        p = req.params
        kwargs: dict[str, Any] = {
            "prompt": req.prompt,
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.stop:
            kwargs["stop"] = list(p.stop)
        if seed is not None:
            kwargs["seed"] = seed
        if self.neutral_sampling:
            kwargs["extra_body"] = {**NEUTRAL, "top_k": p.top_k}
        return kwargs

    def _one(self, req: GenRequest, seed: int | None) -> tuple[Completion, int]:
        res = self.client.request("completions", **self._payload(req, seed))
        if not res.ok:
            raise UserError(
                f"{self.client.server}: {req.role} completion failed after "
                f"{res.attempts} attempts ({res.error} {res.body[:200]}); "
                "finished work is stored, rerun to resume",
                field="model",
            )
        assert res.response is not None
        choice = res.response["choices"][0]
        finish: Finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return (
            Completion(
                text=str(choice.get("text") or ""),
                finish=finish,
                completion_tokens=int(res.usage.get("completion_tokens", 0)),
            ),
            int(res.usage.get("prompt_tokens", 0)),
        )

    def close(self) -> None:
        self.client.close()
