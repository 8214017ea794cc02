"""Issue 30, defects 3 and 8: the gold answer never reaches a prompt, and is a valid label.

- 3: a template naming the answer column (`{{answer}}` in a register, instruction, variant
  or prompt file) put the gold label in every prompt: a model copying it scored a complete
  1.0. Refused when the template is read, in one line naming the file and field, exit 2,
  before any model call; and, in depth, a trial whose query template is filled with a row's
  gold answer under another column name is refused before its first call, in `run`,
  `sweep` and `optimize` alike (`promptlib.gold`).
- 8: a split whose gold answers are empty on some rows made the empty string a label: a
  model answering nothing had `invalid_rate 0.0`, was right on those rows and the trial was
  complete. Such a split is refused when it is read, naming the file and the rows; an
  empty reply is never a label match.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from experiments.testing.stub_server import StubOpenAI
from tests.conftest import run_cli, workbench_env

KEY = {"OPENAI_API_KEY": "sk-dummy-key-for-the-local-stub-0123456789"}


def _one_line(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [x for x in r.stderr.strip().splitlines() if not x.startswith("warning: ")]
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _env(work: Path, data: Path) -> dict[str, str]:
    env = {**workbench_env(work, data, "gold"), **KEY}
    env["WORKBENCH_RUNS_DIR"] = str(work / "runs")
    return env


def _copier(marker: str) -> Callable[[str], str]:
    """A model that copies what follows `marker` on the prompt's last such line."""

    def reply(prompt: str) -> str:
        found = re.findall(re.escape(marker) + r"[ \t]*([^\n]*)", prompt)
        return found[-1].strip() if found else "none"

    return reply


# ---- 3a. a template naming the answer column -------------------------------------------------
@pytest.mark.data
def test_a_register_file_naming_the_answer_is_refused_before_any_call(
    lb_dir: Path, tmp_path: Path
) -> None:
    """Was: every prompt ended 'Gold: Yes' (or No), the copying model scored 1.0, complete."""
    leak = tmp_path / "leak.yaml"
    leak.write_text('text: "Q: {{text}} Is there hearsay?\\nGold: {{answer}}\\nA:"\n')
    work = tmp_path / "work"
    work.mkdir()
    with StubOpenAI(reply_fn=_copier("Gold:")) as stub:
        args = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url]
        variant = f"register_file={leak},demos=none"
        r = run_cli(
            [*args, "--variant", variant, "--limit", "6", "--json"], _env(work, lb_dir), work
        )
        calls = len(stub.requests)
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    _one_line(r, str(leak), "'text'", "{{answer}}", "gold answer", "remove")
    assert calls == 0 and r.stdout == ""
    assert not (work / "runs").exists()


# ---- 3b. the gold answer under another column's name ----------------------------------------
LABELS = ("contract claim", "tort claim")


def _toy_task(root: Path, *, gold_column: bool, blank: tuple[int, ...] = ()) -> Path:
    """A LegalBench layout with one task, `toy`: long labels, 24 test rows, and (if
    `gold_column`) a column `note` holding each row's answer, shown by the base prompt."""
    task = root / "tasks" / "toy"
    task.mkdir(parents=True)
    (task / "README.md").write_text(
        "# toy\n\n**Legal reasoning type**: Interpretation\n\n"
        "**Task type**: Binary classification\n"
    )
    header = ["index", "text", "answer"] + (["note"] if gold_column else [])

    def tsv(n: int, name: str) -> None:
        lines = ["\t".join(header)]
        for i in range(n):
            answer = "" if (name == "test" and i in blank) else LABELS[i % 2]
            cells = [str(i), f"case {name} {i}: a claim about {i * 7 % 11}", answer]
            lines.append("\t".join(cells + ([LABELS[i % 2]] if gold_column else [])))
        (task / f"{name}.tsv").write_text("\n".join(lines) + "\n")

    tsv(8, "train")
    tsv(24, "test")
    query = "Text: {{text}}\n" + ("Note: {{note}}\n" if gold_column else "") + "Label:"
    (task / "base_prompt.txt").write_text(
        "Is the claim a contract claim or a tort claim?\n\n" + query + "\n"
    )
    return task


SWEEP_SPEC = (
    "name: gold_check\ntasks: [toy]\nfixed: {demos: none}\naxes:\n  format: [base, claude]\n"
)


