"""Stochastic linear contextual bandit environments with finite action sets.

Model (Zhang, Ji & Zhou, ICLR 2025, Sec. 2): at round ``t`` a context ``X_t = (x_{t,1..K})``,
``x_{t,a} in R^d``, ``||x_{t,a}|| <= 1``, is drawn i.i.d. from an unknown distribution; the learner
plays ``a_t`` and receives ``r_t = <theta*, x_{t,a_t}> + eps_t`` with ``eps_t`` sub-Gaussian.

Every environment here is *batched over S independent instances* (one per seed): contexts come
as arrays of shape ``(S, n, K, d)``. Contexts and noise are generated in fixed blocks of rounds,
each block seeded by ``(seed, block index)``, so every algorithm run on the same environment sees
exactly the same contexts and noise (common random numbers) without storing all ``T`` rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CONTEXT_KINDS = ("gaussian", "sphere", "anisotropic", "basis", "signs")


def squash_radius(r: np.ndarray) -> np.ndarray:
    """The factor ``tanh(r) / r`` that maps a point at radius ``r`` into the open unit ball.

    Strictly increasing in ``r`` (unlike clipping at norm 1), so two actions never tie in norm:
    an ``argmax`` over norms (the first step of a design, LinUCB without data) then picks the same
    action on every machine instead of breaking a tie by the last bit of a rounding.
    """
    r = np.asarray(r, dtype=float)
    return np.where(r > 1e-12, np.tanh(r) / np.maximum(r, 1e-12), 1.0)


@dataclass
class LinearContextualEnv:
    """``S`` independent linear contextual bandit instances sharing ``K`` and ``d``.

    Parameters
    ----------
    theta : (S, d) array
        The unknown parameter of each instance.
    K : int
        Number of actions per round.
    noise_sd : float
        Standard deviation of the Gaussian reward noise (sub-Gaussian constant ``sigma``).
    seed : int
        Seed of the context/noise stream.
    context : {"gaussian", "sphere", "anisotropic"}
        ``gaussian``: ``x ~ N(0, I_d/d)`` mapped into the unit ball by :func:`squash_radius`;
        ``sphere``: uniform on the unit sphere; ``anisotropic``: ``N(0, diag(s)^2)`` with scales
        ``s_i`` decaying from 1 to 0.1, mapped into the unit ball the same way (a context law where
        uniform exploration is poor).
    shared_contexts : bool
        When true, all ``S`` instances see the same context stream (the noise stays independent
        per instance): generating and caching contexts then costs ``1/S`` as much.
    streams : int
        When positive (and ``S`` a multiple of it), ``streams`` independent context streams:
        instance ``s`` sees stream ``s % streams`` (the noise stays independent per instance).
        ``0``: one stream per instance (or one in all, with ``shared_contexts``).
    block : int
        Rounds per generated block.
    cache_bytes : int
        Generated blocks are kept (so that every algorithm reuses them) up to this many bytes.
    """

    theta: np.ndarray
    K: int
    noise_sd: float = 0.5
    seed: int = 0
    context: str = "gaussian"
    jitter: float = 0.1
    shared_contexts: bool = False
    streams: int = 0
    block: int = 512
    cache_bytes: int = 256 * 2**20
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.context not in CONTEXT_KINDS:
            raise ValueError(f"unknown context {self.context!r}; valid: {', '.join(CONTEXT_KINDS)}")
        self.theta = np.atleast_2d(np.asarray(self.theta, dtype=float))
        if self.K < 2:
            raise ValueError("K must be at least 2")
        if self.streams < 0 or (self.streams and (self.S % self.streams or self.shared_contexts)):
            raise ValueError(f"streams must be 0 or divide S = {self.S} (and exclude shared_contexts), "
                             f"got {self.streams}")
        if self.context == "basis" and (self.K != self.d or not 0 <= self.jitter < 1):
            raise ValueError(f"basis contexts need K = d and 0 <= jitter < 1, got K={self.K}, "
                             f"d={self.d}, jitter={self.jitter}")
        if self.context == "signs" and (self.K != 2 ** self.d or not 0 <= self.jitter < 1):
            raise ValueError(f"signs contexts need K = 2^d and 0 <= jitter < 1, got K={self.K}, "
                             f"d={self.d}, jitter={self.jitter}")

    @property
    def S(self) -> int:
        """Number of independent instances (seeds)."""
        return self.theta.shape[0]

    @property
    def d(self) -> int:
        """Feature dimension."""
        return self.theta.shape[1]

    @property
    def theta_norm(self) -> float:
        """An upper bound on ``||theta*||`` (used in confidence radii)."""
        return float(np.linalg.norm(self.theta, axis=1).max())

    def _make_block(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        S, B, K, d = self.S, self.block, self.K, self.d
        if self.shared_contexts:
            S = 1
        elif self.streams:
            S = self.streams
        if self.context in ("sphere", "basis", "signs"):
            x = rng.standard_normal((S, B, K, d))
            x /= np.linalg.norm(x, axis=-1, keepdims=True)
            if self.context == "basis":
                x = (1.0 - self.jitter) * np.eye(d) + self.jitter * x
            elif self.context == "signs":
                x = (1.0 - self.jitter) * sign_vectors(d) + self.jitter * x
        else:
            scale = np.ones(d) if self.context == "gaussian" else np.geomspace(1.0, 0.1, d)
            x = rng.standard_normal((S, B, K, d)) * scale / np.sqrt(d if self.context == "gaussian" else 1)
            x *= squash_radius(np.linalg.norm(x, axis=-1, keepdims=True))
        eps = self.noise_sd * rng.standard_normal((self.S, B))
        if self.shared_contexts:
            x = np.broadcast_to(x, (self.S, B, K, d))
        return x, eps

    def _block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        if b not in self._cache:
            n_ctx = 1 if self.shared_contexts else (self.streams or self.S)
            per_block = 8 * n_ctx * self.block * self.K * self.d
            if (len(self._cache) + 1) * per_block > self.cache_bytes:
                self._cache.clear()
            self._cache[b] = self._make_block(np.random.default_rng([self.seed, b]))
        return self._cache[b]

    def rounds(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        """Contexts and noise of rounds ``t0 .. t1-1`` (0-based).

        Returns
        -------
        X : (S, t1-t0, K, d) array
        eps : (S, t1-t0) array — the noise added to whichever action is played.
        """
        if not 0 <= t0 <= t1:
            raise ValueError(f"need 0 <= t0 <= t1, got {t0}, {t1}")
        xs, es = [], []
        t = t0
        while t < t1:
            b, off = divmod(t, self.block)
            n = min(self.block - off, t1 - t)
            x, e = self._block(b)
            xs.append(x[:, off:off + n])
            es.append(e[:, off:off + n])
            t += n
        if not xs:
            return np.zeros((self.S, 0, self.K, self.d)), np.zeros((self.S, 0))
        if self.shared_contexts:  # one stream: concatenate it once, then a read-only broadcast view
            x = np.concatenate([x[:1] for x in xs], axis=1)
            return np.broadcast_to(x, (self.S,) + x.shape[1:]), np.concatenate(es, axis=1)
        if self.streams:  # the streams' contexts, expanded to instance s -> stream s % streams
            x = np.concatenate(xs, axis=1)
            return x[np.arange(self.S) % self.streams], np.concatenate(es, axis=1)
        return np.concatenate(xs, axis=1), np.concatenate(es, axis=1)

    def mean_rewards(self, X: np.ndarray) -> np.ndarray:
        """Expected rewards ``<theta*, x_{t,a}>``: ``(S, n, K, d) -> (S, n, K)``."""
        return np.einsum("snkd,sd->snk", X, self.theta)

    def chunks(self, t0: int, t1: int):
        """Iterate over ``(start, X, eps)`` for rounds ``t0 .. t1-1`` in block-aligned chunks."""
        t = t0
        while t < t1:
            n = min(self.block - t % self.block, t1 - t)
            X, eps = self.rounds(t, t + n)
            yield t, X, eps
            t += n


class TiledEnv(LinearContextualEnv):
    """``n`` copies of an environment's ``S`` instances along the instance axis (copy ``c`` of
    instance ``s`` is instance ``c S + s``), all seeing the base's contexts and noise.

    Several variants of an algorithm (radius scales, estimators) then run in one vectorized call
    on common random numbers; :meth:`~iclr25.bandits.algorithms.RunResult.part` splits the result.
    """

    def __init__(self, base: LinearContextualEnv, n: int) -> None:
        if n < 1:
            raise ValueError(f"need n >= 1 copies, got {n}")
        super().__init__(np.tile(base.theta, (n, 1)), K=base.K, noise_sd=base.noise_sd,
                         seed=base.seed, context=base.context, jitter=base.jitter,
                         shared_contexts=base.shared_contexts, streams=base.streams, block=base.block,
                         cache_bytes=0)
        self.base, self.n = base, n

    @property
    def theta_norm(self) -> float:
        """The base's bound on ``||theta*||`` (so radii equal those of the base)."""
        return self.base.theta_norm

    def _block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        x, e = self.base._block(b)
        if self.shared_contexts:
            return np.broadcast_to(x[:1], (self.S,) + x.shape[1:]), np.concatenate([e] * self.n)
        if self.streams:  # stream s % streams is the same for copy c (base S is a multiple of streams)
            return x, np.concatenate([e] * self.n)
        return np.concatenate([x] * self.n), np.concatenate([e] * self.n)


