"""Review of `output.slice_report` (issue 34): a tiny exact p-value reads "<.001", not
"0.000" (no permutation p-value is 0)."""

from __future__ import annotations

from experiments.analysis.slices import SliceRow, SliceTable
from experiments.output import slice_report


def test_a_tiny_p_is_below_a_thousandth_not_zero() -> None:
    row = SliceRow("s", 60, 1.0, 0.9, 1.0, 0.2, 0.1, 0.3, 0.8, 0.6, 0.9, 2.0**-20, 3 * 2.0**-20,
                   0.1)  # fmt: skip
    table = SliceTable(
        task="t", model="m", a="x", b="y", by="slice", column="slice", metric="accuracy",
        test="paired permutation test", correction="Holm over the 1 slices", n_resamples=1000,
        alpha=0.05, small_below=30, rows=(row,),
    )  # fmt: skip
    doc = {"by": "slice", "column": "slice", "tables": [table.to_dict()], "notes": []}
    line = next(x for x in slice_report(doc, "d").splitlines() if x.strip().startswith("s "))
    assert line.split()[7:9] == ["<.001", "<.001"], line
    assert "0.000" not in line
