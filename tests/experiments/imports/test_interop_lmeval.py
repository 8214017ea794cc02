"""lm-evaluation-harness's real ``--log_samples`` files, imported: lm-eval (from PyPI, the
`interop` extra; its ``local-completions`` API model, no torch) runs two prompt variants (two
task YAMLs shaped like lm-eval's own legalbench tasks: ``generate_until``, ``exact_match`` on
the filtered response) against the loopback stub server, which answers each row right or wrong
as a designed correctness vector says.

- each ``doc_id`` is a row with the designed correctness; the per-sample metrics and the
  filtered response are kept; the results file gives the model, the lm-eval version and the
  source metric (``exact_match``, which ``--rescore`` says differs from balanced accuracy);
- `workbench import lm-eval` gives the p-value and interval the analysis functions give on
  the same vectors;
- a cut file, a samples file without its results file, another release's or another tool's
  file are refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.analysis import metric_interval, paired_permutation_test
from experiments.imports import ImportedTrial, ImportInputError, ReadOptions, reader
from tests.experiments.imports.conftest import Workbench
from tests.experiments.imports.interop_stub import (
    N_ROWS,
    answer,
    designed_correctness,
    need,
    question,
    stub_for,
)

need("lm_eval")

pytestmark = pytest.mark.slow

CORRECT = designed_correctness()
TASKS = {"A": "stub_legal_a", "B": "stub_legal_b"}
R = 2000

TASK_YAML = """\
task: {task}
dataset_path: csv
dataset_kwargs:
  data_files:
    test: {data}
  delimiter: "\\t"
output_type: generate_until
test_split: test
target_delimiter: " "
doc_to_text: "Variant {variant}. {{{{text}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until:
    - "\\n"
  do_sample: false
  temperature: 0.0
  max_gen_toks: 15
filter_list:
  - name: "get-answer"
    filter:
      - function: "remove_whitespace"
      - function: "take_first"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
metadata:
  version: 1.0
"""


def _write_tasks(folder: Path) -> Path:
    data = folder / "rows.tsv"
    lines = ["index\ttext\tanswer"] + [f"{i}\t{question(i)}\t{answer(i)}" for i in range(N_ROWS)]
    data.write_text("\n".join(lines) + "\n")
    tasks = folder / "tasks"
    tasks.mkdir()
    for variant, task in TASKS.items():
        text = TASK_YAML.format(task=task, data=data, variant=variant)
        (tasks / f"{task}.yaml").write_text(text)
    return tasks


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """lm-eval's CLI run once on both variants; the paths of its results and samples files."""
    folder = tmp_path_factory.mktemp("lmeval")
    tasks = _write_tasks(folder)
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(folder / "hf"), "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    with stub_for(CORRECT) as stub:
        args = [
            sys.executable, "-m", "lm_eval", "--model", "local-completions",
            "--model_args", f"model=stub-model,base_url={stub.url}/completions,"
            "tokenizer_backend=None,num_concurrent=1,max_retries=1",
            "--tasks", ",".join(TASKS.values()), "--include_path", str(tasks),
            "--log_samples", "--output_path", str(folder / "out"),
        ]  # fmt: skip
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (folder / "out").rglob("results_*.json")
    paths = {"results": results}
    for variant, task in TASKS.items():
        (paths[variant],) = results.parent.glob(f"samples_{task}_*.jsonl")
    yield paths


def _vector(trial: ImportedTrial) -> list[float | None]:
    rows = sorted(trial.rows, key=lambda r: int(r.row_id))
    assert [r.row_id for r in rows] == [str(i) for i in range(N_ROWS)]
    return [r.correct for r in rows]


def test_the_samples_import_with_the_designed_correctness(run: dict[str, Path]) -> None:
    import lm_eval

    read = reader("lm-eval")
    from_results = {t.variant: t for t in read(run["results"], ReadOptions())}
    assert sorted(from_results) == sorted(TASKS.values())
    for variant, task in TASKS.items():
        (trial,) = read(run[variant], ReadOptions())
        assert trial == from_results[task]  # a samples file or the results file: the same
        assert (trial.variant, trial.model, trial.metric) == (task, "stub-model", "exact_match")
        assert trial.tool == "lm-evaluation-harness"
        assert trial.tool_version == lm_eval.__version__
        assert trial.task is None  # not one of lm-eval's legalbench tasks: --task names it
        assert _vector(trial) == [float(c) for c in CORRECT[variant]]
        for row in trial.rows:
            assert row.answer == answer(int(row.row_id))
            assert row.prediction == row.extra["filtered_resps"][0]
            assert row.extra["metrics"] == {"exact_match": row.correct}
            assert (row.prediction == row.answer) == bool(row.correct)
    with pytest.raises(
        ImportInputError, match=r"no per-sample metric .f1. \(--scorer\); its metrics: exact_match"
    ):
        read(run["A"], ReadOptions(scorer="f1"))
    (named,) = read(run["A"], ReadOptions(task="hearsay", variant_from="doc_to_text"))
    assert named.variant == "Variant A. {{text}}\nAnswer:" and named.task == "hearsay"