def sign_vectors(d: int) -> np.ndarray:
    """The ``2^d`` hypercube corners ``{-1, +1}^d / sqrt(d)`` (unit vectors), one per row;
    row ``a`` has sign ``-1`` in coordinate ``i`` iff bit ``i`` of ``a`` is set."""
    bits = (np.arange(2 ** d)[:, None] >> np.arange(d)[None, :]) & 1
    return (1.0 - 2.0 * bits) / np.sqrt(d)


def random_theta(S: int, d: int, seed: int) -> np.ndarray:
    """``S`` parameters uniform on the unit sphere of ``R^d``: shape ``(S, d)``."""
    th = np.random.default_rng([seed, 10_007]).standard_normal((S, d))
    return th / np.linalg.norm(th, axis=1, keepdims=True)


def make_synthetic_env(S: int, d: int, K: int, seed: int = 0, noise_sd: float = 0.5,
                       context: str = "gaussian") -> LinearContextualEnv:
    """``S`` random instances: ``theta*`` uniform on the sphere, i.i.d. contexts of kind ``context``."""
    return LinearContextualEnv(random_theta(S, d, seed), K=K, noise_sd=noise_sd, seed=seed,
                               context=context)


def make_needle_env(gaps: np.ndarray, R: int, d: int, seed: int = 0, noise_sd: float = 0.5,
                    jitter: float = 0.1, shared_contexts: bool = False, streams: int = 0) -> LinearContextualEnv:
    """A family of hard instances in the spirit of the batched lower bound: ``len(gaps) * R`` instances.

    ``K = d`` nearly fixed actions (``basis`` contexts: little diversity, so exploiting one action
    teaches nothing about the others); in each instance one action, drawn at random, is better
    than the rest by the gap ``Delta``: ``theta* = Delta e_{a*}``. Instance ``s`` has gap
    ``gaps[s // R]`` (``R`` instances per gap). The worst case over a ladder of gaps, one at every
    batch's scale ``sqrt(u / t_{m-1})``, is what a minimax lower bound charges an ``M``-batch
    algorithm. ``shared_contexts``: all instances see one context stream (independent noise);
    ``streams = R``: instance ``r`` of every gap sees context stream ``r`` (``R`` independent streams,
    each shared across the gaps, so that a bootstrap can resample streams).
    """
    gaps = np.asarray(gaps, dtype=float)
    if gaps.ndim != 1 or np.any(gaps <= 0) or np.any(gaps > 1) or R < 1:
        raise ValueError("need gaps in (0, 1] (1-D) and R >= 1")
    rng = np.random.default_rng([seed, 10_009])
    theta = np.zeros((len(gaps) * R, d))
    theta[np.arange(len(theta)), rng.integers(0, d, len(theta))] = np.repeat(gaps, R)
    return LinearContextualEnv(theta, K=d, noise_sd=noise_sd, seed=seed, context="basis", jitter=jitter,
                               shared_contexts=shared_contexts, streams=streams)


