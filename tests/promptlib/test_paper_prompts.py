"""Acceptance: the catalog lists every task, and variants reproduce LegalBench's prompt files.

The reference for each comparison is the raw prompt file with the row's values pasted into
its {{placeholders}} by plain string substitution, independent of the parser. Equality
therefore proves the engine took the file apart and put it back together faithfully.
"""

from __future__ import annotations

import re

import pytest

from promptlib import Catalog, compile_prompt, evaluation_rows, parse_spec
from promptlib.templates import placeholders

pytestmark = pytest.mark.data

# variant spec -> the LegalBench file it must reproduce
FILE_FOR_SPEC = {
    "base": "base_prompt.txt",
    "instruction=reference,demos=none": "rule_reference_prompt.txt",
    "instruction=description,demos=none": "rule_description_prompt.txt",
    "register=plain,demos=none": "zero_shot_simple.txt",
    "register=technical,demos=none": "zero_shot_jargon.txt",
    **{f"demos=icl:{n}": f"icl_{n}.txt" for n in range(5)},
}


def paste(raw: str, row: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*([^{}]+?)\s*\}\}", lambda m: row[m.group(1)], raw)


def test_all_162_tasks_are_listed(catalog: Catalog) -> None:
    specs = catalog.specs()
    assert len(specs) == 162
    assert len({s.name for s in specs}) == 162
    by_name = {s.name: s for s in specs}
    assert by_name["hearsay"].labels is not None
    assert set(by_name["hearsay"].labels) == {"Yes", "No"}
    assert by_name["hearsay"].metric == "balanced_accuracy"
    assert by_name["sara_numeric"].metric == "sara_numeric_within_10pct"
    assert by_name["rule_qa"].metric == "manual"
    assert by_name["ssla_plaintiff"].labels is None  # extraction: no label set
    assert by_name["scalr"].n_train is None  # no train.tsv: recorded as unknown


def test_base_variant_renders_every_test_row(catalog: Catalog) -> None:
    with_test = [n for n in catalog.names() if catalog.task(n).has_split("test")]
    assert len(with_test) == 54
    for name in with_test:
        task = catalog.task(name)
        compiled = compile_prompt(parse_spec("base"), task, "test")
        rows, excluded = evaluation_rows(compiled.variant, task, "test")
        assert not excluded, f"{name}: test rows equal base demos: {excluded}"
        assert len(rows) == task.spec.n_test
        for row in rows:
            prompt = compiled.render(row)
            assert "{{" not in prompt, f"{name} row {row['index']}"
            assert prompt.rstrip().endswith(compiled.query.rsplit("\n", 1)[-1].rstrip())
        labels = task.spec.labels
        if task.spec.task_type in ("binary", "multi-class"):
            assert labels is not None
            missing = {r["answer"] for r in task.rows("test")} - set(labels)
            assert not missing, f"{name}: answers {missing} not in label set"


def _cases(catalog: Catalog) -> list[tuple[str, str, str]]:
    cases = []
    for name in catalog.names():
        files = catalog.task(name).spec.prompt_files
        for spec, filename in FILE_FOR_SPEC.items():
            if filename in files:
                cases.append((name, spec, filename))
    return cases


def test_variants_reproduce_legalbench_prompt_files(catalog: Catalog) -> None:
    cases = _cases(catalog)
    # Every non-empty study file on disk is covered (telemarketing's reference file is empty).
    on_disk = [
        p
        for f in set(FILE_FOR_SPEC.values())
        for p in catalog.source.tasks_dir.glob(f"*/{f}")
        if p.stat().st_size > 0
    ]
    assert len(cases) == len(on_disk) > 200
    checked = 0
    for name, spec, filename in cases:
        task = catalog.task(name)
        split = next((s for s in ("test", "train") if task.has_split(s)), None)
        raw = task.files.read_prompt(filename)
        if spec.endswith(",demos=none") and task.prompt(filename).demos:
            # telemarketing_sales_rule's description file carries the base prompt's demos.
            assert task.prompt(filename).demos == task.prompt("base_prompt.txt").demos
            spec = spec.removesuffix(",demos=none")
        compiled = compile_prompt(parse_spec(spec), task, split)
        rows = evaluation_rows(compiled.variant, task, split)[0] if split else []
        if not rows:  # no split, or every train row is a base demo and there is no test split
            rows = [{c: f"synthetic value of {c} for {name}" for c in placeholders(raw)}]
        for row in rows:
            expected = paste(raw, row).rstrip()
            got = compiled.render(row).rstrip()
            assert got == expected, f"{name} {spec} row {row['index']} differs from {filename}"
            checked += 1
    assert checked > 5000


def test_icl_demos_that_are_test_rows_are_left_out(catalog: Catalog) -> None:
    """icl_N files draw demonstrations from train+test; those test rows must not be evaluated."""
    total_excluded = 0
    for name in ("cuad_audit_rights", "cuad_cap_on_liability", "overruling"):
        task = catalog.task(name)
        for n in range(5):
            compiled = compile_prompt(parse_spec(f"demos=icl:{n}"), task, "test")
            rows, excluded = evaluation_rows(compiled.variant, task, "test")
            assert len(rows) + len(excluded) == task.spec.n_test
            demo_texts = {" ".join(d.values["text"].split()) for d in compiled.demos}
            assert not any(" ".join(r["text"].split()) in demo_texts for r in rows)
            total_excluded += len(excluded)
    print("icl demo rows excluded from test:", total_excluded)
