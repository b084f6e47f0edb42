"""The composition harness and the paper's metrics."""

import numpy as np
import pytest
import torch

from iclr25.interventions import (Intervention, compose, compressor, order_free_error,
                                  order_sensitivity, prune_model_, quantize_model_, same_weights)
from iclr25.lm import load_world_lm, transformer_linears, world_batch


def test_metrics_as_the_paper_defines_them():
    assert order_free_error(0.3, 0.9) == pytest.approx(0.1)
    assert order_free_error(0.9, 0.3) == pytest.approx(0.1)
    assert order_free_error(0.3, 0.6, higher_is_better=False) == pytest.approx(0.3)
    assert order_sensitivity(0.3, 0.9) == order_sensitivity(0.9, 0.3) == pytest.approx(0.6)
    assert order_sensitivity(0.5, 0.5) == 0.0


@pytest.fixture(scope="module")
def lm():
    return load_world_lm("tiny")


def test_data_free_interventions_on_disjoint_blocks_commute(lm):
    base, world = lm
    from iclr25.lm import load_world_lm as _l
    small, _ = _l("small")
    a = Intervention("prune1", "compress", lambda m: prune_model_(m, "magnitude", 0.5, layers=[1]))
    b = Intervention("rtn0", "compress", lambda m: quantize_model_(m, 3, layers=[0]))
    ab = compose(small, [a, b], recompress=False)
    ba = compose(small, [b, a], recompress=False)
    assert same_weights(ab, ba) and not same_weights(ab, small)
    w_ab, w_ba = (float(x.blocks[1].mlp[2].weight.detach().sum()) for x in (ab, ba))
    assert order_sensitivity(w_ab, w_ba) == 0.0


def test_compose_copies_and_recompresses_when_compression_comes_first(lm):
    base, world = lm
    calls = []
    c = Intervention("c", "compress", lambda m: calls.append("c"))
    e = Intervention("e", "edit", lambda m: calls.append("e"))
    out = compose(base, [c, e])
    assert calls == ["c", "e", "c"] and out is not base
    calls.clear()
    compose(base, [e, c])
    assert calls == ["e", "c"]
    calls.clear()
    compose(base, [c])
    assert calls == ["c"]
    with pytest.raises(ValueError):
        Intervention("x", "prune", lambda m: None)


def test_compressors_reach_their_sparsity_and_grid(lm):
    base, world = lm
    ids, _ = world_batch(world, np.random.default_rng(0), 8)
    for method in ("magnitude", "wanda"):
        m = compose(base, [compressor(method, 0.5, ids)])
        for lin in transformer_linears(m).values():
            zeros = (lin.weight == 0).sum(1)
            assert torch.all(zeros == lin.in_features // 2)
        assert torch.equal(m.tok.weight, base.tok.weight)         # embeddings untouched
    m = compose(base, [compressor("rtn", 3)])
    for lin in transformer_linears(m).values():
        groups = lin.weight.reshape(lin.out_features, -1, min(32, lin.in_features))
        assert all(len(torch.unique(gr)) <= 8 for gr in groups.reshape(-1, groups.shape[-1]))


def test_wanda_equals_magnitude_when_input_norms_are_equal():
    from iclr25.compress import magnitude_mask, wanda_mask
    g = torch.Generator().manual_seed(0)
    W = torch.randn(6, 16, generator=g)
    X = torch.sign(torch.randn(40, 16, generator=g))           # every column has norm sqrt(40)
    assert torch.equal(wanda_mask(W, X, 0.5), magnitude_mask(W, 0.5))


def test_requantization_erases_changes_below_half_a_step():
    from iclr25.compress import quantization_step, rtn_quantize
    g = torch.Generator().manual_seed(1)
    W = torch.randn(8, 32, generator=g)
    Q = rtn_quantize(W, 4, 32)
    step = quantization_step(Q, 4, 32)
    D = (torch.rand(W.shape, generator=g) - 0.5) * 0.8 * step   # |D| < 0.4 step
    # keep the group extremes fixed so the grid does not move
    D[Q == Q.amax(1, keepdim=True)] = 0
    D[Q == Q.amin(1, keepdim=True)] = 0
    assert torch.allclose(rtn_quantize(Q + D, 4, 32), Q, atol=1e-6)


def test_symmetric_quantization_is_honoured(lm):
    base, world = lm
    a = compose(base, [Intervention("s", "compress", lambda m: quantize_model_(m, 3, symmetric=True))])
    b = compose(base, [Intervention("a", "compress", lambda m: quantize_model_(m, 3, symmetric=False))])
    assert not same_weights(a, b)
    for lin in transformer_linears(a).values():               # symmetric: a zero point of 0, so 0 stays 0
        groups = lin.weight.detach().reshape(-1, min(32, lin.in_features))
        step = groups.abs().amax(1, keepdim=True) / 3          # max|w| / (2^(b-1) - 1)
        codes = groups / step.clamp_min(1e-12)
        assert torch.allclose(codes, codes.round(), atol=1e-3)


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_calibration_with_a_mask_ignores_padding(lm, method):
    """Wanda and SparseGPT calibrated with the pad mask equal the same on documents whose padding
    positions hold something else, and differ from the unmasked calibration on those documents."""
    base, world = lm
    ids, _ = world_batch(world, np.random.default_rng(0), 8)
    mask = ids != world.vocab.pad_id
    assert (~mask).any()
    other = ids.clone()
    other[~mask] = int(ids[0, 1])                               # a real token where padding was
    a = compose(base, [compressor(method, 0.5, ids, calib_mask=mask)])
    b = compose(base, [compressor(method, 0.5, other, calib_mask=mask)])
    c = compose(base, [compressor(method, 0.5, other)])         # unmasked: the filler enters the statistics
    assert same_weights(a, b) and not same_weights(a, c)
    for lin in transformer_linears(a).values():
        assert torch.all((lin.weight == 0).sum(1) == lin.in_features // 2)
