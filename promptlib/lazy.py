"""A package's public names imported on first use (PEP 562), for the `__init__` of a package
whose modules are heavy: importing any one module of a package runs its `__init__` first, so an
`__init__` that imported everything made `workbench --help` pay for numpy, the task catalog and
the model gateway (issue 35). `from package import X` and `package.X` work as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


class _Exports(ModuleType):
    """A package whose exported names win over its submodules of the same spelling.

    The import system binds a loaded submodule on its package (`promptlib.render`, the
    module), which hid the export of that name (`promptlib.render`, the function) once an
    `__init__` no longer imported it last; the export stays what the package's name means,
    as it was when `__init__` imported everything. The submodule is in `sys.modules` still.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        homes = self.__dict__.get("_HOMES", {})
        if isinstance(value, ModuleType) and homes.get(name) == value.__name__:
            return  # the submodule `name` whose export `name` the package means
        super().__setattr__(name, value)


def lazy_exports(
    namespace: dict[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of the package whose globals are `namespace` and whose
    public names live in the modules `homes` maps them to. A name is imported from its home
    when first read, then kept as a global of the package, so the next read costs nothing."""
    package = namespace["__name__"]
    sys.modules[package].__class__ = _Exports

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # start-up time: the name's module is imported when the name is first used
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
