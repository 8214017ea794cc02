"""experiments/sweeps/estimate.py: a study's plan (rows, MDE80, calls, time, price) before it
runs, on the real data, with a stored speed (no model is called, so the numbers are fixed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments import output
from experiments.analysis.planned_power import planned_mde
from experiments.llm.gateway import estimate_cost, get_model
from experiments.llm.speed import Speed
from experiments.sweeps.estimate import (
    HOUR,
    ModelTime,
    model_times,
    plan_study,
    seconds_for,
    too_long,
)
from experiments.sweeps.plan import decode_tokens, fresh_chars, plan_tasks
from experiments.sweeps.spec import load_spec
from promptlib.tasks import Catalog

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "ablations" / "demo.yaml"
MODELS = ("local/smollm2", "local/gemma3-270m")


def _speed(model: str, prompt: float = 500.0, gen: float = 50.0) -> Speed:
    return Speed(model, "Test CPU, 2 threads", prompt, gen, "2026-01-01T00:00:00Z", 0.5)


def _never(model: str) -> Speed | None:
    raise AssertionError(f"{model}: an API model has no speed to ask for")


def _no_model(name: str) -> Any:
    """The dry run binds trials to a model's identity only: a model that is never called."""
    return get_model(name)


def test_a_row_evaluates_only_the_text_it_does_not_share_with_the_row_before() -> None:
    assert fresh_chars(["ab", "abc", "abd", "xyz"]) == 2 + 1 + 1 + 3
    assert fresh_chars([]) == 0
    assert fresh_chars(["same", "same"]) == 4


def test_decoded_tokens_per_row() -> None:
    from types import SimpleNamespace as NS

    labels = NS(labels=("Yes", "No"), is_classification=True)
    # log-likelihood: a continuation's tokens after its first (a word a token)
    assert decode_tokens({"continuations": [" Yes", " No"]}, labels) == 0
    assert decode_tokens({"continuations": [" Common Law", " UCC"]}, labels) == 1
    # generating: a label's mean length and a stop token, capped at max_tokens
    assert decode_tokens({"max_tokens": 9}, labels) == 2
    assert decode_tokens({"max_tokens": 1}, labels) == 1
    free = NS(labels=None, is_classification=False)
    assert decode_tokens({"max_tokens": 64}, free) == 64  # no label: the upper bound


@pytest.mark.data
def test_plan_of_the_demo_study(catalog: Catalog) -> None:
    spec = load_spec(DEMO)
    speeds = {m: _speed(m) for m in MODELS}
    plan = plan_study(spec, catalog, MODELS, _no_model, speeds.get)
    by_task = {t.task: t for t in plan.tasks}
    assert list(by_task) == ["hearsay", "abercrombie", "personal_jurisdiction"]
    # rows after the spec's limit: 40 of each test split; the train split holds the demos
    for name, t in by_task.items():
        task = catalog.task(name)
        assert t.rows == 40 and t.split_rows == len(task.rows("test"))
        assert t.train_rows == len(task.rows("train"))
        assert (t.variants, t.comparisons, t.metric) == (2, 1, "balanced_accuracy")
    # one listed pair x 3 tasks x 2 models: Holm runs over 6 tests
    assert plan.family == 6 and plan.alpha_family == pytest.approx(0.05 / 6)
    # the MDE80s are planned_mde's on each task's rows (same answers, same clusters)
    hearsay = by_task["hearsay"]
    assert hearsay.mde is not None and hearsay.mde_family is not None
    assert hearsay.mde.value is not None and hearsay.mde_family.value is not None
    assert 0 < hearsay.mde.value < hearsay.mde_family.value < 1
    assert hearsay.mde_family.alpha == pytest.approx(0.05 / 6)
    # hearsay's 40 rows are 40 distinct prompts: the units are the rows
    assert hearsay.n_units == 40
    rows = {r["index"]: r for r in catalog.task("hearsay").rows("test")}
    (planned,) = plan_tasks(spec, catalog, only=("hearsay",))
    answers = [rows[i]["answer"] for i in planned.rows]
    again = planned_mde(answers, "balanced_accuracy", alpha=0.05 / 6, n_resamples=1000)
    assert again.value == pytest.approx(hearsay.mde_family.value)
    # calls: 2 variants x 40 rows per (task, model); time: the tokens at the stored rates
    assert [c.calls for c in plan.cells] == [80] * 6
    for share in plan.times:
        assert share.calls == 240 and share.speed == speeds[share.model]
        expected = share.fresh_tokens / 500.0 + share.decode_tokens / 50.0
        assert share.seconds == pytest.approx(expected)
        assert 0 < share.fresh_tokens < share.prompt_tokens  # the shared instruction is kept
    assert sum(c.seconds or 0 for c in plan.cells) == pytest.approx(
        sum(t.seconds or 0 for t in plan.times)
    )
    text = output.study_plan(plan)
    assert text.splitlines()[1].split()[:5] == ["task", "model", "rows", "(of)", "train"]
    assert "MDE80 Holm" in text and "alpha 0.05/6" in text
    assert "ASSUMING both arms 0.70 right in every answer class" in text
    assert "measured 500 prompt tok/s, 50 generated tok/s on Test CPU" in text
    assert plan.to_dict()["tasks"][0]["mde"]["value"] == hearsay.mde.value


