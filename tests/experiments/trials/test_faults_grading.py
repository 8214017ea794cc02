"""Issue 19, defects 12, 13 and 14e: hostile grade files and runs/ junk never write outside a
trial or crash, a store that refuses the grades leaves the folder as it was, hostile variant
files and study names are one clear line, and saving a trial reads what is saved under the
folder's lock. Everything runs in-process on hand-made trial folders (fast)."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from experiments.tracking.grades import import_grades
from experiments.trials.grading import COLUMNS, GradingError
from promptlib.errors import VariantError, WorkbenchError

TRIAL = "ab" * 32  # a trial id: 64 hex digits
GENERATIONS = {"0": "An out-of-court statement.", "1": "Effective on dispatch."}


def _trial_files(trial_id: str = TRIAL) -> dict[str, str]:
    """The files `workbench run` writes for a complete, ungraded rule_qa trial."""
    summary = {
        "trial_id": trial_id, "task": "rule_qa", "split": "test", "metric": "manual",
        "score": None, "status": "complete", "n": 2, "n_errors": 0,
    }  # fmt: skip
    preds = "".join(
        json.dumps({"index": i, "answer": "x", "generation": g, "parsed": None}) + "\n"
        for i, g in GENERATIONS.items()
    )
    return {"summary.json": json.dumps(summary), "predictions.jsonl": preds}


def _make_trial(folder: Path, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (files or _trial_files(folder.name)).items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _csv(path: Path, trial_id: str, header: list[str] | None = None, grades: Any = None) -> Path:
    header = header or list(COLUMNS)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    for i, g in GENERATIONS.items():
        row = {"trial_id": trial_id, "index": i, "question": "q", "reference_answer": "a",
               "generation": g, "grade": "1"}  # fmt: skip
        w.writerow(grades(i) if grades else [row[c] for c in header])
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (subfolders too), to show nothing changed."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ---- 12: hostile grade CSVs -------------------------------------------------------------------
def _absolute(root: Path, victim: Path) -> str:
    return str(victim)


def _dotdot(root: Path, victim: Path) -> str:
    return f"../{victim.name}"


HOSTILE_IDS: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "absolute trial_id": (_absolute, "is not a trial id (64 hex digits"),
    "../ trial_id": (_dotdot, "is not a trial id (64 hex digits"),
}


@pytest.mark.parametrize("case", list(HOSTILE_IDS))
def test_a_trial_id_that_is_a_path_writes_nothing_outside_runs(tmp_path: Path, case: str) -> None:
    """The victim looks like a trial (so the old code went on to replace it, deleting its
    subfolder): it is refused by the shape of the id, naming line and column."""
    root = tmp_path / "runs"
    root.mkdir()
    victim = _make_trial(tmp_path / "victim", _trial_files("victim"))
    (victim / "precious").mkdir()
    (victim / "precious" / "thesis.txt").write_text("years of work")
    make, message = HOSTILE_IDS[case]
    path = _csv(tmp_path / "g.csv", make(root, victim))
    before = _tree(tmp_path / "victim")
    with pytest.raises(GradingError) as err:
        import_grades(path, root=root, track=False)
    text = str(err.value)
    assert message in text and "line 2, column trial_id" in text and str(path) in text
    assert _tree(tmp_path / "victim") == before and list(root.iterdir()) == []


def test_a_link_in_runs_pointing_elsewhere_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    victim = _make_trial(tmp_path / "victim", _trial_files(TRIAL))
    (victim / "keep").mkdir()
    (root / TRIAL).symlink_to(victim, target_is_directory=True)
    before = _tree(victim)
    with pytest.raises(GradingError, match="a link out of"):
        import_grades(_csv(tmp_path / "g.csv", TRIAL), root=root, track=False)
    assert _tree(victim) == before and (victim / "keep").is_dir()


def test_two_grade_columns_are_refused_naming_the_column(tmp_path: Path) -> None:
    """csv.DictReader keeps the last of two same-named columns: the first grades were lost."""
    root = tmp_path / "runs"
    trial = _make_trial(root / TRIAL)
    header = [*COLUMNS, "grade"]
    path = _csv(
        tmp_path / "g.csv",
        TRIAL,
        header,
        lambda i: [TRIAL, i, "q", "a", GENERATIONS[i], "0", "1"],
    )
    before = _tree(trial)
    with pytest.raises(GradingError) as err:
        import_grades(path, root=root, track=False)
    assert "line 1: column(s) 'grade' appear more than once" in str(err.value)
    assert _tree(trial) == before


def test_a_good_file_still_grades_the_trial(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    trial = _make_trial(root / TRIAL)
    out = import_grades(_csv(tmp_path / "g.csv", TRIAL), root=root, track=False)
    assert out["score"] == 1.0 and out["graded"] == 2
    assert json.loads((trial / "grades.json").read_text())["graded"] == 2


# ---- 12: junk in runs/ ------------------------------------------------------------------------
def _list_summary(trial: Path) -> None:
    (trial / "summary.json").write_text("[1, 2]")


def _no_index(trial: Path) -> None:
    lines = (trial / "predictions.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    del row["index"]
    (trial / "predictions.jsonl").write_text(lines[0] + "\n" + json.dumps(row) + "\n")


def _list_line(trial: Path) -> None:
    (trial / "predictions.jsonl").write_text("[]\n")


def _binary_file(trial: Path) -> None:
    (trial / "notes.bin").write_bytes(b"\xff\xfe\x00")


def _subfolder(trial: Path) -> None:
    (trial / "attachments").mkdir()
    (trial / "attachments" / "a.txt").write_text("keep me")


JUNK: dict[str, tuple[Callable[[Path], None], str]] = {
    "summary.json is a list": (
        _list_summary,
        "summary.json: not a trial summary (a JSON list, expected an object); rerun the trial",
    ),
    "prediction without index": (
        _no_index,
        "predictions.jsonl:2: not a prediction (no 'index'); rerun the trial",
    ),
    "prediction line is a list": (_list_line, "predictions.jsonl:1: not a prediction (a JSON list"),
    "binary file in the trial": (_binary_file, "notes.bin: not a file the workbench writes"),
    "subfolder in the trial": (_subfolder, "attachments: not a file the workbench writes"),
}


@pytest.mark.parametrize("case", list(JUNK))
def test_junk_in_a_trial_folder_is_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    root = tmp_path / "runs"
    trial = _make_trial(root / TRIAL)
    spoil, message = JUNK[case]
    spoil(trial)
    before = _tree(trial)
    with pytest.raises(GradingError) as err:
        import_grades(_csv(tmp_path / "g.csv", TRIAL), root=root, track=False)
    text = str(err.value)
    assert message in text and str(trial) in text and "\n" not in text
    assert _tree(trial) == before


@pytest.mark.data
def test_summary_as_a_list_is_one_line_on_export_too(tmp_path: Path, catalog: Any) -> None:
    from experiments.trials.grading import export_csv

    trial = _make_trial(tmp_path / "runs" / TRIAL)
    _list_summary(trial)
    with pytest.raises(GradingError, match="not a trial summary"):
        export_csv(trial, catalog, tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def _hearsay(catalog: Any, fail: bool = False) -> Any:
    from experiments.trials.run import run_trial
    from experiments.trials.spec import TrialSpec
    from promptlib import parse_spec
    from tests.experiments.trials.test_runner import ScriptedLM

    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=3)
    if not fail:
        return run_trial(spec, catalog, ScriptedLM())
    first = catalog.task("hearsay").rows("test")
    done = run_trial(spec, catalog, ScriptedLM())
    text = {r["index"]: r["text"] for r in first}[done.predictions[0].index][:60]
    return run_trial(spec, catalog, ScriptedLM(fail_if=text))


@pytest.mark.data
def test_a_file_named_incomplete_reruns_is_one_line_and_keeps_the_trial(
    catalog: Any, tmp_path: Path
) -> None:
    from experiments.trials.store import save_result

    done = _hearsay(catalog)
    save_result(done, tmp_path)
    before = _tree(tmp_path / done.trial_id)
    (tmp_path / "incomplete-reruns").write_text("not a folder")
    partial = _hearsay(catalog, fail=True)
    assert not partial.complete
    with pytest.raises(WorkbenchError) as err:
        save_result(partial, tmp_path)
    text = str(err.value)
    assert "incomplete-reruns" in text and "rerun the same command" in text and "\n" not in text
    assert _tree(tmp_path / done.trial_id) == before
    assert (tmp_path / "incomplete-reruns").read_text() == "not a folder"


@pytest.mark.data
def test_a_corrupt_grades_file_does_not_crash_a_rerun(catalog: Any, tmp_path: Path) -> None:
    from experiments.trials.grading import current_grades

    done = _hearsay(catalog)
    (tmp_path / done.trial_id).mkdir()
    for text in ("[]", "{}", '{"grades": [1]}', "not json"):
        (tmp_path / done.trial_id / "grades.json").write_text(text)
        assert current_grades(done, tmp_path) is None


# ---- 12: a store that refuses the grades ------------------------------------------------------
class _ReadOnlyStore:
    """A tracker whose store opens but refuses writes, as a read-only mlflow.db does."""

    class config:  # the attribute the real Tracker has
        tracking_uri = "sqlite:////nonexistent/mlflow.db"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_grades(self, *args: Any, **kwargs: Any) -> str:
        import sqlite3

        raise sqlite3.OperationalError("attempt to write a readonly database\n[SQL: INSERT ...]")


def test_a_store_that_refuses_the_grades_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow is written first: a refusal is one line and disk and MLflow still agree (no
    grades on either); importing again once the store works finishes both."""
    import experiments.tracking.grades

    root = tmp_path / "runs"
    trial = _make_trial(root / TRIAL)
    before = _tree(trial)
    monkeypatch.setattr(experiments.tracking.grades, "Tracker", _ReadOnlyStore)
    with pytest.raises(WorkbenchError) as err:
        import_grades(_csv(tmp_path / "g.csv", TRIAL), root=root, track=True)
    text = str(err.value)
    assert "attempt to write a readonly database" in text and "\n" not in text
    assert "is unchanged" in text and "--no-track" in text
    assert _tree(trial) == before and not (trial / "grades.json").exists()


