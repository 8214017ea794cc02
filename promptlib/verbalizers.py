"""Label verbalizers: the surface form a task's labels take in a prompt, and the way back.

A verbalizer maps each official label to the word the prompt shows and the model is asked
to answer with (Yes/No as True/False, as A/B, lower case...). Scoring maps a reply back to
the official label, so every metric stays LegalBench's; a reply that matches no shown label
is invalid, never guessed. Binding a variant to a task records the resolved mapping
(`PromptVariant.label_map`), so a variant's id pins exactly which words were shown.

Schemes (``verbalizer=NAME``):

- ``lower``, ``upper``, ``title``: the labels re-cased;
- ``letters``: A, B, C... in the task's label order; ``numbers``: 1, 2, 3...;
- ``true_false``: Yes -> True, No -> False (tasks labelled Yes/No only);
- ``map:OFFICIAL>SHOWN/OFFICIAL>SHOWN``: a mapping written out (every label, once).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from promptlib.errors import VariantError, did_you_mean

SCHEMES = ("lower", "upper", "title", "letters", "numbers", "true_false")
_PUNCT = str.maketrans("", "", string.punctuation)
LabelMap = tuple[tuple[str, str], ...]  # (official, shown), in the task's label order


def _norm(text: str) -> str:
    """LegalBench's comparison of labels (`promptlib.tasks.normalize_label`)."""
    return text.translate(_PUNCT).strip().lower()


def check_scheme(name: str) -> None:
    """Refuse an unknown scheme or a malformed written-out map, before any task is seen."""
    if name.startswith("map:"):
        _written_map(name)
        return
    if name not in SCHEMES:
        raise VariantError(
            f"unknown verbalizer {name!r}{did_you_mean(name, SCHEMES)} (schemes: "
            f"{', '.join(SCHEMES)}, or map:Yes>True/No>False)"
        )


def _written_map(name: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in name[4:].split("/"):
        official, sep, shown = item.partition(">")
        official, shown = official.strip(), shown.strip()
        if not sep or not official or not shown:
            raise VariantError(
                f"verbalizer {name!r}: each item is OFFICIAL>SHOWN, e.g. map:Yes>True/No>False"
            )
        if official in pairs:
            raise VariantError(f"verbalizer {name!r} maps {official!r} twice")
        pairs[official] = shown
    return pairs


def resolve(name: str, labels: Sequence[str] | None, task: str, task_type: str) -> LabelMap:
    """The (official, shown) pairs of scheme `name` for a task's label set, checked.

    Raises `VariantError` naming the task when the scheme does not apply (no label set, a
    multi-label task, true_false on labels other than Yes/No) or when two labels would be
    shown as one word (after LegalBench's normalisation), which would make replies ambiguous.
    """
    check_scheme(name)
    if not labels:
        raise VariantError(
            f"verbalizer={name} rewrites the label set, but task {task!r} is {task_type} and "
            "has none; leave verbalizer unset"
        )
    if task_type == "multi-label":
        raise VariantError(
            f"verbalizer={name}: task {task!r} is multi-label (answers list several labels); "
            "verbalizers apply to single-label tasks only"
        )
    shown = _shown(name, list(labels), task)
    pairs = tuple(zip(labels, shown, strict=True))
    seen: dict[str, str] = {}
    for official, word in pairs:
        key = _norm(word)
        if not key:
            raise VariantError(
                f"verbalizer={name}: task {task!r}: label {official!r} would be shown as "
                f"{word!r}, which is empty once punctuation is dropped; pick another word"
            )
        if key in seen:
            raise VariantError(
                f"verbalizer={name}: task {task!r}: labels {seen[key]!r} and {official!r} would "
                f"both be shown as {word!r}, so a reply could not be mapped back; pick another "
                "verbalizer"
            )
        seen[key] = official
    officials = {_norm(o): o for o in labels}
    for official, word in pairs:
        other = officials.get(_norm(word))
        if other is not None and other != official:
            # a reply in the official words ("1" for choice 1) would be mapped to another
            # class instead of being invalid (found in review: scalr's numbers shifted by one)
            raise VariantError(
                f"verbalizer={name}: task {task!r}: label {official!r} would be shown as "
                f"{word!r}, which is another of its labels ({other!r}), so replies naming "
                "that label could not be told apart; pick another verbalizer"
            )
    return pairs


def _shown(name: str, labels: list[str], task: str) -> list[str]:
    if name == "lower":
        return [x.lower() for x in labels]
    if name == "upper":
        return [x.upper() for x in labels]
    if name == "title":
        return [x.title() for x in labels]
    if name == "letters":
        if len(labels) > 26:
            raise VariantError(
                f"verbalizer=letters: task {task!r} has {len(labels)} labels, more than 26 letters"
            )
        return [string.ascii_uppercase[i] for i in range(len(labels))]
    if name == "numbers":
        return [str(i + 1) for i in range(len(labels))]
    if name == "true_false":
        if sorted(_norm(x) for x in labels) != ["no", "yes"]:
            raise VariantError(
                f"verbalizer=true_false maps Yes/No, but task {task!r} has labels "
                f"{', '.join(labels)}; use letters, numbers or map:..."
            )
        return ["True" if _norm(x) == "yes" else "False" for x in labels]
    written = _written_map(name)
    by_norm = {_norm(k): v for k, v in written.items()}
    missing = [x for x in labels if _norm(x) not in by_norm]
    extra = sorted(set(by_norm) - {_norm(x) for x in labels})
    if missing or extra:
        raise VariantError(
            f"verbalizer {name!r}: task {task!r} has labels {', '.join(labels)}; the map must "
            f"give each exactly once (missing: {', '.join(missing) or 'none'}; not labels of "
            f"the task: {', '.join(extra) or 'none'})"
        )
    return [by_norm[_norm(x)] for x in labels]


def shown_answer(label_map: LabelMap, answer: str, where: str) -> str:
    """A demonstration's official answer in its shown form; an answer that is no label is an
    error (a verbalized prompt would otherwise show one demonstration in the old words)."""
    for official, word in label_map:
        if _norm(official) == _norm(answer):
            return word
    raise VariantError(
        f"{where}: demonstration answer {answer!r} is none of the task's labels "
        f"({', '.join(o for o, _ in label_map)}), so it cannot be verbalized"
    )


def official_label(label_map: LabelMap, shown: str) -> str | None:
    """The official label whose shown word `shown` is (normalised match), else None."""
    key = _norm(shown)
    return next((official for official, word in label_map if _norm(word) == key), None)


def official_words_left(label_map: LabelMap, text: str) -> tuple[str, ...]:
    """The official labels the shown words replace that `text` (an instruction, a query
    template's own words) still names as a word, e.g. "Answer Yes or No." under true_false:
    a model that obeys it answers in words that are invalid here."""
    left = []
    for official, word in label_map:
        if _norm(official) == _norm(word):
            continue
        if re.search(rf"(?<![\w]){re.escape(official)}(?![\w])", text):
            left.append(official)
    return tuple(left)
