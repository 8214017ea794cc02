"""Bad inputs give one clear line (a `WorkbenchError`), never a traceback.

The table-driven test runs `python -m experiments.cli` on a copy of two LegalBench tasks
broken in one way per case, and checks: exit code 2, one line on stderr naming the file or
field, no traceback, nothing on stdout. The other tests cover the library API directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

import promptlib.data as data_mod
from promptlib import (
    Catalog,
    DataError,
    HuggingFaceSource,
    LocalSource,
    PromptVariant,
    TaskProblem,
    TaskSpec,
    VariantError,
    parse_spec,
    sample_demos,
)
from promptlib.data import MAX_TEXT_BYTES, read_text, read_tsv
from promptlib.variants import DemoRef

REPO = Path(__file__).resolve().parents[2]
TASKS = ("hearsay", "abercrombie")


def workbench(
    *args: str, data_dir: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "LEGALBENCH_DIR"}
    if data_dir is not None:
        base["LEGALBENCH_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=REPO,
        timeout=120,
    )


def assert_one_clear_line(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout == "", r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def lb_copy(tmp_path: Path, lb_dir: Path) -> Path:
    """A LegalBench-layout copy of two tasks under tmp_path, free to break."""
    root = tmp_path / "lb"
    for name in TASKS:
        shutil.copytree(lb_dir / "tasks" / name, root / "tasks" / name)
    return root


def _spoil_line(path: Path, line: int, junk: bytes = b"\xff\xfe") -> None:
    """Append bytes that are not UTF-8 to a line (1-based) of a file."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] += junk
    path.write_bytes(b"\n".join(lines))


def _yaml(path: Path, body: bytes = b"text: Decide.\n") -> Path:
    path.write_bytes(body)
    return path


# Each case: (id, setup(root, tmp) -> CLI args, substrings the error line must contain).
Case = tuple[str, Callable[[Path, Path], list[str]], tuple[str, ...]]


def _non_utf8_prompt(root: Path, tmp: Path) -> list[str]:
    _spoil_line(root / "tasks" / "hearsay" / "base_prompt.txt", 2)
    return ["render", "hearsay", "--limit", "1"]


def _non_utf8_tsv(root: Path, tmp: Path) -> list[str]:
    _spoil_line(root / "tasks" / "hearsay" / "test.tsv", 3)
    return ["render", "hearsay", "--limit", "1"]


def _non_utf8_readme(root: Path, tmp: Path) -> list[str]:
    _spoil_line(root / "tasks" / "hearsay" / "README.md", 1)
    return ["render", "hearsay", "--limit", "1"]


def _non_utf8_instruction(root: Path, tmp: Path) -> list[str]:
    f = _yaml(tmp / "instr.yaml", b"text: |\n  Decide \xff whether.\n")
    return ["render", "hearsay", "--variant", f"instruction_file={f}"]


def _non_utf8_register(root: Path, tmp: Path) -> list[str]:
    f = _yaml(tmp / "reg.yaml", b"text: 'Q: {{text}} \xe9\n\n  A:'\n")
    return ["render", "hearsay", "--variant", f"register_file={f},demos=none"]


def _malformed_yaml(root: Path, tmp: Path) -> list[str]:
    f = _yaml(tmp / "bad.yaml", b"text: [unclosed\n  more: {\n")
    return ["render", "hearsay", "--variant", f"instruction_file={f}"]


