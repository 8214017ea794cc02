"""Clusters of rows that cannot vary apart: the unit every test resamples.

LegalBench's test splits repeat texts under several row indices (cuad_audit_rights: 1,215
rows, 775 distinct texts; overruling: 2,385 rows, 1,499). A model at temperature 0 (and the
response cache) gives identical prompts identical answers, so such rows are one observation
counted several times: permuting or resampling them one by one understates the variance and
rejects a true null up to three times too often. The tests in `experiments.analysis.stats` therefore
take a cluster id per row and swap, permute and resample whole clusters; the official metric
is still computed over every row, as LegalBench does.

Default clustering (`by_prompts`): two rows are in one cluster when some variant gave them the
same rendered prompt (the prompt hash every prediction records), closed transitively (a
row tied to another under one variant cannot vary apart from it under the null). Rows with
the same text under every variant fall out of this.

`by_column` clusters by a data column instead (e.g. a source document), which is coarser and
only right when the rows of one document are believed to be dependent; it is offered, never
the default, because it is a modelling claim the data does not prove.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from experiments import ids

if TYPE_CHECKING:
    from experiments.trials.spec import ResolvedTrial

ClusterIds = NDArray[np.intp]


@dataclass(frozen=True)
class Clustering:
    """Cluster id per row (0..n_clusters-1, in order of first appearance) and how it was made."""

    ids: ClusterIds
    how: str  # "prompt" | "column:<name>" | "rows"
    unlinked: int = 0  # rows with no key to cluster by (no prompt hash): their own units

    @property
    def note(self) -> str | None:
        """What a reader must know: rows treated as independent for want of a key."""
        if not self.unlinked:
            return None
        return (
            f"{self.unlinked} of {self.n_rows} rows have no prompt hash (trials from an older "
            "version?): they are tested as independent rows, which overstates the evidence if "
            "their texts repeat; rerun those trials to record it"
        )

    @property
    def n_rows(self) -> int:
        return len(self.ids)

    @property
    def n_clusters(self) -> int:
        return int(self.ids.max()) + 1 if len(self.ids) else 0


def factorize(keys: Sequence[Hashable] | NDArray[np.generic]) -> ClusterIds:
    """Ids 0..C-1 for arbitrary hashable keys, numbered by first appearance."""
    seen: dict[Hashable, int] = {}
    out = np.empty(len(keys), dtype=np.intp)
    for i, k in enumerate(keys):
        out[i] = seen.setdefault(k, len(seen))
    return out


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def by_prompts(per_variant: Sequence[Sequence[str | None]]) -> Clustering:
    """Rows linked when any variant gave them the same prompt hash (union over variants).

    `per_variant[j][i]` is variant j's prompt hash for row i (rows aligned across variants);
    a missing hash (None or "") links the row to nothing under that variant.
    """
    if not per_variant:
        raise ValueError("clustering by prompts needs the prompt hashes of at least one variant")
    n = len(per_variant[0])
    if any(len(v) != n for v in per_variant):
        raise ValueError("every variant's prompt hashes must cover the same rows")
    parent = list(range(n))
    unlinked = sum(all(not v[i] for v in per_variant) for i in range(n))
    for hashes in per_variant:
        first: dict[str, int] = {}
        for i, h in enumerate(hashes):
            if not h:
                continue
            j = first.setdefault(h, i)
            if j != i:
                ri, rj = _find(parent, i), _find(parent, j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    return Clustering(factorize([_find(parent, i) for i in range(n)]), "prompt", unlinked)


def by_column(values: Sequence[Hashable], column: str) -> Clustering:
    """Rows with the same value of a data column (e.g. ``document_name``) in one cluster.

    An empty (or blank) value is no claim of dependence: such rows stay singletons. Combine
    with `by_prompts` (`union`): a column never splits rows that got one prompt.
    """
    keys: list[Hashable] = [
        ("row", i) if v is None or str(v).strip() == "" else ("value", v)
        for i, v in enumerate(values)
    ]
    return Clustering(factorize(keys), f"column:{column}")


def union(first: Clustering, second: Clustering) -> Clustering:
    """Rows together in either clustering end up together (the coarser common one)."""
    if first.n_rows != second.n_rows:
        raise ValueError("both clusterings must cover the same rows")
    parent = list(range(first.n_rows))
    for found in (first.ids, second.ids):
        leader: dict[int, int] = {}
        for i, c in enumerate(found.tolist()):
            j = leader.setdefault(c, i)
            ri, rj = _find(parent, i), _find(parent, j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    merged = factorize([_find(parent, i) for i in range(first.n_rows)])
    unlinked = first.unlinked if second.how == "rows" else second.unlinked
    return Clustering(merged, f"{first.how}+{second.how}", unlinked)


def singletons(n: int) -> Clustering:
    """Every row its own cluster (rows known to be distinct)."""
    return Clustering(np.arange(n, dtype=np.intp), "rows")


def checked(clusters: Sequence[Hashable] | NDArray[np.generic] | None, n: int) -> ClusterIds:
    """Cluster ids for n rows from any per-row keys (None: every row its own cluster).

    A key of None (or NaN) is no claim of dependence: that row is its own cluster, as an
    empty value is for `by_column` (one shared "missing" cluster would hide its rows'
    variance from every test)."""
    if clusters is None:
        return np.arange(n, dtype=np.intp)
    if len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} entries for {n} rows: give one per row")
    keys: list[Hashable] = []
    for i, k in enumerate(np.asarray(clusters, dtype=object).tolist()):
        missing = k is None or (isinstance(k, float) and k != k)
        keys.append(("row", i) if missing else ("key", k))
    return factorize(keys)


def sums(values: NDArray[np.float64], ids: ClusterIds, n_clusters: int) -> NDArray[np.float64]:
    """Per-cluster sums of per-row values along axis 0 (any trailing shape)."""
    out = np.zeros((n_clusters, *values.shape[1:]), dtype=np.float64)
    np.add.at(out, ids, values)
    return out


def for_rows(
    per_variant: Sequence[Sequence[str | None]],
    indices: Sequence[str],
    cluster_by: str = "prompt",
    column: dict[str, str] | None = None,
) -> Clustering:
    """The clusters a sweep's `cluster_by` asks for, over aligned rows `indices`: the one
    rule the comparisons and the sensitivity report both apply.

    "prompt": `by_prompts` over the variants' hashes (none given: every row its own);
    "rows": every row its own cluster; "column:<name>": rows with the same value of that
    data column (`column` maps row index to value) joined to the prompt clusters, since a
    column adds dependence (rows of one document) and never splits rows of one prompt.
    """
    n = len(indices)
    if cluster_by == "rows":
        return singletons(n)
    if cluster_by != "prompt" and not cluster_by.startswith("column:"):
        raise ValueError(f"cluster_by must be prompt, rows or column:<name>, not {cluster_by!r}")
    prompts = by_prompts(per_variant) if per_variant else singletons(n)
    if cluster_by == "prompt":
        return prompts
    if column is None:
        raise ValueError(f"clustering by {cluster_by} needs the column's values")
    by_col = by_column([column.get(i, "") for i in indices], cluster_by[7:])
    return union(by_col, prompts)


def task_clusters(resolved: Sequence[ResolvedTrial]) -> dict[str, dict[str, int]]:
    """Per task, each row's cluster: rows linked when any of the task's trials gave them the
    same rendered prompt, or when their input columns are equal (the fixed design's
    `by_prompts` rule, applied before any call: identical prompts get identical answers, so
    such rows are one unit of a sequential design, never several)."""
    columns: dict[str, list[dict[str, str]]] = {}
    for rt in resolved:
        per_task = columns.setdefault(rt.spec.task, [{}])
        inputs = per_task[0]
        for r in rt.rows:
            if r["index"] not in inputs:  # the row's own input columns
                fields = sorted((k, v) for k, v in r.items() if k not in ("index", "answer"))
                inputs[r["index"]] = ids.prompt_hash(repr(fields))
        per_task.append({r["index"]: ids.prompt_hash(rt.compiled.render(r)) for r in rt.rows})
    out: dict[str, dict[str, int]] = {}
    for task, per_task in columns.items():
        indices = sorted(per_task[0])
        found = by_prompts([[col.get(i, "") for i in indices] for col in per_task])
        out[task] = {i: int(c) for i, c in zip(indices, found.ids, strict=True)}
    return out
