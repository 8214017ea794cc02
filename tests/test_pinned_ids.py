"""Ids never change by accident (issue 20): trial, sweep, variant, cache and study keys.

Every id the workbench stores or resumes by (trial ids, sweep ids, spec and variant ids,
response-cache keys, Optuna study keys, prediction and grade hashes, MLflow names) is pinned
here to the values the code gave at 3e21720, the commit before `experiments/` was split into
packages. A refactor that moves code must leave every one of them byte for byte, or caches,
resumed sweeps and studies made before it would silently start again.

The shipped specs are planned as `workbench sweep SPEC --dry-run --model openai/stub
--api-base http://127.0.0.1:9/v1` plans them (no model is called), and their trial ids are
also read from that command's `--json` output through the `workbench` entry point.

The pins depend on the LegalBench files they were made from: on other data the test skips,
saying so. Regenerate (only when an id change is intended, and say so in the commit):

    LEGALBENCH_DIR=../shared/legalbench .venv/bin/python tests/test_pinned_ids.py > tests/data/pinned_ids.json
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PINS = Path(__file__).resolve().parent / "data" / "pinned_ids.json"
MODEL = "openai/stub"
API_BASE = "http://127.0.0.1:9/v1"
_CLEAN_ENV = ("WORKBENCH_LOCAL_N_CTX", "WORKBENCH_LLAMA_EXTRA_BUFTS", "WORKBENCH_CPUINFO")


def _data_dir() -> Path:
    return Path(os.environ.get("LEGALBENCH_DIR") or ROOT.parent / "shared" / "legalbench")


def _fingerprint(lb: Path, tasks: list[str]) -> str:
    """sha256 over the pinned tasks' files (names and contents) in the LegalBench folder."""
    h = hashlib.sha256()
    for task in tasks:
        for f in sorted((lb / "tasks" / task).rglob("*")):
            if f.is_file():
                h.update(
                    f"{f.relative_to(lb)}\0".encode() + hashlib.sha256(f.read_bytes()).digest()
                )
    return h.hexdigest()


