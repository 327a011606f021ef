#!/usr/bin/env python3
"""`lathe convert --from hf DIR --to OUT && lathe generate OUT` for every supported family, each with
its own kind of tokenizer.json, offline (no network, no transformers):

  llama            byte-level BPE, Llama 3 split and specials, <|begin_of_text|> template (BOS)
  qwen2, qwen3     byte-level BPE, Qwen 2 split + NFC, <|endoftext|> <|im_start|> <|im_end|>, no BOS
                   (qwen2's embedding has padding rows past the tokenizer's vocabulary)
  mistral          SentencePiece-style BPE with byte fallback, Llama 2 layout (Prepend + Replace), <s> </s>
  gemma2, gemma3   SentencePiece-style BPE with byte fallback, Gemma layout (Replace only), <bos> <eos>

Each HF directory is built here: the tiny config.json of tests/golden/hf/<family>/ with vocab_size set
to the tokenizer's, seeded random float32 weights of the same names and shapes (safetensors written
by hand), and a tokenizer.json trained with the `tokenizers` package. For SentencePiece-style
tokenizers the output rows of the 256 byte tokens are zero, so the greedy continuation is ordinary
tokens (the prompt still goes through the byte fallback: 'é' and '€' have no token of their own).

Checks, with `tokenizers` as the independent judge: the prompt's ids are `tokenizers`' own encoding
(with the file's BOS where it has one, else after <|endoftext|>) and decode back to the prompt; every
generated id is a token (none from qwen2's padding rows); what generate --ignore-eos prints is the
prompt followed by exactly `tokenizers`' decode of the generated ids (in the context of the prompt;
an end-of-text token prints as a blank line); by default (and with --stop-at-eos) it stops there;
greedy generation is deterministic.

Chat (`generate --chat`, two turns from a prompt file): each turn's context ids are `tokenizers`'
encoding of the conversation written out here by hand in the family's template (Llama 3, ChatML,
Mistral [INST], Gemma turns), the first reply included as its decoded text; replies never contain
the end-of-turn or end-of-text token.

Export (`convert --to hf`): config.json and generation_config.json carry the tokenizer's bos/eos
ids (and the end-of-turn token among generation's eos ids), tokenizer_config.json their spellings
and a chat template that renders (with jinja2, when installed) the same text as above. A second
`convert --from hf` into the same run directory is refused; with --overwrite it replaces it.
Weights come from a fresh seed every run (LATHE_TEST_SEED fixes it).

usage: convert_generate_test.py LATHE_BINARY   (exit 77 = skipped: no `tokenizers`)
"""
import array
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
except ImportError:
    print("skipped: python package 'tokenizers' is not installed (bash scripts/setup_test_deps.sh)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lathe_run import CRASH_MARKERS, Checks, test_seed  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(SOURCE, "tests", "golden", "hf")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A tokenizer learns the common words of its corpus first, then the rarer ones.",
    "Numbers like 2024, 1999 and 42 appear; so do words like don't and it's.",
    "The model reads the prompt and continues it one token at a time.",
    "Hello world! How are you today? The weather is fine, thank you.",
    "Once upon a time there was a small model that wanted to speak.",
    "def add(a, b):\n    return a + b\n",
    "Rivers flow to the sea, and the sea returns them as rain over the hills.",
] * 8
PROMPT = "The quick brown fox, caf\u00e9 \u20ac5:"
MAX_TOKENS = 24

check = Checks()


def byte_level(pattern, specials, nfc=False, bos=None):
    tokenizer = Tokenizer(models.BPE())
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    if bos:
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))])])
    return tokenizer


def sentencepiece(normalizer, decoder, specials, bos):
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizer
    tokenizer.decoder = decoder
    # A small alphabet, so that 'é' and '€' need the byte fallback.
    trainer = trainers.BpeTrainer(vocab_size=460, special_tokens=specials + BYTE_TOKENS, limit_alphabet=40,
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS, trainer)
    # Byte tokens are ordinary vocabulary entries in these files, not added tokens.
    data = json.loads(tokenizer.to_str())
    data["added_tokens"] = [token for token in data["added_tokens"] if token["content"] not in BYTE_TOKENS]
    tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                             special_tokens=[(bos, tokenizer.token_to_id(bos))])
    return tokenizer


def llama2_style():
    return sentencepiece(normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
                         decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                            decoders.Strip(" ", 1, 0)]),
                         ["<unk>", "<s>", "</s>"], "<s>")


def gemma_style():
    return sentencepiece(normalizers.Replace(" ", "\u2581"),
                         decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]),
                         ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"], "<bos>")


