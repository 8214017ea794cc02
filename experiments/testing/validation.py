"""End-to-end validation of the verdicts with a simulated model of known effect.

A `KnownEffectLM` answers each row correctly with a probability set per variant (seeded per
simulation, variant and row, so answers are independent across variants), and otherwise gives
a wrong label. `simulate` runs many small sweeps through the whole path the product uses —
sweep spec, planning (paired rows), rendering, the runner, LegalBench scoring and the
comparison module — and counts how often the comparison rejects at alpha. With no effect
that rate is the test's size; with an effect it should match the power the comparison's own
`minimum_detectable_effect` predicts. `benchmarks/known_effect.py` runs it at full size; the
tests run a reduced version.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from experiments import ids
from experiments.analysis.records import Comparison
from experiments.llm.types import Completion, Decoding, InGivenOrder
from experiments.sweeps.plan import PlannedTrial, plan_tasks, trial_plan
from experiments.sweeps.report import compare
from experiments.sweeps.spec import SweepSpec, load_spec
from experiments.trials.record import TrialRecord
from experiments.trials.run import run_trial
from experiments.trials.spec import ResolvedTrial, resolve_trial
from promptlib.verbalizers import shown_answer

SPEC = """
name: known_effect
tasks: [{task}]
limit: {n}
sample_seed: {sample_seed}
fixed: {{demos: none}}
axes:
  register: [plain, technical]
comparisons: [[register=plain, register=technical]]
n_resamples: {n_resamples}
"""


class KnownEffectLM(InGivenOrder):
    """Correct with probability p[variant] per row; the variant is told by its prompt."""

    name = "sim/known-effect"
    mode = "completion"
    concurrency = 1

    def __init__(
        self,
        prompts: dict[str, tuple[str, str, str]],  # prompt -> (variant, row index, answer)
        p_correct: dict[str, float],
        labels: tuple[str, ...],
        seed: int,
    ) -> None:
        self.prompts = prompts
        self.p_correct = p_correct
        self.labels = labels
        self.seed = seed
        self.calls = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "seed": self.seed, "p": sorted(self.p_correct.items())}

    def _uniform(self, *parts: str) -> float:
        return ids.seed_uniform(self.seed, *parts)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.calls += 1
        variant, index, answer = self.prompts[prompt]
        if self._uniform(variant, index) < self.p_correct[variant]:
            return Completion(" " + answer)
        wrong = [label for label in self.labels if label != answer]
        pick = wrong[int(self._uniform("wrong", variant, index) * len(wrong))]
        return Completion(" " + pick)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("a simulated model answers by generation only")


@dataclass(frozen=True)
class SimulationResult:
    n_sims: int
    alpha: float
    effect: float
    rejections: int
    predicted_power: float  # mean over simulations of the MDE-implied power for `effect`
    mean_statistic: float
    n_rows: int

    @property
    def rate(self) -> float:
        return self.rejections / self.n_sims

    @property
    def mc_se(self) -> float:
        p = self.rate
        return math.sqrt(max(p * (1 - p), 1e-12) / self.n_sims)


def power_from_mde(effect: float, mde: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Power of a two-sided z-test for `effect`, given the MDE at `power` (same SE)."""
    from scipy.stats import norm

    se = mde / (norm.ppf(1 - alpha / 2) + norm.ppf(power))
    z = norm.ppf(1 - alpha / 2)
    return float(norm.cdf(abs(effect) / se - z) + norm.cdf(-abs(effect) / se - z))


