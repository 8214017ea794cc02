"""DSPy programs for LegalBench classification tasks, with a LegalBench-style adapter.

Tiny local models cannot follow DSPy's default chat/JSON adapters (SmolLM2 answers them with
code), so `LegalBenchAdapter` renders exactly what a LegalBench prompt looks like —
instruction, `Q:/A:`-style demonstrations in the task's own template, then the query — and
parses the first line of the completion into the label set. Rendering goes through the
workbench's own `CompiledPrompt`, so the held-out guard and the leakage checks apply to DSPy
too.

DSPy runs on the same rails as the runner: its LM (`gateway_lm`) calls the workbench gateway
(api_base, concurrency, retries, timeout, redaction) and the response cache; a `LeakageError`
or a call that fails after the retries stops the compile instead of being swallowed by DSPy.

`compile_dspy` compiles with LabeledFewShot (seeded), BootstrapFewShotWithRandomSearch or
MIPROv2 on dev rows only — DSPy's demonstrations are dev rows — and exports the result as a
`PromptVariant` (its instruction and its chosen demonstrations as explicit rows), so the same
runner scores it on dev (without its own demonstrations) and judges it on held-out.
"""

from __future__ import annotations

import contextlib
import functools
import random
import sys
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from experiments.llm.cache import cache_key
from experiments.llm.types import LM, Completion, Decoding, is_hit
from experiments.metrics import parse_label, same_label
from experiments.optimize.errors import IncompleteEvaluation
from experiments.trials.spec import decoding_for
from promptlib.errors import LeakageError, WorkbenchError
from promptlib.leakage import check_heldout, content_key
from promptlib.render import CompiledPrompt
from promptlib.tasks import Task
from promptlib.templates import Demo, placeholders
from promptlib.variants import BASE_FILE, DemoRef, PromptVariant

if TYPE_CHECKING:
    from experiments.llm.cache import ResponseCache


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


class ProviderFailure(WorkbenchError):
    """A model call failed after the gateway's retries, inside a DSPy compile."""