# family -> (tokenizer builder, lathe's name for its kind, the token a prompt starts with, padding rows)
FAMILIES = {
    "llama": (lambda: byte_level(LLAMA3_PATTERN, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                                                  "<|start_header_id|>", "<|end_header_id|>"],
                                 bos="<|begin_of_text|>"),
              "Hugging Face byte-level BPE", "<|begin_of_text|>", 0),
    "qwen2": (lambda: byte_level(QWEN2_PATTERN, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], nfc=True),
              "Hugging Face byte-level BPE", "<|endoftext|>", 16),
    "qwen3": (lambda: byte_level(QWEN2_PATTERN, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], nfc=True),
              "Hugging Face byte-level BPE", "<|endoftext|>", 0),
    "mistral": (llama2_style, "Hugging Face SentencePiece-style BPE", "<s>", 0),
    "gemma2": (gemma_style, "Hugging Face SentencePiece-style BPE", "<bos>", 0),
    "gemma3": (gemma_style, "Hugging Face SentencePiece-style BPE", "<bos>", 0),
}


def read_safetensors_header(path):
    with open(path, "rb") as file:
        length = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(length))
    header.pop("__metadata__", None)
    return header


def write_safetensors(path, tensors):
    """tensors: name -> (shape, array('f')) written as F32, little-endian."""
    header, offset, blobs = {}, 0, []
    for name, (shape, values) in tensors.items():
        data = values.tobytes()  # native order: little-endian on every machine lathe runs on
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def build_hf_directory(family, tokenizer, padding_rows, directory, seed):
    """config.json of the golden tiny model with this vocabulary, random weights, tokenizer.json."""
    os.makedirs(directory)
    token_count = tokenizer.get_vocab_size(with_added_tokens=True)
    vocab = token_count + padding_rows
    with open(os.path.join(GOLDEN, family, "config.json")) as file:
        config = json.load(file)
    old_vocab = config["vocab_size"]
    config["vocab_size"] = vocab
    with open(os.path.join(directory, "config.json"), "w") as file:
        json.dump(config, file, indent=2)
    byte_ids = [tokenizer.token_to_id(token) for token in BYTE_TOKENS]
    byte_ids = [token for token in byte_ids if token is not None]
    output_name = "model.embed_tokens.weight" if config.get("tie_word_embeddings") else "lm_head.weight"
    rng = random.Random(seed)
    tensors = {}
    for name, entry in sorted(read_safetensors_header(os.path.join(GOLDEN, family, "model.safetensors")).items()):
        shape = [vocab if dim == old_vocab else dim for dim in entry["shape"]]
        count = 1
        for dim in shape:
            count *= dim
        values = array.array("f", (rng.gauss(0.0, 0.1) for _ in range(count)))
        if name == output_name:
            columns = shape[1]
            for token in byte_ids:  # never the greedy choice (see the module docstring)
                values[token * columns:(token + 1) * columns] = array.array("f", [0.0] * columns)
        tensors[name] = (shape, values)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    return token_count


def run(binary, *args):
    """(exit code, stdout bytes, stderr text)."""
    done = subprocess.run([binary, *args], capture_output=True, timeout=300)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", errors="replace")


