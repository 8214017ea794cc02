"""The llama.cpp runtime: context sizes, threading, `load_local`, the context check."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

from experiments import settings
from experiments.llm import cpu
from experiments.llm.backends import local_name
from experiments.llm.cpu import LlamaLoad
from experiments.llm.prefix import REPACKED
from experiments.llm.types import ContextTooLong, ModelError, log
from experiments.llm.weights import local_model_path

LOCAL_CHAT_FORMATS = {"gemma3-270m": "gemma"}
"""llama-cpp-python chat formats for GGUFs without a ``tokenizer.chat_template``: this Gemma
GGUF (converted from the base google/gemma-3-270m) has none, and llama-cpp-python would
fall back to Llama-2's ``[INST]`` format; Gemma's turns are ``<start_of_turn>user``."""


# ---- the embedded model --------------------------------------------------------------------
_LOCK = threading.Lock()
_LOADING = threading.Lock()  # one load per name; _LOCK guards llama.cpp calls
_LOADED: dict[str, Any] = {}


def local_n_ctx() -> int:
    """Context size of the local models: `settings.local_n_ctx`, refused with a ModelError."""
    return settings.local_n_ctx(ModelError)


def _local_limit(llm: Any) -> int:
    """Tokens the loaded local model can really hold: llama.cpp's context (``n_ctx()``,
    padded) and llama-cpp-python's token buffer (``input_ids``, as asked), whichever is
    smaller. Why: a prompt past the buffer but within the padded context passed the
    checks and then crashed inside llama-cpp-python."""
    limit = int(llm.n_ctx())
    ids = getattr(llm, "input_ids", None)
    if ids is not None:
        limit = min(limit, len(ids))
    return limit


def _close_local_models() -> None:
    """Free llama.cpp models before interpreter teardown (their __del__ fails late)."""
    for llm in _LOADED.values():
        llm.close()
    _LOADED.clear()


# llama.cpp logs this at ERROR level for every Gemma 3 load, though it is a notice about
# the sliding-window KV cache, not a failure; every other message still reaches stderr.
_HARMLESS_LLAMA_LOG = b"llama_kv_cache_iswa: using full-size SWA cache"
_LOG_FILTER: list[Any] = []  # keeps the ctypes callback alive while llama.cpp holds it
_BUFFER_LOG = b"model buffer size"  # llama.cpp's load_tensors line, one per weight buffer
_LOAD_LOG: list[bytes] = []  # those lines of the model being loaded (loads hold _LOCK)


def _quiet_harmless_llama_log() -> None:
    import ctypes

    import llama_cpp
    from llama_cpp import _logger

    def forward(level: int, text: bytes, user_data: Any) -> None:
        if _BUFFER_LOG in text:
            _LOAD_LOG.append(bytes(text))
        if not text.startswith(_HARMLESS_LLAMA_LOG):
            _logger.llama_log_callback(level, text, user_data)

    callback = llama_cpp.llama_log_callback(forward)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _LOG_FILTER.append(callback)


# llama.cpp's OpenMP threads wait for work between graph computations (every token).
# libgomp's default spins ~300,000 times first, which on a busy machine takes the cores from
# the model itself: 2.3-2.5x slower with two other busy processes on 2 cores. Sleeping at once
# (OMP_WAIT_POLICY=PASSIVE) costs a wake-up per token: 11-19% slower on a quiet machine. A
# spin of 200 before sleeping is as fast as the default when quiet and as PASSIVE when busy
# (benchmarks/overhead.py; README "Threads and waiting"). A user's own OMP_WAIT_POLICY or
# GOMP_SPINCOUNT wins. LLVM's libomp (KMP_BLOCKTIME) was not measured and is left alone.
GOMP_SPINCOUNT = "200"


def _default_wait_policy() -> None:
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT


def llama_threading() -> dict[str, str]:
    """The thread and wait settings local models run with (printed by `workbench doctor`)."""
    _default_wait_policy()
    return {
        "threads": f"{os.cpu_count() or 2} (os.cpu_count())",
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "unset (libgomp's default)"),
        "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "unset"),
    }


_LOAD_SAID: list[str] = []  # the load decision is told once per process


@functools.lru_cache(maxsize=8)
def _llama_load(cpuinfo: str | None, choice: str | None) -> LlamaLoad:
    return cpu.llama_load()


def llama_load() -> LlamaLoad:
    """How this process loads local models (`experiments.llm.cpu.llama_load`, read once per
    value of its two settings: the CPU description is not reread), told once on stderr when
    it departs from llama.cpp's default."""
    load = _llama_load(settings.cpuinfo_env(), settings.extra_bufts_env())
    if not load.extra_bufts and load.reason not in _LOAD_SAID:
        _LOAD_SAID.append(load.reason)
        log.warning("local models load with llama.cpp's extra buffer types off: %s", load.reason)
    return load


@contextlib.contextmanager
def _extra_bufts(on: bool) -> Iterator[None]:
    """Construct `Llama` with ``use_extra_bufts`` set: llama-cpp-python has no argument for
    it, so its default model parameters are amended while the model loads (under _LOCK)."""
    if on:
        yield
        return
    import llama_cpp.llama_cpp as raw

    default = raw.llama_model_default_params

    def amended() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    raw.llama_model_default_params = amended
    try:
        yield
    finally:
        raw.llama_model_default_params = default


