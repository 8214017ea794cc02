"""Where task data comes from: a LegalBench-layout directory, or the Hugging Face archive.

Both sources yield the same thing per task: its TSV splits (every column kept, as strings)
and, where available, its prompt files. The Hugging Face dataset `nguha/legalbench` carries
no prompt files, so that source takes an optional prompts directory and says clearly when
prompts are missing instead of inventing them.
"""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import string
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from promptlib import inputs
from promptlib.errors import (
    DataError,
    NoLegalBenchDataError,
    UnknownTaskError,
    WorkbenchError,
    did_you_mean,
    first_few,
)
from promptlib.progress import progress_bar
from promptlib.taskmeta import TaskMeta

SPLITS = ("train", "test")
PROMPT_SUFFIX = ".txt"
HF_REPO_ID = "nguha/legalbench"
HF_ARCHIVE = "data.tar.gz"
#: The largest prompt, instruction, register or README file read, in bytes (1 MiB).
MAX_TEXT_BYTES = 1 << 20


def read_text(path: Path, what: str, error: type[WorkbenchError] = DataError) -> str:
    """A small UTF-8 text file (prompt, instruction, register, README), read safely.

    A regular file of at most `MAX_TEXT_BYTES` (`promptlib.inputs.read_text`: a FIFO, a
    device such as /dev/zero, a folder or a huge file is one clear message, never a hang or
    a full memory). Newlines are translated as by `Path.read_text`. Every failure is an
    `error` naming `what` and the file.
    """
    if path.is_dir():
        raise error(f"{what} {path} is a directory; give the path of a file")
    data = inputs.read_bytes(
        path, what, error, MAX_TEXT_BYTES, "prompt, instruction, register and README files"
    )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"{what} {path} is not UTF-8 text (line {line}: byte 0x{data[e.start]:02x}); "
            "save it as UTF-8"
        ) from e
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _first_non_utf8_line(path: Path) -> str:
    """'line N: byte 0xXX' for a file's first bytes that are not UTF-8 ('' if none found).

    UTF-8 never uses the newline byte inside a character, so lines decode independently.
    """
    try:
        with path.open("rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return f"line {n}: byte 0x{raw[e.start]:02x}"
    except OSError:
        pass
    return ""


def is_prompt_file(filename: str) -> bool:
    """LegalBench names its templates *_prompt.txt, icl_N.txt and zero_shot_*.txt."""
    return filename.endswith(PROMPT_SUFFIX) and (
        filename.endswith("_prompt.txt") or filename.startswith(("icl_", "zero_shot_"))
    )


@dataclass(frozen=True)
class Table:
    """A split: its column names and its rows, every value a string."""

    path: Path
    columns: tuple[str, ...]
    rows: tuple[dict[str, str], ...]

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[str]:
        return [r[name] for r in self.rows]


def read_tsv(path: Path) -> Table:
    """Read a LegalBench TSV (tab-separated, double-quoted fields) with every column kept.

    Uses the stdlib csv reader in strict mode, which parses these files exactly as pandas
    does (the tests check that on all of them) at a fraction of pandas' import cost. A bad
    record is reported with its file line.
    """
    inputs.check_file(path, "data file", DataError)  # a FIFO would wait forever
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t", quotechar='"', strict=True)
            header = next(reader, None)
            if not header:
                raise DataError(f"{path}: file is empty; re-download the task's data")
            twice = [c for c, n in Counter(header).items() if n > 1]
            if twice:
                raise DataError(
                    f"{path}: column {twice[0]!r} appears {header.count(twice[0])} times in the "
                    "header (line 1); rename or remove the duplicate columns"
                )
            rows: list[dict[str, str]] = []
            lines: list[int] = []  # each row's first file line, for messages
            start = reader.line_num + 1
            try:
                for record in reader:
                    line, start = start, reader.line_num + 1
                    if not record:
                        continue  # blank line
                    if len(record) != len(header):
                        raise DataError(
                            f"{path}: not a valid LegalBench TSV (line {line}: expected "
                            f"{len(header)} fields, found {len(record)}); fix or re-download "
                            "that file"
                        )
                    rows.append(dict(zip(header, record, strict=True)))
                    lines.append(line)
            except csv.Error as e:
                raise DataError(
                    f"{path}: not a valid LegalBench TSV (line {start}: {e}; is a quote opened "
                    "there and never closed?); fix or re-download that file"
                ) from e
    except UnicodeDecodeError as e:
        where = _first_non_utf8_line(path) or str(e)
        raise DataError(f"{path}: not UTF-8 text ({where}); re-download that file") from e
    except OSError as e:
        raise DataError(f"{path}: cannot be read ({e.strerror or e}); check that file") from e
    if "answer" not in header:
        raise DataError(
            f"{path}: no 'answer' column (columns: {', '.join(header)}); LegalBench "
            "splits need one — if the file labels it 'label', rename that column to 'answer'"
        )
    columns = tuple(header)
    if "index" in columns:
        _refuse_repeated_ids(path, rows, lines)
    else:
        columns = ("index", *columns)
        rows = [{"index": str(i), **r} for i, r in enumerate(rows)]
    _refuse_empty_answers(path, rows, lines)
    return Table(path, columns, tuple(rows))


#: How many repeated index values an error message lists before "and N more".
_SHOWN_REPEATS = 3


def _refuse_repeated_ids(path: Path, rows: list[dict[str, str]], lines: list[int]) -> None:
    """Raise a DataError naming the file and the index values that occur more than once.

    Rows are identified by `index` everywhere (demonstrations, leakage checks, a sweep's
    common rows, trial results), so two rows sharing one were silently collapsed into one:
    trials lost rows, a sweep named an arm twice, `optimize` saw a false leak. A set of the ids
    first, so a 100k-row split is checked in milliseconds; lines are found only on failure.
    """
    if len({r["index"] for r in rows}) == len(rows):
        return
    first: dict[str, int] = {}
    repeats: dict[str, list[int]] = {}
    for row, line in zip(rows, lines, strict=True):
        i = row["index"]
        if i in first:
            repeats.setdefault(i, [first[i]]).append(line)
        else:
            first[i] = line
    shown = [
        f"index {i!r} on lines {', '.join(map(str, at[:-1]))} and {at[-1]}"
        for i, at in itertools.islice(repeats.items(), _SHOWN_REPEATS)
    ]
    more = len(repeats) - len(shown)
    listed = "; ".join(shown) + (f"; and {more} more" if more else "")
    raise DataError(
        f"{path}: {len(repeats)} index value{'s' if len(repeats) > 1 else ''} "
        f"repeat{'' if len(repeats) > 1 else 's'} ({listed}); each row needs its own index: "
        "remove the repeated rows or renumber the index column, then rerun"
    )


_NO_LABEL = str.maketrans("", "", string.punctuation)


def is_empty_answer(answer: str) -> bool:
    """Whether a gold answer is no label: nothing is left of it once LegalBench's metric
    normalises it (punctuation dropped, whitespace stripped), so an empty reply would match."""
    return not answer.translate(_NO_LABEL).strip()


def _refuse_empty_answers(path: Path, rows: list[dict[str, str]], lines: list[int]) -> None:
    """Raise a DataError naming the file and the rows whose `answer` is empty.

    An empty gold answer became a label: a model answering nothing was right on those rows,
    its invalid rate 0.0 and its trial complete. One pass over the answers; the rows are
    listed only on failure.
    """
    pairs = zip(rows, lines, strict=True)
    empty = [(r["index"], line) for r, line in pairs if is_empty_answer(r["answer"])]
    if not empty:
        return
    n = len(empty)
    rows_at = first_few([f"{i} (line {line})" for i, line in empty], _SHOWN_REPEATS)
    raise DataError(
        f"{path}: {n} row{'s' if n > 1 else ''} of {len(rows)} ha{'ve' if n > 1 else 's'} an "
        f"empty answer (blank, or only spaces or punctuation): index {rows_at}; an empty gold "
        "answer is no label, and a model answering nothing would be scored right on it: fill "
        "in each answer or remove those rows, then rerun"
    )


@dataclass(frozen=True)
class TaskFiles:
    """The files of one task, wherever they live."""

    name: str
    data_dir: Path
    prompt_dir: Path | None
    #: a user task's declared facts (`task.json`); None for LegalBench's tasks
    meta: TaskMeta | None = None

    def split_path(self, split: str) -> Path:
        return self.data_dir / f"{split}.tsv"

    def has_split(self, split: str) -> bool:
        return self.split_path(split).is_file()

    def _prompt_paths(self) -> list[Path]:
        if self.prompt_dir is None or not self.prompt_dir.is_dir():
            return []
        return sorted(
            p for p in self.prompt_dir.iterdir() if is_prompt_file(p.name) and p.is_file()
        )

    def prompt_files(self) -> tuple[str, ...]:
        """Non-empty prompt template files, sorted by name."""
        return tuple(p.name for p in self._prompt_paths() if p.stat().st_size > 0)

    def empty_prompt_files(self) -> tuple[str, ...]:
        """Prompt files that exist but are empty (LegalBench ships a few)."""
        return tuple(p.name for p in self._prompt_paths() if p.stat().st_size == 0)

    def require_prompts(self) -> Path:
        if self.prompt_dir is None:
            raise DataError(
                f"task {self.name!r}: this data source has no prompt files (the Hugging Face "
                "archive holds only TSVs); pass --prompts-dir pointing at the 'tasks/' folder "
                "of a LegalBench checkout"
            )
        return self.prompt_dir

    def read_prompt(self, filename: str) -> str:
        path = self.require_prompts() / filename
        if not path.is_file():
            raise DataError(f"task {self.name!r}: prompt file {path} does not exist")
        text = read_text(path, f"task {self.name!r}: prompt file")
        if not text.strip():
            raise DataError(f"task {self.name!r}: prompt file {path} is empty")
        return text

    def readme(self) -> str | None:
        for d in (self.prompt_dir, self.data_dir):
            if d is None:
                continue
            for name in ("README.md", "README.MD"):
                if (d / name).is_file():
                    return read_text(d / name, f"task {self.name!r}: README")
        return None


def _is_task_dir(p: Path) -> bool:
    """A task folder holds a split, or (scalr has no train split) a base prompt."""
    return p.is_dir() and any(
        (p / f).is_file() for f in ("train.tsv", "test.tsv", "base_prompt.txt")
    )


class DataSource:
    """A set of LegalBench tasks, each with its TSVs and (maybe) prompt files."""

    description: str = ""

    def __init__(self, tasks_dir: Path, prompts_dir: Path | None) -> None:
        self.tasks_dir = tasks_dir
        self.prompts_dir = prompts_dir
        names = sorted(p.name for p in tasks_dir.iterdir() if _is_task_dir(p))
        if not names:
            raise DataError(
                f"{tasks_dir}: no task folders found; expected the LegalBench layout "
                "tasks/<task>/{train,test}.tsv"
            )
        self._names = tuple(names)

    def names(self) -> tuple[str, ...]:
        return self._names

    def task(self, name: str) -> TaskFiles:
        if name not in self._names:
            raise UnknownTaskError(
                f"unknown task {name!r}{did_you_mean(name, self._names)} "
                f"(run 'workbench tasks' for the {len(self._names)} known tasks)"
                + own_data_hint(name)
            )
        prompt_dir = self.prompts_dir / name if self.prompts_dir is not None else None
        return TaskFiles(name, self.tasks_dir / name, prompt_dir)


#: suffixes of the files `workbench task new` reads (a task name never has one)
DATA_FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".pq", ".tsv")


