"""Rendering speed of format variants (issue 21): 1,000 drawn points x 100 rows in <= 1 s.

python benchmarks/format_render.py [TASK] [N_FORMATS] [N_ROWS]

Compiles N_FORMATS (1000) grammar points drawn with seed 0 on TASK (hearsay), renders N_ROWS
(100) rows through each, and prints the compile and render times. The same renders through
the old per-row path (prefix rebuilt, demos' content keys and the template's placeholders
recomputed, `fill` by regex; the code `CompiledPrompt.render` ran before it precomputed) run
on a sample in the same process, so the per-row ratio compares like with like. Every sampled
row's old and new text are checked equal.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping

from promptlib import Catalog, CompiledPrompt, compile_prompt, default_source, parse_spec
from promptlib.formats import draw_formats
from promptlib.leakage import check_heldout, check_no_leak, evaluation_rows
from promptlib.templates import fill, placeholders


def old_render(c: CompiledPrompt, example: Mapping[str, str]) -> str:
    """`CompiledPrompt.render` as it was before issue 21 (the same checks, nothing cached)."""
    check_no_leak(c.demos, dict(example), c.task, placeholders(c.query))
    check_heldout(c.task, example)
    for demo in c.demos:
        check_heldout(c.task, demo.values)
    out = ""
    if c.instruction:
        before, after = c.instruction_wrap
        out += before + c.instruction + after + c.instruction_sep
    if c.demos:
        out += c.demo_sep.join(c.demo_block(d) for d in c.demos) + c.demo_sep
    return out + fill(c._query(), example, where=c.source)


def main(task_name: str = "hearsay", n_formats: int = 1000, n_rows: int = 100) -> None:
    task = Catalog(default_source()).task(task_name)
    split = "test" if task.has_split("test") else "train"
    pool = evaluation_rows(parse_spec("base"), task, split)[0]
    rows = [pool[i % len(pool)] for i in range(n_rows)]
    points = draw_formats(n_formats, 0)

    t0 = time.perf_counter()
    compiled = [compile_prompt(parse_spec(f"format={p}"), task, split) for p in points]
    t_compile = time.perf_counter() - t0

    t0 = time.perf_counter()
    total = 0
    for c in compiled:
        for row in rows:
            total += len(c.render(row))
    t_new = time.perf_counter() - t0
    renders = n_formats * n_rows

    sample = compiled[: max(1, n_formats // 10)]  # the old path on a tenth: it is slow
    t0 = time.perf_counter()
    old_texts = [old_render(c, row) for c in sample for row in rows]
    t_old = time.perf_counter() - t0
    new_texts = [c.render(row) for c in sample for row in rows]
    assert old_texts == new_texts, "the fast path renders other text than the old one"

    per_new = t_new / renders * 1e6
    per_old = t_old / len(old_texts) * 1e6
    print(f"task {task_name} ({split}), {n_formats} format points x {n_rows} rows")
    print(f"compile {n_formats} points:      {t_compile:.3f} s")
    print(f"render {renders} prompts (new):  {t_new:.3f} s  ({per_new:.2f} us/row)")
    print(f"old path, {len(old_texts)} renders:   {t_old:.3f} s  ({per_old:.2f} us/row)")
    print(
        f"old/new per row: {per_old / per_new:.1f}x; "
        f"projected old total {per_old * renders / 1e6:.2f} s"
    )
    print(f"acceptance (render <= 1 s): {'PASS' if t_new <= 1.0 else 'FAIL'}  [{total} chars]")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if args else "hearsay",
        int(args[1]) if len(args) > 1 else 1000,
        int(args[2]) if len(args) > 2 else 100,
    )
