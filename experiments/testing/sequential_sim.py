"""Sequential sweeps measured through the real path against a model of set accuracies.

`SetAccuracy` answers a rendered prompt correctly with a set probability: each row has a
difficulty shared by every variant (``0.5 + 0.45 u``, u uniform per row and seed, as
`benchmarks/stats_validity.py`'s exchangeable variants), and a variant is right on a row with
that probability plus its own effect, independently across variants. It is the stub server's
`reply_fn` (calls counted at the stub) or, in-process, `SetAccuracyLM` (the same answers,
without HTTP, for the many simulations of `benchmarks/sequential_path.py`).

`simulate` runs one sequential sweep's loop per simulation through the product's path: the
YAML spec, planning (paired rows), the design's row order, rendering, the runner and its
LegalBench scoring, and the sequence or the elimination (`experiments.sweeps.sequential`).
Only MLflow logging is left out (it adds nothing to the numbers and a second per run).
`task_dir` writes a LegalBench-layout copy of a binary task with a set class balance
(80/20 for the balanced-accuracy size check), one row per distinct text.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.llm.types import Completion, Decoding, InGivenOrder
from experiments.sweeps.plan import PlannedTrial, plan_tasks, trial_plan
from experiments.sweeps.sequential import order_trials, run_sequential
from experiments.sweeps.spec import SweepSpec, load_spec
from experiments.trials.spec import ResolvedTrial, resolve_trial
from promptlib.tasks import Catalog

MODEL = "sim/set-accuracy"


class SetAccuracy:
    """Replies by prompt: right with the row's shared difficulty plus the variant's effect."""

    def __init__(
        self,
        prompts: dict[str, tuple[str, str, str]],  # prompt -> (variant, row index, answer)
        effects: dict[str, float],  # variant -> added probability of a right answer
        labels: Sequence[str],
        seed: int,
    ) -> None:
        self.prompts = prompts
        self.effects = effects
        self.labels = tuple(labels)
        self.seed = seed
        self.calls = 0

    def reply(self, prompt: str) -> str:
        """The stub server's `reply_fn`: a label, right or wrong as the row and variant draw."""
        self.calls += 1
        variant, index, answer = self.prompts[prompt]
        p = 0.5 + 0.45 * ids.seed_uniform(self.seed, "difficulty", index)
        p = min(1.0, p + self.effects.get(variant, 0.0))
        if ids.seed_uniform(self.seed, variant, index) < p:
            return answer
        wrong = [label for label in self.labels if label != answer]
        return wrong[int(ids.seed_uniform(self.seed, "wrong", variant, index) * len(wrong))]


class SetAccuracyLM(InGivenOrder):
    """`SetAccuracy` as an in-process `LM` (no HTTP): the same answers, counted."""

    name = MODEL
    mode = "completion"
    concurrency = 1

    def __init__(self, model: SetAccuracy) -> None:
        self.model = model

    @property
    def calls(self) -> int:
        return self.model.calls

    def cache_identity(self) -> dict[str, Any]:
        m = self.model
        return {"model": self.name, "seed": m.seed, "effects": sorted(m.effects.items())}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        return Completion(" " + self.model.reply(prompt))

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise NotImplementedError("the simulated model answers by generation only")


def task_dir(dst: Path, source: Path, task: str, n: int, minority: float, seed: int = 0) -> Path:
    """A LegalBench-layout folder under `dst` holding `task` with `n` test rows of distinct
    texts whose answers are ``Yes`` on a `minority` share (the texts are the task's own; the
    simulated model reads only the answers). Returns the folder to point a `Catalog` at."""
    import numpy as np

    src = source / "tasks" / task
    out = dst / "tasks" / task
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    with (src / "test.tsv").open(newline="") as f:
        read = list(csv.DictReader(f, delimiter="\t"))
    # one row per text: a repeated text is the same prompt, answered once (a cache hit), so
    # a simulation's rows would not be independent draws
    rows = list({r["text"]: r for r in reversed(read)}.values())[::-1]
    if len(rows) < n:
        raise ValueError(f"{task} has {len(rows)} test rows of distinct texts, fewer than {n}")
    rows = rows[:n]
    yes = set(np.random.default_rng(seed).permutation(n)[: round(n * minority)].tolist())
    for i, row in enumerate(rows):
        row["answer"] = "Yes" if i in yes else "No"
    with (out / "test.tsv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    return dst


@dataclass(frozen=True)
class Prepared:
    """A spec planned once: its trials on the ordered rows and every prompt's (variant,
    row, answer), so each simulation only draws new answers."""

    spec: SweepSpec
    plan: list[PlannedTrial]
    resolved: list[ResolvedTrial]
    prompts: dict[str, tuple[str, str, str]]
    labels: tuple[str, ...]


def prepare(spec_path: Path, catalog: Catalog) -> Prepared:
    """Plan a sequential spec for `MODEL` and render every prompt it can send."""
    spec = load_spec(spec_path)
    assert spec.sequential is not None, "a sequential spec"
    planned = plan_tasks(spec, catalog)
    plan = trial_plan(spec, planned, (MODEL,))
    probe = SetAccuracyLM(SetAccuracy({}, {}, (), 0))
    resolved = order_trials(spec.sequential, [resolve_trial(t.spec, catalog, probe) for t in plan])
    prompts = {
        rt.compiled.render(row): (t.variant.name, row["index"], row["answer"])
        for t, rt in zip(plan, resolved, strict=True)
        for row in rt.rows
    }
    labels = tuple(catalog.task(plan[0].planned.task).spec.labels or ())
    return Prepared(spec, plan, resolved, prompts, labels)


def simulate(
    prepared: Prepared, catalog: Catalog, effects: dict[str, float], seed: int
) -> dict[str, Any]:
    """One simulation: the sequential loop of `prepared` against a fresh draw of answers.

    Returns the first comparison's row (decision, rows at the stop, interval, eliminated
    arms) and the calls the model received, beside the full grid's."""
    model = SetAccuracy(prepared.prompts, effects, prepared.labels, seed)
    lm = SetAccuracyLM(model)
    design = prepared.spec.sequential
    assert design is not None
    run = run_sequential(
        design, prepared.spec.comparisons, prepared.plan, prepared.resolved,
        lms={MODEL: lm}, catalog=catalog, cache=None,
    )  # fmt: skip
    row = run.groups[0].comparisons[0]
    return {**row.to_dict(), "calls": model.calls, "grid_calls": run.grid_calls}
