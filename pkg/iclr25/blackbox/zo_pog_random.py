"""The random-prompt reference of the chapter ``theory/zo-pog``: what a prompt drawn at random does.

For every evaluation seed of :mod:`iclr25.blackbox.zo_pog_study`, ``N_RANDOM`` prompts of
``N_POS`` tokens are drawn uniformly from that seed's candidate tokens (the space every method
searches) and scored on the seed's test set with z = 0. Their per-seed distribution is the bar a
learned prompt must clear to count as competent: a method that does not beat the median random
prompt of its seed has learned nothing about the task. (The untouched start of BBT and ZO-only is
one such draw; 64 draws give the distribution instead of one sample of it.)

``python -m iclr25.blackbox.zo_pog_random`` writes ``results/zo-pog-random.json`` with the
sha256 of its content and of the code that made it (:func:`code_sha256`, docstrings and comments
excluded, so that only a change of what the code does invalidates the record). One torch thread.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import torch

from iclr25.blackbox import api, zo_pog_study as study
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source

N_RANDOM = 64                      # random prompts per seed
SEED_OFFSET = 20_000               # the random prompts of seed s come from generator seed SEED_OFFSET + s
RECORD = Path(__file__).parent / "results" / "zo-pog-random.json"


def random_prompts(s: int) -> torch.Tensor:
    """The ``N_RANDOM`` random prompts (token ids, (N_RANDOM, N_POS)) of evaluation seed ``s``."""
    _, cands, _ = study.setup(s)
    gen = torch.Generator().manual_seed(SEED_OFFSET + s)
    return cands[torch.randint(cands.numel(), (N_RANDOM, study.N_POS), generator=gen)]


def seed_accuracies(s: int, device: torch.device | str = "cpu") -> list[float]:
    """Test accuracy (%, rounded to 0.01) of each random prompt of seed ``s`` (z = 0)."""
    lm, vocab = study.model_and_vocab()
    enc, _, _ = study.setup(s, device)
    bb = api.BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
    return [round(100 * bb.evaluate(p, None, enc["test"]), 2) for p in random_prompts(s)]


def code_sha256() -> str:
    """sha256 of what determines the record: the black box, the study's setup and this script's
    drawing and scoring (docstrings and comments excluded), with their constants."""
    src = [strip_source(inspect.getsource(api))]
    src += [strip_source(inspect.getsource(f)) for f in (study._setup, random_prompts, seed_accuracies)]
    consts = dict(N_RANDOM=N_RANDOM, SEED_OFFSET=SEED_OFFSET, TASK=study.TASK, N_POS=study.N_POS,
                  N_CAND=study.N_CAND, N_TEST=study.N_TEST, LEXICON=study.LEXICON, EXCLUDE=study.EXCLUDE,
                  TEMPLATE=study.TEMPLATE, D=study.D_INTRINSIC, seeds=study.EVAL_SEEDS)
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def _digest(record: dict) -> str:
    return record_sha256(record)


def make() -> dict:
    """Score the random prompts of every evaluation seed; return the record."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    record = {
        "recipe": "nice -n 10 python -m iclr25.blackbox.zo_pog_random (one torch thread, one process)",
        "code_sha256": code_sha256(), "n_random": N_RANDOM, "seed_offset": SEED_OFFSET,
        "seeds": list(study.EVAL_SEEDS),
        "test_acc": {str(s): seed_accuracies(s) for s in study.EVAL_SEEDS},
    }
    record["cpu_s"] = round(time.process_time() - t0, 1)
    record["sha256"] = _digest(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_random")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["cpu_s"], "s CPU")
