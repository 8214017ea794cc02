"""Figures that survive real names (issue 31): six variants named by 120-character
instruction-file paths. Before, the legend ran off the figure, titles overprinted each other
and matplotlib warned "constrained_layout not applied". Now long names are drawn short (the
file's stem, or V1, V2, ...) with a key below mapping each to its full name, no warning is
raised, and no title, label, legend or text overlaps another or leaves the figure.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest

from experiments.analysis.compare import pair
from experiments.analysis.figures import pair_figure, sensitivity_figures
from experiments.analysis.sensitivity import sensitivity_report
from experiments.metrics import balanced_accuracy
from experiments.trials.record import TrialRecord, parse_axes

pytestmark = pytest.mark.slow  # most of its tests draw whole figures: seconds each

DIR = "/home/someone/projects/legal-prompt-study/own-task-instructions/"
STEMS = ("lawyer", "paralegal", "judge", "plain_english", "law_student", "clerk")
TASKS = ("hearsay", "abercrombie")


def _paths(long_stems: bool) -> list[str]:
    """Six 120-character paths; their stems short (lawyer) or themselves long."""
    out = []
    for s in STEMS:
        stem = f"{s}_instructions_revised_v2" if long_stems else s
        pad = 120 - len(DIR) - len(stem) - len("/.yaml")
        out.append(f"{DIR}{'d' * pad}/{stem}.yaml")
    assert all(len(p) == 120 for p in out)
    return out


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def _record(task: str, variant: str, p: float, rng: np.random.Generator) -> TrialRecord:
    hits = list(rng.random(40) < p)
    answers = ["Yes" if i % 2 == 0 else "No" for i in range(40)]
    gens = [a if h else ("No" if a == "Yes" else "Yes") for a, h in zip(answers, hits, strict=True)]
    return TrialRecord.of(
        task=task, model="org/model", variant=variant, metric="balanced_accuracy",
        complete=True, indices=[str(i) for i in range(40)], answers=answers, generations=gens,
        correct=hits, score=balanced_accuracy(gens, answers), axes=parse_axes(variant),
    )  # fmt: skip


def _sweep(long_stems: bool) -> tuple[list[TrialRecord], list[dict[str, Any]], dict[str, Any]]:
    names = [f"instruction_file={p}" for p in _paths(long_stems)]
    rng = np.random.default_rng(3)
    records = [_record(t, v, 0.45 + 0.06 * j, rng) for t in TASKS for j, v in enumerate(names)]
    table = []
    for t in TASKS:
        arms = {r.variant: r for r in records if r.task == t}
        for a, b in itertools.combinations(names, 2):  # all_pairs: 15 per task
            row = pair(arms[a], arms[b], n_resamples=100, peers=list(arms.values()))
            table.append(replace(row, model="org/model", task=t))
    return records, table, sensitivity_report(records, n_resamples=100).to_dict()


def _boxes(fig: Any) -> list[tuple[str, Any]]:
    """(what, window extent) of every title, axis label, legend and text drawn."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        for what, t in (("title", ax.title), ("x label", ax.xaxis.label),
                        ("y label", ax.yaxis.label)):  # fmt: skip
            if t.get_text():
                out.append((f"axes {i} {what}", t.get_window_extent(r)))
        if ax.get_legend() is not None:
            out.append((f"axes {i} legend", ax.get_legend().get_window_extent(r)))
        out += [(f"axes {i} text {t.get_text()!r}", t.get_window_extent(r)) for t in ax.texts]
    out += [(f"key {j}", lg.get_window_extent(r)) for j, lg in enumerate(fig.legends)]
    return out


def _ticks(fig: Any) -> list[tuple[str, Any]]:
    """The tick labels drawn: those of ticks within the axes' limits."""
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for labels, (lo, hi), k in ((ax.get_xticklabels(), sorted(ax.get_xlim()), 0),
                                    (ax.get_yticklabels(), sorted(ax.get_ylim()), 1)):  # fmt: skip
            out += [
                (f"tick {t.get_text()!r}", t.get_window_extent(r))
                for t in labels
                if t.get_text() and t.get_visible() and lo <= t.get_position()[k] <= hi
            ]
    return out


