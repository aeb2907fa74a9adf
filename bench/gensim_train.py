#!/usr/bin/python3
"""Train gensim Word2Vec in corpus_file mode and write word2vec text vectors.

The benchmark (bench/train_bench.py) runs this script as a subprocess and times the whole
process. Run it with Debian's /usr/bin/python3 (python3-gensim).

corpus_file mode reads at most 10,000 words of a line (gensim's MAX_WORDS_IN_BATCH) and silently
drops the rest: give it a corpus whose lines are shorter (the bench re-wraps the corpus to lines of
at most 1000 tokens).

Prints one JSON line on stdout: phase timings and gensim's own counts.
"""

import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus-file", required=True, help="one sentence per line, < 10k tokens a line")
    p.add_argument("--output", required=True, help="vectors file (word2vec text format)")
    p.add_argument("--model", choices=["sgns", "cbow"], default="sgns")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-4)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--alpha", type=float, default=0.025)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    t0 = time.perf_counter()
    from gensim.models import Word2Vec  # imported here so the import is timed too
    import gensim

    t_import = time.perf_counter()
    model = Word2Vec(
        vector_size=args.dim,
        window=args.window,
        negative=args.negative,
        hs=0,
        sample=args.sample,
        min_count=args.min_count,
        sg=1 if args.model == "sgns" else 0,
        alpha=args.alpha,  # min_alpha: gensim's default (0.0001)
        workers=args.workers,
        seed=args.seed,
        epochs=args.epochs,
    )
    model.build_vocab(corpus_file=args.corpus_file)
    t_vocab = time.perf_counter()
    trained, raw = model.train(
        corpus_file=args.corpus_file,
        total_words=model.corpus_total_words,
        total_examples=model.corpus_count,
        epochs=model.epochs,
    )
    t_train = time.perf_counter()
    model.wv.save_word2vec_format(args.output, binary=False)
    t_write = time.perf_counter()

    print(json.dumps({
        "gensim": gensim.__version__,
        "vocabulary": len(model.wv),
        "corpus_words": model.corpus_total_words,
        "trained_words": trained,
        "raw_words": raw,
        "seconds": {
            "import": round(t_import - t0, 3),
            "vocab": round(t_vocab - t_import, 3),
            "train": round(t_train - t_vocab, 3),
            "write": round(t_write - t_train, 3),
        },
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
