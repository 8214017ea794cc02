"""The sequential run loop: rows in batches on the arms still running, until each is decided.

For every (model, task) of a `design: sequential` sweep, the planned rows are put in a seeded
order stratified by class (`row_order`), cut at the budget (``max_rows``), and evaluated
``batch`` rows at a time on the arms still in contention, through the same runner, response
cache and scoring as a fixed trial (`run_trial` on a window of the trial's ordered rows).
After each batch a pair's confidence sequence (`PairedSequence`) or the task's successive
elimination (`Elimination`, for ``best_vs_worst`` and ``all_pairs``) is updated; a pair stops
when its sequence decides, the task's elimination when one arm is left, and both when the
budget runs out (undecided, with the interval reached).

The family level ``alpha`` is split evenly (Bonferroni) across the sweep's comparisons: each
listed pair per (model, task), or each (model, task)'s elimination.

Each arm ends as the trial on the prefix of its ordered rows it was evaluated on
(`ResolvedTrial.prefix`): the driver logs those like any trial. A killed sweep replays the
loop from the response cache (every answered row is a cache hit), so it resumes where it
stopped without sending an answered row again; a failed row stops its task's comparisons as
incomplete (the rerun retries it, like a fixed trial's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.analysis.clusters import task_clusters
from experiments.analysis.decision import for_sequential
from experiments.analysis.sequential import (
    GROUP_TEST,
    SEQUENCE,
    Elimination,
    NotSequential,
    PairedSequence,
    Planned,
    planned_looks,
    row_order,
)
from experiments.llm.types import Completion
from experiments.metrics import score
from experiments.sweeps.cost import Cost
from experiments.sweeps.design import SequentialDesign
from experiments.sweeps.plan import PlannedTrial
from experiments.sweeps.sequential_result import (
    EliminationOutcome,
    Population,
    SequentialComparison,
    eliminated,
)
from experiments.sweeps.spec import SpecError
from experiments.trials.record import Prediction, TrialStatus
from experiments.trials.run import run_trial
from experiments.trials.spec import LOGLIK, ResolvedTrial
from promptlib.tasks import Catalog


class MemoryCache:
    """A sweep-long response cache in memory, for a sequential sweep run without one
    (``--no-cache``): its trials are logged after the loop from the loop's answers, never
    by calling the model for those rows a second time."""

    def __init__(self) -> None:
        self._items: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        return self._items.get(key)

    def put(self, key: str, completion: Completion) -> None:
        if completion.error is None and completion.text is not None:  # as ResponseCache
            self._items[key] = completion


@dataclass
class Arm:
    """One variant of a (model, task) in the loop: its trial on the ordered budget rows and
    what has been evaluated of it so far."""

    name: str
    trial: PlannedTrial
    full: ResolvedTrial  # on the ordered rows, cut at the budget
    preds: list[Prediction] = field(default_factory=list)
    failed: str | None = None  # the first failure's one-line reason

    @property
    def correct(self) -> list[bool]:
        # an invalid reply (not a label) is wrong, as in a fixed trial's score
        return [bool(p.correct) for p in self.preds]

    def advance(self, upto: int, catalog: Catalog, lm: Any, cache: Any, cost: Cost) -> None:
        """Evaluate the rows up to `upto` (exclusive) not evaluated yet, in order."""
        start = len(self.preds)
        if upto <= start or self.failed:
            return
        result = run_trial(self.full.window(start, upto), catalog, lm, cache=cache)
        cost.add(
            result.model_calls, result.cache_hits, result.predictions, result.spent,
            counted=result.spec.scoring not in LOGLIK,
        )  # fmt: skip
        self.preds += result.predictions
        if not result.complete:
            self.failed = result.failure_reason()


@dataclass
class GroupOutcome:
    """One (model, task)'s sequential comparisons and the rows each arm ended on."""

    model: str
    task: str
    rows_per_arm: dict[str, int]
    comparisons: list[SequentialComparison]


