"""Multiple-comparison corrections: `holm` and `benjamini_hochberg` (p-values outside
[0, 1] or NaN are refused)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.analysis.stats.metrics import FloatArray


def _check_p_values(p_values: Sequence[float]) -> FloatArray:
    try:
        p = np.asarray(p_values, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"p-values must be numbers in [0, 1]: {e}") from None
    if p.ndim != 1:
        raise ValueError("p-values must be a flat sequence of numbers in [0, 1]")
    bad = np.flatnonzero(~((p >= 0) & (p <= 1)))  # NaN fails both comparisons
    if len(bad):
        shown = ", ".join(f"{p_values[i]!r} at position {i}" for i in bad[:5])
        raise ValueError(
            f"p-values must be numbers in [0, 1] (not NaN or None); got {shown}"
            + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        )
    return p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (family-wise error), in the input order.

    Raises ValueError on NaN, None or a p-value outside [0, 1].
    """
    p = _check_p_values(p_values)
    m = len(p)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), in the input order.

    Raises ValueError on NaN, None or a p-value outside [0, 1].
    """
    from scipy.stats import false_discovery_control

    p = _check_p_values(p_values)
    if len(p) == 0:
        return []
    return [float(x) for x in false_discovery_control(p)]