@dataclass
class Rails:
    """What one compile must not swallow, and what it cost.

    DSPy catches exceptions inside its optimisers and evaluators (and would score the row as
    wrong). The adapter and the gateway LM record the first `LeakageError` or provider
    failure here before raising it, so `compile_dspy` raises that instead of using a result
    built on it — whatever DSPy did with the exception.
    """

    model_calls: int = 0
    cache_hits: int = 0
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stop(self, error: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = error

    def count(self, calls: int = 0, hits: int = 0) -> None:
        with self.lock:
            self.model_calls += calls
            self.cache_hits += hits


def gateway_lm(lm: LM, cache: ResponseCache | None, decoding: Decoding, rails: Rails) -> Any:
    """A `dspy.BaseLM` whose every call goes through the workbench gateway `lm`.

    So DSPy gets what the runner gets: the model's api_base and mode, retries with backoff
    and Retry-After, key redaction, timeouts (all in `LiteLLMModel.complete`), and the
    response cache under the runner's own key — a rerun is answered from the cache, and the
    runner's evaluation of the exported variant reuses DSPy's answers where the prompts match.
    A call that fails after the retries raises `ProviderFailure` (recorded on `rails`).
    """
    return _gateway_class()(lm, cache, decoding, rails)


@functools.cache
def _gateway_class() -> type:
    dspy = _dspy()
    base: Any = dspy.BaseLM

    class GatewayLM(base):  # type: ignore[misc]
        def __init__(
            self, lm: LM, cache: ResponseCache | None, decoding: Decoding, rails: Rails
        ) -> None:
            super().__init__(
                model=lm.name,
                model_type="chat",
                temperature=decoding.temperature,
                max_tokens=decoding.max_tokens,
                cache=False,  # the workbench's response cache, not DSPy's
                num_retries=0,  # the gateway retries
            )
            self.gateway = lm
            self.response_cache = cache
            self.decoding = decoding
            self.rails = rails

        def generate(self, prompt: str, decoding: Decoding | None = None) -> str:
            """The completion of `prompt` (task decoding by default), cached like the runner."""
            dec = decoding or self.decoding
            key = cache_key(self.gateway.cache_identity(), prompt, dec)
            if self.response_cache is not None:
                cached = self.response_cache.get(key)
                if cached is not None and cached.text is not None:
                    self.rails.count(hits=1)
                    return cached.text
            comp: Completion = self.gateway.complete(prompt, dec)
            hit = is_hit(False, comp)  # given again without a call: a hit, not a model call
            self.rails.count(calls=int(not hit), hits=int(hit))
            if comp.error is not None or comp.text is None:
                error = ProviderFailure(f"a model call failed: {comp.error or 'no text'}")
                self.rails.stop(error)
                raise error
            if self.response_cache is not None:
                self.response_cache.put(key, comp)
            return comp.text

        def forward(
            self, prompt: str | None = None, messages: list[Any] | None = None, **kwargs: Any
        ) -> Any:
            """DSPy's own calls (MIPROv2's instruction proposer): through the gateway too.

            Chat messages are joined into one prompt (the gateway sends a prompt as the
            model's mode wants it); the reply is shaped like an OpenAI chat completion.
            """
            if messages is not None:
                text = "\n\n".join(str(m.get("content", "")) for m in messages)
            else:
                text = prompt or ""
            stop = kwargs.get("stop")
            decoding = Decoding(
                temperature=float(kwargs.get("temperature") or 0.0),
                max_tokens=int(kwargs.get("max_tokens") or 512),
                stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
                mode=self.decoding.mode,
            )
            out = self.generate(text, decoding)
            message = {"role": "assistant", "content": out}
            return types.SimpleNamespace(
                choices=[{"index": 0, "message": message, "finish_reason": "stop"}],
                usage={},
                model=self.model,
                _hidden_params={},
            )

    return GatewayLM


class LegalBenchAdapter:
    """Formats like a LegalBench prompt; parses the first line into a label.

    Calls with the task's signature are rendered by the workbench's `CompiledPrompt` (so the
    leakage checks apply) and, through a `gateway_lm`, answered by the workbench gateway.
    Every demonstration is checked against the held-out guard as well as the query: a
    held-out row cannot reach the model as either. Other signatures (MIPROv2's proposer) go
    to DSPy's ChatAdapter. A `LeakageError` is recorded on `rails` before it is raised.
    """

    def __init__(self, task: Task, rails: Rails | None = None) -> None:
        dspy = _dspy()
        self.task = task
        self.base = task.prompt(BASE_FILE)
        self.cols = placeholders(self.base.query)
        self.labels = tuple(task.spec.labels or ())
        self.rails = rails if rails is not None else Rails()
        adapter = self
        base: Any = dspy.Adapter
        chat = dspy.ChatAdapter()

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
                if not adapter.handles(signature):
                    return list(chat(lm, lm_kwargs, signature, demos, inputs))
                prompt = adapter.render(signature, demos, inputs)
                if callable(getattr(lm, "generate", None)):
                    return [self.parse(signature, lm.generate(prompt))]
                outputs = lm(messages=[{"role": "user", "content": prompt}], **lm_kwargs)
                values = []
                for out in outputs:
                    text = out.get("text") if isinstance(out, dict) else out
                    values.append(self.parse(signature, text or ""))
                return values

        self.dspy_adapter = _Adapter()

    def handles(self, signature: Any) -> bool:
        """Whether `signature` is the task's (its columns in, `answer` out)."""
        outputs = list(signature.output_fields)
        return set(signature.input_fields) == set(self.cols) and outputs == ["answer"]

    def compiled(self, instructions: str, demos: list[dict[str, Any]]) -> CompiledPrompt:
        values = [{c: str(d.get(c, "")) for c in self.cols} for d in demos]
        try:
            for v in values:  # a demonstration is shown to the model as much as the query
                check_heldout(self.task.name, v)
        except LeakageError as e:
            self.rails.stop(e)
            raise
        return CompiledPrompt(
            task=self.task.name,
            variant=PromptVariant(),
            instruction=instructions.strip(),
            instruction_sep=self.base.instruction_sep,
            demos=tuple(
                Demo.of(v, str(d.get("answer", ""))) for v, d in zip(values, demos, strict=True)
            ),
            demo_sep=self.base.demo_sep,
            query=self.base.query,
            answer_join=self.base.answer_join,
            format="base",
            labels=self.labels,
            source=f"{self.task.name}/dspy",
        )

    def render(self, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any]) -> str:
        compiled = self.compiled(signature.instructions, demos)
        try:
            return compiled.render({k: str(v) for k, v in inputs.items()})
        except LeakageError as e:
            self.rails.stop(e)
            raise

    def parse(self, completion: str) -> str:
        first = completion.strip().split("\n", 1)[0] if completion else ""
        return parse_label(first, self.labels) or first


