"""The environment variables that decide a model's answers: part of the model's identity.

litellm (and the OpenAI and Anthropic SDKs under it) take a provider's server, API version,
organisation or region from the environment when the call does not name them:
``OPENAI_BASE_URL`` pointed at another server gives other answers under the same model name.
Those answers must be another trial's, under other response-cache keys, so `answer_env` (every
such variable that is set, for the model's provider) is part of the model's identity
(`identity.env_identity`, under ``env``). With none set the identity is the one it always was
(`tests/test_pinned_ids.py`).

Keys and other credentials are never part of it: they decide who pays, not what answers,
and even a hash of a key would be its fingerprint. A URL's password and secret-named query
values are masked (`experiments.secrets.safe_url`), and a credential in custom headers (`shown`),
before they enter the identity.

What is read is checked, not assumed: `tests/experiments/llm/test_answer_env.py` records
every variable read while litellm is imported and while each supported provider's model is
built and called (against the stub server), and fails on a name that is neither here
(`ANSWER_SUFFIXES`, `EXTRA`, `LITELLM_SWITCHES`) nor in `NOT_ANSWERS` (with the reason it
changes no answer) or the reviewed list of litellm's own settings
(`tests/data/litellm_env_reviewed.txt`). A litellm upgrade that reads a new one fails there
until it is classified.

litellm loads a ``.env`` file (found from its package folder upward) into the environment when
it is imported: `answer_env` imports it first (`settle`), so the identity reads what the calls
will.
"""

from __future__ import annotations

import os
import re
import urllib.parse

from experiments.llm.backends import is_local
from experiments.llm.calls import _litellm
from experiments.secrets import redact_reply, safe_url, secret_name

BASE_SUFFIXES = ("API_BASE", "BASE_URL", "ENDPOINT")
"""The server itself: an api_base given to the call (``--api-base``) wins over these."""
OTHER_SUFFIXES = (
    "API_VERSION",
    "API_TYPE",
    "ORGANIZATION",
    "ORGANIZATION_ID",
    "ORG_ID",
    "PROJECT",
    "PROJECT_ID",
    "WORKSPACE_ID",
    "REGION",
    "REGION_NAME",
    "LOCATION",
)
"""Which version of the API, whose deployment, which region: they apply with an api_base too."""
ANSWER_SUFFIXES = BASE_SUFFIXES + OTHER_SUFFIXES

PREFIXES: dict[str, tuple[str, ...]] = {
    "text-completion-openai": ("OPENAI",),
    "ollama_chat": ("OLLAMA",),
    "azure": ("AZURE", "AZURE_OPENAI"),
    "azure_text": ("AZURE", "AZURE_OPENAI"),
    "bedrock": ("AWS", "AWS_BEDROCK"),
    "vertex_ai": ("VERTEXAI", "VERTEX"),
}
"""A provider's variable prefixes where they are not its own name in capitals
(``hosted_vllm`` -> ``HOSTED_VLLM_API_BASE``)."""
BASE_ALIASES: dict[str, tuple[str, ...]] = {
    "fireworks_ai": ("FIREWORKS_API_BASE",),
    "huggingface": ("HF_API_BASE",),
    "azure": ("AZURE_SPEECH_API_BASE",),
    "azure_ai": ("AZURE_API_BASE",),
    "bedrock": ("ANTHROPIC_AWS_API_BASE", "ANTHROPIC_AWS_BASE_URL", "BEDROCK_MANTLE_API_BASE"),
    "black_forest_labs": ("BFL_API_BASE",),
    "chatgpt": ("OPENAI_CHATGPT_API_BASE",),
    "dashscope": ("QWENCLOUD_API_BASE", "QWEN_AI_PLATFORM_API_BASE"),
    "deepseek": ("DEEPSEEK_ANTHROPIC_API_BASE",),
    "exa_ai": ("EXA_API_BASE",),
    "fal_ai": ("FAL_AI_QUEUE_API_BASE",),
    "fastcrw": ("CRW_API_BASE",),
    "featherless_ai": ("FEATHERLESS_API_BASE",),
    "lambda_ai": ("LAMBDA_API_BASE",),
    "mistral": ("MISTRAL_AZURE_API_BASE",),
    "opencode": ("OPENCODE_GO_API_BASE",),
    "tencent": ("TENCENT_ANTHROPIC_API_BASE",),
    "vllm": ("HOSTED_VLLM_API_BASE",),
    "volcengine": ("ARK_API_BASE",),
    "watsonx": ("HOSTED_VLLM_API_BASE",),
    "xai": ("XAI_OAUTH_API_BASE",),
    "you_com": ("YOUCOM_API_BASE",),
}
"""A provider's server variables that are not its prefix's (``fireworks_ai/`` reads
FIREWORKS_API_BASE), as litellm's code for it reads them: like `BASE_SUFFIXES`, an api_base
wins over them. `tests/experiments/llm/test_answer_env.py` reads litellm's provider folders
and fails on one missing here."""
OPENAI_SDK = ("OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS")
"""What the OpenAI SDK's client sends with every request of every provider litellm reaches
through it (the OpenAI-compatible ones): the organisation, the project, extra headers (a
gateway may route by them)."""
OWN_CLIENTS = ("anthropic", "ollama", "ollama_chat")
"""Providers litellm reaches with its own HTTP client, never the OpenAI SDK's."""
EXTRA: dict[str, tuple[str, ...]] = {
    # the OpenAI SDK's Azure client reads the API version under OpenAI's name
    "azure": ("OPENAI_API_VERSION", "AZURE_DEFAULT_RESPONSES_API_VERSION"),
    "azure_text": ("OPENAI_API_VERSION",),
    "bedrock": ("AWS_BEDROCK_RUNTIME_ENDPOINT",),
}
LITELLM_SWITCHES = (
    "USE_LITELLM_PROXY",  # every call goes to the LiteLLM proxy instead of the provider
    "LITELLM_PROXY_API_BASE",  # ... at this URL
    "LITELLM_DROP_PARAMS",  # a parameter the provider lacks (stop) is dropped, not refused
    "LITELLM_MODIFY_PARAMS",  # litellm rewrites messages a provider would refuse
    "LITELLM_ROUTE_ALL_CHAT_OPENAI_TO_RESPONSES",  # chat calls go to the Responses API
    "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES",
    "LITELLM_ANTHROPIC_DISABLE_URL_SUFFIX",  # the URL path Anthropic calls are sent to
    "MIN_NON_ZERO_TEMPERATURE",  # replaces temperature 0 for providers that refuse it
)
"""litellm's own switches that change what is sent, or where, for every provider."""

