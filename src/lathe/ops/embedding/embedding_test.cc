// Embedding: finite-difference gradient of the reference, lookup and scatter-add semantics of
// every implementation, thread-count independence of the backward, and argument validation. The
// generic contract tests (tests/unit) compare every implementation with the reference.
#include "lathe/ops/embedding/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "finite_difference.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::vector<std::string> usable_impls() {
  std::vector<std::string> impls;
  for (const char* impl : {"avx512", "avx2", "scalar"})
    if (isa_available(parse_isa(impl))) impls.push_back(impl);
  return impls;
}

Tensor make_ids(std::initializer_list<int64_t> values, DType dtype) {
  Tensor ids = Tensor::empty({static_cast<int64_t>(values.size())}, dtype);
  int64_t t = 0;
  for (int64_t value : values) write_element(ids, t++, static_cast<double>(value));
  return ids;
}

TEST(EmbeddingTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t vocab = 4, dim = 5;
  const float scale = 1.5f;
  Tensor table = Tensor::empty({vocab, dim}, DType::f64);
  fill_uniform(table, seed, -1, 1, 1);
  Tensor ids = make_ids({3, 1, 3, 0, 3}, DType::i64);  // row 2 unused, row 3 repeated
  const int64_t tokens = ids.numel();
  Tensor probe = Tensor::empty({tokens, dim}, DType::f64);
  fill_uniform(probe, seed, -1, 1, 2);
  auto loss = [&] {
    Tensor out = Tensor::empty({tokens, dim}, DType::f64);
    embedding_reference<double>({table, ids, out, scale});
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += out.ptr<double>()[i] * probe.ptr<double>()[i];
    return sum;
  };
  Tensor dtable = Tensor::empty({vocab, dim}, DType::f64);
  embedding_backward_reference<double>({ids, probe, dtable, scale});
  expect_gradient_matches_finite_differences(table, dtable, loss, "dtable", seed, 1e-6, 1e-7);
}

TEST(EmbeddingTest, LookupReturnsTheTableRowsOnEveryImpl) {
  const uint64_t seed = test_seed();
  for (const std::string& impl : usable_impls()) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (DType ids_dtype : {DType::i32, DType::i64}) {
        const int64_t vocab = 11, dim = 37;
        Tensor table = Tensor::empty({vocab, dim}, dtype);
        fill_uniform(table, seed, -3, 3);
        Tensor ids = make_ids({10, 0, 4, 4, 7, 0, 10}, ids_dtype);
        Tensor out = Tensor::empty({ids.numel(), dim}, dtype);
        poison(out);
        Dispatch dispatch;
        dispatch.impl = impl;
        embedding({table, ids, out, 1.0f}, dispatch);
        const int64_t element = dtype_size(dtype);
        for (int64_t t = 0; t < ids.numel(); ++t) {
          int64_t id = static_cast<int64_t>(read_element(ids, t));
          EXPECT_EQ(std::memcmp(static_cast<char*>(out.view().data) + t * dim * element,
                                static_cast<char*>(table.view().data) + id * dim * element, dim * element),
                    0)
              << impl << " " << dtype_name(dtype) << " token " << t << " seed=" << seed;
        }
        // With a scale every element is the table's times the scale (exact for a power of two).
        embedding({table, ids, out, 8.0f}, dispatch);
        for (int64_t t = 0; t < ids.numel(); ++t)
          for (int64_t d = 0; d < dim; ++d)
            EXPECT_EQ(read_element(out, t * dim + d),
                      8.0 * read_element(table, static_cast<int64_t>(read_element(ids, t)) * dim + d))
                << impl;
      }
    }
  }
}

