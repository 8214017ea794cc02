"""Concurrency against a local OpenAI-compatible server with 200 ms injected latency.

Part 1: 200 requests, concurrency 16 vs sequential, measured side by side. Goal >= 12x.
Part 2: the same server failing 20% of requests (429 / 500 / timeouts): the trial must end
with every row either scored or recorded as an error.

    python benchmarks/concurrency.py
"""

from __future__ import annotations

import os
import time

from experiments.llm.gateway import get_model
from experiments.llm.types import Decoding
from experiments.testing.stub_server import StubOpenAI
from experiments.trials.run import run_trial
from experiments.trials.spec import TrialSpec
from promptlib import Catalog, default_source, parse_spec

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-key-for-the-local-stub")


def main() -> None:
    catalog = Catalog(default_source())
    spec = TrialSpec(
        task="cuad_audit_rights", variant=parse_spec("base"), model="openai/stub", limit=200
    )
    times = {}
    with StubOpenAI(latency=0.2) as stub:
        for conc in (1, 16):
            lm = get_model("openai/stub", api_base=stub.url, concurrency=conc)
            lm.complete("warm-up", Decoding())  # keeps litellm's import out of the timing
            t0 = time.perf_counter()
            res = run_trial(spec, catalog, lm)
            times[conc] = time.perf_counter() - t0
            assert res.complete and res.model_calls == 200
            print(
                f"concurrency {conc:>2}: {times[conc]:.2f}s for 200 requests "
                f"(server saw up to {stub.max_in_flight} in flight)",
                flush=True,
            )
    ratio = times[1] / times[16]
    print(
        f"concurrency 16 vs sequential: {ratio:.1f}x (goal >= 12x) "
        f"{'OK' if ratio >= 12 else 'MISSED'}"
    )

    with StubOpenAI(latency=0.2, fault_rate=0.2, retry_after=0.2, stall=2.0, seed=1) as stub:
        lm = get_model("openai/stub", api_base=stub.url, concurrency=16, timeout=1.0, backoff=0.2)
        res = run_trial(spec, catalog, lm)
        scored = sum(p.generation is not None for p in res.predictions)
        errors = sum(p.error is not None for p in res.predictions)
        faults = {k: v for k, v in stub.counts.items() if k != "ok"}
    ok = scored + errors == 200 and len(res.predictions) == 200
    print(
        f"with 20% faults {faults}: {scored} rows scored, {errors} recorded as errors, "
        f"status={'complete' if res.complete else 'incomplete'} "
        f"{'OK' if ok else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
