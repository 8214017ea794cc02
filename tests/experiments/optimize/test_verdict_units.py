"""optimize's held-out verdict says what its test swapped (issue 29, point 4): clusters of rows
given the same prompt with their count, as the sweep table's `clus` column, or, for the
sequential verdict, the clusters its sequence bet on."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.optimize import optimize
from experiments.output import optimize_report
from experiments.tracking import Tracker, load_config
from promptlib import Catalog

pytestmark = pytest.mark.data

# 43 rows: 19 dev, 24 held-out holding 12 distinct clauses (contracts repeat them)
TASK = "cuad_price_restrictions"


class ByPrompt(LMDefaults):
    """A deterministic model: the reply is a function of the prompt, so rows given the same
    prompt get the same reply, as at temperature 0 through the response cache."""

    name = "scripted/by-prompt"
    mode = "completion"
    concurrency = 1

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        digest = hashlib.sha256(prompt.encode()).digest()[0]
        return Completion(" Yes" if digest % 3 else " No")


def _run(tmp_path: Path, catalog: Catalog, design: str) -> dict[str, Any]:
    cfg_file = tmp_path / "mlflow.yaml"
    cfg_file.write_text(
        f"tracking_uri: sqlite:///{tmp_path}/mlflow.db\nartifact_location: {tmp_path}/art\n"
        "experiment_prefix: t\nprompt_registry: false\n"
    )
    cfg = OptimizeConfig(
        task=TASK, model=ByPrompt.name, n_trials=2, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=1, heldout_design=design, heldout_batch=50, pruner="none",
    )  # fmt: skip
    return optimize(cfg, catalog, ByPrompt(), Tracker(load_config(cfg_file))).to_dict()


def _texts(catalog: Catalog, indices: list[str]) -> list[str]:
    rows = {r["index"]: r for r in catalog.task(TASK).rows("test")}
    return [" ".join(rows[i]["text"].split()) for i in indices]


def test_the_fixed_verdict_clusters_repeated_texts_and_says_so(
    catalog: Catalog, tmp_path: Path
) -> None:
    r = _run(tmp_path, catalog, "fixed")
    h = r["heldout"]
    texts = _texts(catalog, r["heldout_indices"])
    distinct = len(set(texts))
    assert h["n"] == len(texts) == 24 and distinct == 12  # the held-out rows repeat texts
    # the test's units: one cluster per prompt, as the sweep's default cluster_by
    assert h["clustered_by"] == "prompt" and h["n_clusters"] == distinct
    assert h["cluster_note"] is None  # every row has its prompt hash
    assert f"of {distinct} clusters of rows given the same prompt (24 rows)" in r["test"]
    text = optimize_report(r)
    assert f"held-out units:            {distinct} clusters of 24 rows" in text


def test_the_sequential_verdict_clusters_repeated_prompts(catalog: Catalog, tmp_path: Path) -> None:
    r = _run(tmp_path, catalog, "sequential")
    h = r["heldout"]
    assert r["sequential"] is not None and r["p_value"] is None
    distinct = len(set(_texts(catalog, r["heldout_indices"])))
    assert h["n"] == 24 and distinct == 12  # one batch of 50: every judged row
    assert h["clustered_by"] == "prompt" and h["n_clusters"] == distinct
    assert r["sequential"]["n_clusters"] == distinct
    assert h["cluster_note"] is None
    assert f"{distinct} clusters of rows given the same prompt" in r["test"]
    text = optimize_report(r)
    assert f"held-out units:            {distinct} clusters of 24 rows" in text
