"""The ranking shared by APS and RAPS: every label's score from the sorted probabilities.

For one example with probabilities pi sorted in decreasing order (ties broken by class
index, a stable sort), label y at rank o(y) (1 = the top label) has
rho(y) = the mass of the labels ranked above it (an exclusive cumulative sum, so the top
label has rho = 0 exactly), and its score is

    s(y) = rho(y) + u * pi(y) + lam * max(o(y) - k_reg, 0)

(APS: lam = 0). Computed for every label at once in the sorted order, then put back in
class order.
"""

import numpy as np


def label_scores(probabilities, u, k_reg, lam):
    """`(n, k)` scores of every label, in class order, for float64 `probabilities` `(n, k)`
    and `u` `(n,)` (one uniform per example, shared by its labels)."""
    order = np.argsort(-probabilities, axis=1, kind="stable")
    ordered = np.take_along_axis(probabilities, order, axis=1)
    above = np.cumsum(ordered, axis=1)
    above = np.concatenate([np.zeros((len(ordered), 1)), above[:, :-1]], axis=1)
    sorted_scores = above + np.asarray(u, np.float64).reshape(-1, 1) * ordered
    if lam:
        ranks = np.arange(1, probabilities.shape[1] + 1, dtype=np.float64)
        sorted_scores = sorted_scores + lam * np.maximum(ranks - k_reg, 0.0)
    scores = np.empty_like(sorted_scores)
    np.put_along_axis(scores, order, sorted_scores, axis=1)
    return scores


def true_label_ranks(probabilities, labels):
    """The 1-based rank o(y) of each example's label in its stably sorted probabilities."""
    order = np.argsort(-probabilities, axis=1, kind="stable")
    return np.argmax(order == np.asarray(labels).reshape(-1, 1), axis=1) + 1


def check_u(u, num_examples):
    """`u` as a float64 vector `(n,)`: a scalar is broadcast; values must lie in [0, 1]."""
    u = np.asarray(u, dtype=np.float64)
    if u.ndim == 0:
        u = np.full(num_examples, float(u))
    u = u.reshape(-1)
    if u.shape != (num_examples,):
        raise ValueError(
            f"`u` must be a number or one uniform per example, shape ({num_examples},). "
            f"Received: u.shape={u.shape}"
        )
    if not np.isfinite(u).all() or u.min() < 0 or u.max() > 1:
        raise ValueError("`u` must lie in [0, 1] (uniform draws).")
    return u


SCORES = ("lac", "aps", "raps")


def set_mask(probabilities, thresholds, score, randomized, k_reg, lam, u):
    """The prediction sets `(n, k)` (bool) for float64 `probabilities` `(n, k)` and
    thresholds (a number, or `(k,)`: one per class, Mondrian).

    * LAC: {y : 1 - pi_y <= tau_y}.
    * APS/RAPS, randomized: {y : s(x, y; u) <= tau_y}, u `(n,)` one uniform per example.
    * APS/RAPS, not randomized: {y : s(x, y; 0) < tau_y}, the union over u in (0, 1] of the
      randomized sets: never smaller than any of them (so at least as covering), and never
      empty when k_reg >= 1 (the top label has s(x, y; 0) = 0).
    """
    thresholds = np.asarray(thresholds, np.float64)
    if score == "lac":
        return 1.0 - probabilities <= thresholds
    if randomized:
        return label_scores(probabilities, u, k_reg, lam) <= thresholds
    return label_scores(probabilities, np.zeros(len(probabilities)), k_reg, lam) < thresholds
