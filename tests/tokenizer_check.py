"""tokenizer_check.py: the second implementation test_tokenizer_python.sh
compares `pipetrain tokenize` with: PyPI's tokenizers (Hugging Face's Rust
library), on the same tokenizer files and the same documents.

  make DIR [SOURCES...] DIR/corpus: a folder of documents (the SOURCES'
                        text files: code, prose; by default this
                        repository's src/ and Debian's fortunes and common
                        licenses where installed; and generated Unicode);
                        DIR/tok/tokenizer.json: a byte-level BPE trained on
                        them with GPT-2's pre-tokenizer and a few thousand
                        merges, plus added tokens with every option;
                        DIR/pair/: the same model as vocab.json + merges.txt;
                        DIR/wide/tokenizer.json: the same with one more
                        vocabulary entry, id 70000 (llm.c's version 2 file)
  check TOKENIZER CORPUS BIN
                        BIN must hold, for every document of the folder
                        CORPUS in byte order of name (NUL-free, non-empty),
                        <|endoftext|> and the document's ids as tokenizers
                        encodes it; TOKENIZER is a tokenizer.json or a
                        vocab.json + merges.txt folder
  text CORPUS DECODED   DECODED must be the documents' bytes, each after
                        <|endoftext|> (what --decode gives back)
  bpe OUT VOCAB FILES...
                        OUT/tokenizer.json: a byte-level BPE of VOCAB ids
                        (with <|endoftext|>) trained on FILES
  bytes TOKENIZER IDS   the bytes the ids in the file IDS (decimal,
                        whitespace-separated) stand for, by GPT-2's own
                        byte <-> character table (encoder.py), to stdout

Documents are encoded in parts cut after a newline that stands between two
ASCII letters or digits, where GPT-2's pattern always makes the newline a
piece of its own and no added token here can straddle: the library is slow on long strings, and the
check that parts and whole agree on every document under 300 kB keeps the
cutting honest.
"""
import json
import os
import random
import shutil
import struct
import sys
import unicodedata

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

MERGES = 4000
PART = 1 << 16


def documents(corpus):
    """(name, bytes) of the folder's documents, as pipetrain lists them."""
    for name in sorted(os.listdir(corpus), key=os.fsencode):
        path = os.path.join(corpus, name)
        if name.startswith(".") or os.path.islink(path) or not os.path.isfile(path):
            continue
        data = open(path, "rb").read()
        if data and b"\0" not in data:
            yield name, data


# ---- the generated Unicode document ----------------------------------------

RANGES = {  # scripts and blocks the document samples from
    "latin": (0x41, 0x24F), "greek": (0x370, 0x3FF), "cyrillic": (0x400, 0x4FF),
    "armenian": (0x531, 0x58A), "hebrew": (0x5D0, 0x5EA), "arabic": (0x600, 0x6FF),
    "devanagari": (0x900, 0x97F), "bengali": (0x980, 0x9FF), "thai": (0xE00, 0xE7F),
    "georgian": (0x10A0, 0x10FF), "hangul": (0xAC00, 0xD7A3), "hiragana": (0x3041, 0x309F),
    "katakana": (0x30A0, 0x30FF), "cjk": (0x4E00, 0x9FFF), "cjk_ext_b": (0x20000, 0x2A6DF),
    "emoji": (0x1F300, 0x1F64F), "symbols": (0x2190, 0x2BFF), "math_alnum": (0x1D400, 0x1D7FF),
    "ethiopic": (0x1200, 0x137F), "tamil": (0xB80, 0xBFF), "fullwidth": (0xFF01, 0xFF5E),
}
COMBINING = [chr(c) for c in range(0x300, 0x370)]
DIGITS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙",
          "０１２３４５６７８９", "ⅠⅡⅢⅣⅤⅫ", "²³¹¼½¾", "①②③"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n",
          "\u00a0", "\u3000", "\u2002", "\u2009", "\u200a", "\u2028", "\u0085", "\x0b", "\x0c",
          " \t \n", "    \n    "]
CONTRACTIONS = ["it's", "we'll", "I'M", "I'm", "they're", "you've", "he'd", "can't", "don’t",
                "they’re", "we’ll", "O'Neil", "'s", "''s", "' s", " 's", "rock'n'roll", "‘quoted’",
                "\"quoted\"", "''", "'", "'ll've", "’s"]
