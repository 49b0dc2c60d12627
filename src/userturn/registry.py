"""One registry for every plugin kind: models (backends), datasets, judges, perturbations.

Each plugin is one line: its name, where it lives (``module:attr``, imported only when
used, so a missing extra matters only to those who use it), the extra that provides it,
and the options its spec accepts. The options schema is what lets every spec be checked
before anything loads: an unknown ``?key=`` is refused with the list of valid ones, and
a value of the wrong type or out of range is refused with one line, instead of a
traceback from deep inside a backend (or, worse, a silently ignored typo such as
``hf:X?adaptr=DIR`` running the base model).

Adding a dataset, judge, backend or perturbation means one file in its folder plus one
line here.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from userturn.errors import UserError, missing_extra
from userturn.spec import Spec, parse_spec

PluginKind = Literal["model", "dataset", "judge", "perturbation"]
OptionType = Literal["int", "float", "str", "bool"]
OptionValue = int | float | str | bool
TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})
"""The one spelling of booleans, case-insensitive: every ``bool`` option reads these."""
T = TypeVar("T")


@dataclass(frozen=True)
class Option:
    """One ``?key=value`` a plugin accepts: its type, meaning and allowed range."""

    type: OptionType
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()

    def parse(self, name: str, raw: str, what: str) -> OptionValue:
        """The typed value of ``raw``, or a one-line ``UserError`` naming the option.

        This is the only place an option's text is read: plugins get the value, so a
        spelling that validates is the spelling the plugin honours."""
        where = f"{what} option {name}={raw!r}"
        if self.choices and raw not in self.choices:
            raise UserError(f"{where}: expected one of {', '.join(self.choices)}", field=what)
        if self.type == "bool":
            if raw.lower() not in TRUE | FALSE:
                raise UserError(f"{where}: expected on or off (or true/false)", field=what)
            return raw.lower() in TRUE
        if self.type in ("int", "float"):
            return self._number(raw, where, what)
        if not raw:
            raise UserError(f"{where}: empty value", field=what)
        return raw

    def _number(self, raw: str, where: str, what: str) -> int | float:
        try:
            value = int(raw) if self.type == "int" else float(raw)
        except ValueError:
            raise UserError(f"{where}: expected {_an(self.type)}", field=what) from None
        if not math.isfinite(value):
            raise UserError(f"{where}: must be finite", field=what)
        if self.min is not None and value < self.min:
            raise UserError(f"{where}: must be >= {self.min:g}", field=what)
        if self.max is not None and value > self.max:
            raise UserError(f"{where}: must be <= {self.max:g}", field=what)
        return value


def _an(kind: str) -> str:
    return {"int": "an integer", "float": "a number"}.get(kind, kind)


@dataclass(frozen=True)
class Plugin:
    kind: PluginKind
    name: str
    target: str
    """``module:attr``, imported on first use."""
    help: str
    extra: str | None = None
    options: Mapping[str, Option] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def load(self) -> Any:
        """The plugin's class; a missing optional dependency names its extra."""
        mod_name, _, attr = self.target.partition(":")
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("userturn"):
                raise UserError(
                    f"{self.kind} {self.name!r} is not available in this build", field=self.kind
                ) from exc
            if self.extra is None:
                raise
            raise missing_extra(self.extra, exc.name or self.extra) from exc
        return getattr(module, attr)

    def check_options(self, options: Mapping[str, str], extra: Mapping[str, Option] = {}) -> None:
        """Refuse unknown options (listing the valid ones) and malformed values."""
        self.parse_options(options, extra)

    def parse_options(
        self, options: Mapping[str, str], extra: Mapping[str, Option] = {}
    ) -> dict[str, OptionValue]:
        """The typed values of ``options``; unknown names and bad values are refused."""
        known = {**self.options, **extra}
        values: dict[str, OptionValue] = {}
        for name, raw in options.items():
            if name not in known:
                valid = ", ".join(sorted(known)) or "none"
                raise UserError(
                    f"unknown option {name!r} for {self.kind} {self.name!r} (valid: {valid})",
                    field=self.kind,
                )
            values[name] = known[name].parse(name, raw, self.kind)
        return values

    def typed(self, cls: type[T], options: Mapping[str, str]) -> T:
        """``options`` parsed into the plugin's frozen options dataclass ``cls``, which has
        one field per registered option (its default where the spec doesn't set it)."""
        return cls(**self.parse_options(options))


