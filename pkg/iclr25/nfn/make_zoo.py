"""Train the chapter's transformer zoo and commit it: ``python -m iclr25.nfn.make_zoo``.

The recipe (:data:`ZOO`): 512 tiny vision transformers (two zoo blocks, ``D = 16``) on scikit-learn's
digits, each with its own recipe drawn from :class:`iclr25.nfn.zoo.ZooGrid` (optimizer, learning
rate, init std, L2, train fraction, dropout), 700 steps of 32 digits (linear warm-up, cosine decay),
checkpoints at steps 525 and 700. Every random number of run ``r`` comes from its own generator seeded by ``(seed, r)``, so
the chapter retrains a few runs alone and compares them with the committed ones.

Writes ``weights/zoo.pt`` (every weight of every model at step 700 in float16, the test accuracy at
both checkpoints, the last-tenth training loss, the recipes) and ``weights/zoo.json`` (the recipe,
the seed, per-run accuracies, the accuracy distribution, CPU time and the sha256 of ``zoo.pt``).
Run it under ``nice -n 10``: ``nice -n 10 python -m iclr25.nfn.make_zoo --parts 4`` (four
single-threaded processes; about 10 CPU-minutes in all).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import check_sha256, file_sha256
from iclr25.nfn.zoo import OPTIMIZERS, ZooConfig

ZOO = ZooConfig(n_runs=512, steps=700, batch=32, checkpoints=(525, 700), seed=0)
"""The committed zoo's configuration."""

WEIGHTS = Path(__file__).resolve().parent / "weights"
ZOO_FILE, ZOO_JSON = WEIGHTS / "zoo.pt", WEIGHTS / "zoo.json"


def load_zoo(check: bool = True) -> dict:
    """The committed zoo: ``params`` ``{name: (n_runs, ...)}`` float16, ``accuracy`` ``(2, n_runs)``,
    ``loss``, ``recipes``, ``steps``, and ``meta`` (the JSON record). ``check``: verify the sha256."""
    meta = json.loads(ZOO_JSON.read_text())
    if check:
        check_sha256(ZOO_FILE, meta["sha256"])
    zoo = torch.load(ZOO_FILE, map_location="cpu", weights_only=False)
    zoo["meta"] = meta
    return zoo


def zoo_config(meta: dict) -> ZooConfig:
    """The :class:`ZooConfig` recorded in a zoo's JSON record."""
    from iclr25.nfn.block import BlockSpec
    from iclr25.nfn.zoo import ZooGrid

    c = dict(meta["config"])
    c["block"] = BlockSpec(**c["block"])
    c["grid"] = ZooGrid(**{k: tuple(v) for k, v in c["grid"].items()})
    c["checkpoints"], c["patch"] = tuple(c["checkpoints"]), tuple(c["patch"])
    return ZooConfig(**c)


def train_part(cfg: ZooConfig, part: int, parts: int, out: Path) -> None:
    """Train runs ``part, part + parts, ...`` of ``cfg`` and save them (float32) to ``out``. Runs are
    independent (each has its own generator), so the parts merge into exactly the zoo that one
    process would train."""
    from iclr25.nfn.zoo import train_zoo

    torch.set_num_threads(1)
    t0 = time.process_time()
    z = train_zoo(cfg, runs=range(part, cfg.n_runs, parts), keep_all=True)
    z["cpu_seconds"] = time.process_time() - t0
    torch.save(z, out)


def merge(cfg: ZooConfig, files: list[Path], wall: float) -> None:
    """Merge the parts written by :func:`train_part` into ``weights/zoo.pt`` and ``weights/zoo.json``."""
    zs = [torch.load(f, weights_only=False) for f in files]
    runs = np.concatenate([z["runs"] for z in zs])
    order = np.argsort(runs)
    assert (runs[order] == np.arange(cfg.n_runs)).all(), "the parts must cover every run once"
    cat = lambda xs, dim=0: torch.cat(xs, dim)[..., order] if dim == -1 else torch.cat(xs, dim)[order]
    params = {k: cat([z["params"][k] for z in zs]) for k in zs[0]["params"]}
    acc = torch.cat([z["accuracy"] for z in zs], 1)[:, order]
    loss = cat([z["loss"] for z in zs])
    rec = {k: torch.as_tensor(np.concatenate([z["recipes"][k] for z in zs])[order]) for k in zs[0]["recipes"]}
    cpu = sum(z["cpu_seconds"] for z in zs)
    WEIGHTS.mkdir(exist_ok=True)
    torch.save({"params": {k: v.half() for k, v in params.items()}, "accuracy": acc, "loss": loss,
                "recipes": rec, "steps": zs[0]["steps"]}, ZOO_FILE)
    steps, a = zs[0]["steps"], acc.numpy()
    q = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]
    meta = {"config": dataclasses.asdict(cfg), "optimizers": list(OPTIMIZERS), "seed": cfg.seed,
            "recipe": "per run: recipe and random numbers from a generator seeded by (seed, run); "
                      "Adam/RMSprop/SGD(+momentum) with coupled L2; linear warm-up over 10% then cosine "
                      "decay; fp32 training on CPU, one thread per process; weights stored in float16",
            "torch": torch.__version__, "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1),
            "processes": len(files),
            "accuracy_quantiles": {str(k): dict(zip(map(str, q), np.quantile(x, q).round(4).tolist()))
                                   for k, x in zip(steps, a)},
            "accuracy": {str(k): x.round(4).tolist() for k, x in zip(steps, a)},
            "sha256": file_sha256(ZOO_FILE), "bytes": ZOO_FILE.stat().st_size}
    ZOO_JSON.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{cfg.n_runs} runs x {cfg.steps} steps: {cpu:.0f} s CPU in {len(files)} processes, {wall:.0f} s wall; "
          f"{meta['bytes'] / 1e6:.2f} MB")
    for k, x in zip(steps, a):
        print(f"step {k}: test accuracy quantiles {dict(zip(q, np.quantile(x, q).round(3)))}")


def main(cfg: ZooConfig = ZOO, parts: int = 1, work: Path = Path("/tmp/nfn-zoo")) -> None:
    """Train the zoo ``cfg`` in ``parts`` single-threaded processes (run them under ``nice``) and
    write ``weights/zoo.pt`` and ``weights/zoo.json``."""
    import subprocess
    import sys

    work.mkdir(parents=True, exist_ok=True)
    w0 = time.perf_counter()
    files = [work / f"part{k}.pt" for k in range(parts)]
    if parts == 1:
        train_part(cfg, 0, 1, files[0])
    else:
        code = ("import sys; from pathlib import Path; from iclr25.nfn.make_zoo import ZOO, train_part; "
                "train_part(ZOO, int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))")
        assert cfg == ZOO, "parallel parts train the committed configuration ZOO"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(k), str(parts), str(f)])
                 for k, f in enumerate(files)]
        assert all(p.wait() == 0 for p in procs), "a part failed"
    merge(cfg, files, time.perf_counter() - w0)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", type=int, default=1, help="single-threaded processes (default 1)")
    main(parts=ap.parse_args().parts)