TEST(EmbeddingTest, BackwardSumsTheGradientsOfRepeatedIdsOnEveryImpl) {
  const uint64_t seed = test_seed();
  const int64_t vocab = 6, dim = 35;
  Tensor ids = make_ids({2, 0, 2, 5, 2, 0}, DType::i32);
  const int64_t tokens = ids.numel();
  Tensor d_out = Tensor::empty({tokens, dim}, DType::f32);
  fill_uniform(d_out, seed, -1, 1);
  for (const std::string& impl : usable_impls()) {
    Tensor dtable = Tensor::empty({vocab, dim}, DType::f32);
    poison(dtable);
    Dispatch dispatch;
    dispatch.impl = impl;
    embedding_backward({ids, d_out, dtable, 0.5f}, dispatch);
    for (int64_t v = 0; v < vocab; ++v)
      for (int64_t d = 0; d < dim; ++d) {
        double expected = 0;
        for (int64_t t = 0; t < tokens; ++t)
          if (read_element(ids, t) == v) expected += 0.5 * d_out.ptr<float>()[t * dim + d];
        EXPECT_NEAR(dtable.ptr<float>()[v * dim + d], expected, 1e-6)
            << impl << " v=" << v << " d=" << d << " seed=" << seed;
      }
  }
}

TEST(EmbeddingTest, BackwardIsBitwiseIdenticalForEveryThreadCountAndConfig) {
  const uint64_t seed = test_seed();
  const int64_t vocab = 50, dim = 300, tokens = 500;
  Tensor ids = Tensor::empty({tokens}, DType::i32), d_out = Tensor::empty({tokens, dim}, DType::f32);
  fill_uniform(ids, seed, 0, vocab, 1);
  fill_uniform(d_out, seed, -1, 1, 2);
  const int original_threads = num_threads();
  Tensor first = Tensor::empty({vocab, dim}, DType::f32);
  set_num_threads(1);
  embedding_backward({ids, d_out, first, 1.25f});
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int64_t columns : {16, 64, 4096}) {
      Tensor dtable = Tensor::empty({vocab, dim}, DType::f32);
      poison(dtable);
      ConfigParams config;
      config.set("columns_per_task", columns);
      Dispatch dispatch;
      dispatch.config = &config;
      embedding_backward({ids, d_out, dtable, 1.25f}, dispatch);
      EXPECT_EQ(std::memcmp(first.view().data, dtable.view().data, sizeof(float) * vocab * dim), 0)
          << "threads=" << threads << " columns_per_task=" << columns << " seed=" << seed;
    }
  }
  set_num_threads(original_threads);
}

TEST(EmbeddingTest, RejectsOutOfRangeIdsAndMisshapedArguments) {
  Tensor table = Tensor::zeros({8, 4}, DType::f32), out = Tensor::zeros({3, 4}, DType::f32);
  Tensor good = make_ids({1, 7, 0}, DType::i32);
  EXPECT_NO_THROW(embedding({table, good, out, 1.0f}));
  for (DType ids_dtype : {DType::i32, DType::i64}) {
    Tensor too_large = make_ids({1, 0, 8}, ids_dtype), negative = make_ids({-1, 0, 2}, ids_dtype);
    try {
      embedding({table, too_large, out, 1.0f});
      ADD_FAILURE() << "id 8 of vocab 8 accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ids[2] = 8"), std::string::npos) << error.what();
    }
    EXPECT_THROW(embedding({table, negative, out, 1.0f}), Error);
    EXPECT_THROW(embedding_backward({too_large, out, table, 1.0f}), Error);
    EXPECT_THROW(embedding_backward({negative, out, table, 1.0f}), Error);
  }
  Tensor wrong_out = Tensor::zeros({3, 5}, DType::f32), bf16_out = Tensor::zeros({3, 4}, DType::bf16);
  Tensor float_ids = Tensor::zeros({3}, DType::f32), bf16_dtable = Tensor::zeros({8, 4}, DType::bf16);
  EXPECT_THROW(embedding({table, good, wrong_out, 1.0f}), Error);
  EXPECT_THROW(embedding({table, good, bf16_out, 1.0f}), Error);
  EXPECT_THROW(embedding({table, float_ids, out, 1.0f}), Error);
  EXPECT_THROW(embedding_backward({good, wrong_out, table, 1.0f}), Error);
  EXPECT_THROW(embedding_backward({good, out, bf16_dtable, 1.0f}), Error);
}

}  // namespace
}  // namespace lathe
