"""The dense-ladder study's bookkeeping: the parts of a cell on a closed-form regret."""

import numpy as np
import pytest

from iclr25.bandits import ladder_study as study


class _Result:
    def __init__(self, regret):
        self.regret = regret
        self.info = {}


@pytest.mark.parametrize("method,M", [("elimination", 2), ("elimination", 3), ("frozen LinUCB", 3),
                                      ("elimination, geometric grid", 3), ("frozen LinUCB, geometric grid", 2)])
def test_run_cell_parts_closed_form(monkeypatch, method, M):
    """With regret (s + 1) t in round t = 1..T of instance s, the cell's total is (s + 1) T (T + 1) / 2,
    its ``post`` (after t_1) equals the total minus the first batch's (s + 1) t_1 (t_1 + 1) / 2, and its
    ``last`` (after t_(M-1)) the total minus (s + 1) t_(M-1) (t_(M-1) + 1) / 2."""
    gaps, streams, T = np.array([0.1, 1.0]), 3, 500
    env = study.env_of(gaps, streams)
    S = len(env.theta)
    fake = lambda env_, T_, grid, **kw: _Result((np.arange(S)[:, None] + 1.0) * np.arange(1, T_ + 1)[None, :])
    monkeypatch.setattr(study, "batched_elimination", fake)
    monkeypatch.setattr(study, "batched_linucb", fake)
    total, post, last = study.run_cell(method, M, T, env=env)
    grid = study.grid_of(method, T, M)
    t1, tl = int(grid[0]), int(grid[-2])
    scale = (np.arange(S) + 1.0).reshape(len(gaps), streams)
    tri = lambda n: n * (n + 1) / 2
    assert total.shape == post.shape == last.shape == (len(gaps), streams)
    np.testing.assert_allclose(total, scale * tri(T))
    np.testing.assert_allclose(post, total - scale * tri(t1))
    np.testing.assert_allclose(last, total - scale * tri(tl))
    if M == 2:
        np.testing.assert_allclose(last, post)


def test_record_loads_and_has_every_part():
    """The committed record passes its sha256 check and holds every (method, M, part) array."""
    record, arrays = study.load()
    for method in study.BATCHED:
        for M in study.MS:
            for part in study.PARTS:
                a = arrays[study.key(method, M, part)]
                assert a.shape == (len(study.HORIZONS), study.N_GAPS, study.STREAMS)
    assert arrays[study.key("LinUCB", None, "total")].shape == (len(study.HORIZONS), study.N_GAPS, study.STREAMS)
    assert study.has_long(arrays)
    for k in [study.key(m, M, p, long=True) for m in study.LONG_METHODS for M in study.MS for p in study.PARTS]:
        assert arrays[k].shape == (len(study.LONG_HORIZONS), study.N_GAPS, study.STREAMS)
    for m in study.TUNED:
        for M in study.TUNED_MS:
            for p in study.PARTS + (("kept",) if m == "elimination tuned" else ()):
                assert arrays[study.key(m, M, p)].shape == (len(study.HORIZONS), study.N_GAPS, study.STREAMS)


def test_record_code_sha256_and_reuse_refused_on_mismatch(monkeypatch, tmp_path):
    """The record holds the sha256 of the code that made it, equal to the current code's; main(reuse=True)
    refuses to reuse a record whose code sha256 differs (before any job runs)."""
    record, _ = study.load()
    assert set(record["code_sha256"]) == set(study.CODE)
    assert study.code_matches(record)
    other = tmp_path / "ladder-study.json"
    import json
    raw = json.loads(study.RECORD.read_text())
    raw["code_sha256"] = {name: "0" * 64 for name in study.CODE}
    other.write_text(json.dumps(raw))
    monkeypatch.setattr(study, "RECORD", other)
    assert not study.code_matches(study.load()[0])
    ran = []
    monkeypatch.setattr(study, "_job", lambda job: ran.append(job))
    with pytest.raises(ValueError, match="other code"):
        study.main(reuse=True)
    assert not ran


