"""A small NumPy L-BFGS, the solver of vector, matrix, Platt and Dirichlet calibration.

Two-loop recursion for the direction, a backtracking (Armijo) line search, and an optional
linear projection of the gradients, so that the iterates stay in a subspace (used to fix
softmax's shift invariance, see `affine.py`). Every calibration objective here is smooth
and convex or nearly so, with few parameters: a dependency-free solver whose stopping rule
the fits control is enough.

Reference: Nocedal & Wright, "Numerical Optimization", 2nd ed., Algorithm 7.4 (two-loop
recursion).
"""

import numpy as np


def lbfgs(function, x, max_iter, gtol, project=lambda v: v, memory=10):
    """Minimize a smooth function with L-BFGS in a linear subspace (gradients projected).

    Args:
        function: `params -> (value, gradient)`.
        x: Start point (inside the subspace when `project` is given).
        max_iter: Maximum number of iterations.
        gtol: Stop when the largest projected gradient entry is below it.
        project: Linear projection applied to every gradient.
        memory: Number of correction pairs kept.

    Returns:
        `(x, converged, iterations)`.
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