def typed(
    cls: type[T], schema: Mapping[str, Option], options: Mapping[str, str], what: PluginKind
) -> T:
    """``options`` checked against ``schema`` and parsed into ``cls``, for option sets that
    belong to no single plugin (an LLM judge's own, a client's transport options)."""
    return Plugin(what, what, "", "", options=schema).typed(cls, options)


# options shared by several plugins ----------------------------------------------------
FAMILY = {"family": Option("str", "model family for summaries (default: from the model id)")}
SOURCE = {"source": Option("str", "where rows come from", choices=("pypi", "hub"))}
HTTP = {
    "base_url": Option("str", "server URL, e.g. http://127.0.0.1:8000/v1"),
    "api_key_env": Option("str", "environment variable holding the API key"),
    "concurrency": Option("int", "most requests in flight", min=1),
    "timeout": Option("float", "seconds per request", min=0.001),
    "max_retries": Option("int", "retries on 5xx, timeouts and bad JSON", min=0),
    "rate_limit_retries": Option("int", "retries on HTTP 429", min=0),
    "backoff": Option("float", "base seconds of exponential backoff", min=0),
    "price_in": Option("float", "USD per million prompt tokens", min=0),
    "price_out": Option("float", "USD per million completion tokens", min=0),
}
DTYPES = ("float32", "float16", "bfloat16", "auto")
JUDGE_LLM = {
    "cache": Option("bool", "verdict cache (default on)"),
    "parse_retries": Option("int", "extra tries when a reply can't be read", min=0),
    "max_tokens": Option("int", "judge reply budget", min=1),
    "max_chars": Option("int", "characters per message shown to the judge", min=1),
    "thinking": Option("bool", "render the judge's template with thinking on (default off)"),
}

