"""The text data sets of Guo et al. (2017) Table 1, read as the released files are shipped.

`load(dataset, data)` returns a `Splits` of token lists and integer labels, split into
train / validation / test as the paper did:

* `"20news"`: 20 Newsgroups, "bydate" version (an archive `20news-bydate.tar.xz` or
  `.tar.gz`, or a folder holding `20news-bydate-train/` and `20news-bydate-test/`, each
  `<group>/<id>`, Latin-1 bytes). Text = the `Subject:` line and the body after the
  first blank line (the other header lines, `From:`, `Organization:` ..., name the
  writer, not the topic); a post with no word would be dropped (with the subject line
  none is). The training set is split 80 / 20 into train / validation by a fixed
  permutation (seed 0): 9,051 / 2,263 / 7,532 here, 9,034 / 2,259 / 7,528 in the paper,
  which drops 21 training and 4 test posts by a rule it does not state (dropping the
  posts with an empty body drops 18 and 16: not it either).
* `"reuters"`: Reuters-21578 R8 (`r8-train-all-terms.txt`, `r8-test-all-terms.txt`, one
  document a line, `label<TAB>text`, already lower-cased), 8 classes; the training file
  is split 80 / 20 the same way: 4,388 / 1,097 / 2,189, the paper's sizes.
* `"sst-binary"`, `"sst-fine"`: the Stanford Sentiment Treebank in PTB tree format
  (`trainDevTestTrees_PTB.zip` or a folder with `trees/{train,dev,test}.txt` or the three
  files), the sentence (root) label only: 5 classes (fine-grained, 8,544 / 1,101 / 2,210)
  or, dropping neutral (2) sentences, negative (0, 1) vs positive (3, 4) (binary,
  6,920 / 872 / 1,821). The official train / dev / test files are the paper's splits.

Tokens: lower-cased runs of letters, digits and apostrophes for 20 News (`[a-z0-9']+`);
whitespace-separated for R8 (already tokenized); the tree leaves, lower-cased, for SST.

    python examples/calibration_benchmarks/data.py --data DIR --dataset reuters
"""

import argparse
import collections
import dataclasses
import io
import os
import pathlib
import re
import tarfile
import zipfile

import numpy as np

DATASETS = ("20news", "reuters", "sst-binary", "sst-fine")
#: Environment variables naming each data set's folder (used by run.py and the tests).
ENVIRONMENT = {
    "20news": "NORMKIT_20NEWS_DATA",
    "reuters": "NORMKIT_REUTERS_R8_DATA",
    "sst-binary": "NORMKIT_SST_DATA",
    "sst-fine": "NORMKIT_SST_DATA",
}
#: The paper's (train, validation, test) sizes (Guo et al. 2017, Section 5 and supplement).
PAPER_SPLITS = {
    "20news": (9034, 2259, 7528),
    "reuters": (4388, 1097, 2189),
    "sst-binary": (6920, 872, 1821),
    "sst-fine": (8544, 1101, 2210),
}
VALIDATION_FRACTION = 0.2
SPLIT_SEED = 0
_WORD = re.compile(r"[a-z0-9']+")


@dataclasses.dataclass
class Splits:
    """Token lists and integer labels of the three splits, and the class names."""

    train: tuple
    validation: tuple
    test: tuple
    classes: list

    def sizes(self):
        return tuple(len(split[1]) for split in (self.train, self.validation, self.test))


def _split_train(tokens, labels, fraction=VALIDATION_FRACTION, seed=SPLIT_SEED):
    """A fixed 80 / 20 split of a training set into train / validation (rounded as the
    paper's sizes: 5,485 -> 4,388 / 1,097)."""
    order = np.random.default_rng(seed).permutation(len(labels))
    n_val = int(round(fraction * len(labels)))
    val, train = order[:n_val], order[n_val:]
    labels = np.asarray(labels, np.int64)
    return (
        ([tokens[i] for i in train], labels[train]),
        ([tokens[i] for i in val], labels[val]),
    )


