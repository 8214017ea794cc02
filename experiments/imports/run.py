"""An import from files to verdict: read every file, check and pair the arms, compute the
statistics, and only then track it (so a bad input writes nothing); and the same verdict
again from a tracked import (`workbench compare`)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments import ids
from experiments.imports.arms import NO_TASK, Arms, to_records
from experiments.imports.formats import reader
from experiments.imports.identity import TaskTexts
from experiments.imports.records import (
    WHAT,
    ImportedTrial,
    ImportInputError,
    ReadOptions,
    check_source,
)
from experiments.imports.report import (
    ReportWritten,
    TaskRows,
    build_import_report,
    write_import_report,
)
from experiments.imports.result import ImportResult
from experiments.imports.secret_scan import Unchecked, check_bytes
from experiments.imports.verdict import N_RESAMPLES, verdict
from experiments.names import check_name
from experiments.reports.html.render import render_html
from experiments.tracking import Tracker
from experiments.tracking.imported import (
    download_dir,
    log_import,
    log_import_report,
    read_import,
)
from promptlib import inputs
from promptlib.errors import WorkbenchError


@dataclass(frozen=True)
class Tests:
    """How an import is compared: the sweep's own choices, same names and defaults."""

    rescore: bool = False
    comparisons: str = "all_pairs"  # or "best_vs_worst" (the range test over k variants)
    correction: str = "holm"  # or "bh"
    across: str = "t"  # or "wilcoxon", "permutation"
    n_resamples: int = N_RESAMPLES
    between: str = "variants"  # or "models": the arms are the models, for each variant


def _arms(
    trials: Sequence[ImportedTrial],
    tests: Tests,
    known_tasks: Collection[str],
    texts: TaskTexts | None = None,
) -> tuple[list[ImportedTrial], Arms]:
    """The trials as compared (with `between="models"`, each trial's model is its arm and its
    variant the group, so the paired tests compare models on each prompt) and their arms."""
    if tests.between == "models":
        trials = [dataclasses.replace(t, variant=t.model, model=t.variant) for t in trials]
    arms = to_records(trials, rescore=tests.rescore, known_tasks=known_tasks, texts=texts)
    return list(trials), arms


# `progress(done, total, what)`: the CLI's bar on stderr (`output.progress_bar`)
Progress = Callable[[int, int, str], None]


def read_all(
    fmt: str, paths: Sequence[Path], opts: ReadOptions, progress: Progress | None = None
) -> list[ImportedTrial]:
    """Every file's trials, in the order given; a file with none is an error."""
    read = reader(fmt, ", ".join(map(str, paths)))
    if not paths:
        raise ImportInputError(f"workbench import {fmt}: no files given; name one or more")
    for path in paths:  # all before any is read: a FIFO would wait forever, a typo read late
        check_source(path)
    trials: list[ImportedTrial] = []
    for n, path in enumerate(paths):
        if progress is not None:
            progress(n, len(paths), f"reading {path.name}")
        found = read(path, opts)
        if not found:
            raise ImportInputError(f"{path}: no trials in it; is it a {fmt} results file?")
        trials += found
    return trials


def refuse_secrets(paths: Sequence[Path]) -> None:
    """Source files are stored in MLflow byte for byte (compare reads them back), so a file
    holding an API key (say in lm-eval's model_args, or in a member of an inspect_ai .eval
    zip, or JSON-escaped) is refused, never copied there; so is one that cannot be read
    through to check it (`secret_scan`)."""
    for path in paths:
        try:  # read as the readers read it: a regular file of bounded size
            found = check_bytes(
                inputs.read_bytes(path, WHAT, ImportInputError, inputs.MAX_DATA_BYTES)
            )
        except Unchecked as e:
            raise ImportInputError(
                f"{path}: cannot be checked for API keys: {e}; its source files are stored in "
                "MLflow as they are, so give a file that opens whole (or import with --no-track)"
            ) from None
        except OSError as e:
            raise ImportInputError(
                f"{path}: cannot read it ({e.strerror or e}); check the path and its permissions"
            ) from None
        if found is not None:
            raise ImportInputError(
                f"{path}: holds {found.what} ({found.where}); its source files are stored in "
                "MLflow as they are, so remove the key from the file (or import with --no-track)"
            )


def _sha(path: Path) -> str:
    return hashlib.sha256(
        inputs.read_bytes(path, WHAT, ImportInputError, inputs.MAX_DATA_BYTES)
    ).hexdigest()


def companions(paths: Sequence[Path], trials: Sequence[ImportedTrial]) -> list[Path]:
    """The files the readers read besides those given, each once, in the order met."""
    seen = {p.resolve() for p in paths}
    out = []
    for c in (c for t in trials for c in t.companions):
        if c.resolve() not in seen:
            seen.add(c.resolve())
            out.append(c)
    return out


def import_record(
    fmt: str,
    paths: Sequence[Path],
    opts: ReadOptions,
    name: str | None,
    also: Sequence[Path] = (),
) -> dict[str, Any]:
    """What identifies an import: format, files (path, sha256, and whether given or read
    beside one: `also`) and options; its name (given, else '<format>-<id prefix>')."""
    files = [{"path": str(p), "sha256": _sha(p), "role": "given"} for p in paths]
    files += [{"path": str(p), "sha256": _sha(p), "role": "companion"} for p in also]
    options = {k: v for k, v in asdict(opts).items() if v is not None}
    key = ids.import_id(fmt, [f["sha256"] for f in files], options)
    name = name or f"{fmt}-{key[:12]}"
    if not check_name(name):
        raise ImportInputError(
            f"--name {name!r}: use letters, digits, '_', '-' or '.' (at most 100 characters)"
        )
    return {"name": name, "import_id": key, "format": fmt, "options": options, "files": files}


