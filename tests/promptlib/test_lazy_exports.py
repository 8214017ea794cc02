"""Package `__init__`s import their public names on first use (`promptlib.lazy`, issue 35):
every name listed still resolves, to the object its home module defines, and importing the
package alone imports none of those homes."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.conftest import REPO

PACKAGES = ("promptlib", "experiments", "experiments.llm", "experiments.trials")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_is_its_homes_object(package: str) -> None:
    pkg = importlib.import_module(package)
    homes = pkg._HOMES
    assert sorted(pkg.__all__) == sorted(homes)
    for name, home in homes.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(home), name), name
        assert name in dir(pkg)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = pkg.not_a_name


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_the_package_imports_no_home(package: str) -> None:
    code = (
        f"import sys, {package} as p\n"
        "loaded = sorted(h for h in set(p._HOMES.values()) if h in sys.modules)\n"
        "print(','.join(loaded))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert r.stdout.strip() == "", r.stdout
