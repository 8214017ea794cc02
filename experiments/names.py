"""Every MLflow name rule in one place, below tracking so analysis, sweeps and optimize use it
too: tag and param names, metric and prompt names, experiment names, the sweep/study name
check, and the tag values that say what a run shows.

The cleaners differ on purpose and each is kept verbatim: `safe_name` (metric and prompt names,
runs of refused characters become one `_`, stripped), `metric_name` (sensitivity metrics: one `_`
per refused character, space and colon kept; analysis uses it to refuse colliding names before
anything is logged), `safe_model` (figure file names: every
non-alphanumeric character becomes `_`). Unifying two of them would rename stored metrics.
"""

from __future__ import annotations

import json
import posixpath
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from experiments import ids


class _Predicted(Protocol):
    """What `predictions_sha` reads of a trial result (`trials.run.TrialResult`)."""

    @property
    def predictions(self) -> Sequence[Any]: ...


# ---- tag names ---------------------------------------------------------------------------------
KIND = "workbench.kind"
SWEEP_ID = "workbench.sweep_id"
SWEEP_NAME = "workbench.sweep"
TRIAL_ID = "workbench.trial_id"
TRIAL_STATUS = "workbench.status"
VARIANT_ID = "workbench.variant_id"
STUDY = "workbench.study"
LAST_RUN = "workbench.last_run"
GRADED = "workbench.graded"
PREDICTIONS_SHA = "workbench.predictions_sha"  # what a `workbench run` run recorded
GRADES_SHA = "workbench.grades_sha"  # the hand grades on it, when graded
# GRADES_SHA while grades are being written (`Tracker._put_grades`): matches no folder
GRADES_PENDING = "pending:"
PARENT = "mlflow.parentRunId"
STUDY_NAME = "workbench.study_name"  # a study's parent run: the study's name
# a sweep's parent run or a `workbench run` run that used generated text files no one has
# marked `reviewed: true`: their paths, '; '-joined (absent once every file is reviewed)
UNREVIEWED = "workbench.unreviewed"
GENERATION_KIND = "workbench.generation_kind"  # a `workbench variants generate` run's --kind
IMPORT_ID = "workbench.import_id"  # a `workbench import` parent run: `ids.import_id`
IMPORT_NAME = "workbench.import"  # ... and the import's name (its experiment's suffix)
IMPORT_RECORD = "import.json"  # the import's format, options and source files, on its parent
IMPORT_SOURCES = "sources"  # the artifact folder of the source files (one subfolder per file)


# ---- metric, param and prompt names ------------------------------------------------------------
SEARCH_SPACE = "search_space.json"  # an optimisation's axes, levels and left-out notes
# an optimisation's winner bound to its task (`workbench run --variant-file` reads it): on the
# study's parent run, and in reports/optimize/<study>/ (`experiments.optimize.winner`)
BEST_VARIANT_FILE = "best_variant.json"
METRIC_NAMES = "metric_names.json"  # short metric name -> full name, where one was shortened
MAX_KEY = 250  # MLflow's limit for metric (and param, tag) names


def metric_key(name: str) -> str:
    """`safe_name(name)` where MLflow takes it as it is; otherwise (over its 250 characters,
    or a name MLflow reads as a path: `//`, a `.` or `..` part, a leading or trailing `/`)
    `hashed_key(name)`. The same name always gets the same key."""
    key = safe_name(name)
    if len(key) <= MAX_KEY and is_plain_path(key):
        return key
    return hashed_key(name)


def hashed_key(name: str) -> str:
    """A readable prefix of `safe_name(name)` and 16 hex digits of the SHA-256 of the whole
    name, valid for MLflow: two names never share one. Logged with the name it stands for
    (`metric_names.json`)."""
    key = safe_name(name)
    digest = ids.short_sha(name)  # of the name as given
    short = key[: MAX_KEY - len(digest) - 1].rstrip("._-/") + "." + digest
    if is_plain_path(short):
        return short  # as over-long names were always shortened
    # a prefix MLflow would read as a path: no '/' and no leading '.' in it
    prefix = short[: -len(digest) - 1].replace("/", "_").lstrip(".")
    return f"{prefix}.{digest}" if prefix else f"m.{digest}"


