"""Knowledge distillation for pre-training: MiniPLM's difference sampling and its baselines.

MiniPLM (Gu et al., ICLR 2025) scores every pre-training document once, offline, with a large
teacher LM and a small reference LM, keeps the top fraction ``alpha`` by the *difference score*
(reference loss minus teacher loss, per token) and pre-trains the student on that subset with the
ordinary next-token loss::

    nll_t = document_nll(teacher, corpus.ids)       # (N,) mean next-token NLL per document
    nll_r = document_nll(reference, corpus.ids)
    keep = top_fraction(difference_scores(nll_t, nll_r), alpha=0.5)   # indices, in corpus order

The baseline "vanilla KD" distils online with a token-level loss, :func:`kd_loss`, and pays the
teacher's forward pass at every step; :func:`kd_matched_steps` gives its step count at equal
training compute. :func:`fact_corpus` is a procedural corpus whose documents carry two continuous
knobs, a difficulty (the share of statements that need memorised knowledge) and a corruption rate
(the share of tokens replaced at random), so that what a selection keeps can be counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.train import next_token_loss, train_lm

#: token ids of the fact corpus: 0 padding, 1 beginning of document, then the key alphabet, then
#: the copy alphabet
PAD_ID, BOS_ID = 0, 1


@dataclass(frozen=True)
class FactCorpus:
    """Documents of :func:`fact_corpus` with their knobs.

    Attributes
    ----------
    ids : LongTensor
        Token ids, shape (N, T); ``ids[:, 0]`` is ``<bos>``, then triples ``a b c``.
    difficulty : ndarray
        Share of the document's triples that are facts (``c = table[a, b]``), shape (N,).
    corruption : ndarray
        Probability with which each token after ``<bos>`` was replaced by a uniform random
        symbol, shape (N,).
    n_keys : int
        Size of the key alphabet (ids ``2 .. 2 + n_keys - 1``); the copy alphabet follows it.
    """

    ids: torch.Tensor
    difficulty: np.ndarray
    corruption: np.ndarray
    n_keys: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def subset(self, index: torch.Tensor | np.ndarray) -> "FactCorpus":
        """The documents at ``index`` (any integer array), in that order."""
        idx = np.asarray(torch.as_tensor(index).cpu())
        return FactCorpus(self.ids[torch.as_tensor(idx, dtype=torch.long)], self.difficulty[idx],
                          self.corruption[idx], self.n_keys)

    @property
    def vocab_size(self) -> int:
        """``2 + 2 * n_keys``: padding, ``<bos>``, the key and the copy alphabets."""
        return 2 + 2 * self.n_keys


def fact_table(n_keys: int, seed: int) -> torch.Tensor:
    """A fixed random map ``table[a, b]`` from pairs of keys to keys, shape (n_keys, n_keys), values
    in ``[0, n_keys)``: the knowledge the hard statements of :func:`fact_corpus` need."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randint(0, n_keys, (n_keys, n_keys), generator=g)


def fact_documents(table: torch.Tensor, difficulty: np.ndarray, corruption: np.ndarray, n_triples: int,
                   rng: np.random.Generator) -> torch.Tensor:
    """Documents ``<bos> a1 b1 c1 a2 b2 c2 ...`` of ``n_triples`` triples each, shape
    (N, 1 + 3 * n_triples).

    Each triple is a *fact* with probability ``difficulty[i]``: ``a, b`` uniform keys and
    ``c = table[a, b]``; otherwise a *copy*: ``a`` the document's own marker (one copy symbol drawn
    once per document), ``b`` a uniform copy symbol and ``c = b``. Facts need the memorised table and
    carry more information; copies are predictable but for ``b``. Then every token after ``<bos>`` is replaced, with
    probability ``corruption[i]``, by a symbol drawn uniformly from both alphabets.
    """
    k = table.shape[0]
    d = np.asarray(difficulty, dtype=float)[:, None]
    n = d.shape[0]
    is_fact = rng.random((n, n_triples)) < d
    marker = rng.integers(0, k, (n, 1))                     # each document's own copy marker
    a = np.where(is_fact, rng.integers(0, k, (n, n_triples)), marker)
    b = rng.integers(0, k, (n, n_triples))
    tab = table.cpu().numpy()
    c = np.where(is_fact, tab[a, b], b)
    shift = np.where(is_fact, 2, 2 + k)                     # keys live at 2.., copy symbols at 2+k..
    triples = np.stack([a + shift, b + shift, c + shift], axis=-1).reshape(n, 3 * n_triples)
    noise = rng.random(triples.shape) < np.asarray(corruption, dtype=float)[:, None]
    triples = np.where(noise, rng.integers(2, 2 + 2 * k, triples.shape), triples)
    ids = np.concatenate([np.full((n, 1), BOS_ID), triples], axis=1)
    return torch.as_tensor(ids, dtype=torch.long)


