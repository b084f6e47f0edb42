"""Triangular meshes and MeshGraphNets (Pfaff et al., ICLR 2021) with torch-geometric.

* :func:`graded_cylinder_mesh`: a channel with a cylinder hole, meshed by DistMesh (Persson and
  Strang, 2004) on top of ``scipy.spatial.Delaunay``: fine near the cylinder, coarse far away.
* :func:`triangles_to_edges`, :func:`mesh_edge_features`: the mesh graph and its edge inputs.
* :class:`MeshGraphNet`: encoder, ``L`` residual GraphNet blocks (``MessagePassing``), decoder.
* :class:`Normalizer`: per-feature standardisation fitted on training data.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import torch
from scipy.spatial import Delaunay
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import coalesce, to_undirected


class NodeType(IntEnum):
    """MeshGraphNets node types (one-hot encoded with ``SIZE`` classes)."""

    NORMAL = 0
    OBSTACLE = 1
    AIRFOIL = 2
    HANDLE = 3
    INFLOW = 4
    OUTFLOW = 5
    WALL_BOUNDARY = 6
    SIZE = 9


# ----------------------------------------------------------------------------- meshing
def cross2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """z-component of the cross product of 2-D vectors, ``a_x b_y - a_y b_x``: [..., 2] -> [...].

    Twice the signed area of the triangle ``(0, a, b)``: positive when ``b`` is counter-clockwise
    from ``a``. (``np.cross`` no longer accepts 2-D vectors from numpy 2.5 on.)
    """
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _channel_sdf(p: np.ndarray, length: float, height: float, center: np.ndarray, radius: float) -> np.ndarray:
    """Signed distance (negative inside) to the channel ``[0, L] x [0, H]`` minus a disc."""
    d_rect = -np.minimum(np.minimum(p[:, 0], length - p[:, 0]), np.minimum(p[:, 1], height - p[:, 1]))
    d_disc = np.linalg.norm(p - center, axis=1) - radius
    return np.maximum(d_rect, -d_disc)


def graded_cylinder_mesh(length: float = 1.6, height: float = 0.41, center: tuple[float, float] = (0.2, 0.2),
                         radius: float = 0.05, h_min: float = 0.012, h_max: float = 0.04, grading: float = 0.3,
                         iters: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A graded triangular mesh of a channel with a cylinder hole, by DistMesh.

    The target edge length is ``h(p) = min(h_max, h_min + grading * dist(p, cylinder))``. Points
    start on a triangular lattice thinned with probability ``(h_min / h)^2``, then move as a
    truss whose bars push apart when shorter than ``h``, with re-triangulation by Delaunay and
    projection of escaped points onto the boundary.

    Returns
    -------
    pos : array, shape [N, 2]
    cells : int array, shape [F, 3]
    node_type : int array, shape [N] (:class:`NodeType`)
    """
    if not 0 < h_min <= h_max:
        raise ValueError(f"need 0 < h_min <= h_max, got {h_min}, {h_max}")
    rng = np.random.default_rng(seed)
    c = np.asarray(center, dtype=float)
    sdf = lambda q: _channel_sdf(q, length, height, c, radius)  # noqa: E731
    size = lambda q: np.minimum(h_max, h_min + grading * np.maximum(np.linalg.norm(q - c, axis=1) - radius, 0))  # noqa: E731
    geps, deps = 1e-3 * h_min, 1e-7 * h_min
    # initial points: a triangular lattice with spacing h_min, thinned to the target density
    xs, ys = np.meshgrid(np.arange(0, length + 1e-9, h_min), np.arange(0, height + 1e-9, h_min * np.sqrt(3) / 2))
    xs = xs + (np.arange(xs.shape[0])[:, None] % 2) * h_min / 2
    p = np.stack([xs.ravel(), ys.ravel()], 1)
    p = p[sdf(p) < geps]
    p = p[rng.random(len(p)) < (h_min / size(p)) ** 2]
    fixed = np.array([[0, 0], [length, 0], [0, height], [length, height]], dtype=float)
    p = np.vstack([fixed, p[np.linalg.norm(p[:, None] - fixed[None], axis=2).min(1) > h_min / 2]])
    nfix = len(fixed)
    old = np.full_like(p, np.inf)
    for _ in range(iters):
        if np.abs(p - old).max() > 0.1 * h_min:  # re-triangulate after large moves
            old = p.copy()
            tri = Delaunay(p).simplices
            tri = tri[sdf(p[tri].mean(1)) < -geps]
            bars = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]), 1), axis=0)
        vec = p[bars[:, 0]] - p[bars[:, 1]]
        lens = np.linalg.norm(vec, axis=1)
        hb = size(p[bars].mean(1))
        l0 = hb * 1.2 * np.sqrt((lens**2).sum() / (hb**2).sum())
        force = np.maximum(l0 - lens, 0) / lens
        fvec = force[:, None] * vec
        ftot = np.zeros_like(p)
        np.add.at(ftot, bars[:, 0], fvec)
        np.add.at(ftot, bars[:, 1], -fvec)
        ftot[:nfix] = 0
        p = p + 0.2 * ftot
        d = sdf(p)
        out = d > 0  # project escaped points back onto the boundary along the numerical gradient
        if out.any():
            q = p[out]
            gx = (sdf(q + [deps, 0]) - d[out]) / deps
            gy = (sdf(q + [0, deps]) - d[out]) / deps
            p[out] = q - d[out, None] * np.stack([gx, gy], 1) / np.maximum(gx**2 + gy**2, 1e-12)[:, None]
    tri = Delaunay(p).simplices
    tri = tri[sdf(p[tri].mean(1)) < -geps]
    # drop slivers on the boundary (three boundary vertices, tiny area) and unused points
    area = 0.5 * np.abs(cross2(p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]]))
    tri = tri[area > 0.05 * h_min**2]
    used = np.unique(tri)
    remap = np.full(len(p), -1)
    remap[used] = np.arange(len(used))
    p, tri = p[used], remap[tri]
    # orient counter-clockwise
    cross = cross2(p[tri[:, 1]] - p[tri[:, 0]], p[tri[:, 2]] - p[tri[:, 0]])
    tri[cross < 0] = tri[cross < 0][:, [0, 2, 1]]
    tol = 1e-3 * h_min
    node_type = np.full(len(p), NodeType.NORMAL, dtype=np.int64)
    node_type[np.linalg.norm(p - c, axis=1) < radius + tol] = NodeType.OBSTACLE
    node_type[p[:, 0] < tol] = NodeType.INFLOW
    node_type[p[:, 0] > length - tol] = NodeType.OUTFLOW
    node_type[(p[:, 1] < tol) | (p[:, 1] > height - tol)] = NodeType.WALL_BOUNDARY
    return p, tri.astype(np.int64), node_type


