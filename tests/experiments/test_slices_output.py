"""`output.slice_report` (`workbench report --by`): a table per comparison with n, A, B,
A - B [interval], p, Holm p, MDE and the small mark, and a footer naming the test, metric,
resamples, clusters, correction and alpha; --explain adds the method."""

from __future__ import annotations

from experiments.analysis.slices import SliceRow, SliceTable
from experiments.output import slice_report

ROWS = (
    SliceRow("Non-verbal hearsay", 14, 0.5, 0.3, 0.7, 0.25, 0.1, 0.5, 0.25, -0.1, 0.55,
             0.0625, 0.125, 0.41, True, "small (14 rows < 30): ...; MDE at 80% power 0.41"),
    SliceRow("Standard hearsay", 40, 0.9, 0.8, 0.95, 0.6, 0.45, 0.73, 0.3, 0.12, 0.46,
             0.001, 0.002, 0.22, False, "intervals flagged (A): measured coverage below 93%"),
    SliceRow("Tiny", 3, small=True, note="balanced_accuracy is undefined on this group's rows"),
)  # fmt: skip
TABLE = SliceTable(
    task="hearsay", model="local/smollm2", a="instruction=reference",
    b="instruction=description", by="slice", column="slice", metric="balanced_accuracy",
    test="paired permutation test (per-example swaps of A and B)",
    correction="Holm over the 2 slices of this comparison", n_resamples=1000, alpha=0.05,
    small_below=30, rows=ROWS,
    notes=("clusters: every row its own (...): 57 rows in 57 clusters",),
)  # fmt: skip


def _report(explain: bool = False) -> str:
    doc = {"by": "slice", "column": "slice", "tables": [TABLE.to_dict()], "notes": ["left out"]}
    return slice_report(doc, "demo", explain)


def test_a_row_per_slice_with_its_numbers_and_marks() -> None:
    text = _report()
    lines = text.splitlines()
    assert lines[0] == "sweep demo: comparisons by slice"
    assert (
        "hearsay · local/smollm2: instruction=reference (A) vs instruction=description (B)" in text
    )
    nv = next(x for x in lines if x.strip().startswith("Non-verbal hearsay"))
    assert nv.split()[2:] == ["14", "0.500", "0.250", "+0.250", "[-0.10,", "+0.55]", "0.062",
                              "0.125", "0.41", "small"]  # fmt: skip
    sh = next(x for x in lines if x.strip().startswith("Standard hearsay"))
    assert sh.split()[-1] == "0.22" and "small" not in sh
    tiny = next(x for x in lines if x.strip().startswith("Tiny"))
    assert tiny.split()[1:] == ["3", "-", "-", "-", "-", "-", "-", "small"]


def test_the_footer_names_test_metric_resamples_clusters_correction_alpha() -> None:
    text = _report()
    assert ("test: paired permutation test (per-example swaps of A and B); 1000 resamples; "
            "metric: balanced_accuracy; Holm over the 2 slices of this comparison; alpha 0.05"
            ) in text  # fmt: skip
    assert "57 rows in 57 clusters" in text
    assert "not intended for rigorous statistical analysis" in text
    assert "Tiny: balanced_accuracy is undefined on this group's rows" in text
    assert "Standard hearsay: intervals flagged (A)" in text
    assert "notes:\n  left out" in text
    assert "Method." not in text and "Method." in _report(explain=True)


def test_an_mde_dash_says_why() -> None:
    """A group whose MDE is '-' because no difference reaches 80% power on its rows says so."""
    row = SliceRow("arbitrary", 8, 0.0, 0.0, 0.3, 0.0, 0.0, 0.3, 0.0, -0.3, 0.3, 1.0, 1.0,
                   None, True, "small (8 rows < 30): ... (the paper); no difference reaches 80% "
                   "power on these rows")  # fmt: skip
    doc = {"by": "class", "column": "answer",
           "tables": [{**TABLE.to_dict(), "rows": [row.__dict__]}], "notes": []}  # fmt: skip
    text = slice_report(doc, "demo")
    assert "MDE -: no difference reaches 80% power on these rows in: arbitrary" in text
    assert "MDE -" not in _report()
