"""Optimisation: the dev/held-out split, the held-out guard, and a full Optuna study with a
scripted LM (fast), tracked in MLflow."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import dev_order, split_dev_heldout
from experiments.optimize.optimize import optimize
from experiments.optimize.space import search_space
from experiments.tracking import Tracker, load_config
from promptlib import Catalog, LeakageError, compile_prompt, parse_spec
from promptlib.errors import WorkbenchError
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


class SpyLM(LMDefaults):
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
    best = tracker.client.load_prompt("prompts:/hearsay.best@best")
    assert "{{text}}" in best.template


# ---- provider failures: FAIL trials, then a refused verdict ----------------------------------
@pytest.mark.slow
def test_failed_rows_fail_optuna_trials_and_the_verdict_refuses_partial_data(
    catalog: Catalog, tracker: Tracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    from experiments.llm.gateway import get_model
    from experiments.optimize.errors import IncompleteEvaluation
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

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
    stub = StubOpenAI(reply_fn=hashed_yes_no, fail_fn=fails).start()
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

    # healthy again (same server): the same study resumes, and the verdict is given
    cfg.n_trials = 1
    stub.fail_fn = None
    try:
        report = optimize(cfg, catalog, lm, tracker)
        # another server is another setup: the study refuses to mix its trials in
        with StubOpenAI(reply_fn=hashed_yes_no) as other:
            elsewhere = get_model("openai/stub", api_base=other.url, max_retries=0)
            with pytest.raises(WorkbenchError, match="another model"):
                optimize(cfg, catalog, elsewhere, tracker)
            assert not other.requests
    finally:
        stub.stop()
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


# ---- an unbiased search: stratified dev order, pruners ---------------------------------------
@pytest.mark.parametrize("name", ["hearsay", "proa"])
def test_every_chunk_keeps_the_dev_class_balance(catalog: Catalog, name: str) -> None:
    """LegalBench files are label-sorted (hearsay's first 16 dev rows in file order are all
    "No"); in the search's order every prefix has dev's class shares to within one row."""
    task = catalog.task(name)
    split = split_dev_heldout(task)
    answers = {r["index"]: r["answer"] for r in task.rows("test")}
    file_first = Counter(answers[i] for i in split.dev[:16])
    assert len(file_first) == 1, "the data is no longer label-sorted: this test lost its point"
    order = dev_order(task, split)
    assert sorted(order) == sorted(split.dev)
    assert order == dev_order(task, split) != dev_order(task, split_dev_heldout(task, seed=1))
    whole = Counter(answers[i] for i in order)
    for n_chunks in (3, 10):
        for chunk in _chunks_of(order, n_chunks):
            counts = Counter(answers[i] for i in chunk)
            for label, k in whole.items():
                share, dev_share = counts[label] / len(chunk), k / len(order)
                assert abs(share - dev_share) <= 1 / len(chunk) + 1e-9, (n_chunks, len(chunk))
    # --dev-limit: a stratified seeded sample, not the first N rows of the file
    sample = dev_order(task, split, limit=12)
    counts = Counter(answers[i] for i in sample)
    assert len(sample) == 12 and len(counts) == 2
    assert all(abs(counts[c] / 12 - k / len(order)) <= 1 / 12 for c, k in whole.items())


def _chunks_of(order: list[str], n: int) -> list[list[str]]:
    """The growing prefixes the median pruner scores (the search's batches, accumulated)."""
    from experiments.optimize.dev import _batches

    out: list[str] = []
    prefixes = []
    for batch in _batches(order, n):
        out += batch
        prefixes.append(list(out))
    return prefixes


class AlwaysNo(LMDefaults):
    name = "scripted/no"
    mode = "completion"
    concurrency = 1

    def __init__(self) -> None:
        self.calls = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.calls += 1
        return Completion(" No")


class NoTracker:
    """The tracker interface optimize uses, recording nothing (MLflow is tested above)."""

    def study_parent(self, *args: Any, **kwargs: Any) -> str:
        return "parent"

    def log_search_space(self, *args: Any, **kwargs: Any) -> None:
        pass

    def finish(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_trial(self, *args: Any, **kwargs: Any) -> None:
        pass

    def register_best(self, *args: Any, **kwargs: Any) -> None:
        return None

    def log_study_summary(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_cost(self, *args: Any, **kwargs: Any) -> None:
        pass


def _u(*parts: str) -> float:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class ScriptedByVariant(LMDefaults):
    """Accuracy set by the variant: 0.5, +0.3 with the answer hint, +0.15 in Claude format.

    Half of each row's outcome is decided by the row alone (shared by every variant, as a
    real instance is easy or hard for every prompt), half by the whole prompt; both ways a
    row is right with probability p(variant). Deterministic.
    """

    mode = "completion"
    concurrency = 1

    def __init__(self, task: Any, name: str = "scripted/variant") -> None:
        self.name = name
        self.gold = {r["text"].strip(): r["answer"] for r in task.rows("test")}
        self.calls = 0

    @staticmethod
    def p(hint: bool, claude: bool) -> float:
        return 0.5 + 0.3 * hint + 0.15 * claude

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.calls += 1
        query = prompt.rsplit("Q:", 1)[-1]
        gold = next(a for t, a in self.gold.items() if t in query)
        p = self.p("Answer with one of" in prompt, "Reply with either" in prompt)
        u = _u("row", query) if _u("half", query) < 0.5 else _u("prompt", prompt)
        return Completion(" " + (gold if u < p else {"Yes": "No", "No": "Yes"}[gold]))


def _study(cfg: OptimizeConfig, report: Any) -> Any:
    import optuna

    return optuna.load_study(study_name=report.study, storage=str(cfg.storage))


def test_always_no_scores_chance_at_the_first_checkpoint(catalog: Catalog, tmp_path: Path) -> None:
    """With dev in file order, an always-"No" prompt scored 1.0 on hearsay's first chunk."""
    cfg = OptimizeConfig(
        task="hearsay", model="scripted/no", n_trials=1, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", pruner="median", heldout_limit=10,
    )  # fmt: skip
    report = optimize(cfg, catalog, AlwaysNo(), NoTracker())
    (trial,) = _study(cfg, report).trials
    assert trial.intermediate_values[0] == pytest.approx(0.5)  # balanced accuracy, both classes
    assert trial.value == pytest.approx(0.5)


def test_wilcoxon_reports_each_row_at_its_position_and_prunes_losers(
    catalog: Catalog, tmp_path: Path
) -> None:
    from experiments.optimize.study import CALLS_ATTR

    lm = ScriptedByVariant(catalog.task("hearsay"))
    cfg = OptimizeConfig(
        task="hearsay", model=lm.name, n_trials=12, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=0, pruner="wilcoxon", heldout_limit=10,
    )  # fmt: skip
    report = optimize(cfg, catalog, lm, NoTracker())
    study = _study(cfg, report)
    task = catalog.task("hearsay")
    dev = dev_order(task, split_dev_heldout(task))
    assert study.user_attrs["evaluation"]["dev"] == dev
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    assert complete and pruned, "pick a seed whose random trials include clearly worse ones"
    for t in complete:
        # one value per dev row, at the row's position; their mean is the dev score
        assert sorted(t.intermediate_values) == list(range(len(dev)))
        mean = sum(t.intermediate_values.values()) / len(dev)
        assert mean == pytest.approx(t.value)
        assert t.user_attrs[CALLS_ATTR] == len(dev)
    for t in pruned:  # a pruned trial stopped calling the model
        assert t.user_attrs[CALLS_ATTR] == len(t.intermediate_values) < len(dev)
    assert report.search_model_calls == sum(t.user_attrs[CALLS_ATTR] for t in study.trials)


@pytest.mark.parametrize("pruner", ["wilcoxon", "median", "none"])
def test_failed_rows_fail_the_trial_whatever_the_pruner(
    catalog: Catalog, tmp_path: Path, pruner: str
) -> None:
    class FailsClaude(SpyLM):
        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            if "Reply with either" in prompt:  # the Claude format: a provider error
                return Completion(None, error="APIError 500 after 5 attempt(s): internal error")
            return super().complete(prompt, decoding)

    cfg = OptimizeConfig(
        task="hearsay", model="scripted/lm", n_trials=8, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=3, pruner=pruner, dev_limit=16, heldout_limit=10,
    )  # fmt: skip
    report = optimize(cfg, catalog, FailsClaude(), NoTracker())
    trials = _study(cfg, report).trials
    assert any(t.params.get("format") == "claude" for t in trials)
    for t in trials:
        failed = t.params.get("format") == "claude"
        assert (t.state.name == "FAIL") == failed
        if failed:
            assert t.value is None and "rows failed" in t.user_attrs["failure"]
    assert report.n_failed == sum(t.params.get("format") == "claude" for t in trials)


def test_a_worker_that_would_evaluate_otherwise_is_refused(
    catalog: Catalog, tmp_path: Path
) -> None:
    def cfg(pruner: str, dev_limit: int) -> OptimizeConfig:
        return OptimizeConfig(
            task="hearsay", model="scripted/lm", n_trials=1, storage=f"sqlite:///{tmp_path}/o.db",
            heldout_limit=10, pruner=pruner, dev_limit=dev_limit,
        )  # fmt: skip

    optimize(cfg("wilcoxon", 12), catalog, SpyLM(), NoTracker())
    for pruner, dev_limit in (("median", 12), ("wilcoxon", 14)):
        with pytest.raises(WorkbenchError, match="evaluates trials with another"):
            optimize(cfg(pruner, dev_limit), catalog, SpyLM(), NoTracker())


@pytest.mark.slow
def test_default_pruner_saves_calls_without_pruning_a_better_trial(
    catalog: Catalog, tmp_path: Path
) -> None:
    """The README's pruner measurement, reduced: a model whose accuracy is set by the variant."""
    from experiments.optimize.config import DEFAULT_PRUNER

    def true_p(params: dict[str, Any]) -> float:
        return ScriptedByVariant.p(bool(params["answer_hint"]), params["format"] == "claude")

    task = catalog.task("hearsay")
    studies = {}
    for pruner in (DEFAULT_PRUNER, "none"):
        cfg = OptimizeConfig(
            task="hearsay", model="scripted/variant", n_trials=16, sampler="tpe", seed=0,
            storage=f"sqlite:///{tmp_path}/{pruner}.db", pruner=pruner, heldout_limit=10,
        )  # fmt: skip
        report = optimize(cfg, catalog, ScriptedByVariant(task), NoTracker())
        studies[pruner] = (report, _study(cfg, report))
    (fast, pruned_study), (full, full_study) = studies[DEFAULT_PRUNER], studies["none"]
    assert fast.n_pruned > 0 and fast.search_model_calls < full.search_model_calls
    incumbent, best_value = None, -1.0  # the true accuracy of the best trial so far
    for t in sorted(pruned_study.trials, key=lambda t: t.number):
        if t.state.name == "PRUNED" and incumbent is not None:
            assert true_p(t.params) <= incumbent, f"trial {t.number} was better than the best"
        if t.state.name == "COMPLETE" and t.value > best_value:
            incumbent, best_value = true_p(t.params), t.value
    assert true_p(pruned_study.best_params) == true_p(full_study.best_params)


def test_a_failing_rerun_never_demotes_a_finished_study(
    catalog: Catalog, tracker: Tracker, tmp_path: Path
) -> None:
    """A rerun of a FINISHED study whose every call fails (the server down) ends in its error,
    and the study's parent run stays FINISHED with its verdict: a rerun never demotes a
    finished result (issue 30, defect 15's class)."""

    class Down(SpyLM):
        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            return Completion(None, error="APIError 500 after 1 attempt(s): internal error")

    cfg = OptimizeConfig(
        task="hearsay", model="scripted/lm", n_trials=2, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=1, dev_limit=12, heldout_limit=10,
    )  # fmt: skip
    report = optimize(cfg, catalog, SpyLM(), tracker)
    exp = tracker.client.get_experiment_by_name(f"t/optimize/{report.study}")

    def parent() -> Any:
        runs = tracker.client.search_runs([exp.experiment_id])
        (run,) = [r for r in runs if r.data.tags.get("workbench.kind") == "study"]
        return run

    before = parent()
    assert before.info.status == "FINISHED"
    with pytest.raises(WorkbenchError):
        optimize(cfg, catalog, Down(), tracker)
    after = parent()
    assert after.info.status == "FINISHED"
    assert after.data.metrics["heldout_score"] == before.data.metrics["heldout_score"]
