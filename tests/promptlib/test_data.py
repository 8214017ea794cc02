"""Data sources: local LegalBench layout and the Hugging Face archive (download faked)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import datasets
import pytest

import promptlib.data as data_mod
from promptlib import (
    Catalog,
    DataError,
    HuggingFaceSource,
    LocalSource,
    TemplateError,
    UnknownTaskError,
    compile_prompt,
    parse_spec,
)

TRAIN = 'index\tanswer\ttext\tslice\n0\tNo\t"He said ""hi""."\ts1\n1\tYes\tShe ran.\ts2\n'
TEST = "index\tanswer\ttext\tslice\n0\tYes\tA fact.\ts1\n1\tNo\tAnother fact.\ts2\n"
BASE = 'Decide.\n\nQ: He said "hi". Is it?\nA: No\n\nQ: {{text}} Is it?\nA:'


def make_task(root: Path, name: str = "toy", prompts: bool = True) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "train.tsv").write_text(TRAIN)
    (d / "test.tsv").write_text(TEST)
    if prompts:
        (d / "base_prompt.txt").write_text(BASE)
        (d / "README.md").write_text("**Task type**: Binary classification\n")
    return d


def test_local_source_keeps_every_column_as_strings(tmp_path: Path) -> None:
    make_task(tmp_path / "tasks")
    task = Catalog(LocalSource(tmp_path)).task("toy")
    ds = task.dataset("test")
    assert isinstance(ds, datasets.Dataset)
    assert ds.column_names == ["index", "answer", "text", "slice"]
    assert task.rows("train")[0]["text"] == 'He said "hi".'
    assert task.spec.labels is not None and set(task.spec.labels) == {"Yes", "No"}
    assert task.spec.task_type == "binary"
    assert (task.spec.n_train, task.spec.n_test) == (2, 2)


def test_unknown_task_suggests_a_name(tmp_path: Path) -> None:
    make_task(tmp_path, "hearsay")
    with pytest.raises(UnknownTaskError, match="did you mean 'hearsay'"):
        LocalSource(tmp_path).task("hearsey")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist; set LEGALBENCH_DIR"):
        LocalSource(tmp_path / "nope")


def test_malformed_tsv_names_file_and_line(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "test.tsv").write_text("index\tanswer\ttext\n0\tYes\tok\n1\tNo\ttoo\tmany\tfields\n")
    task = Catalog(LocalSource(tmp_path)).task("toy")
    with pytest.raises(DataError, match=r"test\.tsv: not a valid LegalBench TSV.*line 3"):
        task.frame("test")


def test_missing_answer_column(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "test.tsv").write_text("index\tlabel\ttext\n0\tYes\tok\n")
    with pytest.raises(DataError, match="no 'answer' column"):
        Catalog(LocalSource(tmp_path)).task("toy").frame("test")


def test_placeholder_for_a_missing_column(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "base_prompt.txt").write_text("Q: {{question}}\nA:")
    task = Catalog(LocalSource(tmp_path)).task("toy")
    with pytest.raises(TemplateError, match=r"toy/base_prompt.txt.*\{\{question\}\}.*test\.tsv"):
        compile_prompt(parse_spec("base"), task, "test")


def _archive(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    make_task(src / "data", "toy", prompts=False)
    make_task(src / "data", "other", prompts=False)
    tgz = tmp_path / "data.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(src / "data", arcname="data")
    return tgz


def test_hugging_face_archive_is_downloaded_once_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tgz = _archive(tmp_path)
    calls: list[int] = []

    def fake_download() -> str:
        calls.append(1)
        return str(tgz)

    monkeypatch.setattr(data_mod, "_hf_download", fake_download)
    cache = tmp_path / "cache"
    src = HuggingFaceSource(cache)
    assert src.names() == ("other", "toy")
    task = Catalog(src).task("toy")
    assert task.dataset("train").num_rows == 2
    assert task.spec.prompt_files == ()
    with pytest.raises(DataError, match=r"no prompt files.*--prompts-dir"):
        compile_prompt(parse_spec("base"), task)
    HuggingFaceSource(cache)  # cached: no second download
    assert len(calls) == 1

    prompts = tmp_path / "prompts" / "tasks"
    make_task(prompts, "toy")
    with_prompts = Catalog(HuggingFaceSource(cache, prompts_dir=tmp_path / "prompts"))
    toy = with_prompts.task("toy")
    out = compile_prompt(parse_spec("base"), toy).render(toy.rows("test")[0])
    assert out.endswith("Q: A fact. Is it?\nA:")


def test_corrupt_archive_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "data.tar.gz"
    bad.write_bytes(b"not a tarball")
    monkeypatch.setattr(data_mod, "_hf_download", lambda: str(bad))
    with pytest.raises(DataError, match="cannot extract"):
        HuggingFaceSource(tmp_path / "cache")
    assert not (tmp_path / "cache" / "legalbench-hf").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


@pytest.mark.data
def test_tsv_reader_agrees_with_pandas_on_every_legalbench_file(lb_dir: Path) -> None:
    """The stdlib reader must parse every shipped TSV exactly as pandas does."""
    import csv

    import pandas as pd

    from promptlib.data import read_tsv

    files = sorted((lb_dir / "tasks").glob("*/*.tsv"))
    assert len(files) > 200
    for path in files:
        ours = read_tsv(path)
        theirs = pd.read_csv(
            path, sep="\t", dtype=str, keep_default_na=False, quoting=csv.QUOTE_MINIMAL
        )
        assert list(ours.columns) == list(theirs.columns), path
        assert [list(r.values()) for r in ours.rows] == theirs.values.tolist(), path
