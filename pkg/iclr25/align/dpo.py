"""Direct preference optimisation (DPO), labelling of preference pairs by a (weak) teacher's
implicit reward, and simulated annotators (random and systematic noise).

DPO (Rafailov et al. 2023) with a frozen reference ``pi_ref`` minimises, per labelled pair
``(x, y_w, y_l)``, ``-log sigmoid(beta * [(log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) -
log pi_ref(y_l|x))])``; the implicit reward is ``r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x))``.
Log-probabilities are sums over the response tokens (prompt masked), as
:func:`iclr25.lm.sequence_logprob`.

A label is an int: 1 if ``y1`` is preferred, 0 if ``y2`` is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.lm import Example, PreferencePair, TinyLM, World, encode_examples, score_examples, train_lm
from iclr25.lm.vocab import Vocab
from iclr25.lm.world import IDK, is_refusal, moderation_flag, strip_eos

# ------------------------------------------------------------------------------------------ DPO


def dpo_margin(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
               ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """Implicit reward margin ``beta * [(pc - rc) - (pr - rr)]`` per pair: all inputs (B,) -> (B,)."""
    return beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))


def dpo_loss(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
             ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """Per-pair DPO loss ``-log sigmoid(dpo_margin(...))``: all inputs (B,) -> (B,) (the sigmoid
    loss of the official LMFlow/trl trainers, without label smoothing)."""
    return -F.logsigmoid(dpo_margin(policy_chosen_logps, policy_rejected_logps,
                                    ref_chosen_logps, ref_rejected_logps, beta))


def dpo_grad_weight(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
                    ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float) -> torch.Tensor:
    """``w = beta * sigmoid(-margin)`` (B,): the analytic DPO gradient is
    ``grad loss = -w * (grad log pi(y_w|x) - grad log pi(y_l|x))``, i.e. pairs the policy already
    ranks right by a wide margin get little weight."""
    return beta * torch.sigmoid(-dpo_margin(policy_chosen_logps, policy_rejected_logps,
                                            ref_chosen_logps, ref_rejected_logps, beta))


def implicit_reward(policy_logps: torch.Tensor, ref_logps: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """``beta * (log pi(y|x) - log pi_ref(y|x))``, any shape (elementwise)."""
    return beta * (policy_logps - ref_logps)


def fit_tabular_dpo(P: np.ndarray, beta: float, *, rounds: int = 5) -> np.ndarray:
    """Population DPO on a tabular policy ``pi = softmax(theta)`` over K responses of one prompt,
    uniform reference: minimise ``sum_{i != j} P[i, j] * dpo_loss(i preferred to j)`` with
    ``P[i, j]`` the probability that a label says ``i > j`` (diagonal ignored); LBFGS in float64.
    Returns the centred logits ``theta - mean(theta)`` (K,). The loss is strictly convex in the
    logit differences when every ``0 < P[i, j] < 1``, so the minimiser is unique up to a shift."""
    k = len(P)
    theta = torch.zeros(k, dtype=torch.float64, requires_grad=True)
    ref = torch.full((k,), -float(np.log(k)), dtype=torch.float64)
    pt = torch.as_tensor(np.asarray(P, dtype=np.float64))
    ii, jj = np.where(~np.eye(k, dtype=bool))
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=500, tolerance_grad=1e-13, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        lp = torch.log_softmax(theta, 0)
        loss = (pt[ii, jj] * dpo_loss(lp[ii], lp[jj], ref[ii], ref[jj], beta)).sum()
        loss.backward()
        return loss

    for _ in range(rounds):
        opt.step(closure)
    t = theta.detach().numpy()
    return t - t.mean()


def pair_examples(pairs: Sequence[PreferencePair]) -> list[Example]:
    """``[x_1 y1_1, x_1 y2_1, x_2 y1_2, ...]``: the 2N examples of N pairs, interleaved."""
    return [Example(p.prompt, y) for p in pairs for y in (p.y1, p.y2)]


def pair_logps(model: TinyLM, vocab: Vocab, pairs: Sequence[PreferencePair]) -> torch.Tensor:
    """Summed response log-probabilities ``[[log pi(y1|x), log pi(y2|x)], ...]``: (N, 2)."""
    return score_examples(model, vocab, pair_examples(pairs)).view(-1, 2)


def rewards_to_labels(r: torch.Tensor | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Labels from per-pair rewards ``r`` (N, 2): 1 where ``r[:, 0] > r[:, 1]``, 0 where less, a
    fair coin from ``rng`` on exact ties (int array (N,))."""
    r = np.asarray(r.detach().cpu() if isinstance(r, torch.Tensor) else r, dtype=np.float64)
    lab = (r[:, 0] > r[:, 1]).astype(int)
    ties = r[:, 0] == r[:, 1]
    lab[ties] = rng.integers(0, 2, size=int(ties.sum()))
    return lab


