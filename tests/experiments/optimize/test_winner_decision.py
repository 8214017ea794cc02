"""`workbench optimize` ends with a decision (issue 31, point 2): "use the best variant" only
when it beats the base prompt on held-out rows, else "keep the base prompt"; the winner is
written to a file it names, with the exact command that reruns it, and the study's MLflow
run carries the same JSON (report.json's best_variant_json, best_variant.json)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from experiments import output
from experiments.analysis.decision import for_heldout
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.dev import split_dev_heldout
from experiments.optimize.optimize import optimize
from experiments.optimize.winner import rerun_command, save_winner, study_folder
from experiments.tracking import Tracker, load_config
from promptlib import Catalog, PromptVariant, compile_prompt, load_variant_file, parse_spec
from tests.conftest import run_cli, workbench_env

FIXED = {"statistic": -0.138, "p_value": 0.2, "difference_ci_low": -0.3,
         "difference_ci_high": 0.02, "heldout": {"n": 95}, "mde_80": 0.21}  # fmt: skip


# ---- the line ---------------------------------------------------------------------------------
def test_a_best_variant_below_the_base_prompt_says_keep_the_base_prompt() -> None:
    """The report that started issue 31: held-out 0.523 for the winner, 0.661 for the base."""
    rec = for_heldout(FIXED, "instruction=description", best_is_base=False)
    assert (rec.action, rec.choice) == ("keep", "base")
    assert rec.line == (
        "keep the base prompt: the best variant instruction=description does not beat it on "
        "held-out rows (best - base -0.138, 95% CI [-0.300, +0.020], p 0.2000 >= 0.05; n 95, "
        "MDE80 0.210: differences smaller than that would often be missed)"
    )
    worse = for_heldout({**FIXED, "p_value": 0.01, "difference_ci_high": -0.05}, "x", False)
    assert worse.action == "keep" and worse.line.startswith(
        "keep the base prompt: it beats the best variant x on held-out rows (best - base -0.138"
    )


def test_a_best_variant_that_beats_the_base_prompt_says_use_it() -> None:
    won = {**FIXED, "statistic": 0.08, "p_value": 0.004, "difference_ci_low": 0.03,
           "difference_ci_high": 0.13}  # fmt: skip
    rec = for_heldout(won, "answer_hint=on", best_is_base=False)
    assert (rec.action, rec.choice) == ("use", "answer_hint=on")
    assert rec.line == (
        "use the best variant answer_hint=on: it beats the base prompt on held-out rows "
        "(best - base +0.080, 95% CI [+0.030, +0.130], p 0.0040 < 0.05)"
    )
    # a positive difference that the test does not call is not a win
    assert for_heldout({**won, "p_value": 0.06}, "answer_hint=on", False).action == "keep"


def test_the_sequential_verdict_and_a_base_winner() -> None:
    seq = {"decision": "undecided", "estimate": 0.02, "ci_low": -0.1, "ci_high": 0.14,
           "n": 60, "planned": 60, "alpha": 0.05}  # fmt: skip
    rec = for_heldout({"sequential": seq, "p_value": None}, "x", False)
    assert rec.action == "keep" and "not decided at that level" in rec.line
    assert for_heldout({"sequential": {**seq, "decision": "A"}}, "x", False).action == "use"
    assert for_heldout(FIXED, "base", best_is_base=True).line == (
        "keep the base prompt: the search's best variant on dev is the base prompt itself"
    )


def test_the_report_prints_the_file_the_command_and_the_decision_last() -> None:
    rec = for_heldout(FIXED, "instruction=description", False).to_dict()
    r = {"task": "hearsay", "model": "m", "method": "optuna", "study": "s", "n_trials": 2,
         "n_pruned": 0, "n_failed": 0, "n_dev": 4, "dev_score": 0.8, "p_value": 0.2, "test": "t",
         "best_variant": "instruction=description", "best_params": {},
         "heldout": {"n": 95, "score": 0.523, "ci_low": 0.4, "ci_high": 0.6},
         "base_heldout": {"score": 0.661, "ci_low": 0.55, "ci_high": 0.75},
         "recommendation": rec, "best_variant_file": "reports/optimize/s/best_variant-ab.json",
         "rerun_command": "workbench run hearsay --variant-file x --model m"}  # fmt: skip
    lines = output.optimize_report(r).splitlines()
    assert "best variant file: reports/optimize/s/best_variant-ab.json" in lines
    assert "rerun the best variant: workbench run hearsay --variant-file x --model m" in lines
    assert lines[-1] == "decision: " + rec["line"]
    no_file = output.optimize_report({**r, "best_variant_file": None})
    assert "best_variant.json on the study's MLflow run" in no_file  # names what exists


# ---- the file -----------------------------------------------------------------------------------
def test_the_winner_file_is_never_overwritten_by_another(tmp_path: Path) -> None:
    one = parse_spec("instruction=reference").bound("hearsay", None).canonical_json()
    two = parse_spec("answer_hint=on").bound("hearsay", None).canonical_json()
    first = save_winner(tmp_path, "hearsay.m.optuna", one)
    assert first.parent == tmp_path / "optimize" / "hearsay.m.optuna"
    assert first.read_text() == one and load_variant_file(first).canonical_json() == one
    assert save_winner(tmp_path, "hearsay.m.optuna", one) == first  # the same winner: as is
    second = save_winner(tmp_path, "hearsay.m.optuna", two)
    assert second != first and first.read_text() == one and second.read_text() == two
    first.write_text(one + "\n")  # edited by hand: kept, the winner gets the next name
    third = save_winner(tmp_path, "hearsay.m.optuna", one)
    assert third.name == first.name.replace(".json", ".2.json") and third.read_text() == one
    assert first.read_text() == one + "\n"
    # a default name with a served model's ':' becomes a plain folder of its own
    odd = study_folder(tmp_path, "hearsay.ollama_llama3:8b.optuna")
    assert odd.parent == tmp_path / "optimize" and ":" not in odd.name


def test_the_rerun_command_quotes_and_carries_the_options() -> None:
    cmd = rerun_command(
        "hearsay", Path("reports/optimize/a b/best.json"), "openai/x", scoring="loglik",
        extra=["--api-base", "http://h:1/v1"],
    )  # fmt: skip
    assert shlex.split(cmd) == [
        "workbench", "run", "hearsay", "--variant-file", "reports/optimize/a b/best.json",
        "--model", "openai/x", "--scoring", "loglik", "--api-base", "http://h:1/v1",
    ]  # fmt: skip


# ---- a study, end to end ------------------------------------------------------------------------
class Scripted(LMDefaults):
    """Knows every hearsay answer. `base_prompts` get `base`'s behaviour, others `other`'s:
    "right", "no" (always No) or "dev" (right on dev rows, wrong on held-out rows)."""

    name = "scripted/lm"
    mode = "completion"
    concurrency = 1

    def __init__(self, catalog: Catalog, base: str, other: str) -> None:
        task = catalog.task("hearsay")
        rows = task.rows("test")
        self.answers = {r["text"]: r["answer"] for r in rows}
        heldout = set(split_dev_heldout(task, "test", 0.5, 0).heldout)
        self.heldout_texts = {r["text"] for r in rows if r["index"] in heldout}
        compiled = compile_prompt(PromptVariant(), task, "test")
        self.base_prompts = {compiled.render(r) for r in rows}
        self.base, self.other = base, other

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        text = max(self.answers, key=prompt.rfind)  # the row asked about: its text comes last
        how = self.base if prompt in self.base_prompts else self.other
        right = self.answers[text]
        wrong = "No" if right == "Yes" else "Yes"
        if how == "no":
            return Completion(" No")
        if how == "dev":
            return Completion(f" {wrong if text in self.heldout_texts else right}")
        return Completion(f" {right}")


def _study(tmp_path: Path, catalog: Catalog, lm: Scripted) -> tuple[dict[str, Any], Any]:
    cfg_file = tmp_path / "mlflow.yaml"
    cfg_file.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: false\n"
    )
    tracker = Tracker(load_config(cfg_file))
    cfg = OptimizeConfig(
        task="hearsay", model=lm.name, n_trials=3, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=3, dev_limit=12, heldout_limit=30, pruner="none",
    )  # fmt: skip
    report = optimize(cfg, catalog, lm, tracker).to_dict()
    return report, tracker


def _logged(tracker: Any, name: str) -> str:
    client = tracker.client
    exp = client.get_experiment_by_name("t/optimize/hearsay.scripted_lm.optuna")
    (run,) = client.search_runs([exp.experiment_id], "tags.`workbench.kind` = 'study'")
    return str(tracker._artifact_text(run.info.run_id, name))


@pytest.mark.data
def test_a_winner_that_fails_on_held_out_rows_is_not_recommended(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Right on dev, wrong on held-out: the search picks it, the verdict keeps the base."""
    report, tracker = _study(tmp_path, catalog, Scripted(catalog, base="right", other="dev"))
    assert report["best_variant"] != "base"
    assert report["heldout"]["score"] < report["base_heldout"]["score"]
    rec = report["recommendation"]
    assert (rec["action"], rec["choice"]) == ("keep", "base")
    assert rec["line"].startswith("keep the base prompt: it beats the best variant ")
    assert output.optimize_report(report).splitlines()[-1] == "decision: " + rec["line"]
    # the MLflow run carries what the printed text names
    logged = json.loads(_logged(tracker, "report.json"))
    assert logged["best_variant_json"] == report["best_variant_json"]
    assert logged["recommendation"] == rec
    assert _logged(tracker, "best_variant.json") == report["best_variant_json"]


