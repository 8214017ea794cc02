"""One spec swept on other models keeps both results (issue 31, point 3).

Rerunning a spec on another model used to overwrite reports/<spec>/{comparisons.csv,
forest.png, …}; `workbench report NAME` showed only the newest run and `workbench report
<run id>` said "no sweep named …". Now each sweep run has reports/<spec>/<sweep id>/,
`latest` names the newest, and `workbench report` takes a name, a sweep id (or prefix), or
an MLflow run id, and `--model`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.reports.folders import latest_id, run_ids
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from tests.conftest import run_cli, workbench_env

pytestmark = [pytest.mark.data, pytest.mark.slow]

SPEC = """
name: permodel
tasks: [hearsay]
models: [openai/stub-one, openai/stub-two]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""


def stamps(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Each file's inode, modification time and bytes: what a rewrite would change."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(folder.iterdir())
    }


def ok(r: Any) -> Any:
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.fixture(scope="module")
def swept(lb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The spec swept on its two models, then on a third (--model): two sweep runs."""
    root = tmp_path_factory.mktemp("permodel")
    (root / "spec.yaml").write_text(SPEC)
    env = {**workbench_env(root, lb_dir, "pm"), "OPENAI_API_KEY": "sk-dummy-key-for-the-stub"}
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        base = ["sweep", "spec.yaml", "--limit", "6", "--api-base", stub.url]
        first = ok(run_cli([*base, "--json"], env, root))
        text = ok(run_cli(base, env, root))  # the same sweep id again, as printed for people
        second = ok(run_cli([*base, "--model", "openai/stub-three", "--json"], env, root))
        before = stamps(root / "reports" / "permodel" / json.loads(second.stdout)["sweep_id"])
        resumed = ok(run_cli([*base, "--json"], env, root))  # the first sweep run, resumed
    return {
        "root": root, "env": env, "first": json.loads(first.stdout), "text": text.stdout,
        "second": json.loads(second.stdout), "before": before,
        "resumed": json.loads(resumed.stdout),
    }  # fmt: skip


def report(swept: dict[str, Any], *args: str) -> Any:
    return run_cli(["report", *args], swept["env"], swept["root"])


def test_two_sweep_runs_keep_two_folders(swept: dict[str, Any]) -> None:
    root, first, second = swept["root"], swept["first"], swept["second"]
    sweep_dir = root / "reports" / "permodel"
    x, y = first["sweep_id"], second["sweep_id"]
    assert x != y and run_ids(sweep_dir) == sorted([x, y])
    assert first["report_dir"] == f"reports/permodel/{x}"
    assert second["report_dir"] == f"reports/permodel/{y}"
    x_files = {p.name for p in (sweep_dir / x).iterdir()}
    y_files = {p.name for p in (sweep_dir / y).iterdir()}
    assert {"comparisons.csv", "comparisons.json", "figure_permodel_openai_stub_one.png",
            "figure_permodel_openai_stub_two.png"} <= x_files  # fmt: skip
    assert "figure_permodel_openai_stub_three.png" in y_files
    assert not any(f.startswith("figure_permodel_openai_stub_one") for f in y_files)
    assert all(Path(f).parent == Path(first["report_dir"]) for f in first["figures"])
    # nothing of either run is written to reports/permodel/ itself: only `latest` and the
    # page opening the latest run's HTML report (issue 34)
    assert sorted(p.name for p in sweep_dir.iterdir()) == sorted([x, y, "latest", "index.html"])
    x_doc = json.loads((sweep_dir / x / "comparisons.json").read_text())
    y_doc = json.loads((sweep_dir / y / "comparisons.json").read_text())
    assert {r["model"] for r in x_doc["comparisons"]} == {"openai/stub-one", "openai/stub-two"}
    assert {r["model"] for r in y_doc["comparisons"]} == {"openai/stub-three"}


def test_latest_names_the_sweep_run_most_recently_run(swept: dict[str, Any]) -> None:
    # the second run made it the latest; resuming the first made that one the latest again
    assert swept["second"]["latest"] == "reports/permodel/latest"
    assert latest_id(swept["root"] / "reports" / "permodel") == swept["first"]["sweep_id"]


def test_a_resumed_sweep_run_leaves_the_others_folder_untouched(swept: dict[str, Any]) -> None:
    assert swept["resumed"]["sweep_id"] == swept["first"]["sweep_id"]
    assert swept["resumed"]["resumed"] == swept["first"]["trials"]  # read back, not rerun
    y = swept["second"]["sweep_id"]
    assert stamps(swept["root"] / "reports" / "permodel" / y) == swept["before"]


def test_the_printed_paths_are_the_runs_own_folder(swept: dict[str, Any]) -> None:
    x = swept["first"]["sweep_id"]
    lines = swept["text"].splitlines()
    written = [line for line in lines if line.startswith("reports written to ")]
    assert written == [
        f"reports written to reports/permodel/{x}/ (comparisons.csv, comparisons.json; "
        "figures: figure_permodel_openai_stub_one.png, figure_permodel_openai_stub_two.png, "
        "forest.png, sensitivity_heatmap.png, variance_shares.png); reports/permodel/latest "
        "points at it"
    ]
    assert not any("reports/permodel/comparisons" in line for line in lines)


def test_report_takes_each_sweep_id_or_a_prefix(swept: dict[str, Any]) -> None:
    for run, ref in ((swept["first"], swept["first"]["sweep_id"]),
                     (swept["second"], swept["second"]["sweep_id"][:12])):  # fmt: skip
        shown = json.loads(ok(report(swept, ref, "--json")).stdout)
        assert shown["run"]["sweep_id"] == run["sweep_id"]
        assert shown["run"]["run_id"] == run["parent_run_id"]
        assert shown["comparisons"] == run["comparisons"]
        assert shown["report_dir"] == run["report_dir"]
    text = ok(report(swept, swept["second"]["sweep_id"][:12])).stdout
    assert text.splitlines()[0] == (
        f"sweep permodel (sweep id {swept['second']['sweep_id']}, "
        f"run {swept['second']['parent_run_id']}, FINISHED)"
    )
    assert f"report files: {swept['second']['report_dir']}/" in text.splitlines()
    # and its HTML report (issue 34), as the sweep printed it
    page = f"{swept['second']['report_dir']}/index.html"
    assert f"HTML report: {page} (open it in a browser)" in text.splitlines()
    assert any(line.startswith(f"HTML report: {swept['first']['report_dir']}/index.html (")
               for line in swept["text"].splitlines())  # fmt: skip


def test_report_by_name_shows_the_latest_and_says_how_to_pick_another(
    swept: dict[str, Any],
) -> None:
    x, y = swept["first"]["sweep_id"], swept["second"]["sweep_id"]
    r = ok(report(swept, "permodel", "--json"))
    shown = json.loads(r.stdout)
    assert shown["run"]["sweep_id"] == x  # resumed last
    assert [o["sweep_id"] for o in shown["run"]["others"]] == [y]
    notes = [line for line in r.stderr.splitlines() if line.strip()]
    assert notes == [
        f"note: sweep 'permodel' has 2 runs; showing the latest, {x[:12]}; other runs: "
        f"{y[:12]} (models openai/stub-three, FINISHED); show one with "
        "workbench report <sweep id>"
    ]
    by_id = ok(report(swept, y, "--json"))
    assert by_id.stderr.strip() == ""  # a sweep id picks one run: nothing to note


def test_report_takes_an_mlflow_run_id(swept: dict[str, Any]) -> None:
    import mlflow

    second = swept["second"]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{swept['root']}/mlflow.db")
    (trial, *_) = client.search_runs(
        [client.get_run(second["parent_run_id"]).info.experiment_id],
        filter_string=f"tags.`mlflow.parentRunId` = '{second['parent_run_id']}'",
    )
    for ref in (second["parent_run_id"], trial.info.run_id):
        shown = json.loads(ok(report(swept, ref, "--json")).stdout)
        assert shown["run"]["sweep_id"] == second["sweep_id"]


def test_report_model_shows_one_models_rows_with_the_sweeps_correction(
    swept: dict[str, Any],
) -> None:
    x = swept["first"]["sweep_id"]
    shown = json.loads(ok(report(swept, x, "--model", "openai/stub-two", "--json")).stdout)
    assert [r["model"] for r in shown["comparisons"]] == ["openai/stub-two"]
    assert {r["model"] for r in shown["across_tasks"]} == {"openai/stub-two"}
    assert {r["model"] for r in shown["trial_rows"]} == {"openai/stub-two"}
    assert {r["model"] for r in shown["sensitivity"]["per_task"]} <= {"openai/stub-two"}
    # the correction is the sweep's, over both models' comparisons: unchanged by the cut
    (whole,) = [r for r in swept["first"]["comparisons"] if r["model"] == "openai/stub-two"]
    assert shown["comparisons"][0] == whole and whole["family_size"] == 2
    text = ok(report(swept, x, "--model", "openai/stub-two")).stdout
    assert "model openai/stub-two only (--model): 1 of the sweep's 2 comparisons" in text
    assert "p corr: Holm over 2 tests (1 shown here)" in text
    assert "openai/stub-one" not in text
    bad = report(swept, x, "--model", "openai/stub-three")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "its models: openai/stub-one, openai/stub-two" in bad.stderr


def test_report_of_nothing_names_the_sweeps(swept: dict[str, Any]) -> None:
    r = report(swept, "no_such_sweep")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no sweep named 'no_such_sweep'" in r.stderr and "sweeps there: permodel" in r.stderr