def fact_corpus(n_docs: int, table: torch.Tensor, *, n_triples: int = 21, seed: int = 0,
                p_clean: float = 0.5, max_corruption: float = 0.4,
                difficulty: tuple[float, float] = (0.0, 1.0)) -> FactCorpus:
    """A shuffled corpus of ``n_docs`` :func:`fact_documents` with continuous knobs per document:
    difficulty uniform in the range ``difficulty``; corruption 0 with probability ``p_clean``,
    else uniform in ``(0, max_corruption)``."""
    rng = np.random.default_rng([int(seed), 7])
    d = rng.uniform(*difficulty, n_docs)
    eps = np.where(rng.random(n_docs) < p_clean, 0.0, rng.uniform(0.0, max_corruption, n_docs))
    ids = fact_documents(table, d, eps, n_triples, rng)
    return FactCorpus(ids, d, eps, int(table.shape[0]))


def answer_mask(ids: torch.Tensor) -> torch.Tensor:
    """(N, T) bool, True at the third token of every triple (positions 3, 6, 9, ...): the token
    that a fact or a copy determines."""
    pos = torch.arange(ids.shape[1], device=ids.device)
    return ((pos % 3 == 0) & (pos > 0)).expand_as(ids)


@torch.no_grad()
def token_nll(model: torch.nn.Module, ids: torch.Tensor, *, batch_size: int = 512) -> torch.Tensor:
    """Next-token NLL of every predicted token, shape (N, T - 1) (column t scores ``ids[:, t + 1]``),
    float32, on ``ids``'s device. ``model(ids)`` returns logits (B, T, V)."""
    return _per_batch(model, ids, batch_size, lambda logits, x: F.cross_entropy(
        logits.float().transpose(1, 2), x[:, 1:], reduction="none"))


@torch.no_grad()
def token_hits(model: torch.nn.Module, ids: torch.Tensor, *, batch_size: int = 512) -> torch.Tensor:
    """Whether the model's most likely next token is the true one, shape (N, T - 1) bool, aligned
    with :func:`token_nll` (exact match of greedy prediction)."""
    return _per_batch(model, ids, batch_size, lambda logits, x: logits.argmax(-1) == x[:, 1:])


