"""Packets for an independent, blind adjudication of the gpt-4o airline trials where the reward and the
reward-blind reader disagree (alignment/tau-bench).

Selects the disputed trials (reward != the reader's verdict of ``label_blind``) and, as decoys so the adjudicator
cannot tell a dispute from an agreement, ``--decoys`` trials where the two agree, shuffles them with
``numpy.random.default_rng(SEED)`` and writes, per packet, ONLY the task's user instruction and the conversation
(``blind_transcript`` with longer cuts). The reward, the reader's label, the settlement, the gold actions and the
outputs are not printed. The key (packet -> task, trial) goes to a separate file the adjudicator does not open
until every packet has a label.

    python scripts/tau_bench_adjudication_packets.py --traj gpt-4o-airline.json --out packets.txt --key key.json
"""
from __future__ import annotations

import argparse
import json

from iclr25.agents.published import (ADJUDICATION_DECOYS, ADJUDICATION_SEED, adjudication_sample, blind_transcript,
                                     load_airline_table, load_blind_labels, reader_ok)

SEED, DECOYS = ADJUDICATION_SEED, ADJUDICATION_DECOYS


def packets(traj_file: str, seed: int = SEED, decoys: int = DECOYS):
    trajs = {(int(t["task_id"]), int(t["trial"])): t for t in json.load(open(traj_file))}
    reward = {(r["task"], r["trial"]): int(r["reward"]) for r in load_airline_table()}
    blind = {(r["task"], r["trial"]): reader_ok(r["label_blind"]) for r in load_blind_labels()}
    dis = {k for k in blind if blind[k] != reward[k]}
    out = []
    for p, k in enumerate(adjudication_sample(seed, decoys)):
        t = trajs[k]
        out.append((p, k, t["info"]["task"]["instruction"], blind_transcript(t["traj"], msg=700, reply=700, search=300)))
    return out, dis


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traj", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--key", required=True)
    a = ap.parse_args()
    pk, dis = packets(a.traj)
    with open(a.out, "w") as f:
        for p, _, ins, tr in pk:
            f.write(f"===== PACKET {p} =====\nINSTRUCTION: {ins}\n{tr}\n\n")
    json.dump({p: [k[0], k[1], int(k in dis)] for p, k, _, _ in pk}, open(a.key, "w"))


if __name__ == "__main__":
    main()
