#!/usr/bin/python3
"""Regenerates gensim-keyedvectors.json: gensim 4.2's answers on small-vectors.txt for the
KeyedVectors calls the REST API mirrors (doesnt_match, n_similarity, most_similar_cosmul, rank).
Tests only read the saved file (no gensim in CI).

    /usr/bin/python3 tests/data/eval/make_keyedvectors_fixture.py
"""
import json
import os

import gensim
from gensim.models import KeyedVectors

HERE = os.path.dirname(os.path.abspath(__file__))

DOESNT_MATCH = [["king", "queen", "man", "car"], ["france", "germany", "italy", "music"],
                ["one", "two", "three", "river"], ["king", "queen", "xyzzyq", "war"]]
N_SIMILARITY = [(["king", "queen"], ["man", "woman"]), (["paris"], ["france"]),
                (["war", "army"], ["music", "song"]), (["king", "xyzzyq"], ["queen"])]
COSMUL = [(["king", "woman"], ["man"], 10), (["paris", "germany"], ["france"], 10),
          (["good"], [], 5), (["music"], ["war", "army"], 8)]
RANK = [("king", "queen"), ("france", "paris"), ("one", "two"), ("war", "music")]


def main():
    kv = KeyedVectors.load_word2vec_format(os.path.join(HERE, "small-vectors.txt"), binary=False)
    out = {"gensim_version": gensim.__version__, "vectors": "small-vectors.txt",
           "doesnt_match": [], "n_similarity": [], "most_similar_cosmul": [], "rank": []}
    for words in DOESNT_MATCH:
        out["doesnt_match"].append({"words": words, "answer": kv.doesnt_match(words)})
    for ws1, ws2 in N_SIMILARITY:
        out["n_similarity"].append({"ws1": ws1, "ws2": ws2,
                                    "similarity": float(kv.n_similarity(ws1, ws2))})
    for pos, neg, topn in COSMUL:
        res = kv.most_similar_cosmul(positive=pos, negative=neg, topn=topn)
        out["most_similar_cosmul"].append({"positive": pos, "negative": neg, "topn": topn,
                                           "results": [[w, float(s)] for w, s in res]})
    for w1, w2 in RANK:
        out["rank"].append({"w1": w1, "w2": w2, "rank": int(kv.rank(w1, w2))})
    with open(os.path.join(HERE, "gensim-keyedvectors.json"), "w", encoding="utf8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