@pytest.mark.data
def test_workbench_import_gives_the_analysis_numbers(
    run: dict[str, Path], tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    result = wb("import", "lm-eval", str(run["results"]), "--task", "hearsay",
                "--name", "lmeval-ab", "--n-resamples", str(R), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["comparisons"]
    y = ["1"] * N_ROWS
    pa, pb = (["1" if c else "0" for c in CORRECT[v]] for v in ("A", "B"))
    res = paired_permutation_test(y, pa, pb, metric="accuracy", n_resamples=R, seed=0)
    ci = metric_interval(y, pa, pb, metric="accuracy", seed=0)
    assert (row["a"], row["b"], row["n"]) == (TASKS["A"], TASKS["B"], N_ROWS)
    # lm-eval's per-sample prompt_hash is the rows' prompt identity (every prompt differs)
    assert (row["clustered_by"], row["n_clusters"]) == ("prompt hash (lm-eval)", N_ROWS)
    assert row["statistic"] == pytest.approx(res.statistic)
    assert (row["p_value"], row["ci_low"], row["ci_high"]) == (res.p_value, ci.low, ci.high)
    again = wb("compare", "lmeval-ab", "--n-resamples", str(R), "--json")  # read back from MLflow
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["comparisons"][0]["p_value"] == row["p_value"]
    one = wb("import", "lm-eval", str(run["A"]), str(run["B"]), "--task", "hearsay",
             "--name", "lmeval-samples", "--n-resamples", str(R), "--json")  # fmt: skip
    assert one.exit_code == 0, one.output
    assert json.loads(one.stdout)["comparisons"][0]["p_value"] == row["p_value"]
    assert wb("compare", "lmeval-samples", "--n-resamples", str(R)).exit_code == 0
    rescored = wb("import", "lm-eval", str(run["results"]), "--task", "hearsay", "--rescore",
                  "--no-track", "--n-resamples", str(R), "--json")  # fmt: skip
    assert rescored.exit_code == 0, rescored.output
    doc = json.loads(rescored.stdout)
    assert {t["metric"] for t in doc["trials"]} == {"balanced_accuracy"}
    assert any("exact_match" in n and "balanced_accuracy" in n for n in doc["notes"]), doc


def test_lm_evals_legalbench_tasks_name_their_task(run: dict[str, Path], tmp_path: Path) -> None:
    """lm-eval's legalbench tasks load ``nguha/legalbench`` with the task as ``dataset_name``
    (here the run's results file, retargeted so: the hub is out of reach)."""
    out = _copy_run(run, tmp_path)
    results = json.loads(out["results"].read_text())
    results["configs"][TASKS["A"]] |= {
        "dataset_path": "nguha/legalbench",
        "dataset_name": "hearsay",
    }
    out["results"].write_text(json.dumps(results))
    (trial,) = reader("lm-eval")(out["A"], ReadOptions())
    assert trial.task == "hearsay"
    with pytest.raises(ImportInputError, match="is LegalBench's 'hearsay' but --task abercrombie"):
        reader("lm-eval")(out["A"], ReadOptions(task="abercrombie"))


def _copy_run(run: dict[str, Path], folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for key, path in run.items():
        out[key] = folder / path.name
        out[key].write_bytes(path.read_bytes())
    return out


def _edit_results(path: Path, **fields: Any) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))


def test_bad_lmeval_files_are_refused_by_name(run: dict[str, Path], tmp_path: Path) -> None:
    cases: list[tuple[str, Path, str]] = []
    cut = _copy_run(run, tmp_path / "cut")
    text = cut["A"].read_text()
    cut["A"].write_text(text[: len(text) - 40])
    cases.append(("truncated mid-line", cut["A"], "(the last: a truncated file?)"))
    short = _copy_run(run, tmp_path / "short")
    kept = short["A"].read_text().splitlines(keepends=True)[:-3]
    short["A"].write_text("".join(kept))
    cases.append(("cut at a line's end", short["A"], f"{N_ROWS - 3} samples (filter get-answer)"))
    alone = tmp_path / "alone"
    alone.mkdir()
    lone = alone / run["A"].name
    lone.write_bytes(run["A"].read_bytes())
    cases.append(("samples without results", lone, "no results file results_"))
    old = _copy_run(run, tmp_path / "old")
    _edit_results(old["results"], lm_eval_version="0.3.0")
    cases.append(("another release", old["A"], "written by lm-eval 0.3.0"))
    other = tmp_path / "results_2026-01-01T00-00-00.000000.json"
    other.write_text(json.dumps({"results": {"version": 3, "results": []}}))
    cases.append(("promptfoo's file", other, "not an lm-eval results file"))
    inspect_like = tmp_path / "2026-01-01T00-00-00_task_x.json"
    inspect_like.write_text("{}")
    cases.append(("another name", inspect_like, "not an lm-eval output file name"))
    no_id = _copy_run(run, tmp_path / "noid")
    first, *rest = no_id["A"].read_text().splitlines(keepends=True)
    no_id["A"].write_text(
        json.dumps({k: v for k, v in json.loads(first).items() if k != "doc_id"})
        + "\n"
        + "".join(rest)
    )
    cases.append(("a row without doc_id", no_id["A"], "line 1 has no doc_id"))
    for what, path, words in cases:
        with pytest.raises(ImportInputError) as e:
            reader("lm-eval")(path, ReadOptions())
        message = str(e.value)
        assert str(path) in message and words in message, (what, message)
        assert "\n" not in message, what
