"""One worker of a TensorFlow multi-worker training run (tests/integration/test_tf_multiworker.py).

    python tests/integration/tf_multiworker_worker.py OUT_DIR --index 0 --ports P0 P1

With no `--ports` it is the one-process run the workers are compared with (TensorFlow's
default strategy, the same global batches). With `--ports P0 ... Pn-1` it is worker
`--index` of a `tf.distribute.MultiWorkerMirroredStrategy` run over `localhost:P0 ...`
(`TF_CONFIG`), and the dataset of global batches is split between the workers by
`experimental_distribute_dataset` (each takes its share of every global batch). keras_normkit
must be importable (the test passes the repository root in `PYTHONPATH`).

Keras 3's `model.fit` does not run under `MultiWorkerMirroredStrategy`
(keras-team/keras#20585), so this is a custom training loop: the loss of each replica is
averaged over the *global* batch (`tf.nn.compute_average_loss`), the replica function applies
the gradients (the strategy sums them over the workers), and the epoch loss is the sum over
replicas (`strategy.reduce`). The model chains FastWeightsRNN, QRN and LayerNormLSTM into a
Dense layer with a `ParsevalConstraint` kernel, trained by SGD with momentum and a
`CyclicalLearningRate`. The result (epoch losses, initial and final weights, the optimizer's
step count) goes to OUT_DIR/result_INDEX.json.
"""

import argparse
import json
import os

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_normkit.constraints import ParsevalConstraint  # noqa: E402
from keras_normkit.layers import QRN, FastWeightsRNN, LayerNormLSTM  # noqa: E402
from keras_normkit.schedules import CyclicalLearningRate  # noqa: E402

T, D, K, N, GLOBAL_BATCH, EPOCHS = 5, 8, 3, 64, 16, 3


def data():
    """The global training set: stories, questions and labels that depend on both."""
    rng = np.random.default_rng(0)
    story = rng.normal(size=(N, T, D)).astype("float32")
    question = rng.normal(size=(N, D)).astype("float32")
    labels = np.argmax(story.sum(1)[:, :K] + question[:, :K], -1).astype("int32")
    return story, question, labels


def build():
    keras.utils.set_random_seed(1)
    xs = keras.Input((T, D), name="story")
    qs = keras.Input((D,), name="question")
    h = FastWeightsRNN(D, return_sequences=True, name="fast_weights")(xs)
    h = QRN(D, return_sequences=True, name="qrn")([h, qs])
    h = LayerNormLSTM(D, name="ln_lstm")(h)
    h = keras.layers.Dense(
        D,
        activation="tanh",
        kernel_initializer="orthogonal",
        kernel_constraint=ParsevalConstraint(beta=0.05),
        name="parseval",
    )(h)
    probs = keras.layers.Dense(K, activation="softmax", name="probs")(h)
    return keras.Model([xs, qs], probs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--ports", type=int, nargs="+", default=[])
    args = parser.parse_args()
    workers = max(len(args.ports), 1)
    if workers > 1:  # read when MultiWorkerMirroredStrategy is created
        os.environ["TF_CONFIG"] = json.dumps(
            {
                "cluster": {"worker": [f"localhost:{port}" for port in args.ports]},
                "task": {"type": "worker", "index": args.index},
            }
        )
    if workers > 1:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        strategy = tf.distribute.get_strategy()  # the default strategy: one replica
    with strategy.scope():
        model = build()
        optimizer = keras.optimizers.SGD(
            CyclicalLearningRate(0.005, 0.05, step_size=4), momentum=0.5
        )
        optimizer.build(model.trainable_variables)
    initial = [np.asarray(w).tolist() for w in model.get_weights()]

    story, question, labels = data()
    dataset = tf.data.Dataset.from_tensor_slices(((story, question), labels))
    dataset = dataset.batch(GLOBAL_BATCH)  # global batches; the strategy splits each one
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    distributed = strategy.experimental_distribute_dataset(dataset.with_options(options))

    @tf.function
    def train_step(batch):
        def replica_step(inputs, y):
            with tf.GradientTape() as tape:
                probs = model(inputs, training=True)
                per_example = keras.losses.sparse_categorical_crossentropy(y, probs)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        per_replica = strategy.run(replica_step, args=batch)
        return strategy.reduce("SUM", per_replica, axis=None)

    losses = []
    for _ in range(EPOCHS):
        total, steps = 0.0, 0
        for batch in distributed:
            total += float(train_step(batch))
            steps += 1
        losses.append(total / steps)

    result = {
        "workers": workers,
        "index": args.index,
        "replicas": int(strategy.num_replicas_in_sync),
        "losses": losses,
        "iterations": int(keras.ops.convert_to_numpy(optimizer.iterations)),
        "initial": initial,
        "weights": [np.asarray(w).tolist() for w in model.get_weights()],
    }
    with open(os.path.join(args.out, f"result_{args.index}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
