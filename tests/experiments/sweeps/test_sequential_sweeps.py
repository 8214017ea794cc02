"""Sequential sweeps (issue 22): the spec, growing trials, and the loop against the stub server
with set accuracies (calls counted at the stub, MLflow logging, resume and extension)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.sweeps.result import SweepResult
from experiments.sweeps.sequential_result import SequentialComparison
from experiments.sweeps.spec import SpecError, load_spec
from experiments.testing.sequential_sim import SetAccuracy, prepare
from experiments.testing.stub_server import StubOpenAI
from promptlib import Catalog
from promptlib.errors import WorkbenchError
from tests.conftest import mlflow_store

BASE = "name: s\ntasks: [hearsay]\nfixed: {demos: none}\naxes: {instruction: [reference, description]}\n"  # fmt: skip


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- the spec --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("design: adaptive\n", "design must be fixed or sequential, not 'adaptive'"),
        ("sequential: {batch: 10}\n", "field 'sequential' needs design: sequential"),
        ("design: sequential\nsequential: {batch: 10, deltaa: 0.1}\n", "sequential: unknown key 'deltaa'"),
        ("design: sequential\nsequential: {batch: 0}\n", "sequential.batch must be an integer from 1 to 100000, not 0"),
        ("design: sequential\nsequential: {batch: true}\n", "sequential.batch must be an integer from 1 to 100000"),
        ("design: sequential\nsequential: {max_rows: 2.5}\n", "sequential.max_rows must be an integer from 1 to 10000000"),
        ("design: sequential\nsequential: {delta: 1.5}\n", "sequential.delta must be a number > 0 and < 1"),
        ("design: sequential\nsequential: {alpha: 0.9}\n", "sequential.alpha must be a number > 0 and <= 0.5"),
        ("design: sequential\nsequential: [10]\n", "field 'sequential' has the wrong type"),
        ("design: sequential\ncluster_by: rows\n", "cluster_by is for the fixed design's tests"),
    ],
)  # fmt: skip
def test_bad_sequential_specs_name_the_file_and_field(
    tmp_path: Path, extra: str, message: str
) -> None:
    path = write(tmp_path, BASE + extra)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_sequential_spec_and_its_defaults(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, BASE + "sample_seed: 7\ndesign: sequential\n"))
    assert spec.sequential is not None
    assert spec.sequential.to_dict() == {
        "batch": 10, "delta": None, "max_rows": None, "alpha": 0.05, "seed": 7,
    }  # fmt: skip
    fixed = load_spec(write(tmp_path, BASE, "fixed.yaml"))
    assert fixed.sequential is None
    # the design is part of the spec's identity: the sequential sweep is another sweep
    assert spec.id != load_spec(write(tmp_path, BASE + "sample_seed: 7\n", "f7.yaml")).id


# ---- growing trials (point 5) ----------------------------------------------------------------
@pytest.mark.data
def test_a_prefix_is_the_trial_of_those_rows(catalog: Catalog) -> None:
    from experiments.llm.types import Completion
    from experiments.trials.spec import TrialSpec, resolve_trial
    from promptlib import parse_spec

    class Probe(LMDefaults):
        name, mode, concurrency = "probe", "chat", 1

        def cache_identity(self) -> dict[str, Any]:
            return {"model": "probe"}

        def complete(self, prompt: str, decoding: Any) -> Completion:
            raise AssertionError("resolving calls no model")

    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model="probe")
    full = resolve_trial(spec, catalog, Probe())  # type: ignore[arg-type]
    ids = tuple(r["index"] for r in full.rows)
    for n in (1, 10, len(ids)):
        direct = resolve_trial(
            TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model="probe",
                      rows=ids[:n]), catalog, Probe()  # type: ignore[arg-type]
        )  # fmt: skip
        assert full.prefix(n).id == direct.id and full.prefix(n).rows == direct.rows
    assert len({full.prefix(n).id for n in (10, 20, 30)}) == 3  # the row set is the identity
    assert full.window(10, 20).rows == full.rows[10:20]
    with pytest.raises(WorkbenchError, match="non-empty range"):
        full.prefix(0)


# ---- the loop against the stub server --------------------------------------------------------
SEQ = """
name: {name}
tasks: [cuad_audit_rights]
limit: {limit}
fixed: {{demos: none}}
axes: {{register: [plain, technical]}}
comparisons: [[register=plain, register=technical]]
design: sequential
sequential: {{batch: 10{more}}}
"""


@pytest.fixture(autouse=True)
def _stub_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")


def _tracker(root: Path) -> Any:
    from experiments.tracking import Tracker, TrackingConfig

    return Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(root),
            artifact_location=(root / "artifacts").as_uri(),
            experiment_prefix="seq",
            prompt_registry=False,
            source="test",
        )
    )


def _sweep(
    root: Path, spec_path: Path, catalog: Catalog, stub: StubOpenAI, retries: int = 4
) -> SweepResult:
    from experiments.llm.cache import ResponseCache
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep

    lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1, max_retries=retries)
    return run_sweep(
        load_spec(spec_path), catalog, models=(lm.name,), tracker=_tracker(root),
        lm_factory=lambda _name: lm, cache=ResponseCache(root / "cache"),
        reports_dir=root / "reports",
    )  # fmt: skip


def _first_row(result: SweepResult) -> SequentialComparison:
    """The sequential sweep's first comparison (a fixed sweep has none: an error here)."""
    assert result.sequential is not None, "not a sequential sweep"
    return result.sequential[0]