NOT_ANSWERS: tuple[tuple[str, str], ...] = (
    (
        r"(OPENAI_BASE_URL|OPENAI_API_BASE)",
        "for a provider other than OpenAI's (whose answer names they are): read only by "
        "litellm's prompt-cache hook, to tell whether a call goes to api.openai.com",
    ),
    (
        r".*(_API_KEY|_ADMIN_KEY|_AUTH_TOKEN|_AD_TOKEN|_CLIENT_SECRET|_PASSWORD"
        r"|_WEBHOOK_SECRET)",
        "a credential: who pays, not what answers; never in an identity",
    ),
    (
        r"(AZURE_(CLIENT_ID|TENANT_ID|USERNAME|SCOPE)"
        r"|OPENAI_(IDENTITY_PROVIDER_ID|IDENTITY_TOKEN_FILE|SERVICE_ACCOUNT_ID)"
        r"|ANTHROPIC_(FEDERATION_RULE_ID|IDENTITY_SOURCE))",
        "how to sign in (workload identity, Azure AD): credentials, not answers",
    ),
    (
        r"(HTTPS?_PROXY|ALL_PROXY|NO_PROXY|REQUEST_METHOD)",
        "a proxy forwards the same request to the same server (REQUEST_METHOD: urllib's CGI "
        "check of HTTP_PROXY)",
    ),
    (
        r"(SSL_.*|.*_CA_BUNDLE|SSLKEYLOGFILE|LITELLM_SSL_CIPHERS)",
        "TLS verification of the connection, not its content",
    ),
    (
        r"(EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER|LITELLM_RUST|LITELLM_HTTP2|LITELLM_USER_AGENT)",
        "which HTTP client sends the same request, and its User-Agent",
    ),
    (
        r"(TIKTOKEN_CACHE_DIR|CUSTOM_TIKTOKEN_CACHE_DIR)",
        "where token counters are cached (costs and counts, not answers)",
    ),
    (
        r"(OTEL_.*|SLACK_DAILY_REPORT_FREQUENCY|LITELLM_PRINT_STANDARD_LOGGING_PAYLOAD)",
        "litellm's tracing, logging and alerting",
    ),
    (
        r"(PATH|PYTHONPATH|HOME|LANG|LC_.*|TMPDIR|TEMP|TMP|LEGALBENCH_DIR|WORKBENCH_RUNS_DIR"
        r"|WORKBENCH_MLFLOW_CONFIG)",
        "the process's own setting or the workbench's folders: not what a model answers",
    ),
    (
        r"(WORKBENCH_LOCAL_N_CTX|WORKBENCH_LLAMA_EXTRA_BUFTS|WORKBENCH_CPUINFO"
        r"|WORKBENCH_MODELS_DIR|WORKBENCH_CACHE_DIR)",
        "a local model's context, load layout and weights: in its identity as n_ctx, "
        "llama_extra_bufts and weights_sha256 (`identity.local_identity`)",
    ),
)
"""Variables the gateway reads that change no answer of a model whose `answer_names` they are
not, each pattern (a full match) with why."""


