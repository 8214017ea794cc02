"""`experiments.generate` in process, with a scripted generator: the file and its provenance,
refused candidates, output paths and the overwrite policy, and the unreviewed checks."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from experiments.generate import GenerateError, GenerateRequest, generate, unreviewed
from experiments.generate.prompt import KINDS, TaskBrief, generation_prompt
from experiments.generate.provenance import clean_reply
from experiments.generate.review import files_in_sweep, files_in_variant
from experiments.llm.cache import ResponseCache
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from promptlib import Catalog, compile_prompt, parse_spec
from promptlib.errors import UnknownTaskError, VariantError
from promptlib.variants import text_file_review
from promptlib.yamlsafe import safe_yaml_load

pytestmark = pytest.mark.data

DESCRIPTION = "Evidence is hearsay when a statement made out of court is offered for its truth.\nAnswer Yes or No."
PLAIN = "Story: {{text}}\nIs this hearsay, yes or no?\nA:"


class Scripted(LMDefaults):
    """A generator model answering each prompt with `reply(prompt)`, counting its calls."""

    name = "openai/scripted"
    concurrency = 1
    mode = "chat"

    def __init__(self, reply: Callable[[str], str]) -> None:
        self.reply = reply
        self.prompts: list[str] = []
        self.decodings: list[Decoding] = []

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        self.decodings.append(decoding)
        return Completion(self.reply(prompt), tokens_in=len(prompt) // 4, tokens_out=20)

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name, "api_base": None, "mode": self.mode}

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        raise AssertionError("not used")


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # the default folder, ablations/generated/, is relative to the project's mlflow.yaml
    (tmp_path / "mlflow.yaml").write_text("prompt_registry: false\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _load(path: Path) -> dict[str, Any]:
    doc = safe_yaml_load(path.read_text(), str(path))
    assert isinstance(doc, dict)
    return doc


def test_description_file_has_full_provenance_and_reads_as_an_instruction(
    catalog: Catalog, in_tmp: Path
) -> None:
    lm = Scripted(lambda p: f"```\n{DESCRIPTION}\n```")
    gen = generate(
        GenerateRequest("hearsay", "description", lm.name, temperature=0.3, max_tokens=200),
        catalog,
        lm,
        now=lambda: "2026-12-01T12:00:00Z",
    )
    (c,) = gen.candidates
    sha = hashlib.sha256(DESCRIPTION.encode()).hexdigest()
    assert c.status == "written" and c.path == Path(
        f"ablations/generated/hearsay/description-{sha[:8]}.yaml"
    )
    doc = _load(in_tmp / c.path)
    assert doc["text"] == DESCRIPTION  # the code fence is gone, the text is exact
    assert hashlib.sha256(doc["text"].encode()).hexdigest() == doc["text_sha256"] == sha
    assert doc["reviewed"] is False
    assert (doc["kind"], doc["variant_key"], doc["task"]) == (
        "description",
        "instruction_file",
        "hearsay",
    )
    assert doc["generator"] == {"model": lm.name, "identity": lm.cache_identity()}
    assert doc["decoding"] == {"temperature": 0.3, "max_tokens": 200, "stop": [], "mode": "chat"}
    assert lm.decodings == [Decoding(0.3, 200, (), "chat")]
    assert doc["generated_at"] == "2026-12-01T12:00:00Z"
    assert (doc["candidate"], doc["n_candidates"], doc["mlflow_run_id"]) == (1, 1, None)
    assert doc["prompt"] == lm.prompts[0]
    assert doc["prompt_sha256"] == hashlib.sha256(lm.prompts[0].encode()).hexdigest()
    # the prompt starts from the task's own instruction, template, labels and README
    assert "Hearsay is an out-of-court statement introduced to prove the truth" in doc["prompt"]
    assert "Q: {{text}} Is there hearsay?" in doc["prompt"]
    assert "one of: Yes, No" in doc["prompt"] and "Federal Rules of Evidence" in doc["prompt"]
    assert text_file_review(c.path) is False
    task = catalog.task("hearsay")
    out = compile_prompt(parse_spec(f"instruction_file={c.path},demos=none"), task).render(
        task.rows("test")[0]
    )
    assert out.startswith(DESCRIPTION)


def test_register_text_keeps_placeholders_or_is_refused(catalog: Catalog, in_tmp: Path) -> None:
    replies = iter(
        [PLAIN, "Story: the facts\nIs this hearsay?\nA:", "Story: {{text}} {{judge}}\nA:"]
    )
    lm = Scripted(lambda p: next(replies))
    gen = generate(GenerateRequest("hearsay", "plain", lm.name, n=3), catalog, lm)
    good, dropped, unknown = gen.candidates
    assert (
        good.status == "written"
        and _load(in_tmp / str(good.path))["variant_key"] == "register_file"
    )
    assert dropped.status == "refused" and dropped.path is None
    assert "drops {{text}}" in (dropped.reason or "")
    assert unknown.status == "refused" and "{{judge}}, not a column of hearsay" in (
        unknown.reason or ""
    )
    assert not gen.ok
    files = sorted((in_tmp / "ablations/generated/hearsay").iterdir())
    assert files == [in_tmp / str(good.path)]  # the refused texts were never written
    # the candidate prompts differ (so do their cache keys) and name the placeholders
    assert len(set(lm.prompts)) == 3 and all("{{text}}" in p and "version" in p for p in lm.prompts)
    task = catalog.task("hearsay")
    rendered = compile_prompt(parse_spec(f"register_file={good.path},demos=none"), task).render(
        task.rows("test")[0]
    )
    assert rendered.endswith("Is this hearsay, yes or no?\nA:")


def test_every_candidate_refused_writes_nothing(catalog: Catalog, in_tmp: Path) -> None:
    lm = Scripted(lambda p: "   ")
    gen = generate(GenerateRequest("hearsay", "technical", lm.name, n=2), catalog, lm)
    assert [c.reason for c in gen.candidates] == ["the reply is empty"] * 2
    assert not (in_tmp / "ablations").exists()


def test_failed_call_is_refused_with_its_error(catalog: Catalog, in_tmp: Path) -> None:
    class Failing(Scripted):
        def complete(self, prompt: str, decoding: Decoding) -> Completion:
            return Completion(None, error="RateLimitError 429 after 5 attempt(s): slow down")

    gen = generate(GenerateRequest("hearsay", "paraphrase", "x/y"), catalog, Failing(str))
    assert "generator call failed: RateLimitError 429" in (gen.candidates[0].reason or "")
    assert not (in_tmp / "ablations").exists()


def test_out_paths_suffixes_and_overwrite_policy(catalog: Catalog, in_tmp: Path) -> None:
    lm = Scripted(lambda p: DESCRIPTION + (" (2)" if "version 2" in p else ""))
    out = in_tmp / "mine.yaml"
    gen = generate(GenerateRequest("hearsay", "description", lm.name, n=2, out=out), catalog, lm)
    assert [c.path for c in gen.candidates] == [in_tmp / "mine-1.yaml", in_tmp / "mine-2.yaml"]
    assert _load(in_tmp / "mine-2.yaml")["text"].endswith("(2)")
    before = (in_tmp / "mine-1.yaml").read_text()
    calls = len(lm.prompts)
    with pytest.raises(GenerateError, match=r"mine-1\.yaml already exists; .* --force"):
        generate(GenerateRequest("hearsay", "description", lm.name, n=2, out=out), catalog, lm)
    assert len(lm.prompts) == calls and (in_tmp / "mine-1.yaml").read_text() == before
    with pytest.raises(GenerateError, match=r"folder .*nowhere does not exist"):
        generate(
            GenerateRequest("hearsay", "description", lm.name, out=in_tmp / "nowhere" / "f.yaml"),
            catalog,
            lm,
        )
    assert len(lm.prompts) == calls  # refused before any call
    (in_tmp / "mine-1.yaml").write_text(before.replace("reviewed: false", "reviewed: true"))
    generate(
        GenerateRequest("hearsay", "description", lm.name, n=2, out=out, force=True), catalog, lm
    )
    assert _load(in_tmp / "mine-1.yaml")["reviewed"] is False  # --force overwrote it


def test_rerun_keeps_a_reviewed_file_and_uses_the_cache(catalog: Catalog, in_tmp: Path) -> None:
    lm = Scripted(lambda p: DESCRIPTION)
    cache = ResponseCache(in_tmp / "cache")
    first = generate(GenerateRequest("hearsay", "description", lm.name), catalog, lm, cache=cache)
    path = in_tmp / str(first.candidates[0].path)
    path.write_text(path.read_text().replace("reviewed: false", "reviewed: true"))
    again = generate(GenerateRequest("hearsay", "description", lm.name), catalog, lm, cache=cache)
    assert again.candidates[0].status == "unchanged" and again.candidates[0].cache_hit
    assert len(lm.prompts) == 1 and text_file_review(path) is True


def test_unknown_task_and_kind_fail_before_any_call(catalog: Catalog, in_tmp: Path) -> None:
    lm = Scripted(str)
    with pytest.raises(UnknownTaskError, match="did you mean 'hearsay'"):
        generate(GenerateRequest("hearsy", "description", lm.name), catalog, lm)
    with pytest.raises(GenerateError, match=r"unknown --kind 'plan' — did you mean 'plain'"):
        generate(GenerateRequest("hearsay", "plan", lm.name), catalog, lm)
    assert lm.prompts == [] and not (in_tmp / "ablations").exists()


def test_every_kind_has_a_prompt(catalog: Catalog) -> None:
    brief = TaskBrief.of(catalog.task("abercrombie"))
    for kind, key in KINDS.items():
        prompt = generation_prompt(brief, kind, 1, 1)
        assert prompt.endswith(("Instruction:\n", "Query template:\n"))
        assert (
            "Keep every placeholder in double braces exactly as written ({{text}})" in prompt
        ) == (key == "register_file")
        assert prompt.endswith("Query template:\n") == (key == "register_file")


def test_clean_reply() -> None:
    assert clean_reply("  ```yaml\nA: {{x}}\n```  ") == "A: {{x}}"
    assert clean_reply("<<<\nsome text\n>>>") == "some text"
    assert clean_reply("plain") == "plain"


def test_review_flags(tmp_path: Path) -> None:
    own = tmp_path / "own.yaml"
    own.write_text("text: my own words\n")
    gen = tmp_path / "gen.yaml"
    gen.write_text("text: t\ngenerator: {model: m}\nreviewed: false\n")
    no_flag = tmp_path / "noflag.yaml"  # generated, its reviewed: line deleted
    no_flag.write_text("text: t\ngenerator: {model: m}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("text: t\nreviewed: 'yes'\n")
    assert text_file_review(own) is None and text_file_review(gen) is False
    assert text_file_review(no_flag) is False
    with pytest.raises(VariantError, match=r"bad\.yaml: 'reviewed' must be true or false"):
        text_file_review(bad)
    spec = {
        "fixed": {"instruction_file": str(gen)},
        "axes": {"register_file": [str(own), str(no_flag)]},
    }
    assert files_in_sweep(spec) == [
        ("instruction_file", str(gen)),
        ("register_file", str(own)),
        ("register_file", str(no_flag)),
    ]
    assert unreviewed(files_in_sweep(spec)) == [str(gen), str(no_flag)]
    assert files_in_variant(f"demos=none,instruction_file={gen}") == [
        ("instruction_file", str(gen))
    ]
    assert files_in_variant("base") == [] and files_in_variant(None) == []
