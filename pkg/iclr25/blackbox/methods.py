"""Black-box prompt learning methods, all driven through a :class:`~iclr25.blackbox.api.BlackBoxLM`.

* :func:`run_zo_pog`: ZO-PoG, alternating a policy-gradient step on the discrete prompt
  (I queries) with a two-point zeroth-order step on the continuous prompt z (I queries).
  ``continuous=False`` is its "no continuous part" ablation, ``discrete=False`` is **ZO-only**
  (random fixed tokens + ZO on z), ``gumbel=False`` the no-Gumbel ablation.
* :func:`run_bdpl`: BDPL, projected policy gradient on a categorical over tokens (I queries per
  step), no continuous prompt.
* :func:`run_bbt`: BBT, CMA-ES on z (λ queries per generation) with random fixed tokens.
* :func:`evaluate_manual`: a hand-written prompt, no training, no query.

Protocol shared by all (as in the official code): minibatches of the few-shot training set;
after each pass over it, the current prompt (argmax tokens, current z) is scored on the dev set,
and the best dev pair is kept; the final test accuracy is that of the best dev pair. Dev and
test scoring is not charged to the query budget; training stops when the budget is spent.
A policy with Gumbel noise is scored under two deployment rules, each with its own dev selection
(:class:`RunResult.selections`): the paper's Gumbel draw and the policy's mode.

The optimiser state (policy, z, CMA-ES) lives on the CPU; the black box moves what it needs to
its own device and returns CPU tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from iclr25.blackbox.api import BlackBoxLM, BudgetExceeded, EncodedTask
from iclr25.blackbox.cmaes import CMAES
from iclr25.blackbox.policy import CategoricalPromptPolicy, SimplexPromptPolicy
from iclr25.blackbox.zo import zo_gradient


@dataclass(frozen=True)
class PromptTuningConfig:
    """Hyper-parameters (defaults: the official ZO-PoG script, except sizes of the toy)."""

    batch_size: int = 32      # minibatch per query
    n_samples: int = 20       # I: prompts sampled per policy / ZO step
    lr_alpha: float = 1e-3    # η_α, policy step on α (ZO-PoG)
    lr_z: float = 1e-2        # η_z, ZO step on z
    mu: float = 1e-2          # smoothing radius of the ZO estimator
    tau: float = 1.0          # Gumbel-softmax temperature
    lr_bdpl: float = 1e-3     # BDPL step on the simplex probabilities
    popsize: int = 20         # CMA-ES population (BBT)
    sigma0: float = 1.0       # CMA-ES initial step (BBT)


@dataclass
class Selection:
    """The prompt a run deploys under one rule, chosen on the dev set.

    ``curve``: one row per dev evaluation, (queries used, dev acc of the current prompt,
    test acc of the best-dev prompt so far).
    """

    prompt: torch.Tensor                 # best-dev token ids (n,)
    z: torch.Tensor | None               # best-dev continuous prompt (d,)
    best_dev: float
    test_acc: float
    curve: list[tuple[int, float, float]] = field(default_factory=list)

    def test_at(self, queries: int) -> float:
        """Test accuracy of the best-dev prompt among evaluations made within ``queries``."""
        acc = float("nan")
        for q, _, t in self.curve:
            if q > queries:
                break
            acc = t
        return acc


@dataclass
class RunResult:
    """What one run of a method returns.

    ``selections`` maps a deployment rule to its dev-selected prompt: ``"draw"`` (the argmax of
    the Gumbel-perturbed policy, what the official ZO-PoG code deploys: a random draw from the
    policy), ``"mode"`` (the argmax of the noise-free policy) or ``"fixed"`` (a method without a
    policy). The first entry is the method's own rule; ``prompt``, ``z``, ``best_dev``,
    ``test_acc``, ``curve`` and ``test_at`` refer to it. ``trace``: per step diagnostics.
    """

    method: str
    queries: int
    selections: dict[str, Selection]
    trace: dict[str, list[float]] = field(default_factory=dict)
    probs: torch.Tensor | None = None    # final policy p (n, V) if the method has one

    @property
    def primary(self) -> Selection:
        return next(iter(self.selections.values()))

    @property
    def prompt(self) -> torch.Tensor:
        return self.primary.prompt

    @property
    def z(self) -> torch.Tensor | None:
        return self.primary.z

    @property
    def best_dev(self) -> float:
        return self.primary.best_dev

    @property
    def test_acc(self) -> float:
        return self.primary.test_acc

    @property
    def curve(self) -> list[tuple[int, float, float]]:
        return self.primary.curve

    def test_at(self, queries: int) -> float:
        """Test accuracy of the primary rule's best-dev prompt within ``queries``."""
        return self.primary.test_at(queries)