def _check_layout(name: str, fig: Any) -> None:
    boxes = _boxes(fig)
    page = fig.bbox
    outside = [
        what for what, b in [*boxes, *_ticks(fig)]
        if b.x0 < page.x0 - 1 or b.y0 < page.y0 - 1 or b.x1 > page.x1 + 1 or b.y1 > page.y1 + 1
    ]  # fmt: skip
    assert outside == [], f"{name}: drawn outside the figure: {outside}"
    overlaps = [
        (p, q) for (p, a), (q, b) in itertools.combinations(boxes, 2)
        if a.overlaps(b) and not (p.startswith("axes") and q.startswith("axes")
                                  and " text " in p and " text " in q)  # cells of a heatmap
    ]  # fmt: skip
    assert overlaps == [], f"{name}: overprinted: {overlaps}"


@pytest.mark.parametrize("long_stems", [False, True], ids=["stems", "numbered"])
def test_six_long_file_names_draw_short_with_a_key_and_no_warning(
    long_stems: bool, tmp_path: Path
) -> None:
    records, table, sens = _sweep(long_stems)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "constrained_layout not applied" was a warning
        figures = {"pair.png": pair_figure("files", "org/model", records, table),
                   **sensitivity_figures(sens)}  # fmt: skip
        for name, fig in figures.items():
            _check_layout(name, fig)
            fig.savefig(tmp_path / name, dpi=100)
            assert (tmp_path / name).stat().st_size > 10_000
    full = [f"instruction_file={p}" for p in _paths(long_stems)]
    short = list(STEMS) if not long_stems else [f"V{i}" for i in range(1, 7)]
    # the pair figure: its legends name the short forms, its key maps them to the full names
    fig = figures["pair.png"]
    bars = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert bars[:6] == short
    diffs = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert diffs == [f"{a} − {b}" for a, b in itertools.combinations(short, 2)]
    (key,) = fig.legends
    lines = ["".join(t.get_text().split()) for t in key.get_texts()]  # unwrapped
    assert lines == [f"{s}={n}" for s, n in zip(short, full, strict=True)]
    # every drawn text is short: no whole path outside the key
    drawn = [t.get_text() for f in figures.values() for ax in f.axes
             for t in [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()]]  # fmt: skip
    assert not [t for t in drawn if DIR in t]
    # the forest's contrasts and the heatmap's columns use the same short forms
    forest = [t.get_text() for t in figures["forest.png"].axes[0].get_yticklabels()]
    assert f"instruction_file: {short[0]} − {short[1]}  [org/model]" in forest
    columns = [t.get_text() for t in figures["sensitivity_heatmap.png"].axes[0].get_xticklabels()]
    assert columns == short  # in the study's order: V1 is the same variant in every figure
    for name in ("forest.png", "sensitivity_heatmap.png"):
        (other,) = figures[name].legends
        assert ["".join(t.get_text().split()) for t in other.get_texts()] == lines, name


def test_value_labels_of_a_few_pairs_stay_inside_their_panel(tmp_path: Path) -> None:
    """Three long-named variants: 3 pairs per task keep their value labels (rotated), raised
    into the difference panel instead of over its title."""
    names = [f"instruction_file={p}" for p in _paths(False)][:3]
    rng = np.random.default_rng(5)
    records = [_record(t, v, 0.45 + 0.1 * j, rng) for t in TASKS for j, v in enumerate(names)]
    table = []
    for t in TASKS:
        arms = {r.variant: r for r in records if r.task == t}
        for a, b in itertools.combinations(names, 2):
            row = pair(arms[a], arms[b], n_resamples=100, peers=list(arms.values()))
            table.append(replace(row, model="m", task=t))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = pair_figure("three", "m", records, table)
        _check_layout("pair.png", fig)
        fig.savefig(tmp_path / "pair.png", dpi=100)
    dx = fig.axes[1]
    labels = [t for t in dx.texts if t.get_gid() == "difference label"]
    assert len(labels) == 6
    r = fig.canvas.get_renderer()
    panel = dx.get_window_extent(r)
    for t in labels:
        box = t.get_window_extent(r)
        assert panel.y0 <= box.y0 and box.y1 <= panel.y1, t.get_text()


