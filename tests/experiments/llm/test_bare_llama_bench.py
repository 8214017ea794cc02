"""benchmarks/bare_llama.py, the overhead benchmark's baseline, does no work the workbench
skips: each prompt tokenized once and its tokens given to llama-cpp-python, as
`LocalModel._call` gives them (the text, tokenized again inside `create_completion`, made
the baseline slower than the fastest bare loop and the workbench's ratio look better)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "bare_llama.py"
    spec = importlib.util.spec_from_file_location("bare_llama_bench", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bare_llama_bench"] = mod
    spec.loader.exec_module(mod)  # no model: its loop is a function, the load is `main`
    return mod


class _Recorder:
    """Tokens are the prompt's bytes; what each call was given is recorded."""

    def __init__(self) -> None:
        self.tokenized: list[bytes] = []
        self.given: list[Any] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        assert add_bos and special  # as llama-cpp-python builds a text completion's tokens
        self.tokenized.append(text)
        return list(text)

    def create_completion(self, prompt: Any, **kwargs: Any) -> dict[str, Any]:
        self.given.append(prompt)
        return {"choices": [{"text": f"reply {len(self.given)}"}]}


def test_the_bare_loop_tokenizes_each_prompt_once_and_gives_its_tokens() -> None:
    llm = _Recorder()
    prompts = ["b c", "a b", "", "a a"]
    out = _bench().complete_all(llm, prompts, 4)
    assert llm.tokenized == [p.encode() for p in prompts]  # once each, before any call
    # in the tokens' lexicographic order; an empty prompt as its text, the others as tokens
    assert llm.given == ["", list(b"a a"), list(b"a b"), list(b"b c")]
    assert out == ["reply 1", "reply 2", "reply 3", "reply 4"]


def test_the_bare_loop_calls_for_every_prompt_and_distinct_skips_a_repeat_alone() -> None:
    prompts = ["a b", "c", "a b", "a b c"]
    llm = _Recorder()
    out = _bench().complete_all(llm, prompts, 4)
    assert len(llm.given) == 4  # the baseline of the issue: every prompt a call
    llm = _Recorder()
    out = _bench().complete_all(llm, prompts, 4, distinct=True)
    assert llm.given == [list(b"a b"), list(b"a b c"), list(b"c")]  # the repeat skipped
    assert out == ["reply 1", "reply 1", "reply 2", "reply 3"]  # and given the reply before
