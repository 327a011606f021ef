#!/usr/bin/env python3
"""The PyTorch peers of the CUDA device check (scripts/device_check.sh run; issue 18).

The GPU machine's image has PyTorch, so the peers the issue names are measured there beside
lathe's cuda_bench, on the same GPU in the same check:

  sdpa     torch.nn.functional.scaled_dot_product_attention in bf16, batch 1, 16 heads of 128,
           T = 4096 (cuda_bench's attention shape), not causal, forward and forward+backward, once per
           SDPA backend PyTorch offers there (cuDNN, FlashAttention-2, memory-efficient).
  gemm     torch.matmul in bf16 at 4096^3 and 8192^3 (cuBLAS through PyTorch): the measured dense bf16
           ceiling of this GPU, which the summary uses besides the datasheet's 989 TFLOP/s.

Each time is the median of CUDA-event-timed rounds after a warm-up, on random data. With
--lathe cuda_bench.json the script also prints lathe's attention against the best SDPA backend.

    python3 scripts/device_peers.py [--json FILE] [--lathe cuda_bench.json]
"""
import argparse
import json
import os
import statistics
import sys


def time_cuda(torch, body, reps, rounds=5):
    body()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            body()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / reps)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--lathe", help="cuda_bench's --json output, to print lathe / peer ratios")
    options = parser.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:
        print(f"device_peers: PyTorch is not importable here ({error}); no peers measured")
        return 0
    if not torch.cuda.is_available():
        print("device_peers: PyTorch sees no GPU; no peers measured")
        return 0
    print(f"device_peers: torch {torch.__version__} on {torch.cuda.get_device_name()}")
    rows = []
    generator = torch.Generator(device="cuda").manual_seed(7)

    def rand(*shape):
        return torch.rand(*shape, device="cuda", dtype=torch.bfloat16, generator=generator) * 2 - 1

    for size in (4096, 8192):
        a, b = rand(size, size), rand(size, size)
        seconds = time_cuda(torch, lambda: torch.matmul(a, b), reps=20 if size == 4096 else 5)
        rows.append({"name": f"torch gemm bf16 {size}^3", "seconds": seconds, "tflops": 2 * size**3 / seconds / 1e12})
        print(f"{rows[-1]['name']:<40} {rows[-1]['tflops']:8.1f} TFLOP/s")

    batch, heads, seq, dim = 1, 16, 4096, 128
    q, k, v = (rand(batch, heads, seq, dim).requires_grad_() for _ in range(3))
    grad = rand(batch, heads, seq, dim)
    forward_flops = 4.0 * batch * heads * seq * seq * dim
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    for name, backend in backends.items():
        try:
            with sdpa_kernel(backend):
                sdpa = torch.nn.functional.scaled_dot_product_attention
                forward = time_cuda(torch, lambda: sdpa(q, k, v), reps=5)

                def forward_backward():
                    out = sdpa(q, k, v)
                    out.backward(grad)

                both = time_cuda(torch, forward_backward, reps=3)
        except RuntimeError as error:
            print(f"sdpa {name}: not available here ({str(error).splitlines()[0]})")
            continue
        backward = max(both - forward, 1e-9)
        for part, seconds, flops in (("fwd", forward, forward_flops), ("bwd", backward, 2.5 * forward_flops)):
            rows.append({"name": f"sdpa {name} {part} bf16 T{seq} d{dim}", "seconds": seconds,
                         "tflops": flops / seconds / 1e12})
            print(f"{rows[-1]['name']:<40} {rows[-1]['tflops']:8.1f} TFLOP/s")

    if options.lathe and not os.path.exists(options.lathe):
        print(f"device_peers: no {options.lathe} (cuda_bench did not finish): no lathe / peer ratios")
    elif options.lathe:
        with open(options.lathe) as file:
            lathe_rows = {row["name"]: row for row in json.load(file)["rows"]}
        for part in ("fwd", "bwd"):
            # Each tensor-core kernel's row ("attention fwd bf16 ...", "attention fwd (wgmma) bf16 ...").
            mine = [row for name, row in lathe_rows.items() if name.startswith(f"attention {part} ")
                    and name.endswith(f"bf16 T{seq} d{dim}") and "CUDA cores" not in name]
            peers = [row for row in rows if row["name"].startswith("sdpa") and f" {part} " in row["name"]]
            if peers:
                best = max(peers, key=lambda row: row["tflops"])
                for lathe_row in mine:
                    print(f"lathe {lathe_row['name']}: {lathe_row['tflops']:.1f} TFLOP/s = "
                          f"{lathe_row['tflops'] / best['tflops']:.3f}x {best['name']} (target >= 0.8x cuDNN SDPA)")
    if options.json:
        with open(options.json, "w") as file:
            json.dump({"rows": rows}, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
