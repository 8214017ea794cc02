"""One way to open a file the user names: a regular file of bounded size, and JSON of bounded
depth, bounded integers and no key given twice.

Why: a path can name a FIFO (opening it waits for a writer that never comes), a device
(/dev/zero never ends), a folder, or a file far larger than any input the workbench reads.
JSON can nest deeper than Python's stack (RecursionError), hold an integer longer than
Python converts (ValueError) or than a float holds (OverflowError later), or give a key twice
(`json.loads` keeps the last silently, so `"correct": 1, ..., "correct": 0` reads as wrong).
Each is refused here as one line naming the file (and the line) and what to do, raised as
the caller's `WorkbenchError` (exit 2), before anything else reads the data. The YAML
loader (`promptlib.yamlsafe`) bounds YAML the same way.

The file is checked (`os.stat`) before it is opened, and opened without blocking
(`O_NONBLOCK`) and checked again on the open descriptor, so a path swapped for a FIFO in
between cannot hang the read either.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from promptlib.errors import WorkbenchError

#: The largest results, predictions or grades file read (a 1M-line jsonl is ~100 MB).
MAX_DATA_BYTES = 512 << 20
#: JSON nesting deeper than this is refused (results files nest ~10; a variant file 3).
MAX_JSON_DEPTH = 64
#: An integer with more digits than this is refused (ids, counts and seeds have < 25).
MAX_INT_DIGITS = 64


def _kind(mode: int) -> str | None:
    """What a path that is not a regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _not_regular(path: Path, what: str, kind: str) -> str:
    return (
        f"{what} {path} is {kind}, not a regular file; give the path of a file saved on disk "
        "(to read a stream, save it to a file first)"
    )


def check_file(path: Path, what: str, error: type[WorkbenchError]) -> os.stat_result:
    """`path`'s status if it is a regular file, else `error` (missing, a folder, a FIFO, a
    device, a socket, unreadable); never opens it, so it cannot block."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist; check the path") from None
    except OSError as e:
        raise error(f"{what} {path} cannot be read ({e.strerror or e}); check it") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise error(_not_regular(path, what, kind))
    return st


def read_bytes(
    path: Path, what: str, error: type[WorkbenchError], limit: int, limit_for: str = ""
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them, or one `error` line.

    `what` names the file's role in the message ("results file", "variant file"), and
    `limit_for` the files the limit is for (default: `what`s); the size is checked before
    reading, and again while reading (a file still growing)."""
    st = check_file(path, what, error)
    if st.st_size > limit:
        raise error(_too_big(path, what, limit, limit_for))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist; check the path") from None
    except OSError as e:
        raise error(f"{what} {path} cannot be read ({e.strerror or e}); check it") from None
    with os.fdopen(fd, "rb") as f:
        kind = _kind(os.fstat(f.fileno()).st_mode)
        if kind is not None:  # swapped after the check
            raise error(_not_regular(path, what, kind))
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise error(f"{what} {path} cannot be read ({e.strerror or e}); check it") from None
    if len(data) > limit:
        raise error(_too_big(path, what, limit, limit_for))
    return data


def _too_big(path: Path, what: str, limit: int, limit_for: str) -> str:
    return (
        f"{what} {path} is larger than {limit} bytes ({limit / 2**20:g} MiB), the limit for "
        f"{limit_for or what + 's'}; give a smaller file (split it, or keep fewer rows)"
    )


def read_text(
    path: Path,
    what: str,
    error: type[WorkbenchError],
    limit: int,
    encoding: str = "utf-8",
    limit_for: str = "",
) -> str:
    """`read_bytes` decoded (`encoding`, e.g. "utf-8-sig" to drop a BOM); bytes that are
    not UTF-8 are one line naming the line."""
    data = read_bytes(path, what, error, limit, limit_for)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"{what} {path} is not UTF-8 text (line {line}: byte 0x{data[e.start]:02x}); "
            "save it as UTF-8"
        ) from None


# ---- JSON ------------------------------------------------------------------------------------
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKETS = str.maketrans({c: None for c in map(chr, range(128)) if c not in "[]{}\n"})


class _Refused(Exception):
    """A JSON construct refused while parsing (the message without the file)."""