def _commands(work: Path, url: str) -> dict[str, list[str]]:
    server = ["--model", "openai/stub", "--api-base", url, "--retries", "0"]
    spec = work / "spec.yaml"
    spec.write_text(SWEEP_SPEC)
    return {
        "run": ["run", "toy", *server, "--json"],
        "sweep": ["sweep", str(spec), *server],
        "optimize": [
            "optimize",
            "toy",
            *server,
            "--trials",
            "1",
            "--storage",
            f"sqlite:///{work}/o",
        ],
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "sweep", "optimize"])
def test_a_column_holding_the_gold_answer_is_refused_before_any_call(
    tmp_path: Path, command: str
) -> None:
    """Was (run): every prompt's 'Note:' line was its gold label; the copying model scored
    a complete 1.0 with no warning at all."""
    data = tmp_path / "lb"
    task = _toy_task(data, gold_column=True)
    work = tmp_path / "work"
    work.mkdir()
    with StubOpenAI(reply_fn=_copier("Note:")) as stub:
        args = _commands(work, stub.url)[command]
        r = run_cli(args, _env(work, data), work, timeout=300)
        calls = len(stub.requests)
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    rows = "index 0, 1, 2 and 21 more: 24 of 24 rows checked"
    _one_line(r, "task 'toy'", "shows {{note}}", "gold answer", str(task / "test.tsv"), rows)
    assert calls == 0
    assert not (work / "runs").exists()


# ---- 8. empty gold answers ---------------------------------------------------------------------
@pytest.mark.data
def test_empty_gold_answers_are_refused_when_read_and_never_a_label(
    lb_dir: Path, tmp_path: Path
) -> None:
    """Was: a model that answers nothing had invalid_rate 0.0, was right on the blank rows
    and the trial was complete (exit 0)."""
    data = tmp_path / "lb"
    task = data / "tasks" / "hearsay"
    shutil.copytree(lb_dir / "tasks" / "hearsay", task)
    for f in task.iterdir():
        f.chmod(0o644)  # the shared data is read-only
    tsv = task / "test.tsv"
    lines = tsv.read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    col = header.index("answer")
    blanked = []
    for n in range(1, len(lines)):
        cells = lines[n].split("\t")
        if len(cells) == len(header) and n % 10 == 3:
            blanked.append(cells[header.index("index")])
            cells[col] = " " if n % 20 == 3 else ""
            lines[n] = "\t".join(cells)
    tsv.write_text("\n".join(lines), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    with StubOpenAI(reply="") as stub:
        args = ["run", "hearsay", "--model", "openai/stub", "--api-base", stub.url, "--json"]
        r = run_cli(args, _env(work, data), work)
        calls = len(stub.requests)
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    first = f"index {blanked[0]} (line 4), {blanked[1]} (line 14), {blanked[2]} (line 24)"
    more = f" and {len(blanked) - 3} more;"
    _one_line(r, str(tsv), f": {len(blanked)} rows of ", first + more, "empty answer", "fill in")
    assert calls == 0 and r.stdout == ""
    assert not (work / "runs").exists()


def test_an_empty_reply_is_never_a_label_match() -> None:
    from experiments.metrics import METRICS, balanced_accuracy, class_report, parse_label

    # even against a gold answer that is empty (no read lets one through any more)
    assert balanced_accuracy(["", "Yes"], ["", "Yes"]) == 0.5
    assert class_report(["", " . "], ["Yes", "No"], ["Yes", "No", ""]).invalid_rate == 1.0
    assert parse_label("  ", ["Yes", "No", " "]) is None
    for name in ("citation_open_contains", "definition_extraction_stemmed_match", "ssla_f1"):
        assert METRICS[name]([""], [""]) == 0.0, name
        assert METRICS[name]([""], ["Acme,"]) == 0.0, name  # 'Acme,': an empty second name


@pytest.mark.data
def test_workbench_score_refuses_empty_gold_answers(tmp_path: Path, lb_dir: Path) -> None:
    preds = tmp_path / "p.jsonl"
    rows = [{"generation": "", "answer": a} for a in ("Smith v. Jones", "", "Doe v. Roe", " ")]
    preds.write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    env = _env(tmp_path, lb_dir)
    r = run_cli(["score", "citation_prediction_open", str(preds)], env, tmp_path)
    assert r.returncode == 2, r.stdout
    _one_line(r, str(preds), "2 rows", "lines 2 and 4", "empty", "answer")


@pytest.mark.data
def test_an_import_scored_from_empty_gold_answers_is_refused(tmp_path: Path, lb_dir: Path) -> None:
    src = tmp_path / "results.jsonl"
    rows = [
        {"row": str(i), "variant": v, "model": "m", "prediction": "", "answer": a}
        for v in ("a", "b")
        for i, a in enumerate(["Yes", "", "No", "  "])
    ]
    src.write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    args = ["import", "jsonl", str(src), "--task", "hearsay", "--rescore", "--no-track"]
    r = run_cli(args, _env(tmp_path, lb_dir), tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    _one_line(r, str(src), "2 rows of a / m", "'1' and '3'", "empty answer", "fill in")
