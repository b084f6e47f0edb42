"""Five more arms of the fixed-length PIORF evaluation of the chapter ``graphs/piorf``: equal learning rates and
PIORF as its official code builds it.

The fixed-length record (:mod:`iclr25.graphs.piorf_fixed`) leaves two questions open. Its random-partner and
moving-hub controls train at the learning rate their tuning chose, 2e-3, while PIORF trains at 4e-3, so a
difference between them mixes the velocity's choice of partners with the rate. And its PIORF is the chapter's
variant: partners chosen by the speed over the fluid nodes, added edges with their own normaliser and encoder. The
official code chooses partners by an untrained random 1-D projection of the velocity and sends the added edges
through the mesh edges' normaliser and encoder.

Pre-registration (fixed in :data:`ARMS`, :data:`RECIPE` and this docstring before any of these runs was made):

* everything as ``piorf_fixed.RECIPE``: the data, 2 blocks at width 32, the 3000-step schedule without early
  stopping, the evaluation seeds 10-19 (the same frames, noise and initial weights per seed as every arm of that
  record, so each arm pairs with its runs), one look, paired 95 % Student-t intervals, bar 5 %;
* every arm trains at PIORF's learning rate, 4e-3 (no tuning):

  - ``random4``: random partners for PIORF's sources (the same draw per mesh as ``random``);
  - ``moving4``: moving random hubs (``piorf_fixed.moving_hubs``);
  - ``projection``: PIORF with the official partner rule (``piorf_fixed``'s projection, one direction per seed);
  - ``shared``: PIORF (speed rule) with the added edges normalised and encoded as mesh edges
    (:class:`SharedEdgeSimulator`);
  - ``official``: both, PIORF as the official code builds it;

* the gate: each arm beats persistence by 5 % and its validation RMSE falls by less than 5 % over the last
  quarter (mean over seeds, ``piorf_fixed.late_drop``), with ``piorf_fixed``'s gate for the arms it pairs with;
* the rows it decides (holds: the interval of the relative change of one-step velocity RMSE lies below -5 %;
  fails: the interval rules a 5 % reduction out; undecided otherwise, or when the gate fails):
  the mechanism checks at equal rates, PIORF vs ``random4`` and PIORF vs ``moving4``; the paper's rows for PIORF
  as published, ``official`` vs the mesh alone (one-step velocity, 10-step rollout, one-step pressure) and
  ``official`` vs FoSR-style edges; and, to say which deviation matters, ``projection`` and ``shared`` vs the
  mesh alone.

``python -m iclr25.graphs.piorf_arms`` (one thread) writes ``weights/piorf-arms.json`` after every arm: the recipe,
the fingerprint of the code that makes the runs, every run's validation curve, first training losses, metrics and
CPU seconds; :func:`load` checks its sha256. Its runs are ``piorf_fixed.fit`` and ``piorf_fixed.evaluate``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import inspect
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

from iclr25.common.digest import load_record, record_sha256, strip_source
from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs.mesh import FlowSimulator, Normalizer

HERE = Path(__file__).parent
PATH = HERE / "weights" / "piorf-arms.json"
RERUN = "python -m iclr25.graphs.piorf_arms"

#: the pre-registered arms: name -> (``piorf_fixed`` method, learning rate, added edges shared with the mesh's)
ARMS: dict[str, tuple[str, float, bool]] = {
    "random4": ("random", 4e-3, False), "moving4": ("moving", 4e-3, False),
    "projection": ("projection", 4e-3, False), "shared": ("piorf", 4e-3, True),
    "official": ("projection", 4e-3, True)}

#: ``piorf_fixed``'s recipe with these arms
RECIPE: dict = dict(F.RECIPE, methods=list(ARMS), arms={k: list(v) for k, v in ARMS.items()})

#: ``piorf_fixed.fit`` fits the normalisers on every ``FRAME_STRIDE``-th frame of each training trajectory
FRAME_STRIDE = 3


def load(path: Path = PATH) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, RERUN)


class _CountedNorm(Normalizer):
    """A normaliser that remembers how many rows it was fitted on."""

    rows: int = 0

    def fit(self, x: Tensor) -> "Normalizer":  # noqa: D102
        self.rows = len(x)
        return super().fit(x)


class _PooledNorm(Normalizer):
    """Fitted on the added edges' features, it refits the mesh edges' normaliser ``mesh`` to the statistics of all
    the edges of the training graphs: each mesh edge counted ``copies`` times (once per frame), each added edge
    once."""

    def __init__(self, mesh: _CountedNorm, copies: int) -> None:
        super().__init__(3)
        self._mesh = [mesh]  # a plain reference, not a second registration of the module
        self.copies = copies

    def fit(self, x: Tensor) -> "Normalizer":  # noqa: D102
        super().fit(x)
        m = self._mesh[0]
        assert m.rows > 0, "the mesh edges' normaliser is fitted first"
        n1, n2 = m.rows * self.copies, len(x)
        mean = (n1 * m.mean + n2 * self.mean) / (n1 + n2)
        var = (n1 * (m.std ** 2 + (m.mean - mean) ** 2) + n2 * (self.std ** 2 + (self.mean - mean) ** 2)) / (n1 + n2)
        m.mean.copy_(mean)
        m.std.copy_(var.sqrt().clamp_min(m.eps))
        return self


class SharedEdgeSimulator(FlowSimulator):
    """The flow simulator with the added edges treated as mesh edges, as in PIORF's official code: one normaliser
    (statistics over all edges of the training graphs) and one encoder for both sets. The separate added-edge
    encoder still exists (the initial weights equal those of :class:`FlowSimulator` per seed) but is unused."""

    def __init__(self, latent: int = 128, blocks: int = 15, layers: int = 2, copies: int = 1) -> None:
        super().__init__(latent, blocks, layers)
        self.edge_norm = _CountedNorm(3)
        self.added_norm = _PooledNorm(self.edge_norm, copies)

    def forward(self, velocity: Tensor, node_type: Tensor, pos: Tensor, edge_index: Tensor,
                added_index: Tensor | None = None) -> Tensor:
        """:meth:`FlowSimulator.forward` on the union of the mesh and added edges."""
        if added_index is not None:
            edge_index = torch.cat([edge_index, added_index], dim=1)
        return super().forward(velocity, node_type, pos, edge_index, None)


@contextmanager
def _simulator(cls) -> Iterator[None]:
    """Let ``piorf_fixed.fit`` build its simulator with ``cls`` (the training loop is shared, not copied)."""
    old = F.FlowSimulator
    F.FlowSimulator = cls
    try:
        yield
    finally:
        F.FlowSimulator = old


def fit(arm: str, seed: int, trajs: list[dict], recipe: dict = RECIPE, **kw) -> tuple[FlowSimulator, list, dict]:
    """``piorf_fixed.fit`` for one arm of :data:`ARMS` (its method, its learning rate, its simulator)."""
    method, lr, shared = recipe["arms"][arm]
    copies = len(range(0, recipe["data"]["frames"] - 1, FRAME_STRIDE))
    cls = functools.partial(SharedEdgeSimulator, copies=copies) if shared else FlowSimulator
    with _simulator(cls):
        return F.fit(method, seed, lr, trajs, recipe, **kw)


def first_losses(record: dict, arm: str, seed: int, trajs: list[dict] | None = None) -> list[float]:
    """The first ``n_loss_head`` training losses of one run of the record, re-trained (the chapter's live check)."""
    recipe = record["recipe"]
    _, _, log = fit(arm, seed, trajs or D.trajectories(recipe), recipe, curve=False, stop=recipe["n_loss_head"])
    return log["losses"]


def code_fingerprint() -> str:
    """``piorf_fixed``'s fingerprint together with the stripped source of this script's run."""
    parts = [F.code_fingerprint()] + [strip_source(inspect.getsource(f)) for f in
                                      (_CountedNorm, _PooledNorm, SharedEdgeSimulator, _simulator, fit, main)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS),
                        help="the arms to train, in this order; arms already in the record are kept")
    args = parser.parse_args()
    torch.set_num_threads(1)
    trajs = D.trajectories(RECIPE)
    _, _, test = D.split(trajs, RECIPE)
    old = load() if PATH.exists() else None
    if old is not None:  # the same pre-registered evaluation, trained arm by arm
        assert old["recipe"] == json.loads(json.dumps(RECIPE)) and old["code"] == code_fingerprint()
    runs, cpu = (dict(old["results"]["runs"]), old["cpu_s"]) if old else ({}, 0.0)
    persist = float(torch.cat([D.rmse(t["u"][:-1], t["u"][1:]) for t in test]).mean())
    for arm in args.arms:
        if f"{arm},{RECIPE['seeds'][0]}" in runs:
            continue
        for s in RECIPE["seeds"]:
            c0 = time.process_time()
            sim, rand, log = fit(arm, s, trajs)
            ev = F.evaluate(sim, RECIPE["arms"][arm][0], rand, test, F.context(s, 4000), recipe=RECIPE)
            runs[f"{arm},{s}"] = dict(r1=ev["r1"], rH=ev["rH"], rP=ev["rP"], curve=log["curve"], steps=log["steps"],
                                      loss_head=log["losses"][:RECIPE["n_loss_head"]],
                                      cpu_seconds=time.process_time() - c0)
            cpu += time.process_time() - c0
            print(f"seed {s} {arm}: RMSE-1 {ev['r1']:.2f} RMSE-H {ev['rH']:.2f} P {ev['rP']:.1f} "
                  f"({time.process_time() - c0:.0f} cpu s)", flush=True)
        rec = dict(recipe=RECIPE, code=code_fingerprint(), torch=torch.__version__,
                   results=dict(runs=runs, persistence=persist), cpu_s=cpu)
        rec["sha256"] = record_sha256(rec)
        PATH.write_text(json.dumps(rec, indent=1))  # after every arm: a stopped job leaves a valid record
        print(f"saved {PATH} with {arm} ({cpu:.0f} cpu s in all)", flush=True)


if __name__ == "__main__":
    main()
