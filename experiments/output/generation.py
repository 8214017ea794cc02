"""Generated texts (`workbench variants generate`): the lines, refusals, warnings."""

from __future__ import annotations

from typing import Any


def generation_lines(doc: dict[str, Any]) -> str:
    """stdout of `workbench variants generate`: one line per candidate, then how to use them."""
    lines = []
    for c in doc["candidates"]:
        n = c["candidate"]
        if c["status"] == "written":
            lines.append(
                f"wrote {c['path']} ({doc['kind']} of {doc['task']} by {doc['generator']}, "
                f"candidate {n}, sha256 {c['text_sha256'][:12]}, reviewed: false)"
            )
        elif c["status"] == "unchanged":
            lines.append(f"unchanged {c['path']} (candidate {n}: the same text is there already)")
        elif c["status"] == "duplicate":
            lines.append(f"candidate {n}: {c['reason']} ({c['path']}), not written again")
    written = [c["path"] for c in doc["candidates"] if c["status"] in ("written", "unchanged")]
    if written:
        lines.append(
            f"use: --variant {doc['variant_key']}={written[0]} (or {doc['variant_key']}: in a "
            "sweep spec); read the text first, then set reviewed: true in the file"
        )
    if doc.get("mlflow_run_id"):
        lines.append(f"MLflow run {doc['mlflow_run_id']}")
    return "\n".join(lines)


def generation_refused(candidate: int, reason: str) -> str:
    """stderr line of a candidate text `workbench variants generate` did not write."""
    return f"error: candidate {candidate} refused, not written: {reason}"


def unreviewed_warning(path: str) -> str:
    """stderr line of a sweep or run that uses a generated text no one has reviewed."""
    return (
        f"warning: {path} is generated text not yet reviewed (reviewed: false): read it, then "
        "set reviewed: true in the file; until then runs using it are tagged "
        "workbench.unreviewed"
    )