def _examples(task: Task, split: str, indices: list[str]) -> tuple[list[Any], int]:
    """Dev rows as DSPy examples, one per distinct text (the number of repeats dropped).

    LegalBench repeats some texts under other indices; with both copies in DSPy's trainset,
    one could be the other's demonstration, which the leakage check refuses.
    """
    dspy = _dspy()
    cols = placeholders(task.prompt(BASE_FILE).query)
    rows = {r["index"]: r for r in task.rows(split)}
    out = []
    seen: set[Any] = set()
    for i in indices:
        r = rows[i]
        key = content_key(r, cols)
        if key in seen:
            continue
        seen.add(key)
        ex = dspy.Example(**{c: r[c] for c in cols}, answer=r["answer"], row_index=i)
        out.append(ex.with_inputs(*cols))
    return out, len(indices) - len(out)


def _metric(example: Any, prediction: Any, trace: Any = None) -> bool:
    """Per-example exact match after LegalBench's normalisation."""
    return same_label(getattr(prediction, "answer", ""), example.answer)


@dataclass
class DspyCompiled:
    """A compiled DSPy program, exported, with what its compile cost."""

    variant: PromptVariant
    notes: list[str]
    model_calls: int
    cache_hits: int


def compile_dspy(
    cfg: Any,
    task: Task,
    dev: list[str],
    lm: LM,
    seed: int = 0,
    *,
    cache: ResponseCache | None = None,
) -> DspyCompiled:
    """Compile a DSPy program on dev rows, through the gateway `lm`; export it as a variant.

    DSPy's demonstrations are dev rows: the trainset is `dev` (one row per distinct text),
    shuffled with `seed`. A `LeakageError` aborts the compile and is raised; a model call
    that fails after the gateway's retries aborts it with `IncompleteEvaluation` (rerunning
    retries only that call: the rest come from the response cache). The compiled program is
    not scored here: the caller scores the exported variant with the runner, on dev rows
    that are not its demonstrations.
    """

    dspy = _dspy()
    rails = Rails()
    decoding = decoding_for(task.spec, getattr(lm, "mode", "chat"))
    dspy_lm = gateway_lm(lm, cache, decoding, rails)
    labels = task.spec.labels or ()
    adapter = LegalBenchAdapter(task, rails)
    program = dspy.Predict(make_signature(task))
    train, repeats = _examples(task, cfg.split, dev)
    random.Random(seed).shuffle(train)
    threads = max(1, int(getattr(lm, "concurrency", 1)))
    notes: list[str] = []
    if repeats:
        notes.append(f"dspy: {repeats} dev rows repeat another's text; one of each is used")
    try:
        # DSPy prints progress on stdout; keep stdout for the workbench's own (JSON) output.
        with (
            contextlib.redirect_stdout(sys.stderr),
            dspy.context(lm=dspy_lm, adapter=adapter.dspy_adapter),
        ):
            compiled = _compile(dspy, cfg, program, train, labels, seed, threads, notes)
    except Exception as e:
        if rails.error is None:
            if isinstance(e, WorkbenchError):
                raise
            hint = " (MIPROv2 needs a model able to propose instructions)"
            raise WorkbenchError(
                f"{cfg.method}: DSPy failed ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
                + (hint if cfg.method == "dspy-mipro" else "")
            ) from e
    if isinstance(rails.error, LeakageError):
        raise rails.error
    if rails.error is not None:
        raise IncompleteEvaluation(
            f"{cfg.method}: {rails.error}; the DSPy compile stopped there (no result is built "
            "on a failed call). Rerun the same command: answered calls come from the response "
            "cache"
        ) from rails.error
    notes.append(
        f"dspy: demonstrations are dev rows (test split, dev side; {len(train)} distinct "
        f"texts, shuffled with seed {seed}); exported as explicit test rows"
    )
    variant = export_variant(task, cfg.split, compiled, dev)
    return DspyCompiled(variant, notes, rails.model_calls, rails.cache_hits)