def order_trials(
    design: SequentialDesign, resolved: Sequence[ResolvedTrial]
) -> list[ResolvedTrial]:
    """Each planned trial on its task's rows in the design's order (all of them: the
    sequences are over the planned rows; the budget only stops the loop early).

    The order depends on the rows' answers, their clusters (`task_clusters`: a cluster's
    rows are evaluated together, as one unit) and the seed only, so every arm of a task
    gets the same order (its rows stay paired) in every process.
    """
    clusters = task_clusters(resolved)
    out = []
    for rt in resolved:
        cid = clusters[rt.spec.task]
        order = row_order(
            [r["answer"] for r in rt.rows], design.seed, [r["index"] for r in rt.rows],
            [cid[r["index"]] for r in rt.rows],
        )  # fmt: skip
        rows = [rt.rows[i] for i in order]
        spec = dataclasses.replace(rt.spec, rows=tuple(r["index"] for r in rows))
        out.append(dataclasses.replace(rt, spec=spec, rows=rows))
    return out


def check_metrics(where: str, resolved: Sequence[ResolvedTrial]) -> None:
    """Refuse, before any call, a task whose metric has no valid sequence (F1): the error
    names the spec and the task and says to use the fixed design."""
    seen: set[str] = set()
    for rt in resolved:
        if rt.spec.task in seen:
            continue
        seen.add(rt.spec.task)
        try:
            PairedSequence(rt.metric, [r["answer"] for r in rt.rows])
        except NotSequential as e:
            raise SpecError(
                f"{where}: task {rt.spec.task!r} ({rt.metric}): {e} (design: fixed, or drop "
                "the task from this sequential spec)"
            ) from e


def n_comparisons(spec_comparisons: Any, groups: Sequence[Sequence[str]]) -> int:
    """How many comparisons the family level is split over: the listed pairs each group
    runs, or one elimination per group."""
    if isinstance(spec_comparisons, str):
        return sum(len(g) >= 2 for g in groups)
    return sum(sum(a in g and b in g for a, b in spec_comparisons) for g in groups)


@dataclass
class Group:
    """One (model, task)'s loop: its arms, the planned rows' answers in order, the budget,
    and where the rows are evaluated (the sweep's runner, model and cache)."""

    design: SequentialDesign
    arms: dict[str, Arm]
    alpha: float  # this comparison's share of the family level
    catalog: Catalog
    lm: Any
    cache: Any
    cost: Cost
    clusters: dict[str, int] = field(default_factory=dict)  # row index -> cluster
    progress: Callable[[str], None] | None = None

    @property
    def cluster_ids(self) -> list[int] | None:
        """The planned rows' clusters, in the design's order (None: rows are their own)."""
        rows = next(iter(self.arms.values())).full.rows
        if not self.clusters:
            return None
        return [self.clusters[r["index"]] for r in rows]

    @property
    def plan(self) -> Planned | None:
        """The group-sequential design's planned looks, or None (the anytime sequence)."""
        if self.design.method != "group":
            return None
        return Planned(planned_looks(self.design.batch, self.cap), seed=self.design.seed)

    @property
    def model(self) -> str:
        """The model this group's arms run on."""
        return next(iter(self.arms.values())).trial.model

    @property
    def task(self) -> str:
        """The task this group compares on."""
        return next(iter(self.arms.values())).trial.planned.task

    @property
    def rows_per_arm(self) -> dict[str, int]:
        """The rows each arm has been evaluated on so far."""
        return {name: len(arm.preds) for name, arm in self.arms.items()}

    def clustering(self, n: int) -> dict[str, Any]:
        """The report's words on the units: clusters among the first `n` rows."""
        ids = self.cluster_ids
        n_clusters = len(set(ids[:n])) if ids is not None else n
        return {
            "clustered_by": "prompt" if ids is not None else "rows",
            "n_clusters": n_clusters,
        }

    @property
    def answers(self) -> list[str]:
        """The planned rows' answers, in the design's order (the sequences' population)."""
        return [r["answer"] for r in next(iter(self.arms.values())).full.rows]

    @property
    def population(self) -> Population:
        """The planned rows in the design's order, for recomputing the looks (`looks`)."""
        rows = next(iter(self.arms.values())).full.rows
        ids = self.cluster_ids
        return Population(
            order=tuple(r["index"] for r in rows),
            answers=tuple(r["answer"] for r in rows),
            clusters=tuple(ids) if ids is not None else None,
            seed=self.design.seed,
        )

    @property
    def metric(self) -> str:
        return next(iter(self.arms.values())).full.metric

    @property
    def cap(self) -> int:
        """The rows the loop may reach: the budget, at most every planned row."""
        n = len(self.answers)
        return min(self.design.max_rows or n, n)

    def advance(self, names: Sequence[str], upto: int) -> str | None:
        """Evaluate `names` up to row `upto`; the first failure's reason, if any."""
        for name in names:
            self.arms[name].advance(upto, self.catalog, self.lm, self.cache, self.cost)
        failed = [self.arms[x].failed for x in names if self.arms[x].failed]
        return f"incomplete: {failed[0]}" if failed else None

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)


