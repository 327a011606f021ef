#!/usr/bin/env python3
"""lathe's Hugging Face tokenizer.json pipeline (`lathe tokenizer encode/decode --hf`) gives the same
ids and the same decoded text as the `tokenizers` library, for small tokenizers of every supported
kind trained here offline: GPT-2 (ByteLevel regex, with and without add_prefix_space), Llama 3
(Split with its pattern + ByteLevel, ignore_merges, BOS template), Qwen 2 (NFC + its pattern), the
o200k pattern, every Split behavior and invert, Digits, SentencePiece BPE with byte fallback (Llama 2:
Prepend + Replace normalizer; Gemma: Replace only; Metaspace first/always/never with split on and
off), each with special and added tokens (lstrip/rstrip/single_word/normalized). Texts: a fixed
varied set plus seeded random mixtures (LATHE_TOKENIZER_RANDOM_TEXTS, default 300). A tokenizer
trained by `lathe tokenizer train` is checked both ways: lathe's BpeTokenizer and HfTokenizer
against `tokenizers`.

usage: tokenizer_hf_compat_check.py LATHE_BINARY [--keep DIR]   (exit 77 = skipped: no `tokenizers`)
"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
except ImportError:
    print("skipped: python package 'tokenizers' is not installed")
    sys.exit(77)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# GPT-4o's o200k split (upper/lower case runs with optional contraction suffix), as used by Phi-4.
O200K_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                 r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXTS = [
    "",
    "Hello world",
    "Hello, world! It's a test; we'll see. I'M DONE, you'RE not?",
    "  leading spaces and trailing   ",
    "tabs\tand\nnewlines\r\n\n\n  indented\n\t\tdeeper",
    "numbers 1 12 123 1234 12345 3.14159 -42 1,000,000 ٣٤٥ ½ Ⅻ",
    "Ünïcödé façade naïve coöperate Ångström",
    "e\u0301 a\u0300\u0323 combining marks: q\u0307\u0323 \u1e0b\u0323 Hangul \u1100\u1161\u11a8 \ud55c\uad6d\uc5b4",
    "中文文本，日本語のテキスト、한국어 텍스트.",
    "Русский текст и ελληνικά γράμματα; עברית ועוד; العربية",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 heart ❤️",
    "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n\tprint(f(3))",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * 2; }  // C++",
    "<|endoftext|>special in the middle<|endoftext|> and at end<|endoftext|>",
    "<s>begin of sequence</s> then <unk> and <|im_start|>user\nhi<|im_end|>",
    "mixed <tool>  call  <tool> spaced",
    "the word hello world alone, and xhello worldx glued",
    "non-breaking\u00a0space, em\u2003space, ideographic\u3000space, line\u2028sep",
    "\u017fome long s's and 'S and \u212a kelvin",
    "    ",
    "\n",
    "a",
    "don't won't can't I'd they've we're",
    "URL https://example.com/path?q=1&r=two#frag and email a.b@c.de",
    "repeated aaaaaaaaaaaaaaaa bbbbbbbbbb ............ !!!!!!",
]



def random_texts(count, seed=1234):
    """Seeded random mixtures of the pieces the split patterns care about."""
    rng = random.Random(seed)
    pieces = ["a", "B", "the", " ", "  ", "\t", "\n", "\r\n", "'s", "'LL", "'t", "'", "1", "23", "4567", ".", ",!",
              "é", "e\u0301", "ß", "中", "語", "🙂", "👍🏽", "‍", "\u00a0", "\u3000", "٣", "½", "_", "-", "((", "<s>",
              "<|endoftext|>", "<tool>", "hello world", "[MASK]", "<|mäd|>", "HeLLo", "x/y", "▁", "\u017f", "Ω",
              "\u0300", "\u0e01\u0e34", "$", "€"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(count)]


TEXTS += random_texts(int(os.environ.get("LATHE_TOKENIZER_RANDOM_TEXTS", "300")))

CORPUS = TEXTS[:40] * 3 + [
    " ".join(["the quick brown fox jumps over the lazy dog"] * 3),
    "In the beginning the tokenizer learned the common words of the corpus, and then the rarer ones.",
    "Numbers like 2024, 1999 and 42 appear; so do words like don't and it's.",
] * 5

SPECIALS_GPT = ["<|endoftext|>"]
SPECIALS_LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
SPECIALS_QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SPECIALS_SP = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def extra_added_tokens(tokenizer):
    tokenizer.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False),
                          AddedToken("hello world", single_word=True, normalized=True)])
    # Special tokens outside the byte-level alphabet, one swallowing the whitespace before it.
    tokenizer.add_special_tokens([AddedToken("[MASK]", lstrip=True, special=True),
                                  AddedToken("<|mäd|>", special=True)])


def byte_level(add_prefix_space=False, split_pattern=None, nfc=False, ignore_merges=False, specials=SPECIALS_GPT,
               bos=None, splits=None):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    if splits:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            splits + [pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False)])
    elif split_pattern:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False)])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    if bos:
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))])])
    extra_added_tokens(tokenizer)
    return tokenizer


def sentencepiece(normalizer, pre_tokenizer, decoder, merges_as_pairs=False):
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoder
    # A small alphabet so that rarer characters need the byte fallback.
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=SPECIALS_SP + BYTE_TOKENS, limit_alphabet=60,
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS, trainer)
    # Byte tokens are ordinary vocabulary entries in Llama 2 / Mistral files, not added tokens.
    data = json.loads(tokenizer.to_str())
    data["added_tokens"] = [token for token in data["added_tokens"] if token["content"] not in BYTE_TOKENS]
    if merges_as_pairs:
        data["model"]["merges"] = [merge.split(" ") if isinstance(merge, str) else merge
                                   for merge in data["model"]["merges"]]
    else:
        data["model"]["merges"] = [" ".join(merge) if isinstance(merge, list) else merge
                                   for merge in data["model"]["merges"]]
    tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    extra_added_tokens(tokenizer)
    return tokenizer


def sp_decoder():
    return decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                              decoders.Strip(" ", 1, 0)])


def build_all():
    return {
        "gpt2": byte_level(),
        "gpt2_prefix_space": byte_level(add_prefix_space=True),
        "llama3": byte_level(split_pattern=LLAMA3_PATTERN, ignore_merges=True, specials=SPECIALS_LLAMA3,
                             bos="<|begin_of_text|>"),
        "qwen2": byte_level(split_pattern=QWEN2_PATTERN, nfc=True, specials=SPECIALS_QWEN),
        "o200k": byte_level(split_pattern=O200K_PATTERN, specials=SPECIALS_GPT),
        "split_behaviors": byte_level(splits=[
            pre_tokenizers.Split(" ", behavior="merged_with_next"),
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"[.,!?]"), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"\t"), behavior="removed"),
            pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="isolated", invert=True)]),
        "digits": byte_level(splits=[pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
                                     pre_tokenizers.Digits(individual_digits=True)]),
        "digits_contiguous": byte_level(splits=[pre_tokenizers.Digits(individual_digits=False)]),
        "gemma_replace": sentencepiece(normalizers.Replace(" ", "▁"), None,
                                       decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                                          decoders.Fuse()])),
        "metaspace_never": sentencepiece(None, pre_tokenizers.Metaspace("▁", "never", split=True),
                                         decoders.Sequence([decoders.ByteFallback(),
                                                            decoders.Metaspace("▁", "never", split=True),
                                                            decoders.Fuse()])),
        "llama2_sp": sentencepiece(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
                                   None, sp_decoder()),
        "mistral_metaspace_first": sentencepiece(None, pre_tokenizers.Metaspace("▁", "first", split=False),
                                                 sp_decoder(), merges_as_pairs=True),
        "metaspace_always_split": sentencepiece(None, pre_tokenizers.Metaspace("▁", "always", split=True),
                                                decoders.Sequence([decoders.ByteFallback(),
                                                                   decoders.Metaspace("▁", "always", split=True),
                                                                   decoders.Fuse()])),
    }


def run_lathe(command):
    result = subprocess.run(command, capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:4])} failed: {result.stderr.decode().strip()}")
    return result.stdout.decode("utf-8").split("\n")[:-1]


def lathe_encode(lathe, path, work, add_special):
    """Ids of every text in TEXTS, in one call (one JSON string per line)."""
    lines_path = os.path.join(work, "texts.jsonl")
    with open(lines_path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(text, ensure_ascii=False) + "\n" for text in TEXTS)
    command = [lathe, "tokenizer", "encode", "--hf", "--tokenizer", path, "--json-lines", lines_path]
    if add_special:
        command.append("--add-special-tokens")
    return [[int(token) for token in line.split()] for line in run_lathe(command)]


def lathe_own_encode(lathe, path, work):
    """Ids from lathe's own BpeTokenizer (the trainer's class), special tokens matched."""
    lines_path = os.path.join(work, "texts.jsonl")
    with open(lines_path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(text, ensure_ascii=False) + "\n" for text in TEXTS)
    command = [lathe, "tokenizer", "encode", "--special", "--tokenizer", path, "--json-lines", lines_path]
    return [[int(token) for token in line.split()] for line in run_lathe(command)]


def lathe_trained(lathe, work):
    """A tokenizer trained by `lathe tokenizer train`: its split pattern must describe lathe's own split."""
    corpus_path = os.path.join(work, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as out:
        out.write("\n%\n".join(CORPUS))
    path = os.path.join(work, "lathe_trained.json")
    run_lathe([lathe, "tokenizer", "train", "--input", corpus_path, "--vocab-size", "600", "--output", path])
    return path


def lathe_decode(lathe, path, work, id_lists, skip_special):
    lines_path = os.path.join(work, "ids.jsonl")
    with open(lines_path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(ids) + "\n" for ids in id_lists)
    command = [lathe, "tokenizer", "decode", "--hf", "--tokenizer", path, "--json-lines", lines_path]
    if skip_special:
        command.append("--skip-special-tokens")
    return [json.loads(line) for line in run_lathe(command)]


def main():
    lathe = sys.argv[1]
    keep = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--keep" else None
    failures = 0
    checks = 0
    with tempfile.TemporaryDirectory() as work:
        directory = keep or work
        os.makedirs(directory, exist_ok=True)
        own_path = lathe_trained(lathe, work)
        own = Tokenizer.from_file(own_path)
        for text, our_ids in zip(TEXTS, lathe_own_encode(lathe, own_path, work)):
            checks += 1
            their_ids = own.encode(text, add_special_tokens=False).ids
            if our_ids != their_ids:
                failures += 1
                print(f"FAIL lathe-trained BpeTokenizer encode {text!r}:\n  lathe      {our_ids}\n"
                      f"  tokenizers {their_ids}")
        tokenizers_built = build_all()
        tokenizers_built["lathe_trained"] = own
        for name, tokenizer in tokenizers_built.items():
            path = os.path.join(directory, f"{name}.json")
            tokenizer.save(path)
            for add_special in (False, True):
                theirs = [tokenizer.encode(text, add_special_tokens=add_special).ids for text in TEXTS]
                ours = lathe_encode(lathe, path, work, add_special)
                for text, our_ids, their_ids in zip(TEXTS, ours, theirs):
                    checks += 1
                    if our_ids != their_ids:
                        failures += 1
                        print(f"FAIL {name} encode(add_special={add_special}) {text!r}:\n  lathe      {our_ids}\n"
                              f"  tokenizers {their_ids}\n  tokens     {[tokenizer.id_to_token(i) for i in their_ids]}")
                for skip in (False, True):
                    expected = [tokenizer.decode(ids, skip_special_tokens=skip) for ids in theirs]
                    got = lathe_decode(lathe, path, work, theirs, skip)
                    for text, our_text, their_text in zip(TEXTS, got, expected):
                        checks += 1
                        if our_text != their_text:
                            failures += 1
                            print(f"FAIL {name} decode(skip_special={skip}) of {text!r}:\n  lathe      {our_text!r}\n"
                                  f"  tokenizers {their_text!r}")
    import tokenizers
    print(f"tokenizer_hf_compat_check: {checks - failures}/{checks} checks identical to tokenizers "
          f"{tokenizers.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
