"""Benchmark: ``iclr25.graphs.curvature.ollivier_ricci`` against the GraphRicciCurvature package.

Same graphs, same curvature definition (alpha = 0.5, uniform neighbour measures, hop metric,
exact transport); reports the largest per-edge difference and the wall-time ratio.

    python tests/benchmarks/bench_curvature.py

GraphRicciCurvature is not a dependency of the book (it pins scipy<=1.13.1 and pulls networkit);
without it the script says so and exits 0. To run it without touching the environment, install it
aside, e.g. ``pip install --no-deps --target /tmp/grc GraphRicciCurvature==0.6.1 networkit
python-louvain`` and run with ``PYTHONPATH=/tmp/grc``.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def graphs() -> dict[str, tuple[torch.Tensor, int]]:
    """The benchmark graphs: the chapter's graded cylinder mesh and two networkx graphs."""
    from iclr25.graphs.mesh import graded_cylinder_mesh, triangles_to_edges

    out = {}
    pos, cells, _ = graded_cylinder_mesh(h_min=0.012, h_max=0.04, seed=0)
    out["cylinder mesh"] = (triangles_to_edges(torch.as_tensor(cells), len(pos)), len(pos))
    for name, g in [("barbell(20, 5)", nx.barbell_graph(20, 5)),
                    ("random geometric(1000, 0.06)", nx.random_geometric_graph(1000, 0.06, seed=0))]:
        g = nx.convert_node_labels_to_integers(g)
        e = torch.tensor(list(g.edges()), dtype=torch.long).T
        out[name] = (torch.cat([e, e.flip(0)], 1), g.number_of_nodes())
    return out


def main() -> int:
    try:
        from GraphRicciCurvature.OllivierRicci import OllivierRicci
    except ImportError:
        print("SKIPPED: GraphRicciCurvature is not installed (it is not a dependency of the book); "
              "see this script's docstring to install it aside.")
        return 0
    from iclr25.graphs.curvature import ollivier_ricci

    print(f"# bench_curvature on {datetime.date.today()}, {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")
    print(f"{'graph':32s} {'nodes':>6s} {'edges':>6s} {'max |diff|':>11s} {'ours s':>8s} {'GRC s':>8s} {'GRC/ours':>9s}")
    for name, (ei, n) in graphs().items():
        t0 = time.perf_counter()
        kappa = ollivier_ricci(ei, n, alpha=0.5)
        t_ours = time.perf_counter() - t0
        g = nx.Graph()
        g.add_nodes_from(range(n))
        g.add_edges_from(ei.T.tolist())
        t0 = time.perf_counter()
        orc = OllivierRicci(g, alpha=0.5, base=1, exp_power=2, proc=1, verbose="ERROR")
        orc.compute_ricci_curvature()
        t_grc = time.perf_counter() - t0
        ref = np.array([orc.G[u][v]["ricciCurvature"] for u, v in ei.T.tolist()])
        diff = np.abs(ref - kappa.numpy()).max()
        print(f"{name:32s} {n:6d} {ei.shape[1] // 2:6d} {diff:11.1e} {t_ours:8.3f} {t_grc:8.3f} {t_grc / t_ours:9.1f}")
        if diff > 1e-9:
            print(f"MISMATCH on {name}: max |diff| = {diff:.3e}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
