"""Supervised fine-tuning from a Hugging Face checkpoint and back (issue 4, item 6).

Usage: sft_hf_roundtrip_test.py LATHE_BINARY
  1. transformers builds a tiny random LlamaForCausalLM (seeded, offline) and saves it with a
     ChatML tokenizer trained by `lathe tokenizer train` on tests/data/sft_capitals.jsonl;
  2. `lathe train load_from=hf:DIR data.format=sft ...` fine-tunes it for a few dozen steps;
  3. `lathe convert --from CHECKPOINT --to hf OUT` exports the result;
  4. transformers reloads OUT, and the loss on the response tokens only (masks derived here, in
     Python, with the `tokenizers` library: ids of the rendered prompt are a prefix of the ids of
     prompt + answer, the rest is the answer and <|im_end|>) has fallen well below the original
     model's, and the exported config keeps the shape.
Exits 77 (skipped) without torch / transformers / tokenizers or without `lathe convert`.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import tokenizers
    import torch
    import transformers
except ImportError as missing:
    print(f"skipped: {missing.name} is not installed")
    sys.exit(77)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))
from lathe_run import Checks  # noqa: E402

DATA = os.path.join(SOURCE, "tests", "data", "sft_capitals.jsonl")
STEPS = 40
check = Checks()
failures = check.failures


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def conversations():
    with open(DATA) as file:
        for line in file:
            record = json.loads(line)
            if "messages" in record:
                yield record["messages"]
            else:
                yield [{"role": "user", "content": record["prompt"]}, {"role": "assistant", "content": record["response"]}]


def chatml(messages):
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def response_loss(model, tokenizer):
    """Mean cross-entropy over the last assistant answer (+ <|im_end|>) of every conversation."""
    total, count = 0.0, 0
    for messages in conversations():
        prompt = chatml(messages[:-1]) + "<|im_start|>assistant\n"
        full = prompt + messages[-1]["content"] + "<|im_end|>"
        prompt_ids, full_ids = tokenizer.encode(prompt).ids, tokenizer.encode(full).ids
        assert full_ids[:len(prompt_ids)] == prompt_ids, "the prompt's ids are not a prefix"
        ids = torch.tensor([full_ids])
        with torch.no_grad():
            logits = model(ids).logits[0].double()
        targets = ids[0, 1:]
        losses = torch.nn.functional.cross_entropy(logits[:-1], targets, reduction="none")
        answer = losses[len(prompt_ids) - 1:]
        total += float(answer.sum())
        count += answer.numel()
    return total / count


def check_exported_tokens(binary, run_dir, hf_out, tokenizer, tuned, work):
    """transformers reads the export's token ids and chat template as lathe uses them (issue 19, item 5)."""
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(hf_out)
    end_of_text, im_end = tokenizer.token_to_id("<|endoftext|>"), tokenizer.token_to_id("<|im_end|>")
    check(hf_tokenizer.eos_token == "<|endoftext|>" and hf_tokenizer.bos_token == "<|endoftext|>",
          "AutoTokenizer reads eos and bos (<|endoftext|>: the tokenizer has no BOS)",
          f"{hf_tokenizer.bos_token} {hf_tokenizer.eos_token}")
    check(tuned.config.eos_token_id == end_of_text and tuned.config.bos_token_id == end_of_text,
          "config.json's eos/bos ids are the tokenizer's", f"{tuned.config.bos_token_id} {tuned.config.eos_token_id}")
    generation = transformers.GenerationConfig.from_pretrained(hf_out)
    check(generation.eos_token_id == [end_of_text, im_end], "generation stops at <|endoftext|> and <|im_end|>",
          str(generation.eos_token_id))
    question = "What is the capital of France?"
    expected = tokenizer.encode(chatml([{"role": "user", "content": question}]) + "<|im_start|>assistant\n").ids
    rendered = hf_tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                                tokenize=True)
    rendered = rendered["input_ids"] if isinstance(rendered, dict) or hasattr(rendered, "keys") else rendered
    check(list(rendered) == expected, "apply_chat_template gives the ChatML ids SFT trained on",
          f"{list(rendered)}\n{expected}")
    ids_path = os.path.join(work, "chat_ids.json")
    code, output = run(binary, "generate", run_dir, "--chat", "--prompt", question, "--temperature", "0",
                       "--max-tokens", "16", "--save-ids", ids_path)
    if not check(code == 0, "lathe generate --chat", output):
        return
    with open(ids_path) as file:
        turn = json.load(file)["turns"][0]
    check(turn["context_ids"] == expected, "lathe's chat context equals transformers' apply_chat_template",
          f"{turn['context_ids']}\n{expected}")
    # Greedy in transformers stops where lathe's reply stopped (the same weights, the same stop ids).
    with torch.no_grad():
        output_ids = tuned.generate(torch.tensor([expected]), max_new_tokens=16, do_sample=False,
                                    generation_config=generation)[0].tolist()[len(expected):]
    if output_ids and output_ids[-1] in (end_of_text, im_end):
        output_ids = output_ids[:-1]
    check(output_ids == turn["generated_ids"], "transformers' greedy reply equals lathe --chat's",
          f"{output_ids}\n{turn['generated_ids']}")


