"""A sweep's sequential design: how rows are added in batches until a comparison is decided.

``design: sequential`` with ``sequential: {batch: 10, delta: 0.02, max_rows: 400, alpha: 0.05,
seed: 0}`` in a spec (validated in `experiments.sweeps.spec`) applies to every comparison of
the sweep: listed pairs get a paired confidence sequence each, ``best_vs_worst`` and
``all_pairs`` adaptive successive elimination (`experiments.analysis.sequential`). The run
loop is `experiments.sweeps.sequential`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments import bounds

DESIGNS = ("fixed", "sequential")
SEQUENTIAL_KEYS = ("batch", "delta", "max_rows", "alpha", "seed", "method")
# anytime: the betting confidence sequence, valid at any look; group: the group-sequential
# test over the planned looks (every `batch` rows up to the budget), alpha spent as alpha t^2.5
METHODS = ("anytime", "group")
DEFAULT_BATCH = 10
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class SequentialDesign:
    """The sequential design's settings: rows per look, the equivalence margin, the budget."""

    batch: int = DEFAULT_BATCH  # rows added to every running arm per look
    delta: float | None = None  # stop "equivalent" when the interval lies inside +-delta
    max_rows: int | None = None  # the budget: at most this many rows per arm (None: all)
    alpha: float = DEFAULT_ALPHA  # family-wise over the sweep's comparisons (Bonferroni)
    seed: int = 0  # the row order's seed (`row_order`); default: the spec's sample_seed
    method: str = "anytime"  # "anytime" (betting CS) or "group" (planned looks)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "batch": self.batch,
            "delta": self.delta,
            "max_rows": self.max_rows,
            "alpha": self.alpha,
            "seed": self.seed,
        }
        if self.method != "anytime":  # the default adds nothing: earlier sweep ids stay
            out["method"] = self.method
        return out


def check_design(where: str, doc: dict[str, Any], sample_seed: int) -> SequentialDesign | str:
    """The spec's design: a `SequentialDesign`, "fixed" for the fixed design, or else the
    error message, naming the file and field (`experiments.sweeps.spec` raises it as a
    `SpecError`; this module stays below the spec's)."""
    design = doc.get("design", "fixed")
    raw = doc.get("sequential")
    if design not in DESIGNS:
        return f"{where}: design must be fixed or sequential, not {design!r}"
    if design == "fixed":
        if raw is not None:
            return f"{where}: field 'sequential' needs design: sequential (or remove it)"
        return "fixed"
    raw = dict(raw or {})
    for key in raw:
        if key not in SEQUENTIAL_KEYS:
            return f"{where}: sequential: unknown key {key!r} (keys: {', '.join(SEQUENTIAL_KEYS)})"
    if "cluster_by" in doc:
        return (
            f"{where}: cluster_by is for the fixed design's tests; a sequential design always "
            "clusters rows given the same prompt (repeated texts) and bets on whole clusters: "
            "remove cluster_by"
        )
    problem = _check_values(where, raw)
    if problem:
        return problem
    delta = raw.get("delta")
    return SequentialDesign(
        batch=int(raw.get("batch", DEFAULT_BATCH)),
        delta=None if delta is None else float(delta),
        max_rows=raw.get("max_rows"),
        alpha=float(raw.get("alpha", DEFAULT_ALPHA)),
        seed=int(raw.get("seed", sample_seed)),
        method=str(raw.get("method", "anytime")),
    )


_LIMITS = (
    ("batch", bounds.SEQUENTIAL_BATCH, ""),
    ("max_rows", bounds.SEQUENTIAL_MAX_ROWS, ""),
    ("seed", bounds.SEED, ""),
    ("delta", bounds.SEQUENTIAL_DELTA, " (a difference in the task's metric)"),
)


def _check_values(where: str, raw: dict[str, Any]) -> str | None:
    """The first bad value of a `sequential:` mapping, as an error message, or None."""
    for key, limits, what in _LIMITS:
        value = raw.get(key)
        if value is not None and not limits.contains(value):
            return f"{where}: sequential.{key} must be {limits.describe()}{what}, not {value!r}"
    method = raw.get("method", "anytime")
    if method not in METHODS:
        return (
            f"{where}: sequential.method must be anytime (valid at any look) or group (the "
            f"planned looks, alpha spent as alpha t^2.5: more power), not {method!r}"
        )
    alpha = raw.get("alpha", DEFAULT_ALPHA)
    if not bounds.SEQUENTIAL_ALPHA.contains(alpha):
        return (
            f"{where}: sequential.alpha must be {bounds.SEQUENTIAL_ALPHA.describe()}, not {alpha!r}"
        )
    return None
