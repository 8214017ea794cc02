"""Remake results.json with the real promptfoo CLI (needs Node 20.20+ and the npm registry).

    python tests/data/imports/promptfoo/make_results.py

Starts the workbench's stub server on 127.0.0.1:8792 (the port promptfooconfig.yaml names),
answering "Yes" (the right answer) to variant A on even rows and to variant B unless the row
is a multiple of 3, then runs, in this folder:

    npx -y promptfoo@0.121.20 eval -c promptfooconfig.yaml -o results.json --no-cache --no-table

(promptfoo 0.121.20 is the newest release that runs on Node 20; 0.122 needs Node 22.)
promptfoo exits 100 when some assertions fail, as they do here by design.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))  # the repository root: experiments.testing

from experiments.testing.stub_server import StubOpenAI  # noqa: E402

VERSION = "0.121.20"
COMMAND = [
    "npx", "-y", f"promptfoo@{VERSION}", "eval", "-c", "promptfooconfig.yaml",
    "-o", "results.json", "--no-cache", "--no-table",
]  # fmt: skip


def reply(prompt: str) -> str:
    """Yes (right) for variant A on even rows, for variant B unless the row % 3 == 0."""
    match = re.search(r"row (\d+)", prompt)
    row = int(match.group(1)) if match else -1
    right = row % 2 == 0 if "Variant A" in prompt else row % 3 != 0
    return "Yes" if right else "No"


def main() -> int:
    env = {
        **os.environ,
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
    }
    with StubOpenAI(reply_fn=reply, port=8792):
        done = subprocess.run(COMMAND, cwd=HERE, env=env, check=False)
    return 0 if done.returncode in (0, 100) else done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
