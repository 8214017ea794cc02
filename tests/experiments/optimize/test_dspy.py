"""DSPy on the workbench's rails: the held-out guard stops a compile, calls go through the
gateway (api_base, concurrency, retries, cache), failed calls are not scores, and the dev
score leaves the program's own demonstrations out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import dev_order, split_dev_heldout
from experiments.optimize.errors import IncompleteEvaluation
from experiments.optimize.optimize import optimize
from promptlib import Catalog, LeakageError
from promptlib.leakage import heldout_guard
from tests.conftest import workbench_env

pytestmark = pytest.mark.data


class SpyLM(LMDefaults):
    """Answers "Yes" when the query mentions "said", else "No"; remembers every prompt."""

    name = "scripted/lm"
    mode = "completion"
    concurrency = 1

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        return Completion(" Yes" if "said" in prompt.rsplit("Q:", 1)[-1] else " No")


class NoTracker:
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


def _cfg(method: str, **kw: Any) -> OptimizeConfig:
    return OptimizeConfig(**{"task": "hearsay", "model": "scripted/lm", "method": method, **kw})


# ---- a LeakageError aborts the compile ---------------------------------------------------------
def test_a_heldout_row_given_to_dspy_aborts_the_bootstrap(catalog: Catalog) -> None:
    """A buggy caller hands DSPy held-out rows: the guard's LeakageError is raised, not
    swallowed by DSPy's max_errors and scored as a wrong answer."""
    from experiments.optimize.dspy_programs import compile_dspy

    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    rows = {r["index"]: r for r in task.rows("test")}
    held = [rows[i] for i in split.heldout]
    lm = SpyLM()
    dev = list(split.dev[:6]) + list(split.heldout[:6])
    with heldout_guard("hearsay", held), pytest.raises(LeakageError, match="held-out row"):
        compile_dspy(_cfg("dspy-bootstrap", n_trials=2), task, dev, lm)
    held_texts = {r["text"] for r in held}
    for p in lm.prompts:  # nothing held-out reached the model, as query or as demonstration
        assert not any(t in p for t in held_texts)


def test_a_program_showing_a_heldout_demonstration_is_refused(catalog: Catalog) -> None:
    """The render of a DSPy program checks its demonstrations against the guard too."""
    import dspy

    from experiments.optimize.dspy_programs import (
        LegalBenchAdapter,
        Rails,
        gateway_lm,
        make_signature,
    )

    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    rows = {r["index"]: r for r in task.rows("test")}
    held, query = rows[split.heldout[0]], rows[split.dev[0]]
    rails = Rails()
    adapter = LegalBenchAdapter(task, rails)
    program = dspy.Predict(make_signature(task))
    program.demos = [dspy.Example(text=held["text"], answer=held["answer"])]
    lm = SpyLM()
    evaluate = dspy.Evaluate(
        devset=[dspy.Example(text=query["text"], answer=query["answer"]).with_inputs("text")],
        metric=lambda e, p, t=None: True,
        max_errors=10_000,  # DSPy swallows the error here...
        display_progress=False,
    )
    glm = gateway_lm(lm, None, Decoding(mode="completion"), rails)
    with heldout_guard("hearsay", [held]), dspy.context(lm=glm, adapter=adapter.dspy_adapter):
        evaluate(program)
    assert isinstance(rails.error, LeakageError)  # ... but the rails keep it for compile_dspy
    assert lm.prompts == []


def test_labeled_demos_from_heldout_rows_are_refused_at_export(catalog: Catalog) -> None:
    from experiments.optimize.dspy_programs import compile_dspy

    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    rows = {r["index"]: r for r in task.rows("test")}
    with (
        heldout_guard("hearsay", [rows[i] for i in split.heldout]),
        pytest.raises(LeakageError),
    ):
        compile_dspy(_cfg("dspy-labeled"), task, list(split.heldout[:8]), SpyLM())