def test_tuned_frozen_challenger_uses_its_scale(monkeypatch):
    """The tuned frozen-LinUCB challenger runs batched_linucb with beta_scale = FROZEN_C on the geometric
    grid; the untuned one with the theory radius (scale 1)."""
    env = study.env_of(np.array([0.5]), 2)
    seen = []

    def fake(env_, T_, grid, **kw):
        seen.append((list(grid), kw.get("beta_scale", 1.0)))
        return _Result(np.zeros((len(env_.theta), T_)))
    monkeypatch.setattr(study, "batched_linucb", fake)
    study.run_cell("frozen LinUCB tuned, geometric grid", 2, 400, env=env)
    study.run_cell("frozen LinUCB, geometric grid", 2, 400, env=env)
    geo = list(study.grid_of("frozen LinUCB, geometric grid", 400, 2))
    assert seen == [(geo, study.FROZEN_C), (geo, 1.0)]


def test_long_keys_and_concatenation():
    """The long extension's arrays are named apart from the base ones; with_long stacks the base horizons, then
    the long ones; has_long needs every long method's parts and sequential LinUCB."""
    assert study.key("elimination", 3, "post", long=True) == "elimination|3|post|long"
    assert study.key("LinUCB", None, "total", long=True) == "LinUCB|T|total|long"
    G, R = 2, 3
    base = np.arange(len(study.HORIZONS) * G * R, dtype=float).reshape(len(study.HORIZONS), G, R)
    long_ = -np.ones((len(study.LONG_HORIZONS), G, R))
    arrays = {study.key("elimination", 2, "total"): base, study.key("elimination", 2, "total", long=True): long_}
    both = study.with_long(arrays, "elimination", 2, "total")
    assert both.shape == (len(study.HORIZONS) + len(study.LONG_HORIZONS), G, R)
    np.testing.assert_array_equal(both[:len(study.HORIZONS)], base)
    np.testing.assert_array_equal(both[len(study.HORIZONS):], long_)
    assert not study.has_long(arrays)
    full = {study.key(m, M, p, long=True): long_ for m in study.LONG_METHODS for M in study.MS for p in study.PARTS}
    assert not study.has_long(full)
    full[study.key("LinUCB", None, "total", long=True)] = long_
    assert study.has_long(full)
    assert all(T_long > max(study.HORIZONS) for T_long in study.LONG_HORIZONS)


def test_tuned_head_to_head_shares_the_tuned_grid_and_scales(monkeypatch):
    """Both tuned methods run on the tuned elimination's own minimax grid (u = ELIM_C^2 u_eff), the paper's
    algorithm with beta_scale ELIM_C, frozen LinUCB with SAME_GRID_C; the kept part comes with elimination only."""
    env = study.env_of(np.array([0.5]), 2)
    seen = []

    def fake(name):
        def run(env_, T_, grid, **kw):
            seen.append((name, list(grid), kw.get("beta_scale", 1.0)))
            out = _Result(np.zeros((len(env_.theta), T_)))
            out.info = {"opt_kept_runs": np.ones(len(env_.theta))} if name == "elim" else {}
            return out
        return run
    monkeypatch.setattr(study, "batched_elimination", fake("elim"))
    monkeypatch.setattr(study, "batched_linucb", fake("frozen"))
    T, M = 2000, 3
    e = study.run_cell_kept("elimination tuned", M, T, env=env)
    f = study.run_cell_kept("frozen LinUCB tuned, same grid", M, T, env=env)
    tuned_grid = list(study.batch_schedule(T, M, 1, study.ELIM_C ** 2 * study.u_of(T, M)))
    assert tuned_grid != list(study.grid_of("elimination", T, M))
    assert seen == [("elim", tuned_grid, study.ELIM_C), ("frozen", tuned_grid, study.SAME_GRID_C)]
    assert e[3] is not None and e[3].shape == (1, 2) and f[3] is None
