"""A study's winner as a file one can rerun: reports/optimize/<study>/best_variant-<id>.json.

Why a file: the winner bound to its task (`promptlib.demos.bind`: sampled demonstrations
become explicit rows) is what `workbench run --variant-file` reruns exactly. The file holds
that canonical JSON and nothing else, and its name carries the variant's id (the SHA-256 of
that text), so a study rerun that finds another winner writes another file and never
overwrites a finished one; the same winner finds its file there already and leaves it as is.
A file of that name with other bytes (edited by hand) is kept too: the new one gets the
next free ``.<n>`` suffix.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from experiments.files import atomic_write_text, dir_lock
from experiments.ids import short_sha
from experiments.names import check_name
from promptlib.errors import WorkbenchError

FOLDER = "optimize"  # reports/optimize/<study>/


class WinnerFileError(WorkbenchError):
    """The winner's variant file cannot be written: the study itself is finished and tracked."""


def study_folder(reports_dir: Path, study: str) -> Path:
    """reports/optimize/<study>/: the study's name when it is a plain name (`--study` names
    are), else its letters, digits, '_', '-' and '.' and 16 hex digits of its SHA-256 (a
    default name carries the model's, which may hold ':' or be long)."""
    if check_name(study):
        return reports_dir / FOLDER / study
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "_", study).strip("._-")[:80] or "study"
    return reports_dir / FOLDER / f"{plain}-{short_sha(study)}"


def save_winner(reports_dir: Path, study: str, variant_json: str) -> Path:
    """Write the winner's variant file (see the module) and return its path."""
    folder = study_folder(reports_dir, study)
    stem = f"best_variant-{hashlib.sha256(variant_json.encode('utf-8')).hexdigest()[:12]}"
    data = variant_json.encode("utf-8")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with dir_lock(folder):  # two workers of one study finishing at once
            target, n = folder / f"{stem}.json", 1
            while target.exists():
                if target.is_file() and target.read_bytes() == data:
                    return target
                n += 1
                target = folder / f"{stem}.{n}.json"
            atomic_write_text(target, variant_json)
    except OSError as e:
        raise WinnerFileError(
            f"cannot write the winner's variant file to {folder}/ ({e.strerror or e}); the "
            "study is finished and its winner is on its MLflow run (best_variant.json): make "
            "the folder writable and run the same command again (finished trials are not rerun)"
        ) from e
    return target


def rerun_command(
    task: str,
    path: Path | str,
    model: str,
    *,
    scoring: str = "generate",
    split: str = "test",
    extra: Sequence[str] = (),
) -> str:
    """The `workbench run` command that reruns the winner from its file, quoted for a POSIX
    shell; `extra`: the optimize command's options a rerun needs too (--api-base, --data-dir
    ...), already as arguments."""
    args = ["workbench", "run", task, "--variant-file", str(path), "--model", model]
    if scoring != "generate":
        args += ["--scoring", scoring]
    if split != "test":
        args += ["--split", split]
    return shlex.join([*args, *extra])
