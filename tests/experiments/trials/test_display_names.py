"""How variant names are shown (issue 31): a text file's whole path made short in printed
tables, and short unique forms with a key in figures. Display only: the names themselves
(the variants' identity, the JSON, the ids) never change."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from experiments.output import comparison_table, dry_run, sweep_report
from experiments.trials.labels import display_name, display_path, short_names, table_names


def test_a_file_path_is_shown_relative_to_here_when_shorter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / "specs" / "lawyer.yaml")
    assert display_name(f"instruction_file={path}") == "instruction_file=specs/lawyer.yaml"
    # with other axes (and a format point's own commas) left as they are
    name = f"instruction_file={path},format=sep:dash,case:upper,seed=0"
    assert (
        display_name(name) == "instruction_file=specs/lawyer.yaml,format=sep:dash,case:upper,seed=0"
    )
    # relative to the spec's folder when that is shorter still
    assert display_name(f"instruction_file={path}", [str(tmp_path / "specs")]) == (
        "instruction_file=lawyer.yaml"
    )
    # a path that is short already, `none`, and names that are not axis=level pairs: as written
    assert display_name("instruction_file=a.yaml") == "instruction_file=a.yaml"
    assert display_name("instruction_file=none") == "instruction_file=none"
    assert display_name("gpt-4 prompt v1") == "gpt-4 prompt v1"
    far = "/" + "/".join(["elsewhere"] * 3) + "/x.yaml"  # ../../.. would be longer
    assert display_path(far) == far
    # as the user wrote it from here, not climbing out of the spec's folder (the shipped
    # own_task example printed ../instructions/nda_disclosure_plain.yaml)
    (tmp_path / "ablations" / "examples").mkdir(parents=True)
    written = "ablations/instructions/plain.yaml"
    assert display_path(written, [str(tmp_path / "ablations" / "examples")]) == written


def test_tables_print_short_paths_and_leave_the_names_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a = f"instruction_file={tmp_path}/specs/lawyer.yaml"
    b = f"instruction_file={tmp_path}/specs/paralegal.yaml"
    row = {"model": "m", "task": "hearsay", "a": a, "b": b, "score_a": 0.7, "score_b": 0.6,
           "statistic": 0.1, "p_value": 0.04, "p_corrected": 0.04, "ci_low": 0.01,
           "ci_high": 0.2, "n": 40, "n_clusters": 40, "mde_80": 0.2, "metric": "accuracy",
           "test": "paired permutation test", "exact": False, "n_resamples": 1000}  # fmt: skip
    before = copy.deepcopy(row)
    text = comparison_table([row])
    assert str(tmp_path) not in text
    # a file's stem: short, and unique among the names shown
    assert "instruction_file=lawyer " in text and "instruction_file=paralegal " in text
    assert "A − B" in text.splitlines()[0]
    assert row == before  # display only
    # `workbench report`: relative to the spec's folder, read from the parent run's params
    info = {"run_id": "r", "status": "FINISHED", "params": {"spec": f"{tmp_path}/specs/s.yaml"}}
    doc = {"comparisons": [row], "across_tasks": [], "sensitivity": None}
    report = sweep_report("s", info, doc)
    assert "instruction_file=lawyer " in report and str(tmp_path) not in report
    # the dry run shows the whole (short) name, not its first 28 characters
    item = {"task": "hearsay", "variant": a, "model": "m", "n": 40, "prompt_tokens_est": 10,
            "cost_est": None}  # fmt: skip
    assert "instruction_file=lawyer " in dry_run([item], [])


def test_table_names_are_stems_unless_two_clash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a, b = (f"instruction_file={tmp_path}/{d}/lawyer.yaml" for d in ("specs", "old"))
    c = f"instruction_file={tmp_path}/specs/judge.yaml,seed=1"
    shown = table_names([a, b, c, "instruction=reference"])
    # two files named lawyer.yaml: each keeps its (short) path; the others their stems
    assert shown == {
        a: "instruction_file=specs/lawyer.yaml",
        b: "instruction_file=old/lawyer.yaml",
        c: "instruction_file=judge,seed=1",
        "instruction=reference": "instruction=reference",
    }
    assert len(set(shown.values())) == len(shown)
    # a stem that reads as another name's whole form: every name as display_name shows it
    clash = ["instruction_file=x", f"instruction_file={tmp_path}/x.yaml"]
    assert len(set(table_names(clash).values())) == 2


def test_short_names_in_figures() -> None:
    assert short_names(["instruction=reference", "instruction=description"]).key() == []
    long = [f"instruction_file=/data/{'x' * 40}/{s}.yaml" for s in ("lawyer", "judge")]
    names = short_names(long)
    assert [names(n) for n in long] == ["lawyer", "judge"]
    assert [s for s, _ in names.key()] == ["lawyer", "judge"]
    # two files with one stem: numbered, in the given order
    twins = [f"instruction_file=/data/{d * 40}/lawyer.yaml" for d in ("a", "b")]
    assert [short_names(twins)(n) for n in twins] == ["V1", "V2"]
    # several axes: each level short, the axes kept
    mixed = [f"{n},seed={k}" for n in long for k in (0, 1)]
    assert short_names(mixed)(mixed[1]) == "instruction_file=lawyer,seed=1"
