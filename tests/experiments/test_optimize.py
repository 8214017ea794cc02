"""Optimisation: the dev/held-out split, the held-out guard, and a full Optuna study with a
scripted LM (fast), tracked in MLflow."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from experiments.models import Completion, Decoding
from experiments.optimize import OptimizeConfig, optimize, search_space, split_dev_heldout
from experiments.tracking import Tracker, load_config
from promptlib import Catalog, LeakageError, compile_prompt, parse_spec
from promptlib.render import heldout_guard

pytestmark = pytest.mark.data


def test_split_is_stratified_seeded_and_disjoint(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    a = split_dev_heldout(task, seed=3)
    assert a == split_dev_heldout(task, seed=3) != split_dev_heldout(task, seed=4)
    assert not set(a.dev) & set(a.heldout)
    assert len(a.dev) + len(a.heldout) == 95
    answers = {r["index"]: r["answer"] for r in task.rows("test")}
    dev_share = Counter(answers[i] for i in a.dev)["Yes"] / len(a.dev)
    held_share = Counter(answers[i] for i in a.heldout)["Yes"] / len(a.heldout)
    assert abs(dev_share - held_share) < 0.05


def test_split_keeps_repeated_texts_on_one_side(catalog: Catalog) -> None:
    """cuad_audit_rights repeats hundreds of clauses under other indices (other contracts)."""
    task = catalog.task("cuad_audit_rights")
    split = split_dev_heldout(task)
    rows = {r["index"]: r for r in task.rows("test")}
    text = {i: " ".join(r["text"].split()) for i, r in rows.items()}
    assert len(set(text.values())) < len(rows) - 300  # the data really repeats texts
    assert not {text[i] for i in split.dev} & {text[i] for i in split.heldout}
    assert len(split.dev) + len(split.heldout) == len(rows)


def test_rendering_a_heldout_row_inside_the_guard_raises(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    rows = {r["index"]: r for r in task.rows("test")}
    compiled = compile_prompt(parse_spec("base"), task)
    held = rows[split.heldout[0]]
    with heldout_guard("hearsay", [rows[i] for i in split.heldout]):
        compiled.render(rows[split.dev[0]])  # dev rows are fine
        with pytest.raises(LeakageError, match="held-out row was rendered"):
            compiled.render(held)
        # caught by content too: the row without its index or answer
        with pytest.raises(LeakageError):
            compiled.render({"text": held["text"]})
    compiled.render(held)  # outside the search, held-out rows render


def test_search_space_says_what_it_leaves_out(catalog: Catalog) -> None:
    space = search_space(catalog.task("hearsay"))
    assert space.instruction == ["base", "reference", "description"]
    assert space.register == ["default"]
    assert "k2" in space.demos and "k4" in space.demos and "k6" not in space.demos
    assert any("register" in n for n in space.notes)
    cuad = search_space(catalog.task("cuad_audit_rights"))
    assert cuad.register == ["default", "plain", "technical"] and cuad.instruction == ["base"]


class SpyLM:
    """Scripted answers; remembers every prompt it is asked."""

    name = "scripted/lm"
    mode = "completion"
    concurrency = 1

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        query = prompt.rsplit("Q:", 1)[-1]
        return Completion(" Yes" if ("said" in query or "Answer with one of" in prompt) else " No")


@pytest.fixture
def tracker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tracker:
    cfg = tmp_path / "mlflow.yaml"
    cfg.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: true\n"
    )
    return Tracker(load_config(cfg))


def test_optuna_study_never_shows_heldout_rows_to_the_model(
    catalog: Catalog, tracker: Tracker, tmp_path: Path
) -> None:
    lm = SpyLM()
    cfg = OptimizeConfig(
        task="hearsay", model="scripted/lm", n_trials=6, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=1,
    )  # fmt: skip
    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    held_texts = {r["text"] for r in task.rows("test") if r["index"] in split.heldout}
    report = optimize(cfg, catalog, lm, tracker)
    n_search = len(lm.prompts) - 2 * len(split.heldout)  # the last calls are the verdict
    search_prompts = lm.prompts[: max(n_search, 0)]
    assert search_prompts
    for p in search_prompts:
        query = p.rsplit("Q:", 1)[-1]
        assert not any(t in query for t in held_texts)
    assert report.n_trials == 6 and report.heldout["n"] > 0
    assert 0 < report.p_value <= 1
    assert report.heldout_indices == list(split.heldout)
    # MLflow: one parent for the study, a child run per evaluated trial, the best prompt
    client = tracker.client
    exp = client.get_experiment_by_name(f"t/optimize/{report.study}")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
    # every trial that evaluated rows has exactly one child run (pruned ones included)
    logged = sorted(int(r.data.params["optuna.trial"]) for r in children)
    assert len(logged) == len(set(logged)) == 6
    assert all(r.info.status == "FINISHED" for r in children)
    assert all("instruction" in r.data.params for r in children)
    import mlflow

    best = mlflow.genai.load_prompt("prompts:/hearsay.best@best")
    assert "{{text}}" in best.template


# ---- provider failures: FAIL trials, then a refused verdict ----------------------------------
@pytest.mark.slow
def test_failed_rows_fail_optuna_trials_and_the_verdict_refuses_partial_data(
    catalog: Catalog, tracker: Tracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    from experiments.models import get_model
    from experiments.optimize import IncompleteEvaluation
    from experiments.stub_server import StubOpenAI, hashed_yes_no

    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    held_texts = [r["text"] for r in task.rows("test") if r["index"] in split.heldout]

    def fails(prompt: str) -> bool:
        # the Claude format fails on every row; so does every held-out row
        return "Reply with either" in prompt or any(t in prompt for t in held_texts)

    storage = f"sqlite:///{tmp_path}/o.db"
    cfg = OptimizeConfig(
        task="hearsay", model="openai/stub", n_trials=8, storage=storage, sampler="random",
        seed=3, dev_limit=12, heldout_limit=10,
    )  # fmt: skip
    with StubOpenAI(reply_fn=hashed_yes_no, fail_fn=fails) as stub:
        lm = get_model("openai/stub", api_base=stub.url, max_retries=0, concurrency=4)
        with pytest.raises(IncompleteEvaluation, match="held-out evaluation incomplete") as err:
            optimize(cfg, catalog, lm, tracker)
        assert err.value.exit_code == 1
    import optuna

    study = optuna.load_study(study_name="hearsay.openai_stub.optuna", storage=storage)
    states = {t.number: t.state.name for t in study.trials}
    assert len(states) == 8, "the study went on after failed trials"
    failed = [t for t in study.trials if t.state.name == "FAIL"]
    assert failed, "seed 3 draws no Claude-format trial: pick another seed"
    for t in study.trials:
        claude = t.params.get("format") == "claude"
        assert (t.state.name == "FAIL") == claude
        if claude:
            assert t.value is None and "rows failed" in t.user_attrs["failure"]
    # MLflow: the failed trials' runs are FAILED with n_errors, never a score of 0.0
    exp = tracker.client.get_experiment_by_name("t/optimize/hearsay.openai_stub.optuna")
    runs = tracker.client.search_runs([exp.experiment_id])
    for r in runs:
        if r.data.params.get("optuna.state") == "FAIL":
            assert r.info.status == "FAILED" and r.data.metrics["n_errors"] > 0
            assert "score" not in r.data.metrics
    parent = [r for r in runs if r.data.tags.get("workbench.kind") == "study"]
    assert len(parent) == 1 and parent[0].info.status == "FAILED"
    assert "p_value.best_vs_base" not in parent[0].data.metrics

    # healthy again: the same study resumes, and the verdict is given
    cfg.n_trials = 1
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        lm = get_model("openai/stub", api_base=stub.url, max_retries=0, concurrency=4)
        report = optimize(cfg, catalog, lm, tracker)
    assert report.n_trials == 9 and 0 < report.p_value <= 1
    assert report.heldout["n"] == 10


def test_resumed_study_with_another_mlflow_store_gets_a_parent_there(
    catalog: Catalog, tmp_path: Path
) -> None:
    """The study lives in Optuna's storage; each MLflow store gets its own parent run."""
    storage = f"sqlite:///{tmp_path}/o.db"
    reports = []
    for store in ("one", "two"):
        cfg_file = tmp_path / f"{store}.yaml"
        cfg_file.write_text(
            f"tracking_uri: sqlite:///{tmp_path}/{store}.db\nartifact_location: "
            f"{tmp_path}/{store}-art\nexperiment_prefix: t\nprompt_registry: false\n"
        )
        tracker = Tracker(load_config(cfg_file))
        cfg = OptimizeConfig(
            task="hearsay", model="scripted/lm", n_trials=2, storage=storage, sampler="random",
            dev_limit=12, heldout_limit=10,
        )  # fmt: skip
        reports.append(optimize(cfg, catalog, SpyLM(), tracker))
        exp = tracker.client.get_experiment_by_name(f"t/optimize/{reports[-1].study}")
        runs = tracker.client.search_runs([exp.experiment_id])
        parents = [r for r in runs if r.data.tags.get("workbench.kind") == "study"]
        children = [r for r in runs if r.data.tags.get("workbench.kind") == "trial"]
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        assert len(children) == 2  # this invocation's trials, under this store's parent
    assert [r.n_trials for r in reports] == [2, 4]  # one study, resumed
