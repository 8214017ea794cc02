"""The trial's generation loop against a bare llama-cpp-python loop, in one process.

`benchmarks/overhead.py` compares whole processes; this separates the per-row work: the same
N rendered cuad_audit_rights prompts, the same loaded model, through `trials.run._generate`
(the runner's calls: prefix order, tokens once, the context check, retries, `Completion`
records; no cache) and through a bare loop of `create_completion` in the same prefix order,
alternating sides round by round. What is left of the whole-process gap is fixed work
outside the loop (start-up, imports, MLflow).

    python benchmarks/trial_loop.py [--n 100] [--rounds 4]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from experiments.llm.backends import get_model
from experiments.llm.llama import load_local
from experiments.trials.run import _generate
from experiments.trials.spec import TrialSpec, decoding_for, select_rows
from promptlib import Catalog, compile_prompt, default_source, evaluation_rows, parse_spec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    task = Catalog(default_source()).task("cuad_audit_rights")
    spec = TrialSpec(
        task=task.name, variant=parse_spec("base"), model="local/smollm2", limit=args.n
    )
    compiled = compile_prompt(spec.variant, task, "test")
    rows = select_rows(evaluation_rows(compiled.variant, task, "test")[0], args.n, spec.seed)
    prompts = [compiled.render(r) for r in rows]
    decoding = decoding_for(task.spec, "completion")
    lm = get_model("local/smollm2")
    llm = load_local("smollm2")
    gen: dict[str, Any] = {
        "max_tokens": decoding.max_tokens,
        "temperature": decoding.temperature,
        "stop": list(decoding.stop) or None,
    }

    def bare() -> list[str]:
        tokens = [llm.tokenize(p.encode("utf-8"), add_bos=True, special=True) for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: tokens[i])
        return [llm.create_completion(prompts[i], **gen)["choices"][0]["text"] for i in order]

    def runner() -> list[str]:
        return [c.text or "" for c in _generate(lm, prompts, decoding, None, None)[0]]

    times: dict[str, list[float]] = {"bare loop": [], "trial loop": []}
    texts: dict[str, list[str]] = {}
    sides = [("bare loop", bare), ("trial loop", runner)]
    for r in range(args.rounds):
        for name, side in sides if r % 2 == 0 else sides[::-1]:
            llm.n_tokens = 0  # each side starts from an empty KV cache
            t0 = time.perf_counter()
            out = side()
            times[name].append(time.perf_counter() - t0)
            texts[name] = sorted(out)
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    ratio = sum(times["trial loop"]) / sum(times["bare loop"])
    same = texts["bare loop"] == texts["trial loop"]
    print(
        f"{args.n} prompts, {args.rounds} rounds, one process: trial loop / bare loop = "
        f"{ratio:.3f}; the same texts: {same}"
    )


if __name__ == "__main__":
    main()
