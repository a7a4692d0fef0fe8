"""Fitting the post-hoc calibration maps by minimum NLL on held-out logits (NumPy only).

* Temperature scaling, p = softmax(z / T): one parameter, fitted by a safeguarded Newton
  iteration in log T (so T > 0 by construction). With beta = 1/T the NLL
  L(beta) = mean_i [logsumexp(beta z_i) - beta z_i[y_i]] is convex, with
  L'(beta) = mean_i (E_p[z_i] - z_i[y_i]) and L''(beta) = mean_i Var_p[z_i] >= 0, so L' is
  monotone and its root (when there is one) is found by Newton steps in log beta, kept
  inside a bracket by bisection. A root exists exactly when L'(0) < 0 < L'(inf), i.e. when
  the logits beat a uniform guess but not every example is already predicted correctly;
  otherwise the optimal T is infinite or zero and a `ValueError` says so.
* Vector scaling, softmax(w * z + b), and matrix scaling, softmax(z @ A + b): fitted by a
  NumPy L-BFGS (two-loop recursion, backtracking line search) started from the temperature
  solution. Matrix scaling penalizes the off-diagonal of A and the bias (ODIR, Kull et al.
  2019), vector scaling the spread of w and the bias, so that neither overfits small
  validation sets.

All passes over the logits run in row chunks of ~8 MB, so `logits` may be a
`numpy.memmap` far larger than memory. A single binary logit z is the two-class softmax of
(0, z): sigmoid(z / T) = softmax((0, z) / T)[1].

Reference: Guo, Pleiss, Sun, Weinberger, "On Calibration of Modern Neural Networks",
ICML 2017, arXiv:1706.04599, Section 4.2.
"""

import math
import warnings

import numpy as np

from keras_normkit._validation import check_number
from keras_normkit.calibration import _validation

__all__ = ["fit_temperature", "fit_vector_scaling", "fit_matrix_scaling"]


def prepare(logits, labels, name="logits"):
    logits, binary = _validation.check_logits(logits, name)
    labels = _validation.check_labels(labels, logits.shape[0], 2 if binary else logits.shape[1])
    return logits, labels, binary


def _warn_if_probabilities(logits):
    """Warn when the 'logits' look like softmax outputs: a classic calibration mistake."""
    head = np.asarray(
        _validation.read_rows(logits, slice(0, min(len(logits), 10_000))), dtype=np.float64
    )
    if head.shape[1] >= 2 and head.min() >= 0 and head.max() <= 1:
        if np.abs(head.sum(axis=1) - 1).max() < 1e-3:
            warnings.warn(
                "The logits look like probabilities (every row is in [0, 1] and sums to 1). "
                "Temperature scaling expects logits: pass the pre-softmax outputs, or "
                "log(probabilities).",
                stacklevel=3,
            )


# --------------------------------------------------------------------------------------
# Temperature scaling.
# --------------------------------------------------------------------------------------


#: Shifted logits are kept in memory between Newton steps when they take at most this.
CACHE_BYTES = 256 * 2**20


