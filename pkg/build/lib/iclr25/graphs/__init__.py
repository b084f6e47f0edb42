"""Graph operators and graph neural networks, built on torch-geometric.

Modules: ``bundle`` (flat vector bundles, bundle Laplacian, heat kernels, BuNN), ``magnetic``
(magnetic Laplacians, walk profiles, multi-q positional encodings), ``curvature`` (Ollivier-Ricci
curvature), ``rewiring`` (PIORF and control rewirings), ``mesh`` (mesh GNNs), ``flow``
(a small lattice-Boltzmann flow simulator for mesh data).
"""
