"""`--instruction-file`: files searched as instruction levels, a study of their own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from experiments import output
from experiments.llm.scripted import LMDefaults
from experiments.llm.types import Completion, Decoding
from experiments.optimize.config import OptimizeConfig
from experiments.optimize.optimize import optimize
from experiments.optimize.space import invalid, search_space, space_variants, variant_from_params
from experiments.optimize.study import _study_key, _study_name
from experiments.tracking import Tracker
from promptlib import Catalog, compile_prompt
from promptlib.errors import WorkbenchError
from tests.conftest import workbench_env
from tests.experiments.optimize.test_optimize import tracker as tracker  # a fixture

pytestmark = pytest.mark.data

MARKER = "Decide whether the statement is hearsay under FRE 801."


def _file(tmp_path: Path, name: str, text: str = MARKER, generated: bool = False) -> str:
    path = tmp_path / name
    head = "generator: test\nreviewed: false\n" if generated else ""
    path.write_text(head + f"text: {json.dumps(text)}\n")
    return str(path)


class MarkerLM(LMDefaults):
    """Right on every row when the prompt shows the marker instruction, else always "No"."""

    mode = "completion"
    concurrency = 1

    def __init__(self, task: Any, name: str = "scripted/marker") -> None:
        self.name = name
        self.gold = {r["text"].strip(): r["answer"] for r in task.rows("test")}
        self.prompts: list[str] = []

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.name}

    def complete(self, prompt: str, decoding: Decoding) -> Completion:
        self.prompts.append(prompt)
        return Completion(" " + self.reply(prompt))

    def reply(self, prompt: str) -> str:
        if MARKER not in prompt:
            return "No"
        query = prompt.rsplit("Q:", 1)[-1]
        return str(next(a for t, a in self.gold.items() if t in query))


def test_files_are_read_up_front_and_bad_ones_refused(tmp_path: Path) -> None:
    good = _file(tmp_path, "good.yaml")
    (tmp_path / "notext.yaml").write_text("instruction: oops\n")
    cases = {
        str(tmp_path / "missing.yaml"): "missing.yaml",
        str(tmp_path / "notext.yaml"): "'text'",
        _file(tmp_path, "empty.yaml", "  "): "empty",
    }
    for path, why in cases.items():
        with pytest.raises(WorkbenchError, match=why) as e:
            OptimizeConfig(task="hearsay", model="m", instruction_files=(path,))
        assert "--instruction-file" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(WorkbenchError, match="twice"):
        OptimizeConfig(task="hearsay", model="m", instruction_files=(good, good))
    with pytest.raises(WorkbenchError, match="optuna only"):
        OptimizeConfig(task="hearsay", model="m", method="dspy-labeled", instruction_files=(good,))
    cfg = OptimizeConfig(task="hearsay", model="m", instruction_files=(good,))
    assert cfg.files[0].text == MARKER and cfg.files[0].reviewed is None


def test_files_make_a_study_of_their_own_and_studies_without_files_keep_their_name(
    tmp_path: Path,
) -> None:
    a, b = _file(tmp_path, "a.yaml"), _file(tmp_path, "b.yaml", "Another instruction.")
    plain = OptimizeConfig(task="hearsay", model="m", storage="sqlite:///x.db")
    assert _study_name(plain) == "hearsay.m.optuna"  # unchanged (tests/test_pinned_ids.py)
    names = set()
    for files in ((a,), (b,), (a, b), (b, a)):
        cfg = OptimizeConfig(task="hearsay", model="m", storage="sqlite:///x.db",
                             instruction_files=files)  # fmt: skip
        assert _study_name(cfg).startswith("hearsay.m.optuna.files-")
        assert _study_key(cfg) != _study_key(plain)
        names.add(_study_name(cfg))
    assert len(names) == 4
    # the same labels with another text: another study
    Path(a).write_text('text: "Edited."\n')
    edited = OptimizeConfig(task="hearsay", model="m", instruction_files=(a,))
    assert _study_name(edited) not in names
    ext = OptimizeConfig(task="hearsay", model="m", space="extended", instruction_files=(b,))
    assert _study_name(ext).startswith("hearsay.m.optuna.extended.files-")


def test_file_levels_are_a_new_axis_and_combine_with_base_instruction_only(
    catalog: Catalog, tmp_path: Path
) -> None:
    path = _file(tmp_path, "a.yaml")
    cfg = OptimizeConfig(task="hearsay", model="m", instruction_files=(path,))
    task = catalog.task("hearsay")
    space = search_space(task, "base", cfg.files)
    assert space.extra_axes() == {"instruction_file": ["none", path]}
    assert space.instruction == ["base", "reference", "description"]  # unchanged levels
    assert any(path in n and "sha256" in n for n in space.notes)
    base = {"instruction": "base", "register": "default", "demos": "base", "demo_seed": 0,
            "format": "base", "answer_hint": False}  # fmt: skip
    v = variant_from_params({**base, "instruction_file": path}, space.texts)
    assert v.instruction == "custom" and v.instruction_text == MARKER
    assert MARKER in compile_prompt(v, task, "test").render({"text": "x"})
    none = variant_from_params({**base, "instruction_file": "none"}, space.texts)
    assert none.id == variant_from_params(base).id
    assert invalid({**base, "instruction": "reference", "instruction_file": path})
    assert invalid({**base, "register": "plain", "instruction_file": path})
    assert not invalid({**base, "instruction": "reference", "instruction_file": "none"})
    assert len(space_variants(space)) > len(space_variants(search_space(task)))
    with pytest.raises(WorkbenchError, match="not one of this study's"):
        variant_from_params({**base, "instruction_file": "/elsewhere.yaml"}, space.texts)


def test_study_proposes_the_file_and_reports_its_winner_on_heldout(
    catalog: Catalog,
    tracker: Tracker,
    tmp_path: Path,
) -> None:
    path = _file(tmp_path, "marker.yaml", generated=True)
    cfg = OptimizeConfig(
        task="hearsay", model="scripted/marker", n_trials=8, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", seed=0, pruner="none", dev_limit=20, heldout_limit=30,
        instruction_files=(path,),
    )  # fmt: skip
    task = catalog.task("hearsay")
    lm = MarkerLM(task)
    report = optimize(cfg, catalog, lm, tracker)
    study = optuna.load_study(study_name=report.study, storage=str(cfg.storage))
    proposed = {t.params.get("instruction_file") for t in study.trials}
    assert proposed == {"none", path}
    assert report.best_params["instruction_file"] == path
    assert report.best_params["instruction"] == "base"
    assert MARKER in json.loads(report.best_variant_json)["instruction_text"]
    assert report.heldout["score"] == 1.0 and report.base_heldout["score"] < 0.8
    assert report.p_value < 0.05
    # the space logged on the parent lists the file; the generated file tags the parent
    exp = tracker.client.get_experiment_by_name(f"t/optimize/{report.study}")
    (parent,) = tracker.client.search_runs([exp.experiment_id], "tags.`workbench.kind` = 'study'")
    logged = json.loads(
        Path(tracker.client.download_artifacts(parent.info.run_id, "search_space.json",
                                               str(tmp_path))).read_text()
    )  # fmt: skip
    assert logged["axes"]["instruction_file"] == ["none", path]
    assert parent.data.tags["workbench.unreviewed"] == path
    # a rerun once the file is reviewed clears the tag (same text: the same study, resumed)
    Path(path).write_text(Path(path).read_text().replace("reviewed: false", "reviewed: true"))
    again = OptimizeConfig(
        task="hearsay", model="scripted/marker", n_trials=1, storage=cfg.storage,
        sampler="random", pruner="none", dev_limit=20, heldout_limit=30,
        instruction_files=(path,),
    )  # fmt: skip
    assert _study_name(again) == report.study
    optimize(again, catalog, lm, tracker)
    assert "workbench.unreviewed" not in tracker.client.get_run(parent.info.run_id).data.tags


def test_search_space_print_lists_axes_files_and_notes(catalog: Catalog, tmp_path: Path) -> None:
    path = _file(tmp_path, "a.yaml")
    cfg = OptimizeConfig(task="hearsay", model="m", space="extended", instruction_files=(path,))
    space = search_space(catalog.task("hearsay"), cfg.space, cfg.files).to_dict()
    text = output.search_space("hearsay", _study_name(cfg), space)
    lines = text.splitlines()
    assert lines[0].startswith(f"search space of hearsay (study {_study_name(cfg)})")
    assert f"  instruction_file: none, {path}" in lines
    assert "  instruction: base, reference, description" in lines
    assert any(line.startswith("  verbalizer: official") for line in lines)
    assert any(line.startswith("  note: pool: train only") for line in lines)  # left out, why
    assert any(line.startswith("  note: order: ") for line in lines)
    assert any(line.startswith("  note: instruction_file: ") and path in line for line in lines)


def test_cli_missing_file_is_one_line_before_anything_is_written(
    lb_dir: Path, tmp_path: Path
) -> None:
    env = workbench_env(tmp_path, lb_dir, "t")
    missing = tmp_path / "nope.yaml"
    before = set(tmp_path.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "optimize", "hearsay", "--model",
         "openai/stub", "--api-base", "http://127.0.0.1:9", "--instruction-file", str(missing),
         "--storage", f"sqlite:///{tmp_path}/o.db"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    errors = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(errors) == 1 and "nope.yaml" in errors[0] and "--instruction-file" in errors[0]
    assert "Traceback" not in done.stderr
    assert set(tmp_path.iterdir()) == before  # no study, no MLflow store, no cache


@pytest.mark.slow
def test_cli_prints_the_space_and_reports_the_file_winner_against_the_stub(
    catalog: Catalog, lb_dir: Path, tmp_path: Path
) -> None:
    from experiments.testing.stub_server import StubOpenAI

    path = _file(tmp_path, "marker.yaml", generated=True)
    lm = MarkerLM(catalog.task("hearsay"))
    with StubOpenAI(reply_fn=lm.reply) as stub:
        env = {**workbench_env(tmp_path, lb_dir, "t"), "OPENAI_API_KEY": "sk-stub-key"}
        done = subprocess.run(
            [sys.executable, "-m", "experiments.cli", "optimize", "hearsay", "--model",
             "openai/stub", "--api-base", stub.url, "--concurrency", "1", "--trials", "8",
             "--sampler", "random", "--pruner", "none", "--dev-limit", "16",
             "--heldout-limit", "24", "--instruction-file", path,
             "--storage", f"sqlite:///{tmp_path}/o.db", "--json"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"  instruction_file: none, {path}" in done.stderr.splitlines()
    assert output.unreviewed_warning(path) in done.stderr
    report = json.loads(done.stdout)
    assert report["best_params"]["instruction_file"] == path
    assert report["heldout"]["score"] > report["base_heldout"]["score"]
    assert report["p_value"] < 0.05


def test_a_named_study_is_not_resumed_with_other_files(
    catalog: Catalog,
    tracker: Tracker,
    tmp_path: Path,
) -> None:
    """`--study NAME` keeps the name: the files recorded on the study refuse a resume with
    others (Optuna would refuse their changed choices mid-trial)."""
    a, b = _file(tmp_path, "a.yaml"), _file(tmp_path, "b.yaml", "Other words.")

    def cfg(*files: str) -> OptimizeConfig:
        return OptimizeConfig(
            task="hearsay", model="scripted/marker", n_trials=1, study_name="mine",
            storage=f"sqlite:///{tmp_path}/o.db", sampler="random", pruner="none",
            dev_limit=8, heldout_limit=8, instruction_files=files,
        )  # fmt: skip

    lm = MarkerLM(catalog.task("hearsay"))
    optimize(cfg(a), catalog, lm, tracker)
    for files in ((b,), ()):
        calls = len(lm.prompts)
        with pytest.raises(WorkbenchError, match="instruction_files") as e:
            optimize(cfg(*files), catalog, lm, tracker)
        assert "--instruction-file" in str(e.value) and len(lm.prompts) == calls


def test_a_file_quoting_a_heldout_row_is_refused_before_any_model_call(
    catalog: Catalog, tracker: Tracker, tmp_path: Path
) -> None:
    """A worked example in the file that is a held-out row would be shown to every trial of
    the search, and the verdict would still call its rows never seen."""
    from experiments.optimize.dev import split_dev_heldout
    from promptlib.errors import LeakageError

    task = catalog.task("hearsay")
    split = split_dev_heldout(task, "test", 0.5, 0)
    rows = {r["index"]: r for r in task.rows("test")}
    held, dev = rows[split.heldout[3]], rows[split.dev[0]]
    quoting = _file(tmp_path, "q.yaml", f"{MARKER} Example:\n  {held['text']} => {held['answer']}")
    cfg = OptimizeConfig(
        task="hearsay", model="scripted/marker", n_trials=2, storage=f"sqlite:///{tmp_path}/o.db",
        sampler="random", pruner="none", dev_limit=8, heldout_limit=8,
        instruction_files=(quoting,),
    )  # fmt: skip
    lm = MarkerLM(task)
    with pytest.raises(LeakageError, match=f"held-out row {held['index']}") as e:
        optimize(cfg, catalog, lm, tracker)
    assert quoting in str(e.value) and "\n" not in str(e.value)
    assert lm.prompts == [] and not (tmp_path / "o.db").exists()
    # a dev row quoted (the search may see dev) and the plain marker file are accepted
    from experiments.optimize.instructions import refuse_quoted_heldout

    heldout_rows = [rows[i] for i in split.heldout]
    for text in (f"{MARKER} Example: {dev['text']}", MARKER):
        ok = OptimizeConfig(
            task="hearsay", model="m", instruction_files=(_file(tmp_path, "d.yaml", text),)
        )
        refuse_quoted_heldout(ok.files, task, heldout_rows)


def test_the_printed_winner_names_the_file_it_is() -> None:
    """`instruction=custom` is every file's label: the report line says which file won."""
    base = {"task": "hearsay", "model": "m", "method": "optuna", "study": "s", "n_trials": 2,
            "n_pruned": 0, "n_failed": 0, "n_dev": 4, "dev_score": 1.0, "p_value": 0.5,
            "test": "t", "best_variant": "instruction=custom",
            "heldout": {"n": 4, "score": 1.0, "ci_low": 0.5, "ci_high": 1.0},
            "base_heldout": {"score": 0.5, "ci_low": 0.2, "ci_high": 0.8}}  # fmt: skip
    won = output.optimize_report({**base, "best_params": {"instruction_file": "b.yaml"}})
    assert "best variant: instruction=custom (instruction_file b.yaml)" in won.splitlines()
    plain = output.optimize_report({**base, "best_params": {"instruction_file": "none"}})
    assert "best variant: instruction=custom" in plain.splitlines()


def test_a_flagged_heldout_interval_is_printed_with_its_sign() -> None:
    """The verdict's per-arm CI can be flagged (coverage unknown on few rows); the printed
    report marked it nowhere, the JSON alone said so."""
    note = "unreliable: effective sizes (8.0, 4.0) lie below every cell where coverage was measured"
    r = {"task": "hearsay", "model": "m", "method": "optuna", "study": "s", "n_trials": 2,
         "n_pruned": 0, "n_failed": 0, "n_dev": 4, "dev_score": 1.0, "p_value": 0.125,
         "test": "t", "best_variant": "base", "best_params": {},
         "heldout": {"n": 12, "score": 1.0, "ci_low": 0.611, "ci_high": 1.0, "ci_note": note},
         "base_heldout": {"score": 0.5, "ci_low": 0.3, "ci_high": 0.8, "ci_note": None}}  # fmt: skip
    lines = output.optimize_report(r).splitlines()
    assert "held-out, best variant:    1.000  95% CI [0.611, 1.000] !" in lines
    assert "held-out, base prompt:     0.500  95% CI [0.300, 0.800]" in lines
    assert f"! best CI: {note}" in lines and not any(x.startswith("! base") for x in lines)
