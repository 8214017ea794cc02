"""The registry of import formats: a format's name (`workbench import FORMAT`) -> its reader.

A reader is `(path, ReadOptions) -> list[ImportedTrial]` and raises `ImportInputError` on a
file it cannot read. A reader needing an optional extra imports it inside its function (with
an `optional` comment), so this registry imports every reader module without the extras."""

from __future__ import annotations

from experiments.imports import inspect, lmeval, promptfoo, tabular
from experiments.imports.records import ImportInputError, Reader
from promptlib.errors import did_you_mean

FORMATS: dict[str, Reader] = {
    "jsonl": tabular.read_jsonl,
    "csv": tabular.read_csv,
    "inspect": inspect.read_inspect,
    "lm-eval": lmeval.read_lmeval,
    "promptfoo": promptfoo.read_promptfoo,
}


def reader(name: str, for_files: str = "") -> Reader:
    """The reader of format `name`, or a one-line error (naming `for_files`, if given)
    listing the formats."""
    try:
        return FORMATS[name]
    except KeyError:
        where = f"{for_files}: " if for_files else ""
        raise ImportInputError(
            f"{where}unknown import format {name!r}{did_you_mean(name, FORMATS)}; give one of "
            f"{', '.join(sorted(FORMATS))} (workbench import FORMAT PATH...)"
        ) from None
