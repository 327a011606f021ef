#include "lathe/telemetry/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "lathe/core/error.h"
#include "lathe/telemetry/protobuf_wire.h"
#include "lathe/telemetry/tfrecord.h"

namespace lathe {
namespace {

// Field numbers from tensorboard/compat/proto/{event,summary,tensor,tensor_shape}.proto.
namespace event_field {
constexpr int wall_time = 1, step = 2, file_version = 3, summary = 5;
}
constexpr int kSummaryValue = 1;
namespace value_field {
constexpr int tag = 1, simple_value = 2, tensor = 8, metadata = 9;
}
constexpr int kMetadataPluginData = 1, kPluginName = 1;
namespace tensor_field {
constexpr int dtype = 1, shape = 2, string_val = 8;
}
constexpr uint64_t kDtypeString = 7;  // tensorflow.DataType.DT_STRING

std::string encode_event(double wall_time, int64_t step, const ProtoWriter& summary_value) {
  ProtoWriter summary;
  summary.add_message(kSummaryValue, summary_value);
  ProtoWriter event;
  event.add_double(event_field::wall_time, wall_time);
  event.add_varint(event_field::step, static_cast<uint64_t>(step));
  event.add_message(event_field::summary, summary);
  return event.bytes();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string encode_file_version_event(double wall_time) {
  ProtoWriter event;
  event.add_double(event_field::wall_time, wall_time);
  event.add_bytes(event_field::file_version, "brain.Event:2");
  return event.bytes();
}

std::string encode_scalar_event(std::string_view tag, float value, int64_t step, double wall_time) {
  ProtoWriter summary_value;
  summary_value.add_bytes(value_field::tag, tag);
  summary_value.add_float(value_field::simple_value, value);
  return encode_event(wall_time, step, summary_value);
}

std::string encode_text_event(std::string_view tag, std::string_view text, int64_t step, double wall_time) {
  ProtoWriter plugin_data;
  plugin_data.add_bytes(kPluginName, "text");
  ProtoWriter metadata;
  metadata.add_message(kMetadataPluginData, plugin_data);
  ProtoWriter tensor;  // a scalar (empty shape) string tensor
  tensor.add_varint(tensor_field::dtype, kDtypeString);
  tensor.add_message(tensor_field::shape, ProtoWriter());
  tensor.add_bytes(tensor_field::string_val, text);
  ProtoWriter summary_value;
  summary_value.add_bytes(value_field::tag, tag);
  summary_value.add_message(value_field::metadata, metadata);
  summary_value.add_message(value_field::tensor, tensor);
  return encode_event(wall_time, step, summary_value);
}

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir) {
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  LATHE_CHECK(!error, "cannot create TensorBoard log directory ", log_dir, ": ", error.message());
  double now = unix_time_now();
  std::string base = str_cat((std::filesystem::path(log_dir) / "events.out.tfevents.").string(),
                             static_cast<int64_t>(now), ".", host_name(), ".", getpid());
  // Two writers in one process and second (tests, eval + train) must not share a file.
  for (int attempt = 0; attempt < 1000 && file_ == nullptr; ++attempt) {
    path_ = attempt == 0 ? base : str_cat(base, ".", attempt);
    file_ = std::fopen(path_.c_str(), "wbx");
    if (file_ == nullptr && errno != EEXIST) break;
  }
  LATHE_CHECK(file_ != nullptr, "cannot create TensorBoard event file ", path_, ": ", std::strerror(errno));
  write_record(encode_file_version_event(now));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& event) {
  LATHE_CHECK(file_ != nullptr, "TensorBoard event file ", path_, " is already closed");
  std::string record = frame_tfrecord(event);
  bool written = std::fwrite(record.data(), 1, record.size(), file_) == record.size();
  LATHE_CHECK(written && std::fflush(file_) == 0, "cannot write TensorBoard event file ", path_, ": ",
              std::strerror(errno));
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step, double wall_time) {
  write_record(encode_scalar_event(tag, static_cast<float>(value), step, wall_time));
}

void TensorBoardWriter::add_text(std::string_view tag, std::string_view text, int64_t step, double wall_time) {
  write_record(encode_text_event(tag, text, step, wall_time));
}

void TensorBoardWriter::flush() {
  LATHE_CHECK(file_ == nullptr || std::fflush(file_) == 0, "cannot write TensorBoard event file ", path_, ": ",
              std::strerror(errno));
}

void TensorBoardWriter::close() {
  if (file_ == nullptr) return;
  std::FILE* file = file_;
  file_ = nullptr;
  LATHE_CHECK(std::fclose(file) == 0, "cannot close TensorBoard event file ", path_, ": ", std::strerror(errno));
}

}  // namespace lathe
