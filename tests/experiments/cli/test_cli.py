"""The `workbench` CLI: JSON outputs, and bad input -> message on stderr, exit 2, no stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def workbench(
    *args: str, data_dir: Path | str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LEGALBENCH_DIR"}
    if data_dir is not None:
        env["LEGALBENCH_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.data
def test_tasks_json(lb_dir: Path) -> None:
    r = workbench("tasks", "--json", data_dir=lb_dir)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 162
    hearsay = next(x for x in rows if x["name"] == "hearsay")
    for key in ("name", "labels", "metric", "task_type", "n_train", "n_test"):
        assert key in hearsay
    assert hearsay["n_test"] == 95 and hearsay["task_type"] == "binary"
    text = workbench("tasks", data_dir=lb_dir)
    lines = text.stdout.strip().splitlines()
    # a header row, one line per task, and the line under the table explaining "-"
    assert lines[0].split()[:3] == ["task", "type", "metric"] and len(lines) == 1 + 162 + 1
    assert lines[-1].startswith("train, test: rows in each task") and "108 of 162" in lines[-1]


@pytest.mark.data
def test_render_json(lb_dir: Path) -> None:
    r = workbench(
        "render", "hearsay", "--variant", "instruction=description,demos=none", "--limit", "3",
        "--json", data_dir=lb_dir,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    assert [set(i) >= {"index", "prompt", "answer"} for i in items] == [True] * 3
    assert items[0]["prompt"].startswith("Hearsay is an out-of-court statement")
    assert items[0]["prompt"].endswith('Answer "Yes" or "No".\nA:')


@pytest.mark.data
def test_render_resampled_reports_left_out_rows(lb_dir: Path) -> None:
    r = workbench(
        "render", "hearsay", "--variant", "demos=4,seed=3,pool=train+test", "--json",
        data_dir=lb_dir,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 91
    assert "4 test row(s) left out" in r.stderr


def _bad_data(tmp_path: Path) -> Path:
    for name, test_tsv, prompt in [
        ("badtsv", 'index\tanswer\ttext\n0\tNo\tfine\n1\tYes\t"unterminated\n', "Q: {{text}}\nA:"),
        ("badcol", "index\tanswer\ttext\n0\tYes\tok\n", "Q: {{question}}\nA:"),
    ]:
        d = tmp_path / "tasks" / name
        d.mkdir(parents=True)
        (d / "train.tsv").write_text("index\tanswer\ttext\n0\tYes\tok\n")
        (d / "test.tsv").write_text(test_tsv)
        (d / "base_prompt.txt").write_text(prompt)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needs_lb", "message"),
    [
        (("render", "hearsey"), True, "unknown task 'hearsey' — did you mean 'hearsay'?"),
        (("render", "hearsay", "--variant", "demos=9,seed=1"), True, "pool has only 5 rows"),
        (("render", "hearsay", "--variant", "register=plain"), True, "lacks"),
        (("render", "badcol"), False, "uses {{question}} but"),
        (("render", "badtsv"), False, "badtsv/test.tsv: not a valid LegalBench TSV (line 3"),
        (("tasks", "--data-dir", "/does/not/exist"), False, "does not exist"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_output(
    tmp_path: Path,
    args: tuple[str, ...],
    needs_lb: bool,
    message: str,
    request: pytest.FixtureRequest,
) -> None:
    data = request.getfixturevalue("lb_dir") if needs_lb else _bad_data(tmp_path)
    r = workbench(*args, data_dir=data)
    assert r.returncode == 2
    assert message in r.stderr
    assert r.stdout == ""
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_no_data_configured_says_what_to_do(tmp_path: Path) -> None:
    # a folder with no mlflow.yaml above (the repository's names the data: see below)
    r = workbench("tasks", cwd=tmp_path)
    assert r.returncode == 2
    assert "set LEGALBENCH_DIR" in r.stderr and "legalbench_dir:" in r.stderr


@pytest.mark.slow
def test_the_repositorys_data_default_is_real() -> None:
    """The README's default, ../shared/legalbench, is the repository's mlflow.yaml's
    `legalbench_dir:`, read without LEGALBENCH_DIR from any folder of the repository."""
    repo = Path(__file__).resolve().parents[3]
    if not (repo.parent / "shared" / "legalbench").is_dir():
        pytest.skip("no ../shared/legalbench beside the repository")
    r = workbench("tasks", "--json", cwd=repo / "docs")
    assert r.returncode == 0, r.stderr
    assert "hearsay" in {t["name"] for t in json.loads(r.stdout)}


@pytest.mark.data
def test_score_json_and_bad_lines(lb_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "preds.jsonl"
    lines = [
        {"generation": "Yes", "answer": "Yes"},
        {"generation": "no.", "answer": "Yes"},
        {"generation": " No", "answer": "No"},
    ]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = workbench("score", "hearsay", str(f), "--json", data_dir=lb_dir)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "task": "hearsay", "metric": "balanced_accuracy", "score": 0.75, "n": 3, "notes": [],
    }  # fmt: skip
    f.write_text('{"generation": "Yes", "answer": "Yes"}\n{"generation": "No"}\n')
    bad = workbench("score", "hearsay", str(f), data_dir=lb_dir)
    assert bad.returncode == 2 and "preds.jsonl:2: missing field 'answer'" in bad.stderr
    f.write_text("{not json\n")
    bad = workbench("score", "hearsay", str(f), data_dir=lb_dir)
    assert bad.returncode == 2 and "preds.jsonl:1: not valid JSON" in bad.stderr
    typo = workbench("score", "hearsey", str(f), data_dir=lb_dir)
    assert typo.returncode == 2 and "did you mean 'hearsay'" in typo.stderr


@pytest.mark.data
def test_run_bad_input(lb_dir: Path) -> None:
    r = workbench("run", "hearsey", data_dir=lb_dir)
    assert r.returncode == 2 and "did you mean 'hearsay'" in r.stderr and r.stdout == ""
    r = workbench("run", "hearsay", "--model", "local/gpt5", data_dir=lb_dir)
    assert r.returncode == 2 and "unknown local model 'local/gpt5'" in r.stderr
    r = workbench("run", "hearsay", "--model", "gpt-4o", data_dir=lb_dir)
    assert r.returncode == 2 and "no provider prefix" in r.stderr
    # rule_qa is graded by hand: it runs (see test_grading.py); this copy's train split is
    # empty, which is said before any model is loaded
    r = workbench("run", "rule_qa", "--split", "train", data_dir=lb_dir)
    assert r.returncode == 2 and "no train rows to evaluate" in r.stderr and r.stdout == ""
    r = workbench("run", "hearsay", "--scoring", "logprob", data_dir=lb_dir)
    assert r.returncode == 2 and "'logprob' is not one of" in r.stderr and r.stdout == ""


def test_version() -> None:
    from importlib.metadata import version

    r = workbench("--version")
    assert (
        r.returncode == 0 and r.stdout.strip() == f"workbench {version('legal-prompt-workbench')}"
    )


@pytest.mark.data
def test_run_with_failing_provider_is_failed_exit_1(lb_dir: Path, tmp_path: Path) -> None:
    from experiments.testing.stub_server import StubOpenAI

    with StubOpenAI(fault_rate=1.0, faults=("500",)) as stub:
        env_extra = {"OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub"}
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "experiments.cli",
                "run",
                "hearsay",
                "--model",
                "openai/stub",
                "--api-base",
                stub.url,
                "--limit",
                "3",
                "--retries",
                "1",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **os.environ,
                **env_extra,
                "LEGALBENCH_DIR": str(lb_dir),
                "WORKBENCH_CACHE_DIR": str(tmp_path / "c"),
                "WORKBENCH_RUNS_DIR": str(tmp_path / "r"),
            },
        )
    assert r.returncode == 1
    summary = json.loads(r.stdout)
    # every row failed: the trial is "failed" (some rows only: "incomplete"), with no score
    assert summary["status"] == "failed" and summary["score"] is None
    assert summary["n_errors"] == 3 and "3 of 3 rows failed" in r.stderr
    assert "has no score" in r.stderr and "Traceback" not in r.stderr
    saved = Path(summary["predictions"]).read_text().splitlines()
    assert len(saved) == 3 and all(json.loads(x)["error"] for x in saved)


def test_comparison_table_shows_each_arms_invalid_rate() -> None:
    from experiments.output import comparison_table

    row = {
        "model": "m", "task": "hearsay", "a": "va", "b": "vb", "score_a": 0.7, "score_b": 0.5,
        "p_value": None, "status": "incomplete trial",
    }  # fmt: skip
    trials = [
        {"model": "m", "task": "hearsay", "variant": "va", "invalid_rate": 0.125},
        {"model": "m", "task": "hearsay", "variant": "vb", "invalid_rate": None},
        {"model": "other", "task": "hearsay", "variant": "vb", "invalid_rate": 0.9},
    ]
    head, line, *_ = comparison_table([row], trials).splitlines()
    assert "inv A" in head and "inv B" in head
    assert " 0.125      - " in line  # vb's rate on model m is unknown, not other's 0.900
    assert "inv A" not in comparison_table([row])  # no per-trial rows: no column


def test_sweep_summary_ends_with_where_to_look() -> None:
    from experiments.output import sweep_summary

    sid = "3f" * 32
    result = {
        "sweep": "demo", "trials": 2, "resumed": 0, "parent_run_id": "abc", "skipped": [],
        "comparisons": [], "across_tasks": [], "figures": [f"reports/demo/{sid}/forest.png"],
        "report_dir": f"reports/demo/{sid}", "latest": "reports/demo/latest",
        "report_files": ["comparisons.csv", "comparisons.json", "forest.png"],
        "experiment": "legal-prompt-workbench/demo",
    }  # fmt: skip
    lines = sweep_summary(result, "sqlite:///mlflow.db").splitlines()
    assert lines[0].startswith("sweep demo: 2 trials (0 resumed from MLflow)")
    # this sweep run's own folder (its sweep id), never reports/demo/ itself
    assert (
        f"reports written to reports/demo/{sid}/ (comparisons.csv, comparisons.json; figures: "
        "forest.png); reports/demo/latest points at it"
    ) in lines
    assert "MLflow store: sqlite:///mlflow.db" in lines
    assert not any("reports/demo/comparisons" in line for line in lines)
    # where no symlink can be made, the LATEST file names the run
    fallback = sweep_summary({**result, "latest": "reports/demo/LATEST"}, "sqlite:///m.db")
    assert "reports/demo/LATEST names it" in fallback
    assert lines[-1].startswith("Open the MLflow UI on these runs: workbench ui  (or make ui")
    assert lines[-1].endswith("(experiment legal-prompt-workbench/demo)")
    assert sum("make ui" in line for line in lines) == 1
