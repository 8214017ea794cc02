"""inspect_ai's real logs, imported: inspect_ai (from PyPI, the `interop` extra) runs a small
evaluation of two prompt variants against the loopback stub server, which answers each row
right or wrong as a designed correctness vector says; the logs (``.eval``, and ``.json``
written by inspect_ai's own `write_eval_log`) are read back with inspect_ai's log API.

- the imported correctness is the designed vector, row by row; the variant, model, tool
  version and the source metric are carried;
- `workbench import inspect` gives the p-value and interval the analysis functions give on
  the same vectors;
- pairing pays: on rows whose difficulty the variants share, the paired p-value is smaller
  than an unpaired two-proportion test's on the same two runs (both printed);
- epochs are reduced as the log says (``mode``) or kept apart; a sample that errored is a
  failure state, never a wrong answer; samples the log lacks are listed as missing."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import fisher_exact, norm

from experiments.analysis import metric_interval, paired_permutation_test
from experiments.imports import ImportedTrial, ImportInputError, ReadOptions, reader
from experiments.imports.arms import to_records
from experiments.imports.verdict import verdict
from tests.experiments.imports.conftest import Workbench
from tests.experiments.imports.interop_stub import (
    N_ROWS,
    answer,
    designed_correctness,
    need,
    question,
    reply_fn,
    wrong,
)

need("inspect_ai")

pytestmark = pytest.mark.slow

MODEL = "openai-api/stub/stub-model"  # inspect_ai's OpenAI-compatible provider: STUB_BASE_URL
CORRECT = designed_correctness()
EPOCH_ROWS = 12  # the epochs run: variant A on the first rows, three epochs, reducer "mode"
FAILING_ROW = 3  # the stub always fails this row in the epochs run: an errored sample
R = 2000


def _flipped(row: int) -> bool:
    """Rows whose second request in the epochs run gets the other answer (one epoch of three)."""
    return row % 4 == 0 and row != FAILING_ROW


def _stub_reply() -> Any:
    designed = reply_fn(CORRECT)
    calls: Counter[str] = Counter()

    def reply(prompt: str) -> str:
        text = designed(prompt)
        if "Epochs." not in prompt:
            return text
        calls[prompt] += 1
        row = int(re.search(r"row (\d+)", prompt).group(1))  # type: ignore[union-attr]
        if calls[prompt] == 2 and _flipped(row):
            return wrong(row) if text == answer(row) else answer(row)
        return text

    return reply


def _task(variant: str, name: str, n: int, epochs: int = 1, marker: str = "") -> Any:
    from inspect_ai import Epochs, Task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, prompt_template

    samples = [Sample(id=i, input=question(i), target=answer(i)) for i in range(n)]
    return Task(
        dataset=MemoryDataset(samples, name="stub-rows"),
        solver=[prompt_template(f"{marker}Variant {variant}. {{prompt}}"), generate()],
        scorer=match(),
        name=name,
        metadata={"variant": variant},
        epochs=Epochs(epochs, "mode"),
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """inspect_ai run once: variants A and B on every row, and the epochs run."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log, write_eval_log

    from experiments.testing.stub_server import StubOpenAI

    out = tmp_path_factory.mktemp("inspect")
    fails = re.compile(rf"Epochs\..*\brow {FAILING_ROW}\b")
    stub = StubOpenAI(reply_fn=_stub_reply(), fail_fn=lambda p: bool(fails.search(p)))
    with stub, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUB_API_KEY", "stub")
        mp.setenv("STUB_BASE_URL", stub.url)
        tasks = [
            _task("A", "stub_a", N_ROWS),
            _task("B", "stub_b", N_ROWS),
            _task("A", "stub_epochs", EPOCH_ROWS, epochs=3, marker="Epochs. "),
        ]
        done = inspect_eval(
            tasks, model=MODEL, log_dir=str(out), display="none", fail_on_error=False,
            max_retries=0, retry_on_error=0,
        )  # fmt: skip
    paths = {log.eval.task: Path(log.location) for log in done}
    assert {log.status for log in done} == {"success"}, [log.error for log in done]
    json_path = out / "stub_a.json"
    write_eval_log(read_eval_log(str(paths["stub_a"])), str(json_path))  # inspect_ai's writer
    paths["stub_a.json"] = json_path
    yield paths


def _read(path: Path, **kw: Any) -> ImportedTrial:
    (trial,) = reader("inspect")(path, ReadOptions(**kw))
    return trial


def _vector(trial: ImportedTrial) -> list[float | None]:
    rows = sorted(trial.rows, key=lambda r: int(r.row_id))
    assert [r.row_id for r in rows] == [str(i) for i in range(len(rows))]
    return [r.correct for r in rows]


