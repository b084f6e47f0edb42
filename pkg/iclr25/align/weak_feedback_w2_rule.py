"""The human's and the prompt-type rule's label accuracy on the size claim's extra seeds (no training).

The committed sweep (:mod:`iclr25.align.weak_feedback`) stores the human's accuracy on D_u and the rule's
(``rule_sweep``) for its 8 evaluation seeds only, while the tuned teachers (``size_tuned``) cover those seeds and
:data:`~iclr25.align.weak_feedback.W2_SEEDS`. ``python -m iclr25.align.weak_feedback_w2_rule`` (a few CPU-seconds)
writes, for every seed of :data:`~iclr25.align.weak_feedback.W2_SEEDS`, the
:func:`~iclr25.align.weak_feedback.kind_accuracy` of the human's labels of D_u and of
:func:`~iclr25.align.weak_feedback.rule_labels` at every ``|D_l|`` of :data:`~iclr25.align.weak_feedback.SIZES`
into the committed record (``rule_w2``: one row per seed shaped as a ``rule_sweep`` row plus ``"human"``; its CPU
seconds and the sha256 of this file and of the code it calls), so the 400-label rows of the tuned teacher can be
judged on all 24 seeds it was run on.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch

import iclr25.align.weak_feedback as WF
from iclr25.common.digest import file_sha256


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_rule.py", "weak_feedback.py", "dpo.py")}


def rule_rows(world, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """Per seed: ``{"seed", "human": kind_accuracy of the human's labels of D_u, str(n): the rule's, per n in SIZES}``."""
    out = []
    for s, row in zip(seeds, WF.rule_sweep(world, seeds)):
        d = WF.seed_data(world, s)
        out.append({**row, "human": WF.kind_accuracy(d.human_u, d.unlabeled)})
    return out


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    world = WF.load_world_lm("small")[1]
    runs = WF.load_runs()
    rows = rule_rows(world, WF.W2_SEEDS)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["rule_w2"], kept["rule_w2_cpu_s"], kept["rule_w2_code_sha256"] = rows, round(cpu, 1), code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("rule and human on W2_SEEDS, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