def simulate(
    catalog: Any,
    *,
    n_sims: int,
    p_a: float,
    p_b: float,
    n_rows: int = 100,
    task: str = "cuad_audit_rights",
    alpha: float = 0.05,
    n_resamples: int = 1000,
    seed: int = 0,
    workdir: Path,
) -> SimulationResult:
    """Run `n_sims` two-variant sweeps (plain vs technical register) through the whole path."""

    rejections = 0
    powers: list[float] = []
    stats_seen: list[float] = []
    labels = catalog.task(task).spec.labels
    for sim in range(n_sims):
        path = workdir / f"known_effect_{sim}.yaml"
        path.write_text(
            SPEC.format(
                task=task, n=n_rows, sample_seed=seed * 100_003 + sim, n_resamples=n_resamples
            )
        )
        spec = load_spec(path)
        planned = plan_tasks(spec, catalog)
        plan = trial_plan(spec, planned, ("sim/known-effect",))
        probe = KnownEffectLM({}, {}, labels, 0)
        resolved = [resolve_trial(t.spec, catalog, probe) for t in plan]
        prompts = {
            rt.compiled.render(row): (t.variant.name, row["index"], row["answer"])
            for t, rt in zip(plan, resolved, strict=True)
            for row in rt.rows
        }
        p = {plan[0].variant.name: p_a, plan[1].variant.name: p_b}
        lm = KnownEffectLM(prompts, p, labels, seed * 1_000_003 + sim)
        outcomes = []
        for t, rt in zip(plan, resolved, strict=True):
            result = run_trial(rt, catalog, lm)
            outcomes.append(TrialRecord.from_result(result, variant=t.variant.name, run_id="-"))
        table, _ = compare(spec, outcomes, catalog)
        row = table[0]
        rejections += int(row.p_value is not None and row.p_value < alpha)
        assert row.mde_80 is not None and row.statistic is not None, row.status
        powers.append(power_from_mde(p_a - p_b, row.mde_80, alpha))
        stats_seen.append(row.statistic)
    return SimulationResult(
        n_sims=n_sims,
        alpha=alpha,
        effect=p_a - p_b,
        rejections=rejections,
        predicted_power=sum(powers) / len(powers),
        mean_statistic=sum(stats_seen) / len(stats_seen),
        n_rows=n_rows,
    )


# ---- k variants: drawn formats and verbalizers, best vs worst by the range test -------------

VARIANTS_SPEC = """
name: variant_null
tasks: [{task}]
limit: {n}
sample_seed: {sample_seed}
fixed: {{demos: {demos}}}
axes:
  {axis}: {levels}
comparisons: best_vs_worst
n_resamples: {n_resamples}
"""

Fault = Literal["error", "raise", "kill"]
"""An injected row failure: the provider's error as the row's state (`Completion.error`),
an exception out of the model, or an interrupt (Ctrl-C) mid-trial."""


_STD_NORMAL = statistics.NormalDist()


class InjectedFailure(RuntimeError):
    """An exception the simulated model raises on a row it was told to fail."""


@dataclass(frozen=True)
class ShownRow:
    """What the simulated model knows of one rendered prompt: its variant, its row, and the
    words the variant shows for the labels (the right one and the others)."""

    variant: str
    index: str
    right: str  # the row's official answer in the variant's shown words
    wrong: tuple[str, ...]  # the other shown labels
    official: str  # the official answer, as LegalBench writes it