def _instruction_dir(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", f"instruction_file={tmp}"]


def _register_dir(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", f"register_file={tmp}"]


def _instruction_dev_zero(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", "instruction_file=/dev/zero"]


def _huge_register(root: Path, tmp: Path) -> list[str]:
    f = _yaml(tmp / "huge.yaml", b"text: '" + b"x" * (MAX_TEXT_BYTES + 10) + b"'\n")
    return ["render", "hearsay", "--variant", f"register_file={f}"]


def _duplicate_column(root: Path, tmp: Path) -> list[str]:
    tsv = root / "tasks" / "hearsay" / "test.tsv"
    text = tsv.read_text(encoding="utf-8")
    tsv.write_text(text.replace("index\tanswer\ttext\tslice", "index\tanswer\ttext\ttext", 1))
    return ["render", "hearsay", "--limit", "1"]


def _negative_seed(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", "demos=4,seed=-1"]


def _zero_demos(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", "demos=0,seed=1"]


def _negative_demos(root: Path, tmp: Path) -> list[str]:
    return ["render", "hearsay", "--variant", "demos=-2,seed=1"]


CASES: list[Case] = [
    ("non-utf8-prompt", _non_utf8_prompt, ("base_prompt.txt", "not UTF-8", "line 2")),
    ("non-utf8-tsv", _non_utf8_tsv, ("test.tsv", "not UTF-8", "line 3")),
    ("non-utf8-readme", _non_utf8_readme, ("README.md", "not UTF-8", "line 1")),
    ("non-utf8-instruction", _non_utf8_instruction, ("instr.yaml", "not UTF-8", "line 2")),
    ("non-utf8-register", _non_utf8_register, ("reg.yaml", "not UTF-8", "line 1")),
    ("malformed-yaml", _malformed_yaml, ("bad.yaml", "malformed YAML")),
    ("instruction-dir", _instruction_dir, ("instruction_file", "is a directory")),
    ("register-dir", _register_dir, ("register_file", "is a directory")),
    ("instruction-dev-zero", _instruction_dev_zero, ("/dev/zero", "is a device")),
    ("register-too-large", _huge_register, ("huge.yaml", str(MAX_TEXT_BYTES))),
    ("duplicate-column", _duplicate_column, ("test.tsv", "column 'text' appears 2 times")),
    ("negative-seed", _negative_seed, ("seed must be an integer >= 0", "'-1'")),
    ("zero-demos", _zero_demos, ("demos=k must be an integer >= 1", "demos=none")),
    ("negative-demos", _negative_demos, ("demos=k must be an integer >= 1", "'-2'")),
]


@pytest.mark.data
@pytest.mark.parametrize(("setup", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(
    lb_copy: Path,
    tmp_path: Path,
    setup: Callable[[Path, Path], list[str]],
    needles: tuple[str, ...],
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args = setup(lb_copy, scratch)
    assert_one_clear_line(workbench(*args, data_dir=lb_copy), *needles)


@pytest.mark.data
def test_one_broken_task_does_not_hide_the_others(lb_copy: Path) -> None:
    """`tasks` lists every task, the broken one with its error (stdout and stderr), exit 1."""
    bad = lb_copy / "tasks" / "hearsay" / "test.tsv"
    _spoil_line(bad, 3)

    r = workbench("tasks", data_dir=lb_copy)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    out = r.stdout.strip().splitlines()
    assert len(out) == 3 and out[0].split()[:2] == ["task", "type"]  # the header
    assert out[1].startswith("abercrombie ") and "multi-class" in out[1]
    assert out[2].startswith("hearsay ") and f"{bad}: not UTF-8 text (line 3" in out[2]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: task 'hearsay': ") and str(bad) in err[0]

    j = workbench("tasks", "--json", data_dir=lb_copy)
    assert j.returncode == 1 and "Traceback" not in j.stderr
    rows = json.loads(j.stdout)
    assert [r["name"] for r in rows] == ["abercrombie", "hearsay"]
    assert "error" not in rows[0] and rows[0]["n_test"] > 0
    assert set(rows[1]) == {"name", "error"} and str(bad) in rows[1]["error"]

    # Asking for the broken task itself still fails with its one-line error.
    assert_one_clear_line(workbench("render", "hearsay", data_dir=lb_copy), str(bad), "line 3")
    ok = workbench("render", "abercrombie", "--limit", "1", data_dir=lb_copy)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.data
def test_survey_lists_specs_and_problems(lb_copy: Path) -> None:
    (lb_copy / "tasks" / "hearsay" / "train.tsv").write_text(
        'index\tanswer\ttext\tslice\n0\tNo\t"never closed\tx\n', encoding="utf-8"
    )
    catalog = Catalog(LocalSource(lb_copy))
    good, broken = catalog.survey()
    assert isinstance(good, TaskSpec) and good.name == "abercrombie"
    assert isinstance(broken, TaskProblem) and broken.name == "hearsay"
    assert "train.tsv: not a valid LegalBench TSV (line 2" in broken.error
    assert broken.to_json() == {"name": "hearsay", "error": broken.error}
    with pytest.raises(DataError, match=r"train\.tsv"):
        catalog.specs()


def test_tsv_duplicate_column_and_non_utf8_line(tmp_path: Path) -> None:
    dup = tmp_path / "dup.tsv"
    dup.write_text("index\tanswer\ttext\tanswer\n0\tYes\tok\tNo\n")
    with pytest.raises(DataError, match=r"dup\.tsv: column 'answer' appears 2 times"):
        read_tsv(dup)
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"index\tanswer\ttext\n0\tYes\tok\n1\tNo\tcaf\xe9\n")
    with pytest.raises(DataError, match=r"bad\.tsv: not UTF-8 text \(line 3: byte 0xe9\)"):
        read_tsv(bad)


def test_read_text_caps_size_and_rejects_directories_and_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="/dev/zero is a device, not a regular file"):
        read_text(Path("/dev/zero"), "prompt file")
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(VariantError, match=r"big\.txt is larger than"):
        read_text(big, "register_file: file", VariantError)
    exact = tmp_path / "exact.txt"
    exact.write_bytes(b"a" * MAX_TEXT_BYTES)
    assert len(read_text(exact, "prompt file")) == MAX_TEXT_BYTES
    with pytest.raises(DataError, match="is a directory"):
        read_text(tmp_path, "prompt file")
    with pytest.raises(DataError, match="does not exist"):
        read_text(tmp_path / "nope.txt", "prompt file")
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"Q: {{text}}\r\nA:\rB")
    assert read_text(crlf, "prompt file") == "Q: {{text}}\nA:\nB"


def test_instruction_and_register_files_are_checked(tmp_path: Path) -> None:
    with pytest.raises(VariantError, match=r"instruction_file: file .* is a directory"):
        parse_spec(f"instruction_file={tmp_path}")
    with pytest.raises(VariantError, match=r"register_file: file /dev/zero is a device"):
        parse_spec("register_file=/dev/zero")
    latin1 = _yaml(tmp_path / "latin1.yaml", b"text: |\n  line one\n  caf\xe9\n")
    with pytest.raises(VariantError, match=r"latin1\.yaml is not UTF-8 text \(line 3"):
        parse_spec(f"instruction_file={latin1}")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("demos=4,seed=-1", r"seed must be an integer >= 0, got '-1'"),
        ("demos=0,seed=1", r"demos=k must be an integer >= 1, got '0'"),
        ("demos=-3,seed=1", r"demos=k must be an integer >= 1, got '-3'"),
        ("demos=+2,seed=1,pool=train", None),
    ],
)
def test_seed_and_k_bounds_in_specs(spec: str, message: str | None) -> None:
    if message is None:
        assert parse_spec(spec).k == 2
        return
    with pytest.raises(VariantError, match=message):
        parse_spec(spec)


def test_seed_and_k_bounds_in_the_api() -> None:
    with pytest.raises(VariantError, match="seed must be an integer >= 0"):
        PromptVariant().with_demos(4, seed=-1)
    with pytest.raises(VariantError, match="seed must be an integer >= 0"):
        PromptVariant.from_dict({"demos": "sample", "k": 2, "seed": -5})
    with pytest.raises(VariantError, match="integer k >= 1"):
        PromptVariant.from_dict({"demos": "sample", "k": 0, "seed": 1})
    with pytest.raises(VariantError, match="seed must be an integer >= 0"):
        PromptVariant.from_dict({"demos": "sample", "k": 2, "seed": "3"})
    rows = [(DemoRef("train", str(i)), {"answer": "Yes" if i % 2 else "No"}) for i in range(6)]
    with pytest.raises(VariantError, match="k >= 1 and seed >= 0"):
        sample_demos(rows, 2, -1)
    with pytest.raises(VariantError, match="k >= 1 and seed >= 0"):
        sample_demos(rows, -2, 0)


# ---- Hugging Face archive: concurrent extraction, offline download -------------------------
def _archive(tmp_path: Path, n_tasks: int = 30) -> Path:
    src = tmp_path / "src" / "data"
    for i in range(n_tasks):
        d = src / f"task{i:02d}"
        d.mkdir(parents=True)
        (d / "train.tsv").write_text(f"index\tanswer\ttext\n0\tYes\ttrain of {i}\n")
        (d / "test.tsv").write_text(f"index\tanswer\ttext\n0\tNo\ttest of {i}\n")
    tgz = tmp_path / "data.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(src, arcname="data")
    return tgz


# Run in a subprocess: extracts through HuggingFaceSource, but holds its final rename until
# the other process has extracted too, so both really race for the destination.
_EXTRACT = """
import os, sys, time
from pathlib import Path
from promptlib.data import HuggingFaceSource

archive, cache, me, other = sys.argv[1:]
real_replace = os.replace

def replace_when_both_extracted(src, dst):
    Path(me).touch()
    deadline = time.monotonic() + 60
    while not Path(other).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    real_replace(src, dst)

os.replace = replace_when_both_extracted
print(len(HuggingFaceSource(cache, download=lambda: archive).names()))
"""


def test_concurrent_extractions_both_succeed(tmp_path: Path) -> None:
    tgz = _archive(tmp_path)
    script = tmp_path / "extract.py"
    script.write_text(_EXTRACT)
    cache = tmp_path / "cache"
    flags = [tmp_path / "a.ready", tmp_path / "b.ready"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tgz), str(cache), str(me), str(other)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for me, other in (flags, flags[::-1])
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "30"
    assert all(f.exists() for f in flags)  # both reached the rename
    # One complete copy, nothing half-extracted left behind.
    assert [p.name for p in cache.iterdir()] == ["legalbench-hf"]
    tsvs = sorted((cache / "legalbench-hf").rglob("*.tsv"))
    assert len(tsvs) == 60
    assert (
        (cache / "legalbench-hf" / "data" / "task07" / "test.tsv")
        .read_text()
        .endswith("test of 7\n")
    )


def test_extraction_that_loses_the_race_uses_the_winners_copy(tmp_path: Path) -> None:
    tgz = _archive(tmp_path, n_tasks=2)
    dest = tmp_path / "cache" / "legalbench-hf"
    (dest / "data" / "theirs").mkdir(parents=True)
    (dest / "data" / "theirs" / "test.tsv").write_text("index\tanswer\n0\tYes\n")
    data_mod._extract_atomically(tgz, dest)
    assert sorted(p.name for p in (dest / "data").iterdir()) == ["theirs"]
    assert [p.name for p in dest.parent.iterdir()] == ["legalbench-hf"]


def _offline_errors() -> list[BaseException]:
    from huggingface_hub.errors import LocalEntryNotFoundError

    errors: list[BaseException] = [
        LocalEntryNotFoundError(
            "An error happened while trying to locate the file on the Hub and we cannot find "
            "the requested files in the local cache.\nPlease check your connection."
        ),
        ConnectionError("[Errno -3] Temporary failure in name resolution"),
    ]
    try:
        import requests

        errors.append(requests.exceptions.ConnectionError("Max retries exceeded"))
    except ImportError:
        pass
    try:
        import httpx

        errors.append(httpx.ConnectError("[Errno -3] Temporary failure in name resolution"))
    except ImportError:
        pass
    return errors


@pytest.mark.parametrize("error", _offline_errors(), ids=lambda e: type(e).__name__)
def test_offline_download_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    def offline() -> str:
        raise error

    monkeypatch.setattr(data_mod, "_hf_download", offline)
    with pytest.raises(DataError) as info:
        HuggingFaceSource(tmp_path / "cache")
    msg = str(info.value)
    assert msg.startswith("cannot download nguha/legalbench from Hugging Face (")
    assert type(error).__name__ in msg
    assert msg.endswith("check the network or use LEGALBENCH_DIR / --data-dir with a local copy")
    assert "\n" not in msg
    assert not (tmp_path / "cache" / "legalbench-hf").exists()


@pytest.mark.slow
def test_hf_offline_cli_is_one_clear_line(tmp_path: Path) -> None:
    """With HF_HUB_OFFLINE=1 and an empty cache, huggingface_hub refuses without any network."""
    r = workbench(
        "tasks",
        "--hf",
        env={
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf"),
            "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"),
        },
    )
    assert_one_clear_line(r, "cannot download nguha/legalbench", "LEGALBENCH_DIR / --data-dir")
