"""Run as a script: every environment variable the gateway reads, printed as JSON.

`os.environ` is replaced, before anything is imported, by a mapping that notes each name looked
up (`os.getenv`, `os.environ.get`, `[...]`, `in`). Then litellm is imported (phase
``import``: its module settings, and the ``.env`` it loads), and each supported provider's
model is built, identified and called (chat, completion; a served one's log-likelihood; an
OpenAI batch), with every request sent to a proxy on a closed port so nothing leaves the
machine. A variable read only from C (llama.cpp's) is not seen here.

Usage: ``python env_probe.py STUB_URL`` in an environment with few variables set (the test's).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

_reads: dict[str, set[str]] = {"import": set()}
_current = _reads["import"]


class _RecordingEnviron(type(os.environ)):  # type: ignore[misc]
    def __getitem__(self, key: str) -> Any:
        if isinstance(key, str):
            _current.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            _current.add(key)
        return super().__contains__(key)


_e = os.environ
# a recording view of the same environment (not a cleared one)
os.environ = _RecordingEnviron(  # type: ignore[assignment]  # noqa: B003
    _e._data, _e.encodekey, _e.decodekey, _e.encodevalue, _e.decodevalue
)


def _cases(stub: str) -> list[tuple[str, str | None]]:
    return [
        ("openai/x", None),
        ("openai/x", stub),
        ("text-completion-openai/x", None),
        ("anthropic/claude-x", None),
        ("ollama/llama3", None),
        ("ollama_chat/llama3", None),
        ("hosted_vllm/x", None),
        ("hosted_vllm/x", stub),
        ("azure/x", None),
        ("local/smollm2", None),
    ]


def main(stub: str) -> None:
    global _current
    from experiments.llm.calls import _litellm

    _litellm()  # litellm's import, and its .env
    from experiments.llm import gateway
    from experiments.llm.advice import missing_keys
    from experiments.llm.backends import backend_for, get_model
    from experiments.llm.batch import BatchClient, BatchRequest
    from experiments.llm.batch_ledger import BatchLedger
    from experiments.llm.cache import ResponseCache
    from experiments.llm.identity import node_identity
    from experiments.llm.types import Decoding

    # With no key set, the gateway's check before a call (`advice.missing_keys`) would end
    # each call before litellm reads anything: its own reads are recorded below, then the
    # calls go on without it, reading what a call reads.
    gateway.missing_keys = lambda model, api_base=None: ()  # type: ignore[attr-defined]
    calls: dict[str, set[str]] = {}
    for model, base in _cases(stub):
        _current = calls.setdefault(f"{model} {base or ''}".strip(), set())
        missing_keys(model, base)
        lm = get_model(model, api_base=base, max_retries=0, timeout=5)
        lm.cache_identity()
        lm.loglik_identity()
        node_identity(model)
        if backend_for(model, base) == "local":
            continue  # its calls read what its identity does (loading it takes long)
        for mode in ("chat", "completion"):
            lm.complete("Is this hearsay?", Decoding(max_tokens=2, stop=("\n",), mode=mode))  # type: ignore[arg-type]
        if base:
            # the stub echoes no log-probabilities: read up to there
            with contextlib.suppress(Exception):
                lm.loglikelihood("Is this hearsay?", [" Yes", " No"])
        if model == "openai/x" and not base:
            cache_dir = os.path.join(os.environ["HOME"], "responses")
            client = BatchClient(model, BatchLedger.beside(ResponseCache(cache_dir).directory))
            request = BatchRequest("k", "Is this hearsay?", Decoding(max_tokens=2))
            with contextlib.suppress(Exception):  # the proxy refuses: read up to there
                client.run([request], ResponseCache(cache_dir))
    out = {"import": sorted(_reads["import"]), "calls": {k: sorted(v) for k, v in calls.items()}}
    sys.stdout.write(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
