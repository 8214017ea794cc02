"""Every name is valid wherever it is written (issue 30, defects 4 and 14): variant, model and
task names from a spec level or an imported file reach MLflow metric keys, tag keys, param
values, run names, artifact and file names, and CSV cells. Each sink is fed hostile names
(`//`, `..`, a leading `/`, control characters, newlines, 300 characters, non-Latin text,
formula prefixes) and must take them: a name that MLflow would refuse ran every trial and
then failed with "store failed", exit 2 and a FAILED parent, on every rerun."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from mlflow.utils.validation import _validate_metric_name, _validate_param_name

from experiments.files import csv_cell, csv_uncell
from experiments.names import (
    MAX_KEY,
    MAX_RUN_NAME,
    figure_file,
    hashed_key,
    is_plain_path,
    metric_key,
    p_value_names,
    run_name,
    safe_name,
)
from experiments.tracking import Tracker, TrackingConfig, comparisons_csv
from tests.conftest import mlflow_store
from tests.experiments.tracking.test_faults_storage import _forget_mlflow_stores

HOSTILE = [
    "a//b",
    "https://api.example.com/v1",
    "../x",
    "a/../b",
    "/lead",
    "trail/",
    "./a",
    ".",
    "..",
    "a/./b",
    "a\nb",
    "a\x07b\x00",
    "x" * 300,
    "é模型",
    "提示一",
    "提示二",
    '=HYPERLINK("http://x","y")',
    "+1+1",
    "-2",
    "@SUM(A1)",
    "a b:c",
    "",
]


def _row(a: str, b: str, model: str) -> dict[str, object]:
    return {"task": "hearsay", "model": model, "a": a, "b": b}


@pytest.mark.parametrize("name", HOSTILE)
def test_metric_keys_are_names_mlflow_takes(name: str) -> None:
    for full in (*p_value_names(_row(name, "b", name)), f"sensitivity.hearsay.{name}.avgp"):
        key = metric_key(full)
        _validate_metric_name(key)  # MLflow's own check: raises on a name it refuses
        _validate_param_name(key)  # tag and param keys follow the same rule
        assert len(key) <= MAX_KEY and key == metric_key(full)
        assert is_plain_path(hashed_key(full))
        _validate_metric_name(hashed_key(full))


def test_plain_names_keep_their_keys() -> None:
    """Names MLflow took before keep their keys (stored metrics are not renamed)."""
    for full in ("p_value.hearsay.m.instruction=reference_vs_instruction=description",
                 "sensitivity.hearsay.openai/gpt-4o.avgp", "cost.model_calls"):  # fmt: skip
        assert metric_key(full) == safe_name(full)


@pytest.mark.parametrize("name", HOSTILE)
def test_run_names_and_figure_files_are_valid(name: str, tmp_path: Path) -> None:
    shown = run_name(f"hearsay · {name} · m")
    assert len(shown) <= MAX_RUN_NAME and shown.isprintable()
    filename = figure_file("sweep", name)
    assert "/" not in filename and filename not in (".", "..") and len(filename.encode()) <= 255
    (tmp_path / filename).write_bytes(b"png")  # the file system takes it
    assert figure_file("sweep", name, hashed=True) != filename or len(filename.encode()) > 200


def test_models_with_one_safe_name_get_their_own_figures() -> None:
    assert figure_file("s", "a/b") == figure_file("s", "a_b")  # `safe_model` alone collides
    assert figure_file("s", "a/b", hashed=True) != figure_file("s", "a_b", hashed=True)
    assert figure_file("s", "openai/gpt-4o") == "figure_s_openai_gpt_4o.png"  # as before


def test_formula_cells_are_quoted_in_comparisons_csv() -> None:
    """A variant named `=HYPERLINK(...)` stayed a live formula in comparisons.csv."""
    formula = '=HYPERLINK("http://x","y")'
    table = [{**_row(formula, "+1", "@m"), "diff": -0.1, "p_value": 0.5, "note": "-2 rows"}]
    rows = list(csv.DictReader(io.StringIO(comparisons_csv(table))))
    (row,) = rows
    for field, value in (("a", formula), ("b", "+1"), ("model", "@m"), ("note", "-2 rows")):
        assert row[field] == csv_cell(value) == "'" + value  # a spreadsheet shows it as text
        assert csv_uncell(row[field]) == value  # and it reads back as exported
    assert row["diff"] == "-0.1" and row["p_value"] == "0.5"  # numbers stay numbers


@pytest.fixture
def tracker(tmp_path: Path) -> Tracker:
    _forget_mlflow_stores()
    return Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(tmp_path),
            artifact_location=(tmp_path / "artifacts").as_uri(),
            experiment_prefix="hostile",
            prompt_registry=False,
            source="test",
        )
    )


@pytest.mark.slow
def test_every_sink_takes_hostile_names(tracker: Tracker) -> None:
    """p-value metrics, sequential tags, run names and params, comparisons.csv, on a real
    store; names whose keys would coincide (two non-Latin names) each keep their value."""
    parent = tracker.parent_run("hostile", "2" * 64, {"spec": "hostile.yaml"})
    table, sequential = [], []
    for i, name in enumerate(HOSTILE):
        row = _row(name, "b", HOSTILE[-i - 1])
        table.append({**row, "p_value": i / 100, "p_corrected": i / 50})
        sequential.append({**row, "decision": "A", "n": 10 + i, "looks": [1]})
    tracker.log_comparisons(parent, {"comparisons": table}, {})
    tracker.log_cost(parent, {"model_calls": 3}, sequential)
    exp = tracker.experiment_id("hostile")
    for name in HOSTILE:
        run = tracker._create_run(exp, run_name(f"hearsay.{name}.m"), {}, {"variant": name})
        assert tracker.client.get_run(run).data.params["variant"] == name.replace("\x00", "\\x00")

    metrics = tracker.client.get_run(parent).data.metrics
    tags = tracker.client.get_run(parent).data.tags
    names = json.loads(tracker._artifact_text(parent, "metric_names.json"))
    key_of = {full: key for key, full in names.items()}
    for i, row in enumerate(table):
        full, corrected = p_value_names(row)
        assert metrics[key_of.get(full, safe_name(full))] == i / 100  # each its own value
        assert metrics[key_of.get(corrected, safe_name(corrected))] == i / 50
        decision = f"sequential.{row['task']}.{row['model']}.{row['a']}_vs_{row['b']}.decision"
        assert tags[key_of.get(decision, safe_name(decision))] == "A"
    _forget_mlflow_stores()


# two comparisons whose names coincide in full: `a` vs `b_vs_c` and `a_vs_b` vs `c`; model `m`
# with variant `x.a` and model `m.x` with variant `a`
COINCIDING = [("a", "b_vs_c", "m"), ("a_vs_b", "c", "m"), ("x.a", "b", "m"), ("a", "b", "m.x")]


def test_comparisons_whose_names_coincide_each_keep_their_own_value(tracker: Tracker) -> None:
    """Two comparisons whose metric names would be one string (`_vs_` or a `.` inside a
    variant or model name) each get their own p-values and sequential numbers: before, the
    second overwrote the first and MLflow showed one comparison's p-value for both."""
    parent = tracker.parent_run("coinciding", "3" * 64, {"spec": "c.yaml"})
    table, sequential = [], []
    for i, (a, b, model) in enumerate(COINCIDING):
        table.append({**_row(a, b, model), "p_value": (i + 1) / 100, "p_corrected": (i + 1) / 50})
        sequential.append({**_row(a, b, model), "decision": f"d{i}", "n": 10 + i, "looks": [1]})
    tracker.log_comparisons(parent, {"comparisons": table}, {})
    tracker.log_cost(parent, {"model_calls": 3}, sequential)
    run = tracker.client.get_run(parent)
    names = json.loads(tracker._artifact_text(parent, "metric_names.json"))

    def full(key: str) -> str:  # the name a key stands for
        return str(names.get(key, key))

    metrics = {full(k): v for k, v in run.data.metrics.items()}
    tags = {full(k): v for k, v in run.data.tags.items()}
    p_values = sorted(v for k, v in metrics.items() if k.startswith("p_value."))
    corrected = sorted(v for k, v in metrics.items() if k.startswith("p_value_corr"))
    looks = sorted(v for k, v in metrics.items() if k.endswith(".n"))
    decisions = sorted(v for k, v in tags.items() if k.endswith(".decision"))
    assert p_values == [(i + 1) / 100 for i in range(len(COINCIDING))]
    assert corrected == [(i + 1) / 50 for i in range(len(COINCIDING))]
    assert looks == [10 + i for i in range(len(COINCIDING))]
    assert decisions == [f"d{i}" for i in range(len(COINCIDING))]
    # each name says which comparison it is
    for name, value in metrics.items():
        if name.startswith("p_value."):
            a, b, model = COINCIDING[round(value * 100) - 1]
            assert json.loads(name.removeprefix("p_value.")) == ["hearsay", model, a, b]
    _forget_mlflow_stores()


