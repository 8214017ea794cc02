"""Remake the small inspect_ai and lm-eval fixtures in this folder with the real tools (the
`interop` extra) against the workbench's stub server, as the interop tests do, on 6 rows:

    python tests/data/imports/make_fixtures.py

- ``inspect/stub_a.eval``, ``inspect/stub_b.eval``: inspect_ai 0.3 logs of variants A and B
  (``openai-api/stub/stub-model``, scorer ``match``; variant in the task's metadata.variant);
- ``lmeval/results_<date>.json`` with ``lmeval/samples_stub_legal_{a,b}_<date>.jsonl``:
  lm-eval 0.4 ``--log_samples`` output of the same two variants as two tasks.

The rows are right or wrong as `tests.experiments.imports.interop_stub.designed_correctness`
says (its first 6 rows). promptfoo's fixture has its own script (promptfoo/make_results.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root

from tests.experiments.imports.interop_stub import (  # noqa: E402
    answer,
    designed_correctness,
    question,
    stub_for,
)
from tests.experiments.imports.test_interop_inspect import MODEL, _task  # noqa: E402
from tests.experiments.imports.test_interop_lmeval import TASK_YAML, TASKS  # noqa: E402

ROWS = 6


def make_inspect(url: str) -> None:
    from inspect_ai import eval as inspect_eval

    out = HERE / "inspect"
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"STUB_API_KEY": "stub", "STUB_BASE_URL": url})
        tasks = [_task("A", "stub_a", ROWS), _task("B", "stub_b", ROWS)]
        logs = inspect_eval(tasks, model=MODEL, log_dir=tmp, display="none")
        out.mkdir()
        for log in logs:
            shutil.copy(log.location, out / f"{log.eval.task}.eval")


def make_lmeval(url: str) -> None:
    out = HERE / "lmeval"
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / "rows.tsv"
        lines = ["index\ttext\tanswer"] + [f"{i}\t{question(i)}\t{answer(i)}" for i in range(ROWS)]
        data.write_text("\n".join(lines) + "\n")
        for variant, task in TASKS.items():
            yaml = TASK_YAML.format(task=task, data=data, variant=variant)
            (folder / f"{task}.yaml").write_text(yaml)
        args = [
            sys.executable, "-m", "lm_eval", "--model", "local-completions",
            "--model_args", f"model=stub-model,base_url={url}/completions,"
            "tokenizer_backend=None,num_concurrent=1,max_retries=1",
            "--tasks", ",".join(TASKS.values()), "--include_path", str(folder),
            "--log_samples", "--output_path", str(folder / "out"),
        ]  # fmt: skip
        env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
               "HF_HOME": str(folder / "hf")}  # fmt: skip
        subprocess.run(args, env=env, check=True)
        out.mkdir()
        for path in (folder / "out").rglob("*.json*"):
            shutil.copy(path, out / path.name)


def main() -> None:
    with stub_for(designed_correctness()) as stub:
        make_inspect(stub.url)
        make_lmeval(stub.url)


if __name__ == "__main__":
    main()