ADDED = ["<|endoftext|>", " <|endoftext|> ", "a<|endoftext|>b", "<mask>", " <mask> ",
         "a<mask>b", "\t<mask>\t", "<mask>\u2000", "x <mask>, y", "[SEP]", "a[SEP]b", "ßß",
         "<|end", "<|endof", "<|endoftext|", "<<|endoftext|>>", "<mask><mask>"]
EMOJI = ["👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "❤️", "🏳️‍🌈", "😀😃😄", "🤖"]


def unicode_document(rng):
    """About a megabyte of text that meets every branch of the pattern."""
    def chars(name, n):
        lo, hi = RANGES[name]
        out = []
        while len(out) < n:
            c = rng.randint(lo, hi)
            if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co"):
                out.append(chr(c))
        return "".join(out)

    pieces = []
    names = sorted(RANGES)
    while len(pieces) < 120_000:
        kind = rng.random()
        if kind < 0.35:
            word = chars(rng.choice(names), rng.randint(1, 12))
            if rng.random() < 0.2:
                word = "".join(c + rng.choice(COMBINING) * rng.randint(1, 3) for c in word)
            pieces.append(word)
        elif kind < 0.5:
            d = rng.choice(DIGITS)
            pieces.append("".join(rng.choice(d) for _ in range(rng.randint(1, 8))))
        elif kind < 0.7:
            pieces.append(rng.choice(SPACES))
        elif kind < 0.8:
            pieces.append(rng.choice(CONTRACTIONS))
        elif kind < 0.86:
            pieces.append(rng.choice(ADDED))
        elif kind < 0.92:
            pieces.append(rng.choice(EMOJI))
        else:
            pieces.append("".join(rng.choice(".,;:!?-_()[]{}<>/\\|@#$%^&*+=~`\"'«»¿¡…—–")
                                  for _ in range(rng.randint(1, 5))))
        if rng.random() < 0.5:
            pieces.append(" ")
    # every assigned code point once, between letters and digits
    for cp in range(0x20, 0x30000, 7):
        if unicodedata.category(chr(cp)) not in ("Cn", "Cs"):
            pieces.append(f"a{chr(cp)}1 {chr(cp)}{chr(cp)}x\n")
    # long runs: a word, a number, whitespace, punctuation
    pieces += ["\n", "b" * 5000, " ", "7" * 3000, " " * 2000, "x", "!" * 1000, "\n" * 50,
               "日本語" * 800, "   \n"]
    return "".join(pieces)


def new_bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok


def bpe_trainer(vocab):
    return trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                               special_tokens=["<|endoftext|>"],
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def bpe(out, vocab, files):
    tok = new_bpe()
    tok.train(files, bpe_trainer(int(vocab)))
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))


