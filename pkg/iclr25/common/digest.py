"""sha256 fingerprints for committed results: one helper for files, one for JSON-able records.

Package scripts that commit weights or result tables record a sha256 beside them, and the chapter
that loads them checks it, so that a file edited or truncated after the run is refused instead of
trusted::

    info["sha256"] = file_sha256(path)              # when the script writes the file
    check_sha256(path, info["sha256"])              # when a chapter loads it
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def bytes_sha256(data: bytes) -> str:
    """The sha256 of ``data`` as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def code_ast_sha256(path: str | Path) -> str:
    """The sha256 of a Python file's syntax tree with its docstrings removed (comments never enter the
    tree): equal for two versions of a file exactly when they differ only in comments, docstrings or
    layout. A record re-stamped after such an edit stores it as the evidence that its code did not change."""
    import ast

    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return bytes_sha256(ast.dump(tree).encode())


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (read in 1 MiB blocks, so large weight files are not held in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def json_sha256(obj: Any) -> str:
    """The sha256 of ``obj`` written as JSON with sorted keys (the same record gives the same digest
    whatever the order its dictionaries were built in)."""
    return bytes_sha256(json.dumps(obj, sort_keys=True).encode())


def check_sha256(path: str | Path, expected: str, *, data: bytes | None = None) -> bytes:
    """Read ``path`` (or use its already-read bytes ``data``) and return its bytes if their sha256 is
    ``expected``; otherwise raise ``ValueError`` naming the file and both digests."""
    raw = Path(path).read_bytes() if data is None else data
    digest = bytes_sha256(raw)
    if digest != expected:
        raise ValueError(f"{path} has sha256 {digest[:12]}…, but its record says {expected[:12]}…: "
                         "the file changed after the run that recorded it; re-run its package script")
    return raw


def record_sha256(record: dict[str, Any], *, skip: tuple[str, ...] = ("sha256", "cpu_s")) -> str:
    """The sha256 of a result record without its own digest and its timing (``skip``): what a package
    script stores as ``record["sha256"]`` and what :func:`load_record` checks."""
    return json_sha256({k: v for k, v in record.items() if k not in skip})


def load_record(path: str | Path, rerun: str) -> dict[str, Any]:
    """A committed JSON record, refused with ``ValueError`` if its content does not match the
    ``sha256`` it stores; ``rerun`` names the command that re-makes it (put in the error)."""
    record = json.loads(Path(path).read_text())
    if record_sha256(record) != record.get("sha256"):
        raise ValueError(f"{path}: content differs from its sha256; re-run {rerun}")
    return record


def strip_source(src: str) -> str:
    """Python source without its docstrings, comments and blank lines, for a code fingerprint that a
    docstring or comment edit does not change.

    It cuts the raw text at the positions that ``ast`` and ``tokenize`` report, so the result is the
    same on every Python version (``ast.unparse`` is not: its output changed between 3.11 and 3.12).
    """
    import ast
    import io
    import textwrap
    import tokenize

    src = textwrap.dedent(src)
    lines = [ln.encode() for ln in src.splitlines(keepends=True)]
    cuts = []  # (line, byte col, end line, end byte col, replacement); lines numbered from 1
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            e = body[0]
            # a body that is only a docstring reads as ``pass``, as it would be written without one
            cuts.append((e.lineno, e.col_offset, e.end_lineno, e.end_col_offset, b"pass" if len(body) == 1 else b""))
    text = src.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:  # tokenize counts characters, ast counts UTF-8 bytes
            (l0, c0), (l1, c1) = tok.start, tok.end
            cuts.append((l0, len(text[l0 - 1][:c0].encode()), l1, len(text[l1 - 1][:c1].encode()), b""))
    for l0, c0, l1, c1, repl in sorted(cuts, reverse=True):
        lines[l0 - 1:l1] = [lines[l0 - 1][:c0] + repl + lines[l1 - 1][c1:]]
    out = (b"".join(lines)).decode().splitlines()
    return "\n".join(ln.rstrip() for ln in out if ln.strip())
