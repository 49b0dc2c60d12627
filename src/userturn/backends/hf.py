"""transformers backend: ``hf:ID_OR_PATH[?adapter=DIR&device=cpu&dtype=float32&batch=8]``.

``threads=N`` sets torch's CPU threads for the process (on a busy shared CPU, fewer
threads than cores is often faster: OpenMP spins while waiting for its slowest thread).

CPU or GPU, batched ``generate`` with left padding, on the prompt text rendered by
``userturn.chat`` and tokenized with ``add_special_tokens=False`` (so the template's own
BOS is the only one). ``hf:smollm2-135m`` is the embedded GGUF, dequantized once.

Seeds: every sample draws from its own ``torch.Generator(seed)`` (``SeededSampler``), so
a sample's tokens do not depend on which other samples share its batch, up to the
float rounding of a padded batch. Greedy (T=0) ignores seeds. The model's own
``generation_config`` defaults (repetition penalty, sampling knobs) are dropped: the run's
``SamplingParams`` are all that apply, as with the other backends.

``loglikelihood``: one forward pass per prompt + continuation, ``batch`` rows at a time
(left-padded, explicit position ids, logits kept only for the continuation positions),
log-softmax in float64 (``backends.likelihood``). No prompt sharing between continuations:
each row carries its prompt, which on a GPU costs little next to a simpler, exact path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from userturn import hfmodel
from userturn.backends.base import Backend, Capabilities, ModelOptions
from userturn.backends.hf_decode import (
    Row,
    SeededSampler,
    decode_rows,
    padded_batch,
    score_batch,
)
from userturn.backends.likelihood import continuation_ids, score
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import (
    Completion,
    ContinuationScore,
    GenRequest,
    GenResult,
    SamplingParams,
    ScoreRequest,
    ScoreResult,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HFOptions(ModelOptions):
    adapter: str | None = None
    device: str | None = None
    dtype: str | None = None
    batch: int = 8
    threads: int = 0
    """0: torch's default."""


