"""Independent transcriptions of the published formulas, one example and one label at a
time, in plain Python: the tests compare the vectorised library against them."""

import math


def ranking(p):
    """Labels by decreasing probability, ties by class index."""
    return sorted(range(len(p)), key=lambda j: (-p[j], j))


def raps_score(p, y, u, k_reg, lam):
    """E(x, y, u) = sum of pi over labels ranked above y + u pi_y + lam (o(y) - k_reg)+
    (Angelopoulos et al. 2021, Eq. 2 and Algorithm 2; APS when lam = 0)."""
    order = ranking(p)
    rank = order.index(y) + 1
    above = sum(p[j] for j in order[: rank - 1])
    return above + u * p[y] + lam * max(rank - k_reg, 0)


def lac_score(p, y):
    """1 - pi_y (Sadinle et al. 2019)."""
    return 1.0 - p[y]


def quantile(scores, alpha):
    """The ceil((n + 1)(1 - alpha))-th smallest score (1-based), or None if it is beyond n."""
    n = len(scores)
    rank = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    return None if rank > n else sorted(scores)[rank - 1]


def raps_set(p, tau, u, k_reg, lam, randomized):
    """The paper's code's set rule (gcq): the labels whose regularized cumulative mass is
    <= tau, plus the next one; randomized, that next one is dropped unless
    u < (tau - mass above it - its penalty) / its probability."""
    order = ranking(p)
    total, size = 0.0, 0
    for rank, j in enumerate(order, start=1):
        total += p[j]
        if total + lam * max(rank - k_reg, 0) <= tau:
            size = rank
        else:
            break
    size = min(size + 1, len(p))
    if randomized:
        last = order[size - 1]
        above = sum(p[j] for j in order[: size - 1])
        v = (tau - above - lam * max(size - k_reg, 0)) / p[last]
        if u >= v:
            size -= 1
    return set(order[:size])
