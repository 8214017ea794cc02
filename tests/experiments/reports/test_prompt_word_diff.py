"""`reports.html.diff.prompt_diff`: what the variant changed, not the row's text."""

from __future__ import annotations

from experiments.reports.html.diff import ROW_INPUT, prompt_diff


def _a(ops: tuple[tuple[str, str], ...]) -> str:
    """Prompt A as the diff shows it (the kept and removed pieces)."""
    return "".join(t for op, t in ops if op in "=-")


def _b(ops: tuple[tuple[str, str], ...]) -> str:
    return "".join(t for op, t in ops if op in "=+")


def test_only_the_changed_words_are_marked() -> None:
    a = "Answer Yes or No.\nQ: the cat\nA:"
    b = "Reply Yes or No please.\nQ: the cat\nA:"
    ops = prompt_diff(a, b)
    assert _a(ops) == a and _b(ops) == b
    assert [t for op, t in ops if op == "-"] == ["Answer", "No."]
    assert [t for op, t in ops if op == "+"] == ["Reply", "No please."]


def test_the_row_input_is_one_token_and_never_marked() -> None:
    row = "Alice said the light was red, and Bob heard it."
    a = f"Is this hearsay?\n{row}\nA:"
    b = f"Decide whether the evidence is hearsay.\n{row}\nA:"
    ops = prompt_diff(a, b, mask=row)
    assert all(row not in t and "Alice" not in t for _, t in ops)
    assert ("=", ROW_INPUT) in ops or any(ROW_INPUT in t for op, t in ops if op == "=")
    # without the mask the row's words are there, equal
    assert any("Alice" in t for op, t in prompt_diff(a, b) if op == "=")


def test_several_input_columns_are_all_masked_the_longest_first() -> None:
    a = "Clause: the seller shall deliver\nQuestion: deliver\nA:"
    b = "Read it.\nClause: the seller shall deliver\nQuestion: deliver\nA:"
    ops = prompt_diff(a, b, mask=["deliver", "the seller shall deliver"])
    text = _b(ops)
    assert text.count(ROW_INPUT) == 2 and "seller" not in text


def test_a_long_equal_run_is_collapsed_with_its_count() -> None:
    words = " ".join(f"w{i}" for i in range(40))
    ops = prompt_diff("X " + words, "Y " + words, context=3)
    (marker,) = [t for op, t in ops if op == "~"]
    assert marker == "… 34 words the same …"  # the 40 equal words, 3 kept each side
    kept = [t for op, t in ops if op == "="]
    assert kept[0].split() == ["w0", "w1", "w2"]
    assert kept[-1].split() == ["w37", "w38", "w39"]
    # short runs are kept whole
    assert not any(op == "~" for op, _ in prompt_diff("X a b c", "Y a b c", context=3))


def test_the_row_input_stays_visible_inside_a_collapsed_run() -> None:
    words = " ".join(f"w{i}" for i in range(30))
    ops = prompt_diff(f"A {words} Q: xx yy A:", f"B {words} Q: xx yy A:", mask="xx yy", context=3)
    assert any(op == "~" for op, _ in ops)
    assert any(ROW_INPUT in t for op, t in ops if op == "=")


def test_identical_prompts_give_equal_pieces_only_and_the_same_diff_every_time() -> None:
    ops = prompt_diff("same text here", "same text here")
    assert ops == (("=", "same text here"),)
    a, b = "p one two three", "p one 2 three"
    assert prompt_diff(a, b) == prompt_diff(a, b)


def test_masked_rows_of_one_pair_give_one_diff() -> None:
    """What lets the report store a pair's diff once: rows differing only in their input."""
    diffs = {
        prompt_diff(f"Instr A.\n{row}\nA:", f"Instr B.\n{row}\nA:", mask=row)
        for row in ("first row text", "a second, longer row of text", "third")
    }
    assert len(diffs) == 1


def test_a_run_hiding_only_a_few_words_is_shown_whole() -> None:
    words = " ".join(f"w{i}" for i in range(8))  # 2 * 3 kept + 2: not worth a marker
    ops = prompt_diff("X " + words, "Y " + words, context=3)
    assert not any(op == "~" for op, _ in ops)
    assert _b(ops) == "Y " + words
