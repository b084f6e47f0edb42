"""Spiking neurons as recurrences over time: LIF, PLIF, TC-LIF, TS-LIF and its controls.

Every neuron maps an input current ``I`` of shape ``(T, N, H)`` (time, sequences, neurons) to an
output of the same shape, running one step per time position from a resting state (all
membranes zero) at the start of every call, as the official runner resets its neurons per batch.

Each class implements

* ``step(current, state) -> (state, spikes, membranes)``: one time step (``current`` ``(N, H)``);
  ``membranes`` are the potentials *before* the reset, the values the thresholds see;
* ``readout(spikes) -> output``: what the next layer receives (the spikes, or for the
  two-compartment neurons a learned per-neuron mix of both spike trains).

:meth:`Neuron.forward` runs the steps (``last_only=True`` returns only the output at the last
step, what the forecaster reads) and :meth:`Neuron.trace` records every membrane and spike train
for plots and tests. Parameters are those of the official code (TS-LIF: ``TSLIFNode`` of
kkking-kk/TS-LIF) or of the library that defines the baseline (LIF: snnTorch ``Leaky``; PLIF: LIF with
a learned leak, initialised as spikingjelly's ``ParametricLIFNode``; TC-LIF: Zhang et al., AAAI 2024).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .surrogate import atan_spike

State = tuple[Tensor, ...]


class Neuron(nn.Module):
    """Base class: the time loop shared by every neuron (subclasses define the step)."""

    #: Names of the membranes (and of the spike trains) a step returns, in order.
    compartments: tuple[str, ...] = ("soma",)

    def init_state(self, like: Tensor) -> State:
        """The resting state for inputs shaped like ``like`` ``(N, H)``: every membrane zero."""
        return tuple(torch.zeros_like(like) for _ in self.compartments)

    def drive(self, current: Tensor) -> State:
        """The input terms of every step, computed for all steps at once: tensors ``(T, N, H)``."""
        return (current,)

    def step(self, drive: State, state: State) -> tuple[State, State, State]:  # pragma: no cover
        raise NotImplementedError

    def readout(self, spikes: State) -> Tensor:
        """The output of one step from its spike trains (default: the single spike train)."""
        return spikes[0]

    def _steps(self, current: Tensor):
        # unbind: one backward node per input tensor (indexing current[t] would make T of them,
        # each filling a full-size zero gradient)
        return zip(*(d.unbind(0) for d in self.drive(current)))

    def forward(self, current: Tensor, last_only: bool = False) -> Tensor:
        """Run the neuron over ``current`` ``(T, N, H)``.

        Returns the outputs ``(T, N, H)``, or only the last one ``(N, H)`` if ``last_only``.
        """
        state = self.init_state(current[0])
        outputs = []
        spikes: State = ()
        for drive in self._steps(current):
            state, spikes, _ = self.step(drive, state)
            if not last_only:
                outputs.append(self.readout(spikes))
        return self.readout(spikes) if last_only else torch.stack(outputs)

    @torch.no_grad()
    def trace(self, current: Tensor) -> dict[str, Tensor]:
        """Every membrane (before reset), spike train and the output over time, each ``(T, N, H)``.

        Keys: ``U_<compartment>``, ``S_<compartment>`` for each compartment, and ``out``.
        """
        state = self.init_state(current[0])
        rec: dict[str, list[Tensor]] = {}
        for drive in self._steps(current):
            state, spikes, membranes = self.step(drive, state)
            for name, u, s in zip(self.compartments, membranes, spikes):
                rec.setdefault(f"U_{name}", []).append(u)
                rec.setdefault(f"S_{name}", []).append(s)
            rec.setdefault("out", []).append(self.readout(spikes))
        return {k: torch.stack(v) for k, v in rec.items()}


class LIF(Neuron):
    """Leaky integrate-and-fire, as snnTorch's ``Leaky`` with subtractive reset:

    ``U[t] = beta U[t-1] + I[t] - theta S[t-1]``, ``S[t] = H(U[t] - theta)``, the reset term
    detached from the graph (snnTorch's default). ``beta = 0.99``, ``theta = 1`` in SeqSNN.

    Reset convention: snnTorch subtracts the previous spike *undecayed*. TS-LIF, TC-LIF and
    :class:`GainLIF` instead subtract the reset from the membrane right after the spike, so it is
    decayed with the membrane at the next step: ``U[t] = beta (U[t-1] - theta S[t-1]) + I[t]``.
    ``reset_decays=True`` selects that convention (then a :class:`GainLIF` with ``gamma = 1`` and
    ``kappa = 1`` is exactly this LIF); the two agree only at ``beta = 1``.
    """

    def __init__(self, beta: float = 0.99, theta: float = 1.0, reset_decays: bool = False) -> None:
        super().__init__()
        self.beta, self.theta, self.reset_decays = beta, theta, reset_decays

    def init_state(self, like: Tensor) -> State:
        return torch.zeros_like(like), torch.zeros_like(like)          # U, S of the previous step

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        u, s_prev = state
        if self.reset_decays:
            u = torch.add(drive[0], u.sub(s_prev.detach(), alpha=self.theta), alpha=self.beta)
        else:
            u = torch.add(drive[0], u, alpha=self.beta).sub_(s_prev.detach(), alpha=self.theta)
        s = atan_spike(u, self.theta)
        return (u, s), (s,), (u,)


class PLIF(Neuron):
    """Parametric LIF (Fang et al., 2021) in the LIF form of SeqSNN: LIF with a learned leak.

    ``U[t] = beta U[t-1] + I[t] - theta S[t-1]``, ``S[t] = H(U[t] - theta)``, with
    ``beta = sigmoid(w)`` learned (one per layer), initialised at ``beta = 1 - 1/tau`` with
    spikingjelly's default ``tau = 2``. (spikingjelly's own node also scales the input by
    ``1/tau``; with the binary currents of the spiking gates, at most 1, such a neuron
    approaches the threshold only in the limit and never fires.)
    """

    def __init__(self, init_tau: float = 2.0, theta: float = 1.0) -> None:
        super().__init__()
        beta = 1.0 - 1.0 / init_tau
        self.w = nn.Parameter(torch.tensor(math.log(beta / (1.0 - beta))))
        self.theta = theta

    @property
    def beta(self) -> Tensor:
        """The learned leak ``sigmoid(w)``."""
        return torch.sigmoid(self.w)

    def init_state(self, like: Tensor) -> State:
        return torch.zeros_like(like), torch.zeros_like(like)          # U, S of the previous step

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        u, s_prev = state
        u = torch.addcmul(drive[0], u, self.beta).sub_(s_prev.detach(), alpha=self.theta)
        s = atan_spike(u, self.theta)
        return (u, s), (s,), (u,)


class TCLIF(Neuron):
    """Two-compartment LIF, TC-LIF (Zhang et al., AAAI 2024): no leak, no somatic input, one spike.

    ``U_d[t] = U_d[t-1] + beta_1 U_s[t-1] + I[t] - gamma S[t-1]``,
    ``U_s[t] = U_s[t-1] + beta_2 U_d[t] - theta S[t-1]``, ``S[t] = H(U_s[t] - theta)``, with
    learned ``beta_1 = -sigmoid(c_1)``, ``beta_2 = sigmoid(c_2)`` (``-0.5, 0.5`` at initialisation)
    and ``gamma = 0.5``.

    ``hidden=None`` gives the original readout, the somatic spike train (one bit per neuron). With
    ``hidden`` set, the readout is TS-LIF's: ``kappa_s S[t] + kappa_d H(U_d[t] - theta)``, learned
    per-neuron weights (``randn`` init) on the somatic spikes and on the dendrite's threshold
    crossings, which are read out only (they do not reset or otherwise change the dynamics). Both
    neurons then hand the next layer the same number of bits.
    """

    compartments = ("dendrite", "soma")

    def __init__(self, hidden: int | None = None, gamma: float = 0.5, theta: float = 1.0) -> None:
        super().__init__()
        self.c = nn.Parameter(torch.zeros(2))
        self.gamma, self.theta = gamma, theta
        self.two_trains = hidden is not None
        if self.two_trains:
            self.kappa_s = nn.Parameter(torch.randn(hidden))
            self.kappa_d = nn.Parameter(torch.randn(hidden))

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        ud, us = state
        beta = torch.sigmoid(self.c)
        ud = torch.addcmul(ud + drive[0], us, beta[0], value=-1.0)
        us = torch.addcmul(us, ud, beta[1])
        s = atan_spike(us, self.theta)
        new = (ud.add(s, alpha=-self.gamma), us.add(s, alpha=-self.theta))
        sd = atan_spike(ud, self.theta) if self.two_trains else torch.zeros_like(s)
        return new, (sd, s), (ud, us)

    def readout(self, spikes: State) -> Tensor:
        if self.two_trains:
            return torch.addcmul(self.kappa_s * spikes[1], self.kappa_d, spikes[0])
        return spikes[1]


class TwoCompartment(Neuron):
    """TS-LIF (Feng et al., ICLR 2025) and its ablations: a dendrite and a soma, both driven by the input.

    One step, with raw learnable scalars shared by the layer (the official ``TSLIFNode``):

    * dendrite ``U_d[t] = alpha_d U_d[t-1] + gamma_d I[t] - beta_sd U_s[t-1]``
    * soma ``U_s[t] = alpha_s U_s[t-1] + gamma_s I[t] - beta_ds U_d[t]`` (the *new* dendrite)
    * spikes ``S_d = H(U_d - theta)``, ``S_s = H(U_s - theta)``
    * output ``O[t] = kappa_s * S_s[t] + kappa_d * S_d[t]`` (per-neuron weights, ``randn`` init)
    * soft resets ``U_d -= r_d S_d`` (``r_d = 0.5``), ``U_s -= theta S_s``.

    Initialisation ``(alpha_d, gamma_d, alpha_s, gamma_s) = (0.8, 0.2, 0.3, 0.7)``,
    ``beta_sd = 0.1``, ``beta_ds = 0.8``. The flags remove one mechanism each, keeping the rest:
    ``coupled=False`` fixes ``beta_sd = beta_ds = 0`` (two independent one-compartment neurons),
    ``soma_input=False`` fixes ``gamma_s = 0`` (no direct somatic injection: the soma hears the
    input only through the dendrite), ``dendritic_spikes=False`` removes ``S_d`` (no dendritic
    output and no dendritic reset, as in TC-LIF). The last one splits in two:
    ``dendritic_output=False`` keeps the dendritic spikes and their reset but drops ``kappa_d S_d``
    from the output; ``dendritic_reset=False`` keeps the output but never resets the dendrite.
    """

    compartments = ("dendrite", "soma")

    def __init__(self, hidden: int, *, coupled: bool = True, soma_input: bool = True,
                 dendritic_spikes: bool = True, dendritic_output: bool = True, dendritic_reset: bool = True,
                 decays: tuple[float, float, float, float] = (0.8, 0.2, 0.3, 0.7),
                 couplings: tuple[float, float] = (0.1, 0.8), reset_d: float = 0.5, theta: float = 1.0) -> None:
        super().__init__()
        alpha_d, gamma_d, alpha_s, gamma_s = decays
        self.alpha_d = nn.Parameter(torch.tensor(alpha_d))
        self.gamma_d = nn.Parameter(torch.tensor(gamma_d))
        self.alpha_s = nn.Parameter(torch.tensor(alpha_s))
        self._fixed_or_learned("gamma_s", gamma_s, learned=soma_input)
        self._fixed_or_learned("beta_sd", couplings[0], learned=coupled)
        self._fixed_or_learned("beta_ds", couplings[1], learned=coupled)
        self.kappa_s = nn.Parameter(torch.randn(hidden))
        self.dendritic_output = dendritic_spikes and dendritic_output
        self.dendritic_reset = dendritic_spikes and dendritic_reset
        self._fixed_or_learned("kappa_d", torch.randn(hidden), learned=self.dendritic_output)
        self.coupled, self.soma_input, self.dendritic_spikes = coupled, soma_input, dendritic_spikes
        self.reset_d, self.theta = reset_d, theta

    def _fixed_or_learned(self, name: str, value: float | Tensor, learned: bool) -> None:
        """A learnable parameter initialised at ``value``, or (mechanism removed) a zero buffer."""
        value = torch.as_tensor(value, dtype=torch.float32)
        if learned:
            setattr(self, name, nn.Parameter(value))
        else:
            self.register_buffer(name, torch.zeros_like(value))

    def drive(self, current: Tensor) -> State:
        if self.soma_input:
            return self.gamma_d * current, self.gamma_s * current
        return (self.gamma_d * current,)

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        ud, us = state
        in_d = torch.addcmul(drive[0], us, self.beta_sd, value=-1.0) if self.coupled else drive[0]
        ud = torch.addcmul(in_d, ud, self.alpha_d)
        if self.coupled:
            in_s = torch.addcmul(drive[1], ud, self.beta_ds, value=-1.0) if self.soma_input else ud * -self.beta_ds
        else:
            in_s = drive[1] if self.soma_input else torch.zeros_like(ud)
        us = torch.addcmul(in_s, us, self.alpha_s)
        ss = atan_spike(us, self.theta)
        if self.dendritic_spikes:
            sd = atan_spike(ud, self.theta)
            new = (ud.add(sd, alpha=-self.reset_d) if self.dendritic_reset else ud, us.add(ss, alpha=-self.theta))
        else:
            sd = torch.zeros_like(ss)
            new = (ud, us.add(ss, alpha=-self.theta))
        return new, (sd, ss), (ud, us)

    def readout(self, spikes: State) -> Tensor:
        sd, ss = spikes
        out = self.kappa_s * ss
        return torch.addcmul(out, self.kappa_d, sd) if self.dendritic_output else out

    def linear_params(self) -> dict[str, float]:
        """The six scalars of the sub-threshold dynamics, as floats (for :mod:`iclr25.snn.dynamics`)."""
        return {k: float(getattr(self, k).detach()) for k in ("alpha_d", "gamma_d", "alpha_s", "gamma_s", "beta_sd", "beta_ds")}


def TSLIF(hidden: int, **kwargs) -> TwoCompartment:
    """The TS-LIF neuron of the paper: :class:`TwoCompartment` with every mechanism on."""
    return TwoCompartment(hidden, **kwargs)


class GainLIF(Neuron):
    """A control: one compartment with a learned leak and input gain and a signed output weight.

    ``U[t] = alpha U[t-1] + gamma I[t]``, ``S = H(U - theta)``, ``U -= theta S``, output
    ``kappa * S`` (per neuron, ``randn`` init). It has what TS-LIF adds to LIF in input scaling and
    readout, without a second compartment. Initialised as TS-LIF's dendrite (``alpha = 0.8``,
    ``gamma = 0.2``).
    """

    def __init__(self, hidden: int, alpha: float = 0.8, gamma: float = 0.2, theta: float = 1.0) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(alpha))
        self.gamma = nn.Parameter(torch.tensor(gamma))
        self.kappa = nn.Parameter(torch.randn(hidden))
        self.theta = theta

    def drive(self, current: Tensor) -> State:
        return (self.gamma * current,)

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        (u,) = state
        u = torch.addcmul(drive[0], u, self.alpha)
        s = atan_spike(u, self.theta)
        return (u.add(s, alpha=-self.theta),), (s,), (u,)

    def readout(self, spikes: State) -> Tensor:
        return self.kappa * spikes[0]


class Memoryless(Neuron):
    """The control with the neuron removed: no membrane, no state; each step passes its input
    current through (``S[t] = I[t]``) and the output is ``kappa * I[t]`` (per neuron, ``randn`` init).

    The forecaster built on it keeps the encoder, the spiking gates and the head, so it is the
    competence bar for any comparison *between neurons*: a neuron whose memory does something
    beats it.
    """

    compartments: tuple[str, ...] = ()

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.kappa = nn.Parameter(torch.randn(hidden))

    def step(self, drive: State, state: State) -> tuple[State, State, State]:
        return state, (drive[0],), ()

    def readout(self, spikes: State) -> Tensor:
        return self.kappa * spikes[0]
