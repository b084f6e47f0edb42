"""The spiking forecaster of the TS-LIF paper (SeqSNN's ``ISNNGRU2d`` + ``vsts`` runner), its
non-spiking reference, simple forecasters, and the training loop.

The pipeline, channel-independent (every channel of every window is one sequence):

1. instance normalisation of each window and channel (:func:`instance_normalize`);
2. a spike encoder: a width-3 convolution over time from 1 to ``H`` channels, batch
   normalisation, and a threshold (SeqSNN's ``ConvEncoder``, whose LIF runs a single step from
   rest, which is a threshold at ``theta = 1``);
3. spiking "GRU" gates computed from the current input only (the official cell re-zeroes its hidden
   state at every call): ``r, z, n`` spikes and ``I = (1 - z) * n``;
4. the neuron under test, run over the window: the *only* recurrence of the model;
5. the neuron's output at the last position, a linear head to ``horizon`` values, and the window's
   mean and scale put back.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import Tensor, nn

from .surrogate import atan_spike

EPS = 1e-5


def instance_normalize(x: Tensor, eps: float = EPS) -> tuple[Tensor, Tensor, Tensor]:
    """Normalise each window and channel of ``x`` ``(B, L, C)`` over time: ``(x - mean) / sqrt(var + eps)``.

    Returns the normalised ``x`` and the ``mean`` and ``std`` ``(B, 1, C)`` (population variance, as
    the official runner).
    """
    mean = x.mean(dim=1, keepdim=True)
    std = torch.sqrt(x.var(dim=1, keepdim=True, unbiased=False) + eps)
    return (x - mean) / std, mean, std


def drop_inputs(z: Tensor, ratio: float, generator: torch.Generator) -> Tensor:
    """Set ``int(ratio * z.numel())`` (truncated) entries of ``z``, chosen uniformly without replacement, to 0.

    Applied to normalised windows, a zero is the window's mean: the official code's
    ``introduce_missing_values``. ``generator`` is a CPU generator (the indices move to ``z``'s device).
    """
    n = int(ratio * z.numel())
    if n == 0:
        return z
    idx = torch.randperm(z.numel(), generator=generator)[:n].to(z.device)
    out = z.clone().reshape(-1)
    out[idx] = 0.0
    return out.reshape(z.shape)


class SpikeEncoder(nn.Module):
    """Conv(1 -> H, width 3, zero padding) over time, BatchNorm, spikes at ``theta``.

    ``forward(z)``: ``z`` ``(N, L)`` normalised sequences -> spikes ``(L, N, H)`` (time first). The
    convolution is computed as a matrix product on the three shifted copies of the sequence, in the
    time-first layout the neurons use (the same map as ``nn.Conv1d(1, H, 3, padding=1)``).
    """

    def __init__(self, hidden: int, kernel: int = 3, theta: float = 1.0) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, hidden, kernel, padding=kernel // 2)
        self.norm = nn.BatchNorm1d(hidden)
        self.theta = theta

    def forward(self, z: Tensor) -> Tensor:
        k = self.conv.kernel_size[0]
        zt = nn.functional.pad(z.t(), (0, 0, k // 2, k // 2))                   # (L + k - 1, N)
        taps = torch.stack([zt[j:j + z.shape[1]] for j in range(k)], dim=-1)   # (L, N, k)
        h = taps @ self.conv.weight[:, 0, :].t() + self.conv.bias              # (L, N, H)
        h = self.norm(h.reshape(-1, h.shape[-1])).reshape(h.shape)
        return atan_spike(h, self.theta)


class SpikingGates(nn.Module):
    """The spiking GRU cell of SeqSNN with a hidden state that is zero at every call.

    With ``h = 0`` the cell reduces to ``r = S(W_r x + b_r)``, ``z = S(W_z x + b_z)``,
    ``n = S(W_n x + b_n + r * c_n)`` (``c_n`` the hidden-to-hidden bias) and ``I = (1 - z) * n``,
    with ``S`` the spike function: the gates see only the current input. ``forward``:
    spikes ``(L, N, H)`` -> binary currents ``(L, N, H)``.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, 3 * hidden)
        self.c_n = nn.Parameter(torch.empty(hidden).uniform_(-hidden ** -0.5, hidden ** -0.5))

    def forward(self, x: Tensor) -> Tensor:
        a_r, a_z, a_n = self.linear(x).chunk(3, dim=-1)
        r = atan_spike(a_r)
        z = atan_spike(a_z)
        n = atan_spike(torch.addcmul(a_n, r, self.c_n))
        return torch.addcmul(n, z, n, value=-1.0)                              # (1 - z) n


