"""Tests of iclr25.lm.data / evaluate: log-prob identities, padding invariance, generation, MC."""

import numpy as np
import pytest
import torch

from iclr25.lm import TinyLM, TinyLMConfig, next_token_loss
from iclr25.lm.data import Example, MCItem, encode_examples, token_position
from iclr25.lm.evaluate import (answer_nll, generate_ids, generate_responses, mc_accuracy,
                                mc_logprobs, next_token_accuracy, next_token_logprobs,
                                next_token_margin, perplexity, score_examples, sequence_logprob,
                                token_logprobs)
from iclr25.lm.splits import recipe_examples, refusal_examples, sentiment_examples
from iclr25.lm.world import build_world

WORLD = build_world(0)
VOCAB = WORLD.vocab


def _model(seed=0):
    torch.manual_seed(seed)
    return TinyLM(TinyLMConfig(vocab_size=len(VOCAB), d_model=32, d_ff=64, max_len=32)).eval()


def _examples():
    ex = refusal_examples(WORLD, WORLD.toxins[:3], (0, 2)) + recipe_examples(WORLD, WORLD.dishes[:2], (1,))
    return ex + sentiment_examples(4, np.random.default_rng(0))


def test_encoding_masks_exactly_the_response():
    ex = _examples()
    b = encode_examples(VOCAB, ex)
    for i, e in enumerate(ex):
        L = int(b.lengths[i])
        assert VOCAB.decode(b.ids[i, :L].tolist()).split() == ["<bos>", *e.prompt, *e.response]
        assert int(b.prompt_lengths[i]) == 1 + len(e.prompt)
        assert b.mask[i].sum() == len(e.response)
        assert b.mask[i, : 1 + len(e.prompt)].sum() == 0 and b.mask[i, L:].sum() == 0
    assert token_position(("bamo", "lives", "in"), "bamo") == 1
    with pytest.raises(ValueError):
        token_position(("a",), "b")


def test_logprobs_sum_to_the_model_loss():
    m = _model()
    b = encode_examples(VOCAB, _examples())
    lp = sequence_logprob(m, b)
    loss = next_token_loss(m(b.ids), b.ids, b.mask)
    assert torch.allclose(-lp.sum() / b.mask.sum(), loss, atol=1e-6)
    assert torch.allclose(answer_nll(m, b), loss, atol=1e-6)
    assert torch.allclose(sequence_logprob(m, b, mean=True), lp / b.mask.sum(1), atol=1e-6)
    # the log-probs of all tokens of one sequence sum to the log joint probability, via the chain rule
    full = token_logprobs(m, b.ids[:1, : int(b.lengths[0])])
    probs = torch.softmax(m(b.ids[:1, : int(b.lengths[0])]), -1)
    manual = sum(torch.log(probs[0, t - 1, b.ids[0, t]]) for t in range(1, int(b.lengths[0])))
    assert torch.allclose(full.sum(), manual, atol=1e-5)


def test_logprobs_do_not_depend_on_padding_or_batching():
    m = _model(1)
    ex = _examples()
    together = score_examples(m, VOCAB, ex)
    alone = torch.stack([sequence_logprob(m, encode_examples(VOCAB, [e]))[0] for e in ex])
    assert torch.allclose(together, alone.detach(), atol=1e-5)
    assert torch.allclose(score_examples(m, VOCAB, ex, batch_size=3), together, atol=1e-6)


def test_sequence_logprob_is_differentiable():
    m = _model()
    b = encode_examples(VOCAB, _examples()[:3])
    sequence_logprob(m, b).sum().backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)


def test_next_token_accuracy_margin_and_mc_agree():
    m = _model(2)
    prompts = [e.prompt for e in _examples()]
    lp = next_token_logprobs(m, VOCAB, prompts)
    assert torch.allclose(lp.exp().sum(1), torch.ones(len(prompts)), atol=1e-5)
    top = [VOCAB.words[i] for i in lp.argmax(1).tolist()]
    right = [Example(p, (w,)) for p, w in zip(prompts, top)]
    second = [VOCAB.words[i] for i in lp.topk(2).indices[:, 1].tolist()]
    wrong = [Example(p, (w,)) for p, w in zip(prompts, second)]
    assert next_token_accuracy(m, VOCAB, right) == 1.0 and next_token_accuracy(m, VOCAB, wrong) == 0.0
    assert (next_token_margin(m, VOCAB, right) > 0).all() and (next_token_margin(m, VOCAB, wrong) < 0).all()
    items = [MCItem(p, (s, t, "cat", "dog"), 1) for p, t, s in zip(prompts, top, second)
             if t not in ("cat", "dog") and s not in ("cat", "dog")]
    assert mc_accuracy(m, VOCAB, items) == 1.0
    scores = mc_logprobs(m, VOCAB, items)
    assert torch.allclose(scores[:, 1], lp[[i for i, (t, s) in enumerate(zip(top, second))
                                            if t not in ("cat", "dog") and s not in ("cat", "dog")],
                                           [VOCAB.id(it.choices[1]) for it in items]])


def test_greedy_generation_equals_stepwise_argmax_and_is_batch_invariant():
    m = _model(3)
    prompts = [e.prompt for e in _examples()]
    batched = generate_responses(m, VOCAB, prompts, max_new=6)
    for p, got in zip(prompts, batched):
        ids = torch.tensor([VOCAB.encode(("<bos>", *p))])
        words = []
        for _ in range(6):
            nxt = int(m(ids)[0, -1].argmax())
            if nxt == VOCAB.eos_id:
                break
            words.append(VOCAB.words[nxt])
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
        assert tuple(words) == got


def test_sampling_is_seeded_and_low_temperature_is_greedy():
    m = _model(4)
    prompts = [VOCAB.encode(("<bos>", *e.prompt)) for e in _examples()]
    a = generate_ids(m, prompts, max_new=5, temperature=1.0, generator=torch.Generator().manual_seed(7))
    b = generate_ids(m, prompts, max_new=5, temperature=1.0, generator=torch.Generator().manual_seed(7))
    c = generate_ids(m, prompts, max_new=5, temperature=1.0, generator=torch.Generator().manual_seed(8))
    assert a == b and a != c
    cold = generate_ids(m, prompts, max_new=5, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    assert cold == generate_ids(m, prompts, max_new=5)
    with pytest.raises(ValueError):
        generate_ids(m, prompts, temperature=-1)


def test_generation_stops_at_eos_and_at_max_len():
    m = _model(5)
    with torch.no_grad():  # make <eos> the certain next token: every row stops at once
        m.tok.weight[VOCAB.eos_id] *= 0
        m.ln_f.bias.copy_(m.tok.weight[VOCAB.eos_id] * 0)
    long_prompt = [1] + [5] * 30
    out = generate_ids(m, [long_prompt], max_new=10)
    assert len(out[0]) <= 32 - 31


def test_perplexity_is_exp_of_the_mean_token_nll():
    m = _model(6)
    texts = [(WORLD.persons[0], "lives", "in", "paris", "."), ("the", "food", "was", "good", ".")]
    ex = [Example((), t + ("<eos>",)) for t in texts]
    b = encode_examples(VOCAB, ex)
    # relative: a float32 perplexity near 600 moves by ~1e-4 when the kernels sum in another order
    assert perplexity(m, VOCAB, texts) == pytest.approx(float(torch.exp(answer_nll(m, b).detach())), rel=1e-5)
