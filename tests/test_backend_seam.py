"""The backend seam (issue 35, point 1): nothing outside `experiments/llm/` asks which backend
serves a model, read with `ast` only (as `tests/test_import_graph.py` reads the layers).

A backend is a class chosen from one table (`experiments.llm.backends._BACKENDS`); what
differs between backends (generation, log-likelihood, identity, price, cached rows,
preloading, default scoring) is a method of it. Checked over `experiments/` (but
`experiments/llm/`, where the backends live) and `promptlib/`, `experiments/testing/`
included (its simulations are models, not backends): no module

- imports a backend-asking name (`is_local`, `backend_for`, `local_name`, `served_api_base`,
  `LOCAL_PROVIDER`) or a backend class (`LocalModel`, `ServedModel`, `ApiModel`);
- reads an attribute ``is_local``, or ``api_base`` of a model (``lm.api_base``), or asks for
  them with ``getattr``;
- isinstance-checks a backend class;
- imports `unittest.mock` or calls ``mock.patch`` (product code sets what it means to);
- hard-codes a model string ``"local/..."`` (`DEFAULT_MODEL` names the default).

Also: the table picks the class, choosing a local model imports no litellm, and the local
backend gives what litellm's custom provider gave.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEAM = ROOT / "experiments" / "llm"
ASKING = frozenset({"is_local", "backend_for", "local_name", "served_api_base", "LOCAL_PROVIDER"})
CLASSES = frozenset({"LocalModel", "ServedModel", "ApiModel"})
MODEL_OBJECTS = re.compile(r"^(lm|_lm|model|judge|inner|.*_lm)$")
LOCAL_LITERAL = re.compile(r"^local/[\w.-]+$")
PROVIDER_PREFIX = re.compile(r"^local/?$")
"""``"local"`` or ``"local/"``: tested against a model name (``.startswith``, ``in``, a
`split`'s first part) it is `is_local` in another spelling. Compared with ``==`` to a plain
name it is the sweep executor's name, which is no backend."""


def _split_part(node: ast.AST) -> bool:
    """Whether `node` is a part of a `split` or `partition` (``m.split("/")[0]``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("split", "rsplit", "partition")
    )


def _scanned() -> Iterator[Path]:
    for pkg in ("experiments", "promptlib"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if SEAM not in path.parents:
                yield path


def _name(node: ast.AST) -> str | None:
    """The last name of an expression (`a.b.c` -> `c`, `x` -> `x`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(source: str, where: str = "<source>") -> list[str]:
    """Every place in `source` that asks which backend it has, as ``where:line: what``."""
    found: list[str] = []

    def say(node: ast.AST, what: str) -> None:
        found.append(f"{where}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module == "unittest" and any(a.name == "mock" for a in node.names):
                say(node, "imports unittest.mock")
            if module.startswith("unittest.mock"):
                say(node, "imports unittest.mock")
            for alias in node.names:
                if alias.name in ASKING or alias.name in CLASSES:
                    say(node, f"imports {alias.name} (ask the model, or its backend_class)")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("unittest.mock") or alias.name == "mock":
                    say(node, "imports unittest.mock")
        elif isinstance(node, ast.Attribute):
            if node.attr in ASKING or node.attr in CLASSES:
                say(node, f"uses {node.attr}")
            elif node.attr == "is_local":
                say(node, "reads .is_local")
            elif node.attr == "api_base" and MODEL_OBJECTS.match(_name(node.value) or ""):
                say(node, "reads a model's .api_base")
            elif node.attr == "patch" and _name(node.value) == "mock":
                say(node, "calls mock.patch")
        elif isinstance(node, ast.Call):
            func = _name(node.func)
            args = node.args
            asked = args[1] if func == "getattr" and len(args) >= 2 else None
            if isinstance(asked, ast.Constant) and asked.value in ("is_local", "api_base"):
                say(node, f"getattr(..., {asked.value!r})")
            if (
                func in ("startswith", "removeprefix")
                and args
                and isinstance(args[0], ast.Constant)
                and PROVIDER_PREFIX.match(str(args[0].value))
            ):
                say(node, f"tests a model's prefix .{func}({args[0].value!r}) (is_local)")
            if func == "isinstance" and len(args) == 2:
                kinds = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
                for kind in kinds:
                    if _name(kind) in CLASSES:
                        say(node, f"isinstance(..., {_name(kind)})")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            local = [n for n in sides if isinstance(n, ast.Constant)]
            if any(PROVIDER_PREFIX.match(str(n.value)) for n in local) and (
                any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                or any(_split_part(n) for n in sides)
            ):
                say(node, "compares a model name with 'local' (is_local)")
            if any(isinstance(n, ast.Constant) and n.value in CLASSES for n in sides):
                say(node, "compares a class name with a backend class's")
        elif isinstance(node, ast.Name) and (node.id in ASKING or node.id in CLASSES):
            say(node, f"uses {node.id}")
        elif isinstance(node, ast.Constant) and LOCAL_LITERAL.match(str(node.value)):
            say(node, f"hard-codes the model {node.value!r} (use DEFAULT_MODEL)")
    return found


def test_nothing_outside_the_llm_package_asks_which_backend_it_has() -> None:
    found = [
        v
        for path in _scanned()
        for v in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "backend branching outside experiments/llm/:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        "from experiments.llm.backends import is_local\n",
        "from experiments.llm.identity import served_api_base\n",
        "import experiments.llm.backends as b\nb.backend_for('x', None)\n",
        "def f(lm):\n    return 0.0 if lm.is_local else 1.0\n",
        "def f(lm):\n    return getattr(lm, 'is_local', False)\n",
        "def f(lm):\n    if lm.api_base:\n        return 1\n",
        "from experiments.llm.local_model import LocalModel\n",
        "def f(lm, m):\n    return isinstance(lm, m.ServedModel)\n",
        "from unittest import mock\n",
        "import unittest.mock\n",
        "def f(m, os):\n    with m.mock.patch.object(os, 'cpu_count'):\n        pass\n",
        "model: str = 'local/smollm2'\n",
        "def f(model):\n    return model.startswith('local/')\n",
        "def f(model):\n    return model.startswith('local')\n",
        "def f(spec):\n    return 'local' in spec.model\n",
        "def f(model):\n    return model.split('/')[0] == 'local'\n",
        "def f(model):\n    return model.partition('/')[0] != 'local'\n",
        "def f(lm):\n    return type(lm).__name__ == 'LocalModel'\n",
    ],
)
def test_the_checker_catches_a_planted_violation(planted: str) -> None:
    assert violations(planted), planted


def test_the_checker_lets_plain_code_through() -> None:
    clean = (
        "from experiments.llm import backend_class, get_model\n"
        "from experiments.llm.backends import DEFAULT_MODEL\n"
        "def f(setup, model, executor):\n"
        "    if setup.api_base:\n"  # a command's option, not a model's
        "        pass\n"
        "    print('run it with --model local/smollm2')\n"  # prose, not a model chosen
        "    if executor == 'local' or setup.executor != 'local':\n"  # the sweep executor's name
        "        pass\n"
        "    return backend_class(model).price(model, 1, 1), get_model(DEFAULT_MODEL)\n"
    )
    assert violations(clean) == []


def test_the_table_picks_the_class_of_each_backend() -> None:
    from experiments.llm.backends import _BACKENDS, backend_class, backend_for

    assert [row[0] for row in _BACKENDS] == ["local", "served", "api"]
    cases = {
        ("local/smollm2", None): "LocalModel",
        ("local/smollm2", "http://h/v1"): "LocalModel",  # local wins over an api_base
        ("openai/smollm2", "http://h/v1"): "ServedModel",
        ("openai/gpt-4o-mini", None): "ApiModel",
        ("openai/gpt-4o-mini", ""): "ApiModel",
    }
    for (model, base), cls in cases.items():
        assert backend_class(model, base).__name__ == cls, (model, base)
        assert (
            backend_for(model, base)
            == {
                "LocalModel": "local",
                "ServedModel": "served",
                "ApiModel": "api",
            }[cls]
        )


def test_get_model_builds_the_tables_class_and_litellm_model_the_litellm_ones() -> None:
    from experiments.llm import LiteLLMModel, ModelError, get_model
    from experiments.llm.remote import ApiModel, ServedModel

    assert type(get_model("openai/x", api_base="http://h/v1")) is ServedModel
    assert type(get_model("openai/x")) is ApiModel
    assert type(LiteLLMModel("openai/x", api_base="http://h/v1")) is ServedModel
    assert type(LiteLLMModel("openai/x")) is ApiModel
    with pytest.raises(ModelError, match="get_model"):
        LiteLLMModel("local/smollm2")


def test_the_backends_answer_the_name_level_questions() -> None:
    from experiments.llm import backend_class

    local, api = backend_class("local/smollm2"), backend_class("openai/gpt-4o-mini")
    assert local.price("local/smollm2", 1000, 100) == 0.0
    assert (api.price("openai/gpt-4o-mini", 1000, 100) or 0.0) > 0
    assert local.timed_here() and not api.timed_here()
    assert local.default_scoring("local/smollm2", zero_shot=True, has_label_set=True) == "loglik"
    assert local.default_scoring("local/smollm2", zero_shot=False, has_label_set=True) == (
        "generate"
    )
    assert api.default_scoring("openai/x", zero_shot=True, has_label_set=True) == "generate"
    assert local.default_judge_scoring("local/smollm2") == "loglik"
    assert api.default_judge_scoring("openai/x") == "generate"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )


@pytest.mark.model
def test_choosing_a_local_model_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from experiments.llm import get_model\n"
        "from experiments.llm.types import Decoding\n"
        "lm = get_model('local/smollm2')\n"
        "lm.cache_identity(); lm.loglik_identity('sum', [' Yes'])\n"
        "lm.complete('Q: Yes?\\nA:', Decoding(max_tokens=2, mode='completion'))\n"
        "lm.loglikelihood('Q: Yes?\\nA:', [' Yes', ' No'])\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]


def test_choosing_a_served_model_imports_litellm() -> None:
    """The other side of the seam: litellm is the gateway of the served and API models."""
    done = _python(
        "import sys\nfrom experiments.llm import get_model\n"
        "get_model('openai/x', api_base='http://127.0.0.1:9/v1')\n"
        "assert 'litellm' in sys.modules\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]


PROMPTS = (
    "Is this hearsay? A witness repeats what her neighbour said.\nAnswer Yes or No.\nA:",
    "Q: Does the clause grant an audit right?\nA:",
    "Say yes.",
)


@pytest.mark.model
@pytest.mark.parametrize("mode", ["completion", "chat"])
def test_the_local_backend_answers_as_llama_cpp_and_the_old_litellm_provider(mode: str) -> None:
    """`LocalModel.complete` calls llama-cpp-python as litellm's custom provider did: the
    same text and token counts as llama-cpp-python called directly, and as the provider
    (still registered for callers that go through litellm)."""
    import litellm

    from experiments.llm import get_model
    from experiments.llm.llama import load_local
    from experiments.llm.local_model import register_litellm_provider
    from experiments.llm.types import Decoding

    lm = get_model("local/smollm2", mode=mode)
    llm = load_local("smollm2")
    register_litellm_provider()
    for prompt in PROMPTS:
        decoding = Decoding(max_tokens=12, stop=("\n",), mode=mode)  # type: ignore[arg-type]
        got = lm.complete(prompt, decoding)
        assert got.error is None and got.cost is None and got.attempts == 1
        gen = {"max_tokens": 12, "temperature": 0.0, "stop": ["\n"]}
        kwargs = {"model": "local/smollm2", **gen}
        if mode == "completion":
            direct = llm.create_completion(prompt, **gen)
            text = direct["choices"][0]["text"]
            old = litellm.text_completion(prompt=prompt, **kwargs)
            old_text = old.choices[0].text
        else:
            messages = [{"role": "user", "content": prompt}]
            direct = llm.create_chat_completion(messages=messages, **gen)
            text = direct["choices"][0]["message"]["content"]
            old = litellm.completion(messages=messages, **kwargs)
            old_text = old.choices[0].message.content
        usage = direct["usage"]
        assert (got.text, got.tokens_in, got.tokens_out) == (
            text,
            usage["prompt_tokens"],
            usage["completion_tokens"],
        ), prompt
        assert (old_text, old.usage.prompt_tokens, old.usage.completion_tokens) == (
            got.text,
            got.tokens_in,
            got.tokens_out,
        ), prompt


@pytest.mark.model
def test_the_local_backend_identity_and_order() -> None:
    """Its identity is the one the gateway gave a local model (`identity.lm_identity`), and
    its calls go in prefix order."""
    from experiments.llm import get_model
    from experiments.llm.identity import lm_identity, plain_loglik_identity

    lm = get_model("local/smollm2")
    assert lm.cache_identity() == lm_identity(lm)  # type: ignore[arg-type]
    assert list(lm.cache_identity())[:3] == ["model", "api_base", "mode"]
    assert lm.loglik_identity("sum", [" a"]) == plain_loglik_identity(
        "local/smollm2", "sum", [" a"]
    )
    order = lm.call_order(["b c d", "a b", "b c", "a b"])
    assert sorted(order) == [0, 1, 2, 3]
    assert order[:2] == [1, 3]  # the same prompt twice, one after the other, file order kept
