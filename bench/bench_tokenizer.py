"""bench_tokenizer.py: the tokenizers library's half of bench_tokenizer.sh.

  prepare DIR COPIES [SOURCES...]
      DIR/corpus: the documents of tests/tokenizer_check.py (SOURCES' text
      files, by default its own, and its generated Unicode), COPIES times
      over; DIR/tok: a
      byte-level BPE of GPT-2's size (50257 ids) trained on one copy
  encode DIR REPEATS
      encodes DIR/corpus with tokenizers, in the calling process's threads
      (run it with RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false for
      one), each document whole and in parts of about 16 kB (cut where the
      ids cannot change: the library is faster on short strings); prints
      "whole MB/s ids" and "parts MB/s ids", the best of REPEATS
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import tokenizer_check as tc  # noqa: E402

from tokenizers import Tokenizer  # noqa: E402

GPT2_VOCAB = 50257


def prepare(out, copies, sources):
    tc.make(os.path.join(out, "one"), sources)
    corpus = os.path.join(out, "corpus")
    os.makedirs(corpus)
    for name, data in tc.documents(os.path.join(out, "one", "corpus")):
        for k in range(int(copies)):
            open(os.path.join(corpus, "%s_copy%d" % (name, k)), "wb").write(data)
    texts = [d.decode("utf-8") for _, d in tc.documents(os.path.join(out, "one", "corpus"))]
    tok = tc.new_bpe()
    tok.train_from_iterator(texts, tc.bpe_trainer(GPT2_VOCAB))
    os.makedirs(os.path.join(out, "tok"))
    tok.save(os.path.join(out, "tok", "tokenizer.json"))


def encode(out, repeats):
    tok = Tokenizer.from_file(os.path.join(out, "tok", "tokenizer.json"))
    docs = [d.decode("utf-8") for _, d in tc.documents(os.path.join(out, "corpus"))]
    size = sum(len(d.encode("utf-8")) for d in docs)
    parts = [p for d in docs for p in tc.parts(d, 1 << 14)]
    for name, batch in (("whole", docs), ("parts", parts)):
        best, count = 0.0, 0
        for _ in range(int(repeats)):
            t = time.perf_counter()
            count = sum(len(e.ids) for e in tok.encode_batch_fast(batch, add_special_tokens=False))
            best = max(best, size / 1e6 / (time.perf_counter() - t))
        print(f"{name} {best:.2f} {count}")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"prepare": lambda: prepare(args[0], args[1], args[2:]),
     "encode": lambda: encode(*args)}[mode]()
