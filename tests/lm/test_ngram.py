"""Witten-Bell n-gram baseline: probabilities sum to one, orders help on structured text, unigram by hand."""

import math

import numpy as np
import pytest

from iclr25.lm.ngram import witten_bell_bits


def test_unigram_matches_the_formula_by_hand() -> None:
    train = [0, 0, 1]                      # c(0) = 2, c(1) = 1, T = 2, N = 3, vocab 4
    bits = witten_bell_bits(train, [0, 0, 3], orders=[1], vocab=4)[1]
    p0 = (2 + 2 * 0.25) / 5
    p3 = (0 + 2 * 0.25) / 5
    assert bits == pytest.approx(-(math.log2(p0) + math.log2(p3)) / 2)


def test_every_order_is_a_normalised_distribution() -> None:
    rng = np.random.default_rng(0)
    train = rng.integers(0, 5, 400)
    ctx = [1, 3, 2, 4]
    for k in (1, 2, 3, 4):
        total = sum(2.0 ** -(2 * witten_bell_bits(train, ctx[-2:] + [w], [k], vocab=5)[k]
                             - witten_bell_bits(train, ctx[-2:], [k], vocab=5)[k]) for w in range(5))
        # bits are means over targets: 2 * mean(2 targets) - 1 target = bits of the last target
        assert total == pytest.approx(1.0, abs=1e-9)


def test_higher_orders_learn_a_periodic_stream() -> None:
    train = np.tile(np.arange(7), 200)
    bits = witten_bell_bits(train, np.tile(np.arange(7), 10), orders=[1, 2, 3])
    assert bits[1] > 2.5 and bits[2] < 0.2 and bits[3] <= bits[2] + 1e-12
    with pytest.raises(ValueError):
        witten_bell_bits(train, train, orders=[8])


def test_scored_flags_average_only_the_flagged_tokens() -> None:
    rng = np.random.default_rng(0)
    train, stream = rng.integers(0, 8, 500), rng.integers(0, 8, 60)
    full = witten_bell_bits(train, stream, [2], vocab=8)[2]
    flags = np.zeros(59, dtype=bool)
    flags[30:] = True
    part = witten_bell_bits(train, stream, [2], vocab=8, scored=flags)[2]
    # the tail's score is the score of the tail's own tokens with the same contexts
    tail = witten_bell_bits(train, stream[30:], [2], vocab=8)[2]   # flag i is token i + 1
    assert abs(part - tail) < 1e-12 and abs(part - full) > 1e-6
    with pytest.raises(ValueError):
        witten_bell_bits(train, stream, [2], vocab=8, scored=np.zeros(59, dtype=bool))
