"""Packets for an independent, blind adjudication of gpt-4o airline trials (alignment/tau-bench).

Stream ``disputes`` (the first): the disputed trials (reward != the reader's verdict of ``label_blind``) and, as
decoys so the adjudicator cannot tell a dispute from an agreement, ``ADJUDICATION_DECOYS`` trials where the two
agree, shuffled with ``numpy.random.default_rng(ADJUDICATION_SEED)``.
Stream ``agreements``: a stratified random sample of the agreements not yet adjudicated
(:func:`iclr25.agents.published.agreement_sample`: stratified by the reward's pass / fail, with weights).
Stream ``all``: every packet of both streams, re-shuffled with ``--seed``, for a second, independent adjudicator.

Each packet shows ONLY the task's user instruction and the conversation (``blind_transcript`` with longer cuts).
The reward, the reader's label, the settlement, the gold actions and the outputs are not printed. The key
(packet -> task, trial, ...) goes to a separate file the adjudicator does not open until every packet has a label.

    python scripts/tau_bench_adjudication_packets.py --traj gpt-4o-airline.json --stream agreements \\
        --out packets.txt --key key.json
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from iclr25.agents.published import (ADJUDICATION_DECOYS, ADJUDICATION_SEED, adjudication_sample, agreement_sample,
                                     blind_transcript, load_airline_table, load_blind_labels, reader_ok)

SEED, DECOYS = ADJUDICATION_SEED, ADJUDICATION_DECOYS
ALL_SEED = 2033


def _trajs(traj_file: str):
    return {(int(t["task_id"]), int(t["trial"])): t for t in json.load(open(traj_file))}


def _packet(t):
    return t["info"]["task"]["instruction"], blind_transcript(t["traj"], msg=700, reply=700, search=300)


def packets(traj_file: str, seed: int = SEED, decoys: int = DECOYS):
    """The first stream (disputes + decoys): [(packet, (task, trial), instruction, transcript)], disputed keys."""
    trajs = _trajs(traj_file)
    reward = {(r["task"], r["trial"]): int(r["reward"]) for r in load_airline_table()}
    blind = {(r["task"], r["trial"]): reader_ok(r["label_blind"]) for r in load_blind_labels()}
    dis = {k for k in blind if blind[k] != reward[k]}
    return [(p, k, *_packet(trajs[k])) for p, k in enumerate(adjudication_sample(seed, decoys))], dis


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traj", required=True)
    ap.add_argument("--stream", choices=("disputes", "agreements", "all"), default="disputes")
    ap.add_argument("--seed", type=int, default=ALL_SEED, help="shuffle seed of the 'all' stream")
    ap.add_argument("--out", required=True)
    ap.add_argument("--key", required=True)
    a = ap.parse_args()
    if a.stream == "disputes":
        pk, dis = packets(a.traj)
        key = {p: [k[0], k[1], int(k in dis)] for p, k, _, _ in pk}
    else:
        trajs = _trajs(a.traj)
        agr = agreement_sample()
        if a.stream == "agreements":
            pk = [(p, (t, r), *_packet(trajs[t, r])) for p, (t, r, _, _) in enumerate(agr)]
            key = {p: list(x) for p, x in enumerate(agr)}
        else:
            ks = [(k, "disputes", p) for p, k in enumerate(adjudication_sample())]
            ks += [((t, r), "agreements", p) for p, (t, r, _, _) in enumerate(agr)]
            order = np.random.default_rng(a.seed).permutation(len(ks))
            pk = [(p, ks[int(i)][0], *_packet(trajs[ks[int(i)][0]])) for p, i in enumerate(order)]
            key = {p: [*ks[int(i)][0], ks[int(i)][1], ks[int(i)][2]] for p, i in enumerate(order)}
    with open(a.out, "w") as f:
        for p, _, ins, tr in pk:
            f.write(f"===== PACKET {p} =====\nINSTRUCTION: {ins}\n{tr}\n\n")
    json.dump(key, open(a.key, "w"))


if __name__ == "__main__":
    main()
