"""A trial's predictions.jsonl has one writer and one reader (issue 32,
`experiments.trials.predictions`): runs/ and MLflow write the same bytes, and every reader
(the sweep's resume, `Tracker.load_predictions`, grading) gets `Prediction`s, not dicts."""

from __future__ import annotations

import json

import pytest

from experiments.trials.predictions import decode_predictions, encode_predictions
from experiments.trials.record import Prediction

ROWS = [
    Prediction("1", "ab" * 8, "Yes", " Yes", "Yes", True, 12, 1, 0.25, False),
    Prediction("7", "cd" * 8, "No", None, None, None, error="timed out", attempts=3),
    Prediction("9", "ef" * 8, "Oui", "Sí ✓", "Oui", True, scored="Oui", redacted=1),
]


def test_the_stored_bytes_are_one_object_per_line_as_before() -> None:
    text = encode_predictions(ROWS)
    assert text == "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in ROWS)
    assert "Sí ✓" in text  # UTF-8, not \\u escapes
    assert '"scored"' in text.splitlines()[2] and '"scored"' not in text.splitlines()[0]


def test_what_is_written_reads_back_as_the_same_predictions() -> None:
    assert decode_predictions(encode_predictions(ROWS)) == ROWS


def test_an_old_row_reads_back_with_the_defaults_of_the_keys_it_lacks() -> None:
    old = '{"index": 3, "answer": "No", "generation": "No", "correct": true}\n\n'
    (row,) = decode_predictions(old)
    assert row == Prediction("3", "", "No", "No", None, True)  # prompt hash: filled later


@pytest.mark.parametrize(
    ("text", "error"),
    [("not json\n", ValueError), ('{"index": "1"}\n', KeyError), ("[1, 2]\n", KeyError)],
)
def test_a_file_that_is_no_predictions_is_refused(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_predictions(text)