MODELS: dict[str, Plugin] = {
    p.name: p
    for p in (
        Plugin(
            "model",
            "llamacpp",
            "userturn.backends.llamacpp:LlamaCppBackend",
            "any GGUF (or a named model) with llama-cpp-python",
            "llamacpp",
            {
                **FAMILY,
                "n_ctx": Option("int", "context window in tokens", min=64),
                "n_threads": Option("int", "CPU threads", min=1),
                "batch_samples": Option(
                    "bool", "decode the k samples of a prompt together (default off)"
                ),
                "n_seq": Option(
                    "int", "most samples decoded at once when batch_samples=on", min=1, max=64
                ),
            },
        ),
        Plugin(
            "model",
            "hf",
            "userturn.backends.hf:HFBackend",
            "transformers (CPU/GPU), optional LoRA adapter",
            "hf",
            {
                **FAMILY,
                "adapter": Option("str", "LoRA adapter folder"),
                "device": Option("str", "torch device, e.g. cpu or cuda:0"),
                "dtype": Option("str", "weights dtype", choices=DTYPES),
                "batch": Option("int", "sequences per generate call", min=1),
                "threads": Option("int", "torch CPU threads (0: torch's default)", min=0),
            },
        ),
        Plugin(
            "model",
            "vllm",
            "userturn.backends.vllm:VLLMBackend",
            "vLLM with prefix caching and tensor/pipeline parallelism",
            "vllm",
            {
                **FAMILY,
                "tp": Option("int", "tensor-parallel GPUs", min=1),
                "pp": Option("int", "pipeline-parallel stages", min=1),
                "ray": Option("bool", "use Ray as vLLM's distributed executor"),
                "dtype": Option("str", "weights dtype"),
                "tokenizer": Option("str", "tokenizer id or path"),
                "revision": Option("str", "Hub revision"),
                "max_model_len": Option("int", "context length", min=1),
                "gpu_memory_utilization": Option("float", "share of GPU memory", min=0, max=1),
                "adapter": Option("str", "LoRA adapter folder"),
                "max_lora_rank": Option("int", "largest LoRA rank", min=1),
                "sampling": Option("str", "k samples as seeds or as n", choices=("seed", "n")),
            },
        ),
        Plugin(
            "model",
            "openai",
            "userturn.backends.openai:OpenAIBackend",
            "an OpenAI-compatible server (user turns via /v1/completions)",
            None,
            {
                **FAMILY,
                **HTTP,
                "tokenizer": Option("str", "HF id, folder or .gguf holding the chat template"),
                "add_bos": Option("bool", "whether the server adds BOS"),
            },
        ),
        Plugin(
            "model",
            "fake",
            "userturn.backends.fake:FakeBackend",
            "a scripted, deterministic backend for tests and dry plumbing",
            None,
            {
                **FAMILY,
                "script": Option("str", "JSON file of scripted replies"),
            },
        ),
    )
}
DATASETS: dict[str, Plugin] = {
    p.name: p
    for p in (
        Plugin(
            "dataset", "gsm8k", "userturn.datasets.gsm8k:GSM8K", "grade-school math", None, SOURCE
        ),
        Plugin(
            "dataset",
            "gsm-symbolic",
            "userturn.datasets.gsm_symbolic:GSMSymbolic",
            "GSM8K in 109 languages",
            None,
            {
                **SOURCE,
                "lang": Option("str", "language code, e.g. deu"),
                "instruction": Option("bool", "append the answer-format instruction"),
            },
        ),
        Plugin(
            "dataset",
            "gpqa",
            "userturn.datasets.gpqa:GPQA",
            "graduate-level multiple choice",
            None,
            {**SOURCE, "seed": Option("int", "option shuffle seed", min=0)},
        ),
        Plugin(
            "dataset",
            "ifbench",
            "userturn.datasets.ifbench:IFBench",
            "instruction following",
            "ifeval",
            SOURCE,
        ),
        Plugin(
            "dataset",
            "ifeval",
            "userturn.datasets.ifeval:IFEval",
            "instruction following",
            "ifeval",
            SOURCE,
        ),
        Plugin(
            "dataset",
            "healthbench",
            "userturn.datasets.healthbench:HealthBench",
            "held-out health conversations",
            None,
            SOURCE,
        ),
        Plugin(
            "dataset",
            "healthbench-prompts",
            "userturn.datasets.healthbench:HealthBenchPrompts",
            "health prompts, self-answered",
            None,
            SOURCE,
        ),
        Plugin(
            "dataset",
            "coval",
            "userturn.datasets.coval:Coval",
            "held-out conversations with candidates",
            None,
            {**SOURCE, "candidate": Option("str", "which candidate answer (A, B, ...)")},
        ),
        Plugin(
            "dataset",
            "mtbench",
            "userturn.datasets.mtbench:MTBench",
            "MT-Bench first turns",
            None,
            SOURCE,
        ),
        Plugin(
            "dataset",
            "sharegpt",
            "userturn.datasets.sharegpt:ShareGPT",
            "held-out human conversations",
            None,
            {
                **SOURCE,
                "cut": Option(
                    "str", "which assistant turn to cut after", choices=("first", "last")
                ),
            },
        ),
        Plugin(
            "dataset",
            "jsonl",
            "userturn.datasets.jsonl:JsonlDataset",
            "your own {id, messages} lines",
            None,
        ),
    )
}
OFFLINE = {
    "threshold": Option(
        "float",
        "P(genuine) at which a turn counts as genuine (default: the fitted cut)",
        min=0,
        max=1,
    ),
}
RULES = {
    "restate_overlap": Option(
        "float", "content-word recall that makes a restatement", min=0, max=1
    ),
    "restate_min_units": Option("int", "content words a restatement needs", min=0),
    "loop_repetition": Option(
        "float", "share of repeated word trigrams that is a loop", min=0, max=1
    ),
    "max_words": Option("int", "longest turn a user writes next", min=1),
    "min_grounding": Option(
        "float", "content-word recall below which a turn is unrelated", min=0, max=1
    ),
}
"""The rules judge's thresholds (``rules.Thresholds``; a test keeps the two in step)."""
JUDGES: dict[str, Plugin] = {
    p.name: p
    for p in (
        Plugin(
            "judge",
            "offline",
            "userturn.judges.offline:OfflineJudge",
            "the learned offline default (shipped as data)",
            None,
            OFFLINE,
        ),
        Plugin(
            "judge",
            "rules",
            "userturn.judges.rules:RulesJudge",
            "hand-written rules (a baseline and a component of offline)",
            None,
            RULES,
        ),
        Plugin(
            "judge",
            "llm",
            "userturn.judges.llm:LLMJudge",
            "any model as the judge: llm:<model spec>",
            None,
        ),
        Plugin(
            "judge",
            "cascade",
            "userturn.judges.cascade:CascadeJudge",
            "offline settles clear cases, an LLM judge the rest: cascade:<model spec>",
            None,
        ),
    )
}
PERTURBATIONS: dict[str, Plugin] = {
    p.name: p
    for p in (
        Plugin(
            "perturbation",
            "none",
            "userturn.perturb.none:NoPerturbation",
            "the assistant turn as is",
        ),
        Plugin(
            "perturbation",
            "truncate",
            "userturn.perturb.truncate:Truncate",
            "keep the first fraction of the answer (default 0.5): truncate[:F]",
        ),
        Plugin(
            "perturbation",
            "append-question",
            "userturn.perturb.append_question:AppendQuestion",
            "append a question (default 'Does that make sense?'): append-question[:TEXT]",
        ),
        Plugin(
            "perturbation",
            "inject-error",
            "userturn.perturb.inject_error:InjectError",
            "scored items: a plausible wrong final answer in place of the model's (seeded)",
        ),
    )
}
REGISTRY: dict[PluginKind, dict[str, Plugin]] = {
    "model": MODELS,
    "dataset": DATASETS,
    "judge": JUDGES,
    "perturbation": PERTURBATIONS,
}


