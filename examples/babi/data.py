"""The real bAbI tasks (Weston et al. 2015, v1.2, English), read as the QRN reference code does.

`load(task, set="1k", data=None)` returns `(train, test, vocab)` like `generate.load`. The
data is one of:

* a folder holding the release (`en/`, `en-10k/`), or its parent (`tasks_1-20_v1-2/en/...`),
  or tar archives of it (any compression tarfile reads: the official
  `tasks_1-20_v1-2.tar.gz`, the `.tar.xz` copies in `../shared/data/babi/`);
* one such tar archive;
* `None`: the official archive is downloaded once with `keras.utils.get_file` (cached in
  `~/.keras/datasets/`) and its SHA-256 checked.

Parsing follows the reference code (seominjoon/qrn `prepro.py`, see README.md): a line
`ID text` is a statement, a story starts again at ID 1; a line `ID question\\tanswer\\tids`
is a question, whose story is every statement of its story before it (questions are not
statements); words are `re.findall(r"\\w+", text)`, case kept, punctuation dropped; the
answer is one class even when it is a list (`apple,football` in task 8, `n,w` in task 19).
Arrays keep the last `memory_size` statements (50 by default, the reference's
`max_mem_size`), padded at the end; the memory is `min(longest story, memory_size)`.

    python examples/babi/data.py --data ../shared/data/babi --set 1k --task 8
"""

import argparse
import collections
import dataclasses
import functools
import os
import pathlib
import re
import tarfile

import numpy as np

#: The official release, as the reference code's `download.sh` and Hugging Face's `babi_qa`
#: fetch it; the SHA-256 (15,719,851 bytes) is the one `babi_qa`'s `dataset_infos.json` records.
URLS = (
    "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz",
    "https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz",
)
SHA256 = "0364ebde659f14d11bc21744516c5ec49d3d06cb692733f66680771244998898"
ARCHIVE_NAME = "tasks_1-20_v1-2.tar.gz"

#: The reference's `max_mem_size`: a story keeps its last 50 statements.
MEMORY_SIZE = 50

TASKS = {
    1: "single-supporting-fact",
    2: "two-supporting-facts",
    3: "three-supporting-facts",
    4: "two-arg-relations",
    5: "three-arg-relations",
    6: "yes-no-questions",
    7: "counting",
    8: "lists-sets",
    9: "simple-negation",
    10: "indefinite-knowledge",
    11: "basic-coreference",
    12: "conjunction",
    13: "compound-coreference",
    14: "time-reasoning",
    15: "basic-deduction",
    16: "basic-induction",
    17: "positional-reasoning",
    18: "size-reasoning",
    19: "path-finding",
    20: "agents-motivations",
}
SETS = {"1k": "en", "10k": "en-10k"}
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")


@dataclasses.dataclass(frozen=True)
class Example:
    """One question: the statements before it in its story (each a word list), the
    question's words, the answer (one class), the 0-based story line numbers of the
    supporting statements, and the question's ID in the file."""

    story: list
    question: list
    answer: str
    supporting: list
    line_id: int
    story_id: int = 0  # the 0-based index of the question's story in its file


def file_name(task, set="1k", split="train"):
    """The release path of a task's file, e.g. `en/qa1_single-supporting-fact_train.txt`."""
    if task not in TASKS:
        raise ValueError(f"`task` must be an integer from 1 to 20. Received: task={task!r}")
    if set not in SETS:
        raise ValueError(f'`set` must be "1k" or "10k". Received: set={set!r}')
    if split not in ("train", "test"):
        raise ValueError(f'`split` must be "train" or "test". Received: split={split!r}')
    return f"{SETS[set]}/qa{task}_{TASKS[task]}_{split}.txt"


def _is_archive(path):
    return path.is_file() and path.name.endswith(_ARCHIVE_SUFFIXES)


@functools.lru_cache(maxsize=4)
def _archive_files(path, _mtime):
    """`{"en/qa1_..._train.txt": text}` for every `en/` and `en-10k/` file of a tar archive."""
    files = {}
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            parts = member.name.split("/")
            if member.isfile() and len(parts) >= 2 and parts[-2] in SETS.values():
                files["/".join(parts[-2:])] = archive.extractfile(member).read().decode("utf-8")
    return files


def download(cache_dir=None):
    """The official archive's path, downloaded once with `keras.utils.get_file` (SHA-256
    checked). Raises `ConnectionError` with one sentence when no copy can be fetched."""
    import keras

    error = None
    for url in URLS:
        try:
            return keras.utils.get_file(
                ARCHIVE_NAME,
                origin=url,
                file_hash=SHA256,
                hash_algorithm="sha256",
                cache_dir=cache_dir,
            )
        except Exception as e:  # no network, an HTTP error, a wrong hash: try the next
            error = e
    raise ConnectionError(
        f"Could not download the bAbI archive {ARCHIVE_NAME} from {URLS[0]}: point --data at "
        "a folder or tar archive holding the release (in Python, `data=PATH`)."
    ) from error


