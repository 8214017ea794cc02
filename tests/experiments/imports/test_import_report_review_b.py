"""Review of an import's HTML report (issue 34): its per-slice table scores what the
comparison scored (the source's correctness), not the raw outputs the page shows."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from experiments.imports.records import ImportedRow, ImportedTrial
from experiments.imports.report import build_import_report
from experiments.imports.run import Tests, _arms, _verdict

N = 40
RNG = random.Random(1)
ANS = [RNG.choice(["Yes", "No"]) for _ in range(N)]
RIGHT = {"a": [RNG.random() < 0.8 for _ in range(N)], "b": [RNG.random() < 0.5 for _ in range(N)]}


def _trial(variant: str) -> ImportedTrial:
    def said(a: str, ok: bool) -> str:  # a sentence: the source judged it, not an exact match
        return f"The answer is {a if ok else ('No' if a == 'Yes' else 'Yes')}."

    rows = tuple(
        ImportedRow(str(i), 1.0 if ok else 0.0, prediction=said(a, ok), answer=a,
                    input_text=f"text {i}")
        for i, (a, ok) in enumerate(zip(ANS, RIGHT[variant], strict=True))
    )  # fmt: skip
    return ImportedTrial(Path(f"/tmp/{variant}.jsonl"), "jsonl", None, "hearsay", variant, "m",
                         None, rows)  # fmt: skip


def test_slice_scores_are_the_sources_correctness_on_the_slice_rows() -> None:
    tests = Tests(n_resamples=200)
    compared, arms = _arms([_trial("a"), _trial("b")], tests, {"hearsay"})
    verdict = _verdict("imp", arms, tests, None)
    legal = {
        str(i): {"index": str(i), "text": f"text {i}", "answer": ANS[i], "slice": "pq"[i % 2]}
        for i in range(N)
    }
    doc: dict[str, Any] = build_import_report(
        {"name": "imp", "import_id": "0" * 64}, compared, arms, verdict,
        task_rows=lambda task: legal, created="2026-12-06T00:00:00+00:00",
    ).to_dict()  # fmt: skip
    (sample,) = doc["samples"]
    (table,) = sample["slices"]
    assert table["metric"] == verdict["comparisons"][0]["metric"] == "accuracy"
    for row, k in zip(table["rows"], (0, 1), strict=True):
        pos = [i for i in range(N) if i % 2 == k]
        want_a = sum(RIGHT["a"][i] for i in pos) / len(pos)
        want_b = sum(RIGHT["b"][i] for i in pos) / len(pos)
        assert (row["group"], row["n"]) == ("pq"[k], len(pos))
        assert (row["score_a"], row["score_b"]) == (want_a, want_b)
    # the page still shows the source's outputs
    shown = {r["index"]: r["a"]["output"] for r in sample["rows"]}
    assert all(v.startswith("The answer is ") for v in shown.values())