def run_group(group: Group, comparisons: Any) -> GroupOutcome:
    """Run one (model, task)'s sequential comparisons to their stop (see the module)."""
    if isinstance(comparisons, str):
        rows = _eliminate(group, comparisons)
    else:
        pairs = [(a, b) for a, b in comparisons if a in group.arms and b in group.arms]
        rows = _pairs(group, pairs)
    return GroupOutcome(group.model, group.task, rows_per_arm=group.rows_per_arm, comparisons=rows)


def _pairs(group: Group, pairs: list[tuple[str, str]]) -> list[SequentialComparison]:
    """Listed pairs: a paired confidence sequence each, looked at after every batch.

    The population is every planned row (the interval is over them all); the budget only
    ends the looks early."""
    design, arms, cap = group.design, group.arms, group.cap
    seqs = {
        p: PairedSequence(
            group.metric,
            group.answers,
            alpha=group.alpha,
            delta=design.delta,
            clusters=group.cluster_ids,
            plan=group.plan,
            budget=cap,
        )
        for p in pairs
    }
    stopped: dict[tuple[str, str], str] = {}  # pair -> why it stopped without a decision
    n, running = 0, list(pairs)
    while running and n < cap:
        hi = min(n + design.batch, cap)
        group.advance(list(dict.fromkeys(x for p in running for x in p)), hi)
        for p in list(running):
            failed = [arms[x].failed for x in p if arms[x].failed]
            if failed:  # this pair stops; pairs of arms that answered go on
                stopped[p] = f"incomplete: {failed[0]}"
                running.remove(p)
                continue
            look = seqs[p].update(arms[p[0]].correct[n:hi], arms[p[1]].correct[n:hi])
            if look.decision != "continue":
                running.remove(p)
        n = hi
        group.say(f"{n} of {cap} rows, {len(running)} of {len(pairs)} comparisons running")
    return [_pair_row(group, p, seqs[p], stopped.get(p)) for p in pairs]


def _pair_row(
    group: Group, pair: tuple[str, str], seq: PairedSequence, why: str | None
) -> SequentialComparison:
    """A pair's row of the report: its looks, its decision and the interval reached."""
    a, b = pair
    design = group.design
    last = seq.looks[-1] if seq.looks else None
    decision = last.decision if last is not None else "undecided"
    if why is None and decision == "continue":
        decision = "undecided"  # the budget ran out before the planned rows did
    n = last.n_rows if last is not None else 0
    return SequentialComparison(
        model=group.model,
        task=group.task,
        a=a,
        b=b,
        comparison="pair",
        method=design.method,
        sequence=_sequence(design),
        metric=group.metric,
        alpha=group.alpha,
        family_alpha=design.alpha,
        delta=design.delta,
        batch=design.batch,
        budget=group.cap,
        planned=seq.n_planned,
        looks=tuple(look.n_rows for look in seq.looks),
        n=n,
        decision=None if why else decision,
        estimate=last.estimate if last is not None else None,
        ci_low=last.lower if last is not None else None,
        ci_high=last.upper if last is not None else None,
        **group.clustering(n),
        score_a=_score(group.arms[a], n),
        score_b=_score(group.arms[b], n),
        status=why or _status(decision, n, group.cap),
        rows_per_arm=group.rows_per_arm,
        population=group.population,
    )