def _compile(
    dspy: Any,
    cfg: Any,
    program: Any,
    train: list[Any],
    labels: Sequence[str],
    seed: int,
    threads: int,
    notes: list[str],
) -> Any:
    # max_errors=1: the first exception stops DSPy (Rails says which one it was)
    if cfg.method == "dspy-labeled":
        k = max(2, min(8, len(labels) * 2))
        notes.append(f"dspy-labeled: k={k} labelled demos sampled from dev (seed {seed})")
        return dspy.LabeledFewShot(k=k).compile(program, trainset=train)
    if cfg.method == "dspy-bootstrap":
        opt = dspy.BootstrapFewShotWithRandomSearch(
            metric=_metric,
            max_bootstrapped_demos=2,
            max_labeled_demos=4,
            num_candidate_programs=max(1, cfg.n_trials),
            num_threads=threads,
            max_errors=1,
        )
        half = max(1, len(train) // 2)
        notes.append(
            f"dspy-bootstrap: {max(1, cfg.n_trials)} candidate programs, demos from "
            f"{half} dev rows, selected on the other {len(train) - half}"
        )
        return opt.compile(program, trainset=train[:half], valset=train[half:] or train)
    if cfg.method == "dspy-mipro":
        opt = dspy.MIPROv2(
            metric=_metric, auto="light", seed=seed, num_threads=threads, max_errors=1
        )
        notes.append("dspy-mipro: MIPROv2 (auto=light); needs a model able to propose instructions")
        return opt.compile(program, trainset=train, requires_permission_to_run=False)
    raise WorkbenchError(
        f"unknown method {cfg.method!r}: use optuna, dspy-labeled, dspy-bootstrap or dspy-mipro"
    )


def export_variant(task: Task, split: str, program: Any, dev: list[str]) -> PromptVariant:
    """The compiled program as a PromptVariant: its instruction and its demos as explicit rows.

    Each demonstration is matched by content to a dev row (the rows DSPy was given) and
    checked against the held-out guard.
    """
    predictor = program.predictors()[0]
    instructions = predictor.signature.instructions
    cols = placeholders(task.prompt(BASE_FILE).query)
    allowed = set(dev)
    by_content: dict[Any, DemoRef] = {}
    for r in task.rows(split):
        if r["index"] in allowed:
            by_content.setdefault(content_key(r, cols), DemoRef(split, r["index"]))
    refs = []
    for demo in predictor.demos:
        values = {c: str(demo.get(c, "")) for c in cols}
        check_heldout(task.name, values)
        ref = by_content.get(content_key(values, cols))
        if ref is None:
            raise WorkbenchError("a DSPy demonstration matches no dev row")
        refs.append(ref)
    base = PromptVariant()
    if instructions.strip() != task.prompt(BASE_FILE).instruction.strip():
        base = base.with_instruction("custom", instructions)
    return base.with_demo_rows(tuple(refs)) if refs else base.with_demos("none")
