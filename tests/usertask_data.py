"""Synthetic labelled rows for the `workbench task new` tests: data no shipped file holds.

`clauses(n, seed)` makes n short contract clauses, half answering "Does the clause restrict
disclosure to third parties?" with Yes, half with No, each with a slice (the contract kind);
the writers save them as CSV, JSONL or Parquet.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

_PARTY = ["The Recipient", "The Supplier", "The Employee", "The Licensee", "Each party",
          "The Contractor", "The Processor", "The Buyer"]  # fmt: skip
_INFO = ["Confidential Information", "the pricing schedule", "customer records", "the source code",
         "trade secrets", "the test results", "the business plan", "personal data"]  # fmt: skip
_OUTSIDE = ["any third party", "any competitor", "persons outside its organisation",
            "the press", "any subcontractor"]  # fmt: skip
_YES = [
    "{p} shall not disclose {i} to {o} without prior written consent.",
    "{p} must keep {i} secret and may not share it with {o}.",
    "{p} agrees not to reveal {i} to {o} during the term or after it.",
    "{p} may pass {i} only to staff who need it, and never to {o}.",
]
_NO = [
    "{p} shall pay for {i} within thirty days of the invoice date.",
    "{p} may terminate this agreement on sixty days' notice if {i} is late.",
    "{p} warrants that {i} is accurate on the date it is delivered.",
    "{p} shall store {i} in a fire-proof archive for seven years.",
]
KINDS = ["nda", "employment", "supply"]
HEADER = ["clause_text", "restricts", "kind"]


def clauses(n: int = 60, seed: int = 11) -> list[dict[str, str]]:
    """n distinct clauses, labels alternating Yes/No (shuffled), a `kind` slice on each."""
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    while len(rows) < n:
        yes = len(rows) % 2 == 0
        template = rng.choice(_YES if yes else _NO)
        text = template.format(p=rng.choice(_PARTY), i=rng.choice(_INFO), o=rng.choice(_OUTSIDE))
        if text in seen:
            continue
        seen.add(text)
        rows.append({"clause_text": text, "restricts": "Yes" if yes else "No",
                     "kind": rng.choice(KINDS)})  # fmt: skip
    rng.shuffle(rows)
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], header: list[str] | None = None) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header or list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
    return path