# ----------------------------------------------------------------------------- 20 News
def newsgroup_tokens(raw):
    """The words of one post: its `Subject:` line and its body (after the first blank
    line), lower-cased `[a-z0-9']+` runs."""
    head, _, body = raw.replace("\r\n", "\n").partition("\n\n")
    subject = [line[8:] for line in head.split("\n") if line.lower().startswith("subject:")]
    return _WORD.findall(" ".join([*subject[:1], body]).lower())


def _newsgroup_files(data):
    """`(split, group, name, bytes)` for every post, from an archive or a folder."""
    data = pathlib.Path(data)
    if data.is_dir():
        archives = sorted(data.glob("20news-bydate*.tar*"))
        if not (data / "20news-bydate-train").is_dir() and archives:
            data = archives[0]
    if data.is_file():
        with tarfile.open(data) as tar:
            for member in tar:
                parts = pathlib.PurePosixPath(member.name).parts[-3:]
                if member.isfile() and len(parts) == 3 and parts[0].startswith("20news"):
                    yield (
                        parts[0].rsplit("-", 1)[-1],
                        parts[1],
                        parts[2],
                        tar.extractfile(member).read(),
                    )
        return
    for split in ("train", "test"):
        folder = data / f"20news-bydate-{split}"
        if not folder.is_dir():
            raise FileNotFoundError(
                f"no 20news-bydate-{split}/ folder nor 20news-bydate archive in {data}"
            )
        for path in sorted(folder.glob("*/*")):
            yield split, path.parent.name, path.name, path.read_bytes()


def load_20news(data):
    posts = {"train": [], "test": []}
    for split, group, name, raw in _newsgroup_files(data):
        tokens = newsgroup_tokens(raw.decode("latin-1"))
        if tokens:
            posts[split].append((group, int(name) if name.isdigit() else name, tokens))
    if not posts["train"] or not posts["test"]:
        raise FileNotFoundError(f"no 20 Newsgroups posts found in {data}")
    classes = sorted({group for group, _, _ in posts["train"]})
    index = {group: i for i, group in enumerate(classes)}
    out = {}
    for split, items in posts.items():
        items.sort(key=lambda item: (item[0], str(item[1])))
        out[split] = ([t for _, _, t in items], np.array([index[g] for g, _, _ in items]))
    train, validation = _split_train(*out["train"])
    return Splits(train, validation, out["test"], classes)


# ----------------------------------------------------------------------------- R8
def _read_r8(path):
    tokens, names = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        label, sep, text = line.partition("\t")
        if not sep:
            raise ValueError(f"{path}: a line without a tab (expected 'label<TAB>text')")
        names.append(label.strip())
        tokens.append(text.split())
    return tokens, names


def load_reuters(data):
    data = pathlib.Path(data)
    files = {}
    for split in ("train", "test"):
        found = sorted(data.glob(f"r8-{split}*.txt"))
        if not found:
            raise FileNotFoundError(f"no r8-{split}-*.txt in {data}")
        files[split] = _read_r8(found[0])
    classes = sorted(set(files["train"][1]))
    index = {name: i for i, name in enumerate(classes)}
    unknown = set(files["test"][1]) - set(classes)
    if unknown:
        raise ValueError(f"test labels {sorted(unknown)} do not occur in the training file")
    train, validation = _split_train(files["train"][0], [index[name] for name in files["train"][1]])
    test = (files["test"][0], np.array([index[name] for name in files["test"][1]]))
    return Splits(train, validation, test, classes)


