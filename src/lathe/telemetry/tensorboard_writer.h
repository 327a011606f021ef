// Writes TensorBoard event files without TensorFlow or a protobuf library: Event protos encoded by
// hand (io/protobuf_wire.h) in TFRecord framing (io/tfrecord.h), which `tensorboard --logdir`
// reads like any TensorFlow or PyTorch run.
//
//   TensorBoardWriter writer("runs/x/tensorboard");
//   writer.add_scalar("train/loss", 3.41, step);
//
// The file is `<log_dir>/events.out.tfevents.<unix seconds>.<hostname>.<pid>`; its first event
// carries file_version "brain.Event:2". Every add_* call is flushed to the OS (events come every
// few training steps, so the cost is negligible, and a live TensorBoard or a crash sees all of
// them). Errors (directory or file not writable, disk full) throw lathe::Error naming the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace lathe {

// Seconds since the Unix epoch, with sub-second resolution (Event.wall_time).
double unix_time_now();

class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::string& log_dir);
  ~TensorBoardWriter();  // flushes and closes; never throws
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Summary.Value.simple_value is a float32: `value` is rounded to the nearest float.
  void add_scalar(std::string_view tag, double value, int64_t step, double wall_time = unix_time_now());
  // A text summary (TensorBoard's Text tab renders it as Markdown), e.g. the resolved config.
  void add_text(std::string_view tag, std::string_view text, int64_t step, double wall_time = unix_time_now());
  void flush();
  void close();  // like the destructor, but throws on a failed final write

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// The Event payloads the writer frames, exposed for tests and other writers.
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(std::string_view tag, float value, int64_t step, double wall_time);
std::string encode_text_event(std::string_view tag, std::string_view text, int64_t step, double wall_time);

}  // namespace lathe
