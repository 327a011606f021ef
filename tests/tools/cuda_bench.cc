// The GPU benchmark of scripts/device_check.sh: lathe's CUDA ops timed with CUDA events beside a
// peer in the same process, interleaved by round (median of rounds; ratio per round).
//
//   cuda_bench [--quick] [--only gemm|grouped|rows|attention|mla] [--json FILE]
//
//   gemm      lathe's matmul (op dispatch -> cuBLASLt) against cuBLAS's cublasGemmEx (the classic
//             API, its default algorithm) on the same device buffers: bf16 inputs with f32
//             accumulation and output, and f32, at 4096^3 and 8192^3 (--quick: 4096^3 only).
//             Target (issue 18): bf16 >= 0.95x cuBLAS. TFLOP/s and % of the H200's dense bf16
//             datasheet peak (989 TFLOP/s; the f32 path has no tensor cores: 67 TFLOP/s).
//   grouped   lathe's grouped_matmul (the MoE experts' products: a loop of cuBLASLt products, one
//             per expert) in bf16 against one cublasGemmEx of the same total shape (all the rows
//             times one expert's weight: the same FLOPs in one launch). The ratio is what the loop
//             costs beyond the arithmetic; rows split evenly over the experts. Shapes: Mixtral's
//             (8 experts, 4096 tokens x top-2, d 4096, ffn 14336: 1024 rows an expert) and
//             Qwen3-30B-A3B's (128 experts, 256 tokens x top-8, d 2048, ffn 768: 16 rows each).
//   attention lathe's flash attention (forward on CUDA cores and on tensor cores; backward) in
//             bf16, batch 1, 16 heads of 128, T = 4096, not causal, against the batched cuBLAS GEMMs
//             of the same tensor-core FLOPs (forward: S = Q K^T and O = P V, 4 T^2 d per head;
//             backward: five such GEMMs, 10 T^2 d), i.e. the time of the matrix products alone,
//             without the softmax. cuDNN's SDPA is the peer the issue names;
//             scripts/device_peers.py measures it through PyTorch.
//   rms_norm, softmax   16384 x 4096 f32 rows: GB/s (bytes read + written) against a device-to-device
//             cudaMemcpy of the same bytes (the bandwidth peer).
//   mla       mla_decode (DeepSeek's absorbed attention over the latent cache) at DeepSeek-V3's decode
//             step, 128 heads, 4096 cached tokens, kv_rank 512 + rope 64, f32, against the f32
//             cuBLAS GEMM that up-projects the cache to keys and values (4096 x 512 @ 512 x 32768),
//             the work the GPU decode did each step before the kernel existed; run last, as the
//             newest kernel.
//
// Without a usable GPU it prints the reason and exits 0 (nothing to measure), so the device check
// can run it anywhere.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/device/stream.h"
#include "lathe/io/durable_file.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/flash_attention/flash_attention_cuda.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/mla_decode/mla_decode.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe {
namespace {

constexpr double kH200DenseBf16Tflops = 989.0;  // datasheet, dense (no sparsity)

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// GPU seconds of `reps` calls of body after one warm-up.
double time_gpu(const std::function<void()>& body, int reps) {
  body();
  cuda::EventTimer timer;
  timer.start();
  for (int rep = 0; rep < reps; ++rep) body();
  timer.stop();
  return timer.seconds() / reps;
}

Tensor random_device(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor host = Tensor::empty(shape, dtype);
  fill_uniform(host, seed, -1, 1);
  return cuda::to_device(host);
}

void check_cublas(cublasStatus_t status, const char* call) {
  LATHE_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuda_bench: ", call, " failed with status ", static_cast<int>(status));
}

struct Row {
  std::string name;
  double lathe_seconds = 0, peer_seconds = 0, ratio_median = 0, ratio_low = 0, ratio_high = 0;
  double work = 0;  // FLOPs or bytes
  bool flops = true;
};

// peer_work: the peer's FLOPs or bytes where it does other work than lathe's (0: the same).
Row compare(const std::string& name, double work, bool flops, const std::function<void()>& lathe_run,
            const std::function<void()>& peer_run, int rounds, int reps, double peer_work = 0) {
  std::vector<double> lathe_times, peer_times, ratios;
  for (int round = 0; round < rounds; ++round) {
    const double lathe_time = time_gpu(lathe_run, reps), peer_time = time_gpu(peer_run, reps);
    lathe_times.push_back(lathe_time);
    peer_times.push_back(peer_time);
    ratios.push_back(peer_time / lathe_time);
  }
  Row row{name,
          median(lathe_times),
          median(peer_times),
          median(ratios),
          *std::min_element(ratios.begin(), ratios.end()),
          *std::max_element(ratios.begin(), ratios.end()),
          work,
          flops};
  if (flops)
    std::printf(
        "%-42s lathe %8.1f TFLOP/s (%5.1f%% of bf16 peak)  cuBLAS %8.1f TFLOP/s  ratio %.3fx [%.3f-%.3f]\n",
        name.c_str(), work / row.lathe_seconds / 1e12, 100 * work / row.lathe_seconds / 1e12 / kH200DenseBf16Tflops,
        (peer_work > 0 ? peer_work : work) / row.peer_seconds / 1e12, row.ratio_median, row.ratio_low, row.ratio_high);
  else
    std::printf("%-42s lathe %8.1f GB/s  device copy %8.1f GB/s  ratio %.3fx [%.3f-%.3f]\n", name.c_str(),
                work / row.lathe_seconds / 1e9, work / row.peer_seconds / 1e9, row.ratio_median, row.ratio_low,
                row.ratio_high);
  std::fflush(stdout);
  return row;
}

Row gemm_row(cublasHandle_t handle, int64_t size, DType dtype, int rounds, int reps) {
  Tensor a = random_device({size, size}, dtype, 1), b = random_device({size, size}, dtype, 2);
  Tensor c = cuda::device_empty({size, size}, DType::f32), c_peer = cuda::device_empty({size, size}, DType::f32);
  MatmulArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  const cudaDataType type = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1, beta = 0;
  const int n = static_cast<int>(size);
  auto peer = [&] {
    // Row-major c = a b is column-major c^T = b^T a^T: b first.
    check_cublas(
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b.view().data, type, n, a.view().data, type, n,
                     &beta, c_peer.view().data, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  };
  return compare(
      str_cat("gemm ", dtype_name(dtype), " ", size, "^3"), 2.0 * size * size * size, true, [&] { matmul(args); }, peer,
      rounds, reps);
}

// y (rows x n, f32) = each expert's rows of x (rows x k, bf16) times its weight (n x k) transposed.
Row grouped_row(cublasHandle_t handle, const std::string& name, int64_t rows, int64_t experts, int64_t n, int64_t k,
                int rounds, int reps) {
  Tensor x = random_device({rows, k}, DType::bf16, 5), w = random_device({experts, n, k}, DType::bf16, 6);
  Tensor y = cuda::device_empty({rows, n}, DType::f32), y_peer = cuda::device_empty({rows, n}, DType::f32);
  Tensor host_offsets = Tensor::empty({experts + 1}, DType::i64);
  for (int64_t e = 0; e <= experts; ++e) host_offsets.ptr<int64_t>()[e] = rows * e / experts;
  Tensor offsets = cuda::to_device(host_offsets);
  GroupedMatmulArgs args;
  args.x = x;
  args.w = w;
  args.group_offsets = offsets;
  args.y = y;
  const float alpha = 1, beta = 0;
  auto peer = [&] {
    // Row-major y = x w0^T is column-major y^T (n x rows) = w0 (k x n, transposed) x^T (k x rows).
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                              static_cast<int>(k), &alpha, w.view().data, CUDA_R_16BF, static_cast<int>(k),
                              x.view().data, CUDA_R_16BF, static_cast<int>(k), &beta, y_peer.view().data, CUDA_R_32F,
                              static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  return compare(
      name, 2.0 * rows * n * k, true, [&] { grouped_matmul(args); }, peer, rounds, reps);
}

Row rows_row(const std::string& name, const std::function<void(const Tensor&, const Tensor&)>& op, int rounds,
             int reps) {
  const int64_t rows = 16384, cols = 4096;
  Tensor x = random_device({rows, cols}, DType::f32, 3), y = cuda::device_empty({rows, cols}, DType::f32);
  const double bytes = 2.0 * rows * cols * sizeof(float);
  auto copy = [&] {
    cudaMemcpyAsync(y.view().data, x.view().data, rows * cols * sizeof(float), cudaMemcpyDeviceToDevice,
                    static_cast<cudaStream_t>(cuda::stream_handle()));
  };
  return compare(
      name, bytes, false, [&] { op(x, y); }, copy, rounds, reps);
}

// Flash attention forward and backward against the bf16 cuBLAS GEMMs of the same FLOPs.
std::vector<Row> attention_rows(cublasHandle_t handle, int rounds) {
  const int64_t batch = 1, seq = 4096, heads = 16, dim = 128;
  const Shape shape{batch, seq, heads, dim};
  Tensor q = random_device(shape, DType::bf16, 11), k = random_device(shape, DType::bf16, 12);
  Tensor v = random_device(shape, DType::bf16, 13), d_o = random_device(shape, DType::bf16, 14);
  Tensor o = cuda::device_empty(shape, DType::bf16), lse = cuda::device_empty({batch, heads, seq}, DType::f32);
  Tensor dq = cuda::device_empty(shape, DType::bf16), dk = cuda::device_empty(shape, DType::bf16);
  Tensor dv = cuda::device_empty(shape, DType::bf16);
  Tensor scores = cuda::device_empty({heads, seq, seq}, DType::bf16, "cuBLAS peer scores");
  const FlashAttentionArgs forward{q, k, v, o, lse, {}};
  const FlashAttentionBackwardArgs backward{q, k, v, o, lse, d_o, dq, dk, dv, {}};
  const float alpha = 1, beta = 0;
  const int t = static_cast<int>(seq), d = static_cast<int>(dim), ld = static_cast<int>(heads * dim);
  // Row-major S (T x T) per head = K Q^T in cuBLAS's column-major terms; O = P V likewise.
  auto scores_gemm = [&] {
    check_cublas(
        cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, t, t, d, &alpha, k.view().data, CUDA_R_16BF, ld,
                                   dim, q.view().data, CUDA_R_16BF, ld, dim, &beta, scores.view().data, CUDA_R_16BF, t,
                                   seq * seq, static_cast<int>(heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
  };
  auto values_gemm = [&] {
    check_cublas(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, t, t, &alpha, v.view().data,
                                            CUDA_R_16BF, ld, dim, scores.view().data, CUDA_R_16BF, t, seq * seq, &beta,
                                            o.view().data, CUDA_R_16BF, ld, dim, static_cast<int>(heads),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
  };
  const double gemm_flops = 2.0 * seq * seq * dim * heads * batch;
  // The CUDA-core kernels first, then the mma.sync forward and backward, then the wgmma ones (the
  // rows the targets and device_peers.py read): the newest kernels last, so a fault there
  // (a sticky CUDA error ends the process's GPU work) costs no other row.
  const ConfigParams row_kernel = config_to_params(kFlashCudaRowConfig);
  const ConfigParams tensor_core_kernel = config_to_params(kFlashCudaTensorCoreConfig);
  const ConfigParams wgmma_kernel = config_to_params(kFlashCudaWgmmaConfig);
  const Dispatch row_dispatch{"cuda", &row_kernel}, tensor_core_dispatch{"cuda", &tensor_core_kernel};
  const Dispatch wgmma_dispatch{"cuda", &wgmma_kernel};
  std::vector<Row> rows;
  rows.push_back(compare(
      "attention fwd (CUDA cores) bf16 T4096 d128", 2 * gemm_flops, true,
      [&] { flash_attention(forward, row_dispatch); }, [&] { scores_gemm(), values_gemm(); }, rounds, 1));
  flash_attention(forward);  // o and lse for the backward
  auto backward_peer = [&] { scores_gemm(), values_gemm(), scores_gemm(), values_gemm(), values_gemm(); };
  rows.push_back(compare(
      "attention bwd (CUDA cores) bf16 T4096 d128", 5 * gemm_flops, true,
      [&] { flash_attention_backward(backward, row_dispatch); }, backward_peer, rounds, 2));
  rows.push_back(compare(
      "attention fwd bf16 T4096 d128", 2 * gemm_flops, true, [&] { flash_attention(forward, tensor_core_dispatch); },
      [&] { scores_gemm(), values_gemm(); }, rounds, 5));
  rows.push_back(compare(
      "attention bwd bf16 T4096 d128", 5 * gemm_flops, true,
      [&] { flash_attention_backward(backward, tensor_core_dispatch); }, backward_peer, rounds, 5));
  rows.push_back(compare(
      "attention fwd (wgmma) bf16 T4096 d128", 2 * gemm_flops, true, [&] { flash_attention(forward, wgmma_dispatch); },
      [&] { scores_gemm(), values_gemm(); }, rounds, 5));
  rows.push_back(compare(
      "attention bwd (wgmma) bf16 T4096 d128", 5 * gemm_flops, true,
      [&] { flash_attention_backward(backward, wgmma_dispatch); }, backward_peer, rounds, 5));
  return rows;
}

// mla_decode at DeepSeek-V3's decode step against the up-projection GEMM the standard form ran.
Row mla_row(cublasHandle_t handle, int rounds) {
  const int64_t heads = 128, cached = 4096, rank = 512, rope = 64, width = rank + rope, up = 128 * (128 + 128);
  Tensor q = random_device({1, 1, heads, width}, DType::f32, 21),
         cache = random_device({1, cached, width}, DType::f32, 22);
  Tensor o = cuda::device_empty({1, 1, heads, rank}, DType::f32), lse = cuda::device_empty({1, heads, 1}, DType::f32);
  MlaDecodeArgs args{q, cache, o, lse, {}};
  args.options.scale = 0.1f;
  args.options.causal = true;
  Tensor kv_b = random_device({up, rank}, DType::f32, 23), keys = cuda::device_empty({cached, up}, DType::f32);
  const float alpha = 1, beta = 0;
  // Row-major keys (cached x up) = latent (cached x rank, row stride width) @ kv_b^T.
  auto up_projection = [&] {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(up), static_cast<int>(cached),
                              static_cast<int>(rank), &alpha, kv_b.view().data, CUDA_R_32F, static_cast<int>(rank),
                              cache.view().data, CUDA_R_32F, static_cast<int>(width), &beta, keys.view().data,
                              CUDA_R_32F, static_cast<int>(up), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  return compare(
      "mla_decode V3 128 heads 4096 cached f32", mla_decode_cost(args).flops, true, [&] { mla_decode(args); },
      up_projection, rounds, 5, 2.0 * cached * up * rank);
}

int run(int argc, char** argv) {
  bool quick = false;
  std::string json_path, only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json_path = argv[++i];
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else
      throw_error("usage: cuda_bench [--quick] [--only gemm|grouped|rows|attention|mla] [--json FILE]");
  }
  LATHE_CHECK(
      only.empty() || only == "gemm" || only == "grouped" || only == "rows" || only == "attention" || only == "mla",
      "--only takes gemm, grouped, rows, attention or mla, not '", only, "'");
  auto wanted = [&](const char* group) { return only.empty() || only == group; };
  std::printf("cuda: %s\n", cuda::status_line().c_str());
  if (!cuda::available()) return 0;
  const int rounds = quick ? 3 : 5;
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetStream(handle, static_cast<cudaStream_t>(cuda::stream_handle())), "cublasSetStream");
  std::vector<Row> rows;
  std::vector<int64_t> sizes = quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
  if (wanted("gemm")) {
    for (int64_t size : sizes) rows.push_back(gemm_row(handle, size, DType::bf16, rounds, size >= 8192 ? 5 : 20));
    rows.push_back(gemm_row(handle, 4096, DType::f32, rounds, 5));
  }
  if (wanted("grouped")) {
    rows.push_back(grouped_row(handle, "grouped bf16 Mixtral gate 8 x 1024 rows", 8192, 8, 14336, 4096, rounds, 5));
    rows.push_back(grouped_row(handle, "grouped bf16 Qwen3-30B gate 128 x 16 rows", 2048, 128, 768, 2048, rounds, 5));
  }
  if (wanted("rows")) {
    Tensor weight = Tensor::empty({4096}, DType::f32);
    fill_uniform(weight, 4, 0.5, 1.5);
    Tensor device_weight = cuda::to_device(weight);
    rows.push_back(rows_row(
        "rms_norm 16384x4096 f32",
        [&](const Tensor& x, const Tensor& y) {
          rms_norm({x.view(), device_weight.view(), y.view(), TensorView{}, 1e-6f});
        },
        rounds, 20));
    rows.push_back(rows_row(
        "softmax 16384x4096 f32",
        [&](const Tensor& x, const Tensor& y) {
          softmax({x.view(), y.view(), 1.0f});
        },
        rounds, 20));
  }
  if (wanted("attention"))
    for (Row& row : attention_rows(handle, rounds)) rows.push_back(row);
  if (wanted("mla")) rows.push_back(mla_row(handle, rounds));
  cublasDestroy(handle);
  const cuda::DeviceMemoryStats memory = cuda::memory_stats();
  std::printf("device memory: peak %s in lathe tensors, %lld allocations (%lld from the cache)\n",
              cuda::format_bytes(memory.peak).c_str(), static_cast<long long>(memory.allocations),
              static_cast<long long>(memory.cache_hits));
  if (!json_path.empty()) {
    Json json = Json::object();
    json.set("device", cuda::status_line());
    Json list = Json::array();
    for (const Row& row : rows) {
      Json item = Json::object();
      item.set("name", row.name);
      item.set("lathe_seconds", row.lathe_seconds);
      item.set("peer_seconds", row.peer_seconds);
      item.set("ratio_median", row.ratio_median);
      item.set("ratio_low", row.ratio_low);
      item.set("ratio_high", row.ratio_high);
      item.set(row.flops ? "tflops" : "gbytes_per_s", row.work / row.lathe_seconds / (row.flops ? 1e12 : 1e9));
      list.push(item);
    }
    json.set("rows", list);
    write_file_atomically(json_path, json.dump(2) + "\n");
  }
  return 0;
}

}  // namespace
}  // namespace lathe

int main(int argc, char** argv) {
  try {
    return lathe::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cuda_bench: %s\n", error.what());
    return 1;
  }
}
