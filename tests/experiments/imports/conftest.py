"""Files in the plain import formats, and `workbench` run in-process on its own MLflow store."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests.conftest import workbench_env


def correctness(n: int, acc_a: float, acc_b: float, seed: int = 1) -> dict[str, list[int]]:
    """Two arms' 0/1 vectors on the same `n` rows, with a shared row difficulty."""
    rng = random.Random(seed)
    a, b = [], []
    for _ in range(n):
        hard = rng.random()
        a.append(int(hard < acc_a))
        b.append(int(hard < acc_b) if rng.random() < 0.8 else int(rng.random() < acc_b))
    return {"A": a, "B": b}


def lines(
    arms: Mapping[str, list[int]], task: str = "hearsay", model: str = "m"
) -> list[dict[str, Any]]:
    return [
        {"row": str(i), "variant": v, "model": model, "task": task, "correct": c}
        for v, vec in arms.items()
        for i, c in enumerate(vec)
    ]


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(dict(r)) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return path


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


class Workbench:
    """`workbench ARGS` in this process, with its own MLflow store under `root`."""

    def __init__(self, root: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        env = workbench_env(root, lb_dir, "imp")
        for k in ("LEGALBENCH_DIR", "WORKBENCH_MLFLOW_CONFIG", "WORKBENCH_CACHE_DIR"):
            monkeypatch.setenv(k, env[k])
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        monkeypatch.delenv("WORKBENCH_NO_TRACK", raising=False)

    def __call__(self, *args: str) -> Result:
        from experiments.cli import app

        return CliRunner().invoke(app, list(args), catch_exceptions=False)

    def runs(self, name: str) -> list[Any]:
        import mlflow

        client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{self.root}/mlflow.db")
        exp = client.get_experiment_by_name(f"imp/import/{name}")
        return [] if exp is None else list(client.search_runs([exp.experiment_id]))
