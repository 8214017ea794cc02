"""llama-cpp-python's OpenAI-compatible server with this CPU's load decision.

``python -m experiments.llm.llama_server`` takes exactly ``python -m llama_cpp.server``'s
arguments. The one difference: models load with llama.cpp's extra buffer types off where
`experiments.llm.cpu.llama_load` says they crash (AMX CPUs: ggml-org/llama.cpp#20824, a
segfault in the first multi-token decode, which the stock server meets on its first
request). Elsewhere it is the stock server, unchanged.
"""

from __future__ import annotations

import sys

from experiments.llm.llama import _extra_bufts, llama_load


def main() -> None:
    """Serve until stopped, with the extra buffer types decided as `load_local` decides."""
    try:
        from llama_cpp.server.__main__ import main as serve  # the optional server extra
    except ImportError:
        print(
            "error: llama-cpp-python's server is not installed: pip install -e '.[local,server]'",
            file=sys.stderr,
        )
        raise SystemExit(2) from None

    with _extra_bufts(llama_load().extra_bufts):  # every model the server loads
        serve()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
