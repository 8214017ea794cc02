"""Label verbalizers and demonstration order: shown words, the way back, ids, errors."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from promptlib import Catalog, PromptVariant, VariantError, compile_prompt, parse_spec
from promptlib.demos import bind, demonstrations
from promptlib.templates import Demo

pytestmark = pytest.mark.data


def test_unset_axes_keep_every_id_and_canonical_json() -> None:
    for spec in ("base", "demos=none", "demos=4,seed=2", "instruction=description,format=claude"):
        v = parse_spec(spec)
        assert "verbalizer" not in v.canonical_json() and "order" not in v.canonical_json()
        assert "label_map" not in v.canonical_json()
        # the unset levels' names, as a sweep axis lists them, are the same variant
        sep = "" if spec == "base" else f"{spec},"
        assert parse_spec(f"{sep}verbalizer=official").id == v.id
        if "demos=none" not in spec:
            assert parse_spec(f"{sep}order=drawn").id == v.id


def test_true_false_shows_the_words_and_maps_replies_back(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    row = task.rows("test")[0]
    base = compile_prompt(PromptVariant(), task)
    tf = compile_prompt(parse_spec("verbalizer=true_false"), task)
    assert tf.answer_labels == ("True", "False") and base.answer_labels == ("Yes", "No")
    text = tf.render(row)
    assert "A: True" in text and "A: False" in text
    assert "A: Yes" not in text and "A: No" not in text
    # every demonstration kept its fields; only the answer changed, by the mapping
    for b, v in zip(base.demos, tf.demos, strict=True):
        assert b.fields == v.fields
        assert v.answer == {"Yes": "True", "No": "False"}[b.answer]
    assert tf.official("True") == "Yes" and tf.official(" false. ") == "No"
    # a reply in the official words is no answer under a verbalizer: never guessed
    assert tf.official("Yes") is None and tf.official("Maybe") is None
    assert base.official("yes") == "Yes" and base.official("True") is None


def test_the_mapping_is_part_of_the_bound_id(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    a = bind(parse_spec("verbalizer=letters"), task)
    b = bind(parse_spec("verbalizer=numbers"), task)
    assert a.label_map == (("Yes", "A"), ("No", "B"))
    assert a.id != b.id != bind(PromptVariant(), task).id
    again = PromptVariant.from_json(a.canonical_json())
    assert again == a and again.id == a.id
    wrong = PromptVariant.from_dict({**a.to_dict(), "label_map": [["Yes", "B"], ["No", "A"]]})
    with pytest.raises(VariantError, match="labels changed since it was saved"):
        bind(wrong, task)


def test_claude_format_and_answer_hint_list_the_shown_labels(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    row = task.rows("test")[0]
    text = compile_prompt(
        parse_spec("verbalizer=letters,format=claude,answer_hint=on"), task
    ).render(row)
    assert "Reply with either: A, B" in text and "Answer with one of: A, B." in text
    assert "Reply with either: Yes" not in text


def test_multi_class_letters_and_written_maps(catalog: Catalog) -> None:
    task = catalog.task("abercrombie")
    labels = task.spec.labels
    assert labels is not None and len(labels) == 5
    cp = compile_prompt(parse_spec("verbalizer=letters"), task)
    assert cp.answer_labels == tuple("ABCDE")
    for official, shown in zip(labels, "ABCDE", strict=True):
        assert cp.official(shown) == official
    written = "map:" + "/".join(f"{x}>kind {i}" for i, x in enumerate(labels))
    cp2 = compile_prompt(parse_spec(f"verbalizer={written}"), task)
    assert cp2.official("Kind 3") == labels[3]


@pytest.mark.parametrize(
    ("task", "spec", "message"),
    [
        ("abercrombie", "verbalizer=true_false", "maps Yes/No"),
        ("hearsay", "verbalizer=map:Yes>Same/No>same", "would both be shown as"),
        ("hearsay", "verbalizer=map:Yes>No/No>Yes", "another of its labels"),
        ("hearsay", "verbalizer=map:Yes>True", "missing: No"),
        ("hearsay", "verbalizer=map:Yes>True/No>False/Maybe>X", "not labels of the task: maybe"),
        ("rule_qa", "verbalizer=letters", "has none"),
    ],
)
def test_a_verbalizer_that_does_not_apply_says_why(
    catalog: Catalog, task: str, spec: str, message: str
) -> None:
    with pytest.raises(VariantError, match=message):
        compile_prompt(parse_spec(spec), catalog.task(task))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("verbalizer=lettres", "did you mean 'letters'"),
        ("verbalizer=map:Yes", "OFFICIAL>SHOWN"),
        ("verbalizer=map:Yes>A/Yes>B", "maps 'Yes' twice"),
        ("order=-1", r"order \(or drawn\) must be an integer >= 0"),
        ("order=reversed", r"order \(or drawn\) must be an integer >= 0"),
        ("demos=none,order=1", "demos=none has none"),
    ],
)
def test_bad_specs_are_refused_before_any_task(spec: str, message: str) -> None:
    with pytest.raises(VariantError, match=message):
        parse_spec(spec)


def test_order_permutes_the_same_demonstrations(catalog: Catalog) -> None:
    task = catalog.task("hearsay")
    for spec in ("demos=base", "demos=4,seed=3"):
        plain = demonstrations(parse_spec(spec), task)
        orders = [demonstrations(parse_spec(f"{spec},order={s}"), task) for s in range(8)]
        for o in orders:
            assert Counter(o) == Counter(plain)  # the same rows, answers and all
        assert len({o for o in orders}) > 1  # and not always the same order
        assert any(o != plain for o in orders)
    # the draw is untouched: the bound rows are the draw's, the order is its own field
    drawn = bind(parse_spec("demos=4,seed=3"), task)
    ordered = bind(parse_spec("demos=4,seed=3,order=5"), task)
    assert drawn.demo_rows == ordered.demo_rows and drawn.id != ordered.id


def test_order_and_verbalizer_ids_are_stable_across_processes(catalog: Catalog) -> None:
    specs = ["order=4", "demos=4,seed=1,order=2,verbalizer=letters", "verbalizer=true_false"]
    task = catalog.task("hearsay")
    here = [bind(parse_spec(s), task).id for s in specs]
    rendered = ["".join(d.answer for d in compile_prompt(parse_spec(s), task).demos) for s in specs]
    code = (
        "import sys, json\n"
        "from promptlib import Catalog, default_source, parse_spec, compile_prompt\n"
        "from promptlib.demos import bind\n"
        "t = Catalog(default_source()).task('hearsay')\n"
        f"specs = {specs!r}\n"
        "print(json.dumps([[bind(parse_spec(s), t).id for s in specs],"
        " [''.join(d.answer for d in compile_prompt(parse_spec(s), t).demos) for s in specs]]))\n"
    )
    import json
    import os

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "7"},
    ).stdout
    assert json.loads(out) == [here, rendered]


def test_a_demonstration_answer_that_is_no_label_cannot_be_verbalized() -> None:
    from promptlib.verbalizers import shown_answer

    with pytest.raises(VariantError, match="'Perhaps' is none of the task's labels"):
        shown_answer((("Yes", "True"), ("No", "False")), "Perhaps", "task 'x'")
    assert Demo.of({"text": "a"}, "yes").answer == "yes"


def test_a_shown_word_that_is_another_classs_label_is_refused() -> None:
    """numbers on labels 0..4 would show choice 0 as "1", so a reply "1" (choice 1 in the
    prompt's own list) would be scored as choice 0: refused, as is a swap of Yes and No."""
    from promptlib.verbalizers import resolve

    with pytest.raises(VariantError, match="which is another of its labels"):
        resolve("numbers", ["0", "1", "2", "3", "4"], "scalr", "multi-class")
    with pytest.raises(VariantError, match="which is another of its labels"):
        resolve("map:Yes>No/No>Maybe", ["Yes", "No"], "hearsay", "binary")
    assert resolve("lower", ["Yes", "No"], "hearsay", "binary") == (("Yes", "yes"), ("No", "no"))


def test_a_prompt_that_still_names_the_official_labels_carries_a_note(catalog: Catalog) -> None:
    """ "Answer Yes or No." under true_false: a model that obeys it answers invalidly; the
    prompt says so (a sweep and a run print the note), without changing the prompt."""
    task = catalog.task("legal_reasoning_causality")
    noted = compile_prompt(parse_spec("verbalizer=true_false"), task, None)
    assert noted.notes and "still names 'Yes', 'No'" in noted.notes[0]
    assert compile_prompt(parse_spec("verbalizer=lower"), task, None).notes == ()
    assert compile_prompt(PromptVariant(), task, None).notes == ()
    assert compile_prompt(parse_spec("verbalizer=true_false"), catalog.task("hearsay")).notes == ()