class HFBackend(Backend):
    plugin = "hf"
    Options = HFOptions
    options: HFOptions
    capabilities = Capabilities(
        raw_completion=True, n_samples=True, seeds=True, prefix_cache=False, loglikelihood=True
    )

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        self.adapter = self.options.adapter
        if self.adapter and not Path(self.adapter).is_dir():
            raise UserError("LoRA adapter folder not found", file=self.adapter, field="adapter")
        self.device = self.options.device
        self.dtype = self.options.dtype
        self.batch = self.options.batch
        self.threads = self.options.threads
        name = Path(spec.target).name if Path(spec.target).exists() else spec.target
        suffix = f"+{Path(self.adapter).name}" if self.adapter else ""
        # Its own id, so an hf run never reuses (or merges cells with) a llama.cpp run.
        self._model_id = f"hf:{name}{suffix}"

    @property
    def model_id(self) -> str:
        return self._model_id

    @cached_property
    def revision(self) -> str:
        return hfmodel.model_revision(self.spec.target, self.adapter)

    @cached_property
    def tokenizer(self) -> Any:
        return hfmodel.load_tokenizer(self.spec.target)

    @cached_property
    def model(self) -> Any:
        if self.threads > 0:
            import torch

            torch.set_num_threads(self.threads)
        model, _ = hfmodel.load_hf(
            self.spec.target, adapter=self.adapter, device=self.device, dtype=self.dtype
        )
        import transformers

        gc = model.generation_config
        # Only the token ids survive: the run's SamplingParams are the whole sampling story.
        model.generation_config = transformers.GenerationConfig(  # type: ignore[no-untyped-call]
            bos_token_id=gc.bos_token_id,
            eos_token_id=gc.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        return model

    def builtin_template(self) -> tuple[str, str, str, str]:
        return hfmodel.template_parts(self.tokenizer, self.spec.target)

    def tokenize(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        out = set(ids if isinstance(ids, list) else [] if ids is None else [ids])
        if self.tokenizer.eos_token_id is not None:
            out.add(int(self.tokenizer.eos_token_id))
        return out

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        rows: list[Row] = []
        lengths = []
        for ri, req in enumerate(requests):
            ids = list(req.prompt_token_ids or self.tokenize(req.prompt))
            lengths.append(len(ids))
            # Greedy samples are identical: generate once, copy (k greedy copies are
            # not k samples, but the pipeline decides that, not us).
            seeds = req.seeds[:1] if req.params.temperature == 0 else req.seeds
            rows += [Row(ri, si, tuple(ids), seed, req.params) for si, seed in enumerate(seeds)]
        done: dict[tuple[int, int], Completion] = {}
        for batch in _batches(rows, self.batch):
            for row, comp in zip(batch, self._generate_batch(batch), strict=True):
                done[(row.request, row.sample)] = comp
        out = []
        for ri, req in enumerate(requests):
            comps = [done.get((ri, si)) or done[(ri, 0)] for si in range(len(req.seeds))]
            out.append(GenResult(tuple(comps), prompt_tokens=lengths[ri] * len(comps)))
        return out

    def _generate_batch(self, batch: list[Row]) -> list[Completion]:
        import torch

        params = batch[0].params
        input_ids, mask = padded_batch([r.ids for r in batch], self.tokenizer.pad_token_id)
        kwargs: dict[str, Any] = {"max_new_tokens": params.max_tokens, "do_sample": False}
        if params.stop:
            kwargs |= {"stop_strings": list(params.stop), "tokenizer": self.tokenizer}
        if params.temperature > 0:
            kwargs["logits_processor"] = [SeededSampler(params, [r.seed for r in batch])]
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.model.device),
                attention_mask=mask.to(self.model.device),
                **kwargs,
            )
        new = out[:, input_ids.shape[1] :].tolist()
        return decode_rows(new, self.tokenizer, self.eos_ids(), params)

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """Every (prompt, continuation) is one row; rows go ``batch`` at a time."""
        rows: list[tuple[int, int, list[int], list[int]]] = []
        lengths = []
        for ri, req in enumerate(requests):
            ids = self.tokenize(req.prompt)
            lengths.append(len(ids))
            for ci, cont in enumerate(req.continuations):
                tail = continuation_ids(self.tokenize, self.tokenize, req.prompt, ids, cont)
                rows.append((ri, ci, ids, tail))
        done: dict[tuple[int, int], ContinuationScore] = {}
        live = [r for r in rows if r[3]]
        live.sort(key=lambda r: len(r[2]) + len(r[3]))  # similar lengths: less padding
        for at in range(0, len(live), self.batch):
            chunk = live[at : at + self.batch]
            lps = score_batch(
                self.model, [(r[2], r[3]) for r in chunk], self.tokenizer.pad_token_id
            )
            done |= {(r[0], r[1]): score(lp) for r, lp in zip(chunk, lps, strict=True)}
        return [
            ScoreResult(
                tuple(done.get((ri, ci), score([])) for ci in range(len(req.continuations))),
                prompt_tokens=lengths[ri] * len(req.continuations),
            )
            for ri, req in enumerate(requests)
        ]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "adapter": self.adapter,
            "device": self.device,
            "dtype": self.dtype,
            "batch": self.batch,
            "seeds_note": "per-sample torch.Generator; greedy ignores seeds",
        }

    def close(self) -> None:
        self.__dict__.pop("model", None)


def _batches(rows: list[Row], size: int) -> list[list[Row]]:
    """Batches of rows with equal sampling params, shortest prompts first (less padding).

    The order depends only on the request list, so the same requests always make the
    same batches: what keeps the Ray and local executors bit-identical.
    """
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(_params_key(row.params), []).append(row)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: (len(r.ids), r.request, r.sample))
        out += [group[i : i + size] for i in range(0, len(group), size)]
    return out


def _params_key(p: SamplingParams) -> tuple[Any, ...]:
    return (p.temperature, p.top_p, p.top_k, p.max_tokens, p.stop)
