"""A trial's confusion matrix, drawn without pyplot: every tracked trial with labels logs
one, and pyplot's import (its backends, its figure manager) would add to each trial's
start-up what a single figure saved to a file does not need."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from experiments.trials.record import Prediction

# names are drawn as written (as in `analysis.figures`): '$' in a variant name is not TeX
matplotlib.rcParams["text.parse_math"] = False


def confusion_figure(
    predictions: Sequence[Prediction], labels: Sequence[str], title: str
) -> Figure:
    """A trial's confusion matrix (rows: answers; columns: parsed outputs, plus 'invalid'),
    logged on its MLflow run (`tracking.trial_runs`). Not held by pyplot: nothing to close."""
    import numpy as np

    labels = list(labels)
    cols = [*labels, "invalid"]
    m = np.zeros((len(labels), len(cols)), dtype=int)
    for p in predictions:
        if p.answer not in labels:
            continue
        j = cols.index(p.parsed) if p.parsed in labels else len(labels)
        m[labels.index(p.answer), j] += 1
    fig = Figure(figsize=(1.2 + 0.9 * len(cols), 1.0 + 0.8 * len(labels)))
    ax = fig.subplots()
    ax.imshow(m, cmap="Blues")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("model output")
    ax.set_ylabel("answer")
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, str(m[i, j]), ha="center", va="center")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
