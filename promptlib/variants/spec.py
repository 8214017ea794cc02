"""The variant spec grammar: ``key=value,...`` strings (``workbench run --variant``, a sweep
spec's levels) parsed into a `PromptVariant`; each key's level parses as its entry in the
table of axes says (`promptlib.variants.axes`)."""

from __future__ import annotations

from promptlib.errors import VariantError, did_you_mean
from promptlib.formats import is_point
from promptlib.variants.axes import Fields, spec_parsers
from promptlib.variants.variant import PromptVariant


def parse_spec(spec: str | None) -> PromptVariant:
    """Parse 'key=value,...' (e.g. 'demos=4,seed=3,pool=train+test'); 'base' is the base prompt."""
    if spec is None or spec.strip() in ("", "base"):
        return PromptVariant()
    parsers = spec_parsers()
    keys = tuple(parsers)
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
        if key not in keys:
            raise VariantError(
                f"unknown variant key {key!r}{did_you_mean(key, keys)} (keys: {', '.join(keys)})"
            )
        if key in kv:
            raise VariantError(f"variant key {key!r} given twice")
        kv[key] = value
        last = key
    fields: Fields = {}
    for key, parse in parsers.items():  # in the table's order, whatever the spec's
        if key in kv:
            parse(kv[key], fields)
    return PromptVariant(**fields)
