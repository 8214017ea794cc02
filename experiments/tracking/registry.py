"""The MLflow Prompt Registry: each variant's template registered and linked to its run, and the
best prompt of a study under an alias."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from experiments.names import VARIANT_ID, alias_prompt_name, prompt_name
from experiments.tracking.base import TrackerBase
from experiments.tracking.store import _retrying

if TYPE_CHECKING:
    from promptlib.render import CompiledPrompt


class Registry(TrackerBase):
    """Prompt Registry writes (`prompt_registry` in mlflow.yaml turns the per-run ones off)."""

    def _register_prompt(
        self, run_id: str, task: str, variant_name: str, compiled: CompiledPrompt
    ) -> Any:
        """Register the variant's template (new version only if the text changed) and link it."""
        template = compiled.template()
        name = prompt_name(task, compiled.variant.id)

        def register() -> Any:
            try:
                latest = self.client.load_prompt(f"prompts:/{name}@latest")
                if latest is not None and latest.template == template:
                    return latest
            except Exception:  # not registered yet
                pass
            return self.client.register_prompt(
                name=name,
                template=template,
                commit_message=f"{task}: {variant_name}",
                tags={"task": task, "variant": variant_name, VARIANT_ID: compiled.variant.id},
            )

        version = _retrying("register_prompt", register)
        with self._default_store():
            self.client.link_prompt_version_to_run(run_id, version)
        return version

    @contextlib.contextmanager
    def _default_store(self) -> Iterator[None]:
        """Point MLflow's *default* store at ours for one call, then put everything back.

        MLflow's registry resolves a run through the default tracking store, and
        `mlflow.set_tracking_uri` also exports MLFLOW_TRACKING_URI into the environment,
        which would silently redirect every later `load_config()` in this process to this
        store. Both are restored on the way out.
        """
        from mlflow.tracking import _tracking_service

        before_env = os.environ.get("MLFLOW_TRACKING_URI")
        before_uri = _tracking_service.utils._tracking_uri
        self.mlflow.set_tracking_uri(self.config.tracking_uri)
        try:
            yield
        finally:
            self.mlflow.set_tracking_uri(before_uri)
            if before_env is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = before_env

    def register_best(self, task: str, name: str, compiled: CompiledPrompt, alias: str) -> Any:
        """Register a prompt and point `alias` (e.g. 'best') at it."""
        template = compiled.template()
        pname = alias_prompt_name(task, alias)
        version = _retrying(
            "register_prompt",
            lambda: self.client.register_prompt(
                name=pname,
                template=template,
                commit_message=f"{task}: {name}",
                tags={"task": task, "variant": name, VARIANT_ID: compiled.variant.id},
            ),
        )
        self.client.set_prompt_alias(pname, alias, version.version)
        return version