def _meta(axis: str, a: str, b: str) -> dict[str, Any]:
    return {"model": "m", "axis": axis, "a": f"{axis}={a}", "b": f"{axis}={b}", "metric": "accuracy",
            "tasks": ["t1", "t2"], "effects": [0.1, -0.05], "variances": [0.001, 0.002],
            "effect_ci": [[0.04, 0.16], [-0.14, 0.04]], "pooled": 0.02, "ci": [-0.5, 0.54],
            "tau2": 0.01, "i2": 0.5}  # fmt: skip


def test_the_forest_key_lists_only_what_its_headings_shorten() -> None:
    """The shipped own_task example's axes: a format level longer than 32 characters is drawn
    as itself under its axis's heading (no key line); instruction files by their stems."""
    plain, checklist = (
        f"ablations/instructions/nda_disclosure_{s}.yaml" for s in ("plain", "checklist")
    )
    rows = [_meta("format", "base", "sep:colon_newline,case:upper"),
            _meta("instruction_file", "none", plain), _meta("instruction_file", plain, checklist)]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = sensitivity_figures({"meta_analysis": rows, "per_task": []})["forest.png"]
        _check_layout("forest.png", fig)
    heads = [t.get_text() for t in fig.axes[0].get_yticklabels() if "[m]" in t.get_text()]
    assert heads == [
        "format: base − sep:colon_newline,case:upper  [m]",
        "instruction_file: none − nda_disclosure_plain  [m]",
        "instruction_file: nda_disclosure_plain − nda_disclosure_checklist  [m]",
    ]
    (key,) = fig.legends
    assert ["".join(t.get_text().split()) for t in key.get_texts()] == [
        f"nda_disclosure_plain=instruction_file={plain}",
        f"nda_disclosure_checklist=instruction_file={checklist}",
    ]


def test_heatmap_columns_of_variants_with_different_axes_are_told_apart() -> None:
    """An import's ``shots=1`` and ``cot=1``: the heatmap ticked both columns ``1`` (the levels
    alone, the axes of the first name in the axis label); each column now names its variant."""
    from experiments.analysis.figures import sensitivity_heatmap

    scores = {"shots=1": 0.4, "cot=1": 0.8, "shots=2": 0.6}
    row = {"model": "m", "task": "t", "metric": "balanced_accuracy", "scores": scores}
    fig = sensitivity_heatmap({"per_task": [row], "variants": list(scores)})
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == list(scores)
    assert fig.axes[0].get_xlabel() == "variant"
    # the same axes everywhere: the levels alone, the axis named once
    same = {"instruction=a,seed=0": 0.4, "instruction=b,seed=0": 0.8}
    row = {**row, "scores": same}
    fig = sensitivity_heatmap({"per_task": [row], "variants": list(same)})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a · 0", "b · 0"]
    assert fig.axes[0].get_xlabel() == "variant (instruction, seed)"


def test_a_variant_no_task_scored_keeps_its_number_in_every_figure() -> None:
    """Six long-stem files (V1..V6) and V2 incomplete everywhere: the comparison figure
    draws it (n/a) as V2, but the heatmap and forest numbered only what they drew, so their
    V2 was the study's V3. Now V3 is V3 in every figure, and each key lists what it draws."""
    from experiments.analysis.figures import forest_figure, sensitivity_heatmap

    full = [f"instruction_file={p}" for p in _paths(True)]
    scored = [v for v in full if v != full[1]]
    row = {"model": "m", "task": "t", "metric": "accuracy",
           "scores": {v: 0.5 + 0.05 * j for j, v in enumerate(scored)}}  # fmt: skip
    fig = sensitivity_heatmap({"per_task": [row], "variants": full})
    columns = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert columns == ["V1", "V3", "V4", "V5", "V6"]
    (key,) = fig.legends
    lines = ["".join(t.get_text().split()) for t in key.get_texts()]
    assert lines == [f"V{i + 1}={full[i]}" for i in (0, 2, 3, 4, 5)]
    meta = {**_meta("instruction_file", "x", "y"), "a": full[0], "b": full[2]}
    fig = forest_figure({"meta_analysis": [meta], "variants": full})
    heads = [t.get_text() for t in fig.axes[0].get_yticklabels() if "[m]" in t.get_text()]
    assert heads == ["instruction_file: V1 − V3  [m]"]
    (key,) = fig.legends
    lines = ["".join(t.get_text().split()) for t in key.get_texts()]
    assert lines == [f"V1={full[0]}", f"V3={full[2]}"]
