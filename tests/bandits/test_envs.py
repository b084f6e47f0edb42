"""Environment tests: block-consistent common random numbers, unit-ball contexts, realizable means."""

import numpy as np
import pytest

from iclr25.bandits import (DigitsBanditEnv, LinearContextualEnv, make_needle_env,
                            make_synthetic_env, random_theta)
from iclr25.bandits.envs import squash_radius


@pytest.mark.parametrize("context", ["gaussian", "sphere", "anisotropic"])
def test_rounds_are_consistent_across_block_boundaries(context):
    env = make_synthetic_env(3, 4, 6, seed=5, context=context)
    env.block = 32
    X, e = env.rounds(0, 100)
    X2, e2 = env.rounds(30, 70)
    np.testing.assert_array_equal(X[:, 30:70], X2)
    np.testing.assert_array_equal(e[:, 30:70], e2)
    # a fresh environment with the same seed reproduces the stream (common random numbers)
    env3 = make_synthetic_env(3, 4, 6, seed=5, context=context)
    env3.block = 32
    np.testing.assert_array_equal(env3.rounds(0, 100)[0], X)
    assert np.linalg.norm(X, axis=-1).max() <= 1 + 1e-12
    if context == "sphere":
        np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0)


def test_chunks_cover_rounds_once():
    env = make_synthetic_env(2, 3, 4, seed=0)
    env.block = 16
    starts, total = [], 0
    for t, X, _ in env.chunks(5, 70):
        assert t == 5 + total
        total += X.shape[1]
        starts.append(t)
    assert total == 65


def test_mean_rewards_are_linear():
    env = make_synthetic_env(2, 3, 5, seed=1)
    X, _ = env.rounds(0, 10)
    mu = env.mean_rewards(X)
    np.testing.assert_allclose(mu[1, 4, 2], X[1, 4, 2] @ env.theta[1])
    np.testing.assert_allclose(np.linalg.norm(random_theta(4, 7, 0), axis=1), 1.0)


def test_bad_context_kind_is_rejected():
    with pytest.raises(ValueError, match="valid"):
        LinearContextualEnv(np.ones((1, 2)), K=3, context="uniform")


def test_digits_env_disjoint_encoding():
    env = DigitsBanditEnv(2, seed=0, pca_dim=3)
    X, _ = env.rounds(0, 20)
    assert X.shape == (2, 20, 10, 40)
    # action a uses only its own block of coordinates, the same image features in every block
    blocks = X.reshape(2, 20, 10, 10, 4)
    off = blocks.copy()
    off[:, :, np.arange(10), np.arange(10)] = 0
    assert np.abs(off).max() == 0
    np.testing.assert_allclose(blocks[:, :, 0, 0], blocks[:, :, 7, 7])
    assert np.linalg.norm(X, axis=-1).max() <= 1 + 1e-12
    assert env.oracle_accuracy > 0.5  # the linear oracle is a sensible classifier


def test_squashed_contexts_never_tie_in_norm():
    # clipping at norm 1 made many actions tie exactly; the tanh squash is strictly increasing
    for context in ("gaussian", "anisotropic"):
        env = make_synthetic_env(2, 5, 20, seed=3, context=context)
        X, _ = env.rounds(0, 200)
        norms = np.linalg.norm(X, axis=-1)
        assert norms.max() < 1.0
        top2 = np.sort(norms, axis=-1)[..., -2:]
        assert (top2[..., 1] - top2[..., 0]).min() > 1e-12
    r = np.array([0.0, 1e-3, 0.5, 1.0, 3.0])
    np.testing.assert_allclose(r * squash_radius(r), np.tanh(r))


def test_basis_contexts_are_a_jittered_fixed_action_set():
    env = make_needle_env(np.array([0.05, 0.5]), R=3, d=4, seed=1, jitter=0.1)
    assert env.S == 6 and env.K == env.d == 4 and env.context == "basis"
    X, _ = env.rounds(0, 50)
    norms = np.linalg.norm(X, axis=-1)
    assert norms.max() <= 1 + 1e-12 and norms.min() >= 0.8 - 1e-12  # in [1 - 2 jitter, 1]
    # action a stays within jitter of e_a
    np.testing.assert_array_less(np.abs(X - 0.9 * np.eye(4)).max(), 0.1 + 1e-12)
    # one best action per instance, better than the others by exactly the instance's gap
    gaps = np.repeat([0.05, 0.5], 3)
    np.testing.assert_allclose(np.sort(env.theta, axis=1)[:, -1], gaps)
    assert ((env.theta > 0).sum(1) == 1).all()
    with pytest.raises(ValueError, match="basis"):
        LinearContextualEnv(np.ones((1, 3)), K=4, context="basis")
    with pytest.raises(ValueError):
        make_needle_env(np.array([0.0, 0.5]), R=2, d=3)


