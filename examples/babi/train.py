"""Train the QRN ("2rb") and an LSTM baseline on the real bAbI tasks or on generated ones.

Real bAbI (`data.py`; `--data` a folder or tar archive, downloaded if omitted), with one of
two protocols (`--protocol`, README.md "The two protocols"), the validation split being a
seeded random 10 % of the training *stories* in both (the reference draws 10 % of the
questions, `--split questions`, so that questions of one story fall on both sides and the
validation accuracy overrates the model), the same for every restart:

- `head` (default), the reference code's at HEAD: each run trains up to `--epochs` (500)
  epochs with Adagrad (lr 0.5, L2 0.001, uniform init), the learning rate halved every
  `--lr-anneal-period` epochs, keeps the weights of the epoch of best validation accuracy
  (ties: lower validation loss) and stops after `--patience` epochs without improvement (by
  default none: every epoch runs); of the runs, the one of best validation accuracy (ties:
  loss) is selected.
- `paper`, as the paper states it with the rule of the code its 1k figures came from: 150
  epochs, Adagrad lr 0.1, L2 0.0005, input/output weights N(0, 1/sqrt(d)), Glorot in the
  QRN, the final weights of each run, the run of lowest final validation loss.

Both: up to `--restarts` runs (10, the reference's number of trials, seeds `seed, seed + 1,
...`), a further one only while the selected run's validation accuracy is below
`--restart-below` (0.98; the reference instead stops once a *test* accuracy is 100 %); the
selected run's test error is reported, and the results JSON records per task the command
that trains that one run again (`rerun`):

    python examples/babi/train.py --data ../shared/data/babi --set 1k --task 1 4 --json out.json
    python examples/babi/train.py --data ../shared/data/babi --task 7 --protocol paper
    python examples/babi/train.py --report out.json --set 1k     # the table, beside the paper

Generated bAbI-style tasks 1 and 2 (`generate.py`, no download, the example's first protocol):

Protocol (the test set is never used for any choice): the last 10 % of the 1,000 training
questions are a validation split; each model trains on the other 90 % for `--epochs`
epochs, keeping the weights of the epoch with the lowest validation loss, and `--restarts`
runs (seeds `seed, seed + 1, ...`) are trained, the one with the lowest validation loss
being selected. The reported accuracy is that selected model's test accuracy. Test accuracy
per epoch is also recorded, only to draw learning curves. Both models get the same input
module (with Keras's default initialization for the LSTM), hidden size, batch size, epochs,
validation split and restarts; the QRN uses the paper's Adagrad (lr 0.5), the LSTM Adam
(lr 0.003), better for it than Adagrad 0.5 (`--lstm-optimizer`, see README.md).

    python examples/babi/train.py --task 1 2 --save notebooks/data/qrn_babi_curves.json
"""

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(1, str(pathlib.Path(__file__).resolve().parents[1]))  # markdown_blocks

import data as babi_data  # noqa: E402
import generate  # noqa: E402
import model as babi_model  # noqa: E402
from markdown_blocks import write_block  # noqa: E402
from result_commands import environment_prefix  # noqa: E402


class Curves(keras.callbacks.Callback):
    """Per epoch: training, validation and test accuracy, validation loss; keeps the weights
    of the epoch with the lowest validation loss (restored at the end of training)."""

    def __init__(self, validation, test):
        super().__init__()
        self.validation, self.test = validation, test
        self.curves = {"train": [], "val": [], "test": [], "val_loss": []}
        self.best_loss, self.best_epoch, self.best_weights = float("inf"), None, None

    def _evaluate(self, data):
        inputs, answers = data
        return self.model.evaluate(inputs, answers, batch_size=256, verbose=0)[:2]

    def on_epoch_end(self, epoch, logs=None):
        val_loss, val_accuracy = self._evaluate(self.validation)
        self.curves["train"].append(float(logs["accuracy"]))
        self.curves["val"].append(float(val_accuracy))
        self.curves["val_loss"].append(float(val_loss))
        self.curves["test"].append(float(self._evaluate(self.test)[1]))  # curve only
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = val_loss, epoch
            self.best_weights = self.model.get_weights()

    def on_train_end(self, logs=None):
        self.model.set_weights(self.best_weights)


def split(data, val_fraction):
    """`(train, validation)`: the last `val_fraction` of the examples are the validation."""
    (stories, questions), answers = data
    k = len(answers) - max(1, round(val_fraction * len(answers)))
    return ((stories[:k], questions[:k]), answers[:k]), ((stories[k:], questions[k:]), answers[k:])


