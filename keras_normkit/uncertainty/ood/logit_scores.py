"""Out-of-distribution and misclassification scores from a classifier's outputs.

Each score is a confidence: high = in-distribution (or likely correct), so that every
score of the package feeds `detection_measures` the same way.

* Maximum softmax probability (MSP, Hendrycks & Gimpel 2017): max_k softmax(z)_k.
* Max-logit (Hendrycks et al. 2022, "Scaling out-of-distribution detection"): max_k z_k.
* Energy (Liu et al. 2020): the negative free energy -E(x; T) = T * logsumexp(z / T).
"""

from keras_normkit._validation import check_bool, check_number
from keras_normkit.uncertainty import _arrays

__all__ = ["energy_score", "max_logit", "max_softmax_probability"]


def max_softmax_probability(outputs, from_logits=True):
    """Maximum softmax probability, max_k pi_k(x): the baseline confidence score.

    Hendrycks & Gimpel (2017) showed that this score, available from any classifier, ranks
    correctly classified examples above misclassified ones and in-distribution examples
    above out-of-distribution ones better than chance on vision, text and speech.

    Args:
        outputs: `(n, k)` logits (`from_logits=True`), or probabilities (`from_logits=False`,
            e.g. the mean probabilities of `MonteCarloDropout` or `DeepEnsemble`). `(n,)`
            for a binary classifier.
        from_logits: Whether `outputs` are logits.

    Returns:
        `(n,)` float64 scores in [1/k, 1] (high = in-distribution / likely correct).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import max_softmax_probability
    >>> max_softmax_probability(np.log([[0.7, 0.2, 0.1], [0.4, 0.3, 0.3]])).round(2).tolist()
    [0.7, 0.4]

    Reference: Hendrycks & Gimpel, "A Baseline for Detecting Misclassified and
    Out-of-Distribution Examples in Neural Networks", ICLR 2017, arXiv:1610.02136.
    """
    check_bool("from_logits", from_logits)
    if from_logits:
        return _arrays.softmax(_arrays.check_logits(outputs, "outputs")).max(axis=1)
    return _arrays.check_probabilities(outputs, "outputs").max(axis=1)


def max_logit(logits):
    """Max-logit score, max_k z_k(x): the MSP before the softmax normalizes it away.

    Softmax divides by the sum over classes, so an input with large logits for two classes
    gets a low MSP even though the network recognises it strongly; the raw maximum keeps that
    magnitude (Hendrycks et al. 2022 find it better than MSP with many classes).

    Args:
        logits: `(n, k)` logits (`(n,)` for one binary logit, read as the logits (0, z)).

    Returns:
        `(n,)` float64 scores (high = in-distribution).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import max_logit
    >>> max_logit(np.array([[2.0, 1.0, -1.0], [0.5, 0.2, 0.1]])).tolist()
    [2.0, 0.5]

    Reference: Hendrycks, Basart, Mazeika, Zou, Kwon, Mostajabi, Steinhardt, Song, "Scaling
    Out-of-Distribution Detection for Real-World Settings", ICML 2022, arXiv:1911.11132.
    """
    return _arrays.check_logits(logits).max(axis=1)


def energy_score(logits, temperature=1.0):
    """Energy score, -E(x; T) = T * logsumexp_k(z_k / T): the negative free energy.

    E(x; T) = -T log sum_k exp(z_k / T) is low for inputs the network was trained on
    (training lowers the energy of the data's correct class); Liu et al. (2020) score with
    -E, which unlike MSP is not squashed by the softmax, and is proportional to the log of
    the input's density under the model's implicit energy-based density. T = 1 is theirs.

    Args:
        logits: `(n, k)` logits (`(n,)` for one binary logit, read as (0, z)).
        temperature: T > 0.

    Returns:
        `(n,)` float64 scores (high = in-distribution).

    Example:

    >>> import numpy as np
    >>> from keras_normkit.uncertainty import energy_score
    >>> energy_score(np.log([[1.0, 1.0, 2.0]])).tolist()  # log(1 + 1 + 2)
    [1.3862943611198906]

    Reference: Liu, Wang, Owens, Li, "Energy-based Out-of-distribution Detection",
    NeurIPS 2020, arXiv:2010.03759, Eq. 4-5.
    """
    temperature = check_number("temperature", temperature, 0.0, strict_minimum=True)
    logits = _arrays.check_logits(logits)
    return temperature * _arrays.logsumexp(logits / temperature)
