"""`workbench import` never stores a key: source files go to MLflow byte for byte, so a file
holding one, however it is encoded (inside an inspect_ai .eval zip, gzip'd, JSON-escaped in
promptfoo's results), is refused with one line naming the file and where the key is, exit 2,
and nothing is stored: no key in any file of the MLflow store (sqlite and artifacts).

Issue 30: defect 2 (a key in an .eval log was stored, the check read the compressed zip as
text) and defect 13 (a key written ``sk\\u002d...`` in promptfoo's results passed)."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.experiments.imports.conftest import Workbench, lines, write_jsonl
from tests.experiments.imports.interop_stub import need
from tests.secret_sinks import leaks

pytestmark = pytest.mark.data

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
INSPECT_A, INSPECT_B = DATA / "inspect" / "stub_a.eval", DATA / "inspect" / "stub_b.eval"
PROMPTFOO = DATA / "promptfoo" / "results.json"
ENV_KEY = "q7Zsecretvalue9931-provider"  # a key of no known shape, in the environment
SHAPED = "sk-proj-Abc0123456789xyzXYZ"  # a key of a known shape, in no environment variable
ROWS = lines({"A": [1, 0, 1, 1, 0, 1, 0, 1], "B": [0, 0, 1, 0, 0, 1, 0, 0]})


@pytest.fixture
def wb(tmp_path: Path, lb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", ENV_KEY)
    (tmp_path / "store").mkdir()
    (tmp_path / "src").mkdir()
    return Workbench(tmp_path / "store", lb_dir, monkeypatch)


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _refused(wb: Workbench, fmt: str, path: Path, *words: str) -> None:
    """One line on stderr naming the file and `words`, exit 2, and no key in the store."""
    out = wb("import", fmt, str(path), "--task", "hearsay", "--name", "k", "--n-resamples", "200")
    assert out.exit_code == 2, out.output
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    for w in words:
        assert w in err, err
    assert ENV_KEY not in out.output and SHAPED[3:] not in out.output
    assert wb.runs("k") == []
    assert leaks(wb.root, ENV_KEY) == [] and leaks(wb.root, SHAPED) == []


def _keyed_eval(src: Path, where: str) -> tuple[Path, str]:
    """stub_a.eval as inspect_ai writes it (zstd-compressed zip members), a key in one
    sample's completion (a provider error echoed into the output) or in the eval spec."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(INSPECT_A))
    member = "eval.model_args.api_key"  # in header.json and _journal/start.json
    if where == "completion":
        sample = log.samples[2]
        sample.output.completion += f" (401: key {ENV_KEY} rejected)"
        member = f"member samples/{sample.id}_epoch_{sample.epoch}.json"
    else:
        log.eval.model_args = {"api_key": SHAPED}
    path = src / "keyed.eval"
    write_eval_log(log, str(path))
    assert ENV_KEY.encode() not in path.read_bytes()  # compressed: no plain-text search finds it
    assert SHAPED.encode() not in path.read_bytes()
    return path, member


@pytest.mark.parametrize("where", ["completion", "model_args"])
def test_defect_2_a_key_inside_an_eval_zip_is_refused(
    wb: Workbench, tmp_path: Path, where: str
) -> None:
    """The .eval log's members are compressed: the key is found once they are opened, and
    the line names the member (and the JSON path in it)."""
    need("inspect_ai")
    path, member = _keyed_eval(tmp_path / "src", where)
    _refused(wb, "inspect", path, member, "--no-track")


@pytest.mark.parametrize("escape", ["dash", "all"])
def test_defect_13_a_json_escaped_key_in_promptfoo_results_is_refused(
    wb: Workbench, tmp_path: Path, escape: str
) -> None:
    """promptfoo's results with a provider's reply echoing a key, written with JSON's
    escapes (``sk\\u002dproj...``, or every character escaped): decoded, it is a key."""
    data = json.loads(PROMPTFOO.read_text())
    data["results"]["results"][3]["response"]["output"] += f" Bearer {SHAPED}"
    text = json.dumps(data)
    escaped = SHAPED.replace("-", "\\u002d") if escape == "dash" else _escaped(SHAPED)
    path = tmp_path / "src" / "results.json"
    path.write_text(text.replace(SHAPED, escaped))
    assert SHAPED not in path.read_text()
    _refused(wb, "promptfoo", path, "an API key (sk-…)", "results.results[3].response.output")


