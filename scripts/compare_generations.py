#!/usr/bin/env python3
"""Compares the greedy tokens of two `lathe generate --save-ids` runs of one checkpoint (the device
check: --device cpu against --device cuda). Both decode the same prompt from the same weights, so
the tokens agree until two candidates' logits come within the devices' rounding differences of
each other (a near-tie), after which the sequences may part for good.

    python3 scripts/compare_generations.py CPU_IDS.json GPU_IDS.json [--min-agree 8]

Prints both sequences and where they part; exits 1 when the prompts differ or fewer than
--min-agree leading tokens agree (a wrong kernel or a stale cache row parts them at once), 2 when
a file is missing or is not `lathe generate --save-ids` output.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            ids = json.load(f)
        return ids["prompt_ids"], ids["generated_ids"]
    except (OSError, ValueError, KeyError) as error:
        print(f"compare_generations: {path}: {error}", file=sys.stderr)
        sys.exit(2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cpu_ids")
    parser.add_argument("gpu_ids")
    parser.add_argument("--min-agree", type=int, default=8,
                        help="leading generated tokens that must agree (fewer generated: all of them)")
    args = parser.parse_args()
    cpu_prompt, cpu = load(args.cpu_ids)
    gpu_prompt, gpu = load(args.gpu_ids)
    if cpu_prompt != gpu_prompt:
        print(f"prompts differ: cpu {cpu_prompt}, gpu {gpu_prompt}")
        return 1
    agree = 0
    while agree < min(len(cpu), len(gpu)) and cpu[agree] == gpu[agree]:
        agree += 1
    print(f"cpu generated {cpu}")
    print(f"gpu generated {gpu}")
    needed = min(args.min_agree, len(cpu), len(gpu))
    same_length = len(cpu) == len(gpu)
    if agree == len(cpu) and same_length:
        print(f"generation: all {agree} tokens agree")
        return 0
    verdict = "agree" if agree >= needed else "DIFFER"
    print(f"generation: {agree} leading tokens {verdict} (at least {needed} wanted); then cpu "
          f"{cpu[agree:agree + 3]} against gpu {gpu[agree:agree + 3]}")
    return 0 if agree >= needed else 1


if __name__ == "__main__":
    sys.exit(main())