def check_family(binary, work, family, seed):
    build, kind, first_token, padding_rows = FAMILIES[family]
    tokenizer = build()
    hf_dir, out_dir = os.path.join(work, family + "_hf"), os.path.join(work, family + "_run")
    token_count = build_hf_directory(family, tokenizer, padding_rows, hf_dir, seed)
    code, _, stderr = run(binary, "convert", "--from", "hf", hf_dir, "--to", out_dir)
    if not check(code == 0 and not CRASH_MARKERS.search(stderr), f"{family}: lathe convert --from hf",
                 f"exit {code}\n{stderr}"):
        return
    runs = {}
    for name, extra in (("first", ["--ignore-eos"]), ("again", ["--ignore-eos"]), ("default", []),
                        ("stop_at_eos", ["--stop-at-eos"])):
        ids_path = os.path.join(work, f"{family}_ids_{name}.json")
        code, stdout, stderr = run(binary, "generate", out_dir, "--prompt", PROMPT, "--max-tokens", str(MAX_TOKENS),
                                   "--temperature", "0", "--save-ids", ids_path, *extra)
        if not check(code == 0 and not CRASH_MARKERS.search(stderr), f"{family}: lathe generate OUT {' '.join(extra)}",
                     f"exit {code}\n{stderr}"):
            return
        with open(ids_path) as file:
            runs[name] = (stdout, json.load(file))
    stdout, ids = runs["first"]
    check(runs["again"] == runs["first"], f"{family}: greedy generation is deterministic",
          f"{stdout!r}\n{runs['again'][0]!r}")
    check(ids["tokenizer"] == kind, f"{family}: generate read the tokenizer as {kind}", ids["tokenizer"])

    prompt_ids, generated = ids["prompt_ids"], ids["generated_ids"]
    expected_prompt = [tokenizer.token_to_id(first_token)] + tokenizer.encode(PROMPT, add_special_tokens=False).ids
    check(prompt_ids == expected_prompt, f"{family}: prompt ids are {first_token} + tokenizers' encoding",
          f"lathe {prompt_ids}\ntokenizers {expected_prompt}")
    if first_token != "<|endoftext|>":
        check(prompt_ids == tokenizer.encode(PROMPT).ids, f"{family}: prompt ids equal tokenizers' add_special_tokens")
    check(tokenizer.decode(prompt_ids[1:], skip_special_tokens=False) == PROMPT,
          f"{family}: the prompt's ids decode back to the prompt", tokenizer.decode(prompt_ids[1:]))
    check(len(generated) == MAX_TOKENS and all(0 <= token < token_count for token in generated),
          f"{family}: {MAX_TOKENS} generated ids, all tokens of the tokenizer ({token_count} of {token_count + padding_rows}"
          " rows)", str(generated))
    eos = tokenizer.token_to_id({"<s>": "</s>", "<bos>": "<eos>", "<|begin_of_text|>": "<|end_of_text|>"}.get(
        first_token, "<|endoftext|>"))
    stopped = runs["default"][1]["generated_ids"]
    check(stopped == (generated[:generated.index(eos)] if eos in generated else generated),
          f"{family}: generation stops where the end-of-text token comes", f"{stopped}\n{generated}")
    check(runs["stop_at_eos"] == runs["default"], f"{family}: --stop-at-eos is the default")

    # What generate prints: the prompt, then each token as it reads in context; an end-of-text token
    # is a blank line after which text decodes afresh.
    expected, context, segment = PROMPT, prompt_ids, []
    for token in generated + [None]:
        if token is not None and token != eos:
            segment.append(token)
            continue
        before = tokenizer.decode(context, skip_special_tokens=False)
        whole = tokenizer.decode(context + segment, skip_special_tokens=False)
        if not check(whole.startswith(before), f"{family}: a continuation extends its context's text", repr(whole)):
            return
        expected += whole[len(before):] + ("\n\n" if token is not None else "\n")
        context, segment = [eos], []
    check(stdout == expected.encode("utf-8"),
          f"{family}: printed text is the prompt + tokenizers' decode of the generated ids",
          f"lathe      {stdout!r}\ntokenizers {expected.encode('utf-8')!r}")
    check_chat(binary, work, family, tokenizer, out_dir)
    check_export(binary, work, family, tokenizer, out_dir)
    check_overwrite(binary, family, hf_dir, out_dir)


# family -> (template renderer, end-of-turn token). Written from the formats the families use
# (data/chat_template.h describes lathe's side), not from lathe's output.
def render_llama3(messages, generation_prompt):
    text = "<|begin_of_text|>" + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>"
                                         for m in messages)
    return text + ("<|start_header_id|>assistant<|end_header_id|>\n\n" if generation_prompt else "")


def render_chatml(messages, generation_prompt):
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


def render_mistral(messages, generation_prompt):
    return "<s>" + "".join(f"[INST] {m['content']} [/INST]" if m["role"] == "user" else f" {m['content']}</s>"
                           for m in messages)


def render_gemma(messages, generation_prompt):
    text = "<bos>" + "".join(f"<start_of_turn>{'model' if m['role'] == 'assistant' else 'user'}\n{m['content']}"
                             "<end_of_turn>\n" for m in messages)
    return text + ("<start_of_turn>model\n" if generation_prompt else "")


CHAT = {
    "llama": (render_llama3, "<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>"),
    "qwen2": (render_chatml, "<|im_end|>", "<|endoftext|>", "<|endoftext|>"),
    "qwen3": (render_chatml, "<|im_end|>", "<|endoftext|>", "<|endoftext|>"),
    "mistral": (render_mistral, "</s>", "<s>", "</s>"),
    "gemma2": (render_gemma, "<end_of_turn>", "<bos>", "<eos>"),
    "gemma3": (render_gemma, "<end_of_turn>", "<bos>", "<eos>"),
}
TURNS = ["Hello there", "And the fox?"]


