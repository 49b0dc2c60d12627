"""Backends, registered lazily by name so a missing extra only matters when used.

``MODEL_MAPPING`` maps a spec kind to ``module:Class`` plus the extra that provides it,
in the style of lm-evaluation-harness.
"""

from __future__ import annotations

import importlib

from userturn.backends.base import Backend
from userturn.errors import UserError, missing_extra
from userturn.spec import Spec, parse_spec

MODEL_MAPPING: dict[str, tuple[str, str]] = {
    "llamacpp": ("userturn.backends.llamacpp:LlamaCppBackend", "llamacpp"),
    "hf": ("userturn.backends.hf:HFBackend", "hf"),
    "vllm": ("userturn.backends.vllm:VLLMBackend", "vllm"),
    "openai": ("userturn.backends.openai:OpenAIBackend", "openai"),
}
ALIASES: dict[str, str] = {
    "smollm2-135m": "llamacpp:smollm2-135m",
    "qwen2.5-coder-0.5b": "llamacpp:qwen2.5-coder-0.5b",
}  # opt-in
"""Named models. The embedded default is SmolLM2-135M-Instruct via llama.cpp."""


def parse_model_spec(raw: str) -> Spec:
    spec = parse_spec(raw, what="model", kinds=set(MODEL_MAPPING))
    if not spec.kind:
        alias = ALIASES.get(spec.target)
        if alias is None:
            known = ", ".join([*ALIASES, *(f"{k}:..." for k in MODEL_MAPPING)])
            raise UserError(f"unknown model {raw!r} (known: {known})", field="model")
        query = raw.partition("?")[2]
        spec = parse_spec(
            alias + (f"?{query}" if query else ""), what="model", kinds=set(MODEL_MAPPING)
        )
    return spec


def load_backend(raw: str, defaults: dict[str, str | None] | None = None) -> Backend:
    """Instantiate the backend named by a model spec; fails at config time if it can't.

    ``defaults`` fill options the spec doesn't set (e.g. ``--base-url``).
    """
    spec = parse_model_spec(raw)
    fill = {k: v for k, v in (defaults or {}).items() if v is not None and k not in spec.options}
    if fill:
        spec = Spec(spec.kind, spec.target, {**spec.options, **fill}, spec.raw)
    if spec.kind not in MODEL_MAPPING:
        raise UserError(f"unknown model kind {spec.kind!r}", field="model")
    target, extra = MODEL_MAPPING[spec.kind]
    mod_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("userturn"):
            raise UserError(
                f"backend {spec.kind!r} is not available in this build", field="model"
            ) from exc
        raise missing_extra(extra, exc.name or extra) from exc
    cls = getattr(module, cls_name)
    backend: Backend = cls(spec)
    return backend


__all__ = ["ALIASES", "MODEL_MAPPING", "Backend", "load_backend", "parse_model_spec"]