def train_once(
    kind,
    task,
    epochs=60,
    dim=50,
    n_train=1000,
    n_test=1000,
    seed=0,
    data_seed=0,
    val_fraction=0.1,
    optimizer=None,
    verbose=0,
    **model_kwargs,
):
    """One run; returns `(test_accuracy, info, model, data)` with the weights of the epoch of
    lowest validation loss; `info` holds the curves, best epoch and validation loss."""
    keras.utils.set_random_seed(seed)
    train_data, test_data, vocab = generate.load(task, n_train, n_test, seed=data_seed)
    fit_data, val_data = split(train_data, val_fraction)
    (stories, questions), answers = fit_data
    shape = stories.shape[1:] + (len(vocab),)
    if kind == "qrn":
        net = babi_model.build_qrn(*shape, dim=dim, **model_kwargs)
    else:
        net = babi_model.build_lstm(*shape, dim=dim, **model_kwargs)
    optimizer = optimizer or ("adagrad" if kind == "qrn" else "adam")
    babi_model.compile_model(net, optimizer)
    curves = Curves(val_data, test_data)
    net.fit(
        [stories, questions],
        answers,
        batch_size=32,
        epochs=epochs,
        callbacks=[curves],
        verbose=verbose,
    )
    (test_inputs, test_answers) = test_data
    accuracy = net.evaluate(test_inputs, test_answers, batch_size=256, verbose=0)[1]
    info = dict(
        curves.curves,
        seed=seed,
        best_epoch=curves.best_epoch + 1,
        val_loss=curves.best_loss,
        val_accuracy=curves.curves["val"][curves.best_epoch],
        optimizer=optimizer,
    )
    return float(accuracy), info, net, (train_data, test_data, vocab)


def run(kind, task, epochs=60, restarts=1, seed=0, verbose=0, **kwargs):
    """`restarts` runs with seeds `seed, seed + 1, ...`; the one with the lowest validation
    loss is selected. Returns `(test_accuracy, info, model, data)` of that run, `info["runs"]`
    summarizing every run."""
    best, runs = None, []
    for k in range(restarts):
        result = train_once(kind, task, epochs=epochs, seed=seed + k, **kwargs)
        info = result[1]
        runs.append(
            {key: info[key] for key in ("seed", "best_epoch", "val_loss", "val_accuracy")}
            | {"test_accuracy": result[0]}
        )
        if verbose:
            print(f"  run {k}: {runs[-1]}", flush=True)
        if best is None or info["val_loss"] < best[1]["val_loss"]:
            best = result
    best[1]["runs"] = runs
    return best


def train(kind, task, epochs=60, restarts=1, seed=0, verbose=0, **kwargs):
    """As `run`, but returns `(test_accuracy, test_curve, model, data)`, the test curve being
    the selected run's test accuracy per epoch."""
    accuracy, info, net, data = run(kind, task, epochs, restarts, seed, verbose, **kwargs)
    return accuracy, info["test"], net, data


class Selection(keras.callbacks.Callback):
    """The reference code's model selection within a run: validation after every epoch; the
    weights of the epoch of best validation accuracy (ties: lower validation loss) are kept
    and restored at the end; training stops after `patience` epochs in which neither the
    accuracy improved nor the loss fell below that of the best epoch. `test` (optional) is
    only evaluated to record a learning curve. `log(epoch, logs, self)` prints progress."""

    def __init__(self, validation, test=None, patience=50, log=None, keep_best=True):
        super().__init__()
        self.validation, self.test, self.patience, self.log = validation, test, patience, log
        self.keep_best = keep_best
        self.curves = {"train": [], "val": [], "val_loss": [], "loss": []}
        if test is not None:
            self.curves["test"] = []
        self.best = (-1.0, float("inf"))  # (validation accuracy, validation loss)
        self.best_epoch, self.best_weights, self.waited = None, None, 0

    def _evaluate(self, data):
        inputs, answers = data
        return self.model.evaluate(inputs, answers, batch_size=256, verbose=0)[:2]

    def on_epoch_end(self, epoch, logs=None):
        val_loss, val_accuracy = self._evaluate(self.validation)
        self.curves["train"].append(float(logs["accuracy"]))
        self.curves["loss"].append(float(logs["loss"]))
        self.curves["val"].append(float(val_accuracy))
        self.curves["val_loss"].append(float(val_loss))
        if self.test is not None:
            self.curves["test"].append(float(self._evaluate(self.test)[1]))  # curve only
        best_accuracy, best_loss = self.best
        if not self.keep_best:  # the final weights are kept: the last epoch is "the best"
            self.best, self.best_epoch = (val_accuracy, val_loss), epoch
        elif val_accuracy > best_accuracy or (
            val_accuracy == best_accuracy and val_loss < best_loss
        ):
            self.best, self.best_epoch, self.waited = (val_accuracy, val_loss), epoch, 0
            self.best_weights = self.model.get_weights()
        elif val_loss < best_loss:
            self.waited = 0
        else:
            self.waited += 1
            if self.waited >= self.patience:
                self.model.stop_training = True
        if self.log:
            self.log(epoch, logs, self)

    def on_train_end(self, logs=None):
        if self.keep_best:
            self.model.set_weights(self.best_weights)


