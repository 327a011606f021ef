// Test tool for tests/python/hf_convert_check.py: loads a Hugging Face model directory with
// load_hf_model and writes the f32 logits (seq, vocab) of one token sequence, raw little-endian.
// Usage: hf_logits_dump HF_DIR OUT_FILE ID...
#include <cstdio>
#include <cstdlib>

#include "lathe/models/hf/hf_checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: hf_logits_dump HF_DIR OUT_FILE ID...\n");
    return 2;
  }
  try {
    const lathe::TransformerModel model = lathe::load_hf_model(argv[1]);
    const int count = argc - 3;
    lathe::Tensor ids = lathe::Tensor::empty({1, count}, lathe::DType::i32);
    for (int i = 0; i < count; ++i) ids.ptr<int32_t>()[i] = std::atoi(argv[3 + i]);
    const lathe::Tensor logits = model.logits(ids);
    std::FILE* out = std::fopen(argv[2], "wb");
    if (!out || std::fwrite(logits.ptr<float>(), sizeof(float), logits.numel(), out) != size_t(logits.numel())) {
      std::fprintf(stderr, "hf_logits_dump: cannot write %s\n", argv[2]);
      return 1;
    }
    std::fclose(out);
  } catch (const lathe::Error& error) {
    std::fprintf(stderr, "hf_logits_dump: %s\n", error.what());
    return 2;
  }
  return 0;
}