def compute_pins(lb: Path) -> dict[str, Any]:
    """Every pinned id, computed with the current code (public or test-used names only)."""
    from experiments.ids import grades_sha as _sha
    from experiments.ids import judge_id
    from experiments.llm.cache import cache_key
    from experiments.llm.gateway import LiteLLMModel
    from experiments.llm.served import SERVED_ALIGNMENT_CHECK
    from experiments.llm.types import Completion, Decoding
    from experiments.names import metric_key, metric_name, predictions_sha, safe_model, safe_name
    from experiments.optimize.config import OptimizeConfig
    from experiments.optimize.study import _study_key, _study_name
    from experiments.sweeps.plan import plan_tasks, sweep_id, trial_plan
    from experiments.sweeps.spec import load_spec
    from experiments.trials.record import Prediction
    from experiments.trials.run import TrialResult, run_trial
    from experiments.trials.spec import TrialSpec, prompt_hash, resolve_trial, rows_fingerprint
    from promptlib import Catalog, LocalSource, parse_spec

    def lm() -> LiteLLMModel:  # as `workbench sweep --model ... --api-base ...` builds it
        return LiteLLMModel(MODEL, api_base=API_BASE, concurrency=8, max_retries=4, timeout=60.0)

    out: dict[str, Any] = {"model": MODEL, "api_base": API_BASE, "specs": {}, "cache_keys": {}}
    catalog = Catalog(LocalSource(str(lb)))
    for path in sorted((ROOT / "ablations").glob("*.yaml")):
        spec = load_spec(path)
        planned = plan_tasks(spec, catalog)
        plan = trial_plan(spec, planned, (MODEL,))
        model = lm()
        resolved = [resolve_trial(t.spec, catalog, model) for t in plan]
        sid = sweep_id(
            spec,
            [model.cache_identity()],
            [p.task for p in planned],
            None,
            [r.id for r in resolved],
        )
        out["specs"][path.name] = {
            "spec_id": spec.id,
            "sweep_id": sid,
            "variant_ids": {nv.name: nv.variant.id for nv in spec.variants},
            "trials": [
                [t.planned.task, t.variant.name, t.spec.scoring, len(r.rows), r.id]
                for t, r in zip(plan, resolved, strict=True)
            ],
            "skipped": [[p.task, p.skipped] for p in planned if p.skipped],
        }
    tasks = sorted(
        {t for v in out["specs"].values() for t, *_ in v["trials"]}
        | {t for v in out["specs"].values() for t, _ in v["skipped"]}
        | {"hearsay"}
    )
    out["data_fingerprint"] = {"tasks": tasks, "sha256": _fingerprint(lb, tasks)}

    identity = lm().cache_identity()
    local: dict[str, Any] = {"model": "local/smollm2", "api_base": None, "mode": "completion"}
    local |= {"weights_sha256": "0" * 64, "n_ctx": 4096}
    requests: dict[str, tuple[dict[str, Any], str, Decoding]] = {
        "generate_ascii": (
            identity, "Is this hearsay?\nA:", Decoding(max_tokens=8, stop=("\n",), mode="chat")
        ),
        "generate_non_ascii": (
            identity,
            "¿Es «hearsay»? — Ünïcode ✓\nA:",
            Decoding(max_tokens=64, stop=("\n",), mode="chat"),
        ),
        "loglik_served": (
            {"model": MODEL, "mode": "loglik", "loglik": "sum", "continuations": [" Yes", " No"],
             "api_base": API_BASE, "alignment_check": SERVED_ALIGNMENT_CHECK},
            "Is this hearsay?\nA:",
            Decoding(temperature=0.0, max_tokens=0, stop=(), mode="completion"),
        ),
        "local_default_layout": (
            local, "Is this hearsay?\nA:", Decoding(max_tokens=8, stop=("\n",), mode="completion")
        ),
        "local_extra_bufts_off": (
            local | {"llama_extra_bufts": False},
            "Is this hearsay?\nA:",
            Decoding(max_tokens=8, stop=("\n",), mode="completion"),
        ),
    }  # fmt: skip
    for name, (ident, prompt, decoding) in requests.items():
        out["cache_keys"][name] = cache_key(ident, prompt, decoding)

    class RecordingCache:
        """A cache that always hits, so the runner builds every key and calls no model."""

        def __init__(self) -> None:
            self.keys: list[str] = []

        def get(self, key: str) -> Completion:
            self.keys.append(key)
            return Completion("Yes", tokens_in=1, tokens_out=1)

        def put(self, key: str, completion: Completion) -> None:
            raise AssertionError("a hit is never written")

    for scoring in ("generate", "loglik", "loglik-norm"):
        rec = RecordingCache()
        variant = parse_spec("base" if scoring == "generate" else "demos=none")
        tspec = TrialSpec(
            task="hearsay", variant=variant, model=MODEL, limit=2, seed=0, scoring=scoring
        )
        result = run_trial(tspec, catalog, lm(), cache=rec)  # type: ignore[arg-type]
        out["cache_keys"][f"runner_hearsay_{scoring}"] = {
            "trial_id": result.trial_id,
            "keys": rec.keys,
        }

    misc: dict[str, Any] = {"cache_identity_openai_stub": identity}
    rows = [
        {"index": "0", "text": "é", "answer": "Yes"},
        {"index": "1", "text": "b", "answer": "No"},
    ]
    misc["rows_fingerprint"] = rows_fingerprint(rows)
    misc["prompt_hash"] = prompt_hash("¿Es «hearsay»?\nA:")
    preds = [
        Prediction(index="0", prompt_hash="p", answer="Yes", generation="Yes ✓", parsed="Yes",
                   correct=True),
        Prediction(index="1", prompt_hash="p", answer="No", generation=None, parsed=None,
                   correct=None, error="x"),
    ]  # fmt: skip
    fake = TrialResult(
        spec=TrialSpec(task="hearsay", variant=parse_spec("base"), model=MODEL),
        trial_id="t", variant_id="v", metric="balanced_accuracy", predictions=preds,
        score=None, score_on_answered=None, report=None, model_calls=0, cache_hits=0,
        wall_time=0.0, cost=None,
    )  # fmt: skip
    misc["predictions_sha"] = predictions_sha(fake)
    misc["grades_sha"] = _sha([{"index": "0", "generation": "Yes ✓", "grade": 1}])
    misc["judge_id"] = judge_id(
        identity,
        {"scoring": "generate", "decoding": Decoding(max_tokens=10, stop=()).to_dict()},
        {"correctness": "a" * 64, "analysis": "b" * 64},
        "judge-prompt-v1",
    )
    cfg = OptimizeConfig(task="hearsay", model=MODEL, storage="sqlite:////tmp/optuna.db")
    misc["study_name"] = _study_name(cfg)
    misc["study_key"] = _study_key(cfg)
    misc["study_key_pg"] = _study_key(
        OptimizeConfig(task="hearsay", model=MODEL, method="dspy-mipro",
                       storage="postgresql://u:secret@db:5432/optuna")
    )  # fmt: skip
    misc["metric_key_long"] = metric_key("sensitivity." + "x" * 300 + ".avgp")
    misc["safe_name"] = safe_name("workbench/demo:run é.1")
    misc["metric_name"] = metric_name("hearsay", "openai/gpt-4o:mini é", "avgp")
    misc["safe_model"] = safe_model("openai/gpt-4o-mini")
    misc["variant_ids"] = {
        s: parse_spec(s).id
        for s in ("base", "demos=none", "demos=4,seed=0", "instruction=reference,demos=none")
    }
    out["misc"] = misc
    return out