def teacher_labels(policy: TinyLM, ref: TinyLM, vocab: Vocab, pairs: Sequence[PreferencePair], *,
                   beta: float = 1.0, rng: np.random.Generator | None = None,
                   ref_logps: torch.Tensor | None = None) -> np.ndarray:
    """Weak feedback: label each pair by the teacher's implicit reward (its own reference
    ``ref``), ``1`` iff ``r(x, y1) > r(x, y2)``; (N,) ints. The labels do not depend on ``beta > 0``
    nor on any per-prompt constant added to the reward. ``ref_logps`` (N, 2) skips scoring ``ref``."""
    ref_lp = pair_logps(ref, vocab, pairs) if ref_logps is None else ref_logps
    r = implicit_reward(pair_logps(policy, vocab, pairs), ref_lp.to(next(policy.parameters()).device), beta)
    return rewards_to_labels(r, rng or np.random.default_rng(0))


def chosen_rejected(pairs: Sequence[PreferencePair], labels: np.ndarray) -> tuple[list[Example], list[Example]]:
    """(chosen, rejected) examples of labelled pairs."""
    ch = [Example(p.prompt, p.y1 if lab == 1 else p.y2) for p, lab in zip(pairs, labels)]
    rj = [Example(p.prompt, p.y2 if lab == 1 else p.y1) for p, lab in zip(pairs, labels)]
    return ch, rj


