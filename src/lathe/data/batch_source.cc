#include "lathe/data/batch_source.h"

#include "lathe/core/error.h"
#include "lathe/data/data_loader.h"
#include "lathe/data/dataset.h"
#include "lathe/data/sft_data_loader.h"
#include "lathe/text/tokenizer.h"

namespace lathe {
namespace {

class TextBatchSource final : public BatchSource {
 public:
  explicit TextBatchSource(DataLoader loader) : loader_(std::move(loader)) {}
  void next_batch(const TensorView& inputs, const TensorView& targets) override { loader_.next_batch(inputs, targets); }
  void next_batch_slice(const TensorView& inputs, const TensorView& targets, int64_t global_batch,
                        int64_t first_row) override {
    loader_.next_batch_slice(inputs, targets, global_batch, first_row);
  }
  int64_t samples_consumed() const override {
    return loader_.epoch() * loader_.samples_per_epoch() + loader_.index_in_epoch();
  }
  Json state() const override { return loader_.state(); }
  void restore(const Json& state) override { loader_.restore(state); }
  bool has_validation() const override { return loader_.has_validation(); }
  int64_t validation_batch_count(int64_t batch) const override { return loader_.validation_batch_count(batch); }
  void validation_batch(int64_t k, const TensorView& inputs, const TensorView& targets) const override {
    loader_.validation_batch(k, inputs, targets);
  }

 private:
  DataLoader loader_;
};

TrainingData open_sft_data(const DataOptions& data, const DataRequirements& requirements, std::FILE* log) {
  LATHE_CHECK(!data.tokenizer.empty(), "data.format=sft needs data.tokenizer (the tokenizer.json of the model being ",
              "fine-tuned)");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(data.tokenizer);  // lathe's own or any HF file
  LATHE_CHECK(tokenizer->vocab_size() <= requirements.vocab_size, "data.tokenizer ", data.tokenizer, " has ",
              tokenizer->vocab_size(), " tokens, more than model.vocab_size=", requirements.vocab_size);
  SftDatasetOptions options;
  options.path = data.path;
  options.chat_template = data.chat_template;
  options.family_chat_template = requirements.family_chat_template;
  options.seq_len = requirements.seq_len;
  options.val_fraction = data.val_fraction;
  options.seed = requirements.seed;
  SftDataset dataset = prepare_sft_dataset(options, text_encoder_for(*tokenizer, /*split_special_tokens=*/false), log);
  TrainingData result;
  result.batches = std::make_unique<SftDataLoader>(std::move(dataset.train), std::move(dataset.validation),
                                                   requirements.seq_len, requirements.seed);
  result.tokenizer_path = data.tokenizer;
  result.tokenizer_vocab_size = tokenizer->vocab_size();
  return result;
}

}  // namespace

TrainingData open_training_data(const DataOptions& data, const DataRequirements& requirements,
                                const std::string& cache_dir, std::FILE* log) {
  if (data.format == "sft") return open_sft_data(data, requirements, log);
  PreparedDataset dataset = prepare_dataset(data, requirements.vocab_size, requirements.seed, cache_dir, log);
  TrainingData result;
  result.batches = std::make_unique<TextBatchSource>(
      DataLoader(dataset.train_shard_path, dataset.val_shard_path, requirements.seq_len, requirements.seed));
  result.tokenizer_path = dataset.tokenizer_path;
  result.tokenizer_vocab_size = dataset.vocab_size;
  return result;
}

}  // namespace lathe
