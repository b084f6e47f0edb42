"""The student's SFT reference against its number of steps, on the first student tuning seed.

The students' reference (:func:`iclr25.align.weak_feedback.student_reference`) is SFT'd for
:data:`~iclr25.align.weak_feedback.STUDENT_SFT_STEPS` steps on the candidate responses.
``python -m iclr25.align.weak_feedback_sft_plateau`` (about 1 CPU-minute, one thread) runs the same SFT for each of
:data:`STEPS` on the first of :data:`~iclr25.align.weak_feedback.STUDENT_TUNING_SEEDS` and writes, per number of
steps, the mean negative log-likelihood per response token of held-out responses (the responses of the
:data:`N_HELD` pairs of D_u after the student's pairs, which no SFT reads), the off-support rate and the strict gold
reward of its sampled answers (:func:`~iclr25.align.weak_feedback.answer_stats`) into the committed record
(``sft_plateau``; its CPU seconds and the sha256 of this file and of the code it calls).
"""
from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.dpo import make_reference, pair_examples
from iclr25.common.digest import file_sha256
from iclr25.lm import encode_examples

STEPS = (40, 80, 160, 320)   #: SFT steps compared (80 is the students')
N_HELD = 200                 #: held-out pairs of D_u whose responses measure the validation NLL


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_sft_plateau.py", "weak_feedback.py", "dpo.py")}


def held_out_nll(model, vocab, pairs) -> float:
    """Mean negative log-likelihood per response token (prompt masked) of both responses of ``pairs``."""
    enc = encode_examples(vocab, pair_examples(pairs))
    model.eval()
    with torch.no_grad():
        logits = model(enc.ids)
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, enc.ids[:, 1:, None]).squeeze(-1)
        mask = enc.mask[:, 1:].float()
    return float(-(logp * mask).sum() / mask.sum())


def plateau(base, world, s: int, n_student: int = WF.N_STUDENT) -> list[dict[str, Any]]:
    """Per number of SFT steps: held-out NLL per token, off-support rate and strict gold reward of the samples."""
    d = WF.seed_data(world, s)
    held = d.unlabeled[n_student:n_student + N_HELD]
    out = []
    for steps in STEPS:
        ref = make_reference(copy.deepcopy(base), world.vocab, d.pool[:WF.N_LABELED], d.unlabeled[:n_student],
                             steps=steps, seed=d.seed)
        st = WF.answer_stats(ref.model, world, d)
        out.append({"steps": steps, "nll": held_out_nll(ref.model, world.vocab, held), "offsupport": st["offsupport"],
                    "sampled_strict": float(st["sampled_strict"].mean())})
        print("sft steps", steps, {k: round(v, 3) for k, v in out[-1].items()}, flush=True)
    return out


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    base, world = WF.load_world_lm("base")
    runs = WF.load_runs()
    rows = plateau(base, world, WF.STUDENT_TUNING_SEEDS[0])
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["sft_plateau"], kept["sft_plateau_seed"] = rows, WF.STUDENT_TUNING_SEEDS[0]
    kept["sft_plateau_cpu_s"], kept["sft_plateau_code_sha256"] = round(cpu, 1), code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("sft plateau, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
