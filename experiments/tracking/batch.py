"""A run's writes gathered so they reach the store in as few calls as MLflow allows: params,
metrics and tags in one `log_batch` (split only where MLflow's limits on one batch say), and
the artifact files written into one folder and uploaded with one `log_artifacts`.

Why: every store call is a round trip (a SQLite transaction, an HTTP request to a server),
and logging a trial used to take ten of them, 1.4 s of a fresh trial under load (issue 35).
The files are written exactly as `MlflowClient.log_text`, `log_dict` and `log_figure` write
them, so what a run holds does not change, only how it gets there.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# MLflow's limits on one `log_batch` (mlflow.utils.validation): params and tags 100 each,
# metrics 1000, all entities 1000; the metrics are kept at 900 as `_log_metrics` always did.
MAX_PARAMS_TAGS = 100
MAX_METRICS = 900
MAX_ENTITIES = 1000


@dataclass(frozen=True)
class Batch:
    """One `log_batch` call's worth: (key, value) pairs, values as MLflow takes them."""

    params: tuple[tuple[str, str], ...] = ()
    metrics: tuple[tuple[str, float], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()


def batches(
    params: Mapping[str, str], metrics: Mapping[str, float], tags: Mapping[str, str]
) -> list[Batch]:
    """Everything in as few batches as MLflow's limits allow: one for a trial (about 30
    params, 17 metrics, a tag or two); none when there is nothing to log."""
    p, m, t = list(params.items()), list(metrics.items()), list(tags.items())
    out: list[Batch] = []
    while p or m or t:
        bp, p = p[:MAX_PARAMS_TAGS], p[MAX_PARAMS_TAGS:]
        bt, t = t[:MAX_PARAMS_TAGS], t[MAX_PARAMS_TAGS:]
        room = min(MAX_METRICS, MAX_ENTITIES - len(bp) - len(bt))
        bm, m = m[:room], m[room:]
        out.append(Batch(tuple(bp), tuple(bm), tuple(bt)))
    return out


class RunFiles:
    """A temporary folder of a run's artifact files, uploaded in one `log_artifacts` call.

    Use as a context manager; `text`, `json_dict` and `figure` write a file as the client's
    `log_text`, `log_dict` (JSON) and `log_figure` do; `names` lists what was written."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="workbench-run-files-")
        self.folder = Path(self._tmp.name)
        self.names: list[str] = []

    def __enter__(self) -> RunFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def _path(self, name: str) -> Path:
        if "/" in name or name in self.names:
            raise ValueError(f"{name!r}: one flat file name per artifact, each once")
        self.names.append(name)
        return self.folder / name

    def text(self, name: str, text: str) -> None:
        """As `MlflowClient.log_text`: the text in UTF-8."""
        with open(self._path(name), "w", encoding="utf-8") as f:
            f.write(text)

    def json_dict(self, name: str, value: Mapping[str, Any]) -> None:
        """As `MlflowClient.log_dict` for a .json name: indent 2, anything else as str."""
        with open(self._path(name), "w") as f:
            json.dump(value, f, indent=2, default=str)

    def figure(self, name: str, fig: Any) -> None:
        """As `MlflowClient.log_figure` for a matplotlib figure: `savefig` with defaults."""
        fig.savefig(self._path(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)