def triangles_to_edges(cells: Tensor, num_nodes: int | None = None) -> Tensor:
    """Mesh edges of triangles ``cells`` [F, 3], both directions, deduplicated: [2, E]."""
    cells = torch.as_tensor(cells).long()
    e = torch.cat([cells[:, [0, 1]], cells[:, [1, 2]], cells[:, [2, 0]]]).T
    return coalesce(to_undirected(e, num_nodes=num_nodes), num_nodes=num_nodes)


def mesh_edge_features(pos: Tensor, edge_index: Tensor) -> Tensor:
    """MeshGraphNets edge input ``[x_s - x_r, |x_s - x_r|]`` for senders ``s = edge_index[0]``.

    Returns
    -------
    Tensor, shape [E, 3]
    """
    rel = pos[edge_index[0]] - pos[edge_index[1]]
    return torch.cat([rel, rel.norm(dim=1, keepdim=True)], dim=1)


# ----------------------------------------------------------------------------- model
def mlp(d_in: int, d_out: int, hidden: int, layers: int = 2, layer_norm: bool = True) -> nn.Sequential:
    """``layers`` hidden ReLU layers of width ``hidden``, then a linear map (and LayerNorm)."""
    mods: list[nn.Module] = []
    d = d_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, d_out))
    if layer_norm:
        mods.append(nn.LayerNorm(d_out))
    return nn.Sequential(*mods)


