"""A classification task's labels are what LegalBench states for it, not only the local rows.

The shipped data is often a sample (a 10-row test split, or none), so a label a full split
holds may be absent locally; `workbench score` must still accept a published predictions
file whose answer uses it. Each source of labels has a test on a small fake task in
LegalBench's layout: a label only that source gives is a label, a predictions file using it
is read, and a made-up label is still refused naming file and line. The data tests pin the
label tuples of tasks whose set did not change (trial ids depend on them).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

import pytest

from experiments.metrics import normalize
from experiments.trials.predictions import read_predictions
from promptlib import Catalog, LocalSource, TaskSpec, WorkbenchError
from promptlib.tasks import normalize_label
from tests.conftest import run_cli

BINARY = "# toy\n\n**Task type**: Binary classification\n"
QUERY = "Q: {{text}}\nA:"


def make_task(
    root: Path,
    name: str = "toy",
    *,
    train: list[str] | None = None,
    test: list[str] | None = None,
    readme: str = BINARY,
    **prompts: str,
) -> Path:
    """A task folder in LegalBench's layout: splits with these answers, README and prompts.

    `prompts` maps a file stem to its text: base_prompt="...", claude_prompt="...".
    """
    d = root / "tasks" / name
    d.mkdir(parents=True)
    for split, answers in (("train", train), ("test", test)):
        if answers is not None:
            body = "".join(f"{i}\t{a}\tfact {split} {i}\n" for i, a in enumerate(answers))
            (d / f"{split}.tsv").write_text("index\tanswer\ttext\n" + body)
    (d / "README.md").write_text(readme)
    for stem, text in prompts.items():
        (d / f"{stem}.txt").write_text(text)
    return root


def spec_of(root: Path, name: str = "toy") -> TaskSpec:
    return Catalog(LocalSource(root)).task(name).spec


def predictions(path: Path, *answers: str) -> Path:
    """A predictions file, one line per answer (generated exactly)."""
    rows = [{"generation": a, "answer": a} for a in answers]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read(spec: TaskSpec, path: Path) -> list[str]:
    """The answers `workbench score` reads from `path` with this spec's labels."""
    multi = spec.task_type == "multi-label"
    return read_predictions(path, spec.labels, multi_label=multi)[1]


def accepted_and_unknown_refused(spec: TaskSpec, tmp_path: Path, label: str) -> None:
    """`label` is scored; a made-up label on the next line is refused naming file:line."""
    ok = predictions(tmp_path / "ok.jsonl", label)
    assert read(spec, ok) == [label]
    bad = predictions(tmp_path / "bad.jsonl", label, "Made Up")
    message = rf"^{re.escape(str(bad))}:2: answer 'Made Up' is not a label of this task"
    with pytest.raises(WorkbenchError, match=message):
        read(spec, bad)


# ---- one test per source ---------------------------------------------------------------------
def test_every_split_gives_labels(tmp_path: Path) -> None:
    spec = spec_of(make_task(tmp_path, train=["Yes"], test=["No"], base_prompt=QUERY))
    assert spec.labels == ("No", "Yes")  # no Claude list: sorted, as before
    assert spec.sources_of("Yes") == ("train.tsv",)
    assert spec.sources_of("No") == ("test.tsv",)
    accepted_and_unknown_refused(spec, tmp_path, "No")


def test_prompt_demonstrations_give_labels(tmp_path: Path) -> None:
    base = "Decide.\n\nQ: one\nA: Yes\n\nQ: two\nA: No\n\n" + QUERY
    icl = "Q: three\nA: Yes\n\nQ: four\nA: Unclear\n\n" + QUERY
    # An application prompt's demonstrations answer with explanations: never labels.
    application = "Q: five\nA: No, because it is not offered for its truth.\n\n" + QUERY
    root = make_task(
        tmp_path, train=["Yes"], base_prompt=base, icl_0=icl, application_prompt=application
    )
    spec = spec_of(root)
    assert spec.labels == ("No", "Unclear", "Yes")
    assert spec.sources_of("No") == ("base_prompt.txt",)
    assert spec.sources_of("Unclear") == ("icl_0.txt",)
    assert spec.sources_of("Yes") == ("train.tsv", "base_prompt.txt", "icl_0.txt")
    assert "label No from base_prompt.txt, not in the local rows (train.tsv)" in spec.notes
    accepted_and_unknown_refused(spec, tmp_path, "Unclear")