def own_data_hint(name: str) -> str:
    """For a task name that is a data file's name: how to make a task of that file."""
    if not name.lower().endswith(DATA_FILE_SUFFIXES):
        return ""
    return (
        f"; {name} is a data file, not a task: make it a task first with 'workbench task new "
        f"NAME --from {name} --input COLUMN --answer COLUMN --instruction TEXT'"
    )


def _tasks_folder(folder: Path | str, missing: str) -> Path:
    """`folder`'s `tasks/` subfolder if it has one, else `folder`; `missing` (its `{}` the
    folder) is the DataError when `folder` is no directory."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise DataError(missing.format(path))
    return path / "tasks" if (path / "tasks").is_dir() else path


class LocalSource(DataSource):
    """A directory in LegalBench's layout: `<root>/tasks/<task>/{train,test}.tsv` + prompts."""

    def __init__(self, root: Path | str, missing: str | None = None) -> None:
        """`missing` (its `{}` the folder): the message when `root` is no directory."""
        tasks_dir = _tasks_folder(
            root,
            missing
            or "data directory {} does not exist; set LEGALBENCH_DIR or --data-dir to a "
            "folder in LegalBench's layout (it holds tasks/<task>/train.tsv)",
        )
        super().__init__(tasks_dir, tasks_dir)
        self.description = f"local directory {tasks_dir}"


