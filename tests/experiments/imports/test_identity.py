"""Imported rows clustered as a sweep's are (#29): rows the source gave one prompt (lm-eval's
prompt_hash, inspect's sample input, promptfoo's vars), else rows of one LegalBench text
(a known task whose row ids are its test indices), are one unit of the tests, unioned across
the arms compared, a sample's epochs with them; where there is no such identity the rows are
tested as independent, and the verdict says so (in `clustered_by`, a note, the table)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments import output
from experiments.analysis import paired_permutation_test
from experiments.imports import ImportedRow, ImportedTrial, ReadOptions, reader, run
from experiments.imports.arms import to_records
from experiments.imports.identity import ROWS, SAMPLES, TaskText, catalog_texts, digest
from experiments.imports.inspect import sample_input
from experiments.imports.result import ImportResult
from experiments.imports.verdict import verdict
from promptlib import Catalog
from tests.experiments.imports.conftest import correctness, write_jsonl

R = 1000
PROMPTFOO = Path(__file__).resolve().parents[2] / "data" / "imports" / "promptfoo" / "results.json"


def arm(
    variant: str,
    vec: Sequence[int],
    prompts: Sequence[str | None] | None = None,
    *,
    tool: str = "lm-evaluation-harness",
    task: str | None = "t",
    epochs: int = 1,
    answers: Sequence[str] | None = None,
) -> ImportedTrial:
    """An arm of `len(vec)` rows ("0", "1", ...), each with the given prompt identity, kept
    apart over `epochs` epochs (the same correctness in each, as at temperature 0)."""
    rows = tuple(
        ImportedRow(str(i), float(c), answer=None if answers is None else answers[i],
                    epoch=e if epochs > 1 else None,
                    prompt=None if prompts is None else prompts[i])
        for i, c in enumerate(vec) for e in range(1, epochs + 1)
    )  # fmt: skip
    return ImportedTrial(Path(f"{variant}.x"), tool, "1", task, variant, "m", None, rows)


def one(doc: Mapping[str, Any]) -> dict[str, Any]:
    (row,) = doc["comparisons"]
    return dict(row)


def expected_p(vec: Mapping[str, Sequence[int]], clusters: Sequence[int] | None) -> float:
    y = ["1"] * len(vec["A"])
    pa, pb = (["1" if c else "0" for c in vec[v]] for v in ("A", "B"))
    res = paired_permutation_test(
        y, pa, pb, metric="accuracy", n_resamples=R, seed=0, clusters=clusters
    )
    return float(res.p_value)


def test_rows_given_one_prompt_are_one_unit_with_the_p_of_their_clusters() -> None:
    """lm-eval's prompt_hash: rows 2k and 2k + 1 got one prompt (identical answers); the test
    is the analysis functions' own with those clusters, not the one of independent rows."""
    vec = correctness(60, 0.75, 0.5, seed=5)
    vec = {v: [c[i - i % 2] for i in range(60)] for v, c in vec.items()}  # pairs answer alike
    prompts = [f"h{i // 2}" for i in range(60)]
    doc = verdict("t", to_records([arm("A", vec["A"], prompts), arm("B", vec["B"], prompts)]),
                  n_resamples=R)  # fmt: skip
    row = one(doc)
    assert (row["n"], row["n_clusters"]) == (60, 30)
    assert row["clustered_by"] == "prompt hash (lm-eval)" and row["cluster_note"] is None
    assert row["p_value"] == expected_p(vec, [i // 2 for i in range(60)])
    assert row["p_value"] != expected_p(vec, None)  # what rows as units gave
    assert doc["clustering"] == [{"task": "t", "model": "m", "clustered_by":
                                  "prompt hash (lm-eval)", "note": None}]  # fmt: skip
    pairing = doc["pairing"][0]
    assert "60 rows are 30 clusters of rows given one prompt (prompt hash (lm-eval))" in pairing


def test_rows_linked_under_any_arm_are_one_cluster() -> None:
    """A gave rows 0 and 1 one prompt, B rows 1 and 2: rows 0, 1, 2 cannot vary apart."""
    vec = {"A": [1, 1, 0, 1, 0, 1], "B": [0, 0, 1, 1, 1, 0]}
    a = arm("A", vec["A"], ["x", "x", "a2", "a3", "a4", "a5"])
    b = arm("B", vec["B"], ["b0", "y", "y", "b3", "b4", "b5"])
    row = one(verdict("t", to_records([a, b]), n_resamples=R))
    assert row["n_clusters"] == 4
    assert row["p_value"] == expected_p(vec, [0, 0, 0, 1, 2, 3])


def test_a_samples_epochs_and_its_same_prompt_samples_move_together() -> None:
    """Epochs kept apart and two samples with one input: 4 samples x 3 epochs, rows of
    samples 0 and 1 (one input) are one unit: 3 clusters, not 4 (epochs) or 12 (rows)."""
    vec = {"A": [1, 1, 0, 1, 1, 0, 1, 1, 0, 1], "B": [0, 0, 1, 0, 0, 1, 0, 1, 1, 1]}
    prompts = ["same", "same", *(f"p{i}" for i in range(2, 10))]
    trials = [arm(v, vec[v], prompts, tool="inspect_ai", epochs=3) for v in ("A", "B")]
    doc = verdict("t", to_records(trials), n_resamples=R)
    row = one(doc)
    assert (row["n"], row["n_clusters"]) == (30, 9)
    assert "30 rows are 9 clusters of rows given one prompt" in doc["pairing"][0]
    assert row["clustered_by"] == "sample input (inspect); a sample's epochs together"
    base = [0, 0, *range(1, 9)]
    assert row["p_value"] == expected_p(
        {v: [c for c in vec[v] for _ in range(3)] for v in vec}, [base[i // 3] for i in range(30)]
    )


def test_epochs_without_prompt_identity_are_samples_tested_as_independent() -> None:
    trials = [arm(v, [1, 0, 1, 1], tool="jsonl", epochs=2) for v in ("A", "B")]
    row = one(verdict("t", to_records(trials), n_resamples=R))
    assert (row["n"], row["n_clusters"], row["clustered_by"]) == (8, 4, SAMPLES)


def test_without_prompt_identity_rows_are_independent_and_it_is_said() -> None:
    vec = correctness(40, 0.7, 0.5, seed=2)
    arms = to_records([arm(v, vec[v], tool="jsonl", task=None) for v in ("A", "B")])
    doc = verdict("t", arms, n_resamples=R)
    row = one(doc)
    assert (row["n_clusters"], row["clustered_by"]) == (40, ROWS)
    assert row["clustered_by"] == "rows (independent: the source gives no prompt identity)"
    assert row["p_value"] == expected_p(vec, None)
    (note,) = [n for n in doc["notes"] if "independent units" in n]
    assert "(no task) (m): rows are tested as independent units" in note
    assert doc["clustering"][0]["clustered_by"] == ROWS and doc["clustering"][0]["note"] == note
    table = output.comparison_table(doc["comparisons"], of="import")
    assert "clus: the units the tests swap and resample, clustered by " + ROWS in table


def test_partly_given_prompt_identity_names_the_rows_without() -> None:
    vec = {"A": [1, 0, 1, 1], "B": [0, 0, 1, 0]}
    prompts = ["h", "h", None, "k"]
    row = one(verdict("t", to_records([arm(v, vec[v], prompts) for v in vec]), n_resamples=R))
    assert row["n_clusters"] == 3 and row["clustered_by"] == "prompt hash (lm-eval)"
    assert "1 of 4 rows have no prompt identity in the source" in row["cluster_note"]


def texts_of(table: Mapping[str, tuple[str, str]]) -> Any:
    """A `TaskTexts` knowing task "lb" only: index -> (text, answer)."""
    rows = {i: TaskText(digest(text), answer) for i, (text, answer) in table.items()}
    return lambda task: rows if task == "lb" else None


TABLE = {str(i): (f"text {i // 3}", "Yes" if (i // 3) % 2 else "No") for i in range(30)}


def test_a_legalbench_tasks_repeated_texts_are_one_unit() -> None:
    vec = {v: [c[i - i % 3] for i in range(30)] for v, c in correctness(30, 0.8, 0.4).items()}
    trials = [arm(v, vec[v], tool="jsonl", task="lb") for v in ("A", "B")]
    row = one(verdict("t", to_records(trials, texts=texts_of(TABLE)), n_resamples=R))
    assert (row["n_clusters"], row["clustered_by"]) == (10, "task texts (lb)")
    assert row["p_value"] == expected_p(vec, [i // 3 for i in range(30)])
    # the source's own prompt identity comes first where it gives one for every row
    own = [arm(v, vec[v], [str(i) for i in range(30)], task="lb") for v in ("A", "B")]
    row = one(verdict("t", to_records(own, texts=texts_of(TABLE)), n_resamples=R))
    assert (row["n_clusters"], row["clustered_by"]) == (30, "prompt hash (lm-eval)")


@pytest.mark.parametrize(
    ("ids", "answers", "why"),
    [
        ([str(i) for i in range(29)] + ["99"], None, "row '99' is not an index of lb's test rows"),
        ([str(i) for i in range(30)], ["Maybe"] * 30, "row '0' has answer 'Maybe', but lb's"),
    ],
)
def test_row_ids_that_are_not_the_tasks_indices_are_not_clustered_by_its_texts(
    ids: list[str], answers: list[str] | None, why: str
) -> None:
    def trial(v: str) -> ImportedTrial:
        rows = tuple(ImportedRow(i, float(int(i) % 2), answer=None if answers is None else
                                 answers[n]) for n, i in enumerate(ids))  # fmt: skip
        return ImportedTrial(Path(f"{v}.jsonl"), "jsonl", None, "lb", v, "m", None, rows)

    arms = to_records([trial("A"), trial("B")], texts=texts_of(TABLE))
    (how,) = arms.units.values()
    assert how.label == ROWS and how.note is not None and why in how.note
    unknown = to_records([trial("A"), trial("B")], texts=lambda task: None)
    (how,) = unknown.units.values()
    assert how.note is not None and "lb is not a LegalBench task with a test split" in how.note


def test_inspects_sample_input_is_its_text_or_its_messages_without_their_ids() -> None:
    def msg(role: str, content: Any, id_: str) -> SimpleNamespace:
        return SimpleNamespace(role=role, content=content, id=id_)

    same = sample_input(SimpleNamespace(input=[msg("user", "Q: x", "id1")]))
    assert same == sample_input(SimpleNamespace(input=[msg("user", "Q: x", "id2")]))
    assert same != sample_input(SimpleNamespace(input=[msg("user", "Q: y", "id1")]))
    assert same != sample_input(SimpleNamespace(input=[msg("system", "Q: x", "id1")]))
    assert sample_input(SimpleNamespace(input="Q: x")) == digest("Q: x")
    assert sample_input(SimpleNamespace(input=None)) is None
    try:  # inspect_ai's own messages (the interop extra), whose ids differ per message
        from inspect_ai.model import ChatMessageUser, ContentText
    except ImportError:
        return
    a = ChatMessageUser(content=[ContentText(text="Q: x")])
    b = ChatMessageUser(content=[ContentText(text="Q: x")])
    assert a.id != b.id
    assert sample_input(SimpleNamespace(input=[a])) == sample_input(SimpleNamespace(input=[b]))


def _lmeval_files(tmp: Path, hashes: Mapping[str, Sequence[str]]) -> Path:
    """lm-eval 0.4 --log_samples output: a task per variant, its samples with prompt hashes."""
    date = "2026-01-01T00-00-00.000001"
    vec = correctness(len(next(iter(hashes.values()))), 0.7, 0.5, seed=9)
    for (task, hs), c in zip(hashes.items(), vec.values(), strict=True):
        lines = [{"doc_id": i, "exact_match": float(c[i]), "metrics": ["exact_match"],
                  "filtered_resps": ["Yes"], "target": "Yes", "doc_hash": f"d{i}",
                  "prompt_hash": h} for i, h in enumerate(hs)]  # fmt: skip
        write_jsonl(tmp / f"samples_{task}_{date}.jsonl", lines)
    results = {"lm_eval_version": "0.4.9", "model_name": "m",
               "configs": {t: {"task": t} for t in hashes},
               "results": {t: {"exact_match,none": 0.5} for t in hashes}}  # fmt: skip
    path = tmp / f"results_{date}.json"
    path.write_text(json.dumps(results))
    return path


def test_lm_eval_prompt_hash_clusters_its_rows(tmp_path: Path) -> None:
    hashes = {"a": [f"p{i // 2}" for i in range(20)], "b": [f"q{i // 2}" for i in range(20)]}
    trials = reader("lm-eval")(_lmeval_files(tmp_path, hashes), ReadOptions())
    assert [r.prompt for r in trials[0].rows][:3] == ["p0", "p0", "p1"]
    row = one(verdict("t", to_records(trials), n_resamples=R))
    assert (row["n_clusters"], row["clustered_by"]) == (10, "prompt hash (lm-eval)")


def test_promptfoo_tests_with_the_same_vars_are_one_unit(tmp_path: Path) -> None:
    data = json.loads(PROMPTFOO.read_text())
    for result in data["results"]["results"]:  # tests 0 and 1 ask the same question
        if result["testIdx"] == 1:
            result["vars"] = result["testCase"]["vars"] = {"question": "row 0: is it?"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    trials = reader("promptfoo")(path, ReadOptions())
    row = one(verdict("t", to_records(trials), n_resamples=R))
    assert (row["n"], row["n_clusters"]) == (10, 9)
    assert row["clustered_by"] == "test vars (promptfoo)"


# ---- on the real data: a LegalBench task's repeated texts, and the order of the lines ----


def _cuad_lines(catalog: Catalog, seed: int = 3) -> list[dict[str, Any]]:
    """Two variants on cuad_audit_rights's test rows, one answer per (variant, distinct text)."""
    rows = catalog.task("cuad_audit_rights").rows("test")
    rng = random.Random(seed)
    hit: dict[tuple[str, str], bool] = {}
    return [
        {"row": r["index"], "variant": v, "model": "m", "task": "cuad_audit_rights",
         "correct": int(hit.setdefault((v, r["text"]), rng.random() < (0.8 if v == "A" else
                                                                        0.7)))}
        for v in ("A", "B") for r in rows
    ]  # fmt: skip


def _import(catalog: Catalog, path: Path) -> ImportResult:
    return run.import_results(
        "jsonl", [path], ReadOptions(), tests=run.Tests(n_resamples=R), known_tasks=catalog.names(),
        track=False, texts=catalog_texts(catalog),
    )  # fmt: skip


@pytest.mark.data
def test_cuad_audit_rights_rows_are_its_775_texts(catalog: Catalog, tmp_path: Path) -> None:
    doc = _import(catalog, write_jsonl(tmp_path / "r.jsonl", _cuad_lines(catalog)))
    (row,) = doc.comparisons
    assert (row["n"], row["n_clusters"]) == (1215, 775)
    assert row["clustered_by"] == "task texts (cuad_audit_rights)"
    table = output.import_summary(doc.to_dict())
    assert "clustered by task texts (cuad_audit_rights)" in table
    assert " 1215   775 " in table  # the n and clus columns
    assert not [n for n in doc.notes if "independent units" in n]


@pytest.mark.data
def test_the_order_of_the_lines_changes_no_number(catalog: Catalog, tmp_path: Path) -> None:
    """The file's lines shuffled, or sorted by row then variant: the same p, interval,
    clusters and clustering (issue 29, point 5)."""
    lines = _cuad_lines(catalog)
    shuffled = random.Random(11).sample(lines, len(lines))
    by_row = sorted(lines, key=lambda x: (x["row"], x["variant"]))  # as text: "10" < "9"
    docs = [_import(catalog, write_jsonl(tmp_path / f"{n}.jsonl", ls))
            for n, ls in enumerate((lines, shuffled, by_row))]  # fmt: skip
    keys = ("p_value", "ci_low", "ci_high", "n", "n_clusters", "clustered_by", "mde_80")
    first = {k: docs[0].comparisons[0][k] for k in keys}
    assert first["n_clusters"] == 775
    for doc in docs[1:]:
        (row,) = doc.comparisons
        assert {k: row[k] for k in keys} == first
        assert doc.clustering == docs[0].clustering