# ---- 14e: the folder lock covers the read that decides the write ------------------------------
def _hold_lock_while(folder: Path, act: Callable[[], object], then: Callable[[], None]) -> Any:
    """Hold `folder`'s lock, start `act` in a thread, run `then` (a peer's write) while it
    waits, release; return what `act` raised (None if nothing)."""
    import filelock

    raised: list[BaseException] = []

    def target() -> None:
        try:
            act()
        except BaseException as e:  # handed to the test
            raised.append(e)

    lock = filelock.FileLock(str(folder.parent / f".{folder.name}.lock"))
    with lock:
        worker = threading.Thread(target=target)
        worker.start()
        time.sleep(0.5)  # the worker has read what it reads before taking the lock
        then()
    worker.join(30)
    assert not worker.is_alive()
    return raised[0] if raised else None


@pytest.mark.data
def test_save_result_reads_the_saved_trial_under_the_lock(catalog: Any, tmp_path: Path) -> None:
    """A peer saves the complete trial while this unfinished rerun waits for the folder: the
    rerun must see it and go beside it, not over it."""
    from experiments.files import _swap_dir
    from experiments.trials.store import save_result

    done = _hearsay(catalog)
    partial = _hearsay(catalog, fail=True)
    folder = tmp_path / done.trial_id
    complete: dict[str, bytes] = {}

    def peer_saves_complete() -> None:
        save_result(done, tmp_path / "elsewhere")
        files = _tree(tmp_path / "elsewhere" / done.trial_id)
        complete.update(files)
        _swap_dir(folder, {k: v.decode() for k, v in files.items()})

    err = _hold_lock_while(folder, lambda: save_result(partial, tmp_path), peer_saves_complete)
    assert err is None
    assert _tree(folder) == complete  # the complete trial stands
    assert (tmp_path / "incomplete-reruns" / done.trial_id / "summary.json").is_file()


