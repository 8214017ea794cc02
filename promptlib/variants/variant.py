"""`PromptVariant`, the type: a frozen, content-hashed spec of one way of prompting a task.

The axes follow the LegalBench paper's prompt studies:

- ``instruction``: ``base`` | ``reference`` | ``description`` | ``custom`` (``instruction_text``)
  | ``application`` (the paper's rule-application prompt, which asks for an explanation:
  ``application_prompt.txt``, or ``claude_application_prompt.txt`` with ``format=claude``)
- ``register``: ``default`` | ``plain`` | ``technical`` | ``custom`` (``register_text``, a query
  template in the user's own words)
- ``demos``: ``base`` | ``none`` | ``icl:N`` | ``sample`` (``k`` class-balanced rows drawn with
  ``seed`` from ``pool`` = ``train`` or ``train+test``)
- ``format``: ``base`` | ``claude`` | a format grammar point such as
  ``sep:colon_newline,case:upper`` (`promptlib.formats`; stored in canonical form, base-style)
- ``verbalizer``: the labels' surface form (``letters``, ``true_false``, ...; see
  `promptlib.verbalizers`); binding records the resolved mapping in ``label_map``
- ``order``: a seed permuting the demonstrations (the same rows, in another order)

Fields left at their defaults (and the new axes left unset) are what they always were, so
the ids of variants made before an axis existed do not change.

A variant's id is the sha256 of its canonical JSON, so the same spec means the same prompt in
any process. Variants are never mutated: `with_demos`, `with_instruction`... return new ones.
Binding a sampled variant to a task (`promptlib.demos.bind`) records the chosen rows in
``demo_rows``, so the id of a bound variant pins the exact demonstrations. A variant saved
with `canonical_json` (an optimize report's ``best_variant_json``, say) is read back by
`load_variant_file` (``workbench run --variant-file``) with the same id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from promptlib.errors import VariantError, did_you_mean
from promptlib.formats import canonical_format, check_format
from promptlib.gold import refuse_gold_placeholder
from promptlib.verbalizers import LabelMap, check_scheme

INSTRUCTIONS = ("base", "reference", "description", "custom", "application")
REGISTERS = ("default", "plain", "technical", "custom")
FORMATS = ("base", "claude")
POOLS = ("train", "train+test")
OFFICIAL_LABELS = "official"  # verbalizer=official: the labels as LegalBench writes them
NO_FILE = "none"  # instruction_file=none / register_file=none: the prompt file's own text
AS_DRAWN = "drawn"  # order=drawn: the demonstrations in the order they were drawn or written
_ICL = re.compile(r"icl:(\d+)$")
MAX_SEED = 2**32 - 1
"""The largest seed and order (`experiments.bounds.SEED`, which a test keeps equal)."""
MAX_K = 10_000
"""The most demonstrations one prompt may ask for (a pool is checked for them besides)."""

#: Prompt file that supplies each built-in level.
INSTRUCTION_FILES = {
    "reference": "rule_reference_prompt.txt",
    "description": "rule_description_prompt.txt",
}
REGISTER_FILES = {"plain": "zero_shot_simple.txt", "technical": "zero_shot_jargon.txt"}
BASE_FILE = "base_prompt.txt"
APPLICATION = "application"
"""instruction=application: the paper's rule-application prompt (an explanation, then the
conclusion). Its file depends on the format, so it is not in `INSTRUCTION_FILES` (which
also lists the levels the optimiser searches: an explanation is not what it scores)."""
#: The rule-application prompt file of each format (LegalBench's own Claude wording).
APPLICATION_FILES = {
    "base": "application_prompt.txt",
    "claude": "claude_application_prompt.txt",
}
#: The LegalBench tasks that ship both application prompt files (the paper's 12 tasks used
#: for rule-application and rule-conclusion), named in the error for a task without them.
APPLICATION_TASKS = (
    "abercrombie",
    "diversity_1",
    "diversity_2",
    "diversity_3",
    "diversity_4",
    "diversity_5",
    "diversity_6",
    "hearsay",
    "personal_jurisdiction",
    "successor_liability",
    "telemarketing_sales_rule",
    "ucc_v_common_law",
)


@dataclass(frozen=True, order=True)
class DemoRef:
    """A demonstration row, by split and the row's `index` column."""

    split: str
    index: str