class GraphNetBlock(MessagePassing):
    """One MeshGraphNets processor step with residuals.

    ``e'_sr = MLP_e([h_s, h_r, e_sr])``, ``h'_r = MLP_v([h_r, sum_{s -> r} e'_sr])``,
    then ``h <- h + h'``, ``e <- e + e'``.

    The first linear layer of ``MLP_e`` acts on the concatenation; it is applied as
    ``W_s h_s + W_r h_r + W_e e`` with ``W_s h`` and ``W_r h`` computed once per node and then
    gathered per edge: the same map, with fewer operations on the (many more) edges.
    """

    def __init__(self, latent: int, layers: int = 2) -> None:
        super().__init__(aggr="add")
        self.latent = latent
        self.edge_mlp = mlp(3 * latent, latent, latent, layers)
        self.node_mlp = mlp(2 * latent, latent, latent, layers)

    def edge_update(self, h: Tensor, edge_index: Tensor, e: Tensor) -> Tensor:
        """``MLP_e([h_s, h_r, e])`` for every edge: [E, latent]."""
        first, rest = self.edge_mlp[0], self.edge_mlp[1:]
        w_s, w_r, w_e = first.weight.split(self.latent, dim=1)
        z = (h @ w_s.T)[edge_index[0]] + (h @ w_r.T)[edge_index[1]] + nn.functional.linear(e, w_e, first.bias)
        return rest(z)

    def forward(self, h: Tensor, edge_index: Tensor, e: Tensor) -> tuple[Tensor, Tensor]:
        """``h`` [N, latent], ``edge_index`` [2, E], ``e`` [E, latent] -> updated ``(h, e)``."""
        e_new = self.edge_update(h, edge_index, e)
        agg = self.propagate(edge_index, msg=e_new, size=(h.size(0), h.size(0)))
        h_new = self.node_mlp(torch.cat([h, agg], dim=1))
        return h + h_new, e + e_new

    def message(self, msg: Tensor) -> Tensor:  # noqa: D102 - the edge latent is the message
        return msg


class MeshGraphNet(nn.Module):
    """Encoder-processor-decoder of MeshGraphNets.

    Parameters
    ----------
    node_in, edge_in, out : int
        Input node / edge feature sizes, output size per node.
    latent : int
        Width of every latent vector and MLP.
    blocks : int
        Number ``L`` of message-passing blocks; the receptive field is ``L`` hops.
    layers : int
        Hidden layers per MLP (2 in MeshGraphNets).
    """

    def __init__(self, node_in: int, edge_in: int, out: int, latent: int = 128, blocks: int = 15,
                 layers: int = 2) -> None:
        super().__init__()
        self.node_enc = mlp(node_in, latent, latent, layers)
        self.edge_enc = mlp(edge_in, latent, latent, layers)
        self.blocks = nn.ModuleList(GraphNetBlock(latent, layers) for _ in range(blocks))
        self.dec = mlp(latent, out, latent, layers, layer_norm=False)
        # added (rewired) edges: their own encoder, created last so that the other weights do not
        # depend on whether a model ever sees added edges
        self.added_enc = mlp(edge_in, latent, latent, layers)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor, added_index: Tensor | None = None,
                added_attr: Tensor | None = None) -> Tensor:
        """``x`` [N, node_in], ``edge_index`` [2, E], ``edge_attr`` [E, edge_in] -> [N, out].

        ``added_index`` [2, A] and ``added_attr`` [A, edge_in]: a second edge set (edges added by a
        rewiring), encoded by its own MLP; the blocks then pass messages over both sets.
        """
        h, e = self.node_enc(x), self.edge_enc(edge_attr)
        if added_index is not None and added_index.shape[1] > 0:
            edge_index = torch.cat([edge_index, added_index], dim=1)
            e = torch.cat([e, self.added_enc(added_attr)], dim=0)
        for block in self.blocks:
            h, e = block(h, edge_index, e)
        return self.dec(h)


