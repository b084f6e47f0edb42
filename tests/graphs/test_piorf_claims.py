"""The verdict rules of the chapter graphs/piorf (iclr25.graphs.piorf_claims)."""

import numpy as np
import pytest

from iclr25.graphs import piorf_claims as C


def test_reach_ceiling_closed_forms():
    # nothing touched: no change; everything touched: the local change is the whole change
    assert C.reach_ceiling(np.array([0.0]), -0.5)[0] == pytest.approx(0.0)
    assert C.reach_ceiling(np.array([1.0]), -0.2)[0] == pytest.approx(0.2)
    # a perfect prediction (g = -1) on a share q: 1 - sqrt(1 - q), the oracle ceiling
    q = np.array([0.24])
    assert C.reach_ceiling(q, -1.0)[0] == pytest.approx(1 - np.sqrt(0.76))
    # share_from_ceiling inverts the oracle ceiling
    assert C.share_from_ceiling(1 - np.sqrt(0.76)) == pytest.approx(0.24)
    with pytest.raises(ValueError):
        C.reach_ceiling(np.array([1.5]), -0.1)


def test_unreachable_bar_is_never_no():
    ruled_out = (0.0, -0.01, 0.01)  # a 5 % reduction is ruled out by the interval
    assert C.registered_verdict(ruled_out, 0.05) is False
    holds, why = C.edge_verdict(ruled_out, 0.05, ceiling=np.array([0.02, 0.039]))
    assert holds is None and "out of reach" in why
    # reachable on one seed: the interval decides
    assert C.edge_verdict(ruled_out, 0.05, ceiling=np.array([0.02, 0.06]))[0] is False
    assert C.edge_verdict((-0.1, -0.12, -0.08), 0.05, ceiling=np.array([0.2]))[0] is True
    assert C.edge_verdict((-0.05, -0.08, -0.02), 0.05)[0] is None
    assert C.edge_verdict((-0.1, -0.12, -0.08), 0.05, gate=False)[0] is None


def test_local_margin_is_what_reach_attains():
    # only intervals wholly below zero count; the margin is their near end
    assert C.attained_margin([(-0.037, -0.079, 0.005), (-0.063, -0.107, -0.019)]) == pytest.approx(0.019)
    assert C.attained_margin([(-0.01, -0.03, 0.01)]) == 0.0
    assert C.local_verdict((0.019, -0.007, 0.045), 0.019)[0] is False
    assert C.local_verdict((0.001, -0.039, 0.040), 0.019)[0] is None
    assert C.local_verdict((-0.2, -0.25, -0.15), 0.019)[0] is True
    holds, why = C.local_verdict((0.019, -0.007, 0.045), 0.0)
    assert holds is None and "no attainable margin" in why


def test_all_references():
    assert C.all_references([(0.08, 0.02, 0.14), (0.056, -0.001, 0.113)]) is None
    assert C.all_references([(0.08, 0.02, 0.14), (0.06, 0.01, 0.11)]) is True
    assert C.all_references([(0.08, 0.02, 0.14), (-0.06, -0.1, -0.01)]) is False
    assert C.all_references([]) is None


def test_control_reading():
    base = dict(virtual=False, random10=False, random30=False, official10=False, official30=False)
    assert C.control_reading(base) == "no edge set pays"
    assert C.control_reading(dict(base, random30=True)) == "edges pay, PIORF's partners do not"
    assert C.control_reading(dict(base, random30=True, official30=None)) == "unresolved"
    assert C.control_reading(dict(base, virtual=True)) == "edges pay, PIORF's partners do not"
    assert C.control_reading(dict(base, virtual=None)) == "unresolved"
    assert C.control_reading(dict(base, official30=True, random30=True)) == "unresolved"