def test_demonstrations_of_a_task_without_splits_give_labels(tmp_path: Path) -> None:
    """scalr ships no split: its base prompt's demonstration and Claude list give labels."""
    base = "Q: one\nA: 1\n\n" + QUERY
    claude = "Q: {{text}} Reply with either: 0, 1, 2\nA:"
    readme = "**Task type**: 3-way classification\n"
    spec = spec_of(make_task(tmp_path, readme=readme, base_prompt=base, claude_prompt=claude))
    assert spec.labels == ("0", "1", "2")
    assert spec.sources_of("2") == ("claude_prompt.txt",)
    assert "labels 0, 2 from claude_prompt.txt, no local rows" in spec.notes
    accepted_and_unknown_refused(spec, tmp_path, "2")


def test_claude_reply_list_gives_labels_in_its_order(tmp_path: Path) -> None:
    claude = "Decide.\n\nQ: {{text}} Reply with either: Yes, No, Unclear\nA:"
    spec = spec_of(make_task(tmp_path, train=["No", "Yes"], claude_prompt=claude))
    assert spec.labels == ("Yes", "No", "Unclear")
    assert spec.sources_of("Unclear") == ("claude_prompt.txt",)
    accepted_and_unknown_refused(spec, tmp_path, "Unclear")


def test_split_surface_form_wins_and_keeps_the_old_order(tmp_path: Path) -> None:
    """unfair_tos: the rows say 'Limitation of liability', Claude 'Limitation of Liability'."""
    claude = "Q: {{text}} Reply with either: Other, Limitation of Liability, Arbitration\nA:"
    readme = "**Task type**: 3-way classification\n"
    root = make_task(
        tmp_path, train=["Other", "Limitation of liability"], readme=readme, claude_prompt=claude
    )
    spec = spec_of(root)
    # One label per normalised form; the rows' form, placed (as before) after the Claude
    # labels whose exact text the rows use.
    assert spec.labels == ("Other", "Arbitration", "Limitation of liability")
    accepted_and_unknown_refused(spec, tmp_path, "LIMITATION OF LIABILITY")


def test_claude_list_not_in_the_answers_form_is_left_out(tmp_path: Path) -> None:
    """MAUD: Claude asks for 'Option A', the answers are 'A'; the README's options give A-C."""
    readme = (
        "**Task type**: 3-way classification\n\n"
        "```text\nOptions:\nA: Breach\nB: Inconsistent\nC: None\n```\n\n"
        "## Data column names\n\n- `label`: answer key to the question\n"
    )
    claude = "Q: {{text}} Reply with either: Option A, Option B, Option C\nA:"
    root = make_task(tmp_path, train=["B"], readme=readme, claude_prompt=claude)
    spec = spec_of(root)
    assert spec.labels == ("A", "B", "C")
    assert spec.sources_of("C") == ("README.md",)
    assert any(n.startswith("labels in claude_prompt.txt (Option A") for n in spec.notes)
    accepted_and_unknown_refused(spec, tmp_path, "C")
    bad = predictions(tmp_path / "option.jsonl", "Option A")
    with pytest.raises(WorkbenchError, match=r"option\.jsonl:1: answer 'Option A' is not a"):
        read(spec, bad)


@pytest.mark.parametrize(
    ("description", "new"),
    [
        ('whether it is hearsay ("Yes") or not ("No")', "No"),
        ("class label (Yes/No)", "No"),
        ("`Yes` if the clause says so, and `No` otherwise.", "No"),
        ("the answer. The choices are `Yes` or `No`.", "No"),
        ("whether it supports the sentence. Options: Yes, No.", "No"),
        ("the outcome. There are three options: Yes, No, other", "other"),
        ("the mark. There are three choices: Yes, No, and maybe.", "maybe"),
    ],
)
def test_readme_answer_column_gives_labels(tmp_path: Path, description: str, new: str) -> None:
    readme = f"{BINARY}\n## Data column names\n\n- `text`: a fact\n- `answer`: {description}\n"
    spec = spec_of(make_task(tmp_path, train=["Yes"], readme=readme))
    assert spec.labels is not None and new in spec.labels
    assert spec.sources_of(new) == ("README.md",)
    accepted_and_unknown_refused(spec, tmp_path, new)


def test_readme_prose_and_other_columns_give_no_labels(tmp_path: Path) -> None:
    readme = (
        f"{BINARY}\nThe answer is Yes, No or Perhaps (Yes/No/Perhaps).\n\n"
        "## Data column names\n\n- `text`: a fact (Yes/Perhaps)\n- `answer`: the answer\n"
    )
    spec = spec_of(make_task(tmp_path, train=["Yes", "No"], readme=readme))
    assert spec.labels == ("No", "Yes")
    bad = predictions(tmp_path / "p.jsonl", "Yes", "Perhaps")
    with pytest.raises(WorkbenchError, match=r"p\.jsonl:2: answer 'Perhaps' is not a label"):
        read(spec, bad)


