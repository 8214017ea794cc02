"""The catalog's user tasks: the folder ``workbench task new`` writes, beside LegalBench's.

`UserTaskSource` lists the task folders of the user task folder (hidden ones, such as a
half-written ``.new-*``, are not tasks); each task's `TaskFiles` carries its `task.json`.
`CombinedSource` is LegalBench's source and the user's in one catalog: every command
(tasks, render, run, sweep, optimize) sees both. A user task named like one of LegalBench's
is refused, naming the folder: it would shadow LegalBench's task in every command.
`UserOnlySource` is the user's tasks alone, when no LegalBench data is configured at all: a
user with only their own data can still make and run tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from promptlib.data import DataSource, TaskFiles, default_source, own_data_hint
from promptlib.errors import DataError, NoLegalBenchDataError, UnknownTaskError, did_you_mean
from promptlib.legalbench_names import LEGALBENCH_TASKS
from promptlib.taskmeta import META_FILE, read_meta, user_tasks_dir


def _is_user_task_dir(p: Path) -> bool:
    return (
        not p.name.startswith(".")
        and p.is_dir()
        and any((p / f).is_file() for f in (META_FILE, "train.tsv", "test.tsv"))
    )


class UserTaskSource(DataSource):
    """The tasks in the user task folder (`WORKBENCH_TASKS_DIR`); none if it is absent."""

    def __init__(self, tasks_dir: Path | str | None = None) -> None:
        folder = Path(tasks_dir).expanduser() if tasks_dir is not None else user_tasks_dir()
        self.tasks_dir = folder
        self.prompts_dir = folder
        try:
            found = sorted(p.name for p in folder.iterdir() if _is_user_task_dir(p))
        except FileNotFoundError:
            found = []
        except NotADirectoryError:
            raise DataError(
                f"the user task folder {folder} is a file; set WORKBENCH_TASKS_DIR to a folder"
            ) from None
        except OSError as e:
            raise DataError(
                f"the user task folder {folder} cannot be read ({e.strerror or e}); check it or "
                "set WORKBENCH_TASKS_DIR"
            ) from None
        self._names = tuple(found)
        self.description = f"your tasks in {folder}"

    def task(self, name: str) -> TaskFiles:
        files = super().task(name)
        meta = files.data_dir / META_FILE
        if not meta.is_file():
            raise DataError(
                f"{files.data_dir} has no {META_FILE}, so its task type, labels and metric are "
                "unknown; make the task with workbench task new (or remove the folder)"
            )
        return dataclasses.replace(files, meta=read_meta(meta))


class CombinedSource(DataSource):
    """LegalBench's tasks and the user's, one catalog; a name in both is refused."""

    def __init__(self, base: DataSource, user: UserTaskSource) -> None:
        clash = sorted(set(base.names()) & set(user.names()))
        if clash:
            raise DataError(
                f"{user.tasks_dir / clash[0]}: a task of yours is named like LegalBench's task "
                f"{clash[0]!r} and would shadow it; rename or remove that folder"
            )
        self.base = base
        self.user = user
        self.tasks_dir = base.tasks_dir
        self.prompts_dir = base.prompts_dir
        self._names = tuple(sorted((*base.names(), *user.names())))
        self.description = f"{base.description}, and {user.description}"

    def task(self, name: str) -> TaskFiles:
        if name in self.user.names():
            return self.user.task(name)
        if name in self.base.names():
            return self.base.task(name)
        raise UnknownTaskError(
            f"unknown task {name!r}{did_you_mean(name, self._names)} "
            f"(run 'workbench tasks' for the {len(self._names)} known tasks; make your own "
            "with workbench task new)" + own_data_hint(name)
        )


class UserOnlySource(DataSource):
    """The user's tasks alone, when no LegalBench data is configured: a LegalBench task's name
    raises the error saying how to configure the data (not "unknown task").

    `note` says only the user's tasks are there; `announce` gets it once, when the tasks are
    listed or one of them is used (not before that error, which says it already)."""

    def __init__(
        self,
        user: UserTaskSource,
        missing: NoLegalBenchDataError,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.user = user
        self.missing = missing
        self._announce = announce
        self.tasks_dir = user.tasks_dir
        self.prompts_dir = user.prompts_dir
        self._names = user.names()
        self.description = f"{user.description}; no LegalBench data configured"
        self.note = (
            f"no LegalBench data configured ({missing.how}): only your own tasks are available"
        )

    def _used(self) -> None:
        if self._announce is not None:
            announce, self._announce = self._announce, None
            announce(self.note)

    def names(self) -> tuple[str, ...]:
        self._used()
        return self._names

    def task(self, name: str) -> TaskFiles:
        if name in self._names:
            self._used()
            return self.user.task(name)
        if name in LEGALBENCH_TASKS:
            raise NoLegalBenchDataError(
                f"no LegalBench data configured, so LegalBench's task {name!r} is not "
                f"available: {self.missing.how}",
                self.missing.how,
            )
        raise UnknownTaskError(
            f"unknown task {name!r}{did_you_mean(name, (*self._names, *LEGALBENCH_TASKS))} "
            f"(run 'workbench tasks' for your {len(self._names)} tasks; make another with "
            "workbench task new)" + own_data_hint(name)
        )


def user_task_names(source: DataSource) -> frozenset[str]:
    """The names of `source`'s tasks that are the user's own (a `catalog_source` result)."""
    if isinstance(source, (CombinedSource, UserOnlySource)):
        return frozenset(source.user.names())
    return frozenset()


def catalog_source(
    data_dir: str | None = None,
    hf: bool = False,
    prompts_dir: str | None = None,
    tasks_dir: Path | str | None = None,
    project_dir: str | None = None,
    project_file: str = "mlflow.yaml",
    announce: Callable[[str], None] | None = None,
) -> DataSource:
    """`default_source` (LegalBench's tasks) with the user's tasks beside them, if any; with no
    LegalBench data configured at all, the user's tasks alone (`UserOnlySource`), or the error
    saying how to configure it when the user has none either. A configured folder that is
    missing or broken is an error still. `announce`: see `UserOnlySource`."""
    try:
        base = default_source(
            data_dir=data_dir,
            hf=hf,
            prompts_dir=prompts_dir,
            project_dir=project_dir,
            project_file=project_file,
        )
    except NoLegalBenchDataError as e:
        mine = UserTaskSource(tasks_dir)
        if not mine.names():
            raise
        return UserOnlySource(mine, e, announce)
    user = UserTaskSource(tasks_dir)
    return CombinedSource(base, user) if user.names() else base