def test_the_logs_import_with_the_designed_correctness(logs: dict[str, Path]) -> None:
    import inspect_ai

    for variant, task in (("A", "stub_a"), ("B", "stub_b")):
        trial = _read(logs[task], variant_from="metadata.variant")
        assert trial.variant == variant and trial.model == MODEL
        assert trial.tool == "inspect_ai" and trial.tool_version == inspect_ai.__version__
        assert trial.metric == "match" and trial.source_file == logs[task]
        assert _vector(trial) == [float(c) for c in CORRECT[variant]]
        for row in trial.rows:
            assert row.answer == answer(int(row.row_id))
            assert (row.prediction == row.answer) == bool(row.correct), row
    assert _read(logs["stub_b"]).variant == "stub_b"  # by default: the task's name


def test_json_and_eval_logs_read_the_same(logs: dict[str, Path]) -> None:
    a, b = _read(logs["stub_a"]), _read(logs["stub_a.json"])
    assert logs["stub_a"].suffix == ".eval" and b.source_file.suffix == ".json"
    assert a.rows == b.rows and (a.variant, a.model, a.tool_version) == (
        b.variant,
        b.model,
        b.tool_version,
    )


def _direct(a: list[int], b: list[int]) -> tuple[Any, Any]:
    y = ["1"] * len(a)
    pa, pb = (["1" if c else "0" for c in v] for v in (a, b))
    res = paired_permutation_test(y, pa, pb, metric="accuracy", n_resamples=R, seed=0)
    return res, metric_interval(y, pa, pb, metric="accuracy", seed=0)


@pytest.mark.data
def test_workbench_import_gives_the_analysis_numbers(
    logs: dict[str, Path], tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    paths = [str(logs["stub_a"]), str(logs["stub_b"])]
    result = wb("import", "inspect", *paths, "--variant-from", "metadata.variant",
                "--task", "hearsay", "--name", "inspect-ab", "--n-resamples", str(R), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (row,) = doc["comparisons"]
    res, ci = _direct(CORRECT["A"], CORRECT["B"])
    assert (row["a"], row["b"], row["n"]) == ("A", "B", N_ROWS)
    # each sample's input is its prompt identity (every input differs here)
    assert (row["clustered_by"], row["n_clusters"]) == ("sample input (inspect)", N_ROWS)
    assert row["statistic"] == pytest.approx(res.statistic)
    assert (row["p_value"], row["ci_low"], row["ci_high"]) == (res.p_value, ci.low, ci.high)
    again = wb("compare", "inspect-ab", "--n-resamples", str(R), "--json")  # read back from MLflow
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["comparisons"][0]["p_value"] == row["p_value"]
    assert doc["left_out"] == []
    assert any(t.startswith("inspect_ai 0.3.") for t in doc["tools"]), doc["tools"]
    trials = [r for r in wb.runs("inspect-ab") if r.data.tags["workbench.kind"] != "import"]
    assert {r.data.params["tool"] for r in trials} == {"inspect_ai"}
    assert {r.data.params["source_metric"] for r in trials} == {"match"}


def unpaired_p(a: list[int], b: list[int]) -> tuple[float, float]:
    """Two-sided p-values that ignore the pairing: the two-proportion z-test (what lm-eval's
    run comparison does) and Fisher's exact test on the 2x2 table of right/wrong counts."""
    n, m = len(a), len(b)
    pooled = (sum(a) + sum(b)) / (n + m)
    z = (sum(a) / n - sum(b) / m) / math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / m))
    fisher = fisher_exact([[sum(a), n - sum(a)], [sum(b), m - sum(b)]]).pvalue
    return float(2 * norm.sf(abs(z))), float(fisher)


def test_pairing_two_inspect_runs_beats_an_unpaired_test(logs: dict[str, Path]) -> None:
    a, b = (_read(logs[t], variant_from="metadata.variant") for t in ("stub_a", "stub_b"))
    doc = verdict("pairing", to_records([a, b]), n_resamples=R)
    (row,) = doc["comparisons"]
    va, vb = (_vector(t) for t in (a, b))
    ia, ib = [int(c or 0) for c in va], [int(c or 0) for c in vb]
    z_p, fisher_p = unpaired_p(ia, ib)
    discordant = sum(x != y for x, y in zip(ia, ib, strict=True))
    print(
        f"\ninspect A vs B on {N_ROWS} rows with shared difficulty: accuracy "
        f"{sum(ia) / N_ROWS:.3f} vs {sum(ib) / N_ROWS:.3f}, {discordant} discordant rows; "
        f"paired permutation p = {row['p_value']:.4f} (exact: {row['exact']}), unpaired "
        f"two-proportion z-test p = {z_p:.4f}, Fisher exact p = {fisher_p:.4f}"
    )
    assert row["p_value"] < z_p and row["p_value"] < fisher_p
    assert row["p_unpaired"] == pytest.approx(z_p)  # the import's own pairing note agrees
    assert any(f"unpaired z-test on the same {N_ROWS} rows" in n for n in doc["pairing"])


