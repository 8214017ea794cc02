"""Every token once: prompt tokens llama.cpp evaluates for a few-shot sweep, against the limit.

A sweep of `--variants` few-shot variants of one task (demonstrations on) over `--rows` test
rows, on local/smollm2 in this process, by generation and by log-likelihood, two ways:

- runner: the runner's order. Each variant's calls in `LM.call_order` (prefix order of the
  prompts' tokens), generation through llama-cpp-python's `create_completion` (which reuses
  the KV prefix shared with the previous prompt), log-likelihood through
  `experiments.llm.loglik.label_logprobs` (one evaluation of the prompt, the labels' tokens
  walked as a trie);
- naive: the rows in the trial's (file) order, reusing only the prefix shared with the
  previous sequence (llama-cpp-python's own prefix match); for log-likelihood each label
  evaluates prompt + label on its own, reusing only what the previous label's sequence shares.

Measure: the tokens fed to llama.cpp (`Llama.eval`, counted by a wrapper; llama.cpp's
``llama_perf_context`` counters are off in this build's context, ``no_perf``). For generation,
the prompt tokens only (the first `eval` of each completion), beside the generated ones. The
limit: the size of the prompts' prefix trie (`experiments.llm.prefix.trie_size`), for
log-likelihood of the trie of every prompt + label-without-its-last-token (a label's last
token is only read). Wall times: sides alternate within a round, the KV cache emptied before
each side; the median over `--rounds`. Also printed: whether any generated text, label
log-likelihood or chosen label differs between the two orders.

    python benchmarks/prefix_tokens.py [--rows 200] [--variants base,format=claude,demos=4,seed=0]
        [--task cuad_audit_rights] [--rounds 2]
Goal: runner tokens / limit <= 1.10.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.llm.gateway import get_model
from experiments.llm.llama import _LOCK, load_local
from experiments.llm.loglik import _last_logits, _logsoftmax, label_logprobs
from experiments.llm.prefix import common_prefix, trie_size
from experiments.trials.spec import decoding_for, select_rows
from promptlib import Catalog, compile_prompt, default_source, evaluation_rows, parse_spec

MODEL = "local/smollm2"
DEFAULT_VARIANTS = ("base", "format=claude", "demos=4,seed=0")


@dataclass(frozen=True)
class Variant:
    """One variant's rendered prompts (in the trial's row order) and its continuations."""

    spec: str
    prompts: list[str]
    conts: list[str]


@dataclass(frozen=True)
class Side:
    """One side's pass over the sweep: tokens fed to llama.cpp, its outputs, its wall time."""

    prompt_tokens: int
    other_tokens: int
    outputs: list[list[Any]]
    seconds: float


