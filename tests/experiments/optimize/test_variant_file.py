"""`workbench run --variant-file`: a variant saved as JSON (or an optimize report's winner)
reruns exactly: the same variant id, the same prompts. Bad files fail in one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.testing.stub_server import StubOpenAI
from promptlib import (
    Catalog,
    PromptVariant,
    VariantFileError,
    bind,
    compile_prompt,
    evaluation_rows,
    parse_spec,
)
from promptlib.variants import DemoRef, load_variant_file, variant_from_saved

EXPLICIT = PromptVariant(instruction="description").with_demo_rows(
    (DemoRef("train", "3"), DemoRef("train", "0"))
)


# ---- the loader -------------------------------------------------------------------------------
def test_canonical_json_and_optimize_reports_load_to_the_same_variant(tmp_path: Path) -> None:
    v = EXPLICIT.bound("hearsay", EXPLICIT.demo_rows)
    bare = tmp_path / "v.json"
    bare.write_text(v.canonical_json())
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"task": "hearsay", "best_variant_json": v.canonical_json()}))
    nested = {"best_variant_json": json.loads(v.canonical_json())}  # an object is fine too
    for loaded in (load_variant_file(bare), load_variant_file(report), variant_from_saved(nested)):
        assert loaded == v and loaded.id == v.id
    sampled = parse_spec("demos=4,seed=3,pool=train+test,answer_hint=on")
    assert variant_from_saved(json.loads(sampled.canonical_json())).id == sampled.id


BAD: list[tuple[str, str]] = [
    ("{", "is not valid JSON"),
    ("[1, 2]", "not a JSON list"),
    ('"base"', "not a JSON string"),
    ('{"demos": "none", "colour": "red"}', "unknown variant field(s) 'colour'"),
    ('{"demos": "sample", "k": "4", "seed": 0}', "field 'k' must be an integer or null"),
    ('{"demos": "sample", "k": true, "seed": 0}', "field 'k' must be an integer or null"),
    ('{"answer_hint": 1}', "field 'answer_hint' must be true or false"),
    ('{"demos": "rows", "demo_rows": [["train"]]}', "demo_rows must be a list of [split, index]"),
    ('{"demos": "rows", "demo_rows": []}', "demos=rows needs explicit demo_rows"),
    ('{"instruction": "refrence"}', "did you mean 'reference'"),
    ('{"best_variant_json": "{oops"}', "best_variant_json is not valid JSON"),
    ('{"best_variant_json": 3}', "(best_variant_json): expected the canonical JSON"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_variant_files_fail_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "v.json"
    f.write_text(text)
    with pytest.raises(VariantFileError) as err:
        load_variant_file(f)
    assert message in str(err.value) and str(f) in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_or_unreadable_variant_files(tmp_path: Path) -> None:
    with pytest.raises(VariantFileError, match="does not exist"):
        load_variant_file(tmp_path / "nope.json")
    with pytest.raises(VariantFileError, match="is a directory"):
        load_variant_file(tmp_path)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(VariantFileError, match="not UTF-8"):
        load_variant_file(tmp_path / "bin.json")


# ---- the CLI ----------------------------------------------------------------------------------
def workbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def one_line_error(r: subprocess.CompletedProcess[str], needle: str) -> None:
    assert r.returncode == 2 and r.stdout == "", r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr


@pytest.mark.slow
def test_cli_refuses_bad_variant_files_before_any_work(tmp_path: Path) -> None:
    f = tmp_path / "v.json"
    f.write_text(EXPLICIT.bound("hearsay", EXPLICIT.demo_rows).canonical_json())
    base = ["run", "hearsay", "--model", "openai/stub", "--api-base", "http://127.0.0.1:9"]
    one_line_error(
        workbench(*base, "--variant", "demos=none", "--variant-file", str(f)),
        "--variant or --variant-file, not both",
    )
    one_line_error(
        workbench(*base, "--variant-file", str(tmp_path / "missing.json")), "does not exist"
    )
    one_line_error(
        workbench(*base[:1], "overruling", *base[2:], "--variant-file", str(f)),
        "holds a variant of task 'hearsay', not 'overruling'",
    )


class Recorder:
    """Reply function for the stub server: remembers every prompt it answers."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self._lock:
            self.prompts.append(prompt)
        return "Yes"


def run_env(lb_dir: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub",
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
    }


