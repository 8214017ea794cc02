"""The folder a draft becomes, read back as the catalog will read it, before it is in place.

`write_task` runs this on the hidden temporary folder: the task's spec (labels against the
rows), its base prompt (demonstrations parsed back, columns present) and the rows it is
evaluated on. A failure is a `DataError` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from promptlib.data import TaskFiles
from promptlib.errors import DataError, WorkbenchError
from promptlib.leakage import evaluation_rows
from promptlib.render import compile_prompt
from promptlib.taskmeta import META_FILE, read_meta
from promptlib.tasks import Task
from promptlib.usertasks.build import TaskDraft
from promptlib.variants import PromptVariant


def check_draft(draft: TaskDraft) -> Callable[[Path], None]:
    """A check of the written folder that its task reads back as drafted."""

    def check(folder: Path) -> None:
        try:
            task = Task(TaskFiles(draft.name, folder, folder, read_meta(folder / META_FILE)))
            spec = task.spec
            compiled = compile_prompt(PromptVariant(), task, "test")
            rows, _ = evaluation_rows(compiled.variant, task, "test")
        except WorkbenchError as e:
            raise DataError(
                f"task {draft.name!r} does not read back as written ({e}); nothing was written "
                "— please report this with the data file"
            ) from None
        want = (draft.meta.labels, draft.n_train, draft.n_test, draft.n_demos)
        got = (spec.labels, spec.n_train, spec.n_test, len(compiled.demos))
        if got != want or not rows:
            raise DataError(
                f"task {draft.name!r} reads back as {got} (labels, train, test, demonstrations), "
                f"not {want}; nothing was written — please report this with the data file"
            )

    return check
