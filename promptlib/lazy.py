"""A package's public names imported on first use (PEP 562), for the `__init__` of a package
whose modules are heavy: importing any one module of a package runs its `__init__` first, so an
`__init__` that imported everything made `workbench --help` pay for numpy, the task catalog and
the model gateway (issue 35). `from package import X` and `package.X` work as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of the package whose globals are `namespace` and whose
    public names live in the modules `homes` maps them to. A name is imported from its home
    when first read, then kept as a global of the package, so the next read costs nothing."""
    package = namespace["__name__"]

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