def run_from_file(
    path: Path, lb_dir: Path, tmp_path: Path, limit: int = 8
) -> tuple[dict[str, Any], list[str], list[str]]:
    """`workbench run hearsay --variant-file PATH` on the stub: summary, indices, prompts."""
    rec = Recorder()
    with StubOpenAI(reply_fn=rec) as stub:
        r = workbench(
            "run", "hearsay", "--model", "openai/stub", "--api-base", stub.url,
            "--variant-file", str(path), "--limit", str(limit), "--no-cache", "--json",
            env=run_env(lb_dir, tmp_path),
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    lines = Path(summary["predictions"]).read_text().splitlines()
    indices = [json.loads(line)["index"] for line in lines]
    assert summary["n"] == len(indices) == len(rec.prompts) == limit
    return summary, indices, rec.prompts


@pytest.mark.data
def test_run_with_explicit_demo_rows_from_a_file_renders_exactly_that_variant(
    catalog: Catalog, lb_dir: Path, tmp_path: Path
) -> None:
    task = catalog.task("hearsay")
    v = bind(EXPLICIT, task)
    path = tmp_path / "winner.json"
    path.write_text(v.canonical_json())
    summary, indices, prompts = run_from_file(path, lb_dir, tmp_path)
    assert summary["variant_id"] == v.id == load_variant_file(path).id
    compiled = compile_prompt(v, task)
    assert compiled.variant.id == v.id
    rows = {r["index"]: r for r in task.rows("test")}
    assert sorted(prompts) == sorted(compiled.render(rows[i]) for i in indices)
    assert all(p.count("A: ") >= 2 for p in prompts)  # both demonstrations are shown


@pytest.mark.data
def test_run_from_an_optimize_report_matches_render(
    catalog: Catalog, lb_dir: Path, tmp_path: Path
) -> None:
    """A sampled winner saved bound (with its drawn rows) reruns as `render` shows it."""
    spec = "instruction=reference,demos=2,seed=4,pool=train"
    v = bind(parse_spec(spec), catalog.task("hearsay"))
    assert v.demo_rows is not None and len(v.demo_rows) == 2
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"task": "hearsay", "best_variant_json": v.canonical_json()}))
    summary, indices, prompts = run_from_file(path, lb_dir, tmp_path)
    assert summary["variant_id"] == v.id
    r = workbench("render", "hearsay", "--variant", spec, "--json", env=run_env(lb_dir, tmp_path))
    assert r.returncode == 0, r.stderr
    rendered = {it["index"]: it["prompt"] for it in json.loads(r.stdout)}
    assert sorted(prompts) == sorted(rendered[i] for i in indices)


# ---- optimize -> report -> rerun ------------------------------------------------------------
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
        return Completion(" Yes" if "said" in query else " No")


@pytest.mark.data
def test_optimize_report_carries_the_winner_and_rerunning_it_gives_the_verdicts_prompts(
    catalog: Catalog, tmp_path: Path
) -> None:
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.optimize import optimize
    from experiments.optimize.report import dumps
    from experiments.output import optimize_report
    from experiments.tracking import Tracker, load_config
    from experiments.trials.run import run_trial
    from experiments.trials.spec import TrialSpec

    cfg_file = tmp_path / "mlflow.yaml"
    cfg_file.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: false\n"
    )
    cfg = OptimizeConfig(
        task="hearsay", model="scripted/lm", n_trials=3, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=2, dev_limit=8, heldout_limit=10,
    )  # fmt: skip
    lm = SpyLM()
    report = optimize(cfg, catalog, lm, Tracker(load_config(cfg_file)))
    doc = json.loads(dumps(report))  # what `workbench optimize --json` prints
    assert doc["best_variant_json"] == report.best_variant_json
    assert "--variant-file" in optimize_report(report.to_dict())
    winner = variant_from_saved(doc)
    assert winner.task == "hearsay" and winner.label == report.best_variant
    # the verdict evaluates the winner on the judged held-out rows first, then the base prompt
    n = report.heldout["n"]
    verdict_best = lm.prompts[-2 * n : -n]
    allowed = {r["index"] for r in evaluation_rows(winner, catalog.task("hearsay"), "test")[0]}
    rows = tuple(i for i in report.heldout_indices if i in allowed)
    rerun = SpyLM()
    result = run_trial(
        TrialSpec(task="hearsay", variant=winner, model="scripted/lm", rows=rows), catalog, rerun
    )
    assert result.variant_id == winner.id
    assert n > 0 and set(verdict_best) <= set(rerun.prompts)