def train_dpo(model: TinyLM, vocab: Vocab, pairs: Sequence[PreferencePair], labels: np.ndarray,
              ref_logps: torch.Tensor, *, beta: float, epochs: float, batch_size: int = 32, lr: float = 1e-3,
              seed: int = 0, nll_weight: float = 0.0,
              device: torch.device | str = "cpu") -> dict[str, list[float]]:
    """DPO on labelled pairs (AdamW, warm-up + cosine of :func:`iclr25.lm.train_lm`, no weight
    decay), shuffled epochs of ``batch_size`` pairs; ``ref_logps`` (N, 2) are the frozen
    reference's :func:`pair_logps`, computed once. ``nll_weight`` > 0 adds ``nll_weight`` times the
    per-token negative log-likelihood of the chosen response (the RPO-style variant, Pang et al.
    2024; 0 is plain DPO). Returns ``{"loss", "margin", "chosen", "rejected"}`` per step (mean
    loss, mean implicit margin, mean change of the chosen and of the rejected log-probability)."""
    labels = np.asarray(labels)
    ch, rj = chosen_rejected(pairs, labels)
    idx = torch.arange(len(pairs))
    ref_c = ref_logps[idx, torch.as_tensor(1 - labels)].to(device)   # column 0 is y1: chosen is y1 iff label 1
    ref_r = ref_logps[idx, torch.as_tensor(labels)].to(device)
    rng = np.random.default_rng([seed, 4242])
    n_batches = max(1, len(pairs) // batch_size)
    steps = max(1, int(round(epochs * n_batches)))
    order: list[np.ndarray] = []
    current: dict[str, torch.Tensor] = {}
    trace: dict[str, list[float]] = {"loss": [], "margin": [], "chosen": [], "rejected": []}

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if step % n_batches == 0:
            order[:] = np.array_split(rng.permutation(len(pairs))[:n_batches * batch_size], n_batches)
        b = order[step % n_batches]
        enc = encode_examples(vocab, [ch[i] for i in b] + [rj[i] for i in b])
        current["b"] = torch.as_tensor(b)
        return enc.ids, enc.mask

    def loss_fn(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logp = F.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        s = (logp * mask[:, 1:]).sum(1)
        k = len(s) // 2
        b = current["b"].to(s.device)
        m = dpo_margin(s[:k], s[k:], ref_c[b], ref_r[b], beta)
        trace["margin"].append(float(m.detach().mean()))
        trace["chosen"].append(float((s[:k].detach() - ref_c[b]).mean()))
        trace["rejected"].append(float((s[k:].detach() - ref_r[b]).mean()))
        loss = -F.logsigmoid(m).mean()
        if nll_weight:
            loss = loss - nll_weight * (s[:k] / mask[:k, 1:].sum(1).clamp(min=1)).mean()
        return loss

    trace["loss"] = train_lm(model, batch_fn, steps, lr=lr, warmup=max(1, steps // 10), weight_decay=0.0,
                             device=device, loss_fn=loss_fn)
    return trace


def sft_on_pairs(model: TinyLM, vocab: Vocab, pairs: Sequence[PreferencePair], steps: int, *,
                 batch_size: int = 32, lr: float = 1e-3, seed: int = 0,
                 device: torch.device | str = "cpu") -> list[float]:
    """The reference policy: SFT (response tokens only) on *both* responses of each pair, i.e.
    on the candidate generator's distribution, so that ``pi_ref`` produces every mode."""
    ex = pair_examples(pairs)
    rng = np.random.default_rng([seed, 777])

    def batch_fn(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = encode_examples(vocab, [ex[i] for i in rng.integers(len(ex), size=batch_size)])
        return b.ids, b.mask

    return train_lm(model, batch_fn, steps, lr=lr, warmup=max(1, steps // 10), weight_decay=0.0, device=device)


@dataclass
class Reference:
    """A frozen reference policy and its :func:`pair_logps` on the labelled (N_l, 2) and the
    unlabelled (N_u, 2) pairs of a split."""

    model: TinyLM
    labeled_logps: torch.Tensor
    unlabeled_logps: torch.Tensor


def make_reference(model: TinyLM, vocab: Vocab, labeled: Sequence[PreferencePair],
                   unlabeled: Sequence[PreferencePair], *, steps: int, seed: int = 0, lr: float = 1e-3,
                   device: torch.device | str = "cpu") -> Reference:
    """SFT ``model`` in place (:func:`sft_on_pairs` on the responses of both sets; labels are not
    used) and score both sets once."""
    sft_on_pairs(model, vocab, list(labeled) + list(unlabeled), steps, seed=seed, lr=lr, device=device)
    return Reference(model, pair_logps(model, vocab, labeled), pair_logps(model, vocab, unlabeled))


def weak_teacher_labels(ref: Reference, vocab: Vocab, labeled: Sequence[PreferencePair], labels: np.ndarray,
                        unlabeled: Sequence[PreferencePair], *, beta: float, epochs: float, lr: float,
                        seed: int = 0, device: torch.device | str = "cpu") -> tuple[np.ndarray, TinyLM]:
    """The weak-feedback pipeline's first two stages: DPO a copy of the reference on the
    labelled pairs with ``labels`` (the human labels of D_l), then label the unlabelled pairs by the
    implicit reward against the same reference. Returns (labels on D_u (N_u,), the teacher)."""
    teacher = copy.deepcopy(ref.model)
    train_dpo(teacher, vocab, labeled, labels, ref.labeled_logps, beta=beta, epochs=epochs, lr=lr, seed=seed,
              device=device)
    out = teacher_labels(teacher, ref.model, vocab, unlabeled, beta=beta, ref_logps=ref.unlabeled_logps,
                         rng=np.random.default_rng([seed, 99]))
    return out, teacher


def policy_answers(model: TinyLM, world: World, prompts: Sequence[Sequence[str]], *, samples: int = 4,
                   temperature: float = 1.0, seed: int = 0, max_new: int = 12) -> tuple[list, list]:
    """A policy's answers: (greedy, one per prompt (P,); sampled, ``samples`` rounds over the
    prompts, ``samples * P`` answers, round-major). Samples are drawn from a CPU generator seeded by
    ``seed``, so every policy answered with the same seed sees the same random numbers."""
    from iclr25.lm import generate_responses

    prompts = [tuple(p) for p in prompts]
    greedy = generate_responses(model, world.vocab, prompts, max_new=max_new)
    g = torch.Generator().manual_seed(seed)
    sampled = generate_responses(model, world.vocab, prompts * samples, max_new=max_new, temperature=temperature,
                                 generator=g)
    return list(greedy), list(sampled)


def response_mode(response: Sequence[str]) -> str:
    """``"refusal"``, ``"idk"`` (i do not know), ``"harmful"`` (names a hazard ingredient) or
    ``"answer"`` (anything else)."""
    y = strip_eos(response)
    if is_refusal(y):
        return "refusal"
    if y == IDK:
        return "idk"
    return "harmful" if moderation_flag(y) else "answer"


def policy_gold_reward(model: TinyLM, world: World, prompts: Sequence[Sequence[str]], *, samples: int = 4,
                       temperature: float = 1.0, seed: int = 0, max_new: int = 12, tie_harmful: bool = False,
                       answers: tuple[list, list] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Gold reward of a policy's answers: (greedy (P,), mean over ``samples`` sampled answers at
    ``temperature`` (P,)), answers from :func:`policy_answers` (or ``answers``, its output), rewards
    by :func:`iclr25.lm.gold_reward` with ``tie_harmful``. Every policy evaluated with the same
    ``seed`` sees the same random numbers (paired comparisons)."""
    from iclr25.lm import gold_reward

    prompts = [tuple(p) for p in prompts]
    greedy_y, sampled_y = answers or policy_answers(model, world, prompts, samples=samples, temperature=temperature,
                                                    seed=seed, max_new=max_new)
    greedy = np.array([gold_reward(world, p, y, tie_harmful=tie_harmful) for p, y in zip(prompts, greedy_y)])
    rep = prompts * samples
    sampled = np.array([gold_reward(world, p, y, tie_harmful=tie_harmful)
                        for p, y in zip(rep, sampled_y)]).reshape(samples, len(prompts))
    return greedy, sampled.mean(0)


# ------------------------------------------------------------------------------- annotators


def gold_rewards(pairs: Sequence[PreferencePair]) -> np.ndarray:
    """``[[r1, r2], ...]`` gold rewards: (N, 2) float64."""
    return np.array([[p.r1, p.r2] for p in pairs], dtype=np.float64)


def noisy_preference_prob(dr: np.ndarray, eps: float, tau: float) -> np.ndarray:
    """``P(y1 > y2) = (1 - eps) * sigmoid(dr / tau) + eps / 2`` with ``dr = r1 - r2``: a
    Bradley-Terry annotator of temperature ``tau`` who, with probability ``eps``, flips a coin
    instead. ``tau = 0`` is the noiseless step (1/2 at ``dr = 0``)."""
    dr = np.asarray(dr, dtype=np.float64)
    bt = np.where(dr > 0, 1.0, np.where(dr < 0, 0.0, 0.5)) if tau == 0 else 1 / (1 + np.exp(-dr / tau))
    return (1 - eps) * bt + eps / 2


def human_labels(pairs: Sequence[PreferencePair], rng: np.random.Generator, *, eps: float,
                 tau: float = 0.5) -> np.ndarray:
    """The simulated human annotator: label 1 with :func:`noisy_preference_prob`; (N,) ints."""
    r = gold_rewards(pairs)
    return (rng.random(len(pairs)) < noisy_preference_prob(r[:, 0] - r[:, 1], eps, tau)).astype(int)


def expected_accuracy(pairs: Sequence[PreferencePair], *, eps: float, tau: float = 0.5) -> float:
    """The annotator's expected agreement with the gold label over non-tied pairs,
    ``mean (1 - eps) * sigmoid(|dr| / tau) + eps / 2``."""
    r = gold_rewards(pairs)
    dr = np.abs(r[:, 0] - r[:, 1])
    dr = dr[dr > 0]
    return float(noisy_preference_prob(dr, eps, tau).mean())


def calibrate_eps(pairs: Sequence[PreferencePair], target: float, *, tau: float = 0.5) -> float:
    """The flip rate at which :func:`expected_accuracy` equals ``target`` (closed form: accuracy is
    affine in eps, ``A (1 - eps) + eps / 2`` with ``A`` the accuracy at eps = 0)."""
    a = expected_accuracy(pairs, eps=0.0, tau=tau)
    if not 0.5 <= target <= a:
        raise ValueError(f"target {target} outside [0.5, {a:.3f}] reachable at tau = {tau}")
    return float((a - target) / (a - 0.5))


def systematic_reward(world: World, pair_or_prompt: PreferencePair | Sequence[str],
                      response: Sequence[str] | None = None, *, comply: float = 1.0,
                      recognised: Sequence[str] = ()) -> float:
    """A *systematically* biased annotator's score of a response (deterministic, so the same
    response is always judged alike; only exact ties of this score are broken by a coin, in
    :func:`systematic_labels`):

    * ``F``: confidence over correctness: any answer that states facts beats a refusal or
      ``i do not know``; between answers, the number of true facts decides;
    * ``B``: the gold reward;
    * ``H``: a compliant answer is judged helpful: it scores ``comply`` above the refusal, except
      for the toxins in ``recognised``, which the annotator knows to be harmful (there it is the
      gold reward with harmful answers tied).

    ``pair_or_prompt``: a prompt (with ``response``) or a pair (then the pair's ``y1``).
    """
    from iclr25.lm.world import prompt_kind, gold_reward

    if isinstance(pair_or_prompt, PreferencePair):
        prompt, response = pair_or_prompt.prompt, pair_or_prompt.y1 if response is None else response
    else:
        prompt = tuple(pair_or_prompt)
    kind, entity = prompt_kind(world, prompt)
    y = strip_eos(response)
    if kind == "B" or (kind == "H" and entity in recognised):
        return gold_reward(world, prompt, response, tie_harmful=True)
    if kind == "F":
        if is_refusal(y) or y == IDK:
            return 0.0
        return 2.0 + sum(world.fact(entity, rel) in y for rel in ("city", "job"))
    if is_refusal(y):
        return 2.0
    if moderation_flag(y):
        return 2.0 + comply
    return 0.5 if y == IDK else 0.0


def systematic_labels(world: World, pairs: Sequence[PreferencePair], rng: np.random.Generator, *,
                      comply: float = 1.0, recognised: Sequence[str] = ()) -> np.ndarray:
    """Labels of the systematic annotator (:func:`systematic_reward`, coin flips only on ties)."""
    r = np.array([[systematic_reward(world, p.prompt, p.y1, comply=comply, recognised=recognised),
                   systematic_reward(world, p.prompt, p.y2, comply=comply, recognised=recognised)] for p in pairs])
    return rewards_to_labels(r, rng)


def label_accuracy(labels: np.ndarray, pairs: Sequence[PreferencePair], *, min_gap: float = 0.0) -> float:
    """Fraction of non-tied pairs (``|r1 - r2| > min_gap``) whose label prefers the response of
    higher gold reward."""
    r = gold_rewards(pairs)
    dr = r[:, 0] - r[:, 1]
    keep = np.abs(dr) > min_gap
    if not keep.any():
        return float("nan")
    return float((np.asarray(labels)[keep] == (dr[keep] > 0)).mean())
