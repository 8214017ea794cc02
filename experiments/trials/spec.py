"""What a trial is: its spec, bound to the data and the model, and the trial id.

A `TrialSpec` says what to run (task, variant, model, split, limit, seed, scoring, metric
definition). `resolve_trial` binds it to the data and the model without calling it: the
variant with its drawn demonstration rows, the evaluated rows, the model's identity (name,
api_base, mode) and every decoding parameter. The trial id is the sha256 of all of that plus
a fingerprint of the evaluated rows' content, so anything that can change an answer gives a
new id, and resuming never reuses a result that no longer matches the request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments import ids
from experiments.llm.types import LM, Decoding, LoglikNorm, Mode, Scoring
from experiments.metrics import Definition as Definition  # re-exported: its home is metrics
from experiments.metrics import (
    is_rule_conclusion,
    rule_conclusion_metric,
    scorable_task_metric,
    task_metric,
)
from promptlib.conclusions import PARSER_VERSION
from promptlib.errors import WorkbenchError
from promptlib.gold import check_gold_not_shown
from promptlib.leakage import evaluation_rows
from promptlib.render import CompiledPrompt, compile_prompt
from promptlib.tasks import Catalog, TaskSpec
from promptlib.variants import APPLICATION, PromptVariant

# Log-likelihood scorings and how each compares the labels' summed log-probabilities (one
# model pass computes the sums; the criterion is part of the trial id and the cache key).
# loglik-norm divides by the label's UTF-8 bytes, like lm-evaluation-harness's acc_norm.
LOGLIK: dict[str, LoglikNorm] = {"loglik": "sum", "loglik-norm": "per_byte"}
Progress = Callable[[int, int], None]
# The metric of a task LegalBench grades by hand (rule_qa): generations, no score.
MANUAL = "manual"

# Generation budgets, following the paper: short for classification, 150 tokens for
# rule_qa (answered in prose, graded by hand).
_LONG_FORM = {"rule_qa": 150}
# The paper's rule-application answers (instruction=application): 150 generated tokens, 300
# for diversity_jurisdiction_6 (the workbench's diversity_6), temperature 0, no newline stop.
APPLICATION_TOKENS = 150
_APPLICATION_LONGER = {"diversity_6": 300}


def application_decoding(spec: TaskSpec, mode: Mode) -> Decoding:
    """The paper's decoding of an explanation: 150 tokens (300 for diversity_6), no stop."""
    budget = _APPLICATION_LONGER.get(spec.name, APPLICATION_TOKENS)
    return Decoding(max_tokens=budget, stop=(), mode=mode)