def test_a_nul_in_a_name_never_reaches_a_store(tracker: Tracker) -> None:
    """PostgreSQL and MySQL refuse a NUL in any text column: an imported variant named
    'a\\x00b' ran every comparison and then failed the store ("A string literal cannot contain
    NUL") on every rerun. Param values, run names and the tags that carry names (a
    sequential decision, the arms in contention, a failed run's note) show it as '\\x00'."""
    from experiments.names import _param

    assert _param("a\x00b") == "a\\x00b" and _param("plain") == "plain"
    assert "\x00" not in _param("x\x00" * 4000)  # cut to 6000 characters, still no NUL
    parent = tracker.parent_run("nul", "4" * 64, {"spec": "nul.yaml"})
    row = {**_row("a\x00b", "b", "m\x00"), "decision": "A", "n": 10, "looks": [1]}
    row |= {"best_identified": False, "in_contention": ["a\x00b", "b"]}
    tracker.log_cost(parent, {"model_calls": 3}, [row])
    tracker._create_run(tracker.experiment_id("nul"), "r", {}, {"variant": "a\x00b"})
    run = tracker.client.get_run(parent)
    for value in [*run.data.tags.values(), *run.data.params.values()]:
        assert "\x00" not in value
    assert "a\\x00b, b" in run.data.tags.values()
    _forget_mlflow_stores()


def test_models_differing_only_in_case_get_their_own_figures() -> None:
    """`M` and `m` (or `A/b` and `a_b`) made figure files that differ only in case: on macOS
    or Windows, or an artifact store that ignores case, one figure replaced the other."""
    from experiments.names import figure_files

    files = figure_files("s", ["M", "m", "A/b", "a_b", "openai/gpt-4o"])
    assert len({f.casefold() for f in files.values()}) == 5
    assert files["M"] == "figure_s_M.png" and files["openai/gpt-4o"] == "figure_s_openai_gpt_4o.png"
