"""The book's committed trained weights together stay under the 40 MB limit of the book (DESIGN.md).

Every chapter that commits a checkpoint has its own per-file test (<= 2 MB each); this test
guards the sum, which no single chapter's test can see.
"""
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "pkg" / "iclr25"
LIMIT = 40_000_000          # bytes, for all committed weights of the book together
SUFFIXES = {".pt", ".safetensors", ".npz", ".bin"}


def committed_weights() -> list[Path]:
    """Checkpoint files shipped in the package, and everything under a ``weights/`` folder."""
    return sorted(p for p in PKG.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and (p.suffix in SUFFIXES or "weights" in p.relative_to(PKG).parts))


def test_all_committed_weights_fit_the_book_budget():
    files = committed_weights()
    assert files, "no committed weights found: the search path is wrong"
    total = sum(p.stat().st_size for p in files)
    largest = sorted(files, key=lambda p: p.stat().st_size)[-3:]
    assert total < LIMIT, (f"committed weights total {total / 1e6:.2f} MB >= {LIMIT / 1e6:.0f} MB; "
                           f"largest: {[p.name for p in largest]}")
