"""The control experiments of the PreWorld chapter (``iclr25.occupancy.controls``): the mover mask
of the aux rays, the confusion matrices the results file stores, and the committed files (results
of the controls, the 100 %-label PreWorld model) are what the script makes."""

import numpy as np
import pytest
import torch

from iclr25.occupancy import controls as c
from iclr25.occupancy import pretrained as pt
from iclr25.occupancy.metrics import occ_confusion
from iclr25.occupancy.train import build_data, predict
from iclr25.occupancy.world import CAR, CURRENT, N_CLASSES, PEDESTRIAN, make_rig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    return build_data(12, 5, make_rig())


def test_mover_mask_drops_exactly_the_aux_rays_labelled_as_movers(data):
    mover = (data["sem"] == CAR) | (data["sem"] == PEDESTRIAN)
    aux = torch.ones(data["mask"].shape[1], dtype=torch.bool)
    aux[CURRENT] = False
    assert mover[:, aux].any()                                            # the instance has such rays
    assert torch.equal(data["aux_static"][:, aux], data["aux_mask"][:, aux] & ~mover[:, aux])
    assert torch.equal(data["aux_static"][:, CURRENT], data["aux_mask"][:, CURRENT])   # own rays all kept


def test_confusions_split_by_ego_speed_add_up_to_the_whole(data):
    torch.manual_seed(0)
    model = pt.WorldModel(make_rig())
    h = c.confusions(model, data)
    pred, _ = predict(model, data, torch.device("cpu"))
    for f, k in enumerate(("now", "f1", "f2", "f3")):
        whole = occ_confusion(pred[:, f], data["occ"][:, CURRENT + f], N_CLASSES)
        assert torch.equal(torch.tensor(h["still"][k]) + torch.tensor(h["moving"][k]), whole)
    n_moving = int((data["speed"] > 0).sum())
    assert np.sum(h["moving"]["now"]) == n_moving * data["occ"][0, 0].numel()


def test_no_state_and_no_waypoint_arms_change_only_their_input(data):
    d = c.no_state(c.no_wp(data))
    assert float(d["state"].abs().sum()) == 0 and float(d["traj"].abs().sum()) == 0
    assert d["images"] is data["images"]


def test_committed_control_results_load_and_reproduce():
    j = c.load_controls()
    seeds = set(j["runs"]["reference"])
    assert all(set(runs) == seeds for runs in j["runs"].values()) and len(seeds) >= 2
    for name, r in j["stage1"].items():
        assert len(r["losses"]) == c.CTRL_RECIPE["steps"] and len(r["sha256"]) == 64
    s = min(int(k) for k in seeds)
    d = pt._data(pt.VARIANTS["main-s0"])
    _, ls = c.train_stage1(f"maskaux-s{s}", stop_after=3, data=d)
    np.testing.assert_allclose(ls, j["stage1"][f"maskaux-s{s}"]["losses"][:3], rtol=2e-3)
    # the controls' main stage 1 is the main recipe's run cut at 800 steps: its first steps are the committed model's
    _, ls = c.train_stage1(f"main-s{s}", stop_after=3, data=d)
    np.testing.assert_allclose(ls, pt.load_pretrained(f"main-s{s}")[1]["losses"][:3], rtol=2e-3)
    assert j["recipe"] == c.CTRL_RECIPE and (j["lr"], j["steps"]) == c.ctrl_recipe()


def test_committed_pw100_loads_and_reproduces():
    model, meta = c.load_pw100()
    assert c.PW100.stat().st_size < 400_000                     # fp16
    assert str(meta["steps"]) == max(meta["scores"], key=meta["scores"].get)
    _, _, ls = c.train_pw100(0, data=pt._data(pt.VARIANTS["main-s0"]), val={}, stop_after=3)
    np.testing.assert_allclose(ls, meta["losses"][:3], rtol=2e-3)