def _sequence(design: SequentialDesign) -> str:
    """The sequence's or the test's name, as the report states it."""
    return GROUP_TEST if design.method == "group" else SEQUENCE


def _eliminate(group: Group, keyword: str) -> list[SequentialComparison]:
    """best_vs_worst / all_pairs: successive elimination, rows only to the arms in contention."""
    arms, cap = group.arms, group.cap
    if len(arms) < 2:
        return []
    el = Elimination(
        group.metric, group.answers, list(arms), alpha=group.alpha,
        clusters=group.cluster_ids, plan=group.plan, budget=cap,
    )  # fmt: skip
    n, looks = 0, []
    why: str | None = None
    while len(el.active) > 1 and n < cap:
        hi = min(n + group.design.batch, cap)
        active = list(el.active)
        why = group.advance(active, hi)
        if why:
            break
        el.update({name: arms[name].correct[n:hi] for name in active})
        n = hi
        looks.append(n)
        group.say(f"{n} of {cap} rows, {len(el.active)} of {len(arms)} variants in contention")
    return [_elimination_row(group, keyword, el, looks, n, why)]


def _elimination_row(
    group: Group, keyword: str, el: Elimination, looks: list[int], n: int, why: str | None
) -> SequentialComparison:
    """The elimination's row: best vs worst at the family's share of alpha, and each
    eliminated variant with the rows it had and the variant that beat it."""
    arms = group.arms
    verdict = dict(el.verdict()) if looks else {}
    decision = verdict.get("decision", "undecided")
    best, worst = verdict.get("best"), verdict.get("worst")
    rows = int(verdict.get("n_rows", n))
    return SequentialComparison(
        model=group.model,
        task=group.task,
        a=best,
        b=worst,
        comparison=keyword,
        method=group.design.method,
        sequence=_sequence(group.design),
        metric=group.metric,
        alpha=group.alpha,
        family_alpha=group.design.alpha,
        delta=None,
        batch=group.design.batch,
        budget=group.cap,
        planned=len(group.answers),
        looks=tuple(looks),
        n=rows,
        decision=None if why else decision,
        estimate=verdict.get("estimate"),
        ci_low=verdict.get("lower"),
        ci_high=verdict.get("upper"),
        **group.clustering(rows),
        # both on the rows the best-vs-worst interval is over (`n`), as the table says: the
        # best arm may have gone on after the worst was eliminated
        score_a=_score(arms[best], rows) if best in arms else None,
        score_b=_score(arms[worst], rows) if worst in arms else None,
        elimination=EliminationOutcome(
            k=len(arms),
            eliminated=eliminated(el.eliminated),
            # "best" holds for best vs worst; A is the best arm only when it alone is left
            best_identified=verdict.get("best_identified", False),
            in_contention=tuple(verdict.get("in_contention", list(el.active))),
        ),
        rows_per_arm=group.rows_per_arm,
        status=why or _status(str(decision), n, group.cap),
        population=group.population,
    )


def _score(arm: Arm, n: int) -> float | None:
    """The arm's official score on its first `n` rows (None without rows or with a failure)."""
    preds = arm.preds[:n]
    if not preds or any(p.error is not None for p in preds):
        return None
    spec = arm.full.spec
    gens = [p.scored_text or "" for p in preds]
    answers = [p.answer for p in preds]
    return score(spec.task, gens, answers, spec.definition, metric=arm.full.metric)


def _status(decision: str, n: int, budget: int) -> str:
    if decision == "undecided":
        return (
            f"undecided after {budget} rows (the budget or the planned rows ran out; the "
            "interval reached is shown)"
        )
    return f"decided ({decision}) after {n} of {budget} rows"


