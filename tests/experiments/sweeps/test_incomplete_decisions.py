"""A sweep with incomplete trials: its decision lines say only what the rerun cannot undo.

The comparisons of an incomplete trial are untested, so the sweep's correction ran over the
others alone; the rerun tests them and corrects over all. `run_sweep` passes
``final=not incomplete`` to `sweeps.report.compare` (`experiments.analysis.decision.annotate`).
"""

from __future__ import annotations

from experiments.analysis import stats
from experiments.sweeps.report import compare
from experiments.sweeps.spec import NamedVariant, SweepSpec
from experiments.trials.record import TrialRecord, TrialStatus
from promptlib.variants import PromptVariant

FN = stats.metric_fn("accuracy")
N = 60


def _arm(model: str, variant: str, hits: list[bool] | None) -> TrialRecord:
    """A yes/no trial right where `hits` says; None: every row failed."""
    y = ["Yes" if i % 2 else "No" for i in range(N)]
    idx = [str(i) for i in range(N)]
    if hits is None:
        return TrialRecord.of(
            variant, "accuracy", idx, y, [None] * N, None, status=TrialStatus.FAILED,
            n_errors=N, task="hearsay", model=model,
        )  # fmt: skip
    gens = [t if h else {"Yes": "No", "No": "Yes"}[t] for t, h in zip(y, hits, strict=True)]
    return TrialRecord.of(
        variant, "accuracy", idx, y, gens, FN(y, gens), task="hearsay", model=model
    )


def _spec() -> SweepSpec:
    return SweepSpec(
        path="s.yaml", name="s", description="", tasks=("hearsay",), requires=(),
        models=("m1", "m2"), split="test", limit=None, sample_seed=0,
        variants=(NamedVariant("A", PromptVariant()), NamedVariant("B", PromptVariant())),
        comparisons="all_pairs", n_resamples=500, correction="holm", scoring=None,
        cluster_by="rows",
    )  # fmt: skip


def test_the_sweeps_comparisons_know_that_trials_are_incomplete() -> None:
    good = [i % 10 != 0 for i in range(N)]
    poor = [i % 2 == 0 for i in range(N)]
    arms = [
        _arm("m1", "A", good),
        _arm("m1", "B", poor),
        _arm("m2", "A", good),
        _arm("m2", "B", None),
    ]
    table, _ = compare(_spec(), arms, catalog=None, final=False)  # type: ignore[arg-type]
    m1, m2 = (r.to_dict() for r in table)
    assert m1["recommendation"]["action"] == "use" and m1["recommendation"]["choice"] == "A"
    assert m1["recommendation"]["line"].endswith(
        "; holds whatever the 1 comparison waiting for incomplete trials gives"
    )
    assert m2["p_value"] is None and "not tested (B failed" in m2["recommendation"]["line"]
    table, _ = compare(_spec(), arms, catalog=None)  # type: ignore[arg-type]
    assert "waiting" not in table[0].to_dict()["recommendation"]["line"]