def is_plain_path(key: str) -> bool:
    """Whether MLflow takes `key` as a metric, param or tag name: read as a path it names
    itself (no `//`, no `.` or `..` part, no leading or trailing `/`; MLflow's
    `path_not_unique`)."""
    norm = posixpath.normpath(key)
    return bool(key) and norm == key and norm != "." and not norm.startswith(("..", "/"))


def safe_name(text: str) -> str:
    """A name MLflow accepts for metrics and prompts (letters, digits, _ - . /)."""
    return re.sub(r"[^A-Za-z0-9_\-./]+", "_", text).strip("_")


MAX_PARAM = 6000  # MLflow's limit for a param value


def _param(value: Any) -> str:
    """A param or tag value as every MLflow store takes it: a NUL (a name from an imported
    file; PostgreSQL and MySQL refuse it in any text) shown as the four characters `\\x00`;
    over 6000 characters it keeps a prefix and a hash."""
    text = ("none" if value is None else str(value)).replace("\x00", "\\x00")
    if len(text) <= MAX_PARAM:
        return text
    digest = ids.short_sha(text)
    return text[: MAX_PARAM - 40] + f"... [{len(text)} chars, sha256 {digest}]"


def prompt_name(task: str, variant_id: str) -> str:
    """The Prompt Registry name of a task's variant template."""
    return safe_name(f"{task}.{variant_id[:12]}")


def alias_prompt_name(task: str, alias: str) -> str:
    """The Prompt Registry name `register_best` points `alias` (e.g. 'best') from."""
    return safe_name(f"{task}.{alias}")


def comparison_part(row: Mapping[str, Any]) -> str:
    """What names a comparison in its metric names: ``<task>.<model>.<a>_vs_<b>``."""
    return f"{row['task']}.{row['model']}.{row['a']}_vs_{row['b']}"


def comparison_parts(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's `comparison_part`, except where two different comparisons share one
    (variants `a` vs `b_vs_c` and `a_vs_b` vs `c`; model `m` with variant `x.a` and model
    `m.x` with `a`): each of those is named by the JSON list ``[task, model, a, b]``, which
    no other comparison has, so no comparison's number is logged over another's. Its
    metric keys are hashed (`is_spelled_out`) and explained in `metric_names.json`."""
    whose: dict[str, set[tuple[str, ...]]] = {}
    for row in rows:
        whose.setdefault(comparison_part(row), set()).add(_comparison(row))
    return [
        json.dumps(list(_comparison(row)), ensure_ascii=False)
        if len(whose[comparison_part(row)]) > 1
        else comparison_part(row)
        for row in rows
    ]


def _comparison(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row[k]) for k in ("task", "model", "a", "b"))


def is_spelled_out(name: str) -> bool:
    """Whether a metric or tag name holds a comparison spelled out as JSON (`comparison_parts`):
    its key is always `hashed_key`, so the JSON is kept in `metric_names.json`."""
    return '["' in name


def p_value_names(row: Mapping[str, Any], part: str | None = None) -> tuple[str, str]:
    """A comparison's full metric names, p-value and corrected p-value (`metric_key` makes
    them MLflow names); `part` is its name among the others (`comparison_parts`)."""
    key = f"p_value.{part or comparison_part(row)}"
    return key, key.replace("p_value.", "p_value_corrected.", 1)


# a sweep's cost on its parent run (experiments.sweeps.cost): cost.<field>
COST_FIELDS = ("model_calls", "cache_hits", "rows_evaluated", "grid_calls", "share_of_grid",
               "tokens_in", "tokens_out", "cost_usd")  # fmt: skip
# a sequential comparison's numbers on its sweep's parent run
SEQUENTIAL_MEASURES = ("n", "estimate", "ci_low", "ci_high", "n_looks")


def cost_metric_name(field_name: str) -> str:
    """A sweep's cost metric, e.g. ``cost.model_calls``."""
    return f"cost.{field_name}"