def build_local(name: str, n_threads: int | None = None, **extra: Any) -> Any:
    """A new llama.cpp model for `name` with load_local's settings and load decision (extra
    buffer types off where they crash, `cpu.llama_load`), computing with `n_threads` threads
    (default: every CPU, ``os.cpu_count()``); `extra` adds Llama arguments, e.g.
    ``kv_overrides``. The caller owns it and closes it; load_local keeps one per process."""
    _default_wait_policy()  # read by OpenMP when llama.cpp loads: the import below
    try:
        from llama_cpp import Llama
    except ImportError as e:
        raise ModelError("local models need llama-cpp-python: pip install -e '.[local]'") from e
    if not _LOG_FILTER:
        _quiet_harmless_llama_log()
    load = llama_load()
    with _LOCK, _extra_bufts(load.extra_bufts):
        _LOAD_LOG.clear()
        llm = Llama(
            model_path=local_model_path(name),
            n_ctx=local_n_ctx(),
            n_threads=n_threads or os.cpu_count() or 2,
            seed=0,
            logits_all=False,
            chat_format=LOCAL_CHAT_FORMATS.get(name),
            verbose=False,
            **extra,
        )
        buffers = list(_LOAD_LOG)  # read under _LOCK: another load clears and refills it
    if bool(llm.model_params.use_extra_bufts) != load.extra_bufts:
        llm.close()  # a llama-cpp-python that no longer takes the amended defaults
        raise ModelError(
            f"local/{name}: llama-cpp-python {_llama_version()} loaded the model with "
            f"extra buffer types {'on' if llm.model_params.use_extra_bufts else 'off'}, "
            f"not {'on' if load.extra_bufts else 'off'} as decided ({load.reason}); "
            "install llama-cpp-python 0.3.x (pip install 'llama-cpp-python>=0.3.2,<0.4') "
            "or set WORKBENCH_LLAMA_EXTRA_BUFTS to match"
        )
    setattr(llm, REPACKED, _repacked(load.extra_bufts, buffers))
    return llm


_PLAIN_BUFFERS = frozenset({b"CPU", b"CPU_Mapped"})
"""llama.cpp's buffers that hold the weights as the GGUF stores them (read or mapped)."""


def _buffer_name(line: bytes) -> bytes:
    """The buffer a load line names (``load_tensors:   CPU_REPACK model buffer size = ...``)."""
    words = line.split(_BUFFER_LOG, 1)[0].split()
    return words[-1] if words else b""


def _repacked(extra_bufts: bool, buffers: list[bytes]) -> bool:
    """Whether llama.cpp repacked some of the weights (`prefix.ALIGN` says why it matters):
    a buffer other than the plain CPU ones (``CPU_REPACK``; ``CPU_AARCH64``, its name on x86
    too in the llama.cpp of early 2025 that older llama-cpp-python 0.3.x ships; ``AMX``;
    ``CPU_KLEIDIAI``). Where its log showed no buffer at all (other wording), assumed so
    whenever extra buffer types are on: aligned batches are exact either way."""
    if not extra_bufts:
        return False
    return not buffers or any(_buffer_name(line) not in _PLAIN_BUFFERS for line in buffers)


def load_local(name: str, n_threads: int | None = None) -> Any:
    """The llama.cpp model for `name`, loaded once per process: the first load decides its
    threads (`n_threads`, default every CPU; a Ray actor gives its own share)."""
    with _LOADING:
        if name not in _LOADED:
            if not _LOADED:
                atexit.register(_close_local_models)
            _LOADED[name] = build_local(name, n_threads)
        return _LOADED[name]


def _llama_version() -> str:
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", "?"))


def prompt_tokens(llm: Any, prompt: str) -> list[int]:
    """`prompt`'s tokens as llama-cpp-python builds a text completion's from its text (BOS
    and EOS as the model's metadata asks, special tokens parsed), so that passing them
    instead of the text gives the same completion. Call under `_LOCK`."""
    return list(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))


def check_local_fits(model: str, prompt: str, n_tokens: int | None = None) -> None:
    """Raise `ContextTooLong` if `prompt` alone has as many tokens as the local model's
    context (llama-cpp-python's own limit), before anything is called; `n_tokens`, its
    count when the caller has its tokens already (`prompt_tokens`).

    The prompt's tokens are counted as llama-cpp-python counts a text completion's (BOS if
    the model adds one, special tokens parsed). A chat prompt gets its template's tokens
    on top, so this is a lower bound there; a prompt that only overflows with them is still
    caught by llama-cpp-python's error (`_CONTEXT_WORDS`, made `ContextTooLong` by
    `LocalModel._attempt`: not retried)."""
    name = local_name(model)
    llm = load_local(name)
    with _LOCK:
        n = len(prompt_tokens(llm, prompt)) if n_tokens is None else n_tokens
        n_ctx = _local_limit(llm)
    if n >= n_ctx:
        raise ContextTooLong(
            f"prompt longer than the model's context: {n} tokens, and the local model's "
            f"context of {n_ctx} tokens must also hold the reply; shorten it (fewer "
            "demonstrations) or raise WORKBENCH_LOCAL_N_CTX; it fails the same way every time"
        )
