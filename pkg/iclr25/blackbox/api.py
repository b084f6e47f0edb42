"""A language model behind a query-counting, gradient-free API.

The optimiser sends a prompt (discrete tokens, and optionally a continuous offset added to
the prompt's input embeddings, BBT's "add" mode) together with a minibatch of inputs, and
receives the cross-entropy loss and the verbalizer logits of each input: nothing else. Every
forward pass over one minibatch costs **one query**; ``budget`` queries in total, after which
:class:`BudgetExceeded` is raised before any work is done. The model runs under
``torch.no_grad`` on detached inputs, its parameters are frozen and hidden, so no gradient can
flow from it to the optimiser.

Input layout of one example (causal LM, last-token logits as for GPT-2 in the paper; the
optional fixed template ``t`` is part of the encoded input, see :func:`encode_task`)::

    <bos> p_1 … p_n  [t_1 … t_m]  w_1 … w_L  ?      -> logits of the next token, restricted to the verbalizer
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from iclr25.lm.language import QUESTION, VERBALIZERS, TaskData
from iclr25.lm.model import TinyLM
from iclr25.lm.vocab import Vocab, pad_batch


class BudgetExceeded(RuntimeError):
    """Raised when a request would take the black box past its query budget."""


@dataclass(frozen=True)
class EncodedTask:
    """Inputs of a task, encoded once: ``body`` = sentence + '?' right-padded, (N, L);
    ``lengths`` (N,) their true lengths; ``labels`` (N,) class indices."""

    body: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return self.body.shape[0]

    def subset(self, idx: torch.Tensor) -> "EncodedTask":
        """The examples ``idx``, re-padded to their own maximal length."""
        L = int(self.lengths[idx].max())
        return EncodedTask(self.body[idx, :L], self.lengths[idx], self.labels[idx])


def encode_task(vocab: Vocab, data: TaskData, template: tuple[str, ...] = ()) -> EncodedTask:
    """Encode ``data.sentences`` as ``t_1 … t_m w_1 … w_L ?`` (the prompt is prepended per query).

    ``template`` (words ``t_1 … t_m``, e.g. the task's cue word) is a fixed part of every input that
    sits after the learnable prompt positions and is never optimised, the role of the fixed template
    (``TEMPLATE_CONFIG``) in the official code; empty by default."""
    body, lengths = pad_batch([vocab.encode([*template, *s, QUESTION]) for s in data.sentences], vocab.pad_id)
    return EncodedTask(body, lengths, data.labels.clone())


def prompted_logits(model: TinyLM, bos_id: int, prompts: torch.Tensor, offsets: torch.Tensor | None,
                    body: torch.Tensor, lengths: torch.Tensor, verbalizer: torch.Tensor) -> torch.Tensor:
    """Verbalizer logits of K prompted copies of a batch: the computation behind the black box.

    Differentiable (the black box calls it under ``no_grad``; a white-box check can take the
    gradient with respect to ``offsets``). Every output lives on ``body``'s device, which must be
    the model's.

    Parameters
    ----------
    prompts : LongTensor (K, n), token ids of K discrete prompts.
    offsets : None or Tensor (K, n, D) or (K, B, n, D), added to the prompt embeddings.
    body : LongTensor (B, L), right-padded inputs ``w_1 … w_L ?``; lengths : (B,) true lengths.
    verbalizer : LongTensor (C,), token ids of the label words.

    Returns
    -------
    Tensor (K, B, C): the next-token logits of the label words after '?'.
    """
    K, n = prompts.shape
    B, L = body.shape
    D = model.cfg.d_model
    bos = torch.full((K, B, 1), bos_id, dtype=torch.long, device=body.device)
    ids = torch.cat([bos, prompts[:, None, :].expand(K, B, n), body[None].expand(K, B, L)], -1)
    ids = ids.reshape(K * B, 1 + n + L)
    emb_offset = None
    if offsets is not None:
        if offsets.dim() == 3:
            offsets = offsets[:, None].expand(K, B, n, D)
        if offsets.shape != (K, B, n, D):
            raise ValueError(f"offsets must have shape (K, n, D) or (K, B, n, D) = "
                             f"({K}, {B}, {n}, {D}), got {tuple(offsets.shape)}")
        zeros = offsets.new_zeros(K * B, 1, D)
        emb_offset = torch.cat([zeros, offsets.reshape(K * B, n, D), zeros.expand(K * B, L, D)], 1)
    last = (lengths + n).repeat(K)  # index of '?' = 1 + n + len - 1
    out = model.logits_at(ids, last, embed_offset=emb_offset)[:, verbalizer]
    return out.reshape(K, B, -1)


class BlackBoxLM:
    """A frozen :class:`TinyLM` answering prompted classification queries, with a query budget.

    Parameters
    ----------
    model : TinyLM
        The language model; its parameters are frozen (``requires_grad=False``) and it is kept
        out of reach (a name-mangled attribute; the class exposes no parameters).
    vocab : Vocab
    task : str
        Selects the verbalizer words (``iclr25.lm.language.VERBALIZERS``).
    budget : int
        Maximal number of training queries.
    device : torch device for the forward passes.

    Attributes
    ----------
    n_queries : int
        Queries used so far (each minibatch forward in :meth:`query`).
    n_eval_examples : int
        Examples scored by :meth:`evaluate` (dev/test scoring, not charged, as in the paper).
    embed_dim : int
        Public metadata a prompt-tuning user is given: the embedding width.
    embedding_std : float
        Public metadata: the std of the embedding table (BBT scales its random projection by it).
    """

    def __init__(self, model: TinyLM, vocab: Vocab, task: str, budget: int,
                 device: torch.device | str = "cpu") -> None:
        if task not in VERBALIZERS:
            raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(VERBALIZERS)}")
        if budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        for p in model.parameters():
            p.requires_grad_(False)
        self.__model = model.to(device).eval()
        self.__device = torch.device(device)
        self.__verbalizer = torch.tensor(vocab.encode(list(VERBALIZERS[task])), device=device)
        self.__bos = vocab.bos_id
        self.budget = budget
        self.n_queries = 0
        self.n_eval_examples = 0
        self.embed_dim: int = model.cfg.d_model
        self.embedding_std: float = float(model.tok.weight.std())
        self.n_classes: int = len(VERBALIZERS[task])

    @property
    def queries_left(self) -> int:
        return self.budget - self.n_queries

    @torch.no_grad()
    def _forward(self, prompts: torch.Tensor, offsets: torch.Tensor | None,
                 batch: EncodedTask) -> torch.Tensor:
        """prompts (K, n), offsets None | (K, n, D) | (K, B, n, D) -> verbalizer logits (K, B, C)
        on the CPU (the model runs on the black box's device)."""
        dev = self.__device
        logits = prompted_logits(self.__model, self.__bos, prompts.detach().to(dev),
                                 None if offsets is None else offsets.detach().to(dev, torch.float32),
                                 batch.body.to(dev), batch.lengths.to(dev), self.__verbalizer)
        return logits.float().cpu()

    def query(self, prompts: torch.Tensor, offsets: torch.Tensor | None,
              batch: EncodedTask) -> tuple[torch.Tensor, torch.Tensor]:
        """Score K prompts on one minibatch: costs K queries.

        Parameters
        ----------
        prompts : LongTensor (K, n)
            Token ids of K discrete prompts.
        offsets : None or FloatTensor (K, n, D) or (K, B, n, D)
            Continuous offsets added to the prompt embeddings (per prompt, or per prompt and
            example).
        batch : EncodedTask with B examples.

        Returns
        -------
        losses : Tensor (K, B), per-example cross-entropy over the verbalizer logits
        logits : Tensor (K, B, C)
        """
        K = prompts.shape[0]
        if self.n_queries + K > self.budget:
            raise BudgetExceeded(f"{K} queries requested, {self.queries_left} left of {self.budget}")
        self.n_queries += K
        logits = self._forward(prompts, offsets, batch)
        labels = batch.labels[None].expand(K, -1)
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                 reduction="none").view(K, -1)
        return losses, logits

    def evaluate(self, prompt: torch.Tensor, offset: torch.Tensor | None, data: EncodedTask,
                 *, chunk: int = 512) -> float:
        """Accuracy of one prompt (n,) with offset None | (n, D) on ``data`` (not charged)."""
        correct = 0
        for s in range(0, len(data), chunk):
            part = data.subset(torch.arange(s, min(s + chunk, len(data))))
            off = None if offset is None else offset[None]
            logits = self._forward(prompt[None], off, part)[0]
            correct += int((logits.argmax(-1) == part.labels).sum())
        self.n_eval_examples += len(data)
        return correct / len(data)
