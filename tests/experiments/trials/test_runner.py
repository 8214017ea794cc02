"""The trial runner with a scripted LM: caching, failures as states, ids, saving."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from experiments.llm.cache import ResponseCache
from experiments.llm.types import Completion, Decoding, InGivenOrder
from experiments.trials.record import TrialStatus
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec, resolve_trial
from experiments.trials.store import save_result, save_trial
from promptlib import Catalog, LocalSource, parse_spec

pytestmark = pytest.mark.data


class ScriptedLM(InGivenOrder):
    """Answers 'Yes' to prompts containing `yes_if`, else 'No'; fails prompts with `fail_if`."""

    name = "scripted/lm"
    mode = "completion"

    def __init__(self, yes_if: str = "", fail_if: str | None = None, concurrency: int = 1):
        self.yes_if = yes_if
        self.fail_if = fail_if
        self.concurrency = concurrency
        self.calls = 0
        self._lock = threading.Lock()

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        with self._lock:
            self.calls += 1
        query = prompt.rsplit("Q:", 1)[-1]
        if self.fail_if is not None and self.fail_if in query:
            return Completion(None, error="RateLimitError 429 after 5 attempt(s): slow down")
        text = " Yes" if self.yes_if and self.yes_if in query else " No"
        return Completion(text, tokens_in=len(prompt) // 4, tokens_out=1)


def test_trial_scores_caches_and_reports_calls(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="scripted/lm")
    cache = ResponseCache(tmp_path / "cache")
    lm = ScriptedLM()
    first = run_trial(spec, catalog, lm, cache=cache)
    assert first.complete and len(first.predictions) == 95
    assert (first.model_calls, first.cache_hits) == (95, 0)
    # always "No": recall(No)=1, recall(Yes)=0 -> balanced accuracy 0.5
    assert first.score == pytest.approx(0.5)
    assert first.report is not None and first.report.invalid_rate == 0.0
    again = run_trial(spec, catalog, lm, cache=cache)
    assert (again.model_calls, again.cache_hits) == (0, 95)
    assert lm.calls == 95
    assert again.score == first.score


def test_failed_rows_make_the_trial_incomplete_and_are_not_cached(
    catalog: Catalog, tmp_path: Path
) -> None:
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("base"), model="scripted/lm", limit=30, seed=1
    )
    cache = ResponseCache(tmp_path / "cache")
    flaky = ScriptedLM(fail_if="the fact that")
    res = run_trial(spec, catalog, flaky, cache=cache)
    failed = [p for p in res.predictions if p.error]
    assert failed and not res.complete
    assert res.score is None and res.score_on_answered is not None
    assert all(p.generation is None and "429" in (p.error or "") for p in failed)
    assert len(res.predictions) == 30  # nothing dropped
    # the rerun retries exactly the failed rows; the rest come from the cache
    healthy = ScriptedLM()
    rerun = run_trial(spec, catalog, healthy, cache=cache)
    assert rerun.complete and healthy.calls == len(failed)
    assert rerun.cache_hits == 30 - len(failed)


def test_concurrent_path_matches_sequential(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("demos=none"), model="scripted/lm")
    seq = run_trial(spec, catalog, ScriptedLM(yes_if="told"))
    par = run_trial(spec, catalog, ScriptedLM(yes_if="told", concurrency=8))
    assert [p.generation for p in seq.predictions] == [p.generation for p in par.predictions]
    assert seq.score == par.score > 0.5


class _Identity(ScriptedLM):
    def __init__(self, **identity: Any) -> None:
        super().__init__()
        self._identity = identity
        self.mode = identity.get("mode", "completion")

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)


def _id(catalog: Catalog, lm: Any | None = None, **kw: Any) -> str:
    fields: dict[str, Any] = {"task": "hearsay", "variant": parse_spec("base"), "model": "m"}
    fields.update(kw)
    lm = lm or _Identity(model="m", api_base=None, mode="completion")
    return resolve_trial(TrialSpec(**fields), catalog, lm).id


def test_trial_id_changes_with_everything_that_changes_an_answer(
    catalog: Catalog, lb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _id(catalog)
    assert base == _id(catalog)  # stable
    changed = {
        "task": _id(catalog, task="abercrombie"),
        "variant": _id(catalog, variant=parse_spec("demos=none")),
        "bound demos": _id(catalog, variant=parse_spec("demos=2,seed=1")),
        "limit": _id(catalog, limit=10),
        "seed": _id(catalog, limit=10, seed=1),
        "scoring": _id(catalog, scoring="loglik"),
        "definition": _id(catalog, definition="paper"),
        "model": _id(catalog, _Identity(model="other", api_base=None, mode="completion")),
        "api_base": _id(
            catalog, _Identity(model="m", api_base="http://127.0.0.1:1/v1", mode="completion")
        ),
        "mode": _id(catalog, _Identity(model="m", api_base=None, mode="chat")),
    }
    # hearsay's train rows are its base demonstrations: compare splits zero-shot
    none = parse_spec("demos=none")
    assert _id(catalog, variant=none, split="train") != _id(catalog, variant=none)
    # a different draw of the same k binds other demonstration rows
    assert _id(catalog, variant=parse_spec("demos=2,seed=1")) != _id(
        catalog, variant=parse_spec("demos=2,seed=2")
    )
    from experiments.llm.types import Decoding as D
    from experiments.trials import spec as trial_spec

    real = trial_spec.decoding_for
    for field, value in [("temperature", 0.7), ("max_tokens", 99), ("stop", ("\n\n",))]:

        def patched(spec: Any, mode: Any, field: str = field, value: Any = value) -> D:
            return dataclasses.replace(real(spec, mode), **{field: value})

        monkeypatch.setattr(trial_spec, "decoding_for", patched)
        changed[f"decoding.{field}"] = _id(catalog)
        monkeypatch.setattr(trial_spec, "decoding_for", real)
    # editing the data gives new trials: one character of one evaluated row's text
    data = tmp_path / "lb"
    shutil.copytree(lb_dir / "tasks" / "hearsay", data / "tasks" / "hearsay")
    tsv = data / "tasks" / "hearsay" / "test.tsv"
    tsv.write_text(_edit(tsv))
    edited = Catalog(LocalSource(data))
    changed["row content"] = _id(edited)
    # editing a prompt file changes the prompt shown, so the trial too
    prompt = data / "tasks" / "hearsay" / "base_prompt.txt"
    prompt.write_text(prompt.read_text().replace("hearsay", "hear-say", 1))
    changed["prompt file"] = _id(Catalog(LocalSource(data)))
    assert changed["row content"] != _id(Catalog(LocalSource(lb_dir)))
    for what, tid in changed.items():
        assert tid != base, f"changing {what} kept the trial id"
    assert len(set(changed.values())) == len(changed)


def _edit(tsv: Path) -> str:
    """The TSV with one word of the first data row's text changed."""
    lines = tsv.read_text().split("\n")
    header = lines[0].split("\t")
    cells = lines[1].split("\t")
    col = header.index("text")
    cells[col] = cells[col] + " (edited)"
    lines[1] = "\t".join(cells)
    return "\n".join(lines)