class VariantLM(InGivenOrder):
    """Right with probability p[variant] in the label words its variant shows.

    Rows share a difficulty across variants (a Gaussian latent: variant j is right on row i
    when rho * z_i + sqrt(1 - rho^2) * e_ij < Phi^-1(p_j)), so variants are correlated as real
    prompt variants are, and each variant's accuracy is exactly p_j in expectation. A wrong
    reply is, with probability `invalid_rate`, a reply that names no shown label: the row's
    official answer when the variant shows other words (so a scorer that guessed it would
    gain), else "Unsure". `faults` (variant, row index) -> `Fault` fails chosen rows."""

    name = "sim/variants"
    mode = "completion"
    concurrency = 1

    def __init__(
        self,
        prompts: dict[str, ShownRow],
        p_correct: dict[str, float],
        seed: int,
        *,
        rho: float = 0.6,
        invalid_rate: float = 0.0,
        faults: dict[tuple[str, str], Fault] | None = None,
    ) -> None:
        self.prompts, self.p_correct, self.seed = prompts, p_correct, seed
        self.rho, self.invalid_rate = rho, invalid_rate
        self.faults = dict(faults or {})
        self.calls = 0
        self.invalid_sent = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "seed": self.seed, "p": sorted(self.p_correct.items())}

    def _normal(self, *parts: str) -> float:
        u = ids.seed_uniform(self.seed, *parts)
        return _STD_NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))

    def is_right(self, variant: str, index: str) -> bool:
        p = self.p_correct[variant]
        if p >= 1.0 or p <= 0.0:
            return p >= 1.0
        latent = self.rho * self._normal("row", index) + math.sqrt(1 - self.rho**2) * (
            self._normal("variant", variant, index)
        )
        return latent < _STD_NORMAL.inv_cdf(p)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.calls += 1
        row = self.prompts[prompt]
        fault = self.faults.get((row.variant, row.index))
        if fault == "error":
            return Completion(None, error="injected: the provider returned HTTP 500")
        if fault == "raise":
            raise InjectedFailure(f"injected failure on row {row.index} of {row.variant}")
        if fault == "kill":
            raise KeyboardInterrupt
        if self.is_right(row.variant, row.index):
            return Completion(" " + row.right)
        if ids.seed_uniform(self.seed, "invalid", row.variant, row.index) < self.invalid_rate:
            self.invalid_sent += 1
            shown = {w.strip().lower() for w in (row.right, *row.wrong)}
            official_shown = row.official.strip().lower() in shown
            return Completion(" Unsure" if official_shown else " " + row.official)
        u = ids.seed_uniform(self.seed, "wrong", row.variant, row.index)
        return Completion(" " + row.wrong[int(u * len(row.wrong))])

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("a simulated model answers by generation only")


@dataclass(frozen=True)
class VariantSetup:
    """One planned k-variant sweep: its spec, trials (resolved and rendered) and prompts."""

    spec: SweepSpec
    plan: list[PlannedTrial]
    resolved: list[ResolvedTrial]
    prompts: dict[str, ShownRow]

    @property
    def variants(self) -> list[str]:
        return [t.variant.name for t in self.plan]


def variant_setup(
    catalog: Any,
    *,
    task: str,
    n_rows: int,
    axis: str,
    levels: str,
    workdir: Path,
    sample_seed: int = 0,
    n_resamples: int = 1000,
    demos: str = "base",
) -> VariantSetup:
    """Spec -> plan -> resolve -> render for a best-vs-worst sweep over one axis (`levels`
    as YAML: ``[official, true_false, letters]`` or ``{draw: 4, seed: 0, with: [base]}``)."""
    path = workdir / f"variants_{task}_{sample_seed}.yaml"
    path.write_text(
        VARIANTS_SPEC.format(
            task=task, n=n_rows, sample_seed=sample_seed, demos=demos, axis=axis,
            levels=levels, n_resamples=n_resamples,
        )
    )  # fmt: skip
    spec = load_spec(path)
    planned = plan_tasks(spec, catalog)
    for pt in planned:
        if pt.skipped or pt.skipped_variants:
            raise ValueError(f"{task}: the simulation needs every variant to run: {pt}")
    plan = trial_plan(spec, planned, ("sim/variants",))
    probe = VariantLM({}, {}, 0)
    resolved = [resolve_trial(t.spec, catalog, probe) for t in plan]
    prompts: dict[str, ShownRow] = {}
    for t, rt in zip(plan, resolved, strict=True):
        shown = rt.compiled.answer_labels
        assert shown is not None, f"{task} has no label set"
        lmap = rt.compiled.label_map or tuple((x, x) for x in shown)
        for row in rt.rows:
            right = shown_answer(lmap, row["answer"], task)
            wrong = tuple(w for w in shown if w != right)
            prompt = rt.compiled.render(row)
            seen = prompts.get(prompt)
            if seen is None:
                prompts[prompt] = ShownRow(
                    t.variant.name, row["index"], right, wrong, row["answer"]
                )
            elif (seen.official, seen.right) != (row["answer"], right):
                # a repeated prompt (a text LegalBench repeats; `title` of Yes/No is the
                # official prompt) gets the first row's reply, as from a real model: only the
                # set accuracy if both rows have the same answer
                raise ValueError(
                    f"{task}: rows {seen.index} ({seen.variant}) and {row['index']} "
                    f"({t.variant.name}) render the same prompt with other answers; pick "
                    "another sample_seed"
                )
    return VariantSetup(spec, plan, resolved, prompts)


