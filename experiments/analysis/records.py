"""The comparison records: one typed, frozen row per comparison and per across-task test.

`analysis.compare` builds them, the multiple-testing correction and the recommendation are
added with `dataclasses.replace` (never by mutation), and readers read fields. A record
becomes a dict only where it is written (comparisons.json, comparisons.csv, the MLflow
metrics): `to_dict()` gives the row exactly as the workbench has always written it, the same
keys in the same order, each optional group present in the same cases, so no stored byte
moves. `from_dict` reads a stored row back (an older document may lack keys: they read None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Action = Literal["use", "keep", "equivalent", "undecided"]
#: the key a row carries its recommendation under (`experiments.analysis.decision`)
RECOMMENDATION = "recommendation"


@dataclass(frozen=True)
class Recommendation:
    """An action ("use" an arm, "keep" the base, the arms are "equivalent", or
    "undecided"), the arm it names (None unless use/keep), and the sentence to print."""

    action: Action
    choice: str | None
    line: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Recommendation:
        return cls(d["action"], d.get("choice"), str(d.get("line", "")))


@dataclass(frozen=True)
class Adjustment:
    """A comparison's p-value corrected over the sweep's tested comparisons (all None for an
    untested row, which is in the family of rows but not of tests)."""

    p_holm: float | None = None
    p_bh: float | None = None
    p_corrected: float | None = None
    correction: str | None = None  # "Holm" or "Benjamini-Hochberg"
    family_size: int | None = None


@dataclass(frozen=True)
class Comparison:
    """One comparison of two arms on a (task, model): a fixed pair's paired permutation test
    (`analysis.compare.pair`), best vs worst of k draws with the range test (`k` set,
    `best_vs_worst`), or an untested pair saying why in `status` (no p-value).

    `model` and `task` are set on a sweep's or import's rows (a lone pair, as an
    optimisation's best vs base, has neither). The groups a kind of row does not carry are
    None here and absent from `to_dict()`: a pair's per-arm intervals and MDE details, a
    range row's draws and post-selection test."""

    a: str
    b: str
    status: str
    metric: str | None
    score_a: float | None = None
    score_b: float | None = None
    statistic: float | None = None
    p_value: float | None = None
    test: str | None = None
    exact: bool | None = None
    n_resamples: int | None = None
    n: int | None = None
    n_discordant: int | None = None
    # the interval of A - B (none for best vs worst: the pair is chosen after the fact)
    ci_low: float | None = None
    ci_high: float | None = None
    ci_note: str | None = None
    ci_method: str | None = None
    ci_a_low: float | None = None
    ci_a_high: float | None = None
    ci_a_note: str | None = None
    ci_b_low: float | None = None
    ci_b_high: float | None = None
    ci_b_note: str | None = None
    mde_80: float | None = None
    mde_note: str | None = None
    mde_method: str | None = None
    mde_unreliable: bool | None = None
    n_clusters: int | None = None
    clustered_by: str | None = None
    cluster_note: str | None = None
    # best vs worst of k draws (the range layout) only
    k: int | None = None
    draw_ci: Mapping[str, Sequence[float | None]] | None = None
    draw_ci_note: Mapping[str, str | None] | None = None
    draw_scores: Mapping[str, float | None] | None = None
    p_post_selection: float | None = None
    post_selection_test: str | None = None
    # set by the sweep (`sweeps.report`), the correction and the recommendation
    model: str | None = None
    task: str | None = None
    adjusted: Adjustment | None = None
    recommendation: Recommendation | None = field(default=None)
    # an import's tested pair on correctness: the unpaired z-test beside it, for the reader
    # (`experiments.imports.pairing`; absent unless `unpaired_test` is set)
    p_unpaired: float | None = None
    unpaired_test: str | None = None

    @property
    def tested(self) -> bool:
        return self.p_value is not None

    @property
    def p_corrected(self) -> float | None:
        return None if self.adjusted is None else self.adjusted.p_corrected

    @property
    def correction(self) -> str | None:
        return None if self.adjusted is None else self.adjusted.correction

    @property
    def family_size(self) -> int | None:
        return None if self.adjusted is None else self.adjusted.family_size

    @property
    def is_range(self) -> bool:
        """Best vs worst of k draws, tested (an untested one has the pair layout)."""
        return self.k is not None

    def to_dict(self) -> dict[str, Any]:
        """The row as comparisons.json, comparisons.csv and MLflow have always had it."""
        out: dict[str, Any] = {}
        if self.model is not None or self.task is not None:
            out |= {"model": self.model, "task": self.task}
        out |= {
            "a": self.a, "b": self.b, "status": self.status, "metric": self.metric,
            "score_a": self.score_a, "score_b": self.score_b, "statistic": self.statistic,
            "p_value": self.p_value, "test": self.test, "exact": self.exact,
            "n_resamples": self.n_resamples, "n": self.n, "n_discordant": self.n_discordant,
        }  # fmt: skip
        if self.is_range:
            out |= {
                "k": self.k, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "ci_note": self.ci_note,
                "draw_ci": {v: list(iv) for v, iv in (self.draw_ci or {}).items()},
                "draw_ci_note": dict(self.draw_ci_note or {}),
                "draw_scores": dict(self.draw_scores or {}),
                "mde_80": self.mde_80, "p_post_selection": self.p_post_selection,
                "post_selection_test": self.post_selection_test,
            }  # fmt: skip
        else:
            out |= {
                "ci_low": self.ci_low, "ci_high": self.ci_high, "ci_note": self.ci_note,
                "ci_method": self.ci_method,
                "ci_a_low": self.ci_a_low, "ci_a_high": self.ci_a_high,
                "ci_a_note": self.ci_a_note,
                "ci_b_low": self.ci_b_low, "ci_b_high": self.ci_b_high,
                "ci_b_note": self.ci_b_note,
                "mde_80": self.mde_80, "mde_note": self.mde_note, "mde_method": self.mde_method,
                "mde_unreliable": self.mde_unreliable,
            }  # fmt: skip
        out |= {
            "n_clusters": self.n_clusters,
            "clustered_by": self.clustered_by,
            "cluster_note": self.cluster_note,
        }
        if self.adjusted is not None:
            out |= asdict(self.adjusted)
        if self.recommendation is not None:
            out[RECOMMENDATION] = self.recommendation.to_dict()
        if self.unpaired_test is not None:
            out |= {"p_unpaired": self.p_unpaired, "unpaired_test": self.unpaired_test}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Comparison:
        """A stored row (comparisons.json); keys an older document lacks read None."""
        names = cls.__dataclass_fields__
        kw = {k: v for k, v in d.items() if k in names and k not in ("adjusted", RECOMMENDATION)}
        adjusted = (
            Adjustment(**{k: d.get(k) for k in Adjustment.__dataclass_fields__})
            if any(k in d for k in Adjustment.__dataclass_fields__)
            else None
        )
        rec = d.get(RECOMMENDATION)
        return cls(
            **{"a": "", "b": "", "status": "", "metric": None, **kw},
            adjusted=adjusted,
            recommendation=Recommendation.from_dict(rec) if isinstance(rec, Mapping) else None,
        )


@dataclass(frozen=True)
class AcrossCorrection:
    """An across-task test's p-value corrected over the sweep's across-task tests."""

    p_corrected: float | None = None
    correction: str | None = None
    family_size: int | None = None


@dataclass(frozen=True)
class AcrossTaskTest:
    """The declared test of one comparison across tasks, per model (`analysis.compare
    .across_tasks`): t, Wilcoxon or sign-flip on the per-task scores, or, for best vs worst,
    Fisher's combination of the per-task range tests. Tasks without a score are listed."""

    model: str
    a: str
    b: str
    test: str
    statistic: float | None
    p_value: float | None
    n_tasks: int
    mean_difference: float | None
    note: str | None
    tasks: Sequence[str] = ()
    missing_tasks: Sequence[str] = ()
    adjusted: AcrossCorrection | None = None
    recommendation: Recommendation | None = None

    @property
    def p_corrected(self) -> float | None:
        return None if self.adjusted is None else self.adjusted.p_corrected

    @property
    def correction(self) -> str | None:
        return None if self.adjusted is None else self.adjusted.correction

    @property
    def family_size(self) -> int | None:
        return None if self.adjusted is None else self.adjusted.family_size

    def to_dict(self) -> dict[str, Any]:
        """The row as comparisons.json has always had it."""
        out: dict[str, Any] = {
            "model": self.model, "a": self.a, "b": self.b, "test": self.test,
            "statistic": self.statistic, "p_value": self.p_value, "n_tasks": self.n_tasks,
            "mean_difference": self.mean_difference, "note": self.note,
            "tasks": list(self.tasks), "missing_tasks": list(self.missing_tasks),
        }  # fmt: skip
        if self.adjusted is not None:
            out |= asdict(self.adjusted)
        if self.recommendation is not None:
            out[RECOMMENDATION] = self.recommendation.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AcrossTaskTest:
        """A stored row; keys an older document lacks read None (or no tasks)."""
        fields = AcrossCorrection.__dataclass_fields__
        rec = d.get(RECOMMENDATION)
        return cls(
            model=d.get("model"),  # type: ignore[arg-type]
            a=str(d.get("a")),
            b=str(d.get("b")),
            test=str(d.get("test")),
            statistic=d.get("statistic"),
            p_value=d.get("p_value"),
            n_tasks=int(d.get("n_tasks") or 0),
            mean_difference=d.get("mean_difference"),
            note=d.get("note"),
            tasks=tuple(d.get("tasks") or ()),
            missing_tasks=tuple(d.get("missing_tasks") or ()),
            adjusted=(
                AcrossCorrection(**{k: d.get(k) for k in fields})
                if any(k in d for k in fields)
                else None
            ),
            recommendation=Recommendation.from_dict(rec) if isinstance(rec, Mapping) else None,
        )