class Release:
    """The bAbI release in a folder or tar archive (`None`: the downloaded official one)."""

    def __init__(self, data=None):
        self.path = pathlib.Path(download() if data is None else data).expanduser()
        if not self.path.exists():
            raise FileNotFoundError(f"bAbI data not found: {self.path} does not exist.")
        if self.path.is_file() and not _is_archive(self.path):
            raise ValueError(
                f"bAbI data must be a folder or a tar archive. Received the file {self.path}."
            )

    def _archives(self):
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.iterdir() if _is_archive(p))

    def read_text(self, task, set="1k", split="train"):
        """The text of one file of the release."""
        name = file_name(task, set, split)
        if self.path.is_dir():
            for root in (self.path, self.path / "tasks_1-20_v1-2"):
                if (root / name).is_file():
                    return (root / name).read_text(encoding="utf-8")
        for archive in self._archives():
            files = _archive_files(str(archive), archive.stat().st_mtime)
            if name in files:
                return files[name]
        raise FileNotFoundError(
            f"bAbI file {name} not found in {self.path} (looked for {name} and "
            f"tasks_1-20_v1-2/{name} there and inside its tar archives)."
        )

    def examples(self, task, set="1k", split="train"):
        """Every question of one file as an `Example`."""
        return parse(self.read_text(task, set, split))


def tokenize(text):
    """Words as the reference code splits them: `\\w+` runs, case kept, punctuation dropped."""
    return re.findall(r"\w+", text)


def parse(text):
    """The `Example`s of one bAbI file's text."""
    examples, story, position, story_id = [], [], {}, -1
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        line_id, _, rest = line.partition(" ")
        if not line_id.isdigit():
            raise ValueError(f"line {number} of a bAbI file does not start with an ID: {line!r}")
        line_id = int(line_id)
        if line_id == 1:
            story, position, story_id = [], {}, story_id + 1
        if "\t" in rest:
            question, answer, support = rest.split("\t")[:3]
            supporting = [position[int(i)] for i in support.split()]
            examples.append(
                Example(
                    [s[:] for s in story], tokenize(question), answer, supporting, line_id, story_id
                )
            )
        else:
            position[line_id] = len(story)
            story.append(tokenize(rest))
    return examples


def vocabulary(*example_lists):
    """Every word and answer, sorted, index 0 reserved for padding."""
    words = set()
    for examples in example_lists:
        for ex in examples:
            words.update(w for sentence in ex.story for w in sentence)
            words.update(ex.question)
            words.add(ex.answer)
    return {w: i + 1 for i, w in enumerate(sorted(words))}


def vectorize(examples, vocab, memory_size, sentence_length):
    """Integer arrays: stories `(n, M, J)` (the last M statements, padded at the end),
    questions `(n, J)` and answers `(n,)`."""
    n = len(examples)
    stories = np.zeros((n, memory_size, sentence_length), "int32")
    questions = np.zeros((n, sentence_length), "int32")
    answers = np.zeros((n,), "int32")
    for i, ex in enumerate(examples):
        for j, sentence in enumerate(ex.story[-memory_size:] if memory_size else []):
            stories[i, j, : len(sentence)] = [vocab[w] for w in sentence]
        questions[i, : len(ex.question)] = [vocab[w] for w in ex.question]
        answers[i] = vocab[ex.answer]
    return stories, questions, answers


def load(task, set="1k", data=None, memory_size=MEMORY_SIZE, story_ids=False):
    """`(train, test, vocab)`, train/test being `((stories, questions), answers)` arrays.

    As in the reference code, the vocabulary, the sentence length `J` (the longest statement
    or question) and the memory `M = min(longest story, memory_size)` come from both files
    of the task (they only size the arrays; nothing is learned from the test set). With
    `story_ids=True` a fourth item is the story index of every training question (a story
    holds several questions: a validation split by story keeps them together).
    """
    release = data if isinstance(data, Release) else Release(data)
    train = release.examples(task, set, "train")
    test = release.examples(task, set, "test")
    vocab = vocabulary(train, test)
    both = train + test
    sentence_length = max(len(s) for ex in both for s in [*ex.story, ex.question])
    memory = min(max(len(ex.story) for ex in both), memory_size)

    def arrays(examples):
        stories, questions, answers = vectorize(examples, vocab, memory, sentence_length)
        return (stories, questions), answers

    if story_ids:
        return arrays(train), arrays(test), vocab, np.array([ex.story_id for ex in train])
    return arrays(train), arrays(test), vocab


def describe(release, task, set="1k"):
    """A few lines on one task: sizes, story lengths, answers (for the command line)."""
    train, test = release.examples(task, set, "train"), release.examples(task, set, "test")
    lengths = [len(ex.story) for ex in train + test]
    answers = collections.Counter(ex.answer for ex in train)
    return (
        f"task {task} ({TASKS[task]}, {set}): {len(train)} training and {len(test)} test "
        f"questions; stories of {min(lengths)}-{max(lengths)} statements (median "
        f"{int(np.median(lengths))}, {np.mean(np.array(lengths) > MEMORY_SIZE):.1%} over "
        f"{MEMORY_SIZE}); {len(answers)} answers, most frequent "
        + ", ".join(f"{a} ({c})" for a, c in answers.most_common(4))
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=os.environ.get("NORMKIT_BABI_DATA"))
    parser.add_argument("--set", default="1k", choices=sorted(SETS))
    parser.add_argument("--task", type=int, nargs="+", default=list(TASKS))
    args = parser.parse_args()
    release = Release(args.data)
    for task in args.task:
        print(describe(release, task, args.set))