def make_sign_env(eps: np.ndarray, R: int, d: int, seed: int = 0, noise_sd: float = 0.5,
                  jitter: float = 0.1, shared_contexts: bool = False, streams: int = 0) -> LinearContextualEnv:
    """The sign-vector family of the linear lower bound: ``len(eps) * R`` instances.

    ``K = 2^d`` nearly fixed actions, the hypercube corners ``{-1, +1}^d / sqrt(d)`` (``signs``
    contexts, jittered like ``basis``); ``theta* = eps sigma / sqrt(d)`` for a random sign vector
    ``sigma``, so ``||theta*|| = eps``, the best action is the corner ``sigma`` and flipping ``k``
    of its signs costs ``2 k eps (1 - jitter) / d`` (before jitter). Learning ``theta*`` means
    learning ``d`` signs at once: many more actions than dimensions (``L = min(d, log K) = d``).
    Instance ``s`` has ``eps[s // R]``; ``streams`` as in :func:`make_needle_env`.
    """
    eps = np.asarray(eps, dtype=float)
    if eps.ndim != 1 or np.any(eps <= 0) or np.any(eps > 1) or R < 1:
        raise ValueError("need eps in (0, 1] (1-D) and R >= 1")
    rng = np.random.default_rng([seed, 10_011])
    sigma = rng.choice([-1.0, 1.0], size=(len(eps) * R, d))
    theta = np.repeat(eps, R)[:, None] * sigma / np.sqrt(d)
    return LinearContextualEnv(theta, K=2 ** d, noise_sd=noise_sd, seed=seed, context="signs",
                               jitter=jitter, shared_contexts=shared_contexts, streams=streams)


