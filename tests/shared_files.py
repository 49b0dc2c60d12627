"""Where the vendored test inputs live: ``shared/`` (chat templates, judge dev labels).

They are not part of this repository (a vendored template stays where it was given), so
tests look for them, in order: ``$USERTURN_SHARED``; ``shared/`` beside the repository;
``shared/`` beside the repository this checkout was cloned from, when that is a local
path (a throwaway ``git clone . /tmp/x`` still finds them). Tests that need them skip,
with the path in the reason, where none exists (a checkout from GitHub).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _origin_parent() -> Path | None:
    try:
        url = subprocess.run(
            ["git", "config", "--get", "remote.origin.url"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not url or ("://" in url and not url.startswith("file://")):
        return None  # a remote (https, ssh): nothing beside it on this machine
    path = Path(url.removeprefix("file://"))
    return path.resolve().parent if path.is_dir() else None


def find_shared() -> Path:
    """The first ``shared/`` folder that exists, else the expected one beside the repo."""
    candidates = [Path(p) for p in [os.environ.get("USERTURN_SHARED", "")] if p]
    candidates.append(REPO.parent / "shared")
    origin = _origin_parent()
    if origin is not None:
        candidates.append(origin / "shared")
    return next((c for c in candidates if c.is_dir()), REPO.parent / "shared")


SHARED = find_shared()