class _Tracker:
    """Dev-based model selection with lazily computed test accuracy (one deployment rule)."""

    def __init__(self, bb: BlackBoxLM, dev: EncodedTask, test: EncodedTask,
                 offset_of: Callable[[torch.Tensor | None], torch.Tensor | None]) -> None:
        self.bb, self.dev, self.test, self.offset_of = bb, dev, test, offset_of
        self.best = Selection(torch.empty(0, dtype=torch.long), None, -1.0, float("nan"))

    def __call__(self, prompt: torch.Tensor, z: torch.Tensor | None) -> float:
        off = self.offset_of(z)
        acc = self.bb.evaluate(prompt, off, self.dev)
        best = self.best
        if acc > best.best_dev:
            best.best_dev, best.prompt = acc, prompt.clone()
            best.z = None if z is None else z.clone()
            best.test_acc = self.bb.evaluate(prompt, off, self.test)
        best.curve.append((self.bb.n_queries, acc, best.test_acc))
        return acc


def _minibatches(data: EncodedTask, batch_size: int, gen: torch.Generator) -> Iterator[tuple[EncodedTask, bool]]:
    """Endless shuffled minibatches; the flag marks the last batch of a pass."""
    while True:
        perm = torch.randperm(len(data), generator=gen)
        chunks = perm.split(batch_size)
        for i, idx in enumerate(chunks):
            yield data.subset(idx), i == len(chunks) - 1


def _offset_fn(A: torch.Tensor | None, n_pos: int, embed_dim: int) -> Callable:
    def offset_of(z: torch.Tensor | None) -> torch.Tensor | None:
        if A is None or z is None:
            return None
        return (z @ A.T).reshape(*z.shape[:-1], n_pos, embed_dim)
    return offset_of


