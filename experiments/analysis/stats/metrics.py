"""The metric a test runs on, and the inputs every test checks.

Every test runs on the metric the table reports. A metric is a name (``"accuracy"``, or any
official LegalBench metric in `experiments.metrics.METRICS`: ``balanced_accuracy``,
``sara_numeric_within_10pct``, ``citation_open_contains``,
``definition_extraction_stemmed_match``, ``ssla_f1``, ``successor_liability_f1``) or a
callable ``(y_true, y_pred) -> float``. `metric_fn` resolves a name to such a callable; the
statistics a test reports are differences of exactly those scores. ``"accuracy"`` is the
share of rows whose normalised prediction equals the normalised answer (not an official
LegalBench metric; the sweeps use it on per-row correctness).

A prediction of ``None`` (a failed or invalid output) is scored by an official metric as an
empty generation, which earns nothing: it is a wrong answer for the accuracy-type metrics,
names nothing for the F1 metrics. A callable receives ``None`` as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from experiments.metrics import METRICS, is_rule_conclusion, normalize

Alternative = Literal["two-sided", "greater", "less"]
MetricName = Literal["accuracy", "balanced_accuracy"]  # the fast names; any `Metric` is accepted
Labels = Sequence[Any] | NDArray[Any]
MetricCallable = Callable[[NDArray[Any], NDArray[Any]], float]
Metric = str | MetricCallable

FloatArray = NDArray[np.float64]


def metric_names() -> tuple[str, ...]:
    """Every metric name the tests accept: ``accuracy`` and the official LegalBench metrics
    (a rule-conclusion metric is tested as the official metric it computes: callers pass
    `experiments.metrics.base_metric` of a trial's metric, as `analysis.compare` does)."""

    return ("accuracy", *(m for m in METRICS if not is_rule_conclusion(m)))


def _text(p: Any) -> str:
    return "" if p is None else str(p)


def metric_fn(name: str) -> Callable[[Labels, Labels], float]:
    """The callable ``(y_true, y_pred) -> float`` for a metric name, as the table scores it.

    Official metrics are `experiments.metrics.METRICS[name](generations, answers)`; a ``None``
    prediction is scored as an empty generation. ``accuracy`` is normalised exact match.
    """

    if name == "accuracy":

        def accuracy(y_true: Labels, y_pred: Labels) -> float:
            if len(y_true) != len(y_pred) or len(y_true) == 0:
                raise ValueError("y_true and y_pred must be non-empty and of equal length")
            hits = [
                normalize(_text(p)) == normalize(t) for t, p in zip(y_true, y_pred, strict=True)
            ]
            return float(np.mean(hits))

        return accuracy
    if name not in METRICS:
        raise ValueError(
            f"unknown metric {name!r}; use one of {', '.join(metric_names())} "
            "or a callable (y_true, y_pred) -> float"
        )
    official = METRICS[name]

    def score(y_true: Labels, y_pred: Labels) -> float:
        return float(official([_text(p) for p in y_pred], [str(t) for t in y_true]))

    score.__name__ = name
    return score


def name_of_metric(metric: Metric) -> str:
    """The name results report for a metric: the name itself, or the callable's __name__."""
    return metric if isinstance(metric, str) else getattr(metric, "__name__", "custom")


def resolve_metric(metric: Metric) -> Callable[[Any, Any], float]:
    """The scoring callable for a metric name (`metric_fn`) or the callable itself."""
    if isinstance(metric, str):
        return metric_fn(metric)
    if callable(metric):
        return metric
    raise TypeError(
        f"metric must be a name or a callable (y_true, y_pred) -> float, not {metric!r}"
    )


def _objects(x: Labels) -> NDArray[Any]:
    """The caller's values as an array of their own type: ints stay ints, bools bools and
    strings strings (a callable metric such as sklearn's sees what was passed); mixed types,
    None or anything numpy would convert (1 and "a" to "1" and "a") stay Python objects."""
    if isinstance(x, np.ndarray) and x.ndim == 2 and 1 in x.shape:
        x = x.ravel()  # a column or row vector: one value per row
    if isinstance(x, np.ndarray) and x.ndim == 1:
        return x
    values = list(x)
    if values and all(v is not None for v in values):
        arr = np.asarray(values)
        same_type = all(type(v) is type(values[0]) for v in values)
        if same_type and arr.ndim == 1 and arr.dtype != object and arr.tolist() == values:
            return arr
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _common(arrays: Sequence[NDArray[Any]]) -> list[NDArray[Any]]:
    """Arrays whose elements can be exchanged without truncation or conversion: strings
    widened to one length, differing kinds as Python objects."""
    kinds = {a.dtype.kind for a in arrays}
    if len(kinds) == 1 and kinds <= {"U", "S"}:
        width = np.result_type(*arrays)
        return [a.astype(width) for a in arrays]
    if len({a.dtype for a in arrays}) == 1:
        return list(arrays)
    return [_as_object(a) for a in arrays]


def _as_object(a: NDArray[Any]) -> NDArray[Any]:
    out = np.empty(len(a), dtype=object)
    out[:] = a.tolist()
    return out


def check_inputs(y_true: Labels, predictions: Sequence[Labels]) -> tuple[NDArray[Any], ...]:
    """(y, *predictions) as arrays that pair up row by row; raises on empty, None or unequal."""
    y = _objects(y_true)
    if len(y) == 0:
        raise ValueError("y_true must not be empty")
    if y.dtype == object and any(v is None for v in y):
        raise ValueError("y_true contains None: every row needs an answer")
    preds = tuple(_common([_objects(p) for p in predictions])) if predictions else ()
    for p in preds:
        if len(p) != len(y):
            raise ValueError(
                f"y_true has {len(y)} rows but a prediction sequence has {len(p)}; "
                "they must pair up row by row"
            )
    return (y, *preds)


def _check_alternative(alternative: str) -> None:
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
