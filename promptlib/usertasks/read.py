"""Reading a user's rows: a CSV, JSONL or Parquet file, or a Hugging Face dataset, through
the `datasets` library, every value turned into a string (None where the value is missing).

CSV cells are read as text, never as numbers ("007" stays "007"), and only an empty cell is
missing ("NA" or "None" is text, as a label may be). JSON values that are not strings are
written as JSON ("1", "true"), a whole number stored as a float as the whole number (1.0 is
"1"); a null is missing. `datasets` caches what it reads: a file is
read with a temporary cache, removed afterwards, so nothing is left behind.
"""

from __future__ import annotations

import csv
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptlib import inputs
from promptlib.data import _download_errors, _one_line
from promptlib.errors import DataError

#: file suffix -> the `datasets` builder that reads it
BUILDERS = {
    ".csv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
HF_PREFIX = "hf:"
_HF_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
#: the largest file read (a spreadsheet of labelled clauses is far smaller)
MAX_FILE_BYTES = 1 << 30

Value = str | None
HubLoader = Callable[[str, str], Any]


@dataclass(frozen=True)
class RawRows:
    """Rows as read: their column names and values (None: missing), and where they came from."""

    where: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Value], ...]

    def __len__(self) -> int:
        return len(self.rows)


def is_hub_name(source: str) -> bool:
    """Whether `source` names a Hugging Face dataset (``hf:owner/name``) rather than a file."""
    return source.startswith(HF_PREFIX)


def read_rows(source: str, *, hf_split: str = "train", hub: HubLoader | None = None) -> RawRows:
    """The rows of a file (by its suffix) or of ``hf:owner/name`` (split `hf_split`).

    `hub` replaces the download (tests); without the network the hub path is one
    `DataError` saying so and what to do instead.
    """
    if is_hub_name(source):
        return _read_hub(source[len(HF_PREFIX) :], hf_split, hub)
    path = Path(source).expanduser()
    builder = BUILDERS.get(path.suffix.lower())
    if builder is None:
        hint = (
            f"; for a Hugging Face dataset write {HF_PREFIX}{source}"
            if _HF_NAME.fullmatch(source) and "/" in source
            else ""
        )
        raise DataError(
            f"--from {source}: cannot tell the format from the suffix {path.suffix or '(none)'!r}"
            f"; give a .csv, .jsonl or .parquet file{hint}"
        )
    st = inputs.check_file(path, "data file", DataError)
    if st.st_size > MAX_FILE_BYTES:
        raise DataError(
            f"data file {path} is larger than {MAX_FILE_BYTES >> 20} MiB; keep fewer rows"
        )
    if st.st_size == 0:
        raise DataError(f"data file {path} is empty; give a file with a header and rows")
    return _read_file(path, builder)


def _read_file(path: Path, builder: str) -> RawRows:
    # start-up time: `datasets` takes a second to import, only this command needs it
    import datasets

    kwargs: dict[str, Any] = {}
    if builder == "csv":
        header = _csv_header(path)
        kwargs["features"] = datasets.Features({c: datasets.Value("string") for c in header})
        kwargs["keep_default_na"] = False  # only an empty cell is missing, not "NA"
    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        with tempfile.TemporaryDirectory(prefix="workbench-read-") as cache:
            ds = datasets.load_dataset(
                builder, data_files=str(path), split="train", cache_dir=cache, **kwargs
            )
            columns, records = tuple(ds.column_names), ds.to_list()
    except DataError:
        raise
    except Exception as e:  # pyarrow, pandas and json each raise their own
        raise DataError(
            f"data file {path} cannot be read as {builder.upper()} ({type(e).__name__}: "
            f"{_one_line(e)[:300]}); check that it is a valid {builder.upper()} file"
        ) from None
    finally:
        if was:
            datasets.enable_progress_bars()
    return _rows(str(path), columns, records)


def _csv_header(path: Path) -> list[str]:
    """The CSV's column names (to read every column as text), checked for repeats."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), None)
    except UnicodeDecodeError:
        raise DataError(f"data file {path} is not UTF-8 text; save it as UTF-8") from None
    except (OSError, csv.Error) as e:
        raise DataError(f"data file {path} cannot be read ({e}); check it") from None
    if not header or not any(h.strip() for h in header):
        raise DataError(f"data file {path}: line 1 is no header; put the column names there")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise DataError(
            f"data file {path}: column {twice[0]!r} appears {header.count(twice[0])} times in "
            "the header; rename or remove the duplicate columns"
        )
    return header


def _read_hub(name: str, split: str, hub: HubLoader | None) -> RawRows:
    if not _HF_NAME.fullmatch(name):
        raise DataError(f"--from {HF_PREFIX}{name}: not a Hugging Face dataset name (owner/name)")
    where = f"{HF_PREFIX}{name} (split {split})"
    try:
        if hub is not None:
            ds = hub(name, split)
        else:
            # start-up time: `datasets` takes a second to import, only this command needs it
            import datasets

            ds = datasets.load_dataset(name, split=split)
        columns, records = tuple(ds.column_names), ds.to_list()
    except _download_errors() as e:
        raise DataError(
            f"cannot load the Hugging Face dataset {name!r} ({type(e).__name__}: "
            f"{_one_line(e)[:300]}); check the network (or HF_HUB_OFFLINE), or download the "
            "data and pass the file: --from data.csv / .jsonl / .parquet"
        ) from None
    except ValueError as e:  # an unknown split or config
        raise DataError(f"{where}: {_one_line(e)[:300]}; check --hf-split") from None
    return _rows(where, columns, records)


def _rows(where: str, columns: tuple[str, ...], records: list[dict[str, Any]]) -> RawRows:
    if not records:
        raise DataError(f"{where} has no rows; give a file with labelled rows")
    rows = tuple({c: _text(r.get(c)) for c in columns} for r in records)
    return RawRows(where, columns, rows)


def _text(value: Any) -> Value:
    """A value as text; None (and a float NaN) is missing."""
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        # a column of whole numbers stored as floats (pandas does, once a value was missing):
        # 1.0 would be a label '1.0', which the comparison reads as '10', so a reply '1' missed
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)