@pytest.mark.data
def test_a_winner_that_beats_the_base_on_held_out_rows_is_recommended(
    catalog: Catalog, tmp_path: Path
) -> None:
    report, _ = _study(tmp_path, catalog, Scripted(catalog, base="no", other="right"))
    rec = report["recommendation"]
    assert report["p_value"] < 0.05 and report["heldout"]["score"] == 1.0
    assert (rec["action"], rec["choice"]) == ("use", report["best_variant"])
    assert rec["line"].startswith(f"use the best variant {report['best_variant']}: it beats")


@pytest.mark.data
def test_the_printed_file_reruns_the_winner(lb_dir: Path, tmp_path: Path) -> None:
    """`workbench optimize` on a stub server: the file it prints exists, and the command it
    prints, run as printed, reruns that variant (same id) from that file."""
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    env = workbench_env(tmp_path, lb_dir, "win") | {"WORKBENCH_RUNS_DIR": str(tmp_path / "runs")}
    env["OPENAI_API_KEY"] = "sk-dummy-key-for-the-local-stub"
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        cmd = ["optimize", "hearsay", "--model", "openai/stub", "--api-base", stub.url,
               "--trials", "2", "--sampler", "random", "--dev-limit", "8", "--heldout-limit", "8",
               "--storage", f"sqlite:///{tmp_path}/optuna.db"]  # fmt: skip
        r = run_cli(cmd, env, tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        (path,) = [x.split(": ", 1)[1] for x in lines if x.startswith("best variant file: ")]
        (again,) = [x.split(": ", 1)[1] for x in lines if x.startswith("rerun the best variant: ")]
        assert lines[-1].startswith(("decision: use the best variant", "decision: keep the base"))
        saved = tmp_path / path
        assert saved.is_file() and saved.parent.parent == tmp_path / "reports" / "optimize"
        args = shlex.split(again)
        assert args[:6] == ["workbench", "run", "hearsay", "--variant-file", path, "--model"]
        # as printed (`workbench` is `python -m experiments.cli` here), on 4 rows, as JSON
        rerun = run_cli([*args[1:], "--limit", "4", "--json", "--no-track"], env, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads(rerun.stdout)["variant_id"] == load_variant_file(saved).id
