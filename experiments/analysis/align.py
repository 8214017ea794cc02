"""Row order and the alignment of trials by row index, defined once: the comparisons pair
the very same rows (`same_rows`), the sensitivity groups keep the rows all variants share
(`common_rows`), and both sort them by `row_order`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.metrics import normalize
from experiments.trials.record import TrialRecord
from promptlib.errors import WorkbenchError


def row_order(index: str) -> tuple[int, int, str]:
    """Numeric indices in numeric order, then the rest: a canonical order for pairing."""
    return (0, int(index), "") if index.isdigit() else (1, 0, index)


def same_rows(
    records: Sequence[TrialRecord], where: str
) -> tuple[list[str], list[list[str]], list[str]]:
    """Answers, each record's generations and the row indices, paired by row index in a
    canonical row order (so a resumed trial stored in another order gives the very same
    p-value). Every record must hold the same rows with the same answers and no failed row."""
    first = records[0]
    first_indices = first.indices
    order = sorted(range(len(first_indices)), key=lambda j: row_order(str(first_indices[j])))
    indices = [str(first_indices[j]) for j in order]
    first_answers = first.answers
    answers = [first_answers[j] for j in order]
    out = []
    for rec in records:
        rec_answers, rec_generations = rec.answers, rec.generations
        pos = {str(idx): j for j, idx in enumerate(rec.indices)}
        if set(pos) != set(indices) or len(pos) != len(rec.rows):
            raise WorkbenchError(
                f"{where}: {first.variant} and {rec.variant} were evaluated on different rows; "
                "rerun the sweep (its trials are paired on the same rows)"
            )
        gens = []
        for idx, ans in zip(indices, answers, strict=True):
            j = pos[idx]
            if rec_answers[j] != ans:
                raise WorkbenchError(f"{where}: row {idx} has different answers in two arms")
            g = rec_generations[j]
            assert g is not None, "only complete arms are compared"
            gens.append(g)
        out.append(gens)
    return answers, out, indices


def common_rows(records: Sequence[TrialRecord]) -> tuple[str, ...]:
    """The row indices every record holds, in the canonical row order."""
    common = set(records[0].indices)
    for rec in records[1:]:
        common &= set(rec.indices)
    return tuple(sorted(common, key=row_order))


def stat_inputs(metric: str, answers: list[str], gens: list[list[str]]) -> tuple[Any, list[Any]]:
    """What the statistics see: normalised labels for balanced accuracy, raw text otherwise."""
    if metric == "balanced_accuracy":
        return [normalize(a) for a in answers], [[normalize(g) for g in gs] for gs in gens]
    return answers, gens