def test_trial_status_is_decided_in_one_place() -> None:
    assert TrialStatus.of(10, 0) is TrialStatus.COMPLETE
    assert TrialStatus.of(10, 3) is TrialStatus.INCOMPLETE
    assert TrialStatus.of(10, 10) is TrialStatus.FAILED
    assert TrialStatus.COMPLETE.ok and not TrialStatus.INCOMPLETE.ok


def test_all_rows_failing_is_a_failed_trial(catalog: Catalog) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=5)
    res = run_trial(spec, catalog, ScriptedLM(fail_if=""))
    assert res.status is TrialStatus.FAILED and res.score is None
    assert res.score_on_answered is None and "5 of 5 rows failed" in res.failure_reason()


def test_limit_is_a_seeded_sample(catalog: Catalog) -> None:
    a = run_trial(
        TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=10, seed=3),
        catalog,
        ScriptedLM(),
    )
    b = run_trial(
        TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=10, seed=3),
        catalog,
        ScriptedLM(),
    )
    c = run_trial(
        TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=10, seed=4),
        catalog,
        ScriptedLM(),
    )
    idx = [p.index for p in a.predictions]
    assert idx == [p.index for p in b.predictions] != [p.index for p in c.predictions]
    assert len(idx) == 10


def test_resampled_demo_rows_are_never_evaluated(catalog: Catalog) -> None:
    spec = TrialSpec(
        task="hearsay", variant=parse_spec("demos=4,seed=2,pool=train+test"), model="s"
    )
    res = run_trial(spec, catalog, ScriptedLM())
    assert res.excluded_rows  # the draw took test rows, so some were left out
    assert not set(res.excluded_rows) & {p.index for p in res.predictions}
    assert len(res.predictions) + len(res.excluded_rows) == 95