class _TemperatureObjective:
    """L'(beta) and L''(beta) of the NLL, from logits shifted by their row maximum.

    d = z - max_j z_j <= 0 is computed once per chunk (and kept in memory when `logits` is
    an in-memory array of at most `CACHE_BYTES`; a memmap is re-read at every step). The
    elementwise work runs in the logits' precision (float32 for float32 logits, else
    float64); per-row moments are combined in float64.
    """

    def __init__(self, logits, labels):
        self.logits, self.labels, self.n = logits, labels, len(logits)
        self.dtype = np.float32 if logits.dtype in (np.float16, np.float32) else np.float64
        width = logits.shape[1] + (logits.shape[1] == 1)
        self.slices = _validation.chunk_slices(self.n, width)
        cache = not isinstance(logits, np.memmap)
        cache = cache and self.n * width * np.dtype(self.dtype).itemsize <= CACHE_BYTES
        self.cache = [] if cache else None
        # d_y per row: kept (n float64) only with the in-memory cache; for a memmap it is
        # gathered again per chunk, so memory stays bounded whatever n.
        self.label_offsets = np.empty(self.n) if cache else None
        # L'(0) = mean(mean_j d_j - d_y) and L'(inf) = mean(-d_y) (max_j d_j = 0).
        slope_at_zero = sum_label_offsets = 0.0
        for rows in self.slices:
            d = self._shifted(rows)
            d_y = self._label_offsets(d, rows)
            sum_label_offsets += float(d_y.sum())
            slope_at_zero += float(np.sum(d.mean(axis=1).astype(np.float64) - d_y))
            if self.cache is not None:
                self.label_offsets[rows] = d_y
                self.cache.append(d)
        self.slope_at_zero = slope_at_zero / self.n
        self.slope_at_infinity = -sum_label_offsets / self.n

    def _label_offsets(self, d, rows):
        labels = np.asarray(self.labels[rows])
        return d[np.arange(len(d)), labels].astype(np.float64)

    def _shifted(self, rows):
        z = np.asarray(_validation.read_rows(self.logits, rows), dtype=self.dtype)
        if z.shape[1] == 1:  # binary: softmax over (0, z)
            z = np.concatenate([np.zeros_like(z), z], axis=1)
        return z - z.max(axis=1, keepdims=True)

    def derivatives(self, beta):
        """(L'(beta), L''(beta))."""
        first = second = 0.0
        beta_ = self.dtype(beta)
        for i, rows in enumerate(self.slices):
            if self.cache is not None:
                d, d_y = self.cache[i], self.label_offsets[rows]
            else:
                d = self._shifted(rows)
                d_y = self._label_offsets(d, rows)
            e = np.multiply(d, beta_)
            np.exp(e, out=e)
            # Row sums over k classes in the working precision (pairwise summation), then
            # float64 for the per-row moments and the sum over rows.
            s0 = e.sum(axis=1).astype(np.float64)
            e *= d
            s1 = e.sum(axis=1).astype(np.float64)
            s2 = np.einsum("ij,ij->i", e, d).astype(np.float64)
            mean = s1 / s0
            first += float(np.sum(mean - d_y))
            second += float(np.sum(np.maximum(s2 / s0 - mean * mean, 0.0)))
        return first / self.n, second / self.n