class SpikeForecaster(nn.Module):
    """The spiking forecaster with a swappable neuron: ``(B, L, C)`` windows -> ``(B, horizon, C)``.

    The shared layers (encoder, gates, head) are built before the neuron, so for one torch seed
    they start identical whatever the neuron. ``make_neuron(hidden)`` returns a
    :class:`~iclr25.snn.neurons.Neuron`; ``recurrence="gru"`` instead replaces the gates and the
    neuron by a (non-spiking) ``nn.GRU`` on the same encoder spikes, the reference.
    """

    def __init__(self, make_neuron: Callable[[int], nn.Module] | None, hidden: int, horizon: int,
                 recurrence: str = "spiking") -> None:
        super().__init__()
        self.encoder = SpikeEncoder(hidden)
        self.head = nn.Linear(hidden, horizon)
        self.recurrence = recurrence
        if recurrence == "spiking":
            self.gates = SpikingGates(hidden)
            assert make_neuron is not None, "a spiking forecaster needs a neuron"
            self.neuron = make_neuron(hidden)
        elif recurrence == "gru":
            self.gru = nn.GRU(hidden, hidden)
        else:
            raise ValueError(f"recurrence must be 'spiking' or 'gru', not {recurrence!r}")

    def features(self, z: Tensor, memory: int | None = None) -> Tensor:
        """Normalised sequences ``(N, L)`` -> the recurrence's output at the last position ``(N, H)``.

        ``memory=k`` runs the recurrence (the neuron, or the GRU) from rest on only the last ``k``
        positions of its input (the encoder and the gates still see the whole window): the memory
        horizon probe. ``None`` (the default) runs it on all ``L`` positions."""
        spikes = self.encoder(z)
        if self.recurrence == "gru":
            return self.gru(spikes[-memory:] if memory else spikes)[1][0]
        current = self.gates(spikes)
        return self.neuron(current[-memory:] if memory else current, last_only=True)

    def forward(self, x: Tensor, missing: float = 0.0, generator: torch.Generator | None = None,
                memory: int | None = None) -> Tensor:
        B, L, C = x.shape
        z, mean, std = instance_normalize(x)
        if missing > 0:
            z = drop_inputs(z, missing, generator)
        seqs = z.permute(0, 2, 1).reshape(B * C, L)
        out = self.head(self.features(seqs, memory)).reshape(B, C, -1).permute(0, 2, 1)
        return out * std + mean


@dataclass
class FitResult:
    """What :func:`fit` returns: per-epoch validation MSE, the best epoch (its weights are loaded)."""

    val_mse: list[float] = field(default_factory=list)
    train_mse: list[float] = field(default_factory=list)
    best_epoch: int = -1
    snapshot: dict | None = None

    @property
    def best_val(self) -> float:
        """The lowest validation MSE over the epochs."""
        return self.val_mse[self.best_epoch]


@torch.no_grad()
def predict(model: nn.Module, X: Tensor, batch_size: int = 1024, missing: float = 0.0, seed: int = 0,
            memory: int | None = None) -> Tensor:
    """Forecasts ``(N, horizon, C)`` for windows ``X`` ``(N, L, C)`` in evaluation mode (missing inputs,
    if any, drawn from a generator seeded with ``seed``; ``memory=k`` runs the recurrence on only the
    last ``k`` positions, see :meth:`SpikeForecaster.features`)."""
    was = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    kw = {"memory": memory} if memory else {}
    out = torch.cat([model(X[i:i + batch_size], missing, g, **kw) for i in range(0, len(X), batch_size)])
    model.train(was)
    return out