@pytest.mark.data
def test_an_api_model_gets_litellm_price_and_no_time(catalog: Catalog) -> None:
    """Priced from litellm's local cost map (LITELLM_LOCAL_MODEL_COST_MAP), no network."""
    spec = load_spec(DEMO)
    model = "openai/gpt-4o-mini"
    plan = plan_study(spec, catalog, (model,), _no_model, _never, only=("hearsay",))
    (cell,) = plan.cells
    (share,) = plan.times
    assert cell.seconds is None and share.seconds is None and "API" in share.why
    assert cell.cost is not None and cell.cost > 0
    # the dry run's price: its prompt tokens and max_tokens of output per row, at litellm's
    out = 80 * 9  # hearsay generates at most 9 tokens a row
    assert cell.cost == pytest.approx(estimate_cost(model, cell.prompt_tokens, out))
    text = output.study_plan(plan)
    assert f"${cell.cost:.4f}" in text and "at litellm's prices" in text
    assert "time not estimated for an API or served model" in text


def _share(model: str, seconds: float | None, speed: Speed | None) -> ModelTime:
    return ModelTime(model, 1000, 10**6, 10**5, 10**4, seconds, 0.0, speed)


def test_a_study_past_an_hour_warns_in_one_line() -> None:
    slow = _speed("local/smollm2", prompt=850.0, gen=40.0)
    long = [_share("local/smollm2", 14 * HOUR, slow)]
    assert too_long(long)
    assert output.time_warning(long) == (
        "warning: about 14 h on this machine (measured 850 prompt tok/s for local/smollm2); "
        "cut rows with `limit:` or models"
    )
    # models run one after the other: two of 40 minutes pass the hour together
    both = [
        _share("local/smollm2", 40 * 60, slow),
        _share("local/gemma3-270m", 40 * 60, _speed("local/gemma3-270m")),
    ]
    assert too_long(both) and "about 80 min" in output.time_warning(both)
    assert not too_long([_share("local/smollm2", 59 * 60, slow)])
    assert not too_long([_share("openai/gpt-4o-mini", None, None)])  # an API model: no time


def test_model_times_sum_the_dry_run_items() -> None:
    items = [
        {"model": "local/m", "n": 10, "prompt_tokens_est": 1000, "fresh_tokens_est": 300,
         "decode_tokens_est": 20, "cost_est": 0.0},
        {"model": "local/m", "n": 10, "prompt_tokens_est": 1000, "fresh_tokens_est": 200,
         "decode_tokens_est": 20, "cost_est": 0.0},
        {"model": "local/unmeasured", "n": 5, "prompt_tokens_est": 50, "fresh_tokens_est": 50,
         "decode_tokens_est": 5, "cost_est": 0.0},
    ]  # fmt: skip
    speed = _speed("local/m", prompt=100.0, gen=10.0)
    m, unmeasured = model_times(items, {"local/m": speed})
    assert (m.calls, m.fresh_tokens, m.decode_tokens) == (20, 500, 40)
    assert m.seconds == pytest.approx(seconds_for(500, 40, speed)) == pytest.approx(9.0)
    assert unmeasured.seconds is None and unmeasured.why == "not measured on this machine"
    lines = output.model_time_lines([m, unmeasured], "ablations/x.yaml")
    assert "about 9 s on this machine" in lines[0]
    assert "run `workbench plan --measure ablations/x.yaml`" in lines[1]