def named_models() -> dict[str, str]:
    """Named models (``smollm2-135m``) and the spec each stands for."""
    from userturn import assets

    return {name: f"llamacpp:{name}" for name in assets.MODELS}


def unknown(kind: PluginKind, raw: str, names: list[str]) -> UserError:
    return UserError(f"unknown {kind} {raw!r} (known: {', '.join(names)})", field=kind)


# resolving specs ------------------------------------------------------------------------
def model_spec(raw: str, extra: Mapping[str, Option] = {}) -> tuple[Plugin, Spec]:
    """Parse and check a model spec; named models resolve to their backend."""
    spec = parse_spec(raw, what="model", kinds=set(MODELS))
    if not spec.kind:
        alias = named_models().get(spec.target)
        if alias is None:
            names = [*named_models(), *(f"{k}:..." for k in MODELS)]
            raise unknown("model", raw, names)
        kind, _, target = alias.partition(":")
        spec = Spec(kind, target, spec.options, raw)
    plugin = MODELS[spec.kind]
    plugin.check_options(spec.options, extra)
    return plugin, spec


def dataset_spec(raw: str) -> tuple[Plugin, Spec]:
    """``NAME``, ``NAME:PATH`` or ``NAME?opt=v``: the kind is always the dataset name."""
    spec = parse_spec(raw, what="dataset", kinds=set(DATASETS))
    if not spec.kind:
        if spec.target not in DATASETS:
            raise unknown("dataset", raw, list(DATASETS))
        spec = Spec(spec.target, "", spec.options, raw)
    plugin = DATASETS[spec.kind]
    plugin.check_options(spec.options)
    return plugin, spec


def judge_spec(raw: str) -> tuple[Plugin, Spec]:
    """``offline``, ``rules?x=1``, ``llm:<model spec>``, ``openai:M`` (= ``llm:openai:M``),
    ``cascade:<model spec>``. An LLM judge's options are its model's plus the judge's own."""
    raw = raw.strip()
    if raw.startswith("openai:"):
        raw = "llm:" + raw
    spec = parse_spec(raw, what="judge", kinds={"llm", "cascade"})
    if spec.kind in ("llm", "cascade"):
        target = raw.split(":", 1)[1]
        if not target.partition("?")[0].strip(":"):
            raise UserError(
                f"{spec.kind} judge needs a model: {spec.kind}:<model spec>", field="judge"
            )
        model_spec(target.removeprefix("llm:"), JUDGE_LLM)
        return JUDGES[spec.kind], Spec(spec.kind, target, {}, raw)
    if spec.target not in JUDGES or spec.target in ("llm", "cascade"):
        raise unknown("judge", raw, [*JUDGES, "openai:MODEL"])
    plugin = JUDGES[spec.target]
    plugin.check_options(spec.options)
    return plugin, Spec(spec.target, "", spec.options, raw)


def perturbation_spec(raw: str) -> tuple[Plugin, str]:
    """``KIND[:ARG]``; the argument may contain ``?`` (a question), so no options."""
    kind, _, arg = raw.strip().partition(":")
    if kind not in PERTURBATIONS:
        raise unknown("perturbation", raw, list(PERTURBATIONS))
    return PERTURBATIONS[kind], arg
