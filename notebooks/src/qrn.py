# %% [markdown]
# # Query-reduction networks (QRN), parallel over time
#
# `keras_normkit.layers.QRN` implements Seo, Min, Farhadi & Hajishirzi (ICLR 2017),
# "Query-Reduction Networks for Question Answering". A story is a sequence of sentence
# vectors `x_t`; the question `q` is *reduced* sentence by sentence:
#
# * update gate `z_t = σ(W_z (x_t ∘ q_t) + b_z)` (a scalar per sentence: "is this sentence
#   relevant to the query?"), reset gate `r_t = σ(W_r (x_t ∘ q_t) + b_r)`;
# * candidate `h̃_t = tanh(W_h [x_t; q_t] + b_h)`, state `h_t = z_t r_t h̃_t + (1 − z_t) h_{t−1}`.
#
# The state is linear in `h_{t−1}`, so the layer computes all steps at once with a blocked
# parallel scan (exact, stable at any length, no T×T matrix). A bidirectional layer whose
# output `q² = h¹_fwd + h¹_bwd` is the query of a second layer gives the paper's "2rb" model.
#
# This notebook (1) checks the parallel scan against the step loop, (2) plots learning
# curves of QRN and an LSTM on generated bAbI-style tasks 1 and 2 **precomputed** by
# `examples/babi/train.py` (saved in `data/qrn_babi_curves.json`; the commands are below),
# (3) trains a small QRN on task 1 here, in well under a minute, and plots its update
# gates `z_t` per sentence, and (4) shows the results, also precomputed, of the paper's
# protocol on the real bAbI 1k tasks (`data/qrn_babi_1k.json`).

# %%
import json
import pathlib
import sys

import keras
import matplotlib.pyplot as plt
import numpy as np

sys.path.insert(0, str(pathlib.Path("..").resolve() / "examples" / "babi"))
import train

from keras_normkit.layers import QRN

plt.rcParams.update({"figure.dpi": 72, "savefig.dpi": 72})

# %% [markdown]
# ## 1. Parallel == sequential, also on long sequences
# The same weights, `implementation="parallel"` (scan) vs `"sequential"` (the `QRNCell`
# stepped by `keras.layers.RNN`), on 2,000 steps with gates that switch between ~0 and ~1.

# %%
rng = np.random.default_rng(0)
x = rng.normal(size=(2, 2000, 8)).astype("float32")
q = rng.normal(size=(2, 8)).astype("float32")
parallel = QRN(8, bidirectional=True)
sequential = QRN(8, bidirectional=True, implementation="sequential")
parallel([x, q])
sequential([x, q])
weights = parallel.get_weights()
weights[0] *= 10  # large gate logits: z close to 0 or 1
parallel.set_weights(weights)
sequential.set_weights(weights)
difference = np.abs(np.asarray(parallel([x, q])) - np.asarray(sequential([x, q]))).max()
print(f"max |parallel - sequential| over 2000 steps: {difference:.2e}")

# %% [markdown]
# ## 2. Learning curves on bAbI-style tasks (precomputed)
# The stories come from `examples/babi/generate.py` (a seeded world of 6 people, 6 places,
# 3 objects; 1,000 training and 1,000 test questions per task). Task 1 asks where a person
# is (one supporting fact), task 2 where an object is (two: who got or dropped it, and
# where that person was). Protocol: the last 100 training questions are a validation split;
# each model trains 60 epochs on the other 900 (batch 32, d = 50) keeping the epoch of lowest
# validation loss, 3 restarts (seeds 0, 1, 2), the run of lowest validation loss is selected
# and its test accuracy reported. The test accuracy per epoch below is only drawn, never
# used to choose anything. The QRN follows the reference code (seominjoon/qrn): embeddings
# and gate kernels uniform in ±√3, update-gate bias −2.5, L2 weight decay 0.001, Adagrad
# (lr 0.5), last layer forward-only; the LSTM (same input module, masked) uses Adam (lr 0.003).
#
# ```
# python examples/babi/train.py --task 1 2 --save notebooks/data/qrn_babi_curves.json
# # ablations of the QRN on task 2 (same protocol):
# python examples/babi/train.py --task 2 --model qrn --keras-init --tag _keras_init \
#     --save notebooks/data/qrn_babi_curves.json
# python examples/babi/train.py --task 2 --model qrn --qrn-optimizer adam --tag _adam \
#     --save notebooks/data/qrn_babi_curves.json
# ```