class DigitsBanditEnv(LinearContextualEnv):
    """Classification-as-bandit on scikit-learn's bundled digits (1797 images, 10 classes).

    Each round shows one image drawn uniformly at random; the ``K = 10`` actions are the class
    labels, with the disjoint encoding ``x_{t,a} = e_a (x) phi(image)`` where ``phi`` is a
    ``p``-dimensional PCA projection plus a constant, scaled so that ``||phi|| <= 1``
    (``d = 10 (p + 1)``). To keep the model realizable, ``theta*`` is the ridge fit of the one-hot
    label on ``phi`` over the whole data set (an oracle fit), so the expected reward of label
    ``a`` is that linear score; the observed reward adds Gaussian noise.
    """

    def __init__(self, S: int, seed: int = 0, pca_dim: int = 4, noise_sd: float = 0.5,
                 block: int = 512) -> None:
        from sklearn.datasets import load_digits
        from sklearn.decomposition import PCA

        images, labels = load_digits(return_X_y=True)
        z = PCA(pca_dim, random_state=0).fit_transform(images / 16.0)
        phi = np.hstack([z / np.abs(z).max(axis=0), np.ones((len(z), 1))])
        phi /= np.linalg.norm(phi, axis=1).max()
        onehot = np.eye(10)[labels]
        p1 = phi.shape[1]
        W = np.linalg.solve(phi.T @ phi + 1e-3 * np.eye(p1), phi.T @ onehot)  # (p+1, 10)
        self.phi, self.labels = phi, labels
        self.oracle_accuracy = float((np.argmax(phi @ W, axis=1) == labels).mean())
        theta = W.T.reshape(-1)  # block a of theta is W[:, a]
        super().__init__(np.tile(theta, (S, 1)), K=10, noise_sd=noise_sd, seed=seed,
                         context="gaussian", block=block)

    def _make_block(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        S, B, K = self.S, self.block, self.K
        p1 = self.phi.shape[1]
        idx = rng.integers(0, len(self.phi), size=(S, B))
        f = self.phi[idx]  # (S, B, p1)
        x = np.zeros((S, B, K, K * p1))
        for a in range(K):
            x[:, :, a, a * p1:(a + 1) * p1] = f
        return x, self.noise_sd * rng.standard_normal((S, B))