def import_results(
    fmt: str,
    paths: Sequence[Path],
    opts: ReadOptions,
    *,
    tests: Tests,
    known_tasks: Collection[str],
    name: str | None = None,
    track: bool = True,
    texts: TaskTexts | None = None,
    progress: Progress | None = None,
    reports_dir: Path | None = None,
    task_rows: TaskRows | None = None,
) -> ImportResult:
    """`workbench import`: the import's verdict, tracked unless `track` is False.
    `texts` (`identity.catalog_texts`) gives the LegalBench tasks' test rows, whose repeated
    texts are one unit of the tests where the source gives no prompt identity.

    The sample-level HTML report (`imports.report`) is written to
    reports_dir/<name>/<import id>/index.html (with `reports_dir`) and logged on the import's
    run (when tracked); a report that cannot be written leaves the verdict and its tracking as
    they are and says why in ``report.note``."""
    trials = read_all(fmt, paths, opts, progress)
    also = companions(paths, trials)
    if track:
        refuse_secrets([*paths, *also])
    record = import_record(fmt, paths, opts, name, also)
    record["tools"] = sorted({f"{t.tool} {t.tool_version or ''}".strip() for t in trials})
    compared, arms = _arms(trials, tests, known_tasks, texts)
    doc = _verdict(record["name"], arms, tests, progress)
    result = ImportResult.of(record, doc)
    html = None
    if track or reports_dir is not None:
        report = build_import_report(record, compared, arms, doc, task_rows=task_rows)
        html = render_html(report.to_dict())
    if not track:
        written = _write_report(reports_dir, record, html, None)
        return dataclasses.replace(result, report=written.to_dict() if written else None)
    tracker = Tracker()
    tracked = log_import(
        tracker, record, [*paths, *also], _trial_logs(compared, arms, tests.between), doc
    ) | {"tracking_uri": tracker.config.tracking_uri}
    written = _write_report(reports_dir, record, html, (tracker, str(tracked["run_id"])))
    return dataclasses.replace(
        result, tracking=tracked, report=written.to_dict() if written else None
    )


def _write_report(
    reports_dir: Path | None,
    record: dict[str, Any],
    html: str | None,
    run: tuple[Tracker, str] | None,
) -> ReportWritten | None:
    """Log the report on the import's run, then write its folder; either failing is said in
    the note and leaves the other (and the tracked import) as it is: the folder is written
    whole or not at all (`reports.folders.write_run`)."""
    if html is None:
        return None
    notes, logged, folder = [], False, None
    if run is not None:
        tracker, run_id = run
        try:
            log_import_report(tracker, run_id, html)
            logged = True
        except WorkbenchError as e:
            notes.append(f"the report is not on the import's run: {e}")
    if reports_dir is not None:
        target = reports_dir / str(record["name"]) / str(record["import_id"])
        try:
            folder = write_import_report(
                reports_dir, str(record["name"]), str(record["import_id"]), html
            )
        except OSError as e:
            where = "; it is on the import's run as index.html" if logged else ""
            notes.append(
                f"the report was not written to {target}: {e.strerror or e}{where}; make the "
                "folder writable (or set reports_dir) and run the import again"
            )
    return ReportWritten(folder, logged, "; ".join(notes) or None)


def compare_import(
    name: str,
    *,
    tests: Tests,
    known_tasks: Collection[str],
    texts: TaskTexts | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """`workbench compare NAME`: a tracked import's source files read again, with its format
    and options, and compared with `tests` (e.g. --rescore, the range test)."""
    tracker = Tracker()
    with download_dir() as tmp:
        record, files = read_import(tracker, name, Path(tmp))
        opts = ReadOptions(**record["options"])
        trials = read_all(record["format"], files, opts, progress)
        _, arms = _arms(trials, tests, known_tasks, texts)
    doc = _verdict(name, arms, tests, progress)
    tracked = {"run_id": record["run_id"], "read_back": True,
               "tracking_uri": tracker.config.tracking_uri}  # fmt: skip
    return dataclasses.replace(ImportResult.of({**record, "name": name}, doc), tracking=tracked)


def _verdict(name: str, arms: Arms, tests: Tests, progress: Progress | None) -> dict[str, Any]:
    return {"between": tests.between} | verdict(
        name, arms, comparisons=tests.comparisons, correction=tests.correction,
        across=tests.across, n_resamples=tests.n_resamples, progress=progress,
    )  # fmt: skip


def _trial_logs(trials: Sequence[ImportedTrial], arms: Arms, between: str) -> list[dict[str, Any]]:
    """What each trial's child run shows: params (its own model and variant, whichever way
    it was compared), metrics (on the compared rows) and every row as imported."""
    scored = {(r.task, r.model, r.variant): r for r in arms.records}
    out = []
    for t in trials:
        rec = scored[(t.task or NO_TASK, t.model, t.variant)]
        model, variant = (t.variant, t.model) if between == "models" else (t.model, t.variant)
        params = {"task": rec.task, "model": model, "variant": variant, "tool": t.tool,
                  "tool_version": t.tool_version, "source_file": str(t.source_file),
                  "source_metric": t.metric, "metric": rec.metric}  # fmt: skip
        metrics = {"score": rec.score, "n": rec.n, "n_imported": len(t.rows),
                   "n_left_out": len(t.rows) - rec.n}  # fmt: skip
        rows = [{"row": r.row_id, "epoch": r.epoch, "status": r.status, "correct": r.correct,
                 "prediction": r.prediction, "answer": r.answer, **dict(r.extra)}
                for r in t.rows]  # fmt: skip
        out.append({"params": params, "metrics": metrics, "status": rec.status, "rows": rows})
    return out