def test_grade_import_checks_the_trial_under_the_lock(tmp_path: Path) -> None:
    """A rerun rewrites the trial (new generations) while the import waits: the import must
    refuse, not write grades of the old generations over the rerun's predictions."""
    from experiments.files import _swap_dir

    root = tmp_path / "runs"
    trial = _make_trial(root / TRIAL)
    path = _csv(tmp_path / "g.csv", TRIAL)
    rerun = _trial_files()
    rerun["predictions.jsonl"] = rerun["predictions.jsonl"].replace("dispatch", "receipt")

    err = _hold_lock_while(
        trial,
        lambda: import_grades(path, root=root, track=False),
        lambda: _swap_dir(trial, rerun),
    )
    assert isinstance(err, GradingError) and "not the trial's current generation" in str(err)
    assert (trial / "predictions.jsonl").read_text() == rerun["predictions.jsonl"]
    assert not (trial / "grades.json").exists()


# ---- 13: hostile variant files and study names ------------------------------------------------
DEEP = 50_000

HOSTILE_VARIANTS: dict[str, tuple[str, str]] = {
    "nested lists": ("[" * DEEP + "]" * DEEP, "JSON nested deeper than 32 levels (line 1)"),
    "nested objects": ('{"a":' * DEEP + "1" + "}" * DEEP, "JSON nested deeper than 32 levels"),
    "nested reports": (
        '{"best_variant_json": ' * 10_000 + "{}" + "}" * 10_000,
        "JSON nested deeper than 32 levels",
    ),
    "report in a report": (
        json.dumps({"best_variant_json": json.dumps({"best_variant_json": "{}"})}),
        "holds another report's best_variant_json",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE_VARIANTS))