def _reply(spec_path: Path, catalog: Catalog, effects: dict[str, float], seed: int) -> SetAccuracy:
    prepared = prepare(spec_path, catalog)
    return SetAccuracy(prepared.prompts, effects, prepared.labels, seed)


def _sent(stub: StubOpenAI) -> list[str]:
    from experiments.testing.stub_server import _prompt

    return [_prompt(body) for body in stub.requests]


@pytest.mark.data
@pytest.mark.slow
def test_a_clear_difference_stops_early_and_every_call_is_counted(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec_path = write(tmp_path, SEQ.format(name="clear", limit=300, more=""))
    model = _reply(spec_path, catalog, {"register=plain": 0.45}, seed=3)
    with StubOpenAI(reply_fn=model.reply) as stub:
        result = _sweep(tmp_path, spec_path, catalog, stub)
        sent = _sent(stub)
        stub.requests.clear()
        again = _sweep(tmp_path, spec_path, catalog, stub)  # everything from the cache
        assert not stub.requests
    row = _first_row(result)
    assert row.decision == "A" and row.n < 300 and row.looks[-1] == row.n
    assert row.ci_low is not None and row.ci_low > 0 and row.sequence and row.design == "sequential"
    assert row.n % 10 == 0 and row.looks == tuple(range(10, row.n + 1, 10))
    # the calls made are those counted at the stub, fewer than the grid; a row whose prompt
    # another row already sent (the task repeats a few clauses) is a cache hit
    cost = result.cost
    assert cost["model_calls"] == len(sent) and len(set(sent)) >= 0.9 * len(sent)
    assert cost["model_calls"] + cost["cache_hits"] == 2 * row.n
    assert cost["grid_calls"] == 600 and cost["rows_evaluated"] == 2 * row.n
    assert cost["share_of_grid"] < 1 and result.status == "complete"
    assert again.sequential == result.sequential and again.resumed == 2
    assert again.cost["model_calls"] == 0 and again.cost["cache_hits"] == 2 * row.n
    # the trials logged are each arm on the rows it used; the parent has the numbers
    from experiments.names import metric_key, sequential_metric_name

    tracker = _tracker(tmp_path)
    trials = tracker.sweep_trials(result.parent_run_id)
    assert sorted(t["n"] for t in trials) == [row.n, row.n]
    parent = tracker.client.get_run(result.parent_run_id)
    m = parent.data.metrics
    assert m["cost.model_calls"] == len(sent) and m["cost.grid_calls"] == 600
    assert (
        m[metric_key(sequential_metric_name({**row.to_dict(), "model": "openai/stub"}, "n"))]
        == row.n
    )
    assert parent.data.params["design"] == "sequential"
    assert parent.data.params["sequence"] == row.sequence
    report_dir = tmp_path / "reports" / "clear" / result.sweep_id  # this run's own folder
    doc = json.loads((report_dir / "comparisons.json").read_text())
    assert doc["sequential"] == result.to_dict()["sequential"] and doc["comparisons"] == []


@pytest.mark.data
@pytest.mark.slow
def test_a_bigger_budget_extends_the_trials_and_sends_only_the_new_rows(
    catalog: Catalog, tmp_path: Path
) -> None:
    first = write(tmp_path, SEQ.format(name="grow", limit=200, more=", max_rows: 30"), "a.yaml")
    more = write(tmp_path, SEQ.format(name="grow", limit=200, more=", max_rows: 60"), "b.yaml")
    model = _reply(first, catalog, {}, seed=5)  # no difference: the budget decides
    with StubOpenAI(reply_fn=model.reply) as stub:
        small = _sweep(tmp_path, first, catalog, stub)
        before = _sent(stub)
        stub.requests.clear()
        big = _sweep(tmp_path, more, catalog, stub)
        after = _sent(stub)
    s, b = _first_row(small), _first_row(big)
    assert s.n == 30 and s.decision == "undecided" and "budget" in s.status
    assert b.n == 60 and b.looks[:3] == s.looks
    # the 30 rows of each arm came from the cache: only rows 31-60 were sent
    assert small.cost["model_calls"] == len(before) and not set(before) & set(after)
    assert big.cost["model_calls"] == len(after) >= 50
    assert big.cost["cache_hits"] + len(after) == 120 and big.cost["cache_hits"] >= 60
    # the same first looks: the longer trial begins with the shorter one's rows
    assert b.looks[:3] == (10, 20, 30)


@pytest.mark.data
@pytest.mark.slow
def test_adaptive_best_of_k_spends_rows_on_the_variants_in_contention(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec_path = write(
        tmp_path,
        "name: bok\ntasks: [cuad_audit_rights]\nlimit: 300\nfixed: {demos: none}\n"
        "axes: {format: {draw: 4, seed: 0, with: [base]}}\ncomparisons: best_vs_worst\n"
        "design: sequential\nsequential: {batch: 10}\n",
    )
    model = _reply(spec_path, catalog, {"format=base": 0.45}, seed=11)
    with StubOpenAI(reply_fn=model.reply) as stub:
        result = _sweep(tmp_path, spec_path, catalog, stub)
        sent = _sent(stub)
    row = _first_row(result)
    assert row.comparison == "best_vs_worst" and row.a == "format=base"
    assert row.elimination is not None and row.elimination.k == 5
    assert row.decision == "best" and row.ci_low is not None and row.ci_low > 0
    gone = {e.variant: e for e in row.elimination.eliminated}
    assert len(gone) == 4 and "format=base" not in gone
    assert all(row.rows_per_arm[v] == e.rows for v, e in gone.items())
    # counted at the stub: every call, each prompt once, well under the full grid (0.53 of
    # it: the anytime bets are on whole clusters of repeated texts, each weighted by its rows,
    # so cuad_audit_rights' clusters of up to 3 rows shrink the bets; 0.5 before issue 29)
    grid = result.cost["grid_calls"]
    assert len(sent) + result.cost["cache_hits"] == sum(row.rows_per_arm.values())
    assert len(sent) == result.cost["model_calls"] <= 0.6 * grid


@pytest.mark.data
@pytest.mark.slow
def test_a_failed_row_stops_its_comparison_without_a_verdict_and_a_rerun_resumes(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec_path = write(tmp_path, SEQ.format(name="fails", limit=100, more=", max_rows: 40"))
    model = _reply(spec_path, catalog, {}, seed=2)
    prepared = prepare(spec_path, catalog)
    # one row of the second batch fails every time it is sent
    doomed = prepared.resolved[0].compiled.render(prepared.resolved[0].rows[14])
    with StubOpenAI(reply_fn=model.reply, fail_fn=lambda p: p == doomed) as stub:
        first = _sweep(tmp_path, spec_path, catalog, stub, retries=0)
        row = _first_row(first)
        assert first.status == "incomplete" and row.decision is None
        assert row.status.startswith("incomplete: 1 of 10 rows failed")
        assert row.looks == (10,)  # no look on the batch with the failed row
        assert [t["n_errors"] for t in first.incomplete] == [1]
        stub.fail_fn = None
        stub.requests.clear()
        second = _sweep(tmp_path, spec_path, catalog, stub, retries=0)
    resent = _sent(stub)
    assert second.status == "complete" and _first_row(second).decision is not None
    assert doomed in resent and len(resent) == second.cost["model_calls"]
    assert second.cost["cache_hits"] >= 20  # the first batches came from the cache


@pytest.mark.data
def test_an_f1_task_is_refused_before_any_call(catalog: Catalog, tmp_path: Path) -> None:
    spec_path = write(
        tmp_path,
        "name: f1\ntasks: [ssla_plaintiff]\nsplit: train\nfixed: {demos: none}\n"
        "axes: {format: [base, claude]}\ncomparisons: [[format=base, format=claude]]\n"
        "design: sequential\n",
    )
    with StubOpenAI(reply=" x") as stub:
        with pytest.raises(SpecError) as err:
            _sweep(tmp_path, spec_path, catalog, stub)
        assert not stub.requests
    text = str(err.value)
    assert str(spec_path) in text and "ssla_plaintiff" in text and "design: fixed" in text
    tracker = _tracker(tmp_path)
    assert tracker.client.get_experiment_by_name("seq/f1") is None  # nothing was logged


@pytest.mark.data
def test_dry_run_gives_upper_bounds_for_a_sequential_design(
    catalog: Catalog, tmp_path: Path
) -> None:
    from experiments.llm.gateway import LiteLLMModel
    from experiments.output import dry_run
    from experiments.sweeps.plan import dry_run_items, plan_tasks, trial_plan

    text = (
        "name: d\ntasks: [cuad_audit_rights]\nlimit: 100\nfixed: {demos: none}\n"
        "axes: {register: [technical, plain], format: [base, claude]}\n"
        "comparisons: [['register=technical,format=base', 'register=plain,format=base']]\n"
    )
    seq = load_spec(write(tmp_path, text + "design: sequential\nsequential: {max_rows: 30}\n"))
    fixed = load_spec(write(tmp_path, text, "fixed.yaml"))
    for spec in (seq, fixed):
        planned = plan_tasks(spec, catalog)
        items, _ = dry_run_items(
            catalog, planned, trial_plan(spec, planned, ("openai/x",)),
            lambda m: LiteLLMModel(m), spec,
        )  # fmt: skip
        if spec is seq:
            # only the two named variants run; each at most the budget's 30 rows
            assert [it["variant"] for it in items] == [
                "register=technical,format=base",
                "register=plain,format=base",
            ]
            assert all(it["n"] == 30 and it["bound"] == "upper" for it in items)
            assert all(it["grid_n"] == len(planned[0].rows) > 30 for it in items)
            assert "upper bounds, 60 calls at most" in dry_run(items, [])
        else:
            assert len(items) == 4 and all("bound" not in it for it in items)
            assert f"fixed design: {4 * len(planned[0].rows)} calls" in dry_run(items, [])


def test_a_best_vs_worst_call_that_leaves_several_arms_does_not_name_the_best() -> None:
    """Elimination's "best" holds for best vs worst; with two arms still in contention the
    table says the best is not identified, instead of naming one of them."""
    from experiments.output import sequential_table

    row = {"model": "m", "task": "t", "a": "v1", "b": "v3", "score_a": 0.9, "score_b": 0.6,
           "estimate": 0.3, "ci_low": 0.1, "ci_high": 0.5, "n": 200, "budget": 1000,
           "looks": [10, 20], "decision": "best", "best_identified": False,
           "in_contention": ["v1", "v2"], "eliminated": [], "batch": 10, "delta": None,
           "sequence": "s", "alpha": 0.05, "family_alpha": 0.05, "status": "decided"}  # fmt: skip
    text = sequential_table([row])
    assert "best is not identified (still in contention: v1, v2)" in text
    assert "  best\n" not in text
    text = sequential_table([row | {"best_identified": True, "in_contention": ["v1"]}])
    assert "not identified" not in text


@pytest.mark.slow
def test_the_parent_run_says_whether_best_of_k_identified_the_best(tmp_path: Path) -> None:
    """Issue 29, point 1: the table says when a best-of-k "best" leaves several arms in
    contention; the parent run's tags (a real local MLflow store) say it too, instead of a
    bare "best" decision tag: the decision reads "best (not identified: ...)", and the tags
    best_identified / in_contention name the arms not told apart."""
    from experiments.names import metric_key, sequential_metric_name

    tracker = _tracker(tmp_path)
    parent = tracker.parent_run("bok", "b" * 64, {})
    common = {"model": "openai/stub", "task": "hearsay", "comparison": "best_vs_worst",
              "n": 200, "estimate": 0.3, "ci_low": 0.1, "ci_high": 0.5, "looks": [10, 20],
              "decision": "best", "eliminated": [{"variant": "v3", "rows": 20, "by": "v1"}]}  # fmt: skip
    tied = common | {"a": "v1", "b": "v4", "best_identified": False, "in_contention": ["v1", "v2"]}
    alone = common | {"a": "v5", "b": "v6", "best_identified": True, "in_contention": ["v5"]}
    pair = common | {"a": "x", "b": "y", "comparison": "pair", "decision": "A"}
    tracker.log_cost(parent, {"model_calls": 3}, [tied, alone, pair])
    tags = tracker.client.get_run(parent).data.tags

    def tag(row: dict[str, Any], measure: str) -> str | None:
        return tags.get(metric_key(sequential_metric_name(row, measure)))

    assert tag(tied, "decision") == "best (not identified: in contention v1, v2)"
    assert tag(tied, "best_identified") == "false" and tag(tied, "in_contention") == "v1, v2"
    assert tag(alone, "decision") == "best" and tag(alone, "best_identified") == "true"
    assert tag(alone, "in_contention") == "v5"
    # a listed pair has no best to identify: its decision alone, no best-of-k tags
    assert tag(pair, "decision") == "A" and tag(pair, "best_identified") is None
