"""Verbalized trials: replies mapped back to official labels before any metric, against a stub.

A scripted model whose accuracy depends on the prompt's label set (or its format) must show
that accuracy in a sweep's scores (the known effect), a model answering in the official words
under a verbalizer must score as invalid, log-likelihood scoring must compare the shown
words, and reordering the rows must not change a row's mapped prediction.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from experiments.metrics import normalize
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.record import NOT_SHOWN, TrialRecord
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from promptlib import Catalog, WorkbenchError, compile_prompt, parse_spec
from promptlib.render import CompiledPrompt
from tests.conftest import mlflow_store

# A Yes/No task with neither rule_* nor register prompt files (base and claude prompts only),
# with plenty of test rows; and hearsay, which has both.
PLAIN_TASK = "cuad_anti-assignment"
TASKS = (PLAIN_TASK, "hearsay")
UNKNOWN_PROMPT = "(stub: a prompt of no declared variant)"
Z_MAX = 3.5  # binomial standard errors allowed between a measured score and its expectation


@pytest.fixture(autouse=True)
def _stub_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")


@dataclass(frozen=True)
class Known:
    """One variant's prompt as the stub recognises it: its shown words and its accuracy."""

    compiled: CompiledPrompt
    p_correct: float


def _coin(prompt: str) -> float:
    """A deterministic uniform draw in [0, 1) per prompt."""
    return int.from_bytes(hashlib.sha256(f"coin|{prompt}".encode()).digest()[:8]) / 2**64


def _truths(catalog: Catalog, tasks: Sequence[str]) -> dict[str, dict[str, str]]:
    """task -> (the row's query text -> its official answer), over the test rows."""
    out: dict[str, dict[str, str]] = {}
    for name in tasks:
        task = catalog.task(name)
        out[name] = {r["text"]: r["answer"] for r in task.rows("test")}
    return out


def known_effect_reply(
    known: Sequence[Known], truths: Mapping[str, Mapping[str, str]]
) -> Callable[[str], str]:
    """A stub reply function: for the prompt of a `known` variant, the shown word of the row's
    true answer with that variant's probability (a hash-seeded coin per prompt), else the
    shown word of the other label. The variant is recognised by its prompt prefix (its
    demonstrations show its words); the row by its text, the last one the prompt holds."""
    prefixes = [(k.compiled.prefix(), k) for k in known]
    same: dict[str, tuple[Any, float]] = {}
    for p, k in prefixes:  # two variants may show one prompt (two orders of 2 demos)
        seen = same.setdefault(p, (k.compiled.label_map, k.p_correct))
        assert seen == (k.compiled.label_map, k.p_correct), "variants must differ in prefix"

    def reply(prompt: str) -> str:
        matches = [k for p, k in prefixes if prompt.startswith(p)]
        if not matches:  # a prompt the test did not declare: an invalid reply, never a crash
            return UNKNOWN_PROMPT  # (a stub that raises is retried for minutes)
        k = max(matches, key=lambda k: len(k.compiled.prefix()))
        rows = truths[k.compiled.task]
        text = max((t for t in rows if t in prompt), key=lambda t: (prompt.rfind(t), len(t)))
        pairs = k.compiled.label_map or tuple((x, x) for x in k.compiled.labels or ())
        right = dict(pairs)[rows[text]]
        wrong = next(shown for official, shown in pairs if official != rows[text])
        return right if _coin(prompt) < k.p_correct else wrong

    return reply


def balanced_se(p: float, answers: Sequence[str]) -> float:
    """The standard error of balanced accuracy when each row is right with probability `p`:
    the mean of the classes' recalls, each a binomial share over its class's rows."""
    counts: dict[str, int] = {}
    for a in answers:
        counts[normalize(a)] = counts.get(normalize(a), 0) + 1
    k = len(counts)
    return math.sqrt(sum(p * (1 - p) / n for n in counts.values())) / k


