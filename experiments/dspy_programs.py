"""DSPy programs for LegalBench classification tasks, with a LegalBench-style adapter.

Tiny local models cannot follow DSPy's default chat/JSON adapters (SmolLM2 answers them with
code), so `LegalBenchAdapter` renders exactly what a LegalBench prompt looks like —
instruction, `Q:/A:`-style demonstrations in the task's own template, then the query — and
parses the first line of the completion into the label set. Rendering goes through the
workbench's own `CompiledPrompt`, so the held-out guard and the leakage checks apply to DSPy
too.

`compile_dspy` compiles with LabeledFewShot (seeded), BootstrapFewShotWithRandomSearch or
MIPROv2 on dev rows only, and exports the result as a `PromptVariant` (its instruction and
its chosen demonstrations as explicit rows), so the same runner evaluates it on held-out.
"""

from __future__ import annotations

import contextlib
import random
import sys
from typing import Any, Literal

from experiments.metrics import normalize, parse_label
from experiments.models import _register_local_provider
from promptlib.errors import WorkbenchError
from promptlib.leakage import content_key
from promptlib.render import CompiledPrompt
from promptlib.tasks import Task
from promptlib.templates import Demo, placeholders
from promptlib.variants import BASE_FILE, DemoRef, PromptVariant


def _dspy() -> Any:
    import dspy

    return dspy


def make_signature(task: Task) -> Any:
    """Inputs: the base template's columns; output: `answer`, restricted to the labels."""
    dspy = _dspy()
    base = task.prompt(BASE_FILE)
    labels = task.spec.labels
    if not labels:
        raise WorkbenchError(f"DSPy programs need a label set; {task.name!r} has none")
    fields: dict[str, Any] = {col: (str, dspy.InputField()) for col in placeholders(base.query)}
    fields["answer"] = (Literal[tuple(labels)], dspy.OutputField())
    instructions = base.instruction or f"Answer with one of: {', '.join(labels)}."
    return dspy.make_signature(fields, instructions, signature_name="LegalBenchTask")