def random_split(data, val_fraction=0.1, seed=0, groups=None):
    """`(train, validation)`: a seeded random `val_fraction` of the examples is the validation
    (the reference code draws it once, at preprocessing, for every trial).

    With `groups` (one id per example, e.g. its story) whole groups are held out, a random
    `val_fraction` of them: the questions of a story then never straddle the split.
    """
    (stories, questions), answers = data
    n = len(answers)
    rng = np.random.default_rng(seed)
    if groups is None:
        held_out = np.zeros(n, bool)
        held_out[rng.choice(n, max(1, round(val_fraction * n)), False)] = True
    else:
        names = np.unique(groups)
        chosen = rng.choice(names, max(1, round(val_fraction * len(names))), False)
        held_out = np.isin(groups, chosen)

    def take(rows):
        return (stories[rows], questions[rows]), answers[rows]

    return take(~held_out), take(held_out)


#: The reference code's defaults (1k: `babi/main.py` flags; 10k: its README's command).
PROTOCOL = {
    "1k": dict(dim=50, batch_size=32, learning_rate=0.5, weight_decay=0.001),
    "10k": dict(dim=200, batch_size=128, learning_rate=0.1, weight_decay=0.0005),
}
#: `protocol="head"`: the reference code at HEAD (seominjoon/qrn, since 81cd745, 2016-11):
#: up to 500 epochs, the checkpoint of best validation accuracy, the run of best validation
#: accuracy. `protocol="paper"`: as the ICLR paper states it (Adagrad lr 0.1, L2 0.0005,
#: input and output weights N(0, 1/sqrt(d)), Glorot in the QRN unit, the trial of lowest dev
#: loss) with the rule of the code its bAbI 1k figures came from (b8bc87f, 2016-06-15): 150
#: epochs, no early stopping, the final weights, the run of lowest final validation loss.
PROTOCOLS = {
    "head": dict(epochs=500, init="reference", keep_best=True),
    "paper": dict(epochs=150, init="paper", keep_best=False, learning_rate=0.1, weight_decay=5e-4),
}
#: Our restarts (the README's 1k table): up to `RESTARTS` runs, a further one only while the
#: best validation accuracy so far is below `RESTART_BELOW`.
RESTARTS = 10
RESTART_BELOW = 0.98