def decoding_for(spec: TaskSpec, mode: Mode) -> Decoding:
    """Temperature 0; classification and extraction stop at the first newline.

    A user's extraction or generation task gets room for its longest answer (64 tokens cut
    a longer reply, which then matched no answer on every such row, whatever the model)."""
    if spec.name in _LONG_FORM:
        return Decoding(max_tokens=_LONG_FORM[spec.name], stop=(), mode=mode)
    if spec.is_classification:
        longest = max((len(x) for x in spec.labels or ()), default=8)
        return Decoding(max_tokens=max(8, longest // 2 + 8), stop=("\n",), mode=mode)
    if spec.longest_answer is not None:  # a user task's (`workbench task new`)
        return Decoding(max_tokens=max(64, spec.longest_answer // 2 + 8), stop=("\n",), mode=mode)
    return Decoding(max_tokens=64, stop=("\n",), mode=mode)


def trial_decoding(spec: TaskSpec, mode: Mode, compiled: CompiledPrompt) -> Decoding:
    """`decoding_for`, with a budget that also fits the longest label a verbalizer shows (a
    label shown as a longer word is never cut; without a verbalizer it is `decoding_for`)."""
    if compiled.variant.instruction == APPLICATION:
        return application_decoding(spec, mode)
    decoding = decoding_for(spec, mode)
    if compiled.label_map is None or not spec.is_classification or spec.name in _LONG_FORM:
        return decoding
    longest = max(len(shown) for _, shown in compiled.label_map)
    budget = max(decoding.max_tokens, longest // 2 + 8)
    return dataclasses.replace(decoding, max_tokens=budget)


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """What to run. Its trial id needs the data and the model: see `resolve_trial`."""

    task: str
    variant: PromptVariant
    model: str
    split: str = "test"
    limit: int | None = None
    seed: int = 0
    scoring: Scoring = "generate"
    definition: Definition = "code"
    rows: tuple[str, ...] | None = None  # explicit row indices (sweeps pair variants on these)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise WorkbenchError(f"limit must be at least 1, not {self.limit}")
        if self.seed < 0:
            raise WorkbenchError(f"seed must be an integer >= 0, not {self.seed}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["variant"] = self.variant.to_dict()
        d["rows"] = None if self.rows is None else list(self.rows)
        return d


def rows_fingerprint(rows: Sequence[dict[str, str]]) -> str:
    """sha256 of the evaluated rows' whole content (every column), in evaluation order."""
    return ids.rows_fingerprint(rows)


@dataclass(frozen=True)
class ResolvedTrial:
    """A `TrialSpec` bound to the data and the model: everything that decides the answers."""

    spec: TrialSpec
    compiled: CompiledPrompt
    rows: list[dict[str, str]]
    excluded: list[str]
    metric: str
    lm_identity: dict[str, Any]
    decoding: dict[str, Any]
    labels: tuple[str, ...] | None = None  # the label set, when the splits alone lack some

    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = {
            "spec": {**self.spec.to_dict(), "variant": self.compiled.variant.to_dict()},
            "lm": self.lm_identity,
            "decoding": self.decoding,
            "metric": self.metric,
            # the prompt as shown (instruction, demonstration texts, query template), so an
            # edited prompt file or demonstration row gives a new trial too
            "template": ids.text_sha256(self.compiled.template()),
            "rows": rows_fingerprint(self.rows),
        }
        # Generations are parsed against the label set, which the keys above do not always
        # pin: labels stated by the task but absent from its rows (a MAUD task's option
        # letters) arrived after trials were run on the rows' labels alone, and parse the
        # same generations otherwise. Only then is the set part of the id, so every other
        # trial keeps the id it had.
        if self.labels is not None:
            identity["labels"] = list(self.labels)
        # an explanation's score depends on how its conclusion is parsed (application
        # trials only: every other trial keeps the id it had)
        if is_rule_conclusion(self.metric):
            identity["conclusion_parser"] = PARSER_VERSION
        return identity

    @property
    def id(self) -> str:
        return ids.trial_id(self.identity())

    def prefix(self, n: int) -> ResolvedTrial:
        """This trial on its first `n` rows, in its order: the trial `resolve_trial` makes of
        the same spec with ``rows`` those `n` row ids (a new row set, so a new trial id).

        A trial grows by prefixes (issue 22): a prefix is complete for its rows, and the
        longer one reuses every cached answer of the shorter and adds the rest.
        """
        return self.window(0, n)

    def window(self, start: int, stop: int) -> ResolvedTrial:
        """This trial on its rows ``start:stop`` (a batch of a sequential design), resolved
        as `resolve_trial` would resolve the same spec with those row ids."""
        if not 0 <= start < stop <= len(self.rows):
            raise WorkbenchError(
                f"task {self.spec.task!r}: rows {start}:{stop} of a trial of "
                f"{len(self.rows)} rows; ask for a non-empty range within 0:{len(self.rows)}"
            )
        rows = self.rows[start:stop]
        spec = dataclasses.replace(self.spec, rows=tuple(r["index"] for r in rows))
        return dataclasses.replace(self, spec=spec, rows=rows)


def prompt_hash(prompt: str) -> str:
    """A prediction's prompt hash: rows with equal hashes got the same prompt, so they form
    one cluster for the statistics (`experiments.analysis.clusters`)."""
    return ids.prompt_hash(prompt)


def select_rows(rows: list[dict[str, str]], limit: int | None, seed: int) -> list[dict[str, str]]:
    """A seeded random subset of `limit` rows, kept in file order (prefix reuse stays high)."""
    if limit is None or limit >= len(rows):
        return rows
    import numpy as np

    picks = sorted(np.random.default_rng(seed).choice(len(rows), size=limit, replace=False))
    return [rows[int(i)] for i in picks]


def _refuse_extended_labels(task: str, labels: Sequence[str]) -> None:
    """Summed log-likelihood never picks a label that extends another by a mark or a word
    ('No, but' after 'No'): its sum is the shorter label's plus the log-probabilities of the
    rest, all negative. Refused rather than run: that label's class would score recall 0
    whatever the prompt (none of LegalBench's label sets has such a pair; a user's may)."""
    for short in labels:
        for long in labels:
            if long != short and long.startswith(short) and not long[len(short)].isalnum():
                raise WorkbenchError(
                    f"task {task!r}: label {long!r} starts with label {short!r}, so --scoring "
                    f"loglik (summed log-probabilities) never chooses {long!r}: its sum adds "
                    "only negative terms to the other's; use --scoring loglik-norm (per byte) "
                    "or generate, or rename one of the labels"
                )


def _application_metric(spec: TrialSpec, task: TaskSpec, metric: str) -> str:
    """An application trial's metric: the official one on the explanations' conclusions."""
    if spec.scoring != "generate":
        raise WorkbenchError(
            f"task {spec.task!r}: instruction=application asks for an explanation, which is "
            f"generated; --scoring {spec.scoring} scores a label's likelihood and cannot "
            "score one: use --scoring generate"
        )
    if not task.labels:
        raise WorkbenchError(
            f"task {spec.task!r}: instruction=application is scored on the conclusion its "
            "explanation reaches among the task's labels, and the task has none"
        )
    return rule_conclusion_metric(metric)


def resolve_trial(
    spec: TrialSpec, catalog: Catalog, lm: LM, *, hand_graded: bool = False
) -> ResolvedTrial:
    """Bind a spec to the data and the model (no model call): the trial's full identity.

    A query template whose slots show an evaluated row's own gold answer is refused here
    (`promptlib.gold`), so no trial is run that a model could pass by copying.

    A task LegalBench grades by hand (rule_qa) fails here, early, unless `hand_graded`: then
    its metric is `MANUAL` and `run_trial` records its generations with no score, for
    `experiments.trials.grading` to export to graders.
    """
    task = catalog.task(spec.task)  # cheap: its files are read when used
    if hand_graded and task_metric(task, spec.definition) == MANUAL:
        metric = MANUAL
        if spec.scoring != "generate":
            raise WorkbenchError(
                f"task {spec.task!r} is answered in prose and graded by hand; log-likelihood "
                "scoring needs a label set: use --scoring generate"
            )
    else:
        metric = scorable_task_metric(task, spec.definition)
    if spec.variant.instruction == APPLICATION:
        metric = _application_metric(spec, task.spec, metric)
    compiled = compile_prompt(spec.variant, task, spec.split)
    rows, excluded = evaluation_rows(compiled.variant, task, spec.split)
    if spec.rows is not None:
        allowed = {r["index"]: r for r in rows}  # ids are unique: read_tsv refuses repeats
        seen: set[str] = set()
        repeated: set[str] = set()
        for i in spec.rows:
            (repeated if i in seen else seen).add(i)
        if repeated:  # a row asked for twice would be evaluated, and counted, twice
            twice = sorted(repeated)
            raise WorkbenchError(
                f"task {spec.task!r}: rows {', '.join(twice[:5])} are asked for more than once "
                f"({len(twice)} repeated); name each row once"
            )
        leaked = [i for i in spec.rows if i not in allowed]
        if leaked:
            raise WorkbenchError(
                f"task {spec.task!r}: rows {', '.join(leaked[:5])} cannot be evaluated with "
                f"variant {spec.variant.label} (they are its demonstrations or do not exist)"
            )
        rows = [allowed[i] for i in spec.rows]
    else:
        rows = select_rows(rows, spec.limit, spec.seed)
    if not rows and metric == MANUAL:
        raise WorkbenchError(
            f"task {spec.task!r}: no {spec.split} rows to evaluate (its {spec.split}.tsv is "
            "empty or missing); use the split that holds the questions (LegalBench's rule_qa: "
            "test)"
        )
    if not rows:
        raise WorkbenchError(f"task {spec.task!r}: no {spec.split} rows left to evaluate")
    # before any call, for run, sweep and optimize alike: no slot shows a row's own answer
    data = str(task.files.split_path(spec.split))
    check_gold_not_shown(task.name, compiled.query, compiled.source, rows, data)
    if spec.scoring in LOGLIK:
        labels = task.spec.labels
        if not labels:
            raise WorkbenchError(
                f"log-likelihood scoring needs a label set; task {task.name!r} is "
                f"{task.spec.task_type}: use --scoring generate"
            )
        # the labels as shown (a verbalizer's words): what the model's sums are taken over
        shown = compiled.answer_labels or labels
        if LOGLIK[spec.scoring] == "sum":
            _refuse_extended_labels(task.name, shown)
        # a served model's server (and the alignment check its sums pass) and a local
        # model's weights are part of its identity
        lm_identity = lm.loglik_identity()
        decoding: dict[str, Any] = {
            "loglik": LOGLIK[spec.scoring],
            "continuations": [compiled.answer_join + label for label in shown],
        }
    else:
        lm_identity = dict(lm.cache_identity())
        decoding = trial_decoding(task.spec, getattr(lm, "mode", "chat"), compiled).to_dict()
    stated = task.spec.labels if task.spec.stated_only else None
    return ResolvedTrial(spec, compiled, rows, excluded, metric, lm_identity, decoding, stated)