class LegalBenchAdapter:
    """Formats like a LegalBench prompt; parses the first line into a label."""

    def __init__(self, task: Task) -> None:
        dspy = _dspy()
        self.task = task
        self.base = task.prompt(BASE_FILE)
        self.labels = tuple(task.spec.labels or ())
        adapter = self
        base: Any = dspy.Adapter

        class _Adapter(base):  # type: ignore[misc]
            def format(
                self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]
            ) -> list[dict[str, Any]]:
                return [{"role": "user", "content": adapter.render(signature, demos, inputs)}]

            def parse(self, signature: Any, completion: str) -> dict[str, Any]:
                return {"answer": adapter.parse(completion)}

            def __call__(
                self,
                lm: Any,
                lm_kwargs: dict[str, Any],
                signature: Any,
                demos: list[dict[str, Any]],
                inputs: dict[str, Any],
            ) -> list[dict[str, Any]]:
                messages = self.format(signature, demos, inputs)
                outputs = lm(messages=messages, **lm_kwargs)
                values = []
                for out in outputs:
                    text = out.get("text") if isinstance(out, dict) else out
                    values.append(self.parse(signature, text or ""))
                return values

        self.dspy_adapter = _Adapter()

    def compiled(self, instructions: str, demos: list[dict[str, Any]]) -> CompiledPrompt:
        cols = placeholders(self.base.query)
        return CompiledPrompt(
            task=self.task.name,
            variant=PromptVariant(),
            instruction=instructions.strip(),
            instruction_sep=self.base.instruction_sep,
            demos=tuple(
                Demo.of({c: str(d.get(c, "")) for c in cols}, str(d.get("answer", "")))
                for d in demos
            ),
            demo_sep=self.base.demo_sep,
            query=self.base.query,
            answer_join=self.base.answer_join,
            format="base",
            labels=self.labels,
            source=f"{self.task.name}/dspy",
        )

    def render(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> str:
        return self.compiled(signature.instructions, demos).render(
            {k: str(v) for k, v in inputs.items()}
        )

    def parse(self, completion: str) -> str:
        first = completion.strip().split("\n", 1)[0] if completion else ""
        return parse_label(first, self.labels) or first


def _examples(task: Task, split: str, indices: list[str]) -> list[Any]:
    dspy = _dspy()
    cols = placeholders(task.prompt(BASE_FILE).query)
    rows = {r["index"]: r for r in task.rows(split)}
    out = []
    for i in indices:
        r = rows[i]
        ex = dspy.Example(**{c: r[c] for c in cols}, answer=r["answer"], row_index=i)
        out.append(ex.with_inputs(*cols))
    return out


def _metric(example: Any, prediction: Any, trace: Any = None) -> bool:
    """Per-example exact match after LegalBench's normalisation."""
    return bool(normalize(getattr(prediction, "answer", "")) == normalize(example.answer))


def compile_dspy(
    cfg: Any, task: Task, dev: list[str], lm_unused: Any, seed: int = 0
) -> tuple[PromptVariant, float | None, list[str]]:
    """Compile a DSPy program on dev and export it as a PromptVariant."""
    dspy = _dspy()
    if cfg.model.startswith("local/"):
        _register_local_provider()
    labels = task.spec.labels or ()
    longest = max((len(x) for x in labels), default=8)
    lm = dspy.LM(
        cfg.model,
        engine="litellm",
        model_type="chat",
        temperature=0.0,
        max_tokens=max(8, longest // 2 + 8),
        stop=["\n"] if not cfg.model.startswith("local/") else None,
        cache=False,
        num_retries=2,
        **({"raw_prompt": True} if cfg.model.startswith("local/") else {}),
    )
    adapter = LegalBenchAdapter(task)
    signature = make_signature(task)
    program = dspy.Predict(signature)
    examples = _examples(task, cfg.split, dev)
    rng = random.Random(seed)
    train = examples[:]
    rng.shuffle(train)
    notes: list[str] = []
    # DSPy prints progress on stdout; keep stdout for the workbench's own (JSON) output.
    with contextlib.redirect_stdout(sys.stderr), dspy.context(lm=lm, adapter=adapter.dspy_adapter):
        if cfg.method == "dspy-labeled":
            k = max(2, min(8, len(labels) * 2))
            compiled = dspy.LabeledFewShot(k=k).compile(program, trainset=train)
            notes.append(f"dspy-labeled: k={k} labelled demos sampled from dev (seed {seed})")
        elif cfg.method == "dspy-bootstrap":
            opt = dspy.BootstrapFewShotWithRandomSearch(
                metric=_metric,
                max_bootstrapped_demos=2,
                max_labeled_demos=4,
                num_candidate_programs=max(1, cfg.n_trials),
                num_threads=1,
                max_errors=10_000,
            )
            half = max(1, len(train) // 2)
            compiled = opt.compile(program, trainset=train[:half], valset=train[half:] or train)
            notes.append(
                f"dspy-bootstrap: {max(1, cfg.n_trials)} candidate programs, bootstrapped on "
                f"{half} dev rows, selected on the other {len(train) - half}"
            )
        elif cfg.method == "dspy-mipro":
            opt = dspy.MIPROv2(
                metric=_metric, auto="light", seed=seed, num_threads=1, max_errors=10_000
            )
            compiled = opt.compile(program, trainset=train, requires_permission_to_run=False)
            notes.append(
                "dspy-mipro: MIPROv2 (auto=light); needs a model able to propose instructions"
            )
        else:
            raise WorkbenchError(
                f"unknown method {cfg.method!r}: use optuna, dspy-labeled, dspy-bootstrap "
                "or dspy-mipro"
            )
        evaluate = dspy.Evaluate(
            devset=train, metric=_metric, num_threads=1, display_progress=False, max_errors=10_000
        )
        dev_result = evaluate(compiled)
    dev_score = float(getattr(dev_result, "score", dev_result)) / 100.0
    variant = export_variant(task, cfg.split, compiled, dev)
    notes.append(
        f"dev score of the compiled program is DSPy's per-example accuracy ({dev_score:.3f})"
    )
    return variant, dev_score, notes


def export_variant(task: Task, split: str, program: Any, dev: list[str]) -> PromptVariant:
    """The compiled program as a PromptVariant: its instruction and its demos as explicit rows."""
    predictor = program.predictors()[0]
    instructions = predictor.signature.instructions
    cols = placeholders(task.prompt(BASE_FILE).query)
    rows = [r for r in task.rows(split) if r["index"] in set(dev)]
    train_rows = task.rows("train") if task.has_split("train") else []

    by_content = {content_key(r, cols): DemoRef(split, r["index"]) for r in rows}
    by_content.update({content_key(r, cols): DemoRef("train", r["index"]) for r in train_rows})
    refs = []
    for demo in predictor.demos:
        ref = by_content.get(content_key(demo, cols))
        if ref is None:
            raise WorkbenchError("a DSPy demonstration matches no dev or train row")
        refs.append(ref)
    base = PromptVariant()
    if instructions.strip() != task.prompt(BASE_FILE).instruction.strip():
        base = base.with_instruction("custom", instructions)
    return base.with_demo_rows(tuple(refs)) if refs else base.with_demos("none")
