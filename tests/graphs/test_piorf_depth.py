"""The hop mask of the deeper PIORF run (nodes an added edge can reach) against the hop ball of the rewiring module."""

import networkx as nx
import torch
from torch_geometric.utils import from_networkx

from iclr25.graphs.piorf_depth import hop_mask
from iclr25.graphs.rewiring import hop_ball


def test_hop_mask_is_the_union_of_hop_balls():
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(6, 7))
    ei = from_networkx(g).edge_index
    n = g.number_of_nodes()
    for hops in range(4):
        want = hop_ball(ei, n, 3, hops) | hop_ball(ei, n, 30, hops)
        got = hop_mask(ei, n, torch.tensor([3, 30]), hops)
        assert torch.equal(got, want)
    # on a path the mask of the end node is a prefix of the right length
    path = from_networkx(nx.path_graph(10)).edge_index
    assert hop_mask(path, 10, torch.tensor([0]), 3).tolist() == [True] * 4 + [False] * 6


def test_record_matches_the_recipe_the_code_and_its_checksum():
    import json

    import numpy as np
    import pytest

    from iclr25.common.digest import file_sha256
    from iclr25.graphs import piorf_depth as P

    rec = P.load()
    assert rec["recipe"] == json.loads(json.dumps(P.RECIPE))
    # the script is the chapter's own module; mesh, rewiring, curvature and flow are checked by the chapter,
    # which re-trains the first losses of an evaluation run live
    assert rec["code_sha256"]["piorf_depth.py"] == file_sha256(P.HERE / "piorf_depth.py")
    res = rec["results"]
    for m in P.RECIPE["methods"]:
        table = {float(k): v for k, v in res["tuning"][m].items()}
        assert res["lr"][m] == min(table, key=table.get)   # the chosen rate is the grid's argmin
        assert min(table) < res["lr"][m] < max(table)      # ... and interior (the grid was extended if needed)
        for s in P.RECIPE["seeds"]:
            r = res["runs"][f"{m},{s}"]
            assert r["steps"] <= P.RECIPE["max_steps"] and len(r["loss_head"]) == P.RECIPE["n_loss_head"]
            assert r["curve"][-1][0] == r["steps"]  # the last reading is where the run stopped
    # the two looks: the first read the first seeds, the second added the rest; CPU seconds add up
    looks = rec["looks"]
    assert [s for lk in looks for s in lk["seeds"]] == P.RECIPE["seeds"]
    assert [len(lk["seeds"]) for lk in looks] == [P.RECIPE["looks"][0]] + list(np.diff(P.RECIPE["looks"]))
    assert rec["cpu_s"] == pytest.approx(sum(lk["cpu_s"] for lk in looks))
    assert looks[-1]["code_sha256"] == rec["code_sha256"]


def test_record_edits_are_detected(tmp_path):
    import json

    import pytest

    from iclr25.graphs import piorf_depth as P

    rec = json.loads(P.PATH.read_text())
    rec["results"]["runs"]["piorf,0"]["r1"] *= 0.9
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        P.load(path)