@dataclass
class SequentialRun:
    """A sequential sweep's loop, done: each arm's trial on the rows it ended on, the
    comparisons, and what the loop cost."""

    plan: list[PlannedTrial]
    resolved: list[ResolvedTrial]
    groups: list[GroupOutcome]
    cost: Cost
    grid_calls: int  # every planned variant on every planned row (the fixed design's calls)
    # the arms a failed row stopped in the loop, as the sweep's incomplete trials: the
    # logging pass may answer that row, but the comparisons stopped without a verdict
    failed: list[dict[str, Any]] = field(default_factory=list)


def run_sequential(
    design: SequentialDesign,
    comparisons: Any,
    plan: Sequence[PlannedTrial],
    resolved: Sequence[ResolvedTrial],
    *,
    lms: dict[str, Any],
    catalog: Catalog,
    cache: Any,
    progress: Callable[[int, int, str], None] | None = None,
) -> SequentialRun:
    """Every (model, task)'s loop (`run_group`), then each arm's trial on its prefix.

    `resolved` are the planned trials on their ordered, budget-cut rows (`order_trials`). A
    variant no listed pair names is not evaluated (it decides nothing); with
    ``best_vs_worst``/``all_pairs`` every variant is an arm.
    """
    groups: dict[tuple[str, str], dict[str, Arm]] = {}
    for t, rt in zip(plan, resolved, strict=True):
        named = isinstance(comparisons, str) or any(t.variant.name in p for p in comparisons)
        if named:
            arms = groups.setdefault((t.model, t.planned.task), {})
            arms[t.variant.name] = Arm(t.variant.name, t, rt)
    alpha = design.alpha / max(1, n_comparisons(comparisons, [list(g) for g in groups.values()]))
    clusters = task_clusters(resolved)
    cost, outcomes = Cost(), []
    for i, ((model, task), arms) in enumerate(groups.items()):
        say = _progress(progress, i, len(groups), f"{task} · {model}")
        group = Group(design, arms, alpha, catalog, lms[model], cache, cost, clusters[task], say)
        outcomes.append(run_group(group, comparisons))
    final_plan, final_resolved = [], []
    for arms in groups.values():
        for arm in arms.values():
            if arm.preds:
                final_plan.append(arm.trial)
                final_resolved.append(arm.full.prefix(len(arm.preds)))
    grid = sum(len(t.planned.rows) for t in plan)
    failed = [_failed(arm) for arms in groups.values() for arm in arms.values() if arm.failed]
    return SequentialRun(final_plan, final_resolved, outcomes, cost, grid, failed)


def _failed(arm: Arm) -> dict[str, Any]:
    """An arm a failed row stopped, as an incomplete trial of the sweep's report."""
    errors = sum(p.error is not None for p in arm.preds)
    return {
        "task": arm.trial.planned.task, "model": arm.trial.model, "variant": arm.name,
        "trial_id": arm.full.prefix(len(arm.preds)).id,
        "status": str(TrialStatus.of(len(arm.preds), errors)), "n_errors": errors,
        "n": len(arm.preds),
    }  # fmt: skip


def _progress(
    progress: Callable[[int, int, str], None] | None, i: int, n: int, where: str
) -> Callable[[str], None] | None:
    """A group's progress line, on the sweep's progress bar."""
    if progress is None:
        return None
    report = progress

    def say(text: str) -> None:
        report(i, n, f"{where} · {text}")

    return say


def sequential_rows(run: SequentialRun) -> list[SequentialComparison]:
    """The report's rows: each (model, task)'s comparisons, with the rows each arm used and
    the recommendation its decision makes (`experiments.analysis.decision`)."""
    rows = [
        dataclasses.replace(row, rows_per_arm=g.rows_per_arm)
        for g in run.groups
        for row in g.comparisons
    ]
    return [dataclasses.replace(row, recommendation=for_sequential(row.to_dict())) for row in rows]


def sequential_params(design: SequentialDesign) -> dict[str, Any]:
    """The parent run's params of a sequential sweep (a fixed sweep has none of these)."""
    return {
        "design": "sequential",
        "sequence": _sequence(design),
        **{f"sequential.{k}": v for k, v in design.to_dict().items()},
    }