Downloader = Callable[[], str]


def _hf_download() -> str:
    """Fetch nguha/legalbench's data.tar.gz (the only network call in this module).

    huggingface_hub draws its own download progress bar on stderr (unless
    HF_HUB_DISABLE_PROGRESS_BARS is set); the extraction that follows has ours (`progress_bar`).
    """
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id=HF_REPO_ID, filename=HF_ARCHIVE, repo_type="dataset")


class HuggingFaceSource(DataSource):
    """The Hugging Face dataset `nguha/legalbench`, read from its data.tar.gz TSVs.

    The dataset's loading script does not run on `datasets` >= 4, so the archive is fetched
    once with huggingface_hub, extracted atomically into the cache, and read as TSVs.
    """

    def __init__(
        self,
        cache_dir: Path | str,
        prompts_dir: Path | str | None = None,
        download: Downloader | None = None,
    ) -> None:
        cache = Path(cache_dir).expanduser()
        extracted = cache / "legalbench-hf"
        if not extracted.is_dir():
            try:
                archive = (download or _hf_download)()
            except _download_errors() as e:
                raise DataError(
                    f"cannot download {HF_REPO_ID} from Hugging Face ({type(e).__name__}: "
                    f"{_one_line(e)}); check the network or use LEGALBENCH_DIR / --data-dir "
                    "with a local copy"
                ) from e
            _extract_atomically(Path(archive), extracted)
        tasks_dir = _find_tasks_dir(extracted)
        prompts = None
        if prompts_dir is not None:
            prompts = _tasks_folder(
                prompts_dir,
                "prompts directory {} does not exist; point --prompts-dir at the "
                "'tasks/' folder of a LegalBench checkout",
            )
        super().__init__(tasks_dir, prompts)
        self.description = f"Hugging Face {HF_REPO_ID} (cached at {extracted})" + (
            f", prompts from {prompts}" if prompts else ", no prompt files"
        )