def test_shared_contexts_one_stream_independent_noise():
    from iclr25.bandits import TiledEnv, make_needle_env
    env = make_needle_env(np.array([0.1, 0.5]), 2, 4, seed=3, noise_sd=0.2, shared_contexts=True)
    X, eps = env.rounds(500, 1100)  # spans three blocks
    assert X.shape == (4, 600, 4, 4)
    for s in range(1, 4):
        np.testing.assert_array_equal(X[s], X[0])
        assert not np.allclose(eps[s], eps[0])
    np.testing.assert_allclose(np.linalg.norm(X[0] - 0.9 * np.eye(4), axis=-1), 0.1)
    Xt, et = TiledEnv(env, 2).rounds(500, 1100)
    np.testing.assert_array_equal(Xt[5], X[1])
    np.testing.assert_array_equal(et[4:], eps)


def test_streams_one_context_stream_per_replicate():
    from iclr25.bandits import TiledEnv, make_needle_env
    env = make_needle_env(np.array([0.1, 0.5, 0.9]), 2, 4, seed=3, noise_sd=0.2, streams=2)
    X, eps = env.rounds(500, 1100)  # spans three blocks
    assert X.shape == (6, 600, 4, 4)
    for s in range(2, 6):  # instance s sees stream s % 2, with its own noise
        np.testing.assert_array_equal(X[s], X[s % 2])
        assert not np.allclose(eps[s], eps[s % 2])
    assert not np.allclose(X[0], X[1])
    Xt, et = TiledEnv(env, 2).rounds(500, 1100)
    np.testing.assert_array_equal(Xt[6 + 3], X[3])
    np.testing.assert_array_equal(et[6:], eps)
    with pytest.raises(ValueError):
        make_needle_env(np.array([0.1, 0.5, 0.9]), 2, 4, streams=4)


def test_sign_vectors_are_the_hypercube_corners():
    from iclr25.bandits import sign_vectors
    V = sign_vectors(3)
    assert V.shape == (8, 3)
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0)
    # all 2^d sign patterns, each exactly once
    assert len({tuple(np.sign(v)) for v in V}) == 8
    np.testing.assert_allclose(V[0], np.ones(3) / np.sqrt(3))  # bit pattern 0: all +


def test_sign_env_best_action_is_sigma_and_gaps_count_flipped_signs():
    from iclr25.bandits import make_sign_env, sign_vectors
    d, jitter = 4, 0.1
    env = make_sign_env(np.array([0.2, 1.0]), R=3, d=d, seed=2, jitter=jitter)
    assert env.S == 6 and env.K == 2 ** d and env.context == "signs"
    np.testing.assert_allclose(np.linalg.norm(env.theta, axis=1), np.repeat([0.2, 1.0], 3))
    X, _ = env.rounds(0, 20)
    assert np.linalg.norm(X, axis=-1).max() <= 1 + 1e-12
    np.testing.assert_array_less(np.abs(X - (1 - jitter) * sign_vectors(d)).max(), jitter + 1e-12)
    # without jitter the mean of corner a is eps <sigma, s_a> / d: flipping k signs costs 2 k eps / d
    V = sign_vectors(d)
    for s in range(env.S):
        eps = np.linalg.norm(env.theta[s])
        sigma = np.sign(env.theta[s])
        mu = V @ env.theta[s]
        flips = (np.sign(V) != sigma).sum(1)
        np.testing.assert_allclose(mu.max() - mu, 2 * flips * eps / d, atol=1e-12)
    with pytest.raises(ValueError, match="signs"):
        LinearContextualEnv(np.ones((1, 3)), K=4, context="signs")
    with pytest.raises(ValueError):
        make_sign_env(np.array([0.0, 0.5]), R=2, d=3)
