"""Mixed C_4^n: choose ``n`` per layer under a sparsity or latency budget, and prune a stack of blocks
sequentially with any C_4^n solver (with or without compensation).

The per-layer rule (Algorithm 1 of Shen et al., 2025, *as we read it*: the paper's text is not
public; an audit quotes "r_e as the effectiveness loss ratio and r_t as the target loss ratio ...
max index ... N_output"):

1. for every prunable layer ``l`` and ``n`` in {0, 1, 2, 3}, prune **only** ``l`` with C_4^n and
   record the calibration-loss ratio ``r_e(l, n) = L(l pruned with n) / L(dense)``
   (:func:`loss_ratio_table`);
2. given a target ratio ``r_t``, give each layer the largest ("max index") ``n`` with
   ``r_e(l, n) <= r_t`` (:func:`threshold_allocation`);
3. choose ``r_t`` as the smallest value whose allocation meets the budget, a number of kept
   parameters or a latency (:func:`allocate_for_budget`).

Controls at an equal budget: :func:`permuted_allocation` (the same ``n`` values shuffled among
layers of one shape: the sensitivity signal removed, the spread of ``n`` kept),
:func:`random_allocation` (independent random ``n``, which also changes the spread) and
:func:`reversed_table` (the signal inverted, a floor: the same rule on a table whose rows are
reversed in sensitivity order).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from iclr25.compress.masks import c4n_mask, wanda_mask
from iclr25.compress.obs import compensate, input_hessian, sparsegpt_prune

NS = (0, 1, 2, 3)
"""The C_4^n choices per layer (n = 0: dense)."""

Solver = Callable[[Tensor, Tensor, int], Tensor]
"""``solver(W (out, in), X (tokens, in), n) -> W_new (out, in)``: C_4^n weights (n zeros per group)."""


# ---------------------------------------------------------------- solvers

def _no_data(W: Tensor, X: Tensor, n: int) -> Tensor:
    return W * c4n_mask(W.abs(), n)


def _wanda(W: Tensor, X: Tensor, n: int) -> Tensor:
    return W * wanda_mask(W, X, None, ("c4n", n))


def _wanda_ls(W: Tensor, X: Tensor, n: int) -> Tensor:
    return compensate(W, input_hessian(X).to(W.device), wanda_mask(W, X, None, ("c4n", n)))


def _wanda_group_ls(W: Tensor, X: Tensor, n: int) -> Tensor:
    return compensate(W, input_hessian(X).to(W.device), wanda_mask(W, X, None, ("c4n", n)), group_size=4)


def _sparsegpt(W: Tensor, X: Tensor, n: int) -> Tensor:
    return sparsegpt_prune(W, input_hessian(X).to(W.device), None, ("c4n", n))[0]


def _sparsegpt_mask(W: Tensor, X: Tensor, n: int) -> Tensor:
    return W * sparsegpt_prune(W, input_hessian(X).to(W.device), None, ("c4n", n))[1]


def _sparsegpt_mask_ls(W: Tensor, X: Tensor, n: int) -> Tensor:
    H = input_hessian(X).to(W.device)
    return compensate(W, H, sparsegpt_prune(W, H, None, ("c4n", n))[1])


SOLVERS: dict[str, Solver] = {
    "magnitude": _no_data,            # |W| per group, no update
    "wanda": _wanda,                  # |W| ||X_j|| per group, no update
    "wanda+ls": _wanda_ls,            # the Wanda mask, then the least-squares weights on it (compensation)
    "wanda+group-ls": _wanda_group_ls,  # the same, each group of 4 re-fitted on its own
    "sparsegpt": _sparsegpt,          # OBS: mask chosen group by group on updated weights, with updates
    "sparsegpt-mask": _sparsegpt_mask,  # SparseGPT's mask applied to the original weights, no update
    "sparsegpt-mask+ls": _sparsegpt_mask_ls,  # SparseGPT's mask with the least-squares weights on it
}
"""C_4^n solvers by name. ``n = 0`` is never passed to them (the layer stays dense)."""


def pattern_solver(solver: str, pattern: str) -> Solver:
    """``solver`` (``"wanda+ls"`` or ``"sparsegpt"``) with another semi-structured pattern, e.g.
    ``"3:8"`` (3 zeros in every 8 consecutive inputs), in place of C_4^n: a baseline that meets a
    between-level sparsity (37.5 %, 62.5 %) with one pattern in every layer. The ``n`` it is called
    with only says that the layer is pruned."""
    if solver == "wanda+ls":
        return lambda W, X, n: compensate(W, input_hessian(X).to(W.device), wanda_mask(W, X, None, pattern))
    if solver == "sparsegpt":
        return lambda W, X, n: sparsegpt_prune(W, input_hessian(X).to(W.device), None, pattern)[0]
    raise ValueError(f"no {pattern} variant of solver {solver!r}")


def solve(solver: str | Solver, W: Tensor, X: Tensor, n: int) -> Tensor:
    """``W`` pruned with C_4^n by ``solver`` (a name in :data:`SOLVERS` or a callable); ``n = 0``
    returns ``W`` unchanged."""
    fn = SOLVERS[solver] if isinstance(solver, str) else solver
    return W.clone() if n == 0 else fn(W, X, n)


# ---------------------------------------------------------------- pruning a stack of blocks

class _Recorded(Exception):
    """Raised by :func:`_inputs_of`'s hook to stop a block once the layer's input is recorded."""


def _inputs_of(layer: nn.Linear, block: nn.Module, h: Tensor) -> Tensor:
    """What ``layer`` receives when ``block(h)`` runs, flattened to ``(n_tokens, in_features)``, as
    ``iclr25.compress.collect_inputs`` returns it; the block stops right after the layer's input is
    seen, so the rest of it (for the first layers of a Mamba block: the scan) is not computed."""
    seen: list[Tensor] = []

    def record(_module: nn.Module, args: tuple) -> None:
        x = args[0].detach()
        seen.append(x.reshape(-1, x.shape[-1]))
        raise _Recorded

    handle = layer.register_forward_pre_hook(record)
    try:
        with torch.no_grad():
            block(h)
    except _Recorded:
        pass
    finally:
        handle.remove()
    if not seen:
        raise ValueError("the layer was never called by its block")
    return seen[0]


@torch.no_grad()
def prune_blocks_(blocks: Sequence[nn.Module], h0: Tensor,
                  layers_of: Callable[[int, nn.Module], Mapping[str, nn.Linear]],
                  ns: Mapping[str, int], solver: str | Solver) -> None:
    """Prune the layers of ``blocks`` in place, sequentially, as SparseGPT and Wanda do: a layer's
    calibration inputs are recorded *after* every earlier layer was pruned.

    ``h0 (b, l, d)`` is the calibration input of the first block; ``layers_of(i, block)`` names the
    linear layers of block ``i`` in forward order; ``ns`` gives each name's ``n`` (missing: dense).
    Only the current block is re-run to record a layer's inputs (its input ``h`` is carried from the
    pruned earlier blocks), and only up to that layer.
    """
    h = h0
    for i, block in enumerate(blocks):
        for name, layer in layers_of(i, block).items():
            n = ns.get(name, 0)
            if n == 0:
                continue
            X = _inputs_of(layer, block, h)
            layer.weight.copy_(solve(solver, layer.weight.detach(), X, n))
        h = block(h)


# ---------------------------------------------------------------- the sensitivity table and the rule

@torch.no_grad()
def loss_ratio_table(blocks: Sequence[nn.Module], h0: Tensor,
                     layers_of: Callable[[int, nn.Module], Mapping[str, nn.Linear]],
                     head_loss: Callable[[Tensor], float], solver: str | Solver,
                     ns: Sequence[int] = NS) -> dict[str, np.ndarray]:
    """``r_e(l, n) = L(only l pruned with C_4^n) / L(dense)`` for every layer ``l`` and ``n`` in ``ns``.

    ``head_loss(h)`` maps the output of the last block to the calibration loss. Each layer is pruned
    with ``solver`` on the *dense* model's inputs and restored afterwards; the blocks before it are
    not re-run. Returns ``{name: array of len(ns)}``, ``r_e(l, 0) = 1``.
    """
    inputs, h = [], h0
    for block in blocks:
        inputs.append(h)
        h = block(h)
    dense = head_loss(h)
    table = {}
    for i, block in enumerate(blocks):
        for name, layer in layers_of(i, block).items():
            X = _inputs_of(layer, block, inputs[i])
            W = layer.weight.detach().clone()
            row = []
            for n in ns:
                layer.weight.copy_(solve(solver, W, X, n))
                h = inputs[i]
                for later in blocks[i:]:
                    h = later(h)
                row.append(head_loss(h) / dense)
            layer.weight.copy_(W)
            table[name] = np.array(row)
    return table


def threshold_allocation(r_e: Mapping[str, np.ndarray], r_t: float, ns: Sequence[int] = NS) -> dict[str, int]:
    """Algorithm 1's rule (our reading): each layer takes the largest ``n`` with ``r_e(l, n) <= r_t``
    (``n = 0`` always qualifies). Monotone: a larger ``r_t`` never lowers any ``n``."""
    return {name: max([n for n, r in zip(ns, row) if r <= r_t] + [0]) for name, row in r_e.items()}


def allocation_cost(ns: Mapping[str, int], cost: Mapping[str, Sequence[float]]) -> float:
    """``sum_l cost[l][n_l]``: kept parameters, or latency, of an allocation."""
    return float(sum(cost[name][n] for name, n in ns.items()))


def kept_params_cost(sizes: Mapping[str, int], ns: Sequence[int] = NS) -> dict[str, list[float]]:
    """The parameter cost of each choice: ``size_l * (1 - n / 4)`` kept weights."""
    return {name: [size * (1 - n / 4) for n in ns] for name, size in sizes.items()}


def allocate_for_budget(r_e: Mapping[str, np.ndarray], cost: Mapping[str, Sequence[float]],
                        budget: float, ns: Sequence[int] = NS) -> tuple[dict[str, int], float]:
    """The threshold allocation with the smallest ``r_t`` (among the table's values) whose cost is at
    most ``budget``; returns ``(allocation, r_t)``. Raises if even the sparsest choice does not fit."""
    for r_t in sorted({float(r) for row in r_e.values() for r in row} | {1.0}):
        alloc = threshold_allocation(r_e, r_t, ns)
        if allocation_cost(alloc, cost) <= budget + 1e-9:
            return alloc, r_t
    raise ValueError(f"no allocation meets the budget {budget}")


def random_allocation(cost: Mapping[str, Sequence[float]], low: float, high: float,
                      rng: np.random.Generator, ns: Sequence[int] = NS,
                      max_tries: int = 100_000) -> dict[str, int]:
    """A uniformly random ``n`` per layer, conditioned on ``low <= cost <= high`` (rejection sampling):
    the allocation without any sensitivity signal, at a matched budget."""
    names = list(cost)
    table = np.array([cost[name] for name in names])       # (layers, len(ns))
    for _ in range(max_tries):
        pick = rng.integers(0, len(ns), len(names))
        c = table[np.arange(len(names)), pick].sum()
        if low - 1e-9 <= c <= high + 1e-9:
            return {name: int(ns[j]) for name, j in zip(names, pick)}
    raise ValueError(f"no random allocation with cost in [{low}, {high}] after {max_tries} tries")


def reversed_table(r_e: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The sensitivity table with its rows reversed in sensitivity order: the layer with the
    ``i``-th smallest mean excess ``mean_n (r_e(l, n) - 1)`` gets the row of the layer with the
    ``i``-th largest (ties keep name order). The threshold rule on it gives the most sensitive
    layers the largest ``n``: the signal inverted, a floor for the allocation."""
    names = list(r_e)
    order = sorted(names, key=lambda name: float(np.mean(np.asarray(r_e[name]) - 1)))  # least sensitive first
    return {name: np.asarray(r_e[src]) for name, src in zip(order, reversed(order))}


# ---------------------------------------------------------------- exact budgets and the spread-keeping control

def exact_budget_allocation(r_e: Mapping[str, np.ndarray], sizes: Mapping[str, int], removed: int,
                            ns: Sequence[int] = NS, step_units: Sequence[int] | None = None) -> dict[str, int]:
    """The allocation that removes **exactly** ``removed`` weights with the least summed loss rise
    ``sum_l (r_e(l, n_l) - 1)`` (a knapsack over layers, solved exactly by dynamic programming).

    ``sizes[l]`` is layer ``l``'s weight count; choosing ``n`` removes ``sizes[l] * n / 4`` weights.
    ``step_units`` changes what is counted: choosing ``ns[j]`` removes ``sizes[l] * step_units[j] / 4``
    of the budget's unit (default ``ns``: weights; ``(0, 3, 7, 11)``: bytes of the packed float32
    format with one code byte per group, a roofline latency budget). The greedy rule "raise the
    ``n`` of the layer with the smallest loss rise per weight removed until the budget is met"
    solves the LP relaxation of this problem only when every layer's loss rises are convex in ``n``;
    the DP finds the best integer solution that meets the budget exactly (a greedy pass can overshoot
    or stop short of it). Ties go to the first solution found in name order. Raises if no allocation
    removes exactly ``removed``.
    """
    su = list(ns) if step_units is None else list(step_units)
    names = list(r_e)
    steps = [sizes[name] // 4 for name in names]
    if any(sizes[name] % 4 for name in names):
        raise ValueError("layer sizes must be multiples of 4")
    unit = int(np.gcd.reduce(np.array(steps + [int(removed)], dtype=np.int64)))
    target = int(removed) // unit
    # best[c] = (loss, choices) over the layers seen so far with c units removed
    best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
    for name, step in zip(names, steps):
        row = np.asarray(r_e[name], dtype=float)
        nxt: dict[int, tuple[float, tuple[int, ...]]] = {}
        for c, (loss, picks) in best.items():
            for j, n in enumerate(ns):
                c2 = c + su[j] * step // unit
                if c2 > target:
                    continue
                cand = (loss + float(row[j]) - 1.0, picks + (int(n),))
                if c2 not in nxt or cand[0] < nxt[c2][0] - 1e-15:
                    nxt[c2] = cand
        best = nxt
    if target not in best:
        raise ValueError(f"no allocation removes exactly {removed} weights")
    return dict(zip(names, best[target][1]))


def permuted_allocation(ns: Mapping[str, int], group_of: Callable[[str], str],
                        rng: np.random.Generator) -> dict[str, int]:
    """The control for *which* layers get which ``n``: the values of ``ns`` shuffled at random among
    layers of the same group (``group_of(name)``, e.g. the layer's shape). Every group keeps its
    multiset of ``n`` values, so the parameter count and the spread of ``n`` are exactly those of
    ``ns``; only the assignment to layers, the sensitivity signal, is removed."""
    out = dict(ns)
    groups: dict[str, list[str]] = {}
    for name in ns:
        groups.setdefault(group_of(name), []).append(name)
    for members in groups.values():
        vals = [ns[m] for m in members]
        for m, v in zip(members, rng.permutation(vals)):
            out[m] = int(v)
    return out
