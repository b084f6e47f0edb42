"""Real English text that ships with Python, byte-level tokens, and language-model batches.

Chapters that need a language model of *real* text (pruning, sparsity, distillation) train on the
Python reference documentation (``pydoc_data.topics``: 79 topics, about 0.46 MB of English prose with
code). CPython carries it, but its content changes with every Python release, so the package ships
the copy of Python 3.11.7 (gzip, 0.13 MB; the Python documentation's licence is the PSF's) and every
Python version reads the same bytes. Byte-level tokens (vocabulary 256) need no tokenizer
training and cover any text::

    ids = encode_bytes(pydoc_text())                  # (n,) int64
    train, val = split_ids(ids, val_fraction=0.1)     # contiguous split, no overlap
    x, y = random_blocks(train, batch_size=32, block=128, generator=g)   # (32, 128) each
    ppl = perplexity(model, val, block=128)           # exp(mean next-byte loss)
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from iclr25.common.digest import bytes_sha256

BYTE_VOCAB = 256


#: the reference topics of Python 3.11.7 (``pydoc_data.topics``), joined in sorted-key order
PYDOC_FILE = Path(__file__).parent / "data" / "pydoc-topics-3.11.7.txt.gz"
#: sha256 of the joined text (UTF-8), checked on every read
PYDOC_SHA256 = "d9dc35bce5ab1a24ed7f4c3c9b7c22450410e9d68279e3426db458c6be371621"


def pydoc_text() -> str:
    """The Python reference topics joined in sorted-key order (:data:`PYDOC_FILE`): a fixed, offline
    English corpus of 466,194 bytes, the same on every Python version.

    Raises ``ValueError`` if the shipped file does not hold the text of :data:`PYDOC_SHA256`.
    """
    raw = gzip.decompress(PYDOC_FILE.read_bytes())
    if bytes_sha256(raw) != PYDOC_SHA256:
        raise ValueError(f"{PYDOC_FILE.name} is not the pinned corpus (sha256 {PYDOC_SHA256[:12]}...)")
    return raw.decode("utf-8")


def pydoc_topics_of_this_python() -> str:
    """The same join of *this* interpreter's ``pydoc_data.topics`` (equal to :func:`pydoc_text` on
    Python 3.11.7 only; it is how :data:`PYDOC_FILE` was made)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k].strip() for k in sorted(topics))


def encode_bytes(text: str) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as int64 token ids in [0, 256), shape (n,)."""
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).to(torch.int64)


def decode_bytes(ids: torch.Tensor) -> str:
    """Inverse of :func:`encode_bytes` (invalid UTF-8 sequences are replaced)."""
    return bytes(ids.to(torch.uint8).cpu().tolist()).decode("utf-8", errors="replace")


def split_ids(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """A contiguous (train, validation) split: the last ``val_fraction`` of the stream is held out."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(round(len(ids) * (1 - val_fraction)))
    return ids[:cut], ids[cut:]


def random_blocks(ids: torch.Tensor, batch_size: int, block: int,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of the stream: inputs (B, block) and next-token targets
    (B, block), on ``ids``'s device. ``generator`` (a CPU generator) makes the draw reproducible."""
    if len(ids) <= block:
        raise ValueError(f"the stream has {len(ids)} tokens, fewer than block + 1 = {block + 1}")
    starts = torch.randint(0, len(ids) - block, (batch_size,), generator=generator)
    offsets = starts[:, None] + torch.arange(block + 1)[None, :]
    windows = ids[offsets.to(ids.device)]
    return windows[:, :-1], windows[:, 1:]


def sequential_blocks(ids: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream cut into consecutive non-overlapping windows: inputs and targets (n_blocks, block)."""
    n = (len(ids) - 1) // block
    if n < 1:
        raise ValueError(f"the stream has {len(ids)} tokens, fewer than block + 1 = {block + 1}")
    x = ids[: n * block].view(n, block)
    y = ids[1: n * block + 1].view(n, block)
    return x, y


@torch.no_grad()
def mean_nll(model: torch.nn.Module, ids: torch.Tensor, block: int, batch_size: int = 32) -> float:
    """Mean next-token negative log-likelihood (nats) of ``model`` over ``ids`` cut into
    consecutive windows of ``block`` tokens (each window starts with an empty context).
    ``model(x)`` must return logits (B, T, vocab)."""
    x, y = sequential_blocks(ids, block)
    dev = next(model.parameters()).device
    total, count = 0.0, 0
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size].to(dev), y[i:i + batch_size].to(dev)
        logits = model(xb)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), yb.reshape(-1),
                                 reduction="sum").item()
        count += yb.numel()
    return total / count


def perplexity(model: torch.nn.Module, ids: torch.Tensor, block: int, batch_size: int = 32) -> float:
    """``exp`` of :func:`mean_nll`."""
    return math.exp(mean_nll(model, ids, block, batch_size))