def test_saved_predictions_table(catalog: Catalog, tmp_path: Path) -> None:
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=5)
    res = run_trial(spec, catalog, ScriptedLM())
    out = save_trial(res, tmp_path)
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 5
    assert set(rows[0]) >= {
        "index", "prompt_hash", "generation", "parsed", "correct", "tokens_in",
        "tokens_out", "latency", "cache_hit", "error",
    }  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trial_id"] == res.trial_id and summary["n"] == 5
    assert summary["status"] == "complete"
    leftovers = [p for p in tmp_path.glob(".*") if not p.name.endswith(".lock")]
    assert not list(out.glob(".*")) and not leftovers  # no temporary files
    # a rerun replaces the folder as a whole: predictions and summary always land together
    res2 = run_trial(spec, catalog, ScriptedLM(yes_if="hearsay"))
    save_trial(res2, tmp_path)
    again = json.loads((out / "summary.json").read_text())
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert again["wall_time"] == res2.summary()["wall_time"] and len(lines) == 5
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        res.trial_id
    ]


def test_concurrent_saves_of_one_trial_never_tear_or_crash(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Two runs of one trial finishing at once: each write lands whole, none raises."""
    from concurrent.futures import ThreadPoolExecutor

    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=5)
    res = run_trial(spec, catalog, ScriptedLM())
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda _: save_trial(res, tmp_path), range(40)))
    out = tmp_path / res.trial_id
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 5
    assert json.loads((out / "summary.json").read_text())["trial_id"] == res.trial_id


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_unfinished_rerun_never_replaces_a_complete_trial(
    catalog: Catalog, tmp_path: Path
) -> None:
    """A rerun whose calls failed (say with --no-cache) leaves the complete trial's files as
    they were and is saved beside it; a later complete save replaces the trial and leaves the
    attempt alone."""
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=5)
    done = run_trial(spec, catalog, ScriptedLM())
    saved = save_result(done, tmp_path)
    trial = tmp_path / done.trial_id
    assert (saved.folder, saved.kept, saved.kept_note(done)) == (trial, None, None)
    before = _files(trial)
    text = {r["index"]: r["text"] for r in catalog.task("hearsay").rows("test")}
    one_row = text[done.predictions[0].index][:60]
    attempts = []
    for lm, status in [
        (ScriptedLM(fail_if=one_row), "incomplete"),
        (ScriptedLM(fail_if=""), "failed"),
    ]:
        partial = run_trial(spec, catalog, lm)
        assert str(partial.status) == status and partial.trial_id == done.trial_id
        kept = save_result(partial, tmp_path)
        assert kept.kept == trial and _files(trial) == before
        assert kept.folder == tmp_path / "incomplete-reruns" / done.trial_id
        attempt = json.loads((kept.folder / "summary.json").read_text())
        assert attempt["status"] == status and attempt["n_errors"] == partial.n_errors
        note = kept.kept_note(partial) or ""
        assert f"is {status} and was not saved over the complete trial in {trial}" in note
        assert str(kept.folder) in note
        attempts.append(_files(kept.folder))
    # a complete rerun with other answers replaces the trial; the last attempt stays
    other = run_trial(spec, catalog, ScriptedLM(yes_if="the"))
    assert save_result(other, tmp_path).folder == trial and _files(trial) != before
    assert json.loads((trial / "summary.json").read_text())["wall_time"] == round(
        other.wall_time, 3
    )
    assert _files(tmp_path / "incomplete-reruns" / done.trial_id) == attempts[-1]
    # with no complete trial saved, an unfinished result is saved as the trial itself
    fresh = save_result(run_trial(spec, catalog, ScriptedLM(fail_if="")), tmp_path / "new")
    assert (fresh.folder, fresh.kept) == (tmp_path / "new" / done.trial_id, None)
    # an incomplete trial is not replaced by a rerun that answered fewer rows (review R4:
    # a failed rerun erased 29 answered rows), but is by one that answered more
    root = tmp_path / "partial"
    first = run_trial(spec, catalog, ScriptedLM(fail_if=one_row))
    assert save_result(first, root).kept is None
    before = _files(root / done.trial_id)
    worse = save_result(run_trial(spec, catalog, ScriptedLM(fail_if="")), root)
    assert worse.kept == root / done.trial_id and _files(root / done.trial_id) == before
    assert "not saved over the saved trial, which answered more rows," in (
        worse.kept_note(first) or ""
    )
    better = run_trial(spec, catalog, ScriptedLM())
    assert save_result(better, root).kept is None and _files(root / done.trial_id) != before


def test_a_hand_graded_task_is_run_only_when_asked_and_never_scored(
    lb_dir: Path, tmp_path: Path
) -> None:
    from experiments.metrics import ManualEvaluationRequired
    from promptlib.errors import WorkbenchError

    task = tmp_path / "tasks" / "rule_qa"  # LegalBench ships rule_qa's questions separately
    task.mkdir(parents=True)
    shutil.copy(lb_dir / "tasks" / "rule_qa" / "base_prompt.txt", task / "base_prompt.txt")
    rows = [f"{i}\tWhat is rule {i}?\tThe answer to {i}.\tx" for i in range(4)]
    (task / "test.tsv").write_text("index\ttext\tanswer\tdoctrine\n" + "\n".join(rows) + "\n")
    catalog = Catalog(LocalSource(tmp_path))
    spec = TrialSpec(task="rule_qa", variant=parse_spec("base"), model="s", limit=3)
    lm = ScriptedLM(yes_if="rule 2")
    with pytest.raises(ManualEvaluationRequired, match="graded by hand"):
        run_trial(spec, catalog, lm)  # a sweep or a study gets no stand-in score
    res = run_trial(resolve_trial(spec, catalog, lm, hand_graded=True), catalog, lm)
    assert res.metric == "manual" and res.complete and len(res.predictions) == 3
    assert res.score is None and res.score_on_answered is None and res.report is None
    assert {p.generation for p in res.predictions} == {" Yes", " No"}  # recorded as given
    assert all(p.correct is None and p.parsed is None for p in res.predictions)
    assert res.summary()["decoding"]["max_tokens"] == 150  # the paper's budget for rule_qa
    loglik = dataclasses.replace(spec, scoring="loglik")
    with pytest.raises(WorkbenchError, match="use --scoring generate"):
        resolve_trial(loglik, catalog, lm, hand_graded=True)


def test_a_password_in_api_base_is_not_shown(catalog: Catalog) -> None:
    lm = _Identity(model="m", api_base="http://alice:S3cretPassw0rd@127.0.0.1:1/v1", mode="chat")
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="m", limit=3)
    res = run_trial(spec, catalog, lm)
    summary = json.dumps(res.summary())
    assert "S3cretPassw0rd" not in summary and "alice:***@" in summary


def test_a_local_loglik_trial_is_pinned_to_its_weights_and_context(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New weights under the same name (a package upgrade) or another context size are
    another model: a log-likelihood trial must not reuse the old trial's run or answers."""
    from experiments.llm import weights

    monkeypatch.setattr(weights, "local_weights_sha256", lambda name: "a" * 64)
    lm = _Identity(model="local/smollm2", api_base=None, mode="completion")
    kw: dict[str, Any] = {"model": "local/smollm2", "scoring": "loglik"}
    first = _id(catalog, lm, **kw)
    assert first == _id(catalog, lm, **kw)
    monkeypatch.setattr(weights, "local_weights_sha256", lambda name: "b" * 64)
    assert _id(catalog, lm, **kw) != first
    monkeypatch.setattr(weights, "local_weights_sha256", lambda name: "a" * 64)
    monkeypatch.setenv("WORKBENCH_LOCAL_N_CTX", "2048")
    assert _id(catalog, lm, **kw) != first


def test_the_run_command_s_save_notes_a_kept_trial(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `workbench run` saves and shows (`grading.save_keeping_grades`) for a task scored
    automatically: the kept trial is named in `trial_kept`, no grades note."""
    from experiments.trials.grading import save_keeping_grades

    monkeypatch.setenv("WORKBENCH_RUNS_DIR", str(tmp_path))
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="s", limit=3)
    folder, summary = save_keeping_grades(run_trial(spec, catalog, ScriptedLM()))
    assert folder == tmp_path / summary["trial_id"] and "trial_kept" not in summary
    before = _files(folder)
    attempt, shown = save_keeping_grades(run_trial(spec, catalog, ScriptedLM(fail_if="")))
    assert attempt == tmp_path / "incomplete-reruns" / folder.name and _files(folder) == before
    assert shown["status"] == "failed" and "grades_kept" not in shown
    assert (
        f"is failed and was not saved over the complete trial in {folder}" in (shown["trial_kept"])
    )


def test_labels_only_the_task_states_are_part_of_the_trial_id(catalog: Catalog) -> None:
    """A MAUD task's option letters come from its README, not its one training row: they
    parse the same generations otherwise than the rows' label alone did, so its trials get
    new ids. A task whose labels all occur in its rows keeps the id it always had."""
    lm = ScriptedLM()
    maud = "maud_specific_performance"
    assert catalog.task(maud).spec.stated_only  # letters only the README gives
    spec = TrialSpec(task=maud, variant=parse_spec("demos=none"), model=lm.name, split="train")
    resolved = resolve_trial(spec, catalog, lm)
    assert resolved.identity()["labels"] == list(catalog.task(maud).spec.labels or ())
    hearsay = resolve_trial(
        TrialSpec(task="hearsay", variant=parse_spec("base"), model=lm.name), catalog, lm
    )
    assert not catalog.task("hearsay").spec.stated_only
    assert "labels" not in hearsay.identity()


class PricedLM(ScriptedLM):
    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        done = super().complete(prompt, decoding)
        return dataclasses.replace(done, cost=0.001)


def test_spent_prices_the_calls_made_not_the_cached_rows(catalog: Catalog, tmp_path: Path) -> None:
    # review finding: a sweep answered from the cache said "0 model calls ... cost $X"
    spec = TrialSpec(task="hearsay", variant=parse_spec("base"), model="scripted/lm", limit=10)
    cache = ResponseCache(tmp_path / "cache")
    first = run_trial(spec, catalog, PricedLM(), cache=cache)
    assert first.spent == first.cost == pytest.approx(0.01)
    again = run_trial(spec, catalog, PricedLM(), cache=cache)
    assert again.model_calls == 0 and again.spent == 0.0
    assert again.cost == pytest.approx(0.01)  # the trial's answers keep their price


def test_summed_loglik_refuses_a_label_that_extends_another(tmp_path: Path) -> None:
    """A user task's labels 'No' and 'No, but': under summed log-likelihood 'No, but' scores
    'No' plus negative terms, so it was never chosen (local/smollm2: 0 of 5 rows, 2 of 5 per
    byte) and its class scored recall 0 with no sign; per byte it can win, so that runs."""
    from promptlib.errors import WorkbenchError
    from promptlib.usertasks.build import TaskRequest, draft_task
    from promptlib.usertasks.source import UserTaskSource
    from promptlib.usertasks.write import write_task
    from tests.usertask_data import write_csv

    answers = ["No", "No, but", "Yes"]
    rows = [{"text": f"clause number {i}", "label": answers[i % 3]} for i in range(30)]
    data = write_csv(tmp_path / "rows.csv", rows)
    request = TaskRequest(
        name="hedged", source=str(data), inputs=("text",), answer="label",
        instruction="Does the clause restrict disclosure?", demos=0,
    )  # fmt: skip
    write_task(tmp_path / "tasks", "hedged", draft_task(request, ()).files, False)
    catalog = Catalog(UserTaskSource(tmp_path / "tasks"))
    assert catalog.task("hedged").spec.labels == ("No", "No, but", "Yes")
    spec = TrialSpec(task="hedged", variant=parse_spec("base"), model="scripted/lm", limit=3)
    with pytest.raises(WorkbenchError, match=r"label 'No, but' starts with label 'No'"):
        resolve_trial(dataclasses.replace(spec, scoring="loglik"), catalog, ScriptedLM())
    resolved = resolve_trial(
        dataclasses.replace(spec, scoring="loglik-norm"), catalog, ScriptedLM()
    )
    assert resolved.decoding["continuations"] == [" No", " No, but", " Yes"]


def test_a_user_free_text_task_has_room_for_its_longest_answer(tmp_path: Path) -> None:
    """A user's generation task with answers of ~300 characters had the 64-token budget of
    LegalBench's: every reply was cut below the answer's length, so no row could ever match
    (exact match 0 whatever the model), and nothing said so."""
    from experiments.trials.spec import decoding_for
    from promptlib.usertasks.build import TaskRequest, draft_task
    from promptlib.usertasks.source import UserTaskSource
    from promptlib.usertasks.write import write_task
    from tests.usertask_data import write_csv

    long_answer = "The supplier shall deliver the goods, insure them and keep records " * 4
    for name, answer in (("long_summaries", long_answer.strip()), ("short_summaries", "ok")):
        rows = [{"text": f"clause number {i}", "summary": f"{answer} {i}"} for i in range(20)]
        request = TaskRequest(
            name=name, source=str(write_csv(tmp_path / f"{name}.csv", rows)), inputs=("text",),
            answer="summary", instruction="Summarise the clause.", task_type="generation",
            demos=0,
        )  # fmt: skip
        write_task(tmp_path / "tasks", name, draft_task(request, ()).files, False)
    catalog = Catalog(UserTaskSource(tmp_path / "tasks"))
    spec = catalog.task("long_summaries").spec
    assert spec.longest_answer == len(long_answer.strip()) + 3 and spec.longest_answer > 250
    assert decoding_for(spec, "chat").max_tokens == spec.longest_answer // 2 + 8
    # short answers keep LegalBench's budget (and so the trial ids they had)
    assert decoding_for(catalog.task("short_summaries").spec, "chat").max_tokens == 64
