"""The confusion matrix logged with a trial is drawn in `analysis.figures` (issue 32, part 2:
figures live in `figures`, tracking only logs them)."""

from __future__ import annotations

from experiments.analysis.figures import close, confusion_figure
from experiments.trials.record import Prediction


def _p(answer: str, parsed: str | None) -> Prediction:
    return Prediction("0", "h", answer, parsed, parsed, parsed == answer)


def test_the_confusion_matrix_counts_answers_by_parsed_output() -> None:
    preds = [_p("Yes", "Yes"), _p("Yes", "No"), _p("No", "No"), _p("No", None), _p("No", "No")]
    preds.append(_p("Maybe", "Yes"))  # an answer outside the labels is not counted
    fig = confusion_figure(preds, ("Yes", "No"), "hearsay: base")
    try:
        (ax,) = fig.axes
        cells = [t.get_text() for t in ax.texts]
        # rows Yes, No; columns Yes, No, invalid
        assert cells == ["1", "1", "0", "0", "2", "1"]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["Yes", "No", "invalid"]
        assert ax.get_title() == "hearsay: base"
    finally:
        close(fig)