# ---- the known effect, through a sweep ----------------------------------------------------------
def _sweep(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, axes: str,
    effects: Mapping[str, float], limit: int, fixed: Mapping[str, str] | None = None,
) -> tuple[dict[tuple[str, str], tuple[float, list[str]]], list[Any]]:  # fmt: skip
    """Run a sweep of `axes` (YAML) over TASKS with a stub whose accuracy is `effects`
    (sweep variant name -> p; `fixed` levels apply to all); returns (task, variant name) -> (score, its rows' answers) and the
    trial runs."""
    import mlflow

    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from experiments.sweeps.spec import load_spec
    from experiments.tracking import Tracker, TrackingConfig

    spec = tmp_path / "known.yaml"
    fixed = dict(fixed or {})
    fixed_levels = [f"{k}={v}" for k, v in fixed.items()]
    fixed_yaml = f"fixed: {{{', '.join(f'{k}: {v}' for k, v in fixed.items())}}}\n" if fixed else ""
    spec.write_text(
        f"name: known\ntasks: [{', '.join(TASKS)}]\n{fixed_yaml}axes:\n{axes}n_resamples: 100\n"
    )
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(tmp_path),
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="known",
            prompt_registry=False,
            source="test",
        )
    )
    known = [
        Known(compile_prompt(parse_spec(",".join([*fixed_levels, v])), catalog.task(t)), p)
        for v, p in effects.items()
        for t in TASKS
    ]
    reply = known_effect_reply(known, _truths(catalog, TASKS))
    with StubOpenAI(reply_fn=reply) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=4)
        result = run_sweep(
            load_spec(spec), catalog, models=(lm.name,), limit=limit, tracker=tracker,
            lm_factory=lambda _name: lm, reports_dir=tmp_path / "reports",
        )  # fmt: skip
    assert result.ok, result.incomplete
    # the analysis recomputes every score from the records' scored texts and accepts them
    assert "error" not in result.sensitivity and result.sensitivity["per_task"], result.sensitivity
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("known/known")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`workbench.kind` = 'trial'")
    out = {}
    for run in runs:
        rows = tracker.load_predictions(run.info.run_id)
        out[(run.data.params["task"], run.data.params["variant"])] = (
            run.data.metrics["score"],
            [r.answer for r in rows],
        )
    return out, runs


def _check_known(
    scores: Mapping[tuple[str, str], tuple[float, list[str]]], effects: Mapping[str, float]
) -> list[str]:
    """Each (task, variant)'s score against its expected balanced accuracy; the lines shown."""
    lines = []
    for (task, variant), (score, answers) in sorted(scores.items()):
        p = effects[variant]
        se = balanced_se(p, answers)
        lines.append(f"{task} {variant}: {score:.3f} (expected {p}, se {se:.3f}, n {len(answers)})")
        assert abs(score - p) <= Z_MAX * se, lines[-1]
    return lines


VERBALIZER_EFFECT = {
    "verbalizer=true_false": 0.9,
    "verbalizer=letters": 0.6,
    "verbalizer=official": 0.75,  # the labels as LegalBench writes them
    "verbalizer=lower": 0.7,
}