def fit_temperature(logits, labels, max_iter=100, tol=1e-7):
    """Temperature T > 0 minimizing the NLL of softmax(logits / T) on held-out data.

    Solves min_T -(1/n) sum_i log softmax(z_i / T)[y_i] (for a single binary logit,
    sigmoid(z_i / T)) by Newton's method on log T, safeguarded by bisection: the NLL is
    convex in 1/T, so the iteration converges to the unique optimum in a handful of steps
    and T can neither go negative nor diverge. Dividing logits by a positive T never
    changes the argmax, so accuracy is unchanged.

    Args:
        logits: `(n, k)` pre-softmax logits, or `(n,)`/`(n, 1)` logits of a binary
            classifier. Not probabilities: a warning is issued if the rows look like them.
            May be a `numpy.memmap`; it is read in chunks and never copied whole.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        max_iter: Maximum number of Newton steps.
        tol: Stop when a step in log T is below `tol` (Newton converges quadratically, so the
            error of the returned log T is then far below `tol`).

    Returns:
        The temperature T as a Python float (T > 1 softens over-confident predictions).

    Raises:
        ValueError: for bad input (see the module docstring); when the labels are all one
            class (they then carry no information on the classifier's calibration); or when
            the optimal T is not finite and positive: every example is already classified
            correctly (the NLL keeps falling as T -> 0), or the logits predict the labels no
            better than a uniform guess (the NLL keeps falling as T -> infinity).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(20000, 10)) * 2
    >>> p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    >>> y = (p.cumsum(1) > rng.random((20000, 1))).argmax(1)  # y ~ softmax(z): calibrated
    >>> round(fit_temperature(2.5 * z, y), 1)  # over-confident logits: T recovers 2.5
    2.5

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2.
    """
    logits, labels, _ = prepare(logits, labels)
    _validation.check_two_classes(
        labels,
        "Temperature scaling",
        "the temperature it would return is arbitrary, set only by how many of these "
        "examples happen to be misclassified",
    )
    _warn_if_probabilities(logits)
    objective = _TemperatureObjective(logits, labels)
    if objective.slope_at_zero >= 0:
        raise ValueError(
            "Temperature scaling has no finite optimum: the logits predict the labels no "
            f"better than a uniform guess (mean logit of the label minus mean logit = "
            f"{-objective.slope_at_zero:.3g} <= 0), so the NLL keeps decreasing as "
            "T -> infinity. Check that labels and logits are aligned."
        )
    if objective.slope_at_infinity <= 0:
        raise ValueError(
            "Temperature scaling has no finite optimum: every example's label already has "
            "the largest logit, so the NLL keeps decreasing as T -> 0. Calibrate on held-out "
            "data the model was not trained on, with at least one misclassified example."
        )
    # Newton in u = log(beta) = -log T, kept in a bracket of the root of the increasing L'.
    u, lo, hi = 0.0, -math.inf, math.inf
    for _ in range(max_iter):
        beta = math.exp(u)
        first, second = objective.derivatives(beta)
        if first > 0:
            hi = min(hi, u)
        else:
            lo = max(lo, u)
        # Newton on f(u) = NLL(e^u): f' = beta L', f'' = beta^2 L'' + beta L'. Where f is
        # not convex, a Newton step on the root of L' (curvature beta L'') instead.
        curvature = beta * second + first
        if curvature <= 0:
            curvature = beta * second
        step = -first / curvature if curvature > 0 else -math.copysign(2.0, first)
        step = max(-2.0, min(2.0, step))  # a factor e^2 at most per step
        candidate = u + step
        if not lo < candidate < hi:
            candidate = 0.5 * (lo + hi) if math.isfinite(lo + hi) else u + step
        if abs(candidate - u) <= tol or first == 0.0:
            u = candidate
            break
        u = candidate
    else:
        warnings.warn(
            f"fit_temperature did not converge in {max_iter} Newton steps "
            f"(last step {abs(step):.3g} in log T); returning T={math.exp(-u):.6g}.",
            stacklevel=2,
        )
    return float(math.exp(-u))


# --------------------------------------------------------------------------------------
# Vector and matrix scaling.
# --------------------------------------------------------------------------------------


def _affine_nll(logits, labels, params, kind, l2):
    """Mean NLL (+ penalty) of softmax(affine(z)) and its gradient w.r.t. params."""
    num = logits.shape[1]
    if kind == "vector":
        scale, bias = params[:num], params[num:]
    else:
        scale, bias = params[: num * num].reshape(num, num), params[num * num :]
    loss = 0.0
    grad_scale, grad_bias = np.zeros_like(scale), np.zeros(num)
    for rows in _validation.chunk_slices(len(logits), 2 * num + 1):
        z = np.asarray(_validation.read_rows(logits, rows), dtype=np.float64)
        a = z * scale + bias if kind == "vector" else z @ scale + bias
        if num == 1:  # binary: softmax over (0, a)
            a = np.concatenate([np.zeros_like(a), a], axis=1)
        a -= a.max(axis=1, keepdims=True)
        e = np.exp(a)
        total = e.sum(axis=1)
        index = np.arange(len(a)), labels[rows]
        loss += float(np.sum(np.log(total) - a[index]))
        g = e / total[:, None]
        g[index] -= 1.0
        if num == 1:
            g = g[:, 1:]
        grad_scale += np.sum(g * z, axis=0) if kind == "vector" else z.T @ g
        grad_bias += g.sum(axis=0)
    n = len(logits)
    loss, grad_scale, grad_bias = loss / n, grad_scale / n, grad_bias / n
    if l2 and num > 1:
        # Matrix: off-diagonal of A; vector: spread of w around its mean (the common
        # scale 1/T stays free); both: the bias.
        if kind == "matrix":
            deviation = scale - np.diag(np.diag(scale))
        else:
            deviation = scale - scale.mean()
        loss += l2 * (float(np.sum(deviation**2)) + float(bias @ bias))
        grad_scale = grad_scale + 2 * l2 * deviation
        grad_bias = grad_bias + 2 * l2 * bias
    return loss, np.concatenate([np.ravel(grad_scale), grad_bias])


