"""Real text corpus and byte-level language-model batches."""

import hashlib
import math

import pytest
import torch

from iclr25.lm.text import (decode_bytes, encode_bytes, mean_nll, perplexity, pydoc_text, random_blocks,
                            sequential_blocks, split_ids)


def test_pydoc_corpus_is_real_english_and_round_trips() -> None:
    text = pydoc_text()
    assert len(text) > 300_000 and "Assert statements" in text
    ids = encode_bytes(text)
    assert ids.dtype == torch.int64 and int(ids.max()) < 256
    assert decode_bytes(ids) == text


def test_pydoc_corpus_is_the_shipped_copy_on_any_python(monkeypatch, tmp_path) -> None:
    """The corpus is read from the package, not from the running interpreter (whose topics change
    with each release), and a changed file is refused."""
    import gzip
    import sys

    from iclr25.lm import text as T

    assert hashlib.sha256(pydoc_text().encode()).hexdigest() == T.PYDOC_SHA256
    if sys.version_info[:3] == (3, 11, 7):
        assert pydoc_text() == T.pydoc_topics_of_this_python()
    bad = tmp_path / "t.txt.gz"
    bad.write_bytes(gzip.compress(b"other text"))
    monkeypatch.setattr(T, "PYDOC_FILE", bad)
    with pytest.raises(ValueError, match="not the pinned corpus"):
        T.pydoc_text()


def test_split_and_blocks_are_shifted_views() -> None:
    ids = torch.arange(1000)
    train, val = split_ids(ids, 0.1)
    assert len(train) == 900 and len(val) == 100 and val[0] == 900
    x, y = random_blocks(train, 8, 16, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16) and torch.equal(y, x + 1)
    x, y = sequential_blocks(val, 16)
    assert x.shape == (6, 16) and torch.equal(y, x + 1) and x[0, 0] == 900
    with pytest.raises(ValueError, match="fewer than block"):
        sequential_blocks(torch.arange(10), 16)


def test_uniform_model_has_perplexity_of_vocabulary() -> None:
    class Uniform(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.zeros(*x.shape, 256) + self.w

    ids = encode_bytes("hello world, " * 50)
    # float32 cross-entropies summed over ~600 tokens: relative round-off, amplified by exp for the perplexity
    assert mean_nll(Uniform(), ids, 32) == pytest.approx(math.log(256), rel=1e-5)
    assert perplexity(Uniform(), ids, 32) == pytest.approx(256, rel=1e-4)