def run_variants(
    setup: VariantSetup, catalog: Any, lm: VariantLM
) -> tuple[list[TrialRecord], Comparison]:
    """Run every trial of `setup` with `lm` and compare them (best vs worst): the records and
    the comparison's row, as the sweep's report computes it."""
    outcomes = []
    for t, rt in zip(setup.plan, setup.resolved, strict=True):
        result = run_trial(rt, catalog, lm)
        outcomes.append(TrialRecord.from_result(result, variant=t.variant.name, run_id="-"))
    table, _ = compare(setup.spec, outcomes, catalog)
    (row,) = table
    return outcomes, row


@dataclass(frozen=True)
class VariantSimulation:
    """Rejection rate of the range test and each variant's score against its set accuracy."""

    n_sims: int
    alpha: float
    n_rows: int
    k: int
    p_correct: dict[str, float]
    rejections: int
    mean_score: dict[str, float]
    sd_score: dict[str, float]
    rows_used: tuple[int, ...]  # the comparison's `n`, as seen over the simulations
    invalid_rate: float  # share of rows scored invalid (not a shown label)

    @property
    def rate(self) -> float:
        return self.rejections / self.n_sims

    @property
    def mc_se(self) -> float:
        p = self.rate
        return math.sqrt(max(p * (1 - p), 1e-12) / self.n_sims)

    def score_errors(self) -> dict[str, tuple[float, float]]:
        """Per variant: mean score - set accuracy, and the Monte Carlo s.e. of that mean."""
        return {
            v: (self.mean_score[v] - p, self.sd_score[v] / math.sqrt(self.n_sims))
            for v, p in self.p_correct.items()
        }


def simulate_variants(
    catalog: Any,
    setup: VariantSetup,
    *,
    n_sims: int,
    p: float,
    effect: float = 0.0,
    invalid_rate: float = 0.0,
    alpha: float = 0.05,
    seed: int = 0,
) -> VariantSimulation:
    """`n_sims` runs of `setup` with fresh model seeds: every variant right with probability
    `p`, the first one `p + effect`; counts the range test's rejections at `alpha`."""
    names = setup.variants
    p_set = {v: (p + effect if j == 0 else p) for j, v in enumerate(names)}
    rejections, used, invalid, n_scored = 0, [], 0, 0
    scores: dict[str, list[float]] = {v: [] for v in names}
    for sim in range(n_sims):
        lm = VariantLM(setup.prompts, p_set, seed * 1_000_003 + sim, invalid_rate=invalid_rate)
        outcomes, row = run_variants(setup, catalog, lm)
        for o in outcomes:
            assert o.score is not None, f"{o.variant}: no score ({o.status})"
            scores[o.variant].append(o.score)
            invalid += sum(r.generation is not None and r.parsed is None for r in o.rows)
            n_scored += len(o.rows)
        rejections += int(row.p_value is not None and row.p_value < alpha)
        used.append(int(row.n or 0))
    return VariantSimulation(
        n_sims=n_sims,
        alpha=alpha,
        n_rows=len(setup.resolved[0].rows),
        k=len(names),
        p_correct=p_set,
        rejections=rejections,
        mean_score={v: statistics.fmean(s) for v, s in scores.items()},
        sd_score={v: statistics.stdev(s) if len(s) > 1 else 0.0 for v, s in scores.items()},
        rows_used=tuple(sorted(set(used))),
        invalid_rate=invalid / n_scored,
    )