def train_real(
    task,
    set="1k",
    data=None,
    kind="qrn",
    epochs=None,
    restarts=RESTARTS,
    seed=0,
    patience=None,
    restart_below=RESTART_BELOW,
    lr_anneal_period=100,
    val_fraction=0.1,
    split_seed=0,
    split="stories",
    memory_size=babi_data.MEMORY_SIZE,
    dim=None,
    batch_size=None,
    learning_rate=None,
    weight_decay=None,
    layers=2,
    tie_layers=False,
    optimizer=None,
    test_curve=False,
    verbose=1,
    protocol="head",
    share_reset_gate=False,
):
    """The protocol on one real bAbI task; returns a dict (test error of the selected run,
    its seed, best epoch, the validation figures, every run, the wall time).

    `protocol` (`PROTOCOLS`) sets the defaults of `epochs`, `learning_rate`, `weight_decay`,
    the initialization and which weights a run keeps. `"head"`: each run keeps the weights
    of its epoch of best validation accuracy, and of up to `restarts` runs (seeds
    `seed, seed + 1, ...`) the one of best validation accuracy (ties: lower loss) is
    selected. `"paper"`: each run keeps its final weights (no early stopping) and the run of
    lowest final validation loss is selected. With `restart_below` (a fraction; None: every
    restart runs), run `k > 0` starts only if the validation accuracy of the selected run so
    far is below that. `share_reset_gate`: one reset gate for both directions (0.1's form).
    """
    start = time.time()
    if protocol not in PROTOCOLS:
        raise ValueError(f"`protocol` must be one of {sorted(PROTOCOLS)}. Received: {protocol!r}")
    rules = PROTOCOLS[protocol]
    defaults = PROTOCOL[set]
    epochs = epochs or rules["epochs"]
    patience = patience or epochs
    dim = dim or defaults["dim"]
    batch_size = batch_size or defaults["batch_size"]
    learning_rate = learning_rate or rules.get("learning_rate", defaults["learning_rate"])
    if weight_decay is None:
        weight_decay = rules.get("weight_decay", defaults["weight_decay"])
    optimizer = optimizer or ("adagrad" if kind == "qrn" else "adam")
    train_data, test_data, vocab, story_ids = babi_data.load(
        task, set, data, memory_size, story_ids=True
    )
    groups = story_ids if split == "stories" else None
    fit_data, val_data = random_split(train_data, val_fraction, split_seed, groups)
    (stories, questions), answers = fit_data
    shape = stories.shape[1:] + (len(vocab),)
    runs, best = [], None
    for k in range(restarts):
        if k and restart_below is not None and runs[best]["val_accuracy"] >= restart_below:
            break
        run_start = time.time()
        keras.utils.set_random_seed(seed + k)
        if kind == "qrn":
            net = babi_model.build_qrn(
                *shape,
                dim=dim,
                layers=layers,
                weight_decay=weight_decay,
                tie_layers=tie_layers,
                share_reset_gate=share_reset_gate,
                init=rules["init"],
            )
        else:
            net = babi_model.build_lstm(*shape, dim=dim)
        babi_model.compile_model(net, optimizer, learning_rate if kind == "qrn" else None)
        initial_lr = float(keras.ops.convert_to_numpy(net.optimizer.learning_rate))

        def log(epoch, logs, sel, k=k, run_start=run_start):
            if verbose:
                print(
                    f"task {task} {kind} run {k} epoch {epoch + 1}/{epochs}: loss "
                    f"{logs['loss']:.3f}, train {100 * logs['accuracy']:.1f} %, val "
                    f"{100 * sel.curves['val'][-1]:.1f} % (best {100 * sel.best[0]:.1f} % at "
                    f"epoch {sel.best_epoch + 1}), {time.time() - run_start:.0f} s",
                    flush=True,
                )

        selection = Selection(
            val_data, test_data if test_curve else None, patience, log, rules["keep_best"]
        )
        schedule = keras.callbacks.LearningRateScheduler(
            lambda epoch, lr, initial_lr=initial_lr: initial_lr * 0.5 ** (epoch // lr_anneal_period)
        )
        net.fit(
            [stories, questions],
            answers,
            batch_size=batch_size,
            epochs=epochs,
            callbacks=[schedule, selection],
            verbose=0,
        )
        test_inputs, test_answers = test_data
        test_accuracy = float(net.evaluate(test_inputs, test_answers, batch_size=256, verbose=0)[1])
        val_accuracy, val_loss = selection.best
        runs.append(
            {
                "seed": seed + k,
                "best_epoch": selection.best_epoch + 1,
                "epochs_run": len(selection.curves["val"]),
                "val_accuracy": float(val_accuracy),
                "val_loss": float(val_loss),
                "test_error": 1.0 - test_accuracy,
                "seconds": time.time() - run_start,
                "curves": selection.curves,
            }
        )
        if verbose:
            r = runs[-1]
            print(
                f"task {task} {kind} run {k}: val {100 * val_accuracy:.1f} % (loss "
                f"{val_loss:.3f}) at epoch {r['best_epoch']}, test error "
                f"{100 * r['test_error']:.1f} %, {r['seconds']:.0f} s",
                flush=True,
            )
        if best is None or better(runs[k], runs[best], protocol):
            best = k
    selected = runs[best]
    return {
        "task": task,
        "set": set,
        "model": kind,
        "test_error": selected["test_error"],
        "selected_run": best,
        "seed": selected["seed"],
        "best_epoch": selected["best_epoch"],
        "val_accuracy": selected["val_accuracy"],
        "val_loss": selected["val_loss"],
        "seconds": time.time() - start,
        "runs": runs,
        "config": dict(
            epochs=epochs,
            restarts=restarts,
            restart_below=restart_below,
            patience=patience,
            lr_anneal_period=lr_anneal_period,
            val_fraction=val_fraction,
            split_seed=split_seed,
            split=split,
            memory=int(stories.shape[1]),
            sentence_length=int(stories.shape[2]),
            vocab_size=len(vocab),
            dim=dim,
            batch_size=batch_size,
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            layers=layers,
            tie_layers=tie_layers,
            optimizer=optimizer,
            protocol=protocol,
            share_reset_gate=share_reset_gate,
            init=rules["init"],
            keep_best=rules["keep_best"],
        ),
    }


def saved_row(result):
    """`result` as a results file keeps it: the per-epoch curves of the selected run only
    (the other runs keep their figures; their curves, one list per epoch and measure, made
    the 1k file of 20 tasks with up to 10 runs each several MB)."""
    runs = [
        run if k == result["selected_run"] else {n: v for n, v in run.items() if n != "curves"}
        for k, run in enumerate(result["runs"])
    ]
    return {**result, "runs": runs}


def better(run, other, protocol="head"):
    """Whether `run` is selected over `other`: higher validation accuracy (ties: lower loss)
    under `"head"`, lower validation loss under `"paper"`."""
    if protocol == "paper":
        return run["val_loss"] < other["val_loss"]
    return (run["val_accuracy"], -run["val_loss"]) > (other["val_accuracy"], -other["val_loss"])


#: Options of a command line that name the tasks, runs or output, not how a run trains.
_RUN_OPTIONS = ("--task", "--model", "--seed", "--restarts", "--json", "--tag")


def rerun_command(argv, task, kind, seed):
    """The command that trains again the one run `seed` of `task` that `argv` selected: the
    same training options, `--restarts 1`, without `--json` (the options naming tasks, seeds,
    runs or output files are replaced)."""
    kept, skipping = [], False
    for token in argv[1:]:
        if token.startswith("--"):
            skipping = token.split("=")[0] in _RUN_OPTIONS
            if skipping:
                continue
        elif skipping:
            continue
        kept.append(token)
    extra = ["--task", str(task), "--model", kind, "--seed", str(seed), "--restarts", "1"]
    return " ".join(["python", "examples/babi/train.py", *kept, *extra])


#: Seo et al. (ICLR 2017), QRN 2r on bAbI 1k: the per-task test errors (%) the paper gives,
#: its average and failed tasks (error > 5 %); on 10k, 6r200's average.
PAPER = {
    "1k": {
        "model": "QRN 2r",
        "tasks": {2: 0.7, 3: 5.7, 4: 0.0, 5: 1.1},
        "average": 9.9,
        "failed": 7,
        "lstm": {"average": 51.3, "failed": 20},
    },
    "10k": {"model": "QRN 6r200", "tasks": {}, "average": 0.3, "failed": 1},
}

#: The column names of `report` and `summary` for the tags our results are saved with (any
#: other tag `qrn_x` reads "QRN X").
LABELS = {
    "qrn_head": "QRN 2r",
    "qrn_paper": "QRN 2r, paper's protocol",
    "qrn": "QRN 2r, shared reset gate (0.1)",
    "lstm": "LSTM",
}
#: The columns of the 1k table in the README, the QRN guide and the example's README: the
#: per-direction reset gate under HEAD's protocol (`--tag _head`, the defaults), under the
#: paper's (`--protocol paper --tag _paper`), 0.1's shared gate, the LSTM.
COLUMNS_1K = ("qrn_head", "qrn_paper", "qrn", "lstm")
#: The 10k table's: 0.1's shared gate (most tasks), then the per-direction gate.
COLUMNS_10K = ("qrn", "qrn_head")


def label(kind):
    """The column name of the results saved as `kind` (a model and its `--tag`)."""
    return LABELS.get(kind, kind.replace("_", " ", 1).upper())


def merge_results(paths):
    """The results JSONs at `paths` as one dict; a name saved differently in two raises."""
    saved = {}
    for path in paths:
        for key, result in json.loads(pathlib.Path(path).read_text()).items():
            if key in saved and saved[key] != result:
                raise ValueError(f"{key!r} differs between the results files {paths}.")
            saved[key] = result
    return saved


def column_results(saved, set_name, kind):
    """`{task: result}` of the results saved as `kind` (a model and its tag) on `set_name`."""
    return {
        result["task"]: result
        for key, result in saved.items()
        if key == f"{set_name}_task{result.get('task')}_{kind}"
    }


def totals(found):
    """`(average test error %, failed tasks)` of a column `{task: result}` (failed: > 5 %)."""
    errors = [100 * r["test_error"] for r in found.values()]
    return float(np.mean(errors)), sum(e > 5 for e in errors)


def report(saved, set_name, models=("qrn", "lstm")):
    """The table of a results JSON as Markdown: per task, ours beside the paper's numbers.

    `models`: one column each, a model and the `--tag` its results were saved with
    (`"qrn"`, `"lstm"`, `"qrn_paper"` for `--model qrn --tag _paper`). Returns the Markdown;
    the last rows give the average, the failed tasks (> 5 %) and the wall time over the
    tasks that were run, and name the tasks not run yet.
    """
    paper = PAPER[set_name]
    found = {kind: column_results(saved, set_name, kind) for kind in models}
    models = [kind for kind in models if found[kind]]
    header = f"| task | paper ({paper['model']}) | " + " | ".join(
        f"ours, {label(kind)} (best epoch)" for kind in models
    )
    lines = [header + " |", "|---" * (2 + len(models)) + "|"]
    for task in babi_data.TASKS:
        cells = [f"{paper['tasks'][task]:.1f}" if task in paper["tasks"] else "—"]
        for kind in models:
            result = found[kind].get(task)
            cells.append(
                "not run"
                if result is None
                else f"{100 * result['test_error']:.1f} ({result['best_epoch']})"
            )
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    summary = {"average": [f"**{paper['average']:.1f}**"], "failed": [str(paper["failed"])]}
    summary["wall time"] = ["—"]
    for kind in models:
        average, failed = totals(found[kind])
        n = len(found[kind])
        suffix = "" if n == len(babi_data.TASKS) else f" ({n} tasks)"
        summary["average"].append(f"**{average:.1f}**{suffix}")
        summary["failed"].append(f"{failed}{suffix}")
        hours = sum(r["seconds"] for r in found[kind].values()) / 3600
        summary["wall time"].append(f"{hours:.1f} h{suffix}")
    for name, cells in summary.items():
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(saved, set_name, models=("qrn", "lstm")):
    """The README's block: per column of `report` (a model and its tag) the average test
    error and the failed tasks, beside the paper's, as a Markdown table (the paper's LSTM
    after ours when `"lstm"` is a column), then a sentence: the first column against the
    paper's per-task numbers and its average. A column with fewer than the 20 tasks says
    how many it has."""
    paper = PAPER[set_name]
    lines = [
        "| | average test error | failed tasks (> 5 %) |",
        "|---|---|---|",
        f"| paper, {paper['model']} | {paper['average']:.1f} % | {paper['failed']} |",
    ]
    columns = [(kind, column_results(saved, set_name, kind)) for kind in models]
    columns = [(kind, found) for kind, found in columns if found]
    for kind, found in columns:
        average, failed = totals(found)
        n = len(found)
        tasks = "" if n == len(babi_data.TASKS) else f" ({n} of {len(babi_data.TASKS)} tasks)"
        if kind == "lstm" and "lstm" in paper:
            lstm = paper["lstm"]
            lines.append(f"| paper, LSTM | {lstm['average']:.1f} % | {lstm['failed']} |")
        lines.append(f"| ours, {label(kind)}{tasks} | **{average:.1f} %** | **{failed}** |")
    if columns:
        lines += ["", verdict(columns[0][1], paper)]
    return "\n".join(lines)


def verdict(found, paper):
    """One sentence on a column (`{task: result}`) against the paper: the tasks the paper
    gives numbers for, met (ours at most 1 point above the paper's) or not, and whether its
    average and failed count are reached."""
    met, missed = [], []
    for task, theirs in sorted(paper["tasks"].items()):
        if task not in found:
            continue
        ours = 100 * found[task]["test_error"]
        fine = round(ours, 1) <= round(theirs + 1.0, 1)  # as printed
        (met if fine else missed).append((task, ours, theirs))

    def listed(rows, verb):
        tasks = ", ".join(str(t) for t, _, _ in rows)
        ours = ", ".join(f"{o:.1f}" for _, o, _ in rows)
        theirs = ", ".join(f"{p:.1f}" for _, _, p in rows)
        many = "s" if len(rows) > 1 else ""
        return f"task{many} {tasks} {verb} (ours {ours} % against {theirs} %)"

    parts = [listed(rows, verb) for rows, verb in ((met, "met"), (missed, "not met")) if rows]
    average, failed = totals(found)
    average = round(average, 1)
    mean = f"average ({average:.1f} against {paper['average']:.1f} %)"
    count = f"failed count ({failed} against {paper['failed']})"
    if len(found) < len(babi_data.TASKS):
        end = f"the average is over {len(found)} of {len(babi_data.TASKS)} tasks so far"
    elif average <= paper["average"] and failed <= paper["failed"]:
        end = f"**the paper's {mean} and {count} are reached**"
    elif failed <= paper["failed"]:
        end = f"**the paper's {count} is reached, its {mean} is not**"
    elif average <= paper["average"]:
        end = f"**the paper's {mean} is reached, its {count} is not**"
    else:
        end = f"**neither the paper's {mean} nor its {count} is reached**"
    given = "Where the paper gives per-task numbers, " + "; ".join(parts) if parts else ""
    text = (given + "; " if given else "") + end + "."
    return text[0].upper() + text[1:]


def main_real(args):
    """`--data`/`--set`: the protocol on real bAbI tasks, results merged into `--json`."""
    try:
        release = babi_data.Release(args.data)
    except ConnectionError as error:
        sys.exit(str(error))
    path = pathlib.Path(args.json) if args.json else None
    saved = json.loads(path.read_text()) if path and path.exists() else {}
    results = {}
    for task in args.task or list(babi_data.TASKS):
        for kind in args.model or ["qrn"]:
            result = train_real(
                task,
                args.set,
                release,
                kind=kind,
                epochs=args.epochs,
                restarts=args.restarts or RESTARTS,
                restart_below=args.restart_below,
                seed=args.seed,
                patience=args.patience,
                lr_anneal_period=args.lr_anneal_period,
                split_seed=args.split_seed,
                split=args.split,
                memory_size=args.memory_size,
                dim=args.dim,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                weight_decay=args.weight_decay,
                layers=args.layers,
                tie_layers=args.tie_layers,
                optimizer=args.qrn_optimizer if kind == "qrn" else args.lstm_optimizer,
                test_curve=args.test_curve,
                protocol=args.protocol,
                share_reset_gate=args.share_reset_gate,
            )
            # Each with the environment it ran in (the backend, and the variables that change
            # results when set: examples/result_commands.py).
            environment = environment_prefix()
            result["command"] = " ".join([environment, "python", *sys.argv])
            rerun = rerun_command(sys.argv, task, kind, result["seed"])
            result["rerun"] = f"{environment} {rerun}"
            key = f"{args.set}_task{task}_{kind}{args.tag}"
            results[key] = result
            print(
                f"task {task} {kind}: test error {100 * result['test_error']:.1f} % (run "
                f"{result['selected_run']}, seed {result['seed']}, epoch "
                f"{result['best_epoch']}, selected on validation; {result['seconds']:.0f} s)",
                flush=True,
            )
            if path:  # after every task, merged, so tasks can be trained separately
                saved[key] = saved_row(result)
                path.write_text(json.dumps(saved, indent=1))
    errors = [r["test_error"] for r in results.values()]
    if len(errors) > 1:
        print(
            f"average test error {100 * np.mean(errors):.1f} % over {len(errors)}, "
            f"{sum(e > 0.05 for e in errors)} failed (> 5 %)"
        )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    real = parser.add_argument_group("real bAbI (given --data or --set)")
    real.add_argument(
        "--data",
        default=None,
        help="folder or tar archive of the bAbI v1.2 release (downloaded if omitted)",
    )
    real.add_argument("--set", default=None, choices=sorted(babi_data.SETS))
    real.add_argument("--json", default=None, help="JSON file of the results (merged)")
    real.add_argument(
        "--protocol",
        default="head",
        choices=sorted(PROTOCOLS),
        help="head: the reference code's (500 epochs, best-accuracy checkpoint, run of best "
        "validation accuracy, lr 0.5, L2 0.001, uniform init); paper: the paper's (150 "
        "epochs, final weights, run of lowest validation loss, lr 0.1, L2 0.0005, "
        "N(0, 1/sqrt(d)) input/output weights) [head]",
    )
    real.add_argument(
        "--share-reset-gate",
        action="store_true",
        help="one reset gate for both directions (keras_normkit 0.1's QRN) instead of one each",
    )
    real.add_argument(
        "--patience",
        type=int,
        default=None,
        help="epochs without improvement before stopping [the epochs: every epoch runs]",
    )
    real.add_argument("--lr-anneal-period", type=int, default=100)
    real.add_argument(
        "--restart-below",
        type=float,
        default=RESTART_BELOW,
        help="run a further restart only while the best validation accuracy is below this "
        f"[{RESTART_BELOW}]",
    )
    real.add_argument("--split-seed", type=int, default=0)
    real.add_argument(
        "--split",
        default="stories",
        choices=["stories", "questions"],
        help="hold out whole stories [stories] or questions, as the reference code does",
    )
    real.add_argument("--memory-size", type=int, default=babi_data.MEMORY_SIZE)
    real.add_argument("--layers", type=int, default=2)
    real.add_argument(
        "--tie-layers",
        action="store_true",
        help="every QRN layer uses the first layer's weights, as the reference code does",
    )
    real.add_argument("--batch-size", type=int, default=None)
    real.add_argument("--learning-rate", type=float, default=None)
    real.add_argument("--test-curve", action="store_true", help="record test accuracy per epoch")
    parser.add_argument("--task", type=int, nargs="+", default=None, help="[all 20; 1 2]")
    parser.add_argument(
        "--model",
        nargs="+",
        default=None,
        help="[qrn; qrn lstm]; with --report, the columns: a model and its --tag (qrn_paper) "
        f"[1k: {' '.join(COLUMNS_1K)}; 10k: {' '.join(COLUMNS_10K)}]",
    )
    parser.add_argument("--epochs", type=int, default=None, help="[500 (paper: 150); 60]")
    parser.add_argument("--restarts", type=int, default=None, help=f"[{RESTARTS}; 3]")
    parser.add_argument("--dim", type=int, default=None, help="[50 (200 on 10k); 50]")
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--qrn-optimizer", default="adagrad", choices=["adagrad", "adam"])
    parser.add_argument("--lstm-optimizer", default="adam", choices=["adagrad", "adam"])
    parser.add_argument("--update-gate-bias", type=float, default=-2.5)
    parser.add_argument(
        "--weight-decay", type=float, default=None, help="[0.001 (0.0005 on 10k); 0.001]"
    )
    parser.add_argument("--last-bidirectional", action="store_true")
    parser.add_argument(
        "--keras-init",
        action="store_true",
        help="Keras's default initialization instead of the reference's",
    )
    parser.add_argument("--save", default=None, help="JSON file for the learning curves")
    parser.add_argument("--tag", default="", help="suffix of the result names in --save")
    parser.add_argument(
        "--report",
        nargs="+",
        default=None,
        metavar="JSON",
        help="print the table of one or more results JSONs (merged)",
    )
    parser.add_argument(
        "--write-block",
        nargs=2,
        default=None,
        metavar=("FILE", "MARKER"),
        help="with --report: write the averages between <!-- MARKER --> markers in FILE",
    )
    parser.add_argument(
        "--write-report",
        nargs=2,
        default=None,
        metavar=("FILE", "MARKER"),
        help="with --report: write the per-task table between <!-- MARKER --> markers in FILE",
    )
    args = parser.parse_args()
    if args.report:
        saved = merge_results(args.report)
        models = args.model or (COLUMNS_10K if args.set == "10k" else COLUMNS_1K)
        if args.write_block:  # FILE MARKER: the summary, between the markers of FILE
            path, marker = args.write_block
            return write_block(path, marker, summary(saved, args.set or "1k", models))
        if args.write_report:  # FILE MARKER: the per-task table
            return write_block(*args.write_report, report(saved, args.set or "1k", models))
        return print(report(saved, args.set or "1k", models))
    if args.data is not None or args.set is not None:
        args.set = args.set or "1k"
        return main_real(args)
    args.task = args.task or [1, 2]
    args.model = args.model or ["qrn", "lstm"]
    args.epochs = args.epochs or 60
    args.restarts = args.restarts or 3
    args.dim = args.dim or 50
    args.weight_decay = 0.001 if args.weight_decay is None else args.weight_decay
    results = {}
    for task in args.task:
        for kind in args.model:
            start = time.time()
            kwargs = {}
            if kind == "qrn":
                kwargs = {
                    "update_gate_bias": args.update_gate_bias,
                    "weight_decay": args.weight_decay,
                    "last_bidirectional": args.last_bidirectional,
                    "init_scale": None if args.keras_init else babi_model.INIT_SCALE,
                }
            optimizer = args.qrn_optimizer if kind == "qrn" else args.lstm_optimizer
            accuracy, info, _, _ = run(
                kind,
                task,
                args.epochs,
                args.restarts,
                args.seed,
                verbose=1,
                dim=args.dim,
                n_train=args.n_train,
                optimizer=optimizer,
                **kwargs,
            )
            seconds = time.time() - start
            suffix = ("" if args.n_train == 1000 else f"_{args.n_train}") + args.tag
            results[f"task{task}_{kind}{suffix}"] = {
                "test_accuracy": accuracy,
                "curve": info["test"],
                "train_curve": info["train"],
                "val_curve": info["val"],
                "best_epoch": info["best_epoch"],
                "seed": info["seed"],
                "runs": info["runs"],
                "optimizer": optimizer,
                "epochs": args.epochs,
                "restarts": args.restarts,
                "seconds": seconds,
                "n_train": args.n_train,
            }
            print(
                f"task {task} {kind:4s}: test accuracy {100 * accuracy:.1f} % (run of seed "
                f"{info['seed']}, epoch {info['best_epoch']}, selected on validation; "
                f"{args.n_train} training questions, {args.epochs} epochs, {args.restarts} "
                f"restarts, {seconds:.0f} s)",
                flush=True,
            )
    if args.save:  # merged into an existing file, so tasks can be trained separately
        path = pathlib.Path(args.save)
        saved = json.loads(path.read_text()) if path.exists() else {}
        saved.update(results)
        path.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
