"""The project file: the mlflow.yaml a command reads, found from the working folder up.

Every default place the workbench writes to or reads from (the MLflow store and artifacts,
runs/, reports/, optuna.db, generated variants, the LegalBench data) is relative to this
file's folder, not to the working folder: a command run from a subfolder used to start a new
store, runs/ and reports/ there, which `make ui` at the project root did not show.

Which file: ``$WORKBENCH_MLFLOW_CONFIG`` if set, else the nearest ``mlflow.yaml`` in the
working folder or one of its parents, else the user's own
``$XDG_CONFIG_HOME/workbench/mlflow.yaml`` (``~/.config/workbench/mlflow.yaml``), which need
not exist: its folder then holds the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from promptlib.errors import WorkbenchError

CONFIG_ENV = "WORKBENCH_MLFLOW_CONFIG"
CONFIG_NAME = "mlflow.yaml"
#: the user-level file's folder under $XDG_CONFIG_HOME (default ~/.config)
USER_DIR = "workbench"

TRACKING_FIELDS = ("tracking_uri", "artifact_location", "experiment_prefix", "prompt_registry")
#: the fields naming a folder or file, relative to the project file's folder
PATH_FIELDS = ("runs_dir", "reports_dir", "generated_dir", "optuna_storage", "legalbench_dir")
FIELDS = (*TRACKING_FIELDS, *PATH_FIELDS)

#: how the file was chosen: the caller's path, $WORKBENCH_MLFLOW_CONFIG, the nearest
#: mlflow.yaml from the working folder up, or the user-level file
Found = Literal["given", "env", "project", "user"]


@dataclass(frozen=True)
class ProjectFile:
    """The mlflow.yaml in use (it need not exist) and its fields, checked."""

    path: Path  # absolute, symlinks resolved: its folder is the base of relative paths
    found: Found
    exists: bool
    fields: Mapping[str, Any] = field(default_factory=dict)
    searched_from: Path | None = None  # the working folder searched up from (user default)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def chosen(self) -> bool:
        """Whether the user named the file (path given or $WORKBENCH_MLFLOW_CONFIG)."""
        return self.found in ("given", "env")

    def text(self, name: str) -> str | None:
        """A path field's value as written, or None when the file does not set it."""
        value = self.fields.get(name)
        return None if value is None else str(value)

    def resolve(self, value: str) -> Path:
        """`value` (a field's path) as a path: `~` expanded, relative to the file's folder."""
        return self.folder / Path(value).expanduser()

    def folder_field(self, name: str, default: str) -> Path:
        """The folder a path field names (`default` when unset), relative to the file's folder;
        shown relative to the working folder when inside it (run from the project root, the
        defaults read `runs`, `reports` as they always did), else absolute."""
        path = self.resolve(self.text(name) or default)
        try:
            return path.relative_to(Path.cwd())
        except ValueError:
            return path

    def describe(self) -> str:
        """Where the file came from, for a message: "from /p/mlflow.yaml"."""
        if self.found != "user":
            return f"from {self.path}"
        where = f" in {self.searched_from} or above" if self.searched_from else ""
        absent = "" if self.exists else " (absent: the defaults)"
        return f"user default {self.path}{absent}: no {CONFIG_NAME}{where}"


def user_config_path() -> Path:
    """``$XDG_CONFIG_HOME/workbench/mlflow.yaml``, ``~/.config/workbench/mlflow.yaml`` when
    XDG_CONFIG_HOME is unset or relative (as the XDG spec says)."""
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(xdg):
        base = Path(xdg)
    else:
        try:
            base = Path.home() / ".config"
        except RuntimeError:  # no HOME and no password entry
            raise WorkbenchError(
                f"no {CONFIG_NAME} in the working folder or above, and no home folder for the "
                f"user default: set XDG_CONFIG_HOME or HOME, or {CONFIG_ENV} to a {CONFIG_NAME}"
            ) from None
    return base / USER_DIR / CONFIG_NAME


def _nearest(start: Path) -> Path | None:
    """The nearest mlflow.yaml in `start` or one of its parents (a folder of that name is
    skipped; a file that cannot be read is not: reading it says what is wrong)."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_NAME
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return None


def _read(p: Path) -> dict[str, Any]:
    # start-up time: YAML and the data readers only once a project file is read (not for --help)
    from promptlib.data import read_text
    from promptlib.yamlsafe import safe_yaml_load

    text = read_text(p, "tracking config", WorkbenchError)
    try:
        loaded = safe_yaml_load(text, str(p)) or {}
    except WorkbenchError as e:
        raise WorkbenchError(f"{e}; fix it or remove it to use the defaults") from None
    if not isinstance(loaded, dict):
        raise WorkbenchError(f"{p}: expected a mapping (tracking_uri:, ...)")
    unknown = set(loaded) - set(FIELDS)
    if unknown:
        raise WorkbenchError(
            f"{p}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
            f"the fields are {', '.join(FIELDS)}"
        )
    for name in PATH_FIELDS:
        value = loaded.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise WorkbenchError(f"{p}: {name} must be a path (text), not {value!r}")
    return loaded


def locate(path: str | Path | None = None) -> ProjectFile:
    """The project file: `path`, else $WORKBENCH_MLFLOW_CONFIG, else the nearest mlflow.yaml
    from the working folder up, else the user-level one; read and checked when it exists."""
    found: Found
    searched: Path | None = None
    if path:
        p, found = Path(path), "given"
    elif os.environ.get(CONFIG_ENV):
        p, found = Path(os.environ[CONFIG_ENV]), "env"
    else:
        searched = Path.cwd()
        nearest = _nearest(searched)
        p, found = (nearest, "project") if nearest else (user_config_path(), "user")
    p = p.expanduser()
    exists = p.exists() and not p.is_dir()  # a FIFO or device is `read_text`'s error, no wait
    fields = _read(p) if exists else {}
    return ProjectFile(p.resolve(), found, exists, fields, searched)
