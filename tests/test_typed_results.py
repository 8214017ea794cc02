"""The public entry points return typed records, not dicts (issue 32, part 1).

A caller reads a result's fields (checked by mypy), and the JSON form is the record's one
`to_dict()`. Checked with `typing.get_type_hints` on the return annotation:

- each entry point in `ENTRY_POINTS` returns a record class (never a bare dict, Mapping or
  dict[str, Any]);
- no function a package's ``__init__`` exports returns a dict-like value, except those in
  `DICT_RETURNS`, each with why (a serialiser, or a record still to come); an entry there
  that no longer returns a dict is an error too, so the list only shrinks.
"""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import experiments
import promptlib

ENTRY_POINTS = (
    "experiments.trials.run:run_trial",
    "experiments.sweeps.driver:run_sweep",
    "experiments.imports.run:import_results",
    "experiments.imports.run:compare_import",
    "experiments.analysis.sensitivity.report:sensitivity_report",
    "experiments.optimize.optimize:optimize",
    "experiments.generate.run:generate",
    "experiments.calibrated.report:calibrated_report",
    "experiments.calibrated.next:next_items",
)

# exported functions that return a dict on purpose (a document's serialiser, a name -> value
# map), or whose record is still to come; "module:function" -> why
DICT_RETURNS = {
    "experiments.analysis:variance_shares_artifact": "serialiser: variance_shares.json",
    "experiments.analysis.sensitivity:variance_shares_artifact": "serialiser: the same",
    "experiments.analysis.sensitivity:sensitivity_metrics": "MLflow metric name -> value",
    "experiments.analysis.sensitivity:variance_shares": "model's section of a report's dict",
    "experiments.tracking:import_grades": "the trial's summary.json, as stored",
    "experiments.reports:report_files": "serialiser: a report folder's file name -> bytes",
}

# names only imported under `if TYPE_CHECKING:` where an annotation uses them
_TYPING_ONLY = (
    "experiments.tracking:Tracker",
    "experiments.trials.run:TrialResult",
    "experiments.analysis.records:Comparison",
    "experiments.analysis.records:AcrossTaskTest",
    "experiments.llm.types:LM",
    "experiments.llm.types:BackendClass",
    "experiments.trials.predictions:UndocumentedLabel",
)


def _load(ref: str) -> Any:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _return_type(fn: Callable[..., Any]) -> Any:
    local = {ref.split(":")[1]: _load(ref) for ref in _TYPING_ONLY}
    try:
        return typing.get_type_hints(fn, localns=local)["return"]
    except NameError as e:  # a new name under TYPE_CHECKING: add it to _TYPING_ONLY
        raise AssertionError(
            f"{fn.__module__}.{fn.__qualname__}: {e}; add it to _TYPING_ONLY"
        ) from e


def _dict_like(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _exported() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every function in a package ``__init__``'s ``__all__``, as "package:name"."""
    for root in (experiments, promptlib):
        names = pkgutil.walk_packages(root.__path__, root.__name__ + ".")
        for info in [root.__name__, *(m.name for m in names if m.ispkg)]:
            mod = importlib.import_module(info)
            for name in getattr(mod, "__all__", ()):
                fn = getattr(mod, name, None)
                if inspect.isfunction(fn):
                    yield f"{info}:{name}", fn


@pytest.mark.parametrize("ref", ENTRY_POINTS)
def test_an_entry_point_returns_a_typed_record(ref: str) -> None:
    tp = _return_type(_load(ref))
    assert not _dict_like(tp), f"{ref} returns {tp}: return a frozen record with to_dict()"
    assert inspect.isclass(tp), f"{ref} returns {tp}, not a record class"


def test_exported_functions_return_no_dict_unless_listed() -> None:
    found = {ref: _return_type(fn) for ref, fn in _exported()}
    untyped = sorted(r for r, tp in found.items() if _dict_like(tp) and r not in DICT_RETURNS)
    assert not untyped, (
        f"{untyped} return a dict: return a typed frozen record (with one to_dict()) instead, "
        "or, for a serialiser, list it in DICT_RETURNS with why"
    )
    stale = sorted(r for r in DICT_RETURNS if r not in found or not _dict_like(found[r]))
    assert not stale, f"{stale} no longer return a dict (or are not exported): drop them"
