#!/usr/bin/python3
"""Regenerates the eval fixtures in this folder. Tests only read the saved files (no gensim in CI).

Run with the system Python that has python3-gensim 4.2 (not a pyenv one):

    /usr/bin/python3 tests/data/eval/make_fixtures.py [--data ../shared/data]

What it does:
  1. Trains skip-gram vectors with gensim Word2Vec (sg=1, vector_size=32, window=5, min_count=20,
     seed=1, workers=1, 3 epochs) on corpus/enwiki-text8style-small-5m.txt and saves them in
     word2vec text format as small-vectors.txt (most frequent word first). min_count is 20, not
     10, to keep the file under 2 MB (about 4.3k rows). PYTHONHASHSEED is pinned to 0 because
     gensim seeds its initial vectors with Python's str hash.
  2. Computes gensim's reference numbers on it and writes gensim-reference.json:
     KeyedVectors.evaluate_word_pairs (defaults: restrict_vocab=300000, case_insensitive=True) on
     EN-WS-353-ALL.txt, EN-MEN-TR-3k.txt and pairs-edge-cases.txt, and
     KeyedVectors.evaluate_word_analogies on questions-words.txt with restrict_vocab 30000 and 2000,
     with the correct / incorrect counts of every section.

The eval sets EN-WS-353-ALL.txt, EN-MEN-TR-3k.txt and questions-words.txt are copied unchanged from
../shared/data/eval (see README.md for attribution). pairs-edge-cases.txt is hand-written.
"""
import argparse
import json
import os
import sys
from pathlib import Path

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import gensim  # noqa: E402
from gensim.models import KeyedVectors, Word2Vec  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIMILARITY_FILES = ["EN-WS-353-ALL.txt", "EN-MEN-TR-3k.txt", "pairs-edge-cases.txt"]
ANALOGY_FILE = "questions-words.txt"
ANALOGY_RESTRICTS = [30000, 2000]


def train(corpus, out_path):
    with open(corpus, encoding="utf8") as f:
        words = f.read().split()
    # gensim caps a sentence at 10000 tokens; text8-style corpora are one line, so chunk it.
    sentences = [words[i:i + 10000] for i in range(0, len(words), 10000)]
    model = Word2Vec(sentences, sg=1, vector_size=32, window=5, min_count=20, seed=1, workers=1,
                     epochs=3)
    model.wv.save_word2vec_format(out_path, binary=False)


def pair_counts(kv, path, restrict_vocab=300000):
    """Found / OOV pair counts exactly as evaluate_word_pairs counts them (it only returns a ratio)."""
    ok_vocab = {k.upper() for k in kv.index_to_key[:restrict_vocab]}
    found = oov = 0
    with open(path, encoding="utf8") as fin:
        for line in fin:
            if not line or line.startswith("#"):
                continue
            try:
                a, b, sim = [w.upper() for w in line.split("\t")]
                float(sim)
            except (ValueError, TypeError):
                continue
            if a in ok_vocab and b in ok_vocab:
                found += 1
            else:
                oov += 1
    return found, oov


def analogy_counts(kv, path, restrict_vocab):
    """Questions and OOV questions as evaluate_word_analogies counts them (it only logs a ratio)."""
    ok_vocab = {k.upper() for k in kv.index_to_key[:restrict_vocab]}
    questions = oov = 0
    with open(path, encoding="utf8") as fin:
        for line in fin:
            if line.startswith(": "):
                continue
            words = [w.upper() for w in line.split()]
            if len(words) != 4:
                continue
            questions += 1
            if any(w not in ok_vocab for w in words):
                oov += 1
    return questions, oov


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[3].parent / "shared" / "data"))
    parser.add_argument("--skip-train", action="store_true", help="reuse small-vectors.txt")
    args = parser.parse_args()

    vectors_path = os.path.join(HERE, "small-vectors.txt")
    if not args.skip_train:
        train(os.path.join(args.data, "corpus", "enwiki-text8style-small-5m.txt"), vectors_path)
    kv = KeyedVectors.load_word2vec_format(vectors_path, binary=False)

    reference = {
        "gensim_version": gensim.__version__,
        "vectors": "small-vectors.txt",
        "rows": len(kv.index_to_key),
        "dim": kv.vector_size,
        "similarity": [],
        "analogy": [],
    }
    for name in SIMILARITY_FILES:
        path = os.path.join(HERE, name)
        pearson, spearman, oov_ratio = kv.evaluate_word_pairs(path)
        found, oov = pair_counts(kv, path)
        reference["similarity"].append({
            "file": name, "restrict": 300000,
            "pearson": float(pearson[0]), "spearman": float(spearman.correlation),
            "oov_ratio": float(oov_ratio), "pairs": found, "oov": oov,
        })
    for restrict in ANALOGY_RESTRICTS:
        path = os.path.join(HERE, ANALOGY_FILE)
        score, sections = kv.evaluate_word_analogies(path, restrict_vocab=restrict)
        questions, oov = analogy_counts(kv, path, restrict)
        reference["analogy"].append({
            "file": ANALOGY_FILE, "restrict": restrict, "accuracy": float(score),
            "questions": questions, "oov": oov,
            "sections": [{"section": s["section"], "correct": len(s["correct"]),
                          "incorrect": len(s["incorrect"])} for s in sections],
        })
    with open(os.path.join(HERE, "gensim-reference.json"), "w", encoding="utf8") as f:
        json.dump(reference, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