# ----------------------------------------------------------------------------- SST
_TREE_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_tree(line):
    """`(root label, leaves)` of one PTB-format SST tree, e.g. `(3 (2 a) (4 good))`."""
    stack, leaves, root = [], [], None
    items = _TREE_TOKEN.findall(line)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "(":
            if i + 1 >= len(items) or not items[i + 1].isdigit():
                raise ValueError(f"a node without a label in {line[:60]!r}")
            stack.append(int(items[i + 1]))
            i += 2
            continue
        if item == ")":
            if not stack:
                raise ValueError(f"unbalanced parentheses in {line[:60]!r}")
            label = stack.pop()
            if not stack:
                root = label
        else:
            leaves.append(item.lower())
        i += 1
    if stack or root is None:
        raise ValueError(f"unbalanced parentheses in {line[:60]!r}")
    return root, leaves


def _sst_texts(data):
    """`{split: text}` for train / dev / test, from the zip or a folder."""
    data = pathlib.Path(data)
    if data.is_dir():
        for folder in (data, data / "trees"):
            if all((folder / f"{s}.txt").is_file() for s in ("train", "dev", "test")):
                return {
                    s: (folder / f"{s}.txt").read_text("utf-8") for s in ("train", "dev", "test")
                }
        zips = sorted(data.glob("*.zip"))
        if not zips:
            raise FileNotFoundError(f"no trees/{{train,dev,test}}.txt nor SST zip in {data}")
        data = zips[0]
    with zipfile.ZipFile(data) as archive:
        names = {pathlib.PurePosixPath(n).name: n for n in archive.namelist()}
        return {
            s: io.TextIOWrapper(archive.open(names[f"{s}.txt"]), "utf-8").read()
            for s in ("train", "dev", "test")
        }


def load_sst(data, fine_grained):
    out = []
    for text in _sst_texts(data).values():
        tokens, labels = [], []
        for line in text.splitlines():
            if not line.strip():
                continue
            label, leaves = parse_tree(line)
            if not fine_grained:
                if label == 2:
                    continue
                label = int(label > 2)
            tokens.append(leaves)
            labels.append(label)
        out.append((tokens, np.array(labels, np.int64)))
    classes = (
        ["very negative", "negative", "neutral", "positive", "very positive"]
        if fine_grained
        else ["negative", "positive"]
    )
    return Splits(*out, classes)


def load(dataset, data=None):
    """The `Splits` of `dataset` (one of `DATASETS`) read from `data` (a folder or file;
    default: the folder in the data set's environment variable, see `ENVIRONMENT`)."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    data = data or os.environ.get(ENVIRONMENT[dataset])
    if not data:
        raise FileNotFoundError(f"pass --data or set {ENVIRONMENT[dataset]}")
    if dataset == "20news":
        return load_20news(data)
    if dataset == "reuters":
        return load_reuters(data)
    return load_sst(data, fine_grained=dataset == "sst-fine")


# ----------------------------------------------------------------------------- vocabulary
def vocabulary(token_lists, max_size, min_count=1):
    """Word -> id (from 2; 0 pads, 1 is out-of-vocabulary) of the `max_size` most frequent
    training words seen at least `min_count` times (ties: alphabetical)."""
    counts = collections.Counter(word for tokens in token_lists for word in tokens)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return {word: i + 2 for i, word in enumerate(words[:max_size])}


def encode(token_lists, vocab, max_length):
    """`(n, max_length)` int32 ids, the first `max_length` tokens, zero-padded at the end."""
    ids = np.zeros((len(token_lists), max_length), np.int32)
    for row, tokens in enumerate(token_lists):
        codes = [vocab.get(word, 1) for word in tokens[:max_length]]
        ids[row, : len(codes)] = codes
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None)
    parser.add_argument("--dataset", choices=DATASETS, required=True)
    args = parser.parse_args()
    splits = load(args.dataset, args.data)
    lengths = [len(t) for t in splits.train[0]]
    print(f"{args.dataset}: sizes {splits.sizes()} (paper {PAPER_SPLITS[args.dataset]})")
    print(f"classes {splits.classes}")
    print(f"train length: median {np.median(lengths):.0f}, 90 % {np.percentile(lengths, 90):.0f}")


if __name__ == "__main__":
    main()