# %%
curves = json.loads(pathlib.Path("data/qrn_babi_curves.json").read_text())
LABELS = {
    "qrn": "QRN",
    "lstm": "LSTM",
    "qrn_keras_init": "QRN, Keras default init",
    "qrn_adam": "QRN, Adam",
}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for ax, task in zip(axes, (1, 2), strict=True):
    names = ["qrn", "lstm"] + (["qrn_keras_init", "qrn_adam"] if task == 2 else [])
    for name, color in zip(names, ["C0", "C1", "C2", "C3"][: len(names)], strict=True):
        run = curves.get(f"task{task}_{name}")
        if run is None:
            continue
        epochs = np.arange(1, len(run["curve"]) + 1)
        label = f"{LABELS[name]} ({100 * run['test_accuracy']:.1f} %)"
        ax.plot(epochs, run["curve"], "-", color=color, label=label)
        ax.plot(epochs, run["train_curve"], ":", color=color, alpha=0.7)
    ax.set(
        title=f"task {task} (solid: test, dotted: train)",
        xlabel="epoch",
        ylabel="accuracy",
        ylim=(0, 1.02),
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
plt.tight_layout()
plt.show()
for name, run in curves.items():
    tests = ", ".join(f"{100 * r['test_accuracy']:.1f}" for r in run["runs"])
    print(f"{name:20s} selected {100 * run['test_accuracy']:5.1f} %  (all runs: {tests})")

# %% [markdown]
# Both targets are met: task 1 100 % (≥ 99 %) and task 2 100 % (≥ 90 %) for the QRN,
# against 65 % and 33 % for the LSTM, which overfits (its training accuracy on task 2
# reaches 99.7 %). On task 2 one of the three QRN runs (seed 1) stays at 33 % and is
# rejected by its validation loss; seeds 3–7 (`task2_qrn_seeds3to7`) all reach ≥ 99.8 %.
# The ablations show what the earlier version (30.8 % on task 2) lacked: with Keras's
# default initialization (±0.05 embeddings, so `x ∘ q` is tiny and all gates start equal)
# the QRN stalls near 32 % with training accuracy ≤ 46 %; with Adam instead of Adagrad it
# fits the training set without generalizing (≤ 27 % test).

# %% [markdown]
# ## 3. A QRN trained here, and its update gates
# The same model (d = 50), trained for 16 epochs on task 1 (one run, on the 900 training
# questions, best epoch by validation loss). `QRN.update_gate([x, q], mask)`
# returns `z_t` for every sentence; we read the inputs of each QRN layer from the model.

# %%
keras.utils.set_random_seed(0)
accuracy, curve, model, data = train.train("qrn", 1, epochs=16, n_test=500)
print(f"task 1 test accuracy after {len(curve)} epochs: {100 * accuracy:.1f} %")

# %%
(stories, questions), answers = data[1]
inverse = {i: w for w, i in data[2].items()}
qrn1, qrn2 = model.get_layer("qrn_1"), model.get_layer("qrn_2")
inputs_of = keras.Model(model.inputs, [*qrn1.input, qrn2.input[1]])
x, q, h1 = inputs_of.predict([stories[:4], questions[:4]], verbose=0)
mask = (stories[:4] > 0).any(axis=-1)
z1 = np.asarray(qrn1.update_gate([x, q], mask=mask))[..., 0]
z2 = np.asarray(qrn2.update_gate([x, h1], mask=mask))[..., 0]


def words(ids):
    return " ".join(inverse[i] for i in ids if i)


fig, axes = plt.subplots(1, 4, figsize=(13, 4.2))
for k, ax in enumerate(axes):
    n = int(mask[k].sum())
    person = words(questions[k]).split()[-1]
    support = max(t for t in range(n) if words(stories[k, t]).startswith(person))
    ax.barh(np.arange(n) - 0.2, z1[k, :n], height=0.4, label="z, layer 1")
    ax.barh(np.arange(n) + 0.2, z2[k, :n], height=0.4, label="z, layer 2")
    ax.set_yticks(np.arange(n), [words(s) for s in stories[k, :n]], fontsize=8)
    ax.get_yticklabels()[support].set_color("red")
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), title=f"{words(questions[k])}? -> {inverse[answers[k]]}")
axes[0].legend(loc="lower right", fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# What the trained model does: in both layers the update gate opens on the sentences about
# the asked person (z ≈ 1 in the second layer, 0.6–0.9 in the first) and stays near 0 on the
# sentences about other people, so the state of the last (forward) layer at the end holds
# the last of them: the supporting fact (in red).


# %% [markdown]
# ## 4. QRN on the real bAbI (1k)
# Precomputed (nothing is trained here) by `examples/babi/train.py` on the bAbI v1.2 English
# 1k set (1,000 training and 1,000 test questions per task) with the reference code's
# protocol (see `examples/babi/README.md`, "The paper's protocol"): the 2-layer QRN with
# reset gates ("2r": a bidirectional layer, then a forward one), d = 50, memory 50 (the
# last 50 sentences of a story), Adagrad lr 0.5 halved every 100 epochs, batch 32, weight
# decay 0.001, up to 500 epochs; validation = a seeded random 10 % of the training
# *stories* (whole stories, so no story has questions on both sides), after every epoch;
# the epoch of best validation accuracy (ties: lower validation loss) is kept; up to 10 runs
# per task (seeds 0–9), a further one only while the best validation accuracy is below
# 98 %, the run of best validation accuracy selected. The test set is used only for the
# reported number. (Unlike
# the reference code, our layers do not share their weights; the README lists every
# difference.)
#
# ```
# python examples/babi/train.py --data ../shared/data/babi --set 1k --json babi_1k.json
# python examples/babi/train.py --report babi_1k.json --set 1k   # the table below
# ```
#
# `data/qrn_babi_1k.json` is a slimmed copy of that file: per task the selected run's
# test error, best epoch, wall time and its training and validation accuracy per epoch
# (rounded to 4 digits). The paper's text (Seo et al., 2017, QRN 2r on 1k) gives per-task
# errors for tasks 2–5 (the appendix table its Table 1 points to was not found in the copies
# we could read), and for all 20 tasks an average error of 9.9 % with 7 failed tasks
# (error > 5 %); those are the only numbers written here, ours all come from the JSON.
# These runs used keras_normkit 0.1's `QRN`, whose directions shared one reset gate
# (`share_reset_gate=True` now); the per-direction gate follows below.

# %%
from IPython.display import Markdown, display


def qrn_results(saved, set_name, tag=""):
    """The QRN results of one set saved with `tag` (`--tag`) in a results JSON, by task."""
    found = train.column_results(saved, set_name, f"qrn{tag}")
    return [found[task] for task in sorted(found)]


saved = json.loads(pathlib.Path("data/qrn_babi_1k.json").read_text())
display(Markdown(train.report(saved, "1k")))
results = qrn_results(saved, "1k")
failed = [r["task"] for r in results if r["test_error"] > 0.05]
print(
    f"{len(results)} of 20 tasks run; failed (test error > 5 %): "
    + (", ".join(f"task {t}" for t in failed) if failed else "none")
)

# %% [markdown]
# Learning curves of each task's selected run: validation accuracy (solid) and training
# accuracy (dotted) per epoch; the dot marks the selected epoch, the grey lines the
# halvings of the learning rate. The validation split holds about 100 questions, so a
# question is about one point. On a task at 100 % validation accuracy the validation loss
# keeps falling, so its selected epoch is often one of the last.


# %%
def plot_curves(results, halving_every):
    """Validation (solid) and training (dotted) accuracy per epoch of each task's selected
    run; the dot marks the selected epoch, grey lines the learning-rate halvings."""
    columns = 5
    rows = -(-len(results) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(13, 2.2 * rows), sharex=True, sharey=True, squeeze=False
    )
    for ax in axes.flat[len(results) :]:
        ax.axis("off")
    for ax, result in zip(axes.flat, results, strict=False):
        # A slimmed file keeps the selected run's curves at the top, `train.py`'s in its run.
        curves = result.get("curves") or result["runs"][result["selected_run"]]["curves"]
        epochs = np.arange(1, len(curves["val"]) + 1)
        for halving in range(halving_every, len(epochs), halving_every):
            ax.axvline(halving, color="0.85", lw=0.8)
        ax.plot(epochs, curves["val"], "-", color="C0", lw=1, label="validation")
        if "train" in curves:
            ax.plot(epochs, curves["train"], ":", color="C1", lw=1, label="training")
        best = result["best_epoch"]
        ax.plot(best, curves["val"][best - 1], "o", color="C3", ms=5, label="selected epoch")
        error = 100 * result["test_error"]
        ax.set_title(
            f"task {result['task']}: test error {error:.1f} %",
            fontsize=9,
            color="C3" if result["test_error"] > 0.05 else "black",
        )
        ax.set(ylim=(0, 1.02))
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("epoch", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy", fontsize=8)
    axes.flat[0].legend(loc="lower right", fontsize=7)
    plt.tight_layout()
    plt.show()


plot_curves(results, halving_every=100)

# %% [markdown]
# Per task, from the same curves: the selected epoch, the validation accuracy there and at
# the last epoch, and the training accuracy at the last epoch. A task whose validation
# accuracy peaks within the first 100 epochs and is lower at the end, while the training
# accuracy reaches ~100 %, overfits: the selection keeps its early epoch.

# %%
print("task  test error  selected epoch  val there  val last  train last")
overfit = []
for result in results:
    curves = result["curves"]
    best, val = result["best_epoch"], curves["val"]
    train_last = f"{100 * curves['train'][-1]:9.1f} %" if "train" in curves else "        —"
    print(
        f"{result['task']:4d}  {100 * result['test_error']:8.1f} %  {best:14d}  "
        f"{100 * val[best - 1]:7.1f} %  {100 * val[-1]:6.1f} %  {train_last}"
    )
    if best <= 100 and val[-1] < val[best - 1]:
        overfit.append(result["task"])
print(
    "best validation epoch within the first 100 and lower validation accuracy at the end "
    "(overfitting): " + (", ".join(f"task {t}" for t in overfit) if overfit else "none")
)

# %% [markdown]
# ### A reset gate per direction, and the paper's protocol
#
# The paper's Eq. 4 shares only the update gate and the candidate between the directions,
# and its code gives each direction a reset gate of its own; `QRN(bidirectional=True)` now
# does too. With it, the paper's protocol as its text states it (Adagrad lr 0.1, L2 0.0005,
# input and output weights N(0, 1/√d), Glorot in the QRN) with the rule of the code its 1k
# figures came from (150 epochs, final weights, the run of lowest validation loss), one run
# (seed 0) per task. Beside it, the 0.1 column above (shared reset gate, HEAD's protocol, up
# to 10 runs); `examples/babi/README.md` compares the two on validation (HEAD's protocol
# stays the default). The last column is the per-direction gate under HEAD's protocol with
# its restarts (up to 10 runs), the 0.1 column's protocol, over the 20 tasks: the library's
# default and the first column of the README's table.
#
# ```
# python examples/babi/train.py --data ../shared/data/babi --set 1k --protocol paper --restarts 1 \
#     --task 7 13 8 3 17 18 2 14 16 19 5 6 9 10 11 12 15 20 1 4 --json babi_1k_v2.json --tag _paper
# python examples/babi/train.py --data ../shared/data/babi --set 1k --protocol head \
#     --task 13 7 8 18 1 4 5 6 9 10 11 12 15 20 2 14 3 16 17 19 --json babi_1k_v2.json --tag _head
# python examples/babi/train.py --report babi_1k_v2.json babi_1k.json --set 1k
# ```
#
# `data/qrn_babi_1k_v2.json` is its slimmed copy; each row holds `rerun`, the command that
# trains that row's run again.

# %%
saved_v2 = json.loads(pathlib.Path("data/qrn_babi_1k_v2.json").read_text())
display(Markdown(train.report({**saved, **saved_v2}, "1k", models=train.COLUMNS_1K)))

# %% [markdown]
# ## The real bAbI, 10k
#
# The 10k set (10,000 training questions per task) with the reference code's 10k settings
# (the command of its README: d = 200, batch 128, Adagrad lr 0.1, weight decay 0.0005) on
# our "2r" model. What two CPU cores allow: 100 epochs per run (the reference: up to 500)
# with the rate halved every 20 (five halvings over the run, as 500 / 100), and a further
# restart (at most 3 runs, 10 on 1k) while the best validation accuracy is below 98 %; task
# 2, the slowest, ran once. The same story-wise validation split; the test set gives only the
# reported number. The paper reports on 10k only an average over all 20 tasks: 0.3 % for
# QRN 6r200 (six layers, d = 200).
#
# ```
# python examples/babi/train.py --data ../shared/data/babi --set 10k --task 1 4 5 11 12 13 14 15 20 \
#     --epochs 100 --lr-anneal-period 20 --restarts 3 --json babi_10k.json
# python examples/babi/train.py --data ../shared/data/babi --set 10k --task 2 \
#     --epochs 100 --lr-anneal-period 20 --restarts 1 --json babi_10k.json
# python examples/babi/train.py --report babi_10k.json --set 10k
# ```
#
# `data/qrn_babi_10k.json` is the slimmed copy of that file, as for 1k.

# %%
saved_10k = json.loads(pathlib.Path("data/qrn_babi_10k.json").read_text())
display(Markdown(train.report(saved_10k, "10k", models=train.COLUMNS_10K)))
plot_curves(qrn_results(saved_10k, "10k"), halving_every=20)

# %% [markdown]
# Task 2 again with the per-direction reset gate (the library's default now), the same
# settings and one run (`--tag _head` in the results file):
#
# ```
# python examples/babi/train.py --data ../shared/data/babi --set 10k --task 2 \
#     --epochs 100 --lr-anneal-period 20 --restarts 1 --json babi_10k.json --tag _head
# ```

# %%
plot_curves(qrn_results(saved_10k, "10k", "_head"), halving_every=20)