def run_zo_pog(bb: BlackBoxLM, train: EncodedTask, dev: EncodedTask, test: EncodedTask,
               candidates: torch.Tensor, n_pos: int, A: torch.Tensor, cfg: PromptTuningConfig,
               *, seed: int = 0, discrete: bool = True, continuous: bool = True,
               gumbel: bool = True, name: str | None = None,
               prompt: torch.Tensor | None = None) -> RunResult:
    """ZO-PoG (Algorithm 1 of the paper) until ``bb``'s budget is spent.

    Parameters
    ----------
    candidates : LongTensor (V,)
        Token ids a prompt position can take.
    n_pos : int
        Prompt length n.
    A : Tensor (n·D, d)
        Fixed random projection; the continuous prompt is ``(A z).view(n, D)``.
    discrete, continuous, gumbel : bool
        Switch off the policy (then the prompt is random fixed candidates: ZO-only), the ZO
        step (discrete-only ablation) or the Gumbel noise.
    prompt : LongTensor (n,), optional
        With ``discrete=False``, token ids that replace the random fixed tokens (e.g. a
        hand-written prompt, the role of the paper's template); the random stream is unchanged.
    """
    if not (discrete or continuous):
        raise ValueError("at least one of discrete and continuous must be True")
    I, B = cfg.n_samples, cfg.batch_size
    if I < 2 or I % 2:
        raise ValueError(f"n_samples must be even and >= 2, got {I}")
    gen = torch.Generator().manual_seed(seed)
    V, D, d = candidates.numel(), bb.embed_dim, A.shape[1]
    offset_of = _offset_fn(A, n_pos, D)
    fixed = candidates[torch.randint(V, (n_pos,), generator=gen)]
    if prompt is not None:
        if discrete or prompt.shape != (n_pos,):
            raise ValueError(f"prompt= needs discrete=False and shape ({n_pos},), got {tuple(prompt.shape)}")
        fixed = prompt.to(fixed.dtype)
    policy = CategoricalPromptPolicy(n_pos, V, tau=cfg.tau, gumbel=gumbel, generator=gen) if discrete else None
    z = torch.zeros(d) if continuous else None
    if not discrete:
        rules = {"fixed": lambda: fixed}
    elif gumbel:  # the paper's deployment (a Gumbel draw), and the policy's mode
        rules = {"draw": lambda: candidates[policy.argmax()], "mode": lambda: candidates[policy.mode()]}
    else:
        rules = {"mode": lambda: candidates[policy.mode()]}
    trackers = {r: _Tracker(bb, dev, test, offset_of) for r in rules}

    def track() -> None:
        for r, current in rules.items():
            trackers[r](current(), z)

    trace: dict[str, list[float]] = {"queries": [], "loss": [], "zo_grad_norm": []}
    if not discrete:
        track()  # fixed tokens: the start (z = 0) competes in the dev selection
    batches = _minibatches(train, B, gen)
    try:
        for batch, end_of_pass in batches:
            loss = float("nan")
            if discrete:  # policy-gradient step on α: I queries
                J = policy.sample(I)
                off = None if z is None else offset_of(z)[None].expand(I, n_pos, D)
                losses, _ = bb.query(candidates[J], off, batch)
                policy.step(losses.mean(1), J, cfg.lr_alpha)
                loss = float(losses.mean())
            gnorm = float("nan")
            if continuous:  # two-point ZO step on z: I/2 prompts x (+mu, -mu) = I queries
                Jz = policy.sample(I // 2) if discrete else fixed[None].expand(I // 2, n_pos)
                nb = len(batch)

                def f(points: torch.Tensor) -> torch.Tensor:
                    offs = offset_of(points).reshape(2 * (I // 2), nb, n_pos, D)
                    lz, _ = bb.query(candidates[Jz].repeat(2, 1) if discrete else Jz.repeat(2, 1),
                                     offs, batch)
                    return lz.reshape(-1)

                g = zo_gradient(f, z, cfg.mu, (I // 2) * nb, generator=gen)
                z = z - cfg.lr_z * g
                gnorm = float(g.norm())
            trace["queries"].append(bb.n_queries)
            trace["loss"].append(loss)
            trace["zo_grad_norm"].append(gnorm)
            if end_of_pass:
                track()
    except BudgetExceeded:
        pass
    track()
    label = name or ("ZO-PoG" if discrete and continuous else "ZO-only" if continuous else "PG-only")
    return RunResult(label, bb.n_queries, {r: t.best for r, t in trackers.items()}, trace,
                     None if policy is None else policy.probs.clone())


def run_bdpl(bb: BlackBoxLM, train: EncodedTask, dev: EncodedTask, test: EncodedTask,
             candidates: torch.Tensor, n_pos: int, cfg: PromptTuningConfig, *,
             seed: int = 0) -> RunResult:
    """BDPL: variance-reduced policy gradient on simplex probabilities, I queries per step."""
    gen = torch.Generator().manual_seed(seed)
    policy = SimplexPromptPolicy(n_pos, candidates.numel(), generator=gen)
    track = _Tracker(bb, dev, test, lambda z: None)
    trace: dict[str, list[float]] = {"queries": [], "loss": []}
    try:
        for batch, end_of_pass in _minibatches(train, cfg.batch_size, gen):
            J = policy.sample(cfg.n_samples)
            losses, _ = bb.query(candidates[J], None, batch)
            policy.step(losses.mean(1), J, cfg.lr_bdpl)
            trace["queries"].append(bb.n_queries)
            trace["loss"].append(float(losses.mean()))
            if end_of_pass:
                track(candidates[policy.argmax()], None)
    except BudgetExceeded:
        pass
    track(candidates[policy.argmax()], None)
    return RunResult("BDPL", bb.n_queries, {"mode": track.best}, trace, policy.probs.clone())


def run_bbt(bb: BlackBoxLM, train: EncodedTask, dev: EncodedTask, test: EncodedTask,
            candidates: torch.Tensor, n_pos: int, A: torch.Tensor, cfg: PromptTuningConfig, *,
            seed: int = 0, prompt: torch.Tensor | None = None) -> RunResult:
    """BBT: CMA-ES on z (population λ, one query per candidate) with random fixed tokens.

    The fixed tokens are drawn exactly as ZO-only's (same seed, same generator call), so BBT
    and ZO-only differ only in the optimiser of z. ``prompt`` (LongTensor (n,)), if given,
    replaces them (e.g. a manual prompt: BBT started from a hand-written text); the random
    stream is the same either way.
    """
    gen = torch.Generator().manual_seed(seed)
    D = bb.embed_dim
    offset_of = _offset_fn(A, n_pos, D)
    fixed = candidates[torch.randint(candidates.numel(), (n_pos,), generator=gen)]
    if prompt is not None:
        if prompt.shape != (n_pos,):
            raise ValueError(f"prompt must have shape ({n_pos},), got {tuple(prompt.shape)}")
        fixed = prompt.to(fixed.dtype)
    es = CMAES(torch.zeros(A.shape[1], dtype=torch.float64), cfg.sigma0, popsize=cfg.popsize, seed=seed)
    track = _Tracker(bb, dev, test, offset_of)
    trace: dict[str, list[float]] = {"queries": [], "loss": []}
    mean = lambda: es.mean.to(A.dtype)  # noqa: E731
    track(fixed, mean())  # the start (z = 0) competes in the dev selection
    try:
        for batch, end_of_pass in _minibatches(train, cfg.batch_size, gen):
            X = es.ask()
            losses, _ = bb.query(fixed[None].expand(es.lam, n_pos), offset_of(X.to(A.dtype)), batch)
            es.tell(X, losses.mean(1))
            trace["queries"].append(bb.n_queries)
            trace["loss"].append(float(losses.mean()))
            if end_of_pass:
                track(fixed, mean())
    except BudgetExceeded:
        pass
    track(fixed, mean())
    return RunResult("BBT", bb.n_queries, {"fixed": track.best}, trace)


def evaluate_manual(bb: BlackBoxLM, dev: EncodedTask, test: EncodedTask, prompt: torch.Tensor) -> RunResult:
    """A hand-written prompt: no query, no training."""
    dev_acc = bb.evaluate(prompt, None, dev)
    test_acc = bb.evaluate(prompt, None, test)
    return RunResult("Manual", 0, {"fixed": Selection(prompt.clone(), None, dev_acc, test_acc,
                                                      [(0, dev_acc, test_acc)])})
