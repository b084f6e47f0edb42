"""Tests of iclr25.lm: tokenizer round trip, toy language labels, model causality, training."""

import numpy as np
import pytest
import torch

from iclr25.lm import (TinyLM, TinyLMConfig, Vocab, few_shot_split, generate, last_token_logits,
                       make_task_data, next_token_loss, pad_batch, pretraining_batch, toy_vocab,
                       train_lm)
from iclr25.lm.language import NEGATIVE, POSITIVE, Sentence, sample_sentence


def test_vocab_round_trip_and_errors():
    v = toy_vocab()
    text = "<bos> tell sentiment the very lovely guitar ? good"
    assert v.decode(v.encode(text)) == text
    assert v.words[:3] == ("<pad>", "<bos>", "<eos>")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        v.encode("zebra")
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "a"])


def test_pad_batch_lengths():
    ids, lengths = pad_batch([[5, 6, 7], [8]])
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]


def test_labels_follow_counts():
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = sample_sentence(rng, n_phrases=3, n_adj=3, topic=2, n_foreign=1)
        n_pos = sum(w in POSITIVE for w in s.words)
        n_neg = sum(w in NEGATIVE for w in s.words)
        assert (n_pos, n_neg) == (s.n_pos, s.n_neg)
        assert s.label("sentiment") == int(n_pos > n_neg)
        assert s.label("topic") == 2  # main topic keeps the majority
    tie = Sentence(("x",), 1, 1, (1, 0, 0, 0))
    assert tie.label("sentiment") == 0 and tie.label("sentiment", ties="positive") == 1
    with pytest.raises(ValueError, match="valid tasks"):
        tie.label("grammar")


def test_few_shot_split_is_balanced_and_deterministic():
    a, b = few_shot_split("topic", 5, 20, seed=3), few_shot_split("topic", 5, 20, seed=3)
    assert a["train"].sentences == b["train"].sentences
    assert torch.bincount(a["train"].labels, minlength=4).tolist() == [5, 5, 5, 5]
    assert len(a["test"]) == 20
    assert a["train"].sentences != few_shot_split("topic", 5, 20, seed=4)["train"].sentences


def _model(seed=0):
    torch.manual_seed(seed)
    return TinyLM(TinyLMConfig(vocab_size=len(toy_vocab()), d_model=32, d_ff=64, n_heads=4)).eval()


def test_causality_future_tokens_do_not_change_past_logits():
    m = _model()
    ids = torch.randint(3, 50, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = torch.randint(3, 50, (2, 5))
    with torch.no_grad():
        a, b = m(ids), m(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_offset_equals_shifted_embeddings_and_last_token_logits():
    m = _model()
    ids = torch.randint(3, 50, (3, 9))
    off = torch.randn(3, 9, 32) * 0.1
    with torch.no_grad():
        a = m(ids, embed_offset=off)
        b = m(inputs_embeds=m.embed(ids) + off)
    assert torch.allclose(a, b, atol=1e-6)
    lengths = torch.tensor([9, 4, 6])
    last = last_token_logits(m, ids, lengths)
    for i, L in enumerate(lengths.tolist()):  # right padding does not matter
        with torch.no_grad():
            assert torch.allclose(last[i], m(ids[i:i + 1, :L])[0, -1], atol=1e-5)
    with pytest.raises(ValueError, match="exactly one"):
        m(ids, inputs_embeds=m.embed(ids))


def test_training_reduces_loss_deterministically():
    v = toy_vocab()

    def run():
        m = _model(1)
        rng = np.random.default_rng(0)
        return train_lm(m, lambda s: pretraining_batch(rng, v, 16), 30, lr=3e-3, warmup=5)

    l1, l2 = run(), run()
    assert l1 == l2
    assert np.mean(l1[-5:]) < np.mean(l1[:5]) - 0.5


def test_next_token_loss_is_uniform_cross_entropy_at_init_scale():
    ids = torch.randint(3, 20, (4, 6))
    logits = torch.zeros(4, 6, 20)
    assert float(next_token_loss(logits, ids)) == pytest.approx(np.log(20), rel=1e-5)  # float32 logsumexp


def test_generate_greedy_matches_argmax_and_keeps_prefix():
    m = _model()
    prefix = torch.tensor([[1, 5, 6]])
    out = generate(m, prefix, 3, temperature=0)
    assert out[:, :3].tolist() == prefix.tolist()
    with torch.no_grad():
        assert out[0, 3] == m(prefix)[0, -1].argmax()


def test_task_data_per_class():
    d = make_task_data("sentiment", 7, np.random.default_rng(0), per_class=True)
    assert torch.bincount(d.labels).tolist() == [7, 7]


def test_train_lm_leaves_no_gradients():
    m = _model(2)
    rng = np.random.default_rng(0)
    train_lm(m, lambda s: pretraining_batch(rng, toy_vocab(), 4), 2, warmup=1)
    assert all(p.grad is None for p in m.parameters())


def test_model_runs_on_the_device_of_its_inputs():
    """A meta-device model and meta inputs give meta outputs: no tensor is made on the CPU inside the
    forward pass (a hidden CPU tensor would raise here, as it would on a GPU)."""
    m = TinyLM(TinyLMConfig(vocab_size=len(toy_vocab()), d_model=16, d_ff=32, n_heads=2)).to("meta")
    ids = torch.randint(3, 20, (2, 7)).to("meta")
    out = m(ids, embed_offset=torch.zeros(2, 7, 16, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 7, len(toy_vocab()))
    last = last_token_logits(m, ids, torch.tensor([7, 3]).to("meta"))
    assert last.device.type == "meta"


def test_tie_convention_relabels_only_mixed_sentences():
    neg = make_task_data("sentiment", 300, np.random.default_rng(5))
    pos = make_task_data("sentiment", 300, np.random.default_rng(5), ties="positive")
    assert neg.sentences == pos.sentences  # without per-class sampling, the same sentences
    n_ties = 0
    for words, a, b in zip(neg.sentences, neg.labels.tolist(), pos.labels.tolist()):
        n_pos, n_neg = sum(w in POSITIVE for w in words), sum(w in NEGATIVE for w in words)
        assert a == int(n_pos > n_neg) and b == int(n_pos >= n_neg)
        n_ties += n_pos == n_neg
    assert n_ties > 30  # the downstream distribution has mixed sentences to relabel
    split = few_shot_split("sentiment", 8, 20, seed=5, ties="positive")
    assert torch.bincount(split["train"].labels).tolist() == [8, 8]
    with pytest.raises(ValueError, match="ties"):
        make_task_data("sentiment", 3, np.random.default_rng(0), ties="maybe")


def test_logits_at_equals_the_full_forward_at_those_positions():
    m = _model(3)
    ids = torch.randint(3, 50, (4, 11))
    pos = torch.tensor([10, 0, 5, 7])
    off = 0.1 * torch.randn(4, 11, 32)
    with torch.no_grad():
        full = m(ids, embed_offset=off)[torch.arange(4), pos]
        fast = m.logits_at(ids, pos, embed_offset=off)
    assert torch.allclose(full, fast, atol=1e-5)
    meta = TinyLM(m.cfg).to("meta")
    assert meta.logits_at(ids.to("meta"), pos.to("meta")).device.type == "meta"