def test_a_user_task_is_planned_on_the_metric_its_task_json_declares(tmp_path: Path) -> None:
    """`workbench task new --metric f1` or exact_match: the sweep scores the task with that
    metric (`metrics.task_metric`), so the plan's MDE80 is that metric's (none for F1, which
    is not simulated), not balanced accuracy's by the task's name."""
    from promptlib.usertasks.build import TaskRequest, draft_task
    from promptlib.usertasks.check import check_draft
    from promptlib.usertasks.source import UserTaskSource
    from promptlib.usertasks.write import write_task
    from tests.usertask_data import clauses, write_csv

    data = write_csv(tmp_path / "clauses.csv", clauses(80))
    for metric in ("f1", "exact_match", "balanced_accuracy"):
        request = TaskRequest(
            name=f"mine_{metric}", source=str(data), inputs=("clause_text",),
            answer="restricts", instruction="Does the clause restrict disclosure?",
            metric=metric,
        )  # fmt: skip
        draft = draft_task(request, ("hearsay",))
        write_task(tmp_path / "tasks", request.name, draft.files, False, check_draft(draft))
    catalog = Catalog(UserTaskSource(tmp_path / "tasks"))
    path = tmp_path / "own.yaml"
    path.write_text(
        "name: own\ntasks: [mine_f1, mine_exact_match, mine_balanced_accuracy]\n"
        'models: [openai/gpt-4o-mini]\naxes:\n  format: [base, "sep:colon_newline"]\n'
        "comparisons: all_pairs\nn_resamples: 1000\n"
    )
    plan = plan_study(load_spec(path), catalog, ("openai/gpt-4o-mini",), _no_model, _never)
    by_task = {t.task: t for t in plan.tasks}
    f1, exact, balanced = (by_task[f"mine_{m}"] for m in ("f1", "exact_match", "balanced_accuracy"))
    assert (f1.metric, exact.metric, balanced.metric) == (
        "macro_f1", "exact_match", "balanced_accuracy",
    )  # fmt: skip
    assert f1.mde is not None and f1.mde.value is None and "no planned MDE" in f1.mde.note
    rows = [r["answer"] for r in catalog.task("mine_exact_match").rows("test")]
    assert exact.mde is not None and exact.mde.value == pytest.approx(
        planned_mde(rows, "exact_match", n_resamples=1000).value
    )
    text = output.study_plan(plan)
    assert "difference in macro f1, exact match, balanced accuracy" in text


@pytest.mark.data
def test_a_sequential_elimination_plan_splits_alpha_as_the_sweep_does(
    catalog: Catalog, tmp_path: Path
) -> None:
    """all_pairs under the sequential design runs one elimination per (task, model), and
    the family alpha is split over those (`sequential.n_comparisons`), each splitting its
    share over its pairs: 2 here, not the 12 pairs the header said."""
    from experiments.sweeps.sequential import n_comparisons

    path = tmp_path / "seq.yaml"
    path.write_text(
        "name: seq\ntasks: [hearsay, abercrombie]\nmodels: [openai/gpt-4o-mini]\nlimit: 60\n"
        'axes:\n  format: [base, "sep:colon_newline"]\n  demos: [none, base]\n'
        "comparisons: all_pairs\nn_resamples: 1000\ndesign: sequential\n"
        "sequential: {batch: 10, max_rows: 60, alpha: 0.05, seed: 0}\n"
    )
    spec = load_spec(path)
    plan = plan_study(spec, catalog, ("openai/gpt-4o-mini",), _no_model, _never)
    groups = [[nv.name for nv in p.variants] for p in plan_tasks(spec, catalog)]
    assert plan.family == n_comparisons(spec.comparisons, groups) == 2
    head = output.study_plan(plan).splitlines()[0]
    assert head.endswith(
        "alpha 0.05 split over 2 eliminations (Bonferroni; each splits its share over its pairs)"
    )


@pytest.mark.data
def test_a_model_litellm_has_no_price_for_is_priced_unknown_not_free(catalog: Catalog) -> None:
    """litellm's cost_per_token gives 0.0 for some providers' models it has no price for
    (Fireworks: a paid API): the plan showed "$0.0000" where the price is unknown."""
    unknown = "fireworks_ai/accounts/someone/models/not-in-the-cost-map"
    assert estimate_cost(unknown, 1000, 100) is None
    assert estimate_cost("ollama/llama3", 1000, 100) == 0.0  # litellm's price: served locally
    assert (estimate_cost("openai/gpt-4o-mini", 1000, 100) or 0.0) > 0
    plan = plan_study(load_spec(DEMO), catalog, (unknown,), _no_model, _never, only=("hearsay",))
    (cell,) = plan.cells
    assert cell.cost is None and plan.times[0].cost is None
    text = output.study_plan(plan)
    assert "$0.0000" not in text and "unknown price" in text and "price unknown" in text


def test_an_explanation_is_estimated_at_its_budget() -> None:
    """An application prompt's reply has no stop: it runs to its 150 (or 300) tokens, not to a
    label's length (issue 33: the dry run estimated explanations at two tokens a row)."""
    from types import SimpleNamespace

    from experiments.sweeps.plan import decode_tokens

    spec = SimpleNamespace(labels=("Yes", "No"), is_classification=True)
    assert decode_tokens({"max_tokens": 150, "stop": []}, spec) == 150
    assert decode_tokens({"max_tokens": 300, "stop": []}, spec) == 300
    assert decode_tokens({"max_tokens": 9, "stop": ["\n"]}, spec) == 2  # a label and a stop
