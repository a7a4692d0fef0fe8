"""A seeded generator of bAbI-style stories (Weston et al. 2015), tasks 1 and 2.

A small world of people, places and objects. Every example is a story (a list of
sentences), a question and a one-word answer, all lower-case word lists:

* task 1, single supporting fact: people move between places; "where is mary ?"
  is answered by the place of the last sentence that moved mary.
* task 2, two supporting facts: people also get and drop objects; "where is the
  football ?" needs the sentence where someone got (or dropped) the football and the
  sentence that last moved that person.

Nothing is downloaded; the same seed always gives the same data.

    python examples/babi/generate.py --task 2 --n 3   # print three examples
"""

import argparse

import numpy as np

PEOPLE = ["mary", "john", "sandra", "daniel", "fred", "julie"]
PLACES = ["bathroom", "hallway", "garden", "office", "bedroom", "kitchen"]
OBJECTS = ["football", "apple", "milk"]
MOVE_VERBS = [["went", "to"], ["journeyed", "to"], ["travelled", "to"], ["moved", "to"]]
GET_VERBS = [["got"], ["grabbed"], ["picked", "up"], ["took"]]
DROP_VERBS = [["dropped"], ["discarded"], ["put", "down"], ["left"]]


def _task1_example(rng, max_sentences):
    people = list(rng.choice(PEOPLE, size=4, replace=False))
    place = {}
    story = []
    length = int(rng.integers(2, max_sentences + 1))
    for i in range(length):
        # the asked person must have moved at least once: make sure someone moved early
        who = people[int(rng.integers(len(people)))] if i else people[0]
        where = str(rng.choice(PLACES))
        place[who] = where
        story.append([who, *MOVE_VERBS[int(rng.integers(4))], "the", where])
    who = str(rng.choice(sorted(place)))
    return story, ["where", "is", who], place[who]


def _task2_example(rng, max_sentences):
    people = list(rng.choice(PEOPLE, size=4, replace=False))
    objects = list(OBJECTS)
    place, holder, dropped_at = {}, {}, {}
    story = []
    length = int(rng.integers(4, max_sentences + 1))
    while len(story) < length:
        who = people[int(rng.integers(len(people)))]
        action = rng.random()
        carried = [o for o, h in holder.items() if h == who]
        # an object can be got where it was dropped (or anywhere if nobody touched it yet)
        free = [
            o
            for o in objects
            if o not in holder and dropped_at.get(o, place.get(who)) == place.get(who)
        ]
        if who in place and action < 0.3 and free:
            obj = str(rng.choice(free))
            holder[obj] = who
            dropped_at.pop(obj, None)
            story.append([who, *GET_VERBS[int(rng.integers(4))], "the", obj])
        elif who in place and action < 0.45 and carried:
            obj = str(rng.choice(carried))
            del holder[obj]
            dropped_at[obj] = place[who]
            story.append([who, *DROP_VERBS[int(rng.integers(4))], "the", obj])
        else:
            place[who] = str(rng.choice(PLACES))
            story.append([who, *MOVE_VERBS[int(rng.integers(4))], "the", place[who]])
    known = sorted(set(holder) | set(dropped_at))
    if not known:  # nobody touched an object: retry
        return _task2_example(rng, max_sentences)
    obj = str(rng.choice(known))
    answer = place[holder[obj]] if obj in holder else dropped_at[obj]
    return story, ["where", "is", "the", obj], answer


def generate(task, n, seed=0, max_sentences=None):
    """`n` examples `(story, question, answer)` of bAbI-style task 1 or 2."""
    if task not in (1, 2):
        raise ValueError(f"`task` must be 1 or 2. Received: task={task!r}")
    rng = np.random.default_rng(seed)
    make = _task1_example if task == 1 else _task2_example
    max_sentences = max_sentences or (10 if task == 1 else 20)
    return [make(rng, max_sentences) for _ in range(n)]


def vocabulary():
    """Every word of the world, index 0 reserved for padding."""
    words = {"where", "is", "the", *PEOPLE, *PLACES, *OBJECTS}
    for verbs in (MOVE_VERBS, GET_VERBS, DROP_VERBS):
        words.update(w for verb in verbs for w in verb)
    return {w: i + 1 for i, w in enumerate(sorted(words))}


def vectorize(examples, vocab, max_sentences, sentence_length=4):
    """Integer arrays: stories `(n, M, J)` (last M sentences, padded at the end),
    questions `(n, J)` and answers `(n,)`."""
    n = len(examples)
    stories = np.zeros((n, max_sentences, sentence_length), "int32")
    questions = np.zeros((n, sentence_length), "int32")
    answers = np.zeros((n,), "int32")
    for i, (story, question, answer) in enumerate(examples):
        for j, sentence in enumerate(story[-max_sentences:]):
            stories[i, j, : len(sentence)] = [vocab[w] for w in sentence]
        questions[i, : len(question)] = [vocab[w] for w in question]
        answers[i] = vocab[answer]
    return stories, questions, answers


def load(task, n_train=1000, n_test=1000, seed=0):
    """`(train, test, vocab)`; train/test are `((stories, questions), answers)` arrays."""
    max_sentences = 10 if task == 1 else 20
    vocab = vocabulary()
    train = generate(task, n_train, seed=seed, max_sentences=max_sentences)
    test = generate(task, n_test, seed=seed + 1_000_003, max_sentences=max_sentences)
    sentence_length = max(len(s) for ex in train + test for s in ex[0] + [ex[1]])

    def arrays(examples):
        stories, questions, answers = vectorize(examples, vocab, max_sentences, sentence_length)
        return (stories, questions), answers

    return arrays(train), arrays(test), vocab


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", type=int, default=1)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for story, question, answer in generate(args.task, args.n, args.seed):
        for k, sentence in enumerate(story, 1):
            print(f"{k} {' '.join(sentence)} .")
        print(f"  {' '.join(question)} ? -> {answer}\n")