def main():
    binary = sys.argv[1]
    code, _ = run(binary, "convert", "--help")
    if code != 0:
        print("skipped: this lathe has no `convert` command yet")
        return 77
    work = tempfile.mkdtemp(prefix="lathe_sft_hf_")
    try:
        hf_in, hf_out, run_dir = (os.path.join(work, name) for name in ("hf_in", "hf_out", "run"))
        os.makedirs(hf_in)
        # The conversations as plain text: a .jsonl input would be read as {"text": ...} records.
        corpus = os.path.join(work, "sft_capitals.txt")
        shutil.copyfile(DATA, corpus)
        code, output = run(binary, "tokenizer", "train", "--input", corpus, "--vocab-size", "290", "--output",
                           os.path.join(hf_in, "tokenizer.json"), "--special", "<|endoftext|>", "--special",
                           "<|im_start|>", "--special", "<|im_end|>")
        if not check(code == 0, "ChatML tokenizer", output):
            return 1
        torch.manual_seed(1234)
        config = transformers.LlamaConfig(vocab_size=300, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                          tie_word_embeddings=False, initializer_range=0.05)
        original = transformers.LlamaForCausalLM(config).float().eval()
        original.save_pretrained(hf_in, safe_serialization=True)
        tokenizer = tokenizers.Tokenizer.from_file(os.path.join(hf_in, "tokenizer.json"))
        loss_before = response_loss(original, tokenizer)

        code, output = run(binary, "train", f"load_from=hf:{hf_in}", "data.format=sft", f"data.path={DATA}",
                           f"data.tokenizer={hf_in}/tokenizer.json", f"train.steps={STEPS}", "train.batch_size=4",
                           "train.seq_len=64", "optimizer.lr=1e-2", "optimizer.warmup_steps=4", "optimizer.weight_decay=0",
                           "data.val_fraction=0.2", "log.tensorboard=false", "checkpoint.every=0", f"run_dir={run_dir}")
        if not check(code == 0, "lathe train load_from=hf: data.format=sft", output):
            return 1
        check("chat template chatml" in output, "auto picks chatml for the ChatML tokenizer", output)
        checkpoint = os.path.join(run_dir, "checkpoints", f"step_{STEPS:08d}")
        code, output = run(binary, "convert", "--from", checkpoint, "--to", "hf", hf_out)
        if not check(code == 0, "lathe convert --to hf", output):
            return 1
        tuned = transformers.AutoModelForCausalLM.from_pretrained(hf_out).float().eval()
        check(type(tuned).__name__ == "LlamaForCausalLM", f"exported model loads as {type(tuned).__name__}")
        check(tuned.config.hidden_size == 48 and tuned.config.num_hidden_layers == 2 and tuned.config.vocab_size == 300,
              "exported config keeps the shape")
        loss_after = response_loss(tuned, tokenizer)
        check(loss_after < 0.5 * loss_before,
              f"response-token loss in transformers falls: {loss_before:.3f} -> {loss_after:.3f}")
        check_exported_tokens(binary, run_dir, hf_out, tokenizer, tuned, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
