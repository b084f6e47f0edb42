"""The random-search bar of ``theory/zo-pog`` at the paper's dev size: the 32-example template study.

The 128-example dev set of the deciding study is four times the learners' 32 training examples, which
makes best-of-k random search (selected on that dev set, with no training queries) a strong bar. The
shared-template study of :mod:`iclr25.blackbox.zo_pog_template` selects on 32 dev examples, the size of
the training set, as the paper does (16 + 16 shots per class). Fixed here before its run: on each of
its evaluation seeds (0-49), :data:`N_DRAWS` random prompts drawn for the four positions exactly as the
deciding study draws them (generator ``RANDOM_OFFSET + s`` over the seed's candidates, z = 0), each
scored on the study's 32-example dev set, and on test wherever a draw leads all earlier ones on dev,
so that the best on dev of any first k can be read (:func:`iclr25.blackbox.zo_pog_verdicts.best_of_k`).

``python -m iclr25.blackbox.zo_pog_bar32`` writes ``results/zo-pog-bar32.json`` (one process, one
torch thread) with the sha256 of its content and of the functions that made it.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox import zo_pog_template as tpl
from iclr25.blackbox.api import BlackBoxLM
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source

N_DRAWS = 64
RECORD = Path(__file__).parent / "results" / "zo-pog-bar32.json"


def draws32(s: int, device: torch.device | str = "cpu") -> dict:
    """Dev (32 examples) and test accuracy (%) of seed ``s``'s random prompts in the template study; test
    only for the draws that lead every earlier draw on dev."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = tpl.setup(s, device)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
    gen = torch.Generator().manual_seed(bud.RANDOM_OFFSET + s)
    P = cands[torch.randint(cands.numel(), (N_DRAWS, study.N_POS), generator=gen)]
    dev = [round(100 * bb.evaluate(p, None, enc["dev"]), 2) for p in P]
    leaders = [i for i in range(len(dev)) if all(dev[i] > d for d in dev[:i])]
    return {"dev": dev, "test": {str(i): round(100 * bb.evaluate(P[i], None, enc["test"]), 2) for i in leaders}}


def code_sha256() -> str:
    """The functions that make the record, with the constants."""
    src = [strip_source(inspect.getsource(f)) for f in (draws32, tpl.setup, make)]
    consts = dict(N=N_DRAWS, OFF=bud.RANDOM_OFFSET, SEEDS=study.EVAL_SEEDS, T=tpl.TEMPLATE_T, NPOS=study.N_POS)
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def make() -> dict:
    """Every evaluation seed's draws; the record."""
    t0 = time.process_time()
    draws = {str(s): draws32(s) for s in tqdm(study.EVAL_SEEDS, desc="random prompts, 32-example dev")}
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_bar32 (one torch thread, one process)",
              "code_sha256": code_sha256(), "seeds": list(study.EVAL_SEEDS), "draws": draws,
              "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_bar32")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["cpu_s"], "s CPU")
