"""Vision-centric 3D occupancy world models (PreWorld): a procedural driving voxel world with
ray-cast camera labels, differentiable volume rendering of voxel attribute fields, an LSS-style
camera-to-voxel network with a state-conditioned forecaster, two-stage training and occupancy
metrics."""
