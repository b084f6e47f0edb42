"""Peer check: ``iclr25.compress`` against the official SparseGPT code (IST-DASLab/sparsegpt).

    SPARSEGPT_REPO=/path/to/sparsegpt python tests/benchmarks/peer_sparsegpt.py

The official repository is not a dependency (it is not packaged and imports ``transformers``);
point ``SPARSEGPT_REPO`` at a checkout of it, or the script says SKIPPED and exits 0. Compared:
N:M pruning (2:4, 1:4, 3:4: same masks, weights equal to float32 round-off) and its GPTQ path
(3-bit asymmetric per-channel, no pruning). The official unstructured mask thresholds a whole
block across rows, ours counts per row (see ``sparsegpt_prune``), so unstructured is not compared.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import types

import torch

from iclr25.compress import gptq_quantize, input_hessian, sparsegpt_prune


def main() -> int:
    repo = os.environ.get("SPARSEGPT_REPO")
    if not repo or not os.path.exists(os.path.join(repo, "sparsegpt.py")):
        print("SKIPPED: set SPARSEGPT_REPO to a checkout of IST-DASLab/sparsegpt")
        return 0
    sys.modules.setdefault("transformers", types.SimpleNamespace(Conv1D=type("Conv1D", (), {})))
    torch.cuda.synchronize = lambda *a, **k: None  # the official code syncs CUDA unconditionally
    sys.path.insert(0, repo)
    from quant import Quantizer  # noqa: E402  (official code)
    from sparsegpt import SparseGPT  # noqa: E402

    torch.manual_seed(0)
    d, rows = 64, 24
    X = torch.randn(300, d) @ torch.randn(d, d) / 8
    ok = True

    def official(lin, sparsity, prunen=0, quantizer=None):
        sg = SparseGPT(lin)
        sg.add_batch(X, None)
        if quantizer is not None:
            sg.quantizer = quantizer
        with contextlib.redirect_stdout(io.StringIO()):
            sg.fasterprune(sparsity, prunen=prunen, prunem=4 if prunen else 0, blocksize=32)
        return lin.weight.data

    for n in (2, 1, 3):
        lin = torch.nn.Linear(d, rows, bias=False)
        W0 = lin.weight.data.clone()
        theirs = official(lin, 0.5, prunen=n)
        ours, mask = sparsegpt_prune(W0, input_hessian(X), None, ("c4n", n), blocksize=32)
        same, diff = torch.equal(theirs != 0, mask), float((theirs - ours).abs().max())
        ok &= same and diff < 1e-5
        print(f"SparseGPT {n}:4   masks equal: {same}   max |W diff| {diff:.1e}")
    lin = torch.nn.Linear(d, rows, bias=False)
    W0 = lin.weight.data.clone()
    q = Quantizer()
    q.configure(3, perchannel=True, sym=False)
    theirs = official(lin, 0.0, quantizer=q)
    ours, _ = gptq_quantize(W0, input_hessian(X), 3, None, False, blocksize=32)
    diff = float((theirs - ours).abs().max())
    ok &= diff < 1e-5
    print(f"GPTQ 3-bit asymmetric per-channel   max |W diff| {diff:.1e}")
    print("AGREE" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
