"""The durable record of submitted provider batches, so a killed sweep polls them, never pays twice.

Why: a batch runs for minutes to hours at the provider; a sweep killed while it waits must
find the batch again on its rerun and poll it, not upload and pay for the same requests
again. Each submission is one JSON file in ``<cache folder>/batches/`` (beside the response
cache its answers go to), written atomically (`experiments.files.atomic_write_text`) after
the upload and again after the batch is created; it is removed once the batch's results are
in the response cache. A record with an uploaded file but no batch id (killed between the
two calls) is resolved on the rerun by looking the file up among the provider's batches.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from experiments.files import atomic_write_text
from promptlib.errors import WorkbenchError


class LedgerError(WorkbenchError):
    """A batch record cannot be read or written; the message names the file."""


@dataclass
class BatchRecord:
    """One submission: which model and endpoint, the response-cache keys it answers (its
    requests' ``custom_id``s), the uploaded file and, once created, the batch."""

    model: str
    endpoint: str
    keys: list[str]
    file_id: str | None = None
    batch_id: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"


class BatchLedger:
    """The records in one folder (one file each, named by the record's id)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def beside(cls, cache_directory: Path) -> BatchLedger:
        """The ledger of a response cache: ``batches/`` next to its folder."""
        return cls(cache_directory.parent / "batches")

    def _path(self, record: BatchRecord) -> Path:
        return self.directory / f"{record.id}.json"

    def save(self, record: BatchRecord) -> None:
        try:
            atomic_write_text(self._path(record), record.to_json())
        except OSError as e:
            raise LedgerError(
                f"cannot record batch submission in {self._path(record)}: "
                f"{e.strerror or type(e).__name__}; free the disk or set WORKBENCH_CACHE_DIR "
                "to a folder you can write (nothing was submitted without a record)"
            ) from e

    def remove(self, record: BatchRecord) -> None:
        self._path(record).unlink(missing_ok=True)

    def pending(self, model: str, endpoint: str) -> list[BatchRecord]:
        """The recorded submissions of `model` at `endpoint` not yet collected, oldest first."""
        if not self.directory.is_dir():
            return []
        found: list[tuple[float, BatchRecord]] = []
        for path in self.directory.glob("*.json"):
            record = self._read(path)
            if record.model == model and record.endpoint == endpoint:
                found.append((path.stat().st_mtime, record))
        return [r for _, r in sorted(found, key=lambda x: x[0])]

    def _read(self, path: Path) -> BatchRecord:
        try:
            data = json.loads(path.read_text())
            return BatchRecord(
                model=str(data["model"]),
                endpoint=str(data["endpoint"]),
                keys=[str(k) for k in data["keys"]],
                file_id=data.get("file_id"),
                batch_id=data.get("batch_id"),
                id=str(data["id"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LedgerError(
                f"batch record {path} is unreadable ({type(e).__name__}: {e}); it names a "
                "submitted batch: check it at your provider, then delete the file to go on"
            ) from e