def depth_over(text: str, limit: int) -> int | None:
    """The 1-based line where `text`'s JSON first nests deeper than `limit`, else None.

    A scan of the brackets outside strings (it cannot recurse itself); cheap when the text
    has few brackets."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth, line = 0, 1
    for ch in _STRING.sub('""', text).translate(_BRACKETS):
        if ch == "\n":
            line += 1
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line
        elif ch in "]}":
            depth -= 1
    return None


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(
            f"an integer of {len(digits.lstrip('-')):,} digits (over the {MAX_INT_DIGITS} "
            "digits the workbench reads: ids, counts and seeds are shorter); fix the value"
        )
    return int(digits)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(key)
        out[key] = value
    return out


def loads(
    text: str,
    where: str,
    error: type[WorkbenchError],
    *,
    max_depth: int = MAX_JSON_DEPTH,
    first_line: int = 1,
) -> Any:
    """`json.loads(text)` within bounds: nesting deeper than `max_depth`, an integer over
    MAX_INT_DIGITS digits or a key given twice in one object is one `error` line naming
    `where` (the file), the line (`first_line` is the line `text` starts on) and what to do.

    Malformed JSON raises `json.JSONDecodeError` as `json.loads` does, so each reader keeps
    its own message for it (a truncated file, another format)."""
    over = depth_over(text, max_depth)
    if over is not None:
        raise error(
            f"{where}: JSON nested deeper than {max_depth} levels (line {over + first_line - 1})"
            "; no file the workbench reads nests that deep: is it the right file?"
        )
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_int=_int)
    except _Refused as e:
        message = str(e)
        if message.startswith("an integer of "):
            line = _line_of_long_int(text) + first_line - 1
            raise error(f"{where}: line {line}: {message}") from None
        line = _line_of_duplicate(text, message) + first_line - 1
        raise error(
            f"{where}: line {line}: key {message!r} is given twice in one object; keep one "
            "(JSON readers silently keep the last)"
        ) from None
    except RecursionError:  # deeper than the stack allows, whatever the scan said
        raise error(f"{where}: JSON nested too deeply to read; is it the right file?") from None
    half = _lone_surrogate(text)
    if half is not None:
        line, escape = half
        raise error(
            f"{where}: line {line + first_line - 1}: a string holds '{escape}', half of a "
            "UTF-16 pair: not text, and no store or file can save it; fix the value"
        )
    return value


def _lone_surrogate(text: str) -> tuple[int, str] | None:
    """(line, escape) of the first JSON escape of half a UTF-16 pair (`"\\ud800"` alone):
    `json.loads` reads it into a string no encoder takes, so a name holding one failed every
    store after the work was done. Escapes preceded by an escaped backslash are text."""
    if "\\u" not in text:
        return None
    for m in re.finditer(r"(?<!\\)((?:\\\\)*)\\u([dD][0-9a-fA-F]{3})", text):
        code = int(m.group(2), 16)
        after = text[m.end() : m.end() + 6]
        before = text[max(0, m.start(2) - 8) : m.start(2) - 2]
        if 0xD800 <= code <= 0xDBFF and re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", after):
            continue  # a high half with its low half: one character
        if 0xDC00 <= code <= 0xDFFF and re.fullmatch(r"\\u[dD][89abAB][0-9a-fA-F]{2}", before):
            continue  # the low half of a pair
        if 0xD800 <= code <= 0xDFFF:
            return text.count("\n", 0, m.start()) + 1, "\\u" + m.group(2).lower()
    return None


def _line_of_long_int(text: str) -> int:
    """The line of the first integer literal over MAX_INT_DIGITS digits (outside strings)."""
    bare = _STRING.sub('""', text)
    m = re.search(rf"-?\d{{{MAX_INT_DIGITS + 1},}}", bare)
    return bare.count("\n", 0, m.start()) + 1 if m else 1


def _line_of_duplicate(text: str, key: str) -> int:
    """The line where `key` is given a second time in one object (1 if not found).

    Only called once parsing found the duplicate, so `text` is valid JSON up to there."""
    stack: list[set[str] | None] = []  # per open bracket: the keys seen ({) or None ([)
    for m in re.finditer(r'"(?:[^"\\\n]|\\.)*"\s*:?|[\[\]{}]', text):
        token = m.group()
        if token in ("{", "["):
            stack.append(set() if token == "{" else None)
        elif token in ("}", "]"):
            if stack:
                stack.pop()
        elif token.endswith(":") and stack and stack[-1] is not None:
            name = json.loads(token[:-1].rstrip())
            if name == key and name in stack[-1]:
                return text.count("\n", 0, m.start()) + 1
            stack[-1].add(name)
    return 1