def fit(model: nn.Module, X: Tensor, Y: Tensor, X_val: Tensor, Y_val: Tensor, *, lr: float, epochs: int,
        batch_size: int, seed: int, missing: float = 0.0, after_epoch: Callable[[nn.Module], None] | None = None,
        patience: int | None = None, snapshot_patience: int | None = None) -> FitResult:
    """Train with Adam on the MSE of the forecasts (data scale), keep the weights of the best epoch on
    the validation MSE. ``patience=None`` runs every epoch; otherwise training stops once the
    validation MSE has not improved for ``patience`` epochs (at most ``epochs`` in all).

    ``snapshot_patience=q`` (below ``patience``) also keeps what a run with patience ``q`` would have
    returned: training is the same up to the epoch where that run stops, so ``result.snapshot`` holds
    its number of epochs, best epoch and best weights (``None`` if patience ``q`` never fired).

    ``X`` ``(N, L, C)``, ``Y`` ``(N, horizon, C)`` on the model's device. Shuffling and missing-input
    masks come from a generator seeded with ``seed``; validation masks from ``seed + 1``.
    """
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    result, best_state = FitResult(), None
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(X), generator=g).to(X.device)
        total = 0.0
        for i in range(0, len(X), batch_size):
            idx = perm[i:i + batch_size]
            loss = torch.mean((model(X[idx], missing, g) - Y[idx]) ** 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        if after_epoch is not None:
            after_epoch(model)
        val = float(torch.mean((predict(model, X_val, missing=missing, seed=seed + 1) - Y_val) ** 2))
        result.train_mse.append(total / len(X))
        result.val_mse.append(val if np.isfinite(val) else float("inf"))
        if result.val_mse[-1] <= min(result.val_mse):
            result.best_epoch, best_state = epoch, copy.deepcopy(model.state_dict())
        if (snapshot_patience is not None and result.snapshot is None
                and epoch - result.best_epoch >= snapshot_patience):
            result.snapshot = dict(epochs_run=epoch + 1, best_epoch=result.best_epoch, state=copy.deepcopy(best_state))
        if patience is not None and epoch - result.best_epoch >= patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    return result


def seasonal_naive(X: np.ndarray, horizon: int, period: int) -> np.ndarray:
    """Repeat the last ``period`` inputs: ``y[t + k] = x[t + k - period * ceil(k / period)]``.

    ``X`` ``(N, L, C)`` with ``L >= period`` -> ``(N, horizon, C)``.
    """
    k = np.arange(1, horizon + 1)
    lag = period * np.ceil(k / period).astype(int)
    return X[:, X.shape[1] - 1 + k - lag]


def ridge_forecaster(X: np.ndarray, Y: np.ndarray, alpha: float,
                     last: int | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """A linear forecaster on instance-normalised windows, channel-independent, fitted by ridge
    regression (``sklearn.linear_model.Ridge``).

    ``X`` ``(N, L, C)``, ``Y`` ``(N, horizon, C)`` -> a function mapping windows ``(M, L, C)`` to
    forecasts ``(M, horizon, C)``. ``last=k`` regresses on only the last ``k`` normalised inputs
    (normalised with the whole window's mean and deviation, as the spiking forecaster is): the
    reference for the memory-horizon probe.
    """
    from sklearn.linear_model import Ridge

    def norm(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mean = A.mean(axis=1, keepdims=True)
        std = np.sqrt(A.var(axis=1, keepdims=True) + EPS)
        return (A - mean) / std, mean, std

    Z, mean, std = norm(X)
    T = (Y - mean) / std
    flat = lambda A: A.transpose(0, 2, 1).reshape(-1, A.shape[1])          # noqa: E731 - (N C, L)
    tail = (lambda A: A[:, -last:]) if last else (lambda A: A)              # noqa: E731
    reg = Ridge(alpha=alpha).fit(flat(tail(Z)), flat(T))

    def forecast(Xn: np.ndarray) -> np.ndarray:
        Zn, m, s = norm(Xn)
        out = reg.predict(flat(tail(Zn))).reshape(len(Xn), Xn.shape[2], -1).transpose(0, 2, 1)
        return out * s + m

    return forecast
