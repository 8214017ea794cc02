"""One sweep on the local model, in-process vs on Ray with 2 replicas of one thread each.

The sweep (2 tasks x 2 instructions, `--limit` rows each, no response cache) runs twice in
one go: through `LocalExecutor` (one llama.cpp model with a thread per core, trials one
after another) and through `RayExecutor` on a private local Ray instance (2 actors, each its
own model with n_threads=1, one trial each at a time). Both are warmed first with a 2-row
sweep (model loads, litellm import, Ray start-up), reported apart; the timed sweeps include
the driver's MLflow logging, as a real sweep does. Predictions are checked identical.

    python benchmarks/ray_sweep.py [--limit 24]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# As the Makefile does: llama.cpp's spinning OpenMP threads starve on a busy machine.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from experiments.llm.backends import get_model
from experiments.sweeps.driver import run_sweep
from experiments.sweeps.executors import Executor, LocalExecutor, RayExecutor
from experiments.sweeps.result import SweepResult
from experiments.sweeps.spec import load_spec
from experiments.tracking import Tracker, TrackingConfig
from promptlib import Catalog, default_source

SPEC = """
name: ray_bench
tasks: [hearsay, personal_jurisdiction]
fixed: {demos: none}
axes:
  instruction: [reference, description]
comparisons: [[instruction=reference, instruction=description]]
n_resamples: 200
"""


def _tracker(root: Path, prefix: str) -> Tracker:
    return Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{root}/mlflow.db",
            artifact_location=(root / "artifacts").as_uri(),
            experiment_prefix=prefix,
            prompt_registry=False,
            source="benchmark",
        )
    )


def _sweep(
    root: Path, prefix: str, spec: Any, catalog: Catalog, executor: Executor, limit: int
) -> tuple[float, SweepResult, dict[str, list[str | None]]]:
    lm = get_model("local/smollm2")
    tracker = _tracker(root, prefix)
    t0 = time.perf_counter()
    result = run_sweep(
        spec,
        catalog,
        models=(lm.name,),
        limit=limit,
        tracker=tracker,
        lm_factory=lambda _n: lm,
        executor=executor,
    )
    seconds = time.perf_counter() - t0
    assert result.ok, result.incomplete
    gens = {
        tid: [p.generation for p in tracker.load_predictions(run_id)]
        for tid, run_id in tracker.finished_trials(result.parent_run_id).items()
    }
    return seconds, result, gens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=24)
    args = ap.parse_args()
    catalog = Catalog(default_source())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spec.yaml").write_text(SPEC)
        spec = load_spec(root / "spec.yaml")
        rows = 4 * args.limit
        print(f"sweep: 4 trials x {args.limit} rows = {rows} prompts, local/smollm2, no cache")
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")

        local = LocalExecutor()
        t0 = time.perf_counter()
        _sweep(root, "local-warm", spec, catalog, local, 2)
        local_warm = time.perf_counter() - t0
        local_s, local_res, local_gens = _sweep(root, "local", spec, catalog, local, args.limit)

        t0 = time.perf_counter()
        ray_ex = RayExecutor(None, replicas=2, n_threads=1, num_cpus=2)
        try:
            _sweep(root, "ray-warm", spec, catalog, ray_ex, 2)
            ray_warm = time.perf_counter() - t0
            ray_s, ray_res, ray_gens = _sweep(root, "ray", spec, catalog, ray_ex, args.limit)
        finally:
            ray_ex.close()

    same = ray_gens == local_gens and [c["p_value"] for c in ray_res.comparisons] == [
        c["p_value"] for c in local_res.comparisons
    ]
    print(f"{'executor':<34} {'start-up':>9} {'sweep':>8} {'prompts/s':>10}")
    print(f"{'local (1 model, 2 threads)':<34} {local_warm:>8.1f}s {local_s:>7.1f}s "
          f"{rows / local_s:>10.2f}")  # fmt: skip
    print(f"{'ray (2 actors x 1 thread)':<34} {ray_warm:>8.1f}s {ray_s:>7.1f}s "
          f"{rows / ray_s:>10.2f}")  # fmt: skip
    print(f"ray vs local, sweep time: {local_s / ray_s:.2f}x (>1 means Ray was faster); "
          f"with start-up: {(local_warm + local_s) / (ray_warm + ray_s):.2f}x")  # fmt: skip
    print(f"identical predictions and p-values: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
