"""The MLflow UI on the configured store (`workbench ui`): its command line and the process
group it runs in."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from typing import Any

from experiments.secrets import safe_url
from experiments.tracking.store import TrackingConfig, load_config
from promptlib.errors import WorkbenchError


def ui_command(config: TrackingConfig, port: int, host: str = "127.0.0.1") -> list[str]:
    """The `mlflow ui` command for the configured store."""
    import sys

    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", config.tracking_uri]
    if config.artifact_location:
        cmd += ["--default-artifact-root", config.artifact_location]
    return [*cmd, "--host", host, "--port", str(port)]


def serve_ui(port: int, host: str = "127.0.0.1", say: Callable[[str], None] = print) -> int:
    """Run the MLflow UI on the configured store until interrupted; returns the exit code.

    A port that cannot be bound is a `WorkbenchError` before anything starts. The MLflow
    server forks workers and job consumers, so it runs as its own process group and the
    whole group is taken down on the way out: no worker outlives the command. The server
    only returns by itself when it failed to serve (exit code 1 or its own).
    """
    import signal
    import socket

    try:  # a port in use or not ours to bind: say so now, not after the server gives up
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as e:
        raise WorkbenchError(
            f"cannot serve the MLflow UI on {host}:{port} ({e.strerror or e}); "
            "pass another --port (or stop what uses it)"
        ) from None
    cmd = ui_command(load_config(), port, host)
    shown = " ".join(safe_url(c) for c in cmd[3:])
    say(f"MLflow UI on http://{host}:{port}  ({shown})")
    proc = subprocess.Popen(cmd, env=os.environ.copy(), start_new_session=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
        say(f"error: the MLflow server stopped (exit code {code})")
        code = code or 1
    except KeyboardInterrupt:
        code = 0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return code
