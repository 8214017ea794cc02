"""`workbench tasks` and `workbench prompts`: the task list and the rendered prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def task_list(entries: Sequence[Any], source: str = "") -> str:
    """`workbench tasks`: a header, one line per task (a `TaskProblem` shows its error), and
    under the table what a "-" split means when one is shown."""
    # start-up time: the CLI imports output first
    from promptlib.tasks import TaskProblem

    lines = [f"{'task':<60} {'type':<11} {'metric':<36} {'train':>5} {'test':>5}  labels"]
    missing = {"train": 0, "test": 0}
    for s in entries:
        if isinstance(s, TaskProblem):
            lines.append(f"{s.name:<60} error: {s.error}")
            continue
        labels = ",".join(s.labels) if s.labels else "-"
        if len(labels) > 50:
            labels = labels[:47] + "..."
        n_test = "-" if s.n_test is None else str(s.n_test)
        n_train = "-" if s.n_train is None else str(s.n_train)
        missing["train"] += s.n_train is None
        missing["test"] += s.n_test is None
        lines.append(
            f"{s.name:<60} {s.task_type:<11} {s.metric:<36} {n_train:>5} {n_test:>5}  {labels}"
            + ("  (your task)" if s.user_task else "")  # `workbench task new`'s, not LegalBench's
        )
    if any(missing.values()):
        if any(getattr(s, "user_task", False) for s in entries):
            source += ("; " if source else "") + "your own tasks: their task folders"
        lines.append(_missing_splits_note(missing, len(entries), source))
    return "\n".join(lines)


def _missing_splits_note(missing: dict[str, int], n_tasks: int, source: str) -> str:
    """What "-" in the train or test column means: the file is not in this data."""
    where = f" ({source})" if source else ""
    counts = "; ".join(
        f"no {split}.tsv: {n} of {n_tasks} tasks" for split, n in missing.items() if n
    )
    return (
        f'train, test: rows in each task\'s train.tsv and test.tsv; "-": the file is not in '
        f"this data{where}, so the task has no rows of that split here and a sweep on that "
        f"split skips it ({counts}). LegalBench's full test splits are in the Hugging Face "
        "dataset nguha/legalbench (--hf)."
    )


def rendered_prompts(task: str, label: str, variant_id: str, items: list[dict[str, Any]]) -> str:
    """`workbench render`: a header, then each prompt under its index and answer."""
    header = f"# task={task} variant={label} id={variant_id[:12]}"
    blocks = [header] + [
        f"----- index={it['index']} answer={it['answer']}\n{it['prompt']}" for it in items
    ]
    return "\n".join(blocks)
