"""The forecaster-alone diagnosis of the PreWorld chapter (``iclr25.occupancy.forecast``): the ego
alignment is the fill-last ego copy, the zeroed-state arm ignores the state, training is deterministic."""

import pytest
import torch
import torch.nn.functional as F

from iclr25.occupancy import forecast as fo
from iclr25.occupancy.train import build_data, ego_copy
from iclr25.occupancy.world import CURRENT, HORIZON, N_CLASSES, make_rig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    return build_data(12, 5, make_rig())


def test_ego_align_of_one_hot_occupancy_is_the_fill_last_ego_copy(data):
    occ = data["occ"][:, CURRENT]
    x = F.one_hot(occ, N_CLASSES).permute(0, 4, 1, 2, 3).float()
    copy = ego_copy(occ, data["speed"], steps=HORIZON, fill="last")
    for f in range(HORIZON):
        x = fo.ego_align(x, data["speed"])
        assert torch.equal(x.argmax(1), copy[:, f])
    assert (data["speed"] > 0).any() and not torch.equal(copy[:, 0], occ)


def test_zeroed_state_arm_forecasts_the_same_whatever_the_state(data):
    torch.manual_seed(0)
    m = fo.OracleForecaster(use_state=False)
    a = fo.oracle_predict(m, data)
    b = fo.oracle_predict(m, dict(data, state=torch.zeros_like(data["state"]) + 3.0))
    assert torch.equal(a, b) and a.shape == (12, HORIZON) + data["occ"].shape[2:]


def test_training_is_deterministic_and_reduces_the_loss(data):
    logs = [[], []]
    for log in logs:
        fo.train_oracle(data, align=True, steps=30, seed=1, log=log)
    assert logs[0] == logs[1]
    assert sum(logs[0][-5:]) < sum(logs[0][:5])


def test_unaligned_oracle_forecaster_is_the_world_models_forecaster(data):
    """align=False runs exactly StateForecaster.forward + OccHead on the embedded true occupancy; align=True with a
    standing ego is the same forecast."""
    torch.manual_seed(0)
    m = fo.OracleForecaster(align=False)
    occ, state = data["occ"][:, CURRENT], data["state"]
    x = F.one_hot(occ, N_CLASSES).permute(0, 4, 1, 2, 3).float()
    feat = m.emb(torch.cat([x, m.coords.expand(len(x), -1, -1, -1, -1)], 1))
    outs, wp_ref = m.forecaster(feat, state, HORIZON)
    logits, wp = m(occ, state, data["speed"])
    assert len(logits) == HORIZON and torch.equal(wp, wp_ref)
    assert all(torch.equal(lg, m.occ(f)) for lg, f in zip(logits, outs))
    m.align = True
    still, _ = m(occ, state, torch.zeros_like(data["speed"]))
    moved, _ = m(occ, state, data["speed"])
    assert all(torch.equal(a, b) for a, b in zip(still, logits)) and not torch.equal(moved[0], logits[0])
