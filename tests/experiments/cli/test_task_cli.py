"""`workbench task new` / `task list`: your own data as a task, listed and run beside
LegalBench's by every command; refusals exit 2 with one line and write nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments import settings
from promptlib import taskmeta
from tests.conftest import run_cli
from tests.usertask_data import clauses, write_csv, write_jsonl, write_parquet

QUESTION = "Does the clause restrict disclosure to third parties?"


def _env(tmp_path: Path, lb_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "LEGALBENCH_DIR": str(lb_dir),
        "WORKBENCH_TASKS_DIR": str(tmp_path / "tasks"),
        "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "WORKBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "WORKBENCH_NO_TRACK": "1",
    }


def _new(tmp_path: Path, env: dict[str, str], source: Path, *extra: str, name: str = "clauses"):  # type: ignore[no-untyped-def]
    args = ["task", "new", name, "--from", str(source), "--input", "clause_text",
            "--answer", "restricts", "--instruction", QUESTION, *extra]  # fmt: skip
    return run_cli(args, env, tmp_path, timeout=300)


def test_the_tasks_folder_setting_matches_promptlibs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """promptlib reads WORKBENCH_TASKS_DIR itself (it cannot import experiments): the same
    default and the same folder for any value."""
    assert settings.DEFAULT_TASKS_DIR == taskmeta.DEFAULT_TASKS_DIR
    assert settings.TASKS_DIR_ENV == taskmeta.TASKS_DIR_ENV
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in (None, "", "~/my tasks", str(tmp_path / "t")):
        if value is None:
            monkeypatch.delenv("WORKBENCH_TASKS_DIR", raising=False)
        else:
            monkeypatch.setenv("WORKBENCH_TASKS_DIR", value)
        assert settings.tasks_dir() == taskmeta.user_tasks_dir()
    monkeypatch.delenv("WORKBENCH_TASKS_DIR")
    assert settings.tasks_dir() == tmp_path / "home" / ".local/share/workbench/tasks"


@pytest.mark.data
def test_new_lists_and_renders_beside_legalbench(lb_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, lb_dir)
    data = write_csv(tmp_path / "mine.csv", clauses(60))
    r = _new(tmp_path, env, data, "--slice", "kind")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("task clauses: binary: labels Yes, No (") and "from 60 rows" in first
    assert "rows: 4 train (4 shown as demonstrations in base_prompt.txt), 56 test" in r.stdout
    assert "slices: column kind, 3 values" in r.stdout
    assert (tmp_path / "tasks" / "clauses" / "task.json").is_file()
    listed = run_cli(["tasks"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    mine = [x for x in listed.stdout.splitlines() if x.startswith("clauses ")]
    assert len(mine) == 1 and mine[0].endswith("(your task)")
    # the columns of the header: task, type, metric, train, test, labels
    assert mine[0].split()[1] == "binary" and mine[0].split()[3:6] == ["4", "56", "Yes,No"]
    assert any(x.startswith("hearsay ") for x in listed.stdout.splitlines())
    as_json = json.loads(run_cli(["tasks", "--json"], env, tmp_path).stdout)
    assert len(as_json) == 163
    shown = run_cli(["render", "clauses", "--limit", "2", "--json",
                     "--variant", "verbalizer=true_false,format=sep:colon_newline"],
                    env, tmp_path)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    items = json.loads(shown.stdout)
    assert len(items) == 2 and items[0]["prompt"].startswith(QUESTION)
    assert "A:\nTrue" in items[0]["prompt"] or "A:\nFalse" in items[0]["prompt"]
    own = run_cli(["task", "list"], env, tmp_path)
    assert own.returncode == 0 and "clauses " in own.stdout and "hearsay" not in own.stdout
    # again without --force: refused, the task unchanged
    again = _new(tmp_path, env, data, "--seed", "3")
    assert again.returncode == 2 and "exists already" in again.stderr and "--force" in again.stderr
    forced = _new(tmp_path, env, data, "--seed", "3", "--force")
    assert forced.returncode == 0, forced.stderr


@pytest.mark.data
@pytest.mark.parametrize(
    ("writer", "suffix"),
    [(write_jsonl, "jsonl"), (write_parquet, "parquet")],
    ids=["jsonl", "parquet"],
)
def test_jsonl_and_parquet_become_tasks_that_run(  # type: ignore[no-untyped-def]
    lb_dir: Path, tmp_path: Path, writer, suffix: str
) -> None:
    from experiments.testing.stub_server import StubOpenAI, hashed_yes_no

    env = _env(tmp_path, lb_dir) | {"OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub"}
    data = writer(tmp_path / f"mine.{suffix}", clauses(30))
    r = _new(tmp_path, env, data, "--demos", "2", "--train-fraction", "0.2", name=f"c_{suffix}")
    assert r.returncode == 0, r.stderr
    assert "rows: 6 train (2 shown as demonstrations in base_prompt.txt), 24 test" in r.stdout
    shown = run_cli(["render", f"c_{suffix}", "--limit", "1"], env, tmp_path)
    assert shown.returncode == 0 and "Clause text: " in shown.stdout
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        run = run_cli(["run", f"c_{suffix}", "--model", "openai/stub", "--api-base", stub.url,
                       "--limit", "5", "--json"], env, tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["n"] == 5 and summary["metric"] == "balanced_accuracy"
    assert summary["invalid_rate"] == 0.0 and summary["score"] is not None


@pytest.mark.data
def test_a_task_without_labels_says_so_on_every_run(lb_dir: Path, tmp_path: Path) -> None:
    from experiments.testing.stub_server import StubOpenAI

    env = _env(tmp_path, lb_dir) | {"OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub"}
    rows = [{"clause_text": f"The party named Acme{i} Ltd shall pay on time.",
             "restricts": f"Acme{i} Ltd"} for i in range(20)]  # fmt: skip
    r = _new(tmp_path, env, write_csv(tmp_path / "ext.csv", rows), "--demos", "2")
    assert r.returncode == 0, r.stderr
    assert "task clauses: extraction: no label set (" in r.stdout
    assert "metric exact match" in r.stdout
    assert "cannot be detected" in r.stderr
    with StubOpenAI(reply="Acme3 Ltd") as stub:
        for _ in range(2):  # the second run is answered from the cache: it warns too
            run = run_cli(["run", "clauses", "--model", "openai/stub", "--api-base", stub.url,
                           "--limit", "4", "--json"], env, tmp_path)  # fmt: skip
            assert run.returncode == 0, run.stderr
            assert "no label set: a reply that is no valid answer cannot be detected" in run.stderr
            summary = json.loads(run.stdout)
            assert summary["metric"] == "exact_match" and summary["invalid_rate"] is None
    loglik = run_cli(["run", "clauses", "--model", "local/smollm2", "--scoring", "loglik",
                      "--limit", "2"], env, tmp_path)  # fmt: skip
    assert loglik.returncode == 2 and "log-likelihood scoring needs a label set" in loglik.stderr


@pytest.mark.data
def test_macro_f1_is_the_declared_metric(lb_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, lb_dir)
    r = _new(tmp_path, env, write_csv(tmp_path / "m.csv", clauses(30)), "--metric", "f1")
    assert r.returncode == 0, r.stderr
    assert "metric F1 (macro, over the labels)" in r.stdout
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps({"generation": g, "answer": a}) + "\n"
                for g, a in [("Yes", "Yes"), ("No", "Yes"), ("No", "No"), ("No", "No")])
    )  # fmt: skip
    scored = run_cli(["score", "clauses", str(preds), "--json"], env, tmp_path)
    assert scored.returncode == 0, scored.stderr
    out = json.loads(scored.stdout)
    # Yes: P 1, R 1/2 -> F1 2/3; No: P 2/3, R 1 -> F1 4/5; macro (2/3 + 4/5) / 2
    assert out["metric"] == "macro_f1" and out["score"] == pytest.approx((2 / 3 + 4 / 5) / 2)


@pytest.mark.data
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--answer", "restrict"), "has no column 'restrict' — did you mean 'restricts'?"),
        (("--demos", "40", "--train", "TRAIN"), "--demos 40 asks for 40 demonstrations"),
        (("--name", "hearsay"), "is a LegalBench task already"),
        (("--labels", "Yes"), "give at least two labels"),
        (("--instruction", ""), "give the instruction the prompt starts with"),
    ],
    ids=["unknown-column", "too-few-demos", "shadows-legalbench", "one-label", "no-instruction"],
)
def test_refusals_exit_2_and_write_nothing(
    lb_dir: Path, tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    env = _env(tmp_path, lb_dir)
    rows = clauses(40)
    data = write_csv(tmp_path / "mine.csv", rows[:30])
    train = write_csv(tmp_path / "train.csv", rows[30:])
    name = "clauses"
    args = list(extra)
    if "--name" in args:
        name = args[args.index("--name") + 1]
        args = []
    args = [str(train) if a == "TRAIN" else a for a in args]
    if "--answer" in args or "--instruction" in args:
        key = "--answer" if "--answer" in args else "--instruction"
        base = ["task", "new", name, "--from", str(data), "--input", "clause_text"]
        base += ["--answer", "restricts"] if key != "--answer" else []
        base += ["--instruction", QUESTION] if key != "--instruction" else []
        r = run_cli([*base, *args], env, tmp_path)
    else:
        r = _new(tmp_path, env, data, *args, name=name)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "tasks").exists() or list((tmp_path / "tasks").iterdir()) == []


@pytest.mark.data
def test_a_data_file_given_as_a_task_points_to_task_new(lb_dir: Path, tmp_path: Path) -> None:
    r = run_cli(["run", "my.csv", "--model", "openai/stub"], _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 2 and "is a data file, not a task" in r.stderr
    assert "workbench task new NAME --from my.csv" in r.stderr