@pytest.mark.data
def test_a_sweep_measures_an_accuracy_that_depends_on_the_label_words(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    axes = "  verbalizer: [true_false, letters, official, lower]\n"
    scores, runs = _sweep(catalog, tmp_path, monkeypatch, axes, VERBALIZER_EFFECT, limit=150)
    assert len(scores) == 8
    print("\n".join(_check_known(scores, VERBALIZER_EFFECT)))
    # the ordering the effect implies holds on each task
    for task in TASKS:
        s = {v: scores[(task, v)][0] for v in VERBALIZER_EFFECT}
        assert s["verbalizer=true_false"] > s["verbalizer=official"] > s["verbalizer=letters"]
    # the runs carry the verbalizer as a param when one is set (official: unset, no param)
    params = {r.data.params.get("verbalizer") for r in runs}
    assert params == {"true_false", "letters", "lower", None}
    assert not any("order" in r.data.params for r in runs)


FORMAT_EFFECT = {
    "format=base": 0.65,
    "format=claude": 0.85,
    # two points of the format grammar (promptlib/formats.py): content kept, formatting not
    "format=sep:dash,case:upper": 0.95,
    "format=join:space,answer:Answer": 0.55,
}


@pytest.mark.data
def test_a_sweep_measures_an_accuracy_that_depends_on_the_format(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Extend with the format grammar's levels: add them to FORMAT_EFFECT and the axis."""
    levels = [json.dumps(v.split("=", 1)[1]) for v in FORMAT_EFFECT]  # points hold commas
    axes = f"  format: [{', '.join(levels)}]\n"
    scores, runs = _sweep(catalog, tmp_path, monkeypatch, axes, FORMAT_EFFECT, limit=150)
    assert len(scores) == 2 * len(FORMAT_EFFECT)
    print("\n".join(_check_known(scores, FORMAT_EFFECT)))
    assert not any("verbalizer" in r.data.params for r in runs)  # unset axes log no param


# ---- exactly right, and right in the wrong words -------------------------------------------------
def _run(
    catalog: Catalog, variant: str, reply: Callable[[str], str], *, limit: int = 40,
    scoring: str = "generate", **stub: Any,
) -> Any:  # fmt: skip
    from experiments.llm.gateway import LiteLLMModel

    spec = TrialSpec(
        task=PLAIN_TASK, variant=parse_spec(variant), model="openai/stub", limit=limit,
        scoring=scoring,  # type: ignore[arg-type]
    )  # fmt: skip
    with StubOpenAI(reply_fn=reply, **stub) as s:
        lm = LiteLLMModel(
            "openai/stub", api_base=s.url, concurrency=4,
            mode="completion" if scoring != "generate" else "chat",
        )  # fmt: skip
        return run_trial(spec, catalog, lm), resolve_trial(spec, catalog, lm)


def _oracle(catalog: Catalog, variant: str, words: str) -> Callable[[str], str]:
    """Always the row's true answer: in the shown words ("shown") or the official ones."""
    compiled = compile_prompt(parse_spec(variant), catalog.task(PLAIN_TASK))
    truths = _truths(catalog, [PLAIN_TASK])[PLAIN_TASK]
    shown = dict(compiled.label_map or ())

    def reply(prompt: str) -> str:
        text = max((t for t in truths if t in prompt), key=lambda t: (prompt.rfind(t), len(t)))
        return shown[truths[text]] if words == "shown" else truths[text]

    return reply


@pytest.mark.data
@pytest.mark.parametrize(
    "variant",
    ["verbalizer=true_false", "verbalizer=letters", "verbalizer=map:Yes>Agreed/No>Refused"],
)
def test_right_in_the_shown_words_scores_one_and_in_the_official_words_zero(
    catalog: Catalog, variant: str
) -> None:
    right, _ = _run(catalog, variant, _oracle(catalog, variant, "shown"))
    assert right.complete and right.score == 1.0
    assert all(p.parsed == p.answer and p.correct for p in right.predictions)
    assert {p.generation for p in right.predictions} <= set(right_words(catalog, variant))
    assert right.report is not None and right.report.invalid_rate == 0.0

    official, _ = _run(catalog, variant, _oracle(catalog, variant, "official"))
    assert official.complete and official.score is not None
    assert not any(p.correct for p in official.predictions)
    assert all(p.parsed is None and p.scored == NOT_SHOWN for p in official.predictions)
    assert {p.generation for p in official.predictions} <= {"Yes", "No"}  # kept raw
    assert official.report is not None and official.report.invalid_rate == 1.0
    assert official.score == 0.0
    # the analysis recomputes the trial's score from the scored texts, not the raw replies
    record = TrialRecord.from_result(official, variant=variant)
    assert set(record.generations) == {NOT_SHOWN}


def right_words(catalog: Catalog, variant: str) -> tuple[str, ...]:
    compiled = compile_prompt(parse_spec(variant), catalog.task(PLAIN_TASK))
    assert compiled.answer_labels is not None
    return compiled.answer_labels


@pytest.mark.data
def test_without_a_verbalizer_official_words_score_as_before(catalog: Catalog) -> None:
    result, _ = _run(catalog, "base", _oracle(catalog, "base", "official"))
    assert result.score == 1.0
    assert all(p.scored is None and p.parsed == p.generation for p in result.predictions)
    assert "scored" not in result.predictions[0].to_dict()  # stored as before


# ---- log-likelihood ---------------------------------------------------------------------------
@pytest.mark.data
@pytest.mark.parametrize("scoring", ["loglik", "loglik-norm"])
def test_loglik_compares_the_shown_words_and_reports_the_official_label(
    catalog: Catalog, scoring: str
) -> None:
    """The stub's echoed log-probabilities favour the true answer's shown letter (the other
    letter's token loses 5 nats)."""
    variant = "verbalizer=letters"
    compiled = compile_prompt(parse_spec(variant), catalog.task(PLAIN_TASK))
    truths = _truths(catalog, [PLAIN_TASK])[PLAIN_TASK]
    shown = dict(compiled.label_map or ())
    current = threading.local()  # a request's reply and its log-probabilities: one thread

    def reply(prompt: str) -> str:  # the stub echoes the prompt: remember its wrong letter
        text = max((t for t in truths if t in prompt), key=lambda t: (prompt.rfind(t), len(t)))
        current.wrong = next(w for o, w in shown.items() if o != truths[text])
        return ""

    def logprob(token: str, value: float) -> float:
        # below the stub's most likely token either way, so the alignment check still passes
        return value - (5.0 if token.strip() == getattr(current, "wrong", None) else 0.0)

    result, resolved = _run(
        catalog, variant, reply, limit=20, scoring=scoring, echo_logprobs=True,
        logprob_fn=logprob,
    )  # fmt: skip
    conts = resolved.decoding["continuations"]
    assert conts == [compiled.answer_join + "A", compiled.answer_join + "B"]
    assert result.complete and result.score == 1.0, [p.generation for p in result.predictions]
    assert all(p.parsed == p.answer and p.generation in ("A", "B") for p in result.predictions)
    # unverbalized, the continuations are the official words (and the id differs)
    _, base = _run(catalog, "base", reply, limit=20, scoring=scoring, echo_logprobs=True)
    assert base.decoding["continuations"] == [
        compiled.answer_join + x for x in compiled.labels or ()
    ]
    assert base.id != resolved.id


# ---- row order --------------------------------------------------------------------------------
@pytest.mark.data
def test_reordered_rows_get_the_same_mapped_predictions(catalog: Catalog) -> None:
    from experiments.llm.gateway import LiteLLMModel

    variant = parse_spec("verbalizer=true_false")
    first = TrialSpec(task=PLAIN_TASK, variant=variant, model="openai/stub", limit=30)
    known = [Known(compile_prompt(variant, catalog.task(PLAIN_TASK)), 0.7)]
    reply = known_effect_reply(known, _truths(catalog, [PLAIN_TASK]))
    with StubOpenAI(reply_fn=reply) as s:
        lm = LiteLLMModel("openai/stub", api_base=s.url, concurrency=4)
        a = run_trial(first, catalog, lm)
        shuffled = [p.index for p in a.predictions][::-1]
        b = run_trial(TrialSpec(**{**first.__dict__, "rows": tuple(shuffled)}), catalog, lm)
    assert [p.index for p in b.predictions] == shuffled
    by_a = {p.index: (p.generation, p.parsed, p.correct) for p in a.predictions}
    by_b = {p.index: (p.generation, p.parsed, p.correct) for p in b.predictions}
    assert (
        by_a == by_b
        and any(c for _, _, c in by_a.values())
        and not all(c for _, _, c in by_a.values())
    )
    assert b.score == a.score


# ---- the CLI, and the order axis ------------------------------------------------------------
@pytest.mark.data
def test_workbench_run_with_a_verbalizer(lb_dir: Path, tmp_path: Path, catalog: Catalog) -> None:
    """`workbench run --variant verbalizer=letters`, tracked: the official labels are
    parsed, the saved rows keep the letters, the run's params name the verbalizer."""
    import json

    import mlflow

    from tests.conftest import run_cli, workbench_env

    variant = "verbalizer=letters"
    env = {**workbench_env(tmp_path, lb_dir, "verb"), "OPENAI_API_KEY": "sk-dummy"}
    with StubOpenAI(reply_fn=_oracle(catalog, variant, "shown")) as stub:
        r = run_cli(
            ["run", PLAIN_TASK, "--variant", variant, "--model", "openai/stub", "--api-base",
             stub.url, "--limit", "12", "--json"],
            env, tmp_path, timeout=300,
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["score"] == 1.0 and summary["invalid_rate"] == 0.0
    saved = tmp_path / summary["predictions"]  # relative to the run's folder
    rows = [json.loads(x) for x in saved.read_text().splitlines()]
    assert {x["generation"] for x in rows} <= {"A", "B"}
    assert all(x["parsed"] == x["answer"] == x["scored"] for x in rows)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = [
        run
        for exp in client.search_experiments()
        for run in client.search_runs([exp.experiment_id])
        if run.data.params.get("task") == PLAIN_TASK
    ]
    assert len(runs) == 1 and runs[0].data.params["verbalizer"] == "letters"
    assert "order" not in runs[0].data.params


@pytest.mark.data
def test_a_sweep_over_demonstration_orders(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """order is a sweep axis; its levels are exchangeable draws in the sensitivity analysis,
    and each run logs its order (with the verbalizer fixed, that too)."""
    from experiments.analysis.sensitivity.groups import DRAW_AXES

    assert "order" in DRAW_AXES and "verbalizer" not in DRAW_AXES
    effects = {f"order={k}": 0.75 for k in ("drawn", 0, 1, 3)}  # 2 permutes 5 demos as 0
    scores, runs = _sweep(
        catalog, tmp_path, monkeypatch, "  order: [drawn, 0, 1, 3]\n", effects, limit=20,
        fixed={"verbalizer": "lower"},
    )  # fmt: skip
    assert len(scores) == 8
    assert {r.data.params.get("order") for r in runs} == {None, "0", "1", "3"}  # drawn: unset
    assert {r.data.params["verbalizer"] for r in runs} == {"lower"}


# ---- a real local model -------------------------------------------------------------------------
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.model
def test_letters_by_loglik_with_the_local_model(catalog: Catalog) -> None:
    from experiments.llm.gateway import get_model

    spec = TrialSpec(
        task="hearsay", variant=parse_spec("verbalizer=letters"), model="local/smollm2",
        limit=4, scoring="loglik",
    )  # fmt: skip
    lm = get_model("local/smollm2")
    resolved = resolve_trial(spec, catalog, lm)
    join = resolved.compiled.answer_join
    assert resolved.decoding["continuations"] == [join + "A", join + "B"]
    result = run_trial(resolved, catalog, lm)
    assert result.complete and result.score is not None and 0.0 <= result.score <= 1.0
    assert all(p.generation in ("A", "B") for p in result.predictions)
    assert all(p.parsed in ("Yes", "No") and p.scored == p.parsed for p in result.predictions)
    assert all(p.correct == (p.parsed == p.answer) for p in result.predictions)
    print(f"smollm2 letters loglik on hearsay: score {result.score}")


# ---- the optimiser ------------------------------------------------------------------------------
@pytest.mark.data
def test_the_optimiser_scores_verbalized_variants_on_official_labels(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search space has no verbalizer axis yet: every proposal gets verbalizer=letters
    here. A model answering every row right in letters wins on dev with 1.0, and on
    held-out the winner scores 1.0 while the base prompt (Yes/No) scores all invalid."""
    from experiments.llm.gateway import get_model
    from experiments.optimize import optimize as optimize_module
    from experiments.optimize import search, study
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.space import variant_from_params
    from experiments.tracking import Tracker, load_config

    def lettered(params: dict[str, Any], *texts: Any) -> Any:
        return variant_from_params(params, *texts).with_verbalizer("letters")

    for module in (search, study, optimize_module):
        monkeypatch.setattr(module, "variant_from_params", lettered)
    truths = _truths(catalog, ["hearsay"])["hearsay"]

    def letters(prompt: str) -> str:
        text = max((t for t in truths if t in prompt), key=lambda t: (prompt.rfind(t), len(t)))
        return {"Yes": "A", "No": "B"}[truths[text]]

    cfg_file = tmp_path / "mlflow.yaml"
    cfg_file.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: false\n"
    )
    cfg = OptimizeConfig(
        task="hearsay", model="openai/stub", n_trials=3, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=1, dev_limit=12, heldout_limit=10,
    )  # fmt: skip
    with StubOpenAI(reply_fn=letters) as stub:
        lm = get_model("openai/stub", api_base=stub.url, max_retries=0, concurrency=4)
        report = optimize_module.optimize(cfg, catalog, lm, Tracker(load_config(cfg_file)))
    assert "verbalizer=letters" in report.best_variant
    assert report.dev_score == 1.0
    assert report.heldout["score"] == 1.0 and report.base_heldout["score"] == 0.0, (
        report.heldout,
        report.base_heldout,
    )


def test_workbench_score_reads_what_a_verbalized_trial_scored(tmp_path: Path) -> None:
    """A verbalized trial's stored rows keep the raw reply ("A") and what was scored ("Yes"):
    re-scoring its predictions.jsonl must score the latter (found in review: 1.0 became 0.0)."""
    import json as _json

    from experiments.trials.predictions import read_predictions

    path = tmp_path / "predictions.jsonl"
    rows = [
        {"generation": "A", "scored": "Yes", "answer": "Yes"},
        {"generation": "B", "scored": "No", "answer": "No"},
        {"generation": "Yes", "answer": "Yes"},  # an unverbalized row: its generation
    ]
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    gens, answers, _ = read_predictions(path, ("Yes", "No"))
    assert gens == ["Yes", "No", "Yes"] and answers == ["Yes", "No", "Yes"]
    path.write_text(_json.dumps({"generation": "A", "scored": 1, "answer": "Yes"}) + "\n")
    with pytest.raises(WorkbenchError, match="field 'scored' must be a string"):
        read_predictions(path, ("Yes", "No"))