def _gauge_projection(num, kind):
    """Orthogonal projection onto the parameters that fix softmax's shift invariance.

    softmax(a) = softmax(a + c): the NLL does not change when a constant is added to the
    bias, or (matrix scaling) to a whole row of A. Among these equivalent parameters the
    penalty is smallest when the bias, and the off-diagonal of each row of A, sum to 0: a
    linear subspace that contains the penalized optimum and in which the NLL has no flat
    direction left, so L-BFGS is run there (from a start point inside it).
    """
    if num == 1:
        return lambda v: v
    off_diagonal = ~np.eye(num, dtype=bool)

    def project(v):
        v = v.copy()
        if kind == "matrix":
            a = v[: num * num].reshape(num, num)
            a[off_diagonal] -= np.repeat(a.sum(1) - np.diag(a), num - 1) / (num - 1)
        v[-num:] -= v[-num:].mean()
        return v

    return project


def lbfgs(function, x, max_iter, gtol, project=lambda v: v, memory=10):
    """Minimize a smooth function with L-BFGS in a linear subspace (gradients projected).

    Returns (x, converged, iterations).
    """

    def evaluate(point):
        value, gradient = function(point)
        return value, project(gradient)

    f, g = evaluate(x)
    s_history, y_history = [], []
    for iteration in range(max_iter):
        if np.max(np.abs(g)) <= gtol:
            return x, True, iteration
        # Two-loop recursion for the direction -H g.
        q, alphas = g.copy(), []
        for s, y in zip(reversed(s_history), reversed(y_history), strict=True):
            alpha = (s @ q) / (y @ s)
            q -= alpha * y
            alphas.append(alpha)
        if s_history:
            q *= (s_history[-1] @ y_history[-1]) / (y_history[-1] @ y_history[-1])
        else:
            q /= max(1.0, np.linalg.norm(g))
        for s, y, alpha in zip(s_history, y_history, reversed(alphas), strict=True):
            q += s * (alpha - (y @ q) / (y @ s))
        direction = -q
        slope = g @ direction
        if slope >= 0:  # not a descent direction: restart from steepest descent
            s_history, y_history = [], []
            direction, slope = -g, -(g @ g)
        step = 1.0
        for _ in range(60):  # backtracking (Armijo)
            x_new = x + step * direction
            f_new, g_new = evaluate(x_new)
            if np.isfinite(f_new) and f_new <= f + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            return x, False, iteration
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12 * np.linalg.norm(s) * np.linalg.norm(y):
            s_history.append(s)
            y_history.append(y)
            if len(s_history) > memory:
                s_history.pop(0)
                y_history.pop(0)
        converged = abs(f - f_new) <= 1e-14 * max(1.0, abs(f))
        x, f, g = x_new, f_new, g_new
        if converged:
            return x, True, iteration + 1
    return x, np.max(np.abs(g)) <= gtol, max_iter


def _fit_affine(logits, labels, kind, l2, max_iter, gtol):
    logits, labels, _ = prepare(logits, labels)
    _validation.check_two_classes(
        labels,
        f"{kind.capitalize()} scaling",
        "the NLL keeps falling as that class's bias grows, so the fit has no finite optimum "
        "(with l2 > 0 the penalty alone would decide where it stops)",
    )
    _warn_if_probabilities(logits)
    num = logits.shape[1]
    try:
        start = 1.0 / fit_temperature(logits, labels)
    except ValueError:
        start = 1.0
    if kind == "vector":
        x0 = np.concatenate([np.full(num, start), np.zeros(num)])
    else:
        x0 = np.concatenate([np.ravel(np.eye(num) * start), np.zeros(num)])
    x, converged, iterations = lbfgs(
        lambda p: _affine_nll(logits, labels, p, kind, l2),
        x0,
        max_iter,
        gtol,
        project=_gauge_projection(num, kind),
    )
    if not converged:
        warnings.warn(
            f"{kind} scaling did not converge in {iterations} L-BFGS iterations (max_iter="
            f"{max_iter}); the last iterate is returned. With separable held-out data the "
            "optimum is at infinity: use more held-out data or temperature scaling.",
            stacklevel=3,
        )
    scale = x[:num] if kind == "vector" else x[: num * num].reshape(num, num)
    return scale, x[-num:]


