"""The procedural face generator of the InterLCM chapter: faces in range, deterministic identity sets,
disjoint splits, and a training stream that never repeats a face."""

import torch

from iclr25.diffusion.facegen import PARAMS, draw_identities, face_stream, faces, render


def test_faces_are_images_in_range_and_deterministic() -> None:
    a, pa = faces(8, "test", 16)
    b, pb = faces(8, "test", 16)
    assert a.shape == (8, 1, 16, 16) and a.min() >= -1 and a.max() <= 1
    assert torch.equal(a, b) and torch.equal(pa, pb)
    assert torch.equal(render(pa, 16), a)


def test_identities_lie_in_their_ranges_and_splits_are_disjoint() -> None:
    p = draw_identities(500, torch.Generator().manual_seed(0))
    lo = torch.tensor([v[0] for v in PARAMS.values()])
    hi = torch.tensor([v[1] for v in PARAMS.values()])
    assert ((p >= lo) & (p <= hi)).all()
    _, pv = faces(20, "val")
    _, pt = faces(40, "test")
    assert torch.cdist(pv, pt).min() > 0


def test_stream_draws_fresh_faces_and_parameters_change_the_image() -> None:
    src = face_stream(16)
    g = torch.Generator().manual_seed(1)
    x1, x2 = src(4, g), src(4, g)
    assert not torch.allclose(x1, x2)
    p = draw_identities(2, torch.Generator().manual_seed(3))
    for i in range(len(PARAMS)):          # every parameter of the identity is visible in the image
        q = p.clone()
        lo, hi = list(PARAMS.values())[i]
        q[0, i] = hi if q[0, i] < (lo + hi) / 2 else lo
        assert (render(q[:1]) - render(p[:1])).abs().max() > 1e-3, list(PARAMS)[i]