class Feed:
    """Counts the tokens fed to `llm.eval`, each call apart (an instance attribute shadows the
    method: llama-cpp-python's `generate` and `label_logprobs` call `self.eval`)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.calls: list[int] = []
        self._eval = llm.eval

    def __enter__(self) -> Feed:
        def counted(tokens: Sequence[int]) -> None:
            self.calls.append(len(tokens))
            self._eval(tokens)

        self.llm.eval = counted
        return self

    def __exit__(self, *exc: object) -> None:
        del self.llm.eval


def variants(task_name: str, specs: Sequence[str], rows: int) -> list[Variant]:
    catalog = Catalog(default_source())
    task = catalog.task(task_name)
    out = []
    for spec in specs:
        compiled = compile_prompt(parse_spec(spec), task, "test")
        picked = select_rows(evaluation_rows(compiled.variant, task, "test")[0], rows, 0)
        labels = compiled.answer_labels or task.spec.labels or ()
        out.append(
            Variant(
                spec,
                [compiled.render(r) for r in picked],
                [compiled.answer_join + lab for lab in labels],
            )
        )
    return out


def generation(llm: Any, lm: Any, sweep: Sequence[Variant], decoding: Any, ordered: bool) -> Side:
    outputs: list[list[Any]] = []
    prompt_tokens = other = 0
    t0 = time.perf_counter()
    for v in sweep:
        order = lm.call_order(v.prompts) if ordered else list(range(len(v.prompts)))
        texts: list[Any] = [None] * len(v.prompts)
        for i in order:
            with Feed(llm) as feed:
                reply = llm.create_completion(
                    v.prompts[i],
                    max_tokens=decoding.max_tokens,
                    temperature=decoding.temperature,
                    stop=list(decoding.stop),
                )
            texts[i] = reply["choices"][0]["text"]
            prompt_tokens += feed.calls[0] if feed.calls else 0
            other += sum(feed.calls[1:])
        outputs.append(texts)
    return Side(prompt_tokens, other, outputs, time.perf_counter() - t0)


def loglik_runner(llm: Any, lm: Any, sweep: Sequence[Variant]) -> Side:
    outputs: list[list[Any]] = []
    t0 = time.perf_counter()
    with Feed(llm) as feed:
        for v in sweep:
            sums: list[Any] = [None] * len(v.prompts)
            for i in lm.call_order(v.prompts):
                sums[i] = label_logprobs(MODEL, v.prompts[i], v.conts)
            outputs.append(sums)
    return Side(sum(feed.calls), 0, outputs, time.perf_counter() - t0)


def loglik_naive(llm: Any, sweep: Sequence[Variant]) -> Side:
    """Each label on its own, rows in file order: prompt + label, reusing only the prefix the
    previous sequence shares (as llama-cpp-python's own prefix match does)."""
    outputs: list[list[Any]] = []
    t0 = time.perf_counter()
    with Feed(llm) as feed, _LOCK:
        for v in sweep:
            conts = [llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in v.conts]
            rows = []
            for prompt in v.prompts:
                tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
                sums = []
                for cont in conts:
                    seq = tokens + cont[:-1]
                    shared = common_prefix(list(llm.input_ids[: llm.n_tokens]), seq)
                    shared = min(shared, len(tokens) - 1)
                    llm.n_tokens = shared
                    llm.eval(tokens[shared:])
                    total = float(_logsoftmax(_last_logits(llm))[cont[0]])
                    for k in range(1, len(cont)):
                        llm.eval([cont[k - 1]])
                        total += float(_logsoftmax(_last_logits(llm))[cont[k]])
                    sums.append(total)
                rows.append(sums)
            outputs.append(rows)
    return Side(sum(feed.calls), 0, outputs, time.perf_counter() - t0)


def limits(llm: Any, sweep: Sequence[Variant]) -> tuple[int, int, int, int]:
    """(generation's trie, log-likelihood's trie of prompt + label-but-its-last-token, the
    prompts' tokens with no reuse at all, log-likelihood's with none)."""
    gen: list[list[int]] = []
    ll: list[list[int]] = []
    for v in sweep:
        conts = [llm.tokenize(c.encode("utf-8"), add_bos=False, special=False) for c in v.conts]
        for p in v.prompts:
            gen.append(llm.tokenize(p.encode("utf-8"), add_bos=True, special=True))
            toks = llm.tokenize(p.encode("utf-8"), add_bos=True, special=False)
            ll.extend(toks + c[:-1] for c in conts)
    return trie_size(gen), trie_size(ll), sum(map(len, gen)), sum(map(len, ll))


def alternate(
    rounds: int, runner: Callable[[], Side], naive: Callable[[], Side], llm: Any
) -> tuple[Side, Side, float, float]:
    """Both sides `rounds` times, alternating which goes first, each from an empty KV cache;
    the last pass of each and the median wall times."""
    times: dict[str, list[float]] = {"runner": [], "naive": []}
    last: dict[str, Side] = {}
    for r in range(rounds):
        sides = [("runner", runner), ("naive", naive)]
        for name, run in sides if r % 2 == 0 else sides[::-1]:
            llm.reset()
            last[name] = run()
            times[name].append(last[name].seconds)
            print(
                f"  round {r + 1} {name}: {last[name].seconds:.1f} s", file=sys.stderr, flush=True
            )
    return (
        last["runner"],
        last["naive"],
        statistics.median(times["runner"]),
        statistics.median(times["naive"]),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="cuad_audit_rights")
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--variants", default=";".join(DEFAULT_VARIANTS), help="';'-separated")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    specs = [s.strip() for s in args.variants.split(";") if s.strip()]
    sweep = variants(args.task, specs, args.rows)
    catalog_task = Catalog(default_source()).task(args.task)
    decoding = decoding_for(catalog_task.spec, "completion")
    llm = load_local("smollm2")
    lm = get_model(MODEL)  # the runner's model: its `call_order`
    gen_limit, ll_limit, gen_all, ll_all = limits(llm, sweep)
    n = sum(len(v.prompts) for v in sweep)
    print(
        f"{args.task}: {len(sweep)} variants ({', '.join(specs)}) x {args.rows} rows = {n} "
        f"prompts, {MODEL}, {args.rounds} rounds; tokens = tokens fed to llama.cpp's eval"
    )
    g_run, g_naive, g_t_run, g_t_naive = alternate(
        args.rounds,
        lambda: generation(llm, lm, sweep, decoding, ordered=True),
        lambda: generation(llm, lm, sweep, decoding, ordered=False),
        llm,
    )
    l_run, l_naive, l_t_run, l_t_naive = alternate(
        args.rounds, lambda: loglik_runner(llm, lm, sweep), lambda: loglik_naive(llm, sweep), llm
    )
    head = (
        f"{'scoring':<10} {'limit':>8} {'no reuse':>9} {'naive':>8} {'runner':>8} "
        f"{'naive/lim':>9} {'runner/lim':>10} {'naive s':>8} {'runner s':>8} {'speedup':>7}"
    )
    print(head)
    print("-" * len(head))
    for name, lim, none, nv, rn, tn, tr in (
        ("generate", gen_limit, gen_all, g_naive, g_run, g_t_naive, g_t_run),
        ("loglik", ll_limit, ll_all, l_naive, l_run, l_t_naive, l_t_run),
    ):
        print(
            f"{name:<10} {lim:>8} {none:>9} {nv.prompt_tokens:>8} {rn.prompt_tokens:>8} "
            f"{nv.prompt_tokens / lim:>9.3f} {rn.prompt_tokens / lim:>10.3f} {tn:>8.1f} "
            f"{tr:>8.1f} {tn / tr:>6.2f}x"
        )
    differ = sum(
        a != b
        for va, vb in zip(g_run.outputs, g_naive.outputs, strict=True)
        for a, b in zip(va, vb, strict=True)
    )
    print(
        f"generate: {differ} of {n} generated texts differ between the orders; generated "
        f"tokens fed: runner {g_run.other_tokens}, naive {g_naive.other_tokens}"
    )
    diffs = [
        abs(x - y)
        for va, vb in zip(l_run.outputs, l_naive.outputs, strict=True)
        for ra, rb in zip(va, vb, strict=True)
        for x, y in zip(ra, rb, strict=True)
    ]
    chosen = sum(
        max(range(len(ra)), key=ra.__getitem__) != max(range(len(rb)), key=rb.__getitem__)
        for va, vb in zip(l_run.outputs, l_naive.outputs, strict=True)
        for ra, rb in zip(va, vb, strict=True)
    )
    print(
        f"loglik: label sums differ by at most {max(diffs):.2e} nats between the two; "
        f"{chosen} of {n} chosen labels differ"
    )


if __name__ == "__main__":
    main()
