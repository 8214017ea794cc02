"""Model identity: what pins a model's answers, one recipe for the runner, the cache and Ray.

Every dict here is part of a trial id or a response-cache key: its keys and values stay byte
for byte (`tests/test_pinned_ids.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from experiments.llm import llama, weights
from experiments.llm.answer_env import answer_env
from experiments.llm.backends import is_local, local_name
from experiments.llm.cpu import LlamaLoad
from experiments.llm.served import SERVED_ALIGNMENT_CHECK
from experiments.llm.served_model import reported
from experiments.llm.types import LoglikNorm, Mode


def local_identity(model: str) -> dict[str, Any]:
    """What pins a local model's answers beyond its name: the GGUF's sha256, the context
    size and a non-default load layout. Empty for other models. The one recipe for the
    runner, the response cache and the Ray workers."""
    if not is_local(model):
        return {}
    name = local_name(model)
    loaded = llama._LOADED.get(name)
    # a model loaded in this process is identified by the layout it really has
    layout = (
        LlamaLoad(bool(loaded.model_params.use_extra_bufts), "loaded").identity()
        if loaded is not None
        else llama.llama_load().identity()
    )
    return {
        "weights_sha256": weights.local_weights_sha256(name),
        "n_ctx": llama.local_n_ctx(),
        **layout,
    }


LOCAL_IDENTITY_KEYS = frozenset({"weights_sha256", "n_ctx", "llama_extra_bufts"})
"""Every key `local_identity` may give (the layout key only when not the default): a check
of one identity against another compares all of them, not only the keys one side has."""


def env_identity(model: str, api_base: str | None) -> dict[str, Any]:
    """``{"env": {...}}``: the variables set that decide a served or hosted model's answers
    (`answer_env.answer_env`: its server when `api_base` does not name it, API version,
    organisation, region, litellm's switches), never a key; ``{}`` when none is set, so an
    identity made without them is the one it always was."""
    env = answer_env(model, api_base)
    return {"env": env} if env else {}


def served_identity(model: str, api_base: str | None) -> dict[str, Any]:
    """``{"served_model": {...}}``: what a served model's server says it serves (its weights'
    id and root, context length, ...: `served_model.reported`), so a server restarted with
    other weights under the same URL and name is another model; ``{}`` where the server does
    not say (the identity is then the one it always was)."""
    found = reported(model, api_base)
    return {"served_model": found} if found else {}


def node_identity(model: str) -> dict[str, Any]:
    """What this machine decides about `model`'s answers, whoever calls it: a local model's
    weights, context and layout, and the answer-deciding environment (before an api_base
    names the server). A Ray worker's must equal the driver's."""
    return {**local_identity(model), **env_identity(model, None)}


def machine_identity(lm: Any) -> dict[str, Any]:
    """What this machine decides about the answers of `lm` (a model already built): a local
    model's weights, context and layout (`local_identity`), and under ``env`` the
    environment that decides them (`env_identity`, the model's own server given). A Ray
    worker's must equal the driver's."""
    env = env_identity(lm.name, getattr(lm, "api_base", None)).get("env")
    return {**local_identity(lm.name), "env": env}


class Connected(Protocol):
    """The slice of a gateway model its identity is read from."""

    name: str
    api_base: str | None
    mode: Mode


def lm_identity(lm: Connected) -> dict[str, Any]:
    """What makes an answer this model's (`LiteLLMModel.cache_identity`): name, server and
    mode; the environment that decides its answers (`env_identity`: a server named by
    OPENAI_BASE_URL, ...) and what a served model's server says it serves
    (`served_identity`); for a local model also its weights and context size, which its
    name alone does not pin down."""
    identity: dict[str, Any] = {
        "model": lm.name,
        "api_base": lm.api_base,
        "mode": lm.mode,
    }
    identity.update(env_identity(lm.name, lm.api_base))
    identity.update(served_identity(lm.name, lm.api_base))
    identity.update(local_identity(lm.name))
    return identity


def loglik_base(
    model: str, how: LoglikNorm | None, continuations: Sequence[str] | None
) -> dict[str, Any]:
    """The keys every log-likelihood identity starts with: the model, ``loglik`` mode, and
    with `how` and `continuations` the response cache's (the trial id carries those two in
    its decoding instead)."""
    identity: dict[str, Any] = {"model": model, "mode": "loglik"}
    if how is not None:
        identity["loglik"] = how
        identity["continuations"] = list(continuations or ())
    return identity


def plain_loglik_identity(
    model: str, how: LoglikNorm | None = None, continuations: Sequence[str] | None = None
) -> dict[str, Any]:
    """The log-likelihood identity of a model whose sums are computed where it runs (no
    server in it): the environment that decides its answers (`env_identity`) and, for a
    local model, its weights, context size and load layout (`local_identity`)."""
    identity = loglik_base(model, how, continuations)
    identity.update(env_identity(model, None))
    identity.update(local_identity(model))
    return identity


def served_loglik_identity(
    model: str,
    api_base: str,
    how: LoglikNorm | None = None,
    continuations: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A served model's log-likelihood identity: its server, with the alignment check its
    sums passed (trials and sums made under the older one-token check are others: a sweep
    must not resume one as done, it may have let a shifted server's rows through), the
    environment that decides its answers and what its server says it serves."""
    identity = loglik_base(model, how, continuations)
    identity["api_base"] = api_base
    identity["alignment_check"] = SERVED_ALIGNMENT_CHECK
    identity.update(env_identity(model, api_base))
    identity.update(served_identity(model, api_base))
    identity.update(local_identity(model))
    return identity