def _download_errors() -> tuple[type[BaseException], ...]:
    """What a failed download raises: offline, unreachable, refused, or not found.

    requests' and urllib3's connection errors are `OSError`s; huggingface_hub raises its own
    errors (`LocalEntryNotFoundError` when offline with nothing cached), and httpx (which
    recent huggingface_hub versions use) has its own hierarchy.
    """
    errors: list[type[BaseException]] = [OSError]
    try:
        from huggingface_hub import errors as hf_errors

        errors += [hf_errors.HfHubHTTPError, hf_errors.LocalEntryNotFoundError]
    except ImportError:
        pass
    try:
        import httpx

        errors.append(httpx.HTTPError)
    except ImportError:
        pass
    return tuple(errors)


def _one_line(e: BaseException) -> str:
    """An exception's message on one line (huggingface_hub's span several)."""
    return " ".join(str(e).split()) or "no details"


def _extract_atomically(archive: Path, dest: Path) -> None:
    """Extract into a temporary sibling and rename, so a crash leaves no half-extracted cache.

    If another process finished extracting first, its complete copy is kept and ours dropped.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        try:
            with tarfile.open(archive) as tar, progress_bar(f"extracting {archive.name}") as step:
                members = tar.getmembers()
                for n, member in enumerate(members, 1):
                    tar.extract(member, tmp, filter="data")
                    step(n, len(members))
        except (tarfile.TarError, OSError) as e:
            raise DataError(
                f"{archive}: cannot extract the LegalBench archive ({e}); delete it from the "
                "Hugging Face cache and try again"
            ) from e
        try:
            os.replace(tmp, dest)
        except OSError as e:
            # Renames are atomic, so an existing dest is another process's complete copy.
            if not dest.is_dir():
                raise DataError(
                    f"{dest}: cannot move the extracted LegalBench archive into place ({e}); "
                    "check that folder's permissions and try again"
                ) from e
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _find_tasks_dir(root: Path) -> Path:
    """The folder whose subfolders are tasks (the archive nests them as data/<task>/)."""
    hits = sorted(root.rglob("*.tsv"), key=lambda p: len(p.parts))
    if not hits:
        raise DataError(f"{root}: the extracted archive holds no <task>/<split>.tsv files")
    return hits[0].parent.parent


def default_source(
    data_dir: str | None = None,
    hf: bool = False,
    prompts_dir: str | None = None,
    cache_dir: str | None = None,
    project_dir: str | None = None,
    project_file: str = "mlflow.yaml",
) -> DataSource:
    """Pick the data source from CLI options, the environment, then the project.

    `project_dir` is the folder the project file `project_file` names (`legalbench_dir:`),
    used when neither `data_dir` nor ``$LEGALBENCH_DIR`` is given; the caller reads it
    (promptlib does not know where the project file is). An error then names all three ways
    to give the folder.
    """
    if hf:
        cache = cache_dir or os.environ.get("WORKBENCH_CACHE_DIR") or "~/.cache/workbench"
        return HuggingFaceSource(cache, prompts_dir or os.environ.get("LEGALBENCH_PROMPTS_DIR"))
    root = data_dir or os.environ.get("LEGALBENCH_DIR")
    if root:
        return LocalSource(root)
    ways = (
        f"pass --data-dir, set LEGALBENCH_DIR, or set legalbench_dir: in {project_file} to a "
        "folder in LegalBench's layout (it holds tasks/<task>/train.tsv)"
    )
    if not project_dir:
        how = f"{ways}; or pass --hf to download nguha/legalbench"
        raise NoLegalBenchDataError(f"no LegalBench data configured: {how}", how)
    return LocalSource(
        project_dir,
        f"data directory {{}} (legalbench_dir: in {_braces(project_file)}) does not exist; "
        + _braces(ways),
    )


def _braces(text: str) -> str:
    """`text` with its braces doubled, to sit in a `str.format` template."""
    return text.replace("{", "{{").replace("}", "}}")
