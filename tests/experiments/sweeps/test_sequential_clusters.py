"""Sequential sweeps on LegalBench's real repeated texts (issue 29): a cluster's rows are one
unit through the real path, the null holds for a pair and for best-of-5 in both designs (the
reduced `benchmarks/sequential_null_real.py`), and the spec takes `method: group`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from experiments.sweeps.spec import SpecError, load_spec
from experiments.testing.sequential_sim import prepare, simulate
from promptlib import Catalog

PAIR = """name: clus_pair
tasks: [cuad_audit_rights]
fixed: {{demos: none}}
axes: {{format: [base, claude]}}
comparisons: [[format=base, format=claude]]
design: sequential
sequential: {{batch: 20, max_rows: 300, method: {method}}}
"""
BEST_OF_5 = """name: clus_bok
tasks: [cuad_audit_rights]
fixed: {{demos: none}}
axes: {{format: {{draw: 4, seed: 0, with: [base]}}}}
comparisons: best_vs_worst
design: sequential
sequential: {{batch: 20, max_rows: 200, method: {method}}}
"""


@pytest.mark.data
def test_repeated_texts_are_evaluated_together_and_counted_once(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec = tmp_path / "pair.yaml"
    spec.write_text(PAIR.format(method="group"))
    prep = prepare(spec, catalog)
    rows = prep.resolved[0].rows
    texts = [r["text"] for r in rows]
    # every text's copies are adjacent in the design's order (one unit)
    runs = [t for j, t in enumerate(texts) if j == 0 or texts[j - 1] != t]
    assert len(runs) == len(set(texts)) < len(texts)
    row = simulate(prep, catalog, {}, 0)
    assert row["clustered_by"] == "prompt"
    n = row["n"]
    assert row["n_clusters"] == len(set(texts[:n])) < n
    assert row["method"] == "group" and "t^2.5" in row["sequence"]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("method", ["group", "anytime"])
@pytest.mark.parametrize(("template", "decided", "sims"), [(PAIR, {"A", "B"}, 60),
                                                           (BEST_OF_5, {"best"}, 40)],
                         ids=["pair", "best-of-5"])  # fmt: skip
def test_null_size_through_the_real_path_on_repeated_texts(
    catalog: Catalog, tmp_path: Path, method: str, template: str, decided: set[str], sims: int
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(template.format(method=method))
    prep = prepare(spec, catalog)
    rows = [simulate(prep, catalog, {}, 500 + s) for s in range(sims)]
    rate = sum(r["decision"] in decided for r in rows) / sims
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims), rate
    assert all(r["clustered_by"] == "prompt" for r in rows)


def test_the_spec_takes_a_method_and_names_a_bad_one(tmp_path: Path) -> None:
    good = tmp_path / "g.yaml"
    good.write_text(PAIR.format(method="group"))
    spec = load_spec(good)
    assert spec.sequential is not None and spec.sequential.method == "group"
    assert spec.sequential.to_dict()["method"] == "group"
    default = tmp_path / "d.yaml"
    default.write_text(PAIR.format(method="anytime"))
    design = load_spec(default).sequential
    assert design is not None and "method" not in design.to_dict()  # earlier ids stay
    bad = tmp_path / "b.yaml"
    bad.write_text(PAIR.format(method="pocock"))
    with pytest.raises(SpecError, match=r"sequential\.method must be anytime .* or group"):
        load_spec(bad)
