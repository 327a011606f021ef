#!/usr/bin/env python3
"""A tokenizer.json written by `lathe tokenizer train` loads in Hugging Face `tokenizers` and
encodes a corpus to the same ids as `lathe tokenizer encode`; decoding gives the text back.

usage: tokenizer_hf_check.py LATHE_BINARY     (exit 77 = skipped: `tokenizers` not installed)
"""
import os
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer
except ImportError:
    print("skipped: python package 'tokenizers' is not installed")
    sys.exit(77)

FORTUNES = "/usr/share/games/fortunes"


def corpus_text():
    """The fortune text files when installed (the first 600 kB, to stay quick), else generated ASCII."""
    if os.path.isdir(FORTUNES):
        parts = []
        for name in sorted(os.listdir(FORTUNES)):
            path = os.path.join(FORTUNES, name)
            if "." in name or os.path.islink(path):
                continue
            try:
                parts.append(open(path, encoding="utf-8").read())
            except UnicodeDecodeError:
                continue
        if parts:
            return "".join(parts)[:600000]
    words = ["the", "cat", "sat", "on", "mat", "don't", "It's", "42", "12345", "...", "!?", "\n", "  "]
    return "\n%\n".join(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(40)) for i in range(500))


def main():
    lathe = sys.argv[1]
    with tempfile.TemporaryDirectory() as work:
        text_path = os.path.join(work, "corpus.txt")
        with open(text_path, "w", encoding="utf-8") as out:
            out.write(corpus_text())
        tokenizer_path = os.path.join(work, "tokenizer.json")
        subprocess.run([lathe, "tokenizer", "train", "--input", text_path, "--vocab-size", "2048", "--output",
                        tokenizer_path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours = subprocess.run([lathe, "tokenizer", "encode", "--tokenizer", tokenizer_path, "--file", text_path],
                              check=True, capture_output=True, text=True).stdout.split()
        ours = [int(token) for token in ours]
        hf = Tokenizer.from_file(tokenizer_path)
        text = open(text_path, encoding="utf-8").read()
        theirs = hf.encode(text).ids
        if ours != theirs:
            first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            print(f"FAIL: ids differ ({len(ours)} lathe vs {len(theirs)} tokenizers), first at {first}: "
                  f"lathe {ours[first:first + 5]} tokenizers {theirs[first:first + 5]}")
            return 1
        if hf.decode(ours) != text:
            print("FAIL: tokenizers does not decode lathe's ids back to the text")
            return 1
        eos = hf.token_to_id("<|endoftext|>")
        if eos != 2047:
            print(f"FAIL: <|endoftext|> has id {eos} in tokenizers, expected 2047")
            return 1
        print(f"tokenizer_hf_check: {len(ours)} ids identical to tokenizers {getattr(sys.modules['tokenizers'], '__version__', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
