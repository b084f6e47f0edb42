"""nn.Linear helpers: the hook records exactly the layer's input and is removed, in-place pruning and
quantization equal the tensor functions, sequential pruning feeds later layers the pruned outputs."""

import pytest
import torch
from torch import nn

from iclr25.compress import (apply_mask_, collect_inputs, find_linears, gptq_quantize, input_hessian,
                             magnitude_mask, prune_layers_, prune_linear_, quantize_linear_,
                             rtn_quantize, sparsegpt_prune, wanda_mask)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def mlp(seed=0, device="cpu"):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(),
                         nn.Linear(16, 8)).to(device)


def calib(device="cpu"):
    return torch.randn(4, 10, 16, generator=torch.Generator().manual_seed(1)).to(device)  # (batch, seq, in)


def test_find_linears_in_order_with_skip():
    model = mlp()
    assert list(find_linears(model)) == ["0", "2", "4"]
    assert list(find_linears(model, skip=("4",))) == ["0", "2"]


def test_collect_inputs_records_the_layer_input_and_removes_hooks():
    model, x = mlp(), calib()
    X = collect_inputs(model[2], lambda: model(x))
    assert X.shape == (40, 32)
    torch.testing.assert_close(X, torch.relu(model[0](x)).reshape(40, 32))
    assert not model[2]._forward_hooks
    both = collect_inputs({"a": model[0], "c": model[4]}, lambda: (model(x), model(x[:1])))
    assert both["a"].shape == (50, 16) and both["c"].shape == (50, 16)  # two calls concatenate
    torch.testing.assert_close(both["a"][:40], x.reshape(40, 16))
    assert not X.requires_grad


def test_collect_inputs_errors_leave_no_hooks():
    model, x = mlp(), calib()
    with pytest.raises(RuntimeError):
        collect_inputs(model[0], lambda: model(torch.randn(3, 5)))  # wrong width
    assert not model[0]._forward_hooks
    with pytest.raises(ValueError, match="never called"):
        collect_inputs(model[4], lambda: model[0](x))


@pytest.mark.parametrize("method", ["magnitude", "wanda", "sparsegpt"])
@pytest.mark.parametrize("pattern,s", [(None, 0.5), ("2:4", 0.5), (("c4n", 3), None)])
def test_prune_linear_equals_the_tensor_functions(method, pattern, s):
    model, x = mlp(), calib()
    layer = model[2]
    W, b = layer.weight.detach().clone(), layer.bias.detach().clone()
    X = collect_inputs(layer, lambda: model(x))
    mask = prune_linear_(layer, method, s, pattern, X=X)
    if method == "magnitude":
        want_mask, want_W = magnitude_mask(W, s, pattern), None
    elif method == "wanda":
        want_mask, want_W = wanda_mask(W, X, s, pattern), None
    else:
        want_W, want_mask = sparsegpt_prune(W, input_hessian(X), s, pattern)
    assert torch.equal(mask, want_mask)
    torch.testing.assert_close(layer.weight.detach(), W * mask if want_W is None else want_W)
    assert torch.equal(layer.bias.detach(), b)  # biases are never touched
    assert not layer.weight.requires_grad or layer.weight.grad is None


def test_prune_linear_needs_data_and_a_known_method():
    layer = mlp()[0]
    with pytest.raises(ValueError, match="calibration"):
        prune_linear_(layer, "wanda", 0.5)
    with pytest.raises(ValueError, match="unknown"):
        prune_linear_(layer, "random", 0.5)


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_sequential_pruning_sees_the_pruned_earlier_layers(method):
    model, x = mlp(), calib()
    ref = mlp()
    masks = prune_layers_(find_linears(model), method, 0.5, run=lambda: model(x))
    # by hand: prune layer 0 on dense inputs, then layer 2 on the outputs of the pruned layer 0, ...
    for name in ["0", "2", "4"]:
        layer = ref[int(name)]
        X = collect_inputs(layer, lambda: ref(x))
        assert torch.equal(prune_linear_(layer, method, 0.5, X=X), masks[name])
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b)
    # one-shot: every layer calibrated on the dense model's inputs; differs from sequential
    dense = mlp()
    inputs = collect_inputs(find_linears(dense), lambda: dense(x))
    other = mlp()
    oneshot = prune_layers_(find_linears(other), method, 0.5, run=lambda: other(x), sequential=False)
    assert torch.equal(oneshot["4"], prune_linear_(mlp()[4], method, 0.5, X=inputs["4"]))
    assert not torch.equal(oneshot["4"], masks["4"])


def test_mixed_patterns_per_layer():
    model = mlp()
    patterns = {"0": ("c4n", 1), "2": ("c4n", 3), "4": "2:4"}
    masks = prune_layers_(find_linears(model), "magnitude", None, patterns)
    for name, n in [("0", 1), ("2", 3), ("4", 2)]:
        m = masks[name]
        assert ((~m).reshape(m.shape[0], -1, 4).sum(-1) == n).all()
        assert torch.equal(model[int(name)].weight == 0, ~m)
    with pytest.raises(ValueError, match="run="):
        prune_layers_(find_linears(model), "wanda", 0.5)


def test_apply_mask_keeps_dtype():
    layer = nn.Linear(8, 4).to(torch.bfloat16)
    mask = magnitude_mask(layer.weight.detach(), 0.5)
    apply_mask_(layer, mask)
    assert layer.weight.dtype == torch.bfloat16 and torch.equal(layer.weight == 0, ~mask)


@pytest.mark.parametrize("group_size,symmetric", [(None, False), (8, True)])
def test_quantize_linear(group_size, symmetric):
    model, x = mlp(), calib()
    layer = model[2]
    W = layer.weight.detach().clone()
    grid = quantize_linear_(layer, 3, group_size, symmetric)
    assert torch.equal(layer.weight.detach(), rtn_quantize(W, 3, group_size, symmetric))
    assert grid.bits == 3
    layer.weight.data.copy_(W)
    X = collect_inputs(layer, lambda: model(x))
    quantize_linear_(layer, 3, group_size, symmetric, method="gptq", X=X)
    want, _ = gptq_quantize(W, input_hessian(X), 3, group_size, symmetric)
    torch.testing.assert_close(layer.weight.detach(), want)
    with pytest.raises(ValueError):
        quantize_linear_(layer, 3, method="gptq")


@pytest.mark.parametrize("device", DEVICES)
def test_layers_on_device(device):
    model, x = mlp(device=device), calib(device)
    masks = prune_layers_(find_linears(model), "sparsegpt", 0.5, "2:4", run=lambda: model(x))
    assert all(m.device == x.device for m in masks.values())
    assert all(p.device == x.device for p in model.parameters())
    grid = quantize_linear_(model[0], 4, 8)
    assert grid.scale.device == x.device