def fit_vector_scaling(logits, labels, l2=1e-2, max_iter=1000, gtol=1e-7):
    """Vector scaling: w and b minimizing NLL(softmax(w * z + b)) + l2 * (|w - mean w|^2 + |b|^2).

    A diagonal generalization of temperature scaling (w = 1/T, b = 0 is temperature
    scaling) with 2k parameters, fitted by L-BFGS from the temperature solution. The
    penalty leaves the common scale (the temperature) free and keeps a class that happens
    to be separable in a small validation set from driving its w_k to infinity (set
    `l2=0` for the unregularized map of Guo et al.). For a single binary logit it is Platt
    scaling, sigmoid(w z + b), never penalized. Unlike temperature scaling it can change
    the argmax.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` for a binary classifier (memmap OK).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        l2: Non-negative weight of the penalty (ignored for a single binary logit).
        max_iter: Maximum number of L-BFGS iterations (a warning is issued if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        `(w, b)`: two float64 arrays of shape `(k,)` (`(1,)` for a binary logit).

    Raises:
        ValueError: for bad input (see `fit_temperature`), or when the labels are all one
            class (the NLL then keeps falling as that class's bias grows: no finite optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_vector_scaling
    >>> z = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 3.0], [2.0, 1.0]])
    >>> w, b = fit_vector_scaling(z, [0, 1, 1, 1, 0])
    >>> w.shape, b.shape
    ((2,), (2,))

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2.
    """
    return _fit_affine(logits, labels, "vector", check_l2(l2), max_iter, gtol)


def fit_matrix_scaling(logits, labels, l2=1e-1, max_iter=1000, gtol=1e-7):
    """Matrix scaling: A and b minimizing NLL(softmax(z @ A + b)) + l2 * (|offdiag A|^2 + |b|^2).

    The most general affine recalibration of the logits (k^2 + k parameters), fitted by
    L-BFGS from the temperature solution A = I / T. The penalty on the off-diagonal of A
    and on b (ODIR, Kull et al. 2019) leaves the diagonal free, so with a large `l2` matrix
    scaling falls back to vector-like scaling instead of overfitting a small validation set.

    Args:
        logits: `(n, k)` logits, or `(n,)`/`(n, 1)` for a binary classifier (memmap OK).
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        l2: Non-negative weight of the off-diagonal and bias penalty (the default, 0.1, did
            best on 600 validation digits; tune it on held-out data for your problem).
        max_iter: Maximum number of L-BFGS iterations (a warning is issued if reached).
        gtol: Convergence tolerance on the largest gradient entry.

    Returns:
        `(A, b)`: float64 arrays of shape `(k, k)` and `(k,)` (calibrated logits `z @ A + b`).

    Raises:
        ValueError: for bad input (see `fit_temperature`), or when the labels are all one
            class (the NLL then keeps falling as that class's bias grows: no finite optimum).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import fit_matrix_scaling
    >>> z = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 3.0], [2.0, 1.0]])
    >>> A, b = fit_matrix_scaling(z, [0, 1, 1, 1, 0], l2=0.1)
    >>> A.shape, b.shape
    ((2, 2), (2,))

    Reference: Guo et al., ICML 2017, arXiv:1706.04599, Section 4.2; Kull et al., "Beyond
    temperature scaling", NeurIPS 2019, arXiv:1910.12656 (ODIR regularization).
    """
    return _fit_affine(logits, labels, "matrix", check_l2(l2), max_iter, gtol)


def check_l2(l2):
    return check_number("l2", l2, 0.0)
