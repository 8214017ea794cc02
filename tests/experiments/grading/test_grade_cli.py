"""`workbench grade sheet|add|agreement` end to end in-process: two graders fill one sheet,
the output ends with what to do next, and --json gives the records."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from experiments.cli import app
from promptlib import Catalog
from tests.experiments.grading.sheet_trials import make_trials

pytestmark = pytest.mark.data


def test_sheet_add_agreement(
    catalog: Catalog, lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(runs))
    monkeypatch.setenv("LEGALBENCH_DIR", str(lb_dir))
    trials = make_trials(catalog, runs)
    out = tmp_path / "sheet-1.csv"
    args = ["grade", "sheet", *(x for t in trials for x in ("--trial", t.trial_id[:12]))]
    r = CliRunner().invoke(app, [*args, "--seed", "5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "next:" in r.output and "workbench grade add" in r.output
    assert (tmp_path / "grades" / "sheets" / "sheet-1.json").is_file()
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    for grader, flip in (("ann", 0), ("bob", 3)):
        for k, row in enumerate(rows):
            row["correctness"] = str((k + (k < flip)) % 2)
            row["analysis"] = "1" if k % 3 == 0 else "0"
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        filled = tmp_path / f"{grader}.csv"
        filled.write_text(buf.getvalue(), encoding="utf-8")
        r = CliRunner().invoke(app, ["grade", "add", str(filled), "--grader", grader, "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["written"] == 2 * len(rows)
    r = CliRunner().invoke(app, ["grade", "agreement", "--task", "hearsay"])
    assert r.exit_code == 0, r.output
    assert "correctness" in r.output and "ann" in r.output and "next:" in r.output
    r = CliRunner().invoke(app, ["grade", "agreement", "--json"])
    recs = {d["criterion"]: d for d in json.loads(r.output)}
    assert recs["analysis"]["agreement"] == 1.0 and recs["analysis"]["n"] == len(rows)
    assert recs["correctness"]["agreement"] == pytest.approx(1 - 3 / len(rows))
    r = CliRunner().invoke(app, ["grade", "sheet", "--seed", "1", "--out", str(out)])
    assert r.exit_code != 0 and "either a sweep or --trial" in r.output