# ---- the dev score leaves the program's demonstrations out -------------------------------------
def test_dev_score_excludes_the_programs_own_demonstrations(
    catalog: Catalog, tmp_path: Path
) -> None:
    task = catalog.task("hearsay")
    split = split_dev_heldout(task)
    dev = dev_order(task, split, limit=20)
    text = {r["index"]: r["text"] for r in task.rows("test")}
    lm = SpyLM()
    report = optimize(
        _cfg("dspy-labeled", dev_limit=20, heldout_limit=10), catalog, lm, NoTracker()
    )
    demos = report.best_variant.split("rows[", 1)[1].rstrip("]").split("+")
    demo_idx = {d.split(":", 1)[1] for d in demos}
    assert all(d.startswith("test:") for d in demos) and demo_idx <= set(dev)
    # LabeledFewShot makes no call: the search's calls are the runner's dev evaluation
    search = lm.prompts[: report.search_model_calls]
    queries = [p.rsplit("Q:", 1)[-1] for p in search]
    assert len(search) == len(dev) - len(demo_idx)
    for i in demo_idx:
        assert not any(text[i] in q for q in queries), f"demo row {i} was scored"
    assert any("left out are the program's demonstrations" in n for n in report.search_notes)


# ---- provider failures are not scores ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("method", ["dspy-labeled", "dspy-bootstrap"])
def test_failed_calls_stop_a_dspy_search_instead_of_scoring_it(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    from experiments.llm.gateway import get_model
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    task = catalog.task("hearsay")
    dev = dev_order(task, split_dev_heldout(task), limit=12)
    bad = {r["text"] for r in task.rows("test") if r["index"] in dev[6:]}

    def fails(prompt: str) -> bool:
        return any(t in prompt.rsplit("Q:", 1)[-1] for t in bad)

    cfg = _cfg(method, dev_limit=12, heldout_limit=10)
    cfg.model = "openai/stub"
    with StubOpenAI(reply_fn=hashed_yes_no, fail_fn=fails) as stub:
        lm = get_model("openai/stub", api_base=stub.url, max_retries=0, concurrency=2)
        with pytest.raises(IncompleteEvaluation, match="Rerun the same command") as err:
            optimize(cfg, catalog, lm, NoTracker())
    assert err.value.exit_code == 1


# ---- the gateway: --api-base, concurrency, retries, the response cache -------------------------
@pytest.mark.slow
def test_dspy_calls_go_through_the_gateway_and_the_cache(lb_dir: Path, tmp_path: Path) -> None:
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    env = workbench_env(tmp_path, lb_dir, "dspy")
    env["OPENAI_API_KEY"] = "sk-dummy-key-for-the-local-stub"
    # the first request fails with a 500: the gateway's retry answers it
    with StubOpenAI(reply_fn=hashed_yes_no, latency=0.02, script=["500"]) as stub:
        args = [
            sys.executable, "-m", "experiments.cli", "optimize", "hearsay",
            "--model", "openai/stub", "--api-base", stub.url, "--method", "dspy-bootstrap",
            "--trials", "2", "--dev-limit", "16", "--heldout-limit", "10",
            "--concurrency", "2", "--retries", "2", "--json",
        ]  # fmt: skip
        runs = []
        for _ in range(2):
            before = len(stub.requests)
            r = subprocess.run(
                args, env=env, cwd=os.getcwd(), capture_output=True, text=True, timeout=600
            )
            assert r.returncode == 0, r.stderr[-3000:]
            runs.append((json.loads(r.stdout), len(stub.requests) - before))
    (first, n_first), (second, n_second) = runs
    assert n_first > 0 and stub.counts["500"] == 1  # reached the stub, retried there
    assert first["search_model_calls"] > 0
    assert all(req.get("model") == "stub" for req in stub.requests)
    assert 1 <= stub.max_in_flight <= 2  # --concurrency
    assert n_second == 0 and second["search_model_calls"] == 0  # all from the response cache
    assert second["best_variant"] == first["best_variant"]
    assert second["dev_score"] == first["dev_score"]
