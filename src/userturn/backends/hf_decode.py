"""Pieces of the transformers backend that don't need a model: batching, per-sample
seeded sampling, and turning generated ids into (text, finish) like llama.cpp does.

Why our own sampler: ``generate(do_sample=True)`` draws every row of a batch from the one
global RNG, so a sample's tokens would depend on its batch-mates and on batch order.
``SeededSampler`` instead draws each row from its own ``torch.Generator(seed)`` and hands
``generate`` a one-hot score row, which greedy decoding then picks. Temperature, top-k and
top-p are transformers' own warpers, applied in llama.cpp's order (top-k, top-p, temp is
equivalent for these three: all keep the same candidate set and renormalize).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import LogitsProcessor

from userturn.backends.likelihood import target_logprobs
from userturn.types import Completion, Finish, SamplingParams


@dataclass(frozen=True)
class Row:
    """One sample to generate: request index, sample index, prompt ids, seed, params."""

    request: int
    sample: int
    ids: tuple[int, ...]
    seed: int | None
    params: SamplingParams


def padded_batch(prompts: list[tuple[int, ...]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask: decoder-only models continue from the right."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if p:
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
    return ids, mask


class SeededSampler(LogitsProcessor):
    """Sample each row from its own generator; return scores whose argmax is the sample."""

    def __init__(self, params: SamplingParams, seeds: list[int | None]) -> None:
        from transformers.generation.logits_process import (
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        self.seeds = seeds
        self.gens: list[torch.Generator] = []
        self.warpers: list[Any] = [TemperatureLogitsWarper(params.temperature)]
        if params.top_k > 0:
            self.warpers.append(TopKLogitsWarper(params.top_k))
        if params.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(params.top_p))

    def _generators(self, device: torch.device) -> list[torch.Generator]:
        if not self.gens:
            for seed in self.seeds:
                g = torch.Generator(device=device)
                if seed is None:
                    g.seed()  # unseeded means random, not the generator's fixed default
                else:
                    g.manual_seed(seed)
                self.gens.append(g)
        return self.gens

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        warped = scores.float()
        for w in self.warpers:
            warped = w(input_ids, warped)
        probs = torch.softmax(warped, dim=-1)
        gens = self._generators(scores.device)
        out = torch.full_like(scores, float("-inf"))
        for i, g in enumerate(gens):
            tok = torch.multinomial(probs[i], 1, generator=g)
            out[i, tok] = 0.0
        return out  # type: ignore[return-value]


def decode_rows(
    rows: list[list[int]], tok: Any, eos_ids: set[int], params: SamplingParams
) -> list[Completion]:
    """Generated ids → Completion, cut like llama.cpp: at EOS (not included) or at the
    first stop string (not included); otherwise the row ran out of tokens.

    Special tokens other than EOS stay in the text, so a judge sees template artifacts.
    """
    out = []
    pad = tok.pad_token_id
    for ids in rows:
        cut = next((i for i, t in enumerate(ids) if t in eos_ids), None)
        body = ids if cut is None else ids[:cut]
        text = tok.decode(body, skip_special_tokens=False)
        at = min((p for s in params.stop if (p := text.find(s)) >= 0), default=-1)
        if cut is not None:
            n, finish = cut + 1, "stop"
        elif at >= 0:
            n = len(body)
            while n and pad is not None and body[n - 1] == pad:
                n -= 1
            finish = "stop"
        else:
            n, finish = len(body), ("length" if len(ids) >= params.max_tokens else "stop")
        if at >= 0:
            text = text[:at]
        reason: Finish = "stop" if finish == "stop" else "length"
        out.append(Completion(text=text, finish=reason, completion_tokens=n))
    return out


def score_batch(
    model: Any, rows: list[tuple[list[int], list[int]]], pad_id: int
) -> list[list[float]]:
    """Token log-probabilities of each row's continuation given its prompt, one forward.

    Rows are left-padded, so every continuation ends in the last column and only the last
    ``max(len(continuation)) + 1`` positions need logits (``logits_to_keep``). Position ids
    count real tokens only, so a padded row computes what it would alone.
    """
    ids, mask = padded_batch([tuple(p + c) for p, c in rows], pad_id)
    keep = max(len(c) for _, c in rows) + 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        logits = model(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            position_ids=positions.to(model.device),
            logits_to_keep=keep,
        ).logits
    out = []
    for i, (_, cont) in enumerate(rows):
        n = len(cont)
        rows_i = logits[i, keep - n - 1 : keep - 1].float().cpu().numpy()
        out.append([float(x) for x in target_logprobs(rows_i, cont)])
    return out