def bytes_to_unicode():
    """OpenAI's encoder.py: the character that stands for each byte."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def ids_bytes(tok_path, ids_path):
    tok = Tokenizer.from_file(tok_path)
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    ids = [int(x) for x in open(ids_path).read().split()]
    sys.stdout.buffer.write(bytes(byte_of[c] for i in ids for c in tok.id_to_token(i)))


def default_sources():
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "..", "src")] + [
        d for d in ("/usr/share/games/fortunes", "/usr/share/common-licenses") if os.path.isdir(d)]


def make(out, sources):
    sources = sources or default_sources()
    corpus = os.path.join(out, "corpus")
    os.makedirs(corpus)
    k = 0
    for source in sources:
        walk = os.walk(source) if os.path.isdir(source) else [("", [], [source])]
        for root, _, files in walk:
            for f in sorted(files):
                path = os.path.join(root, f)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                data = open(path, "rb").read()
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if data and b"\0" not in data:
                    k += 1
                    shutil.copyfile(path, os.path.join(corpus, "doc%04d_%s" % (k, f)))
    rng = random.Random(20240520)
    with open(os.path.join(corpus, "unicode.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(unicode_document(rng))
    texts = [data.decode("utf-8") for _, data in documents(corpus)]
    tok = new_bpe()
    tok.train_from_iterator(texts, bpe_trainer(257 + MERGES))
    os.makedirs(os.path.join(out, "pair"))
    tok.model.save(os.path.join(out, "pair"))
    tok.add_special_tokens([AddedToken("<mask>", single_word=True, lstrip=True, rstrip=True,
                                       normalized=False)])
    tok.add_tokens([AddedToken("[SEP]", normalized=True), AddedToken("ßß", normalized=True),
                    AddedToken("<|end", normalized=True)])
    os.makedirs(os.path.join(out, "tok"))
    tok.save(os.path.join(out, "tok", "tokenizer.json"))
    spec = json.load(open(os.path.join(out, "tok", "tokenizer.json"), encoding="utf-8"))
    spec["model"]["vocab"]["<wide>"] = 70000
    os.makedirs(os.path.join(out, "wide"))
    json.dump(spec, open(os.path.join(out, "wide", "tokenizer.json"), "w", encoding="utf-8"),
              ensure_ascii=False)
    size = sum(len(d) for _, d in documents(corpus))
    print(f"corpus: {len(texts)} documents, {size / 1e6:.2f} MB; "
          f"vocabulary {tok.get_vocab_size()}")


# ---- checking -----------------------------------------------------------------

def load(path):
    if path.endswith(".json"):
        return Tokenizer.from_file(path)
    tok = Tokenizer(models.BPE.from_file(os.path.join(path, "vocab.json"),
                                         os.path.join(path, "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    return tok


def plain(c):
    return c.isascii() and c.isalnum()


def parts(text, size=PART):
    out, start = [], 0
    while start < len(text):
        at, end = start + size, len(text)
        while at < len(text):
            nl = text.find("\n", at)
            if nl < 0 or nl + 1 >= len(text):
                break
            if plain(text[nl - 1]) and plain(text[nl + 1]):
                end = nl + 1
                break
            at = nl + 1
        out.append(text[start:end])
        start = end
    return out


def read_bin(path):
    data = open(path, "rb").read()
    magic, version, count = struct.unpack("<3i", data[:12])
    if magic != 20240520 or version not in (1, 2):
        sys.exit(f"FAIL: {path}: header {magic} {version}")
    width = 2 if version == 1 else 4
    if len(data) != 1024 + width * count:
        sys.exit(f"FAIL: {path}: {len(data)} bytes for {count} tokens of {width} bytes")
    return version, list(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", data[1024:]))


def check(tok_path, corpus, bin_path):
    tok = load(tok_path)
    eot = tok.token_to_id("<|endoftext|>")
    want, n_docs, cuts = [], 0, 0
    for name, data in documents(corpus):
        text = data.decode("utf-8")
        pieces = parts(text)
        ids = [i for enc in tok.encode_batch(pieces, add_special_tokens=False) for i in enc.ids]
        if len(data) < 300_000 and len(pieces) > 1:
            whole = tok.encode(text, add_special_tokens=False).ids
            if whole != ids:
                sys.exit(f"FAIL: {name}: the check's own cutting changes the ids")
            cuts += 1
        want += [eot] + ids
        n_docs += 1
    version, got = read_bin(bin_path)
    wide = max(tok.get_vocab().values()) >= 65536
    if version != (2 if wide else 1):
        sys.exit(f"FAIL: {bin_path}: version {version} for a vocabulary of "
                 f"{max(tok.get_vocab().values()) + 1}")
    if got != want:
        i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        show = lambda ids: [tok.id_to_token(x) for x in ids[max(0, i - 3):i + 6]]
        sys.exit(f"FAIL: {tok_path}: {len(got)} ids, tokenizers gives {len(want)}; first "
                 f"difference at {i}: pipetrain {show(got)}, tokenizers {show(want)}")
    print(f"{tok_path}: {len(got)} ids of {n_docs} documents equal tokenizers' "
          f"(version {version} file; {cuts} documents checked whole too)")


def text(corpus, decoded):
    want = b"".join(b"<|endoftext|>" + data for _, data in documents(corpus))
    got = open(decoded, "rb").read()
    if got != want:
        i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        sys.exit(f"FAIL: --decode gives {len(got)} bytes, the documents are {len(want)}; first "
                 f"difference at byte {i}: {got[i:i + 40]!r} vs {want[i:i + 40]!r}")
    print(f"--decode gives back the {len(want)} bytes of the documents")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"make": lambda: make(args[0], args[1:]), "check": lambda: check(*args),
     "text": lambda: text(*args), "bpe": lambda: bpe(args[0], args[1], args[2:]),
     "bytes": lambda: ids_bytes(*args)}[mode]()
