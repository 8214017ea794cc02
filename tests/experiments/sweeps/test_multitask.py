"""One spec over tasks that support different levels: each task runs what it supports, and the
report, the comparisons and the sensitivity analysis say what it skipped and use only what ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from experiments.sweeps.plan import plan_tasks, short_reason, sweep_id, trial_plan
from experiments.sweeps.spec import SpecError, load_spec
from experiments.testing.stub_server import StubOpenAI, hashed_yes_no
from promptlib import Catalog, LocalSource
from tests.conftest import mlflow_store

BASE = "instruction=base,format=base"
REF = "instruction=reference,format=base"
DESC = "instruction=description,format=base"
CLAUDE = "instruction=base,format=claude"
# hearsay ships both rule prompts; telemarketing_sales_rule only the description one (its
# reference prompt is empty); proa only the register prompts; sara_numeric neither, and no
# label set (format=claude cannot run on it)
TASKS = ["hearsay", "telemarketing_sales_rule", "proa", "sara_numeric"]
TSR = "telemarketing_sales_rule"
RUNS = {
    "hearsay": {f"instruction={i},format={f}" for i in ("base", "reference", "description")
                for f in ("base", "claude")},
    TSR: {f"instruction={i},format={f}" for i in ("base", "description")
          for f in ("base", "claude")},
    "proa": {BASE, CLAUDE},
    "sara_numeric": {BASE},
}  # fmt: skip


def spec_text(name: str, tasks: list[str]) -> str:
    return (
        f"name: {name}\ntasks: [{', '.join(tasks)}]\nfixed: {{demos: none}}\nlimit: 8\n"
        "axes:\n  instruction: [base, reference, description]\n  format: [base, claude]\n"
        f'comparisons: [["{BASE}", "{REF}"], ["{BASE}", "{DESC}"], ["{BASE}", "{CLAUDE}"]]\n'
        "n_resamples: 100\n"
    )


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_variant_no_task_can_run_is_still_an_error_of_the_spec(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: x\ntasks: [hearsay, proa]\n"
        "axes:\n  instruction: [base, reference, description]\n  register: [default, plain]\n",
    )
    with pytest.raises(SpecError, match="no LegalBench prompt combines instruction=reference"):
        load_spec(path)


def test_short_reason_drops_the_advice_and_the_file_list() -> None:
    msg = (
        "instruction=reference needs rule_reference_prompt.txt, which task 'proa' lacks (its "
        "prompt files: base_prompt.txt, claude_prompt.txt); pick a task that has it"
    )
    assert short_reason(msg) == (
        "instruction=reference needs rule_reference_prompt.txt, which task 'proa' lacks"
    )
    assert len(short_reason("x" * 500)) == 160 and short_reason("x" * 500).endswith("…")


@pytest.mark.data
def test_each_task_plans_the_variants_it_supports(tmp_path: Path, catalog: Catalog) -> None:
    spec = load_spec(write(tmp_path, spec_text("mt", TASKS)))
    planned = {p.task: p for p in plan_tasks(spec, catalog)}
    for task, runs in RUNS.items():
        p = planned[task]
        assert {nv.name for nv in p.variants} == runs and not p.skipped
        assert {v for v, _ in p.skipped_variants} == {v.name for v in spec.variants} - runs
    why = dict(planned["proa"].skipped_variants)
    assert (
        why[REF] == "instruction=reference needs rule_reference_prompt.txt, which task 'proa' lacks"
    )
    assert "has none" in dict(planned["sara_numeric"].skipped_variants)[CLAUDE]
    assert "empty" in dict(planned[TSR].skipped_variants)[REF]
    plan = trial_plan(spec, list(planned.values()), ("openai/x",))
    assert len(plan) == sum(map(len, RUNS.values()))
    assert {(t.planned.task, t.variant.name) for t in plan} == {
        (task, v) for task, runs in RUNS.items() for v in runs
    }
    # a task where no variant runs is skipped whole, with every reason; a bad task is an error
    only_rules = write(
        tmp_path,
        "name: y\ntasks: [hearsay, proa]\nfixed: {demos: none}\n"
        "axes: {instruction: [reference, description]}\n",
        "y.yaml",
    )
    (h, proa) = plan_tasks(load_spec(only_rules), catalog)
    assert len(h.variants) == 2 and proa.skipped and not proa.variants
    assert (
        "rule_reference_prompt.txt" in proa.skipped
        and "rule_description_prompt.txt" in proa.skipped
    )
    bad = write(tmp_path, "name: z\ntasks: [hearsay, hearsey]\n", "z.yaml")
    with pytest.raises(Exception, match="hearsey"):
        plan_tasks(load_spec(bad), catalog)
    # requires: stays a hard requirement
    req = write(
        tmp_path,
        "name: r\ntasks: [hearsay, proa]\nrequires: [rule_reference_prompt.txt]\n"
        "axes: {instruction: [base, reference]}\n",
        "r.yaml",
    )
    with pytest.raises(SpecError, match=r"task 'proa' lacks rule_reference_prompt\.txt"):
        plan_tasks(load_spec(req), catalog)


@pytest.mark.data
def test_dry_run_lists_the_skipped_variants(tmp_path: Path, lb_dir: Path) -> None:
    path = write(tmp_path, spec_text("mt", ["hearsay", "proa"]))
    r = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", str(path), "--dry-run", "--json",
         "--model", "openai/x"],
        capture_output=True, text=True, env={**os.environ, "LEGALBENCH_DIR": str(lb_dir)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {(t["task"], t["variant"]) for t in doc["trials"]} == {
        (t, v) for t in ("hearsay", "proa") for v in RUNS[t]
    }
    skipped = {(s["task"], s["variant"]): s["reason"] for s in doc["skipped"]}
    assert set(skipped) == {("proa", v) for v in RUNS["hearsay"] - RUNS["proa"]}
    assert "rule_description_prompt.txt" in skipped[("proa", DESC)]
    text = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", str(path), "--dry-run",
         "--model", "openai/x"],
        capture_output=True, text=True, env={**os.environ, "LEGALBENCH_DIR": str(lb_dir)},
    ).stdout  # fmt: skip
    assert f"skipped proa: variant {REF} (instruction=reference needs" in text


@pytest.mark.data
def test_the_sweep_id_covers_what_a_task_skips(tmp_path: Path, lb_dir: Path) -> None:
    """A task that gains the file it lacked runs one more trial: another sweep id, so a
    sweep never resumes the parent run of another set of trials."""
    from experiments.llm.gateway import LiteLLMModel
    from experiments.trials.spec import resolve_trial

    data = tmp_path / "lb"
    for t in ("hearsay", "proa"):
        shutil.copytree(lb_dir / "tasks" / t, data / "tasks" / t)
    path = write(
        tmp_path,
        "name: s\ntasks: [hearsay, proa]\nfixed: {demos: none}\n"
        "axes: {instruction: [base, reference]}\n",
    )
    spec = load_spec(path)
    lm = LiteLLMModel("openai/x", api_base="http://127.0.0.1:9/v1")

    def ids() -> tuple[str, list[str]]:
        catalog = Catalog(LocalSource(str(data)))
        planned = plan_tasks(spec, catalog)
        plan = trial_plan(spec, planned, (lm.name,))
        tids = [resolve_trial(t.spec, catalog, lm).id for t in plan]
        return sweep_id(spec, [lm.cache_identity()], [p.task for p in planned], None, tids), tids

    sid, tids = ids()
    assert len(tids) == 3
    base = (data / "tasks" / "proa" / "base_prompt.txt").read_text()
    # a prompt of its own (the base prompt's twin would be skipped as the same prompt)
    (data / "tasks" / "proa" / "rule_reference_prompt.txt").write_text("PROA: the rule. " + base)
    sid2, tids2 = ids()
    assert len(tids2) == 4 and set(tids) < set(tids2) and sid2 != sid


# ---- running against the stub server ---------------------------------------------------------
def _run(tmp_path: Path, catalog: Catalog, name: str, tasks: list[str]) -> dict[str, Any]:
    from experiments.llm.gateway import LiteLLMModel
    from experiments.sweeps.driver import run_sweep
    from experiments.tracking import Tracker, TrackingConfig

    root = tmp_path / name
    root.mkdir()
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=mlflow_store(root),
            artifact_location=(root / "artifacts").as_uri(),
            experiment_prefix="mt",
            prompt_registry=False,
            source="test",
        )
    )
    with StubOpenAI(reply_fn=hashed_yes_no) as stub:
        lm = LiteLLMModel("openai/stub", api_base=stub.url, concurrency=1)
        result = run_sweep(
            load_spec(write(root, spec_text(name, tasks))), catalog, models=(lm.name,),
            tracker=tracker, lm_factory=lambda _name: lm, reports_dir=root / "reports",
        )  # fmt: skip
    # this sweep run's own folder (reports/<sweep>/<sweep id>/), as the result names it
    report_dir = root / "reports" / name / result.sweep_id
    assert result.report is not None and result.report.report_dir == str(report_dir)
    # the document the CLI prints, with the trials' rows it adds
    doc = replace(result, trial_rows=tracker.sweep_trials(result.parent_run_id)).to_dict()
    doc["file"] = json.loads((report_dir / "comparisons.json").read_text())
    return doc


def _by_task(result: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    keys = ("status", "score_a", "score_b", "statistic", "p_value", "n", "ci_low", "ci_high")
    return {(r["task"], r["a"], r["b"]): {k: r[k] for k in keys} for r in result["comparisons"]}


def _measures(result: dict[str, Any]) -> dict[str, Any]:
    return {r["task"]: r for r in result["sensitivity"]["per_task"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> dict[str, Any]:
    os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")
    tmp = tmp_path_factory.mktemp("multitask")
    return {
        "all": _run(tmp, catalog, "mt", TASKS),
        "shuffled": _run(tmp, catalog, "mt_shuffled", list(reversed(TASKS))),
        "alone": _run(tmp, catalog, "mt_alone", [TSR]),
    }


@pytest.mark.data
def test_each_task_runs_exactly_the_variants_it_supports(runs: dict[str, Any]) -> None:
    r = runs["all"]
    assert r["status"] == "complete" and r["trials"] == sum(map(len, RUNS.values()))
    ran: dict[str, set[str]] = {}
    for t in r["trial_rows"]:
        ran.setdefault(t["task"], set()).add(t["variant"])
    assert ran == RUNS
    # the report (console result, reports/<sweep>/comparisons.json, the MLflow parent's copy)
    # lists per task what it skipped and why
    skipped = {(s["task"], s["variant"]) for s in r["skipped"]}
    all_variants = RUNS["hearsay"]
    assert skipped == {(t, v) for t in TASKS for v in all_variants - RUNS[t]}
    assert r["file"]["skipped"] == r["skipped"]
    from experiments.output import sweep_summary

    text = sweep_summary(r, "sqlite:///x")
    assert (
        f"skipped proa: variant {DESC} (instruction=description needs "
        "rule_description_prompt.txt, which task 'proa' lacks)"
    ) in text


@pytest.mark.data
def test_comparisons_only_where_both_arms_ran(runs: dict[str, Any]) -> None:
    rows = _by_task(runs["all"])
    tested = {("hearsay", BASE, REF), ("hearsay", BASE, DESC), ("hearsay", BASE, CLAUDE),
              (TSR, BASE, DESC), (TSR, BASE, CLAUDE), ("proa", BASE, CLAUDE)}  # fmt: skip
    assert set(rows) == {(t, BASE, b) for t in TASKS for b in (REF, DESC, CLAUDE)}
    for key, row in rows.items():
        if key in tested:
            assert row["p_value"] is not None and row["status"] == "tested"
            continue
        assert row["p_value"] is None and row["score_a"] is None and row["score_b"] is None
        assert row["status"].startswith(f"skipped on this task: {key[2]}: ")
        assert key[0] in row["status"]
    assert "empty" in rows[(TSR, BASE, REF)]["status"]
    assert "has none" in rows[("sara_numeric", BASE, CLAUDE)]["status"]
    p = [r for r in runs["all"]["comparisons"] if r["p_value"] is not None]
    assert {r["family_size"] for r in p} == {len(tested)}  # Holm over the tested rows only
    across = {(a["a"], a["b"]): a for a in runs["all"]["across_tasks"]}
    assert across[(BASE, REF)]["tasks"] == ["hearsay"] and across[(BASE, REF)]["n_tasks"] == 1
    assert set(across[(BASE, REF)]["missing_tasks"]) == {TSR, "proa", "sara_numeric"}
    assert across[(BASE, DESC)]["tasks"] == ["hearsay", TSR]
    assert across[(BASE, CLAUDE)]["tasks"] == ["hearsay", TSR, "proa"]
    assert across[(BASE, CLAUDE)]["n_tasks"] == 3
    # the across-task test is the one over the tasks that ran both arms
    from experiments.analysis import stats

    mine = [rows[(t, BASE, CLAUDE)] for t in ("hearsay", TSR, "proa")]
    ref = stats.across_tasks("t", [r["score_a"] for r in mine], [r["score_b"] for r in mine])
    assert across[(BASE, CLAUDE)]["p_value"] == ref.p_value


@pytest.mark.data
def test_a_p_value_equals_the_same_comparison_on_that_task_alone(runs: dict[str, Any]) -> None:
    mine = _by_task(runs["all"])
    alone = _by_task(runs["alone"])
    assert set(alone) == {k for k in mine if k[0] == TSR}
    assert any(row["p_value"] is not None and row["p_value"] < 1 for row in alone.values())
    for key, row in alone.items():
        assert mine[key] == row
    assert _measures(runs["all"])[TSR] == _measures(runs["alone"])[TSR]


@pytest.mark.data
def test_reordering_the_tasks_changes_no_per_task_result(runs: dict[str, Any]) -> None:
    assert _by_task(runs["all"]) == _by_task(runs["shuffled"])
    assert _measures(runs["all"]) == _measures(runs["shuffled"])
    a, b = runs["all"]["sensitivity"], runs["shuffled"]["sensitivity"]
    assert a["variance_shares"] == b["variance_shares"]
    assert {(t["task"], t["variant"]) for t in runs["all"]["trial_rows"]} == {
        (t["task"], t["variant"]) for t in runs["shuffled"]["trial_rows"]
    }


@pytest.mark.data
def test_sensitivity_uses_only_what_ran(runs: dict[str, Any]) -> None:
    sens = runs["all"]["sensitivity"]
    per = _measures(runs["all"])
    assert set(per) == {"hearsay", TSR, "proa"}  # sara_numeric ran one
    for task in per:
        assert set(per[task]["scores"]) == RUNS[task]
    (shares,) = sens["variance_shares"].values()
    # instruction ran different levels on each task: its effect stays within task, never
    # pooled by position; format ran base and claude everywhere: pooled as usual
    assert "instruction (within task)" in shares["shares"]
    assert "instruction" not in shares["shares"] and "instruction x task" not in shares["shares"]
    assert "format" in shares["shares"] and "format x task" in shares["shares"]
    assert shares["sum_of_shares"] == pytest.approx(1.0)
    assert "the tasks ran different levels" in shares["note"]
    assert any(n.startswith("proa: ran 2 of 6 variants, skipped") for n in sens["notes"])
    meta = {(m["a"], m["b"]): m for m in sens["meta_analysis"]}
    # each contrast pools only the tasks that ran both levels
    assert meta[("instruction=base", "instruction=reference")]["tasks"] == ["hearsay"]
    assert meta[("instruction=base", "instruction=description")]["tasks"] == ["hearsay", TSR]
    assert meta[("format=base", "format=claude")]["tasks"] == ["hearsay", "proa", TSR]


@pytest.mark.data
def test_a_register_axis_runs_where_the_register_files_are(
    tmp_path: Path, catalog: Catalog
) -> None:
    path = write(
        tmp_path,
        "name: g\ntasks: [hearsay, proa]\nfixed: {demos: none}\n"
        "axes: {register: [default, plain, technical]}\n"
        "comparisons: [[register=plain, register=technical]]\n",
    )
    hearsay, proa = plan_tasks(load_spec(path), catalog)
    assert [nv.name for nv in proa.variants] == ["register=default", "register=plain",
                                                 "register=technical"]  # fmt: skip
    assert [nv.name for nv in hearsay.variants] == ["register=default"]
    assert dict(hearsay.skipped_variants) == {
        "register=plain": "register=plain needs zero_shot_simple.txt, which task 'hearsay' lacks",
        "register=technical": "register=technical needs zero_shot_jargon.txt, which task "
        "'hearsay' lacks",
    }


@pytest.mark.data
def test_a_sweep_where_no_task_runs_anything_is_an_error_before_any_run(
    tmp_path: Path, catalog: Catalog
) -> None:
    from experiments.sweeps.driver import _plan

    path = write(
        tmp_path,
        "name: n\ntasks: [proa, sara_numeric]\nfixed: {demos: none}\n"
        "axes: {instruction: [reference, description]}\n",
    )
    with pytest.raises(SpecError, match="every task was skipped") as err:
        _plan(load_spec(path), catalog, ("openai/x",), None, None)
    assert "proa: no variant of this spec runs on it (instruction=reference: " in str(err.value)


def test_a_task_file_path_reads_each_tasks_own_file_and_skips_tasks_without_one(
    tmp_path: Path, catalog: Catalog
) -> None:
    """`{task}` in an instruction_file path: each task its own (generated) text; `none` the
    prompt's own instruction, on the same axis, so one comparison covers every task."""
    from experiments.generate.review import files_in_sweep, unreviewed

    for task, words in (("hearsay", "Hearsay is an out-of-court statement."), ("proa", "PROA.")):
        (tmp_path / task).mkdir()
        (tmp_path / task / "description.yaml").write_text(
            f"text: {words}\nreviewed: false\ngenerator: {{model: stub}}\n"
        )
    level = f"{tmp_path}/{{task}}/description.yaml"
    path = write(
        tmp_path,
        "name: gen\ntasks: [hearsay, proa, overruling]\nfixed: {demos: none}\nlimit: 6\n"
        f'axes:\n  instruction_file: [none, "{level}"]\nn_resamples: 100\n'
        f'comparisons: [["instruction_file=none", "instruction_file={level}"]]\n',
    )
    spec = load_spec(path)
    planned = {p.task: p for p in plan_tasks(spec, catalog)}
    assert [nv.name for nv in planned["hearsay"].variants] == [
        "instruction_file=none",
        f"instruction_file={level}",
    ]
    (why,) = dict(planned["overruling"].skipped_variants).values()
    assert f"{tmp_path}/overruling/description.yaml does not exist" in why
    trials = trial_plan(spec, list(planned.values()), ("openai/stub",))
    texts = {(t.planned.task, t.variant.name): t.spec.variant.instruction_text for t in trials}
    assert (
        texts[("hearsay", f"instruction_file={level}")] == "Hearsay is an out-of-court statement."
    )
    assert texts[("proa", f"instruction_file={level}")] == "PROA."
    assert texts[("hearsay", "instruction_file=none")] is None
    assert ("overruling", f"instruction_file={level}") not in texts
    assert unreviewed(files_in_sweep(spec.raw)) == [
        f"{tmp_path}/hearsay/description.yaml",
        f"{tmp_path}/proa/description.yaml",
    ]
    bad = write(tmp_path, "name: b\ntasks: [hearsay]\naxes:\n  demos: ['{task}']\n", "bad.yaml")
    with pytest.raises(SpecError, match="allowed in instruction_file and register_file"):
        load_spec(bad)


def test_variants_that_render_the_same_prompt_on_a_task_run_once(
    tmp_path: Path, catalog: Catalog
) -> None:
    """A format point with nothing to act on renders the base prompt (sep:colon_space on a
    'Label: ' template), and two spellings of one point are one variant: each runs once per
    task, the twin is skipped naming the variant it equals, so no test compares a prompt
    with itself (found in review: three such pairs at p = 1.0 swelled a Holm family)."""
    path = write(
        tmp_path,
        "name: twins\ntasks: [overruling]\nfixed: {demos: base}\nlimit: 6\n"
        'axes:\n  format: [base, "sep:colon_space", "sep:dash,case:upper", "case:upper,sep:dash"]\n'
        "n_resamples: 100\ncomparisons: all_pairs\n",
    )
    (p,) = plan_tasks(load_spec(path), catalog)
    assert [nv.name for nv in p.variants] == ["format=base", "format=sep:dash,case:upper"]
    assert dict(p.skipped_variants) == {
        "format=sep:colon_space": "renders the same prompt as variant format=base on this task",
        "format=case:upper,sep:dash": (
            "renders the same prompt as variant format=sep:dash,case:upper on this task"
        ),
    }