def test_stated_labels_with_nothing_to_check_them_against_are_not_used(tmp_path: Path) -> None:
    claude = "Q: {{text}} Reply with either: Yes, No\nA:"
    spec = spec_of(make_task(tmp_path, base_prompt=QUERY, claude_prompt=claude))
    assert spec.labels is None
    assert any(
        "claude_prompt.txt (Yes, No) not used: there are no answers" in n for n in spec.notes
    )


def test_an_unreadable_prompt_file_is_a_note_not_a_broken_spec(tmp_path: Path) -> None:
    root = make_task(tmp_path, train=["Yes", "No"], base_prompt=QUERY)
    (root / "tasks" / "toy" / "icl_0.txt").write_bytes(b"Q: caf\xe9\nA: Yes\n\nQ: {{text}}\nA:")
    spec = spec_of(root)
    assert spec.labels == ("No", "Yes")
    assert any(n.startswith("labels: demonstrations of icl_0.txt not read") for n in spec.notes)


def test_multi_label_parts_from_every_source(tmp_path: Path) -> None:
    """successor_liability's type is multi-label: each comma-separated part is a label."""
    base = (
        "Facts: one\nException: express agreement, mere continuation\n\nFacts: {{text}}\nException:"
    )
    claude = (
        "Facts: {{text}} Reply with one or more of: express agreement, fraudulent "
        "conveyance, de facto merger, mere continuation\nException:"
    )
    root = make_task(
        tmp_path,
        "successor_liability",
        train=["de facto merger,mere continuation"],
        readme="**Task type**: 4-way classification\n",
        base_prompt=base,
        claude_prompt=claude,
    )
    spec = spec_of(root, "successor_liability")
    assert spec.task_type == "multi-label"
    assert spec.labels == (
        "de facto merger",
        "express agreement",
        "fraudulent conveyance",
        "mere continuation",
    )
    assert spec.sources_of("express agreement") == ("base_prompt.txt", "claude_prompt.txt")
    assert spec.sources_of("fraudulent conveyance") == ("claude_prompt.txt",)
    ok = predictions(
        tmp_path / "ok.jsonl", "fraudulent conveyance", "express agreement,de facto merger"
    )
    assert read(spec, ok) == ["fraudulent conveyance", "express agreement,de facto merger"]
    bad = predictions(tmp_path / "bad.jsonl", "mere continuation", "express agreement,alter ego")
    with pytest.raises(WorkbenchError, match=r"bad\.jsonl:2: answer 'alter ego' is not a label"):
        read(spec, bad)


