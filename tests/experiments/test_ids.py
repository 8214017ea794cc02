"""`experiments.ids` gives, for every input, the ids the code that computed them before gave.

Every caller now calls `experiments.ids`, so comparing with a caller would compare a recipe
with itself: each recipe is also copied here, frozen, from the code before it moved (commit
and file:line cited), so a change to `ids` shows. The values pinned in
`tests/data/pinned_ids.json` are checked too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from experiments import ids
from experiments.llm.types import Decoding
from experiments.names import metric_key
from experiments.secrets import safe_url
from experiments.sweeps.spec import SweepSpec, load_spec
from experiments.trials.record import Prediction
from experiments.trials.run import TrialResult
from experiments.trials.spec import ResolvedTrial, TrialSpec
from promptlib.variants import parse_spec

ROOT = Path(__file__).resolve().parents[2]
PINS: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "pinned_ids.json").read_text("utf-8"))
SPECS = sorted((ROOT / "ablations").glob("*.yaml"))

TEXTS = [
    "",
    "a",
    "Is this hearsay?\nA:",
    "¿Es «hearsay»? — Ünïcode ✓\nA:",
    "日本語\0nul",
    "😀" * 40,
]
VALUES: list[Any] = [
    None,
    0,
    -1,
    1.5,
    1e-300,
    float(2**60),
    True,
    "é",
    [],
    {},
    [None, 1, 2.25, "ü", [["x"]]],
    {"b": 1, "a": {"z": None, "y": [1.0, 0.1, "✓"]}, "é": "café"},
    {"lm": {"model": "openai/stub", "api_base": None}, "n": [3, 2, 1], "f": 0.30000000000000004},
]


def _shuffled(obj: Any, rng: random.Random) -> Any:
    """`obj` with every dict's keys in another insertion order (the same content)."""
    if isinstance(obj, dict):
        items = [(k, _shuffled(v, rng)) for k, v in obj.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(obj, list):
        return [_shuffled(v, rng) for v in obj]
    return obj


# ---- recipes copied, frozen, from the code before they moved to `experiments.ids` -------------
def _runner_sha256_json(obj: Any) -> str:  # 3e21720 experiments/runner.py:139-141 `_sha256_json`
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _runner_rows_fingerprint(rows: list[dict[str, str]]) -> str:
    # 3e21720 experiments/runner.py:144-146 `rows_fingerprint`
    return _runner_sha256_json([sorted(r.items()) for r in rows])


def _runner_prompt_hash(prompt: str) -> str:  # 3e21720 experiments/runner.py:204-207
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _cache_key(identity: dict[str, Any], prompt: str, decoding: Decoding) -> str:
    # 3e21720 experiments/cache.py:47-50 `cache_key`
    payload = {"lm": identity, "prompt": prompt, "decoding": decoding.to_dict()}
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _spec_id(raw: Any) -> str:  # c0d9f37 experiments/sweeps/spec.py:93-96 `SweepSpec.id`
    blob = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _sweeps_sweep_id(
    spec: SweepSpec,
    lm_identities: list[dict[str, Any]],
    tasks: list[str],
    limit: int | None,
    trial_ids: list[str],
) -> str:  # c0d9f37 experiments/sweeps/plan.py:155-176 `sweep_id`
    blob = json.dumps(
        {
            "spec": _spec_id(spec.raw),
            "models": lm_identities,
            "tasks": tasks,
            "limit": limit,
            "trials": sorted(trial_ids),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _tracking_sha(value: Any) -> str:  # c0d9f37 experiments/names.py:121-124 `_sha`
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _tracking_predictions_sha(result: TrialResult) -> str:
    # c0d9f37 experiments/names.py:127-129 `predictions_sha`
    return _tracking_sha([[str(p.index), p.generation, p.parsed] for p in result.predictions])


def _optimize_study_key(storage: str, name: str, method: str) -> str:
    # c0d9f37 experiments/optimize/study.py:171-176 `_study_key` (storage already chosen there:
    # `cfg.storage or f"sqlite:///{Path('optuna.db').resolve()}"`, name `_study_name(cfg)`)
    blob = json.dumps([safe_url(storage), name, method])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _group_seed(seed: int, *parts: str) -> int:
    # c0d9f37 experiments/analysis/sensitivity/groups.py:43-49 `_group_seed`
    h = hashlib.sha256("\0".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big")


def _validation_uniform(seed: int, *parts: str) -> float:
    # c0d9f37 experiments/testing/validation.py:66-68 `KnownEffectLM._uniform`
    h = hashlib.sha256("\0".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _short(text: str) -> str:
    # c0d9f37 experiments/names.py:50 (metric_key), :67 (_param), store.py:119 (_lock_dir)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---- canonical JSON ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", VALUES)
def test_canonical_sha256_is_the_runners_and_ignores_key_order(value: Any) -> None:
    rng = random.Random(7)
    for _ in range(3):
        again = _shuffled(value, rng)
        assert ids.canonical_sha256(again) == _runner_sha256_json(value)
        assert ids.trial_id({"x": again}) == _runner_sha256_json({"x": value})


def test_trial_id_and_template_are_the_resolved_trials() -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model="openai/stub")
    for template in TEXTS:
        compiled = SimpleNamespace(variant=spec.variant, template=lambda t=template: t)
        resolved = ResolvedTrial(
            spec=spec,
            compiled=compiled,  # type: ignore[arg-type]
            rows=[{"index": "0", "text": template, "answer": "Yes"}],
            excluded=[],
            metric="balanced_accuracy",
            lm_identity={"model": "openai/stub", "api_base": None, "mode": "chat"},
            decoding=Decoding(max_tokens=8, stop=("\n",)).to_dict(),
            labels=("Yes", "No") if template else None,
        )
        identity = resolved.identity()
        assert ids.trial_id(identity) == resolved.id == _runner_sha256_json(identity)
        assert identity["template"] == ids.text_sha256(
            template
        )  # trials/spec.py ResolvedTrial.identity
        assert identity["rows"] == ids.rows_fingerprint(resolved.rows)


def test_rows_fingerprint_is_the_runners() -> None:
    rows = [
        {"index": str(i), "text": t, "answer": a}
        for i, (t, a) in enumerate(zip(TEXTS, ["Yes", "No", "é", "", "✓", "x"], strict=True))
    ]
    for n in range(len(rows) + 1):
        assert ids.rows_fingerprint(rows[:n]) == _runner_rows_fingerprint(rows[:n])
        reordered = [dict(reversed(list(r.items()))) for r in rows[:n]]
        assert ids.rows_fingerprint(reordered) == _runner_rows_fingerprint(rows[:n])
    fixed = [
        {"index": "0", "text": "é", "answer": "Yes"},
        {"index": "1", "text": "b", "answer": "No"},
    ]
    assert ids.rows_fingerprint(fixed) == PINS["misc"]["rows_fingerprint"]


def test_cache_key_is_the_caches() -> None:
    identities: list[dict[str, Any]] = [
        {"model": "openai/stub", "api_base": "http://127.0.0.1:9/v1", "mode": "chat"},
        {"model": "local/smollm2", "api_base": None, "weights_sha256": "0" * 64, "n_ctx": 4096},
        {"model": "ü", "continuations": [" Yes", " No"], "alignment_check": {"p": 0.5}},
    ]
    decodings = [
        Decoding(),
        Decoding(max_tokens=8, stop=("\n",), mode="chat"),
        Decoding(temperature=0.7, max_tokens=0, stop=(), mode="completion"),
    ]
    rng = random.Random(3)
    for identity in identities:
        for prompt in TEXTS:
            for decoding in decodings:
                want = _cache_key(identity, prompt, decoding)
                got = ids.cache_key(_shuffled(identity, rng), prompt, decoding.to_dict())
                assert got == want


def test_cache_key_pins() -> None:
    api = PINS["api_base"]
    identity = PINS["misc"]["cache_identity_openai_stub"]
    local = {"model": "local/smollm2", "api_base": None, "mode": "completion"}
    local |= {"weights_sha256": "0" * 64, "n_ctx": 4096}
    completion = Decoding(max_tokens=8, stop=("\n",), mode="completion").to_dict()
    served = {"model": PINS["model"], "mode": "loglik", "loglik": "sum"}
    served |= {"continuations": [" Yes", " No"], "api_base": api}
    # the served alignment check's value is the runner's SERVED_ALIGNMENT_CHECK
    from experiments.llm.served import SERVED_ALIGNMENT_CHECK

    served["alignment_check"] = SERVED_ALIGNMENT_CHECK
    pinned = PINS["cache_keys"]
    chat8 = Decoding(max_tokens=8, stop=("\n",), mode="chat").to_dict()
    chat64 = Decoding(max_tokens=64, stop=("\n",), mode="chat").to_dict()
    loglik = Decoding(temperature=0.0, max_tokens=0, stop=(), mode="completion").to_dict()
    q = "Is this hearsay?\nA:"
    assert ids.cache_key(identity, q, chat8) == pinned["generate_ascii"]
    assert (
        ids.cache_key(identity, "¿Es «hearsay»? — Ünïcode ✓\nA:", chat64)
        == (pinned["generate_non_ascii"])
    )
    assert ids.cache_key(served, q, loglik) == pinned["loglik_served"]
    assert ids.cache_key(local, q, completion) == pinned["local_default_layout"]
    off = local | {"llama_extra_bufts": False}
    assert ids.cache_key(off, q, completion) == pinned["local_extra_bufts_off"]


def test_variant_id_is_promptlibs() -> None:
    for text, pinned in PINS["misc"]["variant_ids"].items():
        v = parse_spec(text)
        assert ids.canonical_sha256(v.to_dict()) == v.id == pinned
        assert ids.variant_id(v.to_dict()) == v.id


# ---- spec, sweep, study -----------------------------------------------------------------------
@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_spec_and_sweep_ids_are_the_sweeps(path: Path) -> None:
    spec = load_spec(path)
    assert ids.spec_id(spec.raw) == _spec_id(spec.raw) == PINS["specs"][path.name]["spec_id"]
    assert spec.id == ids.spec_id(spec.raw)
    pinned = PINS["specs"][path.name]
    trial_ids = [t[4] for t in pinned["trials"]]
    identity = PINS["misc"]["cache_identity_openai_stub"]
    got = ids.sweep_id(spec.id, [identity], list(spec.tasks), None, trial_ids)
    assert got == _sweeps_sweep_id(spec, [identity], list(spec.tasks), None, trial_ids)
    assert got == pinned["sweep_id"]
    # non-ASCII, floats, None and other values shown by str, in any key order
    raw = {
        **spec.raw,
        "description": "é ✓ 日本",
        "x": [1.5, None, Path("p")],
        "z": {"b": 1, "a": 2},
    }
    edited = dataclasses.replace(spec, raw=_shuffled(raw, random.Random(1)))
    assert ids.spec_id(edited.raw) == _spec_id(edited.raw)
    assert ids.spec_id(raw) == _spec_id(edited.raw) == edited.id
    for limit in (None, 1, 200):
        shuffled = list(reversed(trial_ids))
        want = _sweeps_sweep_id(edited, [identity, {"model": "ü"}], ["é"], limit, trial_ids)
        assert ids.sweep_id(edited.id, [identity, {"model": "ü"}], ["é"], limit, shuffled) == want


def test_study_key_is_optimizes() -> None:
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.study import _study_key, _study_name

    storages = [
        "sqlite:////tmp/optuna.db",
        "postgresql://u:secret@db:5432/optuna",
        "sqlite:///é ✓.db",
    ]
    for storage in storages:
        for method in ("optuna", "dspy-mipro"):
            cfg = OptimizeConfig(
                task="hearsay", model="openai/stub", storage=storage, method=method
            )
            # the optimize module's own private key, called as test_pinned_ids does
            want = _study_key(cfg)
            assert want == _optimize_study_key(storage, _study_name(cfg), method)
            assert ids.study_key(safe_url(storage), _study_name(cfg), method) == want
    misc = PINS["misc"]
    name = misc["study_name"]
    assert ids.study_key(safe_url("sqlite:////tmp/optuna.db"), name, "optuna") == misc["study_key"]
    pg = "postgresql://u:secret@db:5432/optuna"
    cfg = OptimizeConfig(task="hearsay", model="openai/stub", method="dspy-mipro", storage=pg)
    pg_name = _study_name(cfg)
    assert ids.study_key(safe_url(pg), pg_name, "dspy-mipro") == misc["study_key_pg"]


# ---- tag hashes -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", VALUES)
def test_tag_sha_is_trackings(value: Any) -> None:
    rng = random.Random(5)
    assert ids.tag_sha(_shuffled(value, rng)) == _tracking_sha(value)
    assert ids.grades_sha(value) == _tracking_sha(value)
    assert ids.tag_sha({"p": Path("x"), "v": value}) == _tracking_sha({"p": Path("x"), "v": value})


def _result(preds: list[Prediction]) -> TrialResult:
    return TrialResult(
        spec=TrialSpec(task="hearsay", variant=parse_spec("base"), model="openai/stub"),
        trial_id="t", variant_id="v", metric="balanced_accuracy", predictions=preds,
        score=None, score_on_answered=None, report=None, model_calls=0, cache_hits=0,
        wall_time=0.0, cost=None,
    )  # fmt: skip


def test_predictions_sha_is_trackings() -> None:
    pinned = [
        Prediction(index="0", prompt_hash="p", answer="Yes", generation="Yes ✓", parsed="Yes",
                   correct=True),
        Prediction(index="1", prompt_hash="p", answer="No", generation=None, parsed=None,
                   correct=None, error="x"),
    ]  # fmt: skip
    assert ids.predictions_sha(pinned) == _tracking_predictions_sha(_result(pinned))
    assert ids.predictions_sha(pinned) == PINS["misc"]["predictions_sha"]
    for text in TEXTS:
        preds = [
            Prediction(index=str(i), prompt_hash="h", answer="a", generation=text[:i] or None,
                       parsed=text or None, correct=None)
            for i in range(4)
        ]  # fmt: skip
        assert ids.predictions_sha(preds) == _tracking_predictions_sha(_result(preds))
    assert ids.predictions_sha([]) == _tracking_predictions_sha(_result([]))
    grades = [{"index": "0", "generation": "Yes ✓", "grade": 1}]
    assert ids.grades_sha(grades) == PINS["misc"]["grades_sha"]
    # c0d9f37 experiments/tracking/single_runs.py:152: the predictions hash rebuilt from grades
    rows = [[str(g["index"]), g["generation"], None] for g in grades]
    assert ids.tag_sha(rows) == _tracking_sha(rows)


# ---- texts and seeds --------------------------------------------------------------------------
@pytest.mark.parametrize("text", TEXTS)
def test_text_hashes(text: str) -> None:
    assert ids.prompt_hash(text) == _runner_prompt_hash(text)
    assert ids.text_sha256(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert ids.short_sha(text) == _short(text)


def test_text_hash_pins() -> None:
    assert ids.prompt_hash("¿Es «hearsay»?\nA:") == PINS["misc"]["prompt_hash"]
    long = "sensitivity." + "x" * 300 + ".avgp"
    assert metric_key(long).endswith("." + ids.short_sha(long))
    assert PINS["misc"]["metric_key_long"].endswith("." + ids.short_sha(long))


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40])
def test_seeds_are_sensitivitys_and_validations(seed: int) -> None:
    for parts in [(), ("measures",), ("shares", "hearsay", "openai/é", "a", "b"), ("", "\0")]:
        assert ids.seed_int(seed, *parts) == _group_seed(seed, *parts)
        assert ids.seed_uniform(seed, *parts) == _validation_uniform(seed, *parts)
        assert 0 <= ids.seed_uniform(seed, *parts) < 1