class Normalizer(nn.Module):
    """Per-feature standardisation ``(x - mean) / std`` with statistics fitted once on data.

    MeshGraphNets accumulates the same statistics online over its first 10^6 inputs; fitting
    them up front on the training set gives the same map without the warm-up.
    """

    def __init__(self, size: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("std", torch.ones(size))
        self.eps = eps

    def fit(self, x: Tensor) -> "Normalizer":
        """Fit on ``x`` [M, size]; returns self."""
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0, unbiased=False).clamp_min(self.eps))
        return self

    def forward(self, x: Tensor) -> Tensor:  # noqa: D102
        return (x - self.mean) / self.std

    def inverse(self, y: Tensor) -> Tensor:
        """Undo the standardisation."""
        return y * self.std + self.mean


class FlowSimulator(nn.Module):
    """A MeshGraphNets flow simulator: ``(u_t, mesh) -> (u_{t+1}, p_{t+1})``.

    Node input ``[u (2), one-hot node type (9)]``, edge input ``[x_s - x_r, |x_s - x_r|]``; the
    network predicts the normalised velocity change and the normalised pressure. Only NORMAL and
    OUTFLOW nodes are integrated; the other nodes keep their (boundary-condition) velocity.
    """

    def __init__(self, latent: int = 128, blocks: int = 15, layers: int = 2) -> None:
        super().__init__()
        self.net = MeshGraphNet(2 + NodeType.SIZE, 3, 3, latent, blocks, layers)
        self.node_norm, self.edge_norm = Normalizer(2 + NodeType.SIZE), Normalizer(3)
        self.dv_norm, self.p_norm = Normalizer(2), Normalizer(1)
        self.added_norm = Normalizer(3)  # the added edges' own statistics (they are long)

    @staticmethod
    def node_features(velocity: Tensor, node_type: Tensor) -> Tensor:
        """``[u, one_hot(node_type)]``: [N, 11]."""
        return torch.cat([velocity, nn.functional.one_hot(node_type.long(), NodeType.SIZE).to(velocity)], 1)

    @staticmethod
    def integrated(node_type: Tensor) -> Tensor:
        """Mask [N] of the nodes whose velocity is predicted (NORMAL or OUTFLOW)."""
        return (node_type == NodeType.NORMAL) | (node_type == NodeType.OUTFLOW)

    def forward(self, velocity: Tensor, node_type: Tensor, pos: Tensor, edge_index: Tensor,
                added_index: Tensor | None = None) -> Tensor:
        """Normalised outputs [N, 3]: velocity change (2) and pressure (1).

        ``edge_index``: the mesh edges; ``added_index``: edges added by a rewiring (none by
        default), with the same geometric features but their own normaliser and encoder.
        """
        x = self.node_norm(self.node_features(velocity, node_type))
        e = self.edge_norm(mesh_edge_features(pos, edge_index))
        a = None if added_index is None else self.added_norm(mesh_edge_features(pos, added_index))
        return self.net(x, edge_index, e, added_index, a)

    def loss(self, velocity: Tensor, node_type: Tensor, pos: Tensor, edge_index: Tensor,
             target_velocity: Tensor, target_pressure: Tensor, added_index: Tensor | None = None) -> Tensor:
        """MSE of the normalised velocity change on integrated nodes + MSE of pressure on all."""
        out = self(velocity, node_type, pos, edge_index, added_index)
        mask = self.integrated(node_type)
        err_v = ((self.dv_norm(target_velocity - velocity) - out[:, :2]) ** 2).sum(1)
        err_p = ((self.p_norm(target_pressure[:, None]) - out[:, 2:]) ** 2).sum(1)
        return err_v[mask].mean() + err_p.mean()

    @torch.no_grad()
    def step(self, velocity: Tensor, node_type: Tensor, pos: Tensor, edge_index: Tensor,
             added_index: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """One simulator step: next velocity [N, 2] and pressure [N]."""
        out = self(velocity, node_type, pos, edge_index, added_index)
        mask = self.integrated(node_type)[:, None]
        nxt = torch.where(mask, velocity + self.dv_norm.inverse(out[:, :2]), velocity)
        return nxt, self.p_norm.inverse(out[:, 2:])[:, 0]