@pytest.fixture(scope="module")
def pins() -> dict[str, Any]:
    pinned: dict[str, Any] = json.loads(PINS.read_text(encoding="utf-8"))
    lb = _data_dir()
    fp = pinned["data_fingerprint"]
    if not (lb / "tasks").is_dir() or _fingerprint(lb, fp["tasks"]) != fp["sha256"]:
        pytest.skip(
            f"the pins were made on other LegalBench files than {lb}: they cannot be checked"
        )
    return pinned


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from experiments.llm.answer_env import all_answer_names

    # a variable deciding a model's answers (OPENAI_BASE_URL, ...) is part of its identity
    for name in (*_CLEAN_ENV, *sorted(all_answer_names())):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_every_pinned_id_is_unchanged(pins: dict[str, Any], clean_env: None) -> None:
    now = compute_pins(_data_dir())
    assert now["data_fingerprint"] == pins["data_fingerprint"]
    assert now["specs"].keys() == pins["specs"].keys(), "a shipped spec was added or removed"
    for name, pinned in pins["specs"].items():
        assert now["specs"][name] == pinned, f"ids of ablations/{name} changed"
    assert now["cache_keys"] == pins["cache_keys"], "a response-cache key changed"
    assert now["misc"] == pins["misc"], "an id recipe changed"


@pytest.mark.parametrize("spec", ["demo.yaml", "sensitivity_grid.yaml"])
def test_dry_run_prints_the_pinned_trial_ids(
    pins: dict[str, Any], clean_env: None, spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the `workbench` entry point, as a user would see them."""
    (main,) = [e for e in entry_points(group="console_scripts") if e.name == "workbench"]
    argv = ["workbench", "sweep", str(ROOT / "ablations" / spec), "--dry-run", "--json",
            "--model", MODEL, "--api-base", API_BASE, "--data-dir", str(_data_dir())]  # fmt: skip
    old = sys.argv
    sys.argv = argv
    try:
        with pytest.raises(SystemExit) as done:
            main.load()()
    finally:
        sys.argv = old
    assert done.value.code in (0, None)
    printed = json.loads(capsys.readouterr().out)
    assert [t["trial_id"] for t in printed["trials"]] == [
        t[4] for t in pins["specs"][spec]["trials"]
    ]


if __name__ == "__main__":
    sys.path[0] = str(ROOT)  # not tests/, whose promptlib/ folder would shadow the package
    for _name in _CLEAN_ENV:
        os.environ.pop(_name, None)
    json.dump(compute_pins(_data_dir()), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