@pytest.mark.slow
def test_workbench_score_accepts_a_label_missing_from_the_local_rows(tmp_path: Path) -> None:
    """End to end: the CLI scores a published file whose gold answer is only in the README."""
    readme = "**Task type**: 3-way classification\n\n```text\nOptions:\nA: x\nB: y\nC: z\n```\n"
    root = make_task(tmp_path / "lb", train=["B"], readme=readme, base_prompt=QUERY)
    f = tmp_path / "p.jsonl"
    f.write_text(
        "".join(
            json.dumps({"generation": g, "answer": a}) + "\n"
            for g, a in [("A", "A"), ("B", "B"), ("B", "C")]
        )
    )
    env = {**os.environ, "LEGALBENCH_DIR": str(root)}
    r = run_cli(["score", "toy", str(f), "--json"], env, tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n"] == 3
    bad = predictions(tmp_path / "bad.jsonl", "A", "D")
    r = run_cli(["score", "toy", str(bad)], env, tmp_path, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert f"{bad}:2: answer 'D' is not a label of this task" in r.stderr


def test_label_normalisation_is_legalbench_s() -> None:
    for text in ("Yes", " no. ", "De Facto-Merger", "Option A", "`Yes`", "(c)", ""):
        assert normalize_label(text) == normalize(text)


def test_to_json_adds_label_sources(tmp_path: Path) -> None:
    out = spec_of(make_task(tmp_path, train=["Yes", "No"])).to_json()
    assert out["labels"] == ["No", "Yes"]
    assert out["label_sources"] == {"No": ["train.tsv"], "Yes": ["train.tsv"]}
    extraction = make_task(tmp_path / "x", readme="**Task type**: extraction\n", train=["a"])
    assert spec_of(extraction).to_json()["label_sources"] is None


# ---- the real data ---------------------------------------------------------------------------
# Label tuples as the code before label sources computed them (git HEAD cf169be): their
# sets are unchanged, so the tuples, which feed trial ids, must be too.
PINNED: dict[str, tuple[str, ...]] = {
    "hearsay": ("Yes", "No"),
    "abercrombie": ("generic", "descriptive", "suggestive", "arbitrary", "fanciful"),
    "personal_jurisdiction": ("Yes", "No"),
    "cuad_audit_rights": ("Yes", "No"),
    "overruling": ("Yes", "No"),
    "international_citizenship_questions": ("No", "Yes"),
    "ucc_v_common_law": ("Common Law", "UCC"),
    "privacy_policy_qa": ("Relevant", "Irrelevant"),
    "insurance_policy_interpretation": ("A", "B", "C"),
    "oral_argument_question_purpose": (
        "Background",
        "Clarification",
        "Communicate",
        "Criticism",
        "Humor",
        "Implications",
        "Support",
    ),
    "unfair_tos": (
        "Arbitration",
        "Unilateral change",
        "Content removal",
        "Jurisdiction",
        "Choice of law",
        "Unilateral termination",
        "Contract by using",
        "Other",
        "Limitation of liability",
    ),
    "successor_liability": (
        "de facto merger",
        "express agreement",
        "fraudulent conveyance",
        "mere continuation",
    ),
}


def _rows_rule(catalog: Catalog, name: str) -> tuple[str, ...] | None:
    """The labels the code before label sources gave: the rows' answers, in its order."""
    task = catalog.task(name)
    frames = [task.table(s) for s in ("train", "test") if task.has_split(s)]
    if not frames:
        return None
    answers = [a for f in frames for a in f.column("answer")]
    if task.spec.task_type == "multi-label":
        answers = [a.strip() for ans in answers for a in ans.split(",")]
    seen = dict.fromkeys(answers)
    claude: list[str] = []
    if "claude_prompt.txt" in task.spec.prompt_files:
        m = re.search(r"Reply with either:\s*(.+)", task.files.read_prompt("claude_prompt.txt"))
        claude = [x.strip() for x in m.group(1).split(",")] if m else []
    order = [x for x in claude if x in seen]
    return tuple(order + sorted(a for a in seen if a not in order))


@pytest.mark.data
def test_label_tuples_of_unchanged_sets_are_pinned(catalog: Catalog) -> None:
    for name, labels in PINNED.items():
        assert catalog.task(name).spec.labels == labels, name


@pytest.mark.data
def test_only_maud_and_scalr_gain_labels_and_no_order_moves(catalog: Catalog) -> None:
    """On the shipped data the new sources add labels to 34 MAUD tasks and scalr only.

    Every other classification task keeps exactly the tuple the rows gave before.
    """
    gained = []
    for spec in catalog.specs():
        if not spec.is_classification:
            assert spec.labels is None and spec.label_sources == ()
            continue
        before = _rows_rule(catalog, spec.name)
        if before is not None and set(before) == set(spec.labels or ()):
            assert spec.labels == before, spec.name
        else:
            assert set(before or ()) < set(spec.labels or ()), spec.name
            gained.append(spec.name)
    assert len(gained) == 35
    assert set(gained) - {"scalr"} == {n for n in gained if n.startswith("maud_")}


@pytest.mark.data
def test_maud_options_come_from_the_readme(catalog: Catalog) -> None:
    spec = catalog.task("maud_cor_standard_(superior_offer)").spec
    assert spec.labels == tuple("ABCDEFGHIJ")
    assert spec.sources_of("B") == ("train.tsv", "base_prompt.txt", "README.md")
    assert spec.sources_of("J") == ("README.md",)
    assert any("claude_prompt.txt (Option A" in n and "not used" in n for n in spec.notes)
    assert catalog.task("scalr").spec.labels == ("0", "1", "2", "3", "4")


@pytest.mark.data
def test_successor_liability_accepts_every_exception_alone_and_combined(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.task("successor_liability").spec
    classes = ("express agreement", "fraudulent conveyance", "de facto merger", "mere continuation")
    assert set(spec.labels or ()) == set(classes)
    combos = [
        sep.join(c)
        for n in range(1, len(classes) + 1)
        for c in itertools.permutations(classes, n)
        for sep in (",", ", ")
    ]
    f = predictions(tmp_path / "all.jsonl", *combos)
    assert read(spec, f) == combos
    bad = predictions(tmp_path / "bad.jsonl", "de facto merger", "mere continuation,alter ego")
    with pytest.raises(WorkbenchError, match=r"bad\.jsonl:2: answer 'alter ego' is not a label"):
        read(spec, bad)