def check_chat(binary, work, family, tokenizer, out_dir):
    render, turn_end, _, eos = CHAT[family]
    turns_path, ids_path = os.path.join(work, f"{family}_turns.txt"), os.path.join(work, f"{family}_chat.json")
    with open(turns_path, "w") as file:
        file.write("\n".join(TURNS) + "\n")
    code, stdout, stderr = run(binary, "generate", out_dir, "--chat", "--prompt-file", turns_path, "--temperature", "0",
                               "--max-tokens", "12", "--save-ids", ids_path)
    if not check(code == 0 and not CRASH_MARKERS.search(stderr), f"{family}: generate --chat", f"exit {code}\n{stderr}"):
        return
    with open(ids_path) as file:
        turns = json.load(file)["turns"]
    if not check(len(turns) == 2, f"{family}: --chat answered both turns", str(turns)):
        return
    stops = {tokenizer.token_to_id(turn_end), tokenizer.token_to_id(eos)}
    messages = []
    for turn, (user, ids) in enumerate(zip(TURNS, turns)):
        messages.append({"role": "user", "content": user})
        expected = tokenizer.encode(render(messages, True), add_special_tokens=False).ids
        check(ids["context_ids"] == expected, f"{family}: chat turn {turn + 1}'s context is the {render.__name__} text",
              f"lathe      {ids['context_ids']}\ntokenizers {expected}")
        reply = ids["generated_ids"]
        check(len(reply) <= 12 and not stops & set(reply), f"{family}: reply {turn + 1} stops before its end tokens",
              str(reply))
        messages.append({"role": "assistant", "content": tokenizer.decode(reply, skip_special_tokens=True)})


def check_export(binary, work, family, tokenizer, out_dir):
    render, turn_end, bos, eos = CHAT[family]
    export = os.path.join(work, family + "_export")
    code, _, stderr = run(binary, "convert", "--from", out_dir, "--to", "hf", export)
    if not check(code == 0, f"{family}: convert --to hf", f"exit {code}\n{stderr}"):
        return
    with open(os.path.join(export, "config.json")) as file:
        config = json.load(file)
    with open(os.path.join(export, "generation_config.json")) as file:
        generation = json.load(file)
    with open(os.path.join(export, "tokenizer_config.json")) as file:
        tokenizer_config = json.load(file)
    bos_id, eos_id, turn_end_id = (tokenizer.token_to_id(t) for t in (bos, eos, turn_end))
    check((config.get("bos_token_id"), config.get("eos_token_id")) == (bos_id, eos_id),
          f"{family}: exported config.json has bos {bos} and eos {eos}", f"{config.get('bos_token_id')} "
          f"{config.get('eos_token_id')} vs {bos_id} {eos_id}")
    expected_eos = eos_id if turn_end_id == eos_id else [eos_id, turn_end_id]
    check(generation.get("bos_token_id") == bos_id and generation.get("eos_token_id") == expected_eos,
          f"{family}: generation_config.json stops at {eos} and {turn_end}", json.dumps(generation))
    check((tokenizer_config.get("bos_token"), tokenizer_config.get("eos_token")) == (bos, eos),
          f"{family}: tokenizer_config.json names bos and eos", json.dumps(tokenizer_config)[:300])
    try:
        import jinja2
    except ImportError:
        print(f"note: {family}: jinja2 is not installed; the exported chat template was not rendered")
        return
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Bye"}]
    template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(tokenizer_config["chat_template"])
    for generation_prompt in (False, True):
        rendered = template.render(messages=messages, add_generation_prompt=generation_prompt)
        check(rendered == render(messages, generation_prompt),
              f"{family}: the exported chat template renders the {render.__name__} text "
              f"(add_generation_prompt={generation_prompt})", repr(rendered))


def check_overwrite(binary, family, hf_dir, out_dir):
    code, _, stderr = run(binary, "convert", "--from", "hf", hf_dir, "--to", out_dir)
    check(code == 2 and "already exists and is not empty" in stderr and "--overwrite" in stderr,
          f"{family}: convert --from hf refuses an existing run directory", f"exit {code}\n{stderr}")
    stale = os.path.join(out_dir, "checkpoints", "step_00000099")
    os.makedirs(stale, exist_ok=True)
    code, _, stderr = run(binary, "convert", "--from", "hf", hf_dir, "--to", out_dir, "--overwrite")
    check(code == 0 and not os.path.exists(stale), f"{family}: convert --overwrite replaces the run directory",
          f"exit {code}\n{stderr}")


def main():
    binary = sys.argv[1]
    families = sys.argv[2:] or list(FAMILIES)
    seed = test_seed()
    print(f"LATHE_TEST_SEED={seed}")
    work = tempfile.mkdtemp(prefix="lathe_convert_generate_")
    try:
        for index, family in enumerate(families):
            check_family(binary, work, family, seed=seed + index)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if check.failures:
        print(f"{len(check.failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