def sequential_metric_name(row: Mapping[str, Any], measure: str, part: str | None = None) -> str:
    """A sequential comparison's full metric name (`metric_key` makes it an MLflow name):
    ``sequential.<task>.<model>.<a>_vs_<b>.<measure>``, like the p-values' names (`part`:
    its name among the others, `comparison_parts`)."""
    return f"sequential.{part or comparison_part(row)}.{measure}"


# ---- experiment names --------------------------------------------------------------------------
def experiment_name(prefix: str, suffix: str) -> str:
    """An MLflow experiment's name: '<prefix>/<suffix>' (prefix from mlflow.yaml)."""
    return f"{prefix}/{suffix}"


def run_suffix(task: str) -> str:
    """The experiment suffix of a task's single runs (`workbench run`): 'run/<task>'."""
    return f"run/{task}"


def generate_suffix(task: str) -> str:
    """The experiment suffix of a task's text generations (`workbench variants generate`):
    'generate/<task>'."""
    return f"generate/{task}"


def import_suffix(import_name: str) -> str:
    """The experiment suffix of an import of results made elsewhere: 'import/<name>'."""
    return f"import/{import_name}"


def study_suffix(study_name: str) -> str:
    """The experiment suffix of an optimisation study: 'optimize/<study>'."""
    return f"optimize/{study_name}"


# A sweep's or study's name becomes a folder name and an MLflow experiment: no path tricks
# (`sweeps.spec.load_spec` and `optimize.config.check_study_name` check it here).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_name(text: str) -> bool:
    """Whether `text` may name a sweep or a study: letters, digits, '_', '-' or '.', starting
    with a letter or digit, at most 100 characters, no '..'."""
    return _NAME.fullmatch(text) is not None and ".." not in text


def metric_name(task: str, model: str, measure: str) -> str:
    """``sensitivity.<task>.<model>.<measure>``, with every character MLflow refuses in a
    metric name (anything but letters, digits, _ - . / space :) replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_\-./ :]", "_", f"sensitivity.{task}.{model}.{measure}")


def safe_model(model: str) -> str:
    """A model name as it appears in a figure's file name (every other character `_`)."""
    return "".join(c if c.isalnum() else "_" for c in model)


MAX_FILE_BYTES = 200  # of a file name the workbench makes from names (file systems: 255)


def figure_file(sweep: str, model: str, *, hashed: bool = False) -> str:
    """A sweep figure's file name, ``figure_<sweep>_<safe_model(model)>.png``; over 200 bytes
    (a long served model's name) or `hashed` (two models with one `safe_model`), a prefix
    of it and 16 hex digits of the SHA-256 of the model's name, so every model gets a file
    name the file system takes and its own."""
    stem = f"figure_{sweep}_{safe_model(model)}"
    if not hashed and len(stem.encode("utf-8")) <= MAX_FILE_BYTES:
        return f"{stem}.png"
    digest = ids.short_sha(model)
    head = stem.encode("utf-8")[: MAX_FILE_BYTES - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}_{digest}.png"


def figure_files(sweep: str, models: Sequence[str]) -> dict[str, str]:
    """Each model's figure file name (`figure_file`); a model whose name would be another's
    on a case-insensitive file system or artifact store (`a/b` and `a_b`; `M` and `m` on
    macOS or Windows, where one figure silently replaced the other) gets the hashed one."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for model in models:
        name = figure_file(sweep, model)
        if name.casefold() in taken:
            name = figure_file(sweep, model, hashed=True)
        taken.add(name.casefold())
        out[model] = name
    return out


MAX_RUN_NAME = 250  # MLflow's run name column (VARCHAR(250) on server databases)


def run_name(text: str) -> str:
    """A run's display name as MLflow keeps it on any store: one line (control characters,
    newlines included, shown as spaces) of at most 250 characters (a longer one keeps a
    prefix and 16 hex digits of the SHA-256 of the whole; its params hold the names)."""
    line = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text)
    if len(line) <= MAX_RUN_NAME:
        return line
    digest = ids.short_sha(text)
    return line[: MAX_RUN_NAME - len(digest) - 1] + "~" + digest


# ---- tag values: what a `workbench run` run shows ----------------------------------------------
def predictions_sha(result: _Predicted) -> str:
    """What a run of `result` shows: each row's index, generation and parsed answer."""
    return ids.predictions_sha(result.predictions)
