"""How variant names are shown, never what they are: a variant's name is its identity (trial
ids, MLflow params, comparisons.json keep it whole); only the printed and drawn forms here
are shorter.

- `display_name` (tables): each text-file level (``instruction_file=<path>``) with its path
  relative to the current folder or the spec's folder, when that is shorter than as written.
- `table_names` (tables, given every name shown together): each text-file level as its file's
  stem (``instruction_file=lawyer``), unless two names would then read the same: those keep
  their `display_name`.
- `short_names` (figures): names longer than `SHORT` become short unique forms (a text
  file's stem, ``lawyer``, or V1, V2, ... in order), with a key (`ShortNames.key`) mapping
  each back to its full name, which the figure draws beside the plot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from experiments.trials.record import parse_axes

SHORT = 32  # a name longer than this is abbreviated in a figure
STEM = 24  # a file's stem longer than this gives way to V1, V2, ...
_PATH_SUFFIXES = (".yaml", ".yml", ".txt", ".json", ".md")


def _axes(name: str) -> dict[str, str] | None:
    try:
        return parse_axes(name)
    except ValueError:  # not axis=level pairs (an imported name): shown as a whole
        return None


def _is_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.lower().endswith(_PATH_SUFFIXES)


def _file_level(axis: str, value: str) -> bool:
    """A level that names a text file (``instruction_file``, ``register_file``; not ``none``)."""
    return axis.endswith("_file") and value != "none" and _is_path(value)


def display_path(path: str, folders: Sequence[str | os.PathLike[str]] = ()) -> str:
    """`path` as written, or relative to the current folder or one of `folders` (a spec's
    folder) when that is shorter; a relative path is read from the current folder, as the
    workbench reads it."""
    shown = path
    try:
        full = os.path.abspath(path)
        for start in (os.getcwd(), *folders):
            rel = os.path.relpath(full, os.path.abspath(start))
            # a path as written from here (no ..) beats a shorter one that climbs out of a
            # spec's folder: ../instructions/x.yaml reads as a file the user never named
            climbs = rel.split(os.sep, 1)[0] == os.pardir
            if len(rel) < len(shown) and not (climbs and not os.path.isabs(shown)):
                shown = rel
    except (OSError, ValueError):  # no current folder, or another drive: as written
        return path
    return shown


def display_name(name: str, folders: Sequence[str | os.PathLike[str]] = ()) -> str:
    """A variant name as tables print it: its text-file paths made short (`display_path`)."""
    axes = _axes(name)
    if not axes:
        return display_path(name, folders) if axes is None and _is_path(name) else name
    for axis, value in axes.items():
        if _file_level(axis, value):
            shown = display_path(value, folders)
            if shown != value:
                name = name.replace(f"{axis}={value}", f"{axis}={shown}", 1)
    return name


def table_names(
    names: Iterable[str], folders: Sequence[str | os.PathLike[str]] = ()
) -> dict[str, str]:
    """Each of `names` as a table prints it: its text-file levels as their stems, short and
    still unique among `names` (a clash keeps the clashing names' `display_name`)."""
    names = list(dict.fromkeys(names))
    stems = {n: _stemmed(n) for n in names}
    count: dict[str, int] = {}
    for s in stems.values():
        count[s] = count.get(s, 0) + 1
    shown = {n: s if count[s] == 1 else display_name(n, folders) for n, s in stems.items()}
    if len(set(shown.values())) < len(shown):  # a stem equal to another's path: whole paths
        shown = {n: display_name(n, folders) for n in names}
    if len(set(shown.values())) < len(shown):  # one file spelled two ways: names as written
        return {n: n for n in names}
    return shown


def _stemmed(name: str) -> str:
    """`name` with each text-file level replaced by the file's stem."""
    for axis, value in (_axes(name) or {}).items():
        if _file_level(axis, value):
            name = name.replace(f"{axis}={value}", f"{axis}={_stem(value)}", 1)
    return name


def _stem(value: str) -> str:
    return PurePath(value.replace("\\", "/")).stem if _is_path(value) else value


@dataclass(frozen=True)
class ShortNames:
    """Full name -> the form a figure draws; `key` lists the abbreviated ones."""

    short: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, name: str) -> str:
        return self.short.get(name, name)

    def key(self) -> list[tuple[str, str]]:
        """(short, full name as tables print it) for every abbreviated name, in order."""
        return [(s, display_name(n)) for n, s in self.short.items() if s != n]


def short_names(names: Iterable[str], limit: int = SHORT, stem: int = STEM) -> ShortNames:
    """Short unique forms of `names` for a figure (see the module); unchanged when every name
    fits in `limit` characters.

    A name of one axis everywhere (``instruction_file=specs/lawyer.yaml``) becomes its level
    (``lawyer``: a file's stem, at most `stem` characters; another level at most `limit`); of
    several, each level shortened (``instruction_file=lawyer,seed=0``, at most `limit`). If
    these are not unique or too long: V1, V2, ... in the given order.
    """
    names = list(dict.fromkeys(names))
    if all(len(n) <= limit for n in names):
        return ShortNames({n: n for n in names})
    parsed = [_axes(n) for n in names]
    keys = {tuple(a) if a else () for a in parsed}
    only = next(iter(keys)) if len(keys) == 1 else ()
    single = len(only) == 1  # every name one and the same axis
    forms = []
    for n, axes in zip(names, parsed, strict=True):
        if not axes:
            forms.append(_stem(n))
        elif single:
            forms.append(_stem(next(iter(axes.values()))))
        else:
            forms.append(",".join(f"{k}={_stem(v) if k.endswith('_file') else v}"
                                  for k, v in axes.items()))  # fmt: skip
    # a file's stem alone, or a level alone / axis=level pairs
    longest = stem if single and only[0].endswith("_file") else limit
    if len(set(forms)) < len(forms) or any(len(f) > longest or not f for f in forms):
        forms = [f"V{i}" for i in range(1, len(names) + 1)]
    return ShortNames(dict(zip(names, forms, strict=True)))