def test_epochs_reduced_as_the_log_says_or_kept_apart(logs: dict[str, Path]) -> None:
    path = logs["stub_epochs"]
    reduced = _read(path)
    assert reduced.metric == "match (mode over 3 epochs)"
    by_id = {r.row_id: r for r in reduced.rows}
    assert len(by_id) == EPOCH_ROWS
    failed = by_id.pop(str(FAILING_ROW))
    assert (failed.status, failed.correct) == ("error", None)  # never scored as wrong
    for row_id, row in by_id.items():  # the mode of 3 epochs outvotes the one flipped epoch
        assert row.correct == CORRECT["A"][int(row_id)] and row.epoch is None, row
    kept = _separate(path)
    assert len(kept.rows) == 3 * EPOCH_ROWS
    assert {r.key for r in kept.rows} == {f"{i}#{e}" for i in range(EPOCH_ROWS) for e in (1, 2, 3)}
    for i in range(EPOCH_ROWS):
        epochs = [r for r in kept.rows if r.row_id == str(i)]
        if i == FAILING_ROW:
            assert {(r.status, r.correct) for r in epochs} == {("error", None)}
            continue
        wrong_epochs = sum(r.correct != CORRECT["A"][i] for r in epochs)
        assert wrong_epochs == (1 if _flipped(i) else 0), (i, epochs)


@pytest.mark.data
def test_workbench_import_keeps_epochs_apart_when_asked(
    logs: dict[str, Path], tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(tmp_path, lb_dir, monkeypatch)
    counts = {}
    for mode in ("reduce", "separate"):
        result = wb("import", "inspect", str(logs["stub_epochs"]), "--epochs", mode, "--task",
                    "hearsay", "--no-track", "--n-resamples", "200", "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        (trial,) = json.loads(result.stdout)["trials"]
        counts[mode] = trial["n"]
    assert counts == {"reduce": EPOCH_ROWS - 1, "separate": 3 * (EPOCH_ROWS - 1)}  # row 3 failed
    bad = wb("import", "inspect", str(logs["stub_epochs"]), "--epochs", "all", "--no-track")
    assert bad.exit_code == 2 and "--epochs all: give 'reduce' or 'separate'" in bad.stderr


def _separate(path: Path) -> ImportedTrial:
    from experiments.imports.inspect import read_inspect

    (trial,) = read_inspect(path, ReadOptions(epochs="separate"))
    return trial


def test_samples_the_log_lacks_are_missing_rows(logs: dict[str, Path], tmp_path: Path) -> None:
    """A log cut short (here: inspect_ai's own writer given the log without its last five
    samples) keeps its listed samples as ``missing`` rows, not as wrong answers."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(logs["stub_b"]))
    assert log.samples is not None
    log.samples = log.samples[:-5]
    log.status = "cancelled"
    write_eval_log(log, str(tmp_path / "cut.eval"))
    trial = _read(tmp_path / "cut.eval")
    missing = sorted(int(r.row_id) for r in trial.rows if r.status == "missing")
    assert missing == list(range(N_ROWS - 5, N_ROWS))
    assert all(r.correct is None for r in trial.rows if r.status == "missing")
    assert len(trial.rows) == N_ROWS


def test_bad_inspect_files_are_refused_by_name(logs: dict[str, Path], tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    cut = tmp_path / "cut.eval"
    cut.write_bytes(logs["stub_a"].read_bytes()[:2000])
    text = json.loads(logs["stub_a.json"].read_text())
    cut_json = tmp_path / "cut.json"
    cut_json.write_text(logs["stub_a.json"].read_text()[:3000])
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(text | {"version": 99}))
    old_tool = tmp_path / "old_tool.json"
    log = read_eval_log(str(logs["stub_a.json"]))
    log.eval.packages = {"inspect_ai": "0.2.7"}
    write_eval_log(log, str(old_tool))
    other = tmp_path / "results.json"
    other.write_text(json.dumps({"results": {"t": {}}, "configs": {}}))
    cases = [
        (cut, "not a readable inspect_ai eval log"),
        (cut_json, "not a readable inspect_ai eval log"),
        (newer, "log format 99"),
        (
            old_tool,
            "written by inspect_ai 0.2.7, an unsupported version; this reader supports inspect_ai 0.3 or later, before 0.4",
        ),
        (other, "another tool's results"),
        (tmp_path / "r.jsonl", "ends in .eval or .json"),
    ]
    for path, words in cases:
        with pytest.raises(ImportInputError) as e:
            _read(path)
        message = str(e.value)
        assert str(path) in message and words in message, message
        assert "\n" not in message
    with pytest.raises(ImportInputError, match="no scorer 'f1'"):
        from experiments.imports.inspect import read_inspect

        read_inspect(logs["stub_a"], ReadOptions(scorer="f1"))
