"""The tiny Mamba: equal to transformers' MambaForCausalLM, causal, recurrent decoding == forward."""

import pytest
import torch

from iclr25.ssm import MambaConfig, TinyMamba


def _model(seed: int = 0, **kw) -> TinyMamba:
    torch.manual_seed(seed)
    m = TinyMamba(MambaConfig(d_model=32, n_layers=3, d_state=4, **kw)).eval()
    with torch.no_grad():  # move away from the initialisation so every parameter matters
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def test_matches_transformers_mamba() -> None:
    transformers = pytest.importorskip("transformers")
    m = _model()
    cfg = m.cfg
    hf_cfg = transformers.MambaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model,
                                      state_size=cfg.d_state, num_hidden_layers=cfg.n_layers,
                                      expand=cfg.expand, conv_kernel=cfg.d_conv, time_step_rank=cfg.dt_rank,
                                      use_bias=False, use_conv_bias=True, layer_norm_epsilon=cfg.eps,
                                      tie_word_embeddings=True)
    hf = transformers.MambaForCausalLM(hf_cfg).eval()
    state = {f"backbone.{k}": v for k, v in m.state_dict().items()}
    state["lm_head.weight"] = m.embeddings.weight
    hf.load_state_dict(state, strict=True)
    ids = torch.randint(0, 256, (2, 30), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(m(ids), hf(ids).logits, atol=1e-5)


def test_scan_modes_give_the_same_model() -> None:
    m = _model()
    ids = torch.randint(0, 256, (3, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        a = m.set_scan("sequential")(ids)
        b = m.set_scan("chunked")(ids)
    assert torch.allclose(a, b, atol=1e-5)
    with pytest.raises(ValueError):
        m.set_scan("fft")


def test_recurrent_decoding_equals_the_forward_pass() -> None:
    m = _model()
    ids = torch.randint(0, 256, (2, 15), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = m(ids)
        cache = m.empty_cache(2)
        for t in range(15):
            logits, cache = m.step(ids[:, t], cache)
            assert torch.allclose(logits, full[:, t], atol=1e-5)


def test_causal() -> None:
    m = _model()
    ids = torch.randint(0, 256, (1, 20), generator=torch.Generator().manual_seed(4))
    other = ids.clone()
    other[:, 12:] = (other[:, 12:] + 7) % 256
    with torch.no_grad():
        a, b = m(ids), m(other)
    assert torch.allclose(a[:, :12], b[:, :12], atol=1e-6) and not torch.allclose(a[:, 12:], b[:, 12:])


def test_prunable_layers_have_inputs_divisible_by_four() -> None:
    m = _model()
    layers = m.prunable()
    assert list(layers) == [f"{i}.{n}" for i in range(3) for n in ("in_proj", "x_proj", "out_proj")]
    assert all(layer.in_features % 4 == 0 for layer in layers.values())
    assert m.cfg.dt_rank == 2 and m.cfg.d_inner == 64