def test_a_deeply_nested_variant_file_is_one_line(tmp_path: Path, case: str) -> None:
    from promptlib.variants import load_variant_file

    text, message = HOSTILE_VARIANTS[case]
    path = tmp_path / "v.json"
    path.write_text(text)
    with pytest.raises(VariantError) as err:
        load_variant_file(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_deeply_nested_instruction_file_is_one_line(tmp_path: Path) -> None:
    from promptlib import parse_spec

    path = tmp_path / "deep.yaml"
    path.write_text("text: " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(VariantError) as err:
        parse_spec(f"instruction_file={path}")
    assert str(path) in str(err.value) and "nested deeper" in str(err.value)


@pytest.mark.parametrize(
    "name", ["../../x", "/tmp/abs", "a/b", "..", ".hidden", "-flag", "x" * 101, "a..b", "", "x\n"]
)
def test_a_study_name_that_is_not_one_name_is_refused(name: str) -> None:
    from experiments.optimize.config import OptimizeConfig

    with pytest.raises(WorkbenchError) as err:
        OptimizeConfig(task="hearsay", model="scripted/lm", study_name=name)
    assert "--study" in str(err.value) and "letters, digits" in str(err.value)


def test_a_plain_study_name_is_kept() -> None:
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.study import _study_name

    cfg = OptimizeConfig(task="hearsay", model="openai/gpt-4o", study_name="hearsay-v2.1_b")
    assert _study_name(cfg) == "hearsay-v2.1_b"
    default = OptimizeConfig(task="hearsay", model="ollama/x:8b")
    assert _study_name(default) == "hearsay.ollama_x:8b.optuna"  # the default is unchanged
