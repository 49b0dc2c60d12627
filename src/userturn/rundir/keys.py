"""Record keys and seeds: content hashes of what produced a record.

Every record's key hashes the run's config fingerprint and the dataset with its own
inputs, so two experiments or two datasets can never share a row; a seed is derived the
same way, so it is stable across runs and executors.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def content_key(*parts: Any) -> str:
    """A stable hash of JSON-serialisable parts (dict keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def derive_seed(run_seed: int, *parts: object) -> int:
    """seed = hash(run seed, item, T, sample index): stable across runs and executors."""
    blob = "\x1f".join(str(p) for p in (run_seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF
