"""Outputs never change by accident (issue 32): every JSON and CSV a sweep or an import writes.

The ids are pinned in test_pinned_ids.py; this pins the bytes built from them. Each scenario
runs `workbench sweep` / `workbench import` through the Typer app, in a fresh project folder
(its own mlflow.yaml, MLflow store, cache, reports/ and runs/), on a deterministic fake model
(`PinnedLM`: answers and log-likelihoods from a hash of the prompt) in place of the real ones:

- the demo spec (ablations/demo.yaml) on two fake models;
- a sweep of each design: fixed listed pairs against a base, all_pairs, best_vs_worst (the
  range test), the sequential designs (anytime pairs, anytime all_pairs and best_vs_worst
  elimination, the group-sequential method), and a sensitivity grid;
- an import of each format of `experiments.imports.formats` (jsonl and csv written here,
  inspect, lm-eval and promptfoo from tests/data/imports/).

For each, every .json/.csv file under reports/ and runs/, the `--json` output, and the MLflow
side (each run's name, status, params, metrics, tags, and its .json/.csv artifacts' text),
are compared as whole texts with the pins under tests/data/pinned_outputs/<scenario>/. Only
what legitimately varies is normalised first (`normalise`): MLflow run ids (replaced by the
run's name), times and durations, the project's tmp folder, package versions.

The pins depend on the LegalBench files they were made from: on other data the test skips,
saying so. Regenerate (only when an output change is intended, and say so in the commit):

    LEGALBENCH_DIR=../shared/legalbench .venv/bin/python tests/test_pinned_outputs.py

(it rewrites tests/data/pinned_outputs/; `git diff` then shows every byte that changed).
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from experiments.llm.scripted import LMDefaults

ROOT = Path(__file__).resolve().parent.parent
PINS = Path(__file__).resolve().parent / "data" / "pinned_outputs"
IMPORTS = Path(__file__).resolve().parent / "data" / "imports"
LIMIT = 20  # rows per task: small, so the whole file runs in well under a minute
RESAMPLES = 200
_CLEAN_ENV = (
    "WORKBENCH_LOCAL_N_CTX",
    "WORKBENCH_LLAMA_EXTRA_BUFTS",
    "WORKBENCH_CPUINFO",
    "WORKBENCH_RUNS_DIR",
    "WORKBENCH_NO_TRACK",
    "MLFLOW_TRACKING_URI",
)


def _data_dir() -> Path:
    return Path(os.environ.get("LEGALBENCH_DIR") or ROOT.parent / "shared" / "legalbench")


# ---- the fake model ---------------------------------------------------------------------------
def _h(*parts: str) -> int:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).digest()[0]


@dataclass
class PinnedLM(LMDefaults):
    """Deterministic answers: a Yes/No and label log-likelihoods from a hash of the prompt
    (and the model's name, so two fake models differ)."""

    name: str
    mode: str = "completion"
    concurrency: int = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Any) -> Any:
        from experiments.llm.types import Completion

        yes = _h(self.name, prompt) % 2 == 0
        return Completion(" Yes" if yes else " No", tokens_in=len(prompt) // 4, tokens_out=1)

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        return [-(1 + _h(self.name, prompt, c) % 90 / 10) for c in continuations]

    # the rest of `LM`, as any model that is no backend of the table has it
    caches_loglik_at_once = True

    def loglik_identity(self, how: Any = None, continuations: Any = None) -> dict[str, Any]:
        from experiments.llm.identity import plain_loglik_identity

        return plain_loglik_identity(self.name, how, continuations)

    def loglik_advice(self) -> str:
        from experiments.llm.types import LOCAL_LOGLIK_ADVICE

        return LOCAL_LOGLIK_ADVICE

    def call_order(self, prompts: Sequence[str]) -> list[int]:
        return list(range(len(prompts)))


# ---- a project folder and the CLI -------------------------------------------------------------
@contextlib.contextmanager
def project(root: Path, lb: Path) -> Iterator[Callable[..., Any]]:
    """A fresh project under `root`; yields `cli(*args)`, the `workbench` app in-process with
    every model a `PinnedLM`."""
    import matplotlib.figure
    from typer.testing import CliRunner

    import experiments.llm.gateway

    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(_empty_store(), root / "mlflow.db")  # its tables made once: seconds each
    (root / "mlflow.yaml").write_text(
        f"tracking_uri: sqlite:///{root}/mlflow.db\nartifact_location: {root}/artifacts\n"
        "experiment_prefix: pinned\nprompt_registry: false\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in _CLEAN_ENV}
    env |= {
        "LEGALBENCH_DIR": str(lb),
        "WORKBENCH_MLFLOW_CONFIG": str(root / "mlflow.yaml"),
        "WORKBENCH_CACHE_DIR": str(root / "cache"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "WORKBENCH_TASKS_DIR": str(root / "no-user-tasks"),
    }
    old_cwd = Path.cwd()
    _forget_mlflow_stores()
    try:
        with (
            mock.patch.dict(os.environ, env, clear=True),
            mock.patch.object(
                experiments.llm.gateway, "get_model", lambda name, *_a, **_k: PinnedLM(name)
            ),
            mock.patch.object(matplotlib.figure.Figure, "savefig", _no_png),
        ):
            os.chdir(root)

            def cli(*args: str) -> Any:
                from experiments.cli import app

                result = CliRunner().invoke(app, list(args), catch_exceptions=False)
                assert result.exit_code == 0, result.output
                return result

            yield cli
    finally:
        os.chdir(old_cwd)
        _forget_mlflow_stores()


def _no_png(fig: Any, fname: Any, *args: Any, **kwargs: Any) -> None:
    """Figures are drawn (their code runs) but not rendered: PNG bytes are not pinned, and
    rendering them was most of a scenario's time."""
    if isinstance(fname, (str, os.PathLike)):
        Path(fname).write_bytes(b"")


_STORE: list[Path] = []


def _empty_store() -> Path:
    """An MLflow sqlite store with its tables made (once per process), to copy."""
    if not _STORE:
        import mlflow

        folder = Path(tempfile.mkdtemp(prefix="pinned-outputs-store-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db").search_experiments()
        _forget_mlflow_stores()
        _STORE.append(folder / "mlflow.db")
    return _STORE[0]


def _forget_mlflow_stores() -> None:
    """What a new process starts with: no cached store (and no pooled connections)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service import utils

    utils._tracking_store_registry._get_store_with_resolved_uri.cache_clear()
    with SqlAlchemyStore._engine_map_lock:
        for engine in SqlAlchemyStore._engine_map.values():
            engine.dispose()
        SqlAlchemyStore._engine_map.clear()


# ---- what a scenario wrote, normalised ----------------------------------------------------------
_TEXT = (".json", ".csv", ".jsonl", ".txt")


def mlflow_dump(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Each run as ``mlflow/<experiment>/<run name>/run.json`` (status, params, metrics, tags)
    beside the text of its artifacts; and the run id -> run name map used to normalise."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    names: dict[str, str] = {}
    files: dict[str, str] = {}
    for exp in sorted(client.search_experiments(), key=lambda e: e.name):
        runs = client.search_runs([exp.experiment_id], max_results=10000)
        seen: dict[str, int] = {}
        for run in sorted(runs, key=lambda r: (r.info.run_name, r.info.start_time)):
            n = seen[run.info.run_name] = seen.get(run.info.run_name, 0) + 1
            name = run.info.run_name if n == 1 else f"{run.info.run_name}#{n}"
            names[run.info.run_id] = name
            folder = f"mlflow/{_safe(exp.name)}/{_safe(name)}"
            doc = {
                "status": run.info.status,
                "params": run.data.params,
                "metrics": run.data.metrics,
                "tags": run.data.tags,
            }
            files[f"{folder}/run.json"] = (
                json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
            )
            arts = Path(run.info.artifact_uri.removeprefix("file://"))
            for f in sorted(arts.rglob("*")) if arts.is_dir() else ():
                if f.is_file():
                    text = f.read_text(encoding="utf-8") if f.suffix in _TEXT else "<binary>\n"
                    files[f"{folder}/artifacts/{f.relative_to(arts)}"] = text
    return files, names


def _safe(name: str) -> str:
    return re.sub(r"[^\w.=,+-]+", "_", name)


# keys whose values are times or durations (a number, or a number in a string)
_VOLATILE_KEYS = "wall_time|latency|seconds|duration|elapsed|last_run|start_time|end_time|_at"


def normalise(text: str, root: Path, run_names: dict[str, str]) -> str:
    """Replace what legitimately varies between two runs of the same scenario."""
    for run_id, name in run_names.items():
        text = text.replace(run_id, f"<run:{name}>")
    for r in {str(root), str(root.resolve()), root.as_uri(), root.resolve().as_uri()}:
        text = text.replace(r, "<ROOT>")
    text = re.sub(r'("git\.commit"\s*:\s*)"[0-9a-f]*"', r'\1"<GIT>"', text)
    text = re.sub(r'("version\.[\w.-]+"\s*:\s*)"[^"]*"', r'\1"<VERSION>"', text)
    text = re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:?\d\d|Z)?", "<TIME>", text)
    text = re.sub(rf'("[\w.]*(?:{_VOLATILE_KEYS})"\s*:\s*)("?)-?[\d.eE+-]+\2', r'\1"<N>"', text)
    return text


def collect(root: Path, stdout: dict[str, str]) -> dict[str, str]:
    """Relative path -> normalised text of every output the scenario made."""
    files, names = mlflow_dump(root)
    for name, text in stdout.items():
        files[f"stdout/{name}"] = text
    for folder in ("reports", "runs"):
        for f in sorted((root / folder).rglob("*")):
            if f.is_file() and f.suffix in _TEXT:
                files[str(f.relative_to(root))] = f.read_text(encoding="utf-8")
    return {k: normalise(v, root, names) for k, v in sorted(files.items())}


# ---- the scenarios ----------------------------------------------------------------------------
def _spec(root: Path, name: str, text: str) -> str:
    path = root / f"{name}.yaml"
    path.write_text(text)
    return str(path)


def _demo(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    text = (ROOT / "ablations" / "demo.yaml").read_text()
    text = text.replace("[local/smollm2, local/gemma3-270m]", "[fake/smollm2, fake/gemma3]")
    text = text.replace("limit: 40", f"limit: {LIMIT}").replace(
        "n_resamples: 1000", f"n_resamples: {RESAMPLES}"
    )
    assert "fake/smollm2" in text and f"limit: {LIMIT}" in text
    out = cli("sweep", _spec(root, "demo", text), "--json")
    return {"sweep.json": out.stdout}


FIXED = """name: {name}
tasks: [hearsay, abercrombie]
requires: [rule_reference_prompt.txt, rule_description_prompt.txt]
models: [fake/m]
limit: {limit}
scoring: {scoring}
fixed: {{demos: none}}
axes:
  instruction: [base, reference, description]
comparisons: {comparisons}
n_resamples: {resamples}
{more}"""


def _fixed(
    name: str, comparisons: str, more: str = "", scoring: str = "loglik"
) -> Callable[..., dict[str, str]]:
    def run(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
        text = FIXED.format(
            name=name,
            limit=LIMIT,
            comparisons=comparisons,
            resamples=RESAMPLES,
            more=more,
            scoring=scoring,
        )
        return {"sweep.json": cli("sweep", _spec(root, name, text), "--json").stdout}

    return run


SEQ = """name: {name}
tasks: [hearsay, abercrombie]
requires: [rule_reference_prompt.txt, rule_description_prompt.txt]
models: [fake/m]
limit: 40
scoring: loglik
fixed: {{demos: none}}
axes:
  instruction: [base, reference, description]
comparisons: {comparisons}
design: sequential
sequential: {{batch: 10, max_rows: 30{more}}}
{across}"""


def _sequential(
    name: str, comparisons: str, more: str = "", across: str = ""
) -> Callable[..., dict[str, str]]:
    def run(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
        text = SEQ.format(name=name, comparisons=comparisons, more=more, across=across)
        return {"sweep.json": cli("sweep", _spec(root, name, text), "--json").stdout}

    return run


def _single_run(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    """`workbench run`: one trial, saved under runs/ and logged to MLflow."""
    out = cli("run", "hearsay", "--model", "fake/m", "--variant", "demos=none",
              "--limit", str(LIMIT), "--scoring", "generate", "--json")  # fmt: skip
    return {"run.json": out.stdout}


def _sensitivity(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    text = (ROOT / "ablations" / "sensitivity_grid.yaml").read_text()
    text = text.replace("limit: 40", f"limit: {LIMIT}").replace(
        "n_resamples: 1000", f"n_resamples: {RESAMPLES}"
    )
    text = text.replace(
        "tasks: [hearsay, abercrombie, diversity_1]", "tasks: [hearsay, abercrombie]"
    )
    text += "models: [fake/m]\nscoring: loglik\n"
    out = cli("sweep", _spec(root, "sensitivity_grid", text), "--json")
    report = cli("report", "sensitivity_grid", "--json")
    return {"sweep.json": out.stdout, "report.json": report.stdout}


def _arms(n: int, seed: int) -> dict[str, list[int]]:
    """Two arms' 0/1 correctness on the same rows (deterministic)."""
    import random

    rng = random.Random(seed)
    a = [int(rng.random() < 0.7) for _ in range(n)]
    b = [int(rng.random() < 0.5) if rng.random() < 0.5 else x for x in a]
    return {"A": a, "B": b}


def _plain_rows() -> list[dict[str, Any]]:
    return [
        {"row": str(i), "variant": v, "model": "m", "task": task, "correct": c}
        for task, seed in (("hearsay", 1), ("abercrombie", 2))
        for v, vec in _arms(30, seed).items()
        for i, c in enumerate(vec)
    ]


def _import_jsonl(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    path = root / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _plain_rows()))
    out = cli("import", "jsonl", str(path), "--name", "imp-jsonl", "--n-resamples",
              str(RESAMPLES), "--json")  # fmt: skip
    return {"import.json": out.stdout}


def _import_csv(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    import csv

    rows = _plain_rows()
    path = root / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = cli("import", "csv", str(path), "--name", "imp-csv", "--n-resamples",
              str(RESAMPLES), "--json")  # fmt: skip
    return {"import.json": out.stdout}


def _copy(root: Path, folder: str) -> list[str]:
    dest = root / "in" / folder
    shutil.copytree(IMPORTS / folder, dest)
    return sorted(str(p) for p in dest.iterdir())


def _import_inspect(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    paths = [p for p in _copy(root, "inspect") if p.endswith(".eval")]
    out = cli("import", "inspect", *paths, "--variant-from", "metadata.variant", "--task",
              "hearsay", "--name", "imp-inspect", "--n-resamples", str(RESAMPLES), "--json")  # fmt: skip
    return {"import.json": out.stdout}


def _import_lmeval(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    (results,) = [p for p in _copy(root, "lmeval") if Path(p).name.startswith("results_")]
    out = cli("import", "lm-eval", results, "--task", "hearsay", "--name", "imp-lmeval",
              "--n-resamples", str(RESAMPLES), "--json")  # fmt: skip
    return {"import.json": out.stdout}


def _import_promptfoo(root: Path, cli: Callable[..., Any]) -> dict[str, str]:
    paths = _copy(root, "promptfoo")
    (results,) = [p for p in paths if p.endswith("results.json")]
    out = cli("import", "promptfoo", results, "--task", "hearsay", "--name", "imp-promptfoo",
              "--n-resamples", str(RESAMPLES), "--json")  # fmt: skip
    return {"import.json": out.stdout}


PAIRS_VS_BASE = (
    "[[instruction=base, instruction=reference], [instruction=base, instruction=description]]"
)
SCENARIOS: dict[str, Callable[[Path, Callable[..., Any]], dict[str, str]]] = {
    "demo": _demo,
    "fixed_vs_base": _fixed("fixed-vs-base", PAIRS_VS_BASE),
    "fixed_all_pairs": _fixed("fixed-all-pairs", "all_pairs", "correction: bh\n"),
    "fixed_best_vs_worst": _fixed("fixed-best-vs-worst", "best_vs_worst"),
    "fixed_generate": _fixed("fixed-generate", PAIRS_VS_BASE, scoring="generate"),
    # a margin so wide that the pairs stop early as equivalent (the fake is at chance)
    "sequential_pairs": _sequential("seq-pairs", PAIRS_VS_BASE, ", delta: 0.9"),
    "sequential_all_pairs": _sequential("seq-all-pairs", "all_pairs"),
    "sequential_best_vs_worst": _sequential(
        "seq-best-vs-worst", "best_vs_worst", across="across_tasks: permutation\n"
    ),
    "sequential_group": _sequential("seq-group", PAIRS_VS_BASE, ", method: group"),
    "sensitivity_grid": _sensitivity,
    "single_run": _single_run,
    "import_jsonl": _import_jsonl,
    "import_csv": _import_csv,
    "import_inspect": _import_inspect,
    "import_lm-eval": _import_lmeval,
    "import_promptfoo": _import_promptfoo,
}


def run_scenario(name: str, root: Path, lb: Path) -> dict[str, str]:
    with project(root, lb) as cli:
        stdout = SCENARIOS[name](root, cli)
    return collect(root, stdout)


# ---- the pins -----------------------------------------------------------------------------------
def _read_pins(name: str) -> dict[str, str]:
    folder = PINS / name
    return {
        str(f.relative_to(folder)): f.read_text(encoding="utf-8")
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def _write_pins(name: str, files: dict[str, str]) -> None:
    folder = PINS / name
    shutil.rmtree(folder, ignore_errors=True)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")


def _fingerprint_file() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((PINS / "data_fingerprint.json").read_text(encoding="utf-8"))
    return doc


def _pinned_tasks() -> list[str]:
    return ["abercrombie", "diversity_1", "hearsay", "personal_jurisdiction"]


@pytest.fixture(scope="module")
def lb() -> Path:
    from tests.test_pinned_ids import _fingerprint

    lb = _data_dir()
    fp = _fingerprint_file()
    if not (lb / "tasks").is_dir() or _fingerprint(lb, fp["tasks"]) != fp["sha256"]:
        pytest.skip(
            f"the pins were made on other LegalBench files than {lb}: they cannot be checked"
        )
    return lb


@pytest.mark.data
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_outputs_are_the_pinned_bytes(name: str, lb: Path, tmp_path: Path) -> None:
    now = run_scenario(name, tmp_path / "project", lb)
    pinned = _read_pins(name)
    assert sorted(now) == sorted(pinned), (
        f"{name}: the files written changed (re-pin only on purpose: see the module docstring)"
    )
    changed = [rel for rel, text in pinned.items() if now[rel] != text]
    if changed:
        diffs = "".join(_diff(f"{name}/{rel}", pinned[rel], now[rel]) for rel in changed)
        pytest.fail(
            f"{name}: {len(changed)} output file(s) changed ({', '.join(changed)}); re-pin only "
            f"on purpose (see the module docstring):\n{diffs[:8000]}",
            pytrace=False,
        )


def _diff(label: str, pinned: str, now: str) -> str:
    """A readable difference: the changed cells of a CSV, else a unified diff (a one-line
    JSON document, as `--json` prints, shown indented). The comparison is of the bytes."""
    if label.endswith(".csv"):
        cells = _csv_cells(pinned, now)
        if cells:
            return f"{label}: changed cells (row, column: pinned -> now)\n{cells}\n"
    a, b = pinned, now
    with contextlib.suppress(ValueError):
        if pinned.count("\n") <= 1 and now.count("\n") <= 1:
            a, b = (json.dumps(json.loads(t), indent=1, ensure_ascii=False) + "\n" for t in (a, b))
            if a == b:  # the same document: only its layout changed
                a, b = pinned, now
    lines = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True), f"pinned/{label}",
        f"now/{label}", n=2,
    )  # fmt: skip
    return "".join(line if len(line) < 400 else line[:400] + " [...]\n" for line in lines)


def _csv_cells(pinned: str, now: str) -> str:
    """Each changed cell of two CSV texts with the same header and row count, else ''."""
    import csv
    import io

    a, b = (list(csv.reader(io.StringIO(t))) for t in (pinned, now))
    if not a or not b or a[0] != b[0] or len(a) != len(b):
        return ""
    out = [
        f"  row {i}, {col}: {x!r} -> {y!r}"
        for i, (ra, rb) in enumerate(zip(a[1:], b[1:], strict=True), 1)
        for col, x, y in zip(a[0], ra, rb, strict=False)
        if x != y
    ]
    return "\n".join(out[:40]) if out else ""


def main(names: Sequence[str]) -> None:
    """Rewrite the pins of `names` (all scenarios if none)."""
    from tests.test_pinned_ids import _fingerprint

    lb = _data_dir()
    tasks = _pinned_tasks()
    PINS.mkdir(parents=True, exist_ok=True)
    (PINS / "data_fingerprint.json").write_text(
        json.dumps({"tasks": tasks, "sha256": _fingerprint(lb, tasks)}, indent=1) + "\n"
    )
    for name in names or SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="pinned-outputs-") as tmp:
            _write_pins(name, run_scenario(name, Path(tmp) / "project", lb))
        print(f"pinned {name}", file=sys.stderr)


if __name__ == "__main__":
    sys.path[0] = str(ROOT)  # not tests/, whose promptlib/ folder would shadow the package
    main(sys.argv[1:])