def _per_batch(model: torch.nn.Module, ids: torch.Tensor, batch_size: int,
               score: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``score(logits[:, :-1], x)`` over ``ids`` in batches of ``batch_size`` on the model's
    device, in eval mode (restored after), concatenated on ``ids``'s device."""
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    for i in range(0, ids.shape[0], batch_size):
        x = ids[i:i + batch_size].to(dev)
        out.append(score(model(x)[:, :-1], x).to(ids.device))
    model.train(was_training)
    return torch.cat(out)


def document_nll(model: torch.nn.Module, ids: torch.Tensor, *, batch_size: int = 512) -> torch.Tensor:
    """Mean next-token NLL of each document (nats/token), shape (N,): the per-instance score of
    MiniPLM's inference pass (documents of equal length, so every token counts once)."""
    return token_nll(model, ids, batch_size=batch_size).mean(dim=1)


def difference_scores(nll_teacher: torch.Tensor, nll_reference: torch.Tensor) -> torch.Tensor:
    """MiniPLM's difference score ``r(x) = NLL_ref(x) - NLL_teacher(x) = (1/|x|) log p(x) / p_ref(x)``
    per document: large where the teacher predicts the document much better than the small
    reference. Shapes (N,) -> (N,)."""
    return nll_reference - nll_teacher


def top_fraction(scores: torch.Tensor, alpha: float) -> torch.Tensor:
    """Indices of the ``floor(alpha * N)`` largest ``scores``, returned in increasing (corpus) order.

    Ties are broken by the lower index, so the result is deterministic. ``alpha = 1`` keeps every
    document. ``scores`` (N,) -> LongTensor (floor(alpha N),) on ``scores``'s device.
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    n = scores.shape[0]
    k = int(np.floor(alpha * n + 1e-9))
    order = torch.sort(-scores.double(), stable=True).indices      # descending, stable on ties
    return torch.sort(order[:k]).values


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, ids: torch.Tensor,
            weights: torch.Tensor | None = None, *, beta: float = 0.5,
            temperature: float = 1.0) -> torch.Tensor:
    """Vanilla token-level KD for pre-training: ``(1 - beta) CE + beta KD`` with
    ``KD = -sum_v p(v | x_<t) log q(v | x_<t)``, the teacher's distribution ``p`` against the
    student's ``q``, averaged over the predicted tokens like :func:`next_token_loss` (weights as there).

    KD differs from the forward KL(p || q) by the teacher's entropy, a constant: same gradients.
    With a one-hot teacher on the next tokens, KD equals the cross-entropy and the loss is CE.
    Logits (B, T, V), ``ids`` (B, T).
    """
    if weights is None:
        weights = (ids != 0).float()
    w = weights[:, 1:]
    ce = next_token_loss(student_logits, ids, weights)
    log_q = F.log_softmax(student_logits[:, :-1].float() / temperature, dim=-1)
    p = F.softmax(teacher_logits[:, :-1].float() / temperature, dim=-1)
    kd_tok = -(p * log_q).sum(-1)
    kd = (kd_tok * w).sum() / w.sum().clamp_min(1e-12)
    return (1 - beta) * ce + beta * kd


def non_embedding_params(model: torch.nn.Module) -> int:
    """Parameters outside the token and position embeddings (the ``N`` of the ``6N`` FLOPs rule)."""
    skip = {id(p) for name, m in model.named_modules() if isinstance(m, torch.nn.Embedding)
            for p in m.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


def kd_matched_steps(steps: int, n_student: int, n_teacher: int) -> int:
    """Steps of online KD with the training compute of ``steps`` plain steps.

    A plain step costs ``6 N_s`` FLOPs per token (forward and backward); a KD step adds the teacher's
    forward, ``2 N_t``. Equal compute: ``S_KD = floor(S * 3 N_s / (3 N_s + N_t))``.
    """
    return int(np.floor(steps * 3 * n_student / (3 * n_student + n_teacher)))


def training_flops(steps: int, tokens_per_step: int, n_student: int, n_teacher: int = 0) -> float:
    """``steps * tokens * (6 N_s + 2 N_t)``: training compute, with an online teacher's forward."""
    return float(steps) * tokens_per_step * (6 * n_student + 2 * n_teacher)


def kd_loss_fn(teacher: torch.nn.Module, beta: float) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                                                                     torch.Tensor]:
    """A ``loss_fn(logits, ids, weights)`` for :func:`~iclr25.lm.train.train_lm`: :func:`kd_loss`
    against ``teacher(ids)``, computed online (no gradient) at every step."""
    teacher.eval()

    def loss(logits: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            t_logits = teacher(ids)
        return kd_loss(logits, t_logits, ids, weights, beta=beta)

    return loss


def steps_to_level(curve: np.ndarray | list, level: float) -> float:
    """First step at which a checkpointed loss curve reaches ``level``, linear between checkpoints.

    ``curve``: (K, 2) rows ``(step, loss)`` in increasing step order. Returns the interpolated step
    of the first crossing (the first checkpoint if the curve starts at or below ``level``) and
    ``inf`` if no checkpoint reaches it. The "compute to equal performance" of a training run.
    """
    c = np.asarray(curve, dtype=float)
    hit = np.flatnonzero(c[:, 1] <= level)
    if not len(hit):
        return float("inf")
    if hit[0] == 0:
        return float(c[0, 0])
    (x0, y0), (x1, y1) = c[hit[0] - 1], c[hit[0]]
    return float(x0 + (y0 - level) / (y0 - y1) * (x1 - x0))


def pretrain_on(cfg: TinyLMConfig, ids: torch.Tensor, steps: int, *, lr: float, seed: int,
                batch_size: int = 32, warmup: int = 20, loss_fn=None,
                device: torch.device | str = "cpu",
                on_checkpoint: Callable[[int, TinyLM], None] | None = None,
                every: int = 0) -> tuple[TinyLM, list[float]]:
    """Pre-train a fresh :class:`~iclr25.lm.model.TinyLM` on the documents ``ids`` (N, T) with
    :func:`~iclr25.lm.train.train_lm`: batches of ``batch_size`` documents drawn without replacement
    epoch by epoch (a new permutation each epoch), so no document repeats before the corpus is used up.

    ``seed`` fixes the initial weights and the batch order: two calls with the same seed and
    corpus size are paired. Returns the model (eval mode) and the loss per step.
    ``on_checkpoint(k, model)`` (with ``every > 0``) is called after every ``every``-th step ``k``
    (before the next batch; the final model is the returned one); it must not change the model.
    """
    torch.manual_seed(int(seed))
    model = TinyLM(cfg)
    rng = np.random.default_rng([int(seed), 11])
    n = ids.shape[0]
    epochs = -(-steps * batch_size // n)
    order = torch.as_tensor(np.concatenate([rng.permutation(n) for _ in range(epochs)]))
    weights = torch.ones(batch_size, ids.shape[1])   # every predicted token counts (column 0 is never predicted)

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if on_checkpoint is not None and every > 0 and step > 0 and step % every == 0:
            on_checkpoint(step, model)
        return ids[order[step * batch_size:(step + 1) * batch_size]], weights

    losses = train_lm(model, batch, steps, lr=lr, warmup=warmup, device=device, loss_fn=loss_fn)
    return model, losses