@dataclass(frozen=True)
class PromptVariant:
    instruction: str = "base"
    instruction_text: str | None = None
    register: str = "default"
    register_text: str | None = None
    demos: str = "base"
    k: int | None = None
    seed: int | None = None
    pool: str = "train"
    format: str = "base"
    answer_hint: bool = False
    task: str | None = None
    demo_rows: tuple[DemoRef, ...] | None = None
    verbalizer: str | None = None
    label_map: LabelMap | None = None  # (official, shown) pairs, recorded by binding
    order: int | None = None

    def __post_init__(self) -> None:
        self._check_new_axes()
        _check_level("instruction", self.instruction, INSTRUCTIONS)
        _check_level("register", self.register, REGISTERS)
        check_format(self.format, FORMATS)
        _check_level("pool", self.pool, POOLS)
        if (self.instruction == "custom") != (self.instruction_text is not None):
            raise VariantError("instruction=custom needs instruction_text, and only it does")
        if (self.register == "custom") != (self.register_text is not None):
            raise VariantError("register=custom needs register_text, and only it does")
        for name in ("instruction_text", "register_text"):  # however the variant was made
            text = getattr(self, name)
            if isinstance(text, str):
                refuse_gold_placeholder(text, name, VariantError)
        if self.instruction == APPLICATION:
            self._check_application()
        if self.instruction in INSTRUCTION_FILES and self.register in REGISTER_FILES:
            raise VariantError(
                f"no LegalBench prompt combines instruction={self.instruction} with "
                f"register={self.register}; set one of them to its default"
            )
        if self.demos == "rows":
            if not self.demo_rows or self.k is not None or self.seed is not None:
                raise VariantError("demos=rows needs explicit demo_rows (and no k or seed)")
        elif self.demos == "sample":
            if _is_int(self.k) and self.k > MAX_K:
                raise VariantError(f"demos=k must be an integer from 1 to {MAX_K}, not {self.k}")
            if not _is_int(self.k) or self.k < 1:
                raise VariantError(
                    f"resampled demos need an integer k >= 1, not {self.k!r} (e.g. "
                    "demos=4,seed=0); use demos=none for zero-shot"
                )
            if self.seed is None:
                raise VariantError("resampled demos need a seed (e.g. demos=4,seed=0)")
            if not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
                raise VariantError(
                    f"seed must be an integer >= 0 and <= {MAX_SEED}, not {self.seed!r} "
                    "(e.g. demos=4,seed=0)"
                )
        elif self.demos in ("base", "none") or _ICL.match(self.demos):
            if self.k is not None or self.seed is not None or self.pool != "train":
                raise VariantError(
                    f"k, seed and pool apply to resampled demos only, not demos={self.demos}"
                )
        else:
            raise VariantError(
                f"unknown demos level {self.demos!r}: use base, none, icl:N, or a number k "
                "with a seed (demos=4,seed=0)"
            )
        if self.demo_rows is not None and self.demos not in ("sample", "rows"):
            raise VariantError("demo_rows are recorded for resampled or explicit demos only")

    def _check_new_axes(self) -> None:
        if self.verbalizer is not None:
            if not isinstance(self.verbalizer, str):
                raise VariantError(f"verbalizer must be a scheme name, not {self.verbalizer!r}")
            check_scheme(self.verbalizer)
        if self.label_map is not None and self.verbalizer is None:
            raise VariantError("label_map is recorded for a verbalizer only")
        if self.order is not None:
            if not _is_int(self.order) or not 0 <= self.order <= MAX_SEED:
                raise VariantError(
                    f"order must be an integer >= 0 and <= {MAX_SEED} (a permutation seed), "
                    f"not {self.order!r}"
                )
            if self.demos == "none":
                raise VariantError(
                    "order permutes the demonstrations, and demos=none has none; leave order "
                    "unset or show demonstrations"
                )

    def _check_application(self) -> None:
        """instruction=application renders LegalBench's application file as written: its
        demonstrations are part of its text (they answer a shorter question than its query,
        so they do not parse apart from it), and only its two formats exist."""
        refused = []
        if self.register != "default":
            refused.append(f"register={self.register} (the file has its own query wording)")
        if self.demos != "base":
            refused.append(
                f"demos={self.demos if self.demos != 'sample' else self.k} (its demonstrations "
                "are written into the file and cannot be dropped or redrawn)"
            )
        if self.format not in APPLICATION_FILES:
            refused.append(f"format={self.format} (only base and claude files exist)")
        if self.verbalizer is not None:
            refused.append(f"verbalizer={self.verbalizer} (its demonstrations show the labels)")
        if self.answer_hint:
            refused.append("answer_hint=on (the prompt asks for an explanation)")
        if self.order is not None:
            refused.append(f"order={self.order} (its demonstrations are fixed text)")
        if refused:
            raise VariantError(
                "instruction=application renders the task's application prompt file as "
                f"LegalBench wrote it and does not combine with {'; '.join(refused)}; leave "
                "those at their defaults (format=base or format=claude may be set)"
            )

    # ---- identity -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if not self.answer_hint:
            del d["answer_hint"]  # keeps the ids of variants without it unchanged
        for key in _UNSET_OMITTED:
            if d[key] is None:
                del d[key]  # the axes added later: unset, the id is what it always was
        if self.demo_rows is not None:
            d["demo_rows"] = [[r.split, r.index] for r in self.demo_rows]
        if self.label_map is not None:
            d["label_map"] = [[o, s] for o, s in self.label_map]
        return d

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def id(self) -> str:
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PromptVariant:
        d = dict(d)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise VariantError(f"unknown variant field(s): {', '.join(sorted(unknown))}")
        rows = d.pop("demo_rows", None)
        if rows is not None:
            d["demo_rows"] = tuple(DemoRef(str(s), str(i)) for s, i in rows)
        label_map = d.pop("label_map", None)
        if label_map is not None:
            d["label_map"] = tuple((str(o), str(s)) for o, s in label_map)
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> PromptVariant:
        return cls.from_dict(json.loads(text))

    # ---- transformations --------------------------------------------------------------
    def with_demos(
        self, demos: str | int, *, seed: int | None = None, pool: str = "train"
    ) -> PromptVariant:
        """Same variant with other demonstrations; an int means k resampled rows."""
        if isinstance(demos, int) or str(demos).isdigit():
            return dataclasses.replace(
                self, demos="sample", k=int(demos), seed=seed, pool=pool, demo_rows=None
            )
        return dataclasses.replace(
            self, demos=demos, k=None, seed=None, pool="train", demo_rows=None
        )

    def with_instruction(self, instruction: str, text: str | None = None) -> PromptVariant:
        return dataclasses.replace(
            self,
            instruction="custom" if text is not None else instruction,
            instruction_text=text,
        )

    def with_register(self, register: str, text: str | None = None) -> PromptVariant:
        return dataclasses.replace(
            self, register="custom" if text is not None else register, register_text=text
        )

    def with_format(self, fmt: str) -> PromptVariant:
        """Same variant in another format; a grammar point in any spelling is canonicalised."""
        return dataclasses.replace(self, format=canonical_format(fmt))

    def with_answer_hint(self, on: bool = True) -> PromptVariant:
        return dataclasses.replace(self, answer_hint=on)

    def with_demo_rows(self, rows: tuple[DemoRef, ...]) -> PromptVariant:
        """Explicit demonstrations (e.g. chosen by an optimiser), by split and row index."""
        return dataclasses.replace(self, demos="rows", k=None, seed=None, demo_rows=rows)

    def with_verbalizer(self, scheme: str | None) -> PromptVariant:
        """Same variant with the labels shown another way (None: as LegalBench writes them)."""
        return dataclasses.replace(self, verbalizer=scheme, label_map=None)

    def with_order(self, seed: int | None) -> PromptVariant:
        """Same demonstrations in the order a seeded permutation gives (None: as drawn)."""
        return dataclasses.replace(self, order=seed)

    def bound(
        self,
        task: str,
        demo_rows: tuple[DemoRef, ...] | None,
        label_map: LabelMap | None = None,
    ) -> PromptVariant:
        return dataclasses.replace(self, task=task, demo_rows=demo_rows, label_map=label_map)

    # ---- display -----------------------------------------------------------------------
    @property
    def label(self) -> str:
        """A short human name, e.g. 'instruction=description,demos=none'."""
        parts = []
        if self.instruction != "base":
            parts.append(f"instruction={self.instruction}")
        if self.register != "default":
            parts.append(f"register={self.register}")
        if self.demos == "sample":
            parts.append(f"demos={self.k},seed={self.seed},pool={self.pool}")
        elif self.demos == "rows":
            refs = "+".join(f"{r.split}:{r.index}" for r in self.demo_rows or ())
            parts.append(f"demos=rows[{refs}]")
        elif self.demos != "base":
            parts.append(f"demos={self.demos}")
        if self.format != "base":
            parts.append(f"format={self.format}")
        if self.answer_hint:
            parts.append("answer_hint=on")
        if self.verbalizer is not None:
            parts.append(f"verbalizer={self.verbalizer}")
        if self.order is not None:
            parts.append(f"order={self.order}")
        return ",".join(parts) or "base"


def frame_file(variant: PromptVariant) -> str:
    """The prompt file that frames a variant (instruction, query template, separators)."""
    if variant.instruction == APPLICATION:
        return APPLICATION_FILES.get(variant.format, APPLICATION_FILES["base"])
    return (
        INSTRUCTION_FILES.get(variant.instruction)
        or REGISTER_FILES.get(variant.register)
        or BASE_FILE
    )


#: Fields added after ids were pinned: left out of the canonical JSON while unset.
_UNSET_OMITTED = ("verbalizer", "label_map", "order")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_level(axis: str, value: str, levels: tuple[str, ...]) -> None:
    if value not in levels:
        raise VariantError(
            f"unknown {axis} level {value!r}{did_you_mean(value, levels)} "
            f"(levels: {', '.join(levels)})"
        )
