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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.llm.types import Completion, Decoding
from experiments.sweeps.plan import plan_tasks, trial_plan
from experiments.sweeps.report import compare
from experiments.sweeps.spec import load_spec
from experiments.trials.record import TrialRecord
from experiments.trials.run import run_trial
from experiments.trials.spec import resolve_trial

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


class KnownEffectLM:
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
        rejections += int(row["p_value"] is not None and row["p_value"] < alpha)
        powers.append(power_from_mde(p_a - p_b, row["mde_80"], alpha))
        stats_seen.append(row["statistic"])
    return SimulationResult(
        n_sims=n_sims,
        alpha=alpha,
        effect=p_a - p_b,
        rejections=rejections,
        predicted_power=sum(powers) / len(powers),
        mean_statistic=sum(stats_seen) / len(stats_seen),
        n_rows=n_rows,
    )