SOURCES: list[tuple[str, str, Callable[[Path], Path], list[str]]] = [
    ("gzip'd jsonl", "jsonl",
     lambda d: _write(d / "rows.jsonl.gz", gzip.compress(_jsonl(error=f"401 {ENV_KEY}"))), []),
    ("jsonl, a JSON-escaped key", "jsonl",
     lambda d: _write(d / "rows.jsonl", _jsonl(error=SHAPED).replace(b"-", b"\\u002d")),
     ["line 1", "error"]),
    ("jsonl, a credential's field", "jsonl",
     lambda d: _write(d / "rows.jsonl", _jsonl(provider={"api_key": "zz9unshapedvalue"})),
     ["field 'api_key'"]),
    ("promptfoo, a provider's apiKey kept in the config", "promptfoo", lambda d: _pf_config(d),
     ["field 'apiKey'", "config.providers[0].config.apiKey"]),
    ("a zip of a keyed jsonl, given as jsonl", "jsonl",
     lambda d: _write(d / "rows.jsonl", _zipped(_jsonl(error=ENV_KEY))), []),
]  # fmt: skip


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _jsonl(**extra: object) -> bytes:
    return "".join(json.dumps(r | extra) + "\n" for r in ROWS).encode()


def _zipped(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("rows.jsonl", data)
    return buf.getvalue()


def _pf_config(d: Path) -> Path:
    data = json.loads(PROMPTFOO.read_text())
    data["config"]["providers"][0]["config"]["apiKey"] = ENV_KEY
    return _write(d / "results.json", json.dumps(data).encode())


@pytest.mark.parametrize(("case", "fmt", "make", "words"), SOURCES, ids=[c[0] for c in SOURCES])
def test_no_source_stores_a_key(
    wb: Workbench,
    tmp_path: Path,
    case: str,
    fmt: str,
    make: Callable[[Path], Path],
    words: list[str],
) -> None:
    """Each way a key can sit in a source: refused (or unreadable), and the store holds no
    key afterwards, in any file."""
    need("inspect_ai")
    _refused(wb, fmt, make(tmp_path / "src"), *words)


@pytest.mark.slow
def test_the_real_tools_files_import_tracked(wb: Workbench, tmp_path: Path) -> None:
    """No false alarm: inspect_ai's, lm-eval's and promptfoo's own files pass the check and
    are stored (promptfoo writes its apiKey as [REDACTED]; inspect_ai's call_key, the
    log-probabilities' "token" fields are no keys)."""
    need("inspect_ai")
    (results,) = (DATA / "lmeval").glob("results_*.json")
    for fmt, paths in (
        ("inspect", [INSPECT_A, INSPECT_B]),
        ("lm-eval", [results]),
        ("promptfoo", [PROMPTFOO]),
    ):
        out = wb("import", fmt, *map(str, paths), "--task", "hearsay", "--name", fmt,
                 "--n-resamples", "200")  # fmt: skip
        assert out.exit_code == 0, (fmt, out.output)
        assert len(wb.runs(fmt)) > 1


def test_a_clean_copy_of_a_refused_file_imports(wb: Workbench, tmp_path: Path) -> None:
    """The refusal is the key's, not the format's: the same rows without it are stored."""
    keyed = write_jsonl(tmp_path / "src" / "keyed.jsonl", [r | {"e": SHAPED} for r in ROWS])
    _refused(wb, "jsonl", keyed, "line 1")
    clean = shutil.copy(keyed, tmp_path / "src" / "clean.jsonl")
    Path(clean).write_text(keyed.read_text().replace(SHAPED, "no key here"))
    out = wb(
        "import", "jsonl", str(clean), "--task", "hearsay", "--name", "k", "--n-resamples", "200"
    )
    assert out.exit_code == 0, out.output
    assert len(wb.runs("k")) > 1