def settle() -> None:
    """Import litellm, which loads its ``.env`` into the environment: read after this, the
    environment is the one the calls see."""
    _litellm()


def provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def _prefixes(name: str) -> tuple[str, ...]:
    return PREFIXES.get(name, (re.sub(r"[^A-Za-z0-9]", "_", name).upper(),))


def answer_names(model: str, api_base: str | None = None) -> tuple[str, ...]:
    """Every variable that can decide `model`'s answers, in a fixed order: its provider's
    server (unless `api_base` names it), API version, organisation, region, and litellm's
    switches. Empty for a local model (its identity is `identity.local_identity`)."""
    if is_local(model) or not provider(model):
        return ()
    name = provider(model)
    prefixes = _prefixes(name)
    suffixes = OTHER_SUFFIXES if api_base else ANSWER_SUFFIXES
    own = [f"{p}_{s}" for p in prefixes for s in suffixes]
    own += () if api_base else BASE_ALIASES.get(name, ())
    sdk = () if name in OWN_CLIENTS else OPENAI_SDK
    return tuple(dict.fromkeys([*own, *EXTRA.get(name, ()), *sdk, *LITELLM_SWITCHES]))


def env_base(model: str) -> str | None:
    """The server `model`'s calls go to when no api_base is given, as its provider's
    variables name it (``OPENAI_BASE_URL``, ...): None when none is set, or when two are set
    to different URLs (which one wins is the provider code's own order)."""
    if is_local(model) or not provider(model):
        return None
    prefixes = _prefixes(provider(model))
    settle()
    names = [f"{p}_{s}" for p in prefixes for s in BASE_SUFFIXES]
    names += BASE_ALIASES.get(provider(model), ())
    found = {os.environ[n] for n in names if os.environ.get(n)}
    return found.pop() if len(found) == 1 else None


def all_answer_names() -> frozenset[str]:
    """The variables that decide answers for some provider known here (forwarded to Ray)."""
    providers = ["openai", "anthropic", "ollama", "hosted_vllm", *PREFIXES, *EXTRA, *BASE_ALIASES]
    return frozenset(n for p in providers for n in answer_names(f"{p}/m"))


def answer_env(model: str, api_base: str | None = None) -> dict[str, str]:
    """The variables of `answer_names` that are set (and not empty), with their values as
    shown (a URL's password and secret query values masked): what the environment decides
    about `model`'s answers."""
    names = answer_names(model, api_base)
    if not names:
        return {}
    settle()
    bases = {n for n in names if n.endswith(BASE_SUFFIXES)} | set(
        BASE_ALIASES.get(provider(model), ())
    )
    return {
        n: shown(same_server(os.environ[n]) if n in bases else os.environ[n])
        for n in names
        if os.environ.get(n)
    }


def same_server(url: str) -> str:
    """A server's URL as one spelling: scheme and host in lower case, no trailing ``/``
    (``HTTP://H/v1/`` is ``http://h/v1``: the calls go to the same place, so one identity).
    Anything that is not an http(s) URL is left as it is."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return url
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return url
    user, at, host = parts.netloc.rpartition("@")
    netloc = f"{user}{at}{host.lower()}"
    return urllib.parse.urlunsplit(
        (parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, parts.fragment)
    )


def shown(value: str) -> str:
    """A variable's value as its identity shows it, without a credential: a header line
    with a secret's name (``Authorization: ...``, ``X-Portkey-Api-Key: ...``: custom headers
    may carry the key) as ``Name: ***``, any key, bearer token or URL password `redact_reply`
    finds as ``***``, a URL's query values masked (`safe_url`). Every key gives the same
    text: never the key, nor its fingerprint."""
    lines = []
    for line in value.split("\n"):
        name, colon, _ = line.partition(":")
        lines.append(f"{name}: ***" if colon and secret_name(name.strip()) else line)
    return safe_url(redact_reply("\n".join(lines))[0])


def not_answers(name: str) -> str | None:
    """Why `name` changes no answer (`NOT_ANSWERS`), or None if it is not known to."""
    return next((why for pattern, why in NOT_ANSWERS if re.fullmatch(pattern, name)), None)
