"""`PromptVariant`: a frozen, content-hashed spec of one way of prompting a task.

The axes follow the LegalBench paper's prompt studies:

- ``instruction``: ``base`` | ``reference`` | ``description`` | ``custom`` (``instruction_text``)
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
from pathlib import Path
from typing import Any, TypeGuard

from promptlib import inputs
from promptlib.data import read_text
from promptlib.errors import VariantError, VariantFileError, did_you_mean
from promptlib.formats import canonical_format, check_format, is_point
from promptlib.gold import refuse_gold_placeholder
from promptlib.verbalizers import LabelMap, check_scheme
from promptlib.yamlsafe import safe_yaml_load

INSTRUCTIONS = ("base", "reference", "description", "custom")
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
_SIGNED_INT = re.compile(r"[+-]?\d+")

#: Prompt file that supplies each built-in level.
INSTRUCTION_FILES = {
    "reference": "rule_reference_prompt.txt",
    "description": "rule_description_prompt.txt",
}
REGISTER_FILES = {"plain": "zero_shot_simple.txt", "technical": "zero_shot_jargon.txt"}
BASE_FILE = "base_prompt.txt"


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


_SPEC_KEYS = (
    "instruction",
    "register",
    "demos",
    "seed",
    "pool",
    "format",
    "answer_hint",
    "instruction_file",
    "register_file",
    "verbalizer",
    "order",
)


def _read_text_file(path: str, key: str) -> str:
    """User text for an axis, from a YAML file with a `text:` entry (e.g. under ablations/)."""
    # the workbench's one YAML loader (no aliases, bounded depth); imported here, not at the
    # top, so importing promptlib does not import experiments

    p = Path(path).expanduser()
    doc = safe_yaml_load(read_text(p, f"{key}: file", VariantError), str(p), VariantError)
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        raise VariantError(f"{p}: expected a YAML mapping with a string field 'text'")
    text: str = doc["text"]
    refuse_gold_placeholder(text, f"{key} {p}: its field 'text'", VariantError)
    return text


def text_file_review(path: str | Path, key: str = "instruction_file") -> bool | None:
    """A text file's `reviewed:` flag: None for a file that has neither it nor a
    `generator:` (the user's own text), False for a generated file no one has marked
    `reviewed: true` yet (`workbench variants generate` writes `reviewed: false`)."""
    p = Path(path).expanduser()
    doc = safe_yaml_load(read_text(p, f"{key}: file", VariantError), str(p), VariantError)
    if not isinstance(doc, dict) or ("reviewed" not in doc and "generator" not in doc):
        return None
    flag = doc.get("reviewed", False)
    if not isinstance(flag, bool):
        raise VariantError(f"{p}: 'reviewed' must be true or false, not {flag!r}")
    return flag


def parse_spec(spec: str | None) -> PromptVariant:
    """Parse 'key=value,...' (e.g. 'demos=4,seed=3,pool=train+test'); 'base' is the base prompt."""
    if spec is None or spec.strip() in ("", "base"):
        return PromptVariant()
    kv: dict[str, str] = {}
    last = ""
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item and last == "format" and is_point(kv["format"]) and ":" in item:
            kv["format"] += "," + item  # 'format=sep:dash,case:upper': the point goes on
            continue
        if "=" not in item:
            raise VariantError(
                f"variant spec item {item!r} is not key=value; e.g. "
                "'instruction=description,demos=none' or 'demos=4,seed=3,pool=train+test'"
            )
        key, value = (x.strip() for x in item.split("=", 1))
        if key not in _SPEC_KEYS:
            raise VariantError(
                f"unknown variant key {key!r}{did_you_mean(key, _SPEC_KEYS)} "
                f"(keys: {', '.join(_SPEC_KEYS)})"
            )
        if key in kv:
            raise VariantError(f"variant key {key!r} given twice")
        kv[key] = value
        last = key
    fields: dict[str, Any] = {}
    # `none`: no file (the frame's own text), so one sweep axis can compare it with files
    if kv.get("instruction_file") == NO_FILE:
        del kv["instruction_file"]
    if kv.get("register_file") == NO_FILE:
        del kv["register_file"]
    if "instruction_file" in kv:
        fields["instruction"] = "custom"
        fields["instruction_text"] = _read_text_file(kv.pop("instruction_file"), "instruction_file")
    if "register_file" in kv:
        fields["register"] = "custom"
        fields["register_text"] = _read_text_file(kv.pop("register_file"), "register_file")
    for key in ("instruction", "register", "format", "pool"):
        if key in kv:
            fields[key] = kv.pop(key)
    if "format" in fields:
        fields["format"] = canonical_format(fields["format"])
    if "answer_hint" in kv:
        hint = kv.pop("answer_hint").lower()
        if hint not in ("on", "off", "true", "false"):
            raise VariantError(f"answer_hint must be on or off, not {hint!r}")
        fields["answer_hint"] = hint in ("on", "true")
    if "seed" in kv:
        fields["seed"] = _int(kv.pop("seed"), "seed", minimum=0, maximum=MAX_SEED)
    # the unset levels have names, so a sweep axis can list them beside the others
    if "verbalizer" in kv:
        scheme = kv.pop("verbalizer")
        if scheme != OFFICIAL_LABELS:
            fields["verbalizer"] = scheme
    if "order" in kv:
        order = kv.pop("order")
        if order != AS_DRAWN:
            fields["order"] = _int(order, f"order (or {AS_DRAWN})", minimum=0, maximum=MAX_SEED)
    demos = kv.pop("demos", None)
    if demos is not None:
        if _SIGNED_INT.fullmatch(demos):
            fields["demos"] = "sample"
            fields["k"] = _int(demos, "demos=k", minimum=1, maximum=MAX_K)
        else:
            fields["demos"] = demos
    return PromptVariant(**fields)


def _int(value: str, key: str, minimum: int, maximum: int) -> int:
    try:
        n = int(value)
    except ValueError as e:
        raise VariantError(f"{key} must be an integer >= {minimum}, got {value!r}") from e
    if n < minimum:
        hint = "; use demos=none for zero-shot" if key == "demos=k" else ""
        raise VariantError(f"{key} must be an integer >= {minimum}, got {value!r}{hint}")
    if n > maximum:
        raise VariantError(f"{key} must be an integer from {minimum} to {maximum}, got {value!r}")
    return n


# ---- variants saved as JSON ---------------------------------------------------------------
#: The JSON types each field of a saved variant may take (None: the field may be null).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "instruction": (str,),
    "instruction_text": (str, type(None)),
    "register": (str,),
    "register_text": (str, type(None)),
    "demos": (str,),
    "k": (int, type(None)),
    "seed": (int, type(None)),
    "pool": (str,),
    "format": (str,),
    "answer_hint": (bool,),
    "task": (str, type(None)),
    "demo_rows": (list, type(None)),
    "verbalizer": (str, type(None)),
    "label_map": (list, type(None)),
    "order": (int, type(None)),
}
REPORT_FIELD = "best_variant_json"


# How deep a variant file's JSON may nest. A variant needs 3 levels (demo_rows: a list of
# pairs), an optimize report a few more; far deeper is not a saved variant, and parsing it
# would exhaust Python's stack (RecursionError) instead of saying so.
MAX_JSON_DEPTH = 32


def _loads(text: str, where: str) -> Any:
    """`json.loads` within `promptlib.inputs`' bounds (nested deeper than MAX_JSON_DEPTH, a
    huge integer or a key given twice is one clear line)."""
    return inputs.loads(text, where, VariantFileError, max_depth=MAX_JSON_DEPTH)


def variant_from_saved(doc: object, where: str = "variant") -> PromptVariant:
    """A variant from parsed JSON: its canonical form, or an optimize report holding one.

    Accepts the object `PromptVariant.canonical_json()` writes, or a `workbench optimize
    --json` report, whose `best_variant_json` field holds the winner's canonical JSON.
    Anything else raises `VariantFileError` naming what is wrong.
    """
    if isinstance(doc, dict) and REPORT_FIELD in doc:
        inner = doc[REPORT_FIELD]
        if isinstance(inner, str):
            try:
                inner = _loads(inner, f"{where} ({REPORT_FIELD})")
            except json.JSONDecodeError as e:
                raise VariantFileError(
                    f"{where}: {REPORT_FIELD} is not valid JSON ({e.msg} at line {e.lineno} "
                    f"column {e.colno})"
                ) from None
        if isinstance(inner, dict) and REPORT_FIELD in inner:
            # a report inside a report, and so on, is not what optimize writes (and would
            # recurse once per level)
            raise VariantFileError(
                f"{where}: {REPORT_FIELD} holds another report's {REPORT_FIELD}; expected the "
                "canonical JSON of the winning variant itself"
            )
        return variant_from_saved(inner, f"{where} ({REPORT_FIELD})")
    shape = (
        "the canonical JSON of a variant (PromptVariant.canonical_json()) or a "
        f"'workbench optimize --json' report with {REPORT_FIELD}"
    )
    if not isinstance(doc, dict):
        raise VariantFileError(f"{where}: expected {shape}, not a JSON {_json_type(doc)}")
    unknown = sorted(set(doc) - set(_FIELD_TYPES))
    if unknown:
        raise VariantFileError(
            f"{where}: unknown variant field(s) {', '.join(map(repr, unknown))}; expected {shape}"
        )
    for key, value in doc.items():
        types = _FIELD_TYPES[key]
        wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        if wrong:
            raise VariantFileError(
                f"{where}: field {key!r} must be "
                + " or ".join(_JSON_NAMES[t] for t in types)
                + f", not a JSON {_json_type(value)}"
            )
    rows = doc.get("demo_rows")
    if rows is not None and not all(
        isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rows
    ):
        raise VariantFileError(
            f"{where}: demo_rows must be a list of [split, index] pairs of strings, "
            'e.g. [["train", "3"], ["train", "7"]]'
        )
    pairs = doc.get("label_map")
    if pairs is not None and not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        raise VariantFileError(
            f"{where}: label_map must be a list of [official, shown] pairs of strings, "
            'e.g. [["Yes", "True"], ["No", "False"]]'
        )
    try:
        return PromptVariant.from_dict(doc)
    except VariantError as e:
        raise VariantFileError(f"{where}: {e}") from None


def load_variant_file(path: str | Path) -> PromptVariant:
    """Read a variant saved as JSON (see `variant_from_saved`); errors are one clear line."""
    p = Path(path).expanduser()
    text = read_text(p, "variant file", VariantFileError)
    try:
        doc = _loads(text, f"variant file {p}")
    except json.JSONDecodeError as e:
        raise VariantFileError(
            f"variant file {p} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    return variant_from_saved(doc, f"variant file {p}")


_JSON_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    type(None): "null",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"
