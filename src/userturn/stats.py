"""The two statistics several layers need: a proportion's Wilson interval and Cohen's κ.

Why a bottom-layer module: the judge cards (judges), the annotation import (annotate),
agreement and every cell's interval (analysis) all report them, and each had written
its own. Here once, importable from any layer without pulling analysis in.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from statistics import NormalDist
from typing import Any

Z95 = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    """Wilson score 95% interval, in closed form.

    The same numbers as ``statsmodels``' ``proportion_confint(method="wilson")`` (tested to
    1e-12 on every k of several n), written out because importing statsmodels (and the
    scipy.stats and pandas it pulls in) costs ~1.4 s, which was more than half of a
    zero-call re-run of a finished 1,000-record run.
    """
    if n == 0:
        return None, None
    return wilson_at(k / n, n)


def wilson_at(p: float, n: float) -> tuple[float, float]:
    """Wilson at a real-valued sample size (an effective n is rarely an integer)."""
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def kappa(a: Iterable[Any], b: Iterable[Any], labels: list[Any] | None = None) -> float | None:
    """scikit-learn's Cohen's κ; None where it is undefined (no items, or one class on
    both sides), never a number that reads as "no agreement"."""
    xa, xb = list(a), list(b)
    if not xa:
        return None
    # imported where used: scikit-learn and scipy add ~1 s to every CLI start, and most
    # commands never compute agreement.
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():  # undefined κ is reported as None, not warned about
        warnings.simplefilter("ignore")
        value = float(cohen_kappa_score(xa, xb, labels=labels))
    return None if math.isnan(value) else value
