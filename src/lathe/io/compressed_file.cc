#include "lathe/io/compressed_file.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {
namespace {

constexpr size_t kInputPiece = 64 * 1024;

}  // namespace

const char* to_string(Compression compression) {
  switch (compression) {
    case Compression::none:
      return "none";
    case Compression::gzip:
      return "gzip";
    case Compression::zstd:
      return "zstd";
  }
  return "?";
}

Compression compression_from_name(const std::string& path) {
  if (path.ends_with(".gz")) return Compression::gzip;
  if (path.ends_with(".zst") || path.ends_with(".zstd")) return Compression::zstd;
  return Compression::none;
}

std::string name_without_compression(const std::string& path) {
  for (const char* suffix : {".gz", ".zst", ".zstd"})
    if (path.ends_with(suffix)) return path.substr(0, path.size() - std::strlen(suffix));
  return path;
}

struct CompressedFileReader::State {
  std::string path;
  std::FILE* file = nullptr;
  Compression compression = Compression::none;
  std::vector<unsigned char> input = std::vector<unsigned char>(kInputPiece);
  size_t input_begin = 0, input_end = 0;  // unread compressed bytes: input[input_begin, input_end)
  bool file_ended = false;
  bool finished = false;    // the whole stream was decoded
  bool frame_open = false;  // zstd: inside a frame (ZSTD_decompressStream has not returned 0)
  z_stream gzip{};
  bool gzip_ready = false;
  ZSTD_DStream* zstd = nullptr;

  ~State() {
    if (gzip_ready) inflateEnd(&gzip);
    if (zstd) ZSTD_freeDStream(zstd);
    if (file) std::fclose(file);
  }

  size_t available() const { return input_end - input_begin; }

  // Keeps the unread bytes and appends what the file has next; false at the end of the file.
  bool refill() {
    if (file_ended) return false;
    std::memmove(input.data(), input.data() + input_begin, available());
    input_end = available();
    input_begin = 0;
    size_t got = std::fread(input.data() + input_end, 1, input.size() - input_end, file);
    LATHE_CHECK(!std::ferror(file), path, ": read error (", std::strerror(errno), ")");
    if (got == 0) file_ended = true;
    input_end += got;
    return got > 0;
  }

  [[noreturn]] void fail_truncated() const {
    throw_error(path, ": truncated ", to_string(compression), " file (it ends inside the compressed stream)");
  }

  size_t read_gzip(char* buffer, size_t capacity) {
    for (;;) {
      if (available() == 0) refill();
      gzip.next_in = input.data() + input_begin;
      gzip.avail_in = static_cast<uInt>(available());
      gzip.next_out = reinterpret_cast<Bytef*>(buffer);
      gzip.avail_out = static_cast<uInt>(capacity);
      const int status = inflate(&gzip, Z_NO_FLUSH);
      input_begin = input_end - gzip.avail_in;
      const size_t produced = capacity - gzip.avail_out;
      if (status == Z_STREAM_END) {
        if (available() == 0) refill();
        if (available() == 0) {
          finished = true;
          return produced;
        }
        inflateReset(&gzip);  // another member follows (or trailing bytes, which then fail as corrupt)
      } else if (status == Z_BUF_ERROR || (status == Z_OK && produced == 0 && available() == 0)) {
        if (available() == 0 && file_ended) fail_truncated();
      } else if (status != Z_OK) {
        throw_error(path, ": corrupt gzip data (", gzip.msg ? gzip.msg : zError(status), ")");
      }
      if (produced > 0) return produced;
    }
  }

  size_t read_zstd(char* buffer, size_t capacity) {
    for (;;) {
      if (available() == 0) refill();
      if (available() == 0 && !frame_open) {
        finished = true;
        return 0;
      }
      ZSTD_inBuffer in{input.data() + input_begin, available(), 0};
      ZSTD_outBuffer out{buffer, capacity, 0};
      const size_t status = ZSTD_decompressStream(zstd, &out, &in);  // also flushes what it holds
      if (ZSTD_isError(status)) throw_error(path, ": corrupt zstd data (", ZSTD_getErrorName(status), ")");
      input_begin += in.pos;
      frame_open = status != 0;
      if (out.pos > 0) return out.pos;
      if (available() == 0 && file_ended && frame_open) fail_truncated();
    }
  }
};

CompressedFileReader::CompressedFileReader(const std::string& path) : state_(std::make_unique<State>()) {
  State& state = *state_;
  state.path = path;
  state.file = std::fopen(path.c_str(), "rb");
  LATHE_CHECK(state.file, path, ": cannot open for reading (", std::strerror(errno), ")");
  while (state.available() < 4 && state.refill()) {
  }
  const unsigned char* magic = state.input.data();
  if (state.available() >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    state.compression = Compression::gzip;
  } else if (state.available() >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) {
    state.compression = Compression::zstd;
  }
  const Compression named = compression_from_name(path);
  LATHE_CHECK(named == Compression::none || named == state.compression, path, ": the name says ", to_string(named),
              " but the file does not start like ", to_string(named), " data",
              state.available() == 0 ? " (it is empty)" : "");
  if (state.compression == Compression::gzip) {
    LATHE_CHECK(inflateInit2(&state.gzip, 15 + 16) == Z_OK, path, ": cannot start zlib");
    state.gzip_ready = true;
  } else if (state.compression == Compression::zstd) {
    state.zstd = ZSTD_createDStream();
    LATHE_CHECK(state.zstd && !ZSTD_isError(ZSTD_initDStream(state.zstd)), path, ": cannot start zstd");
  }
}

CompressedFileReader::~CompressedFileReader() = default;

Compression CompressedFileReader::compression() const { return state_->compression; }

size_t CompressedFileReader::read(char* buffer, size_t capacity) {
  State& state = *state_;
  if (state.finished || capacity == 0) return 0;
  switch (state.compression) {
    case Compression::gzip:
      return state.read_gzip(buffer, capacity);
    case Compression::zstd:
      return state.read_zstd(buffer, capacity);
    case Compression::none:
      break;
  }
  if (state.available() > 0) {
    const size_t count = std::min(capacity, state.available());
    std::memcpy(buffer, state.input.data() + state.input_begin, count);
    state.input_begin += count;
    return count;
  }
  const size_t got = std::fread(buffer, 1, capacity, state.file);
  LATHE_CHECK(!std::ferror(state.file), state.path, ": read error (", std::strerror(errno), ")");
  if (got == 0) state.finished = true;
  return got;
}

std::string read_decoded_file(const std::string& path) {
  CompressedFileReader reader(path);
  std::string text;
  std::vector<char> piece(kInputPiece);
  while (size_t got = reader.read(piece.data(), piece.size())) text.append(piece.data(), got);
  return text;
}

void for_each_decoded_line(const std::string& path,
                           const std::function<void(std::string_view line, int64_t number)>& line) {
  CompressedFileReader reader(path);
  std::vector<char> piece(kInputPiece);
  std::string current;
  int64_t number = 0;
  auto emit = [&] {
    std::string_view view(current);
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    line(view, ++number);
    current.clear();
  };
  while (size_t got = reader.read(piece.data(), piece.size())) {
    std::string_view chunk(piece.data(), got);
    for (size_t newline; (newline = chunk.find('\n')) != std::string_view::npos; chunk.remove_prefix(newline + 1)) {
      current.append(chunk.substr(0, newline));
      emit();
    }
    current.append(chunk);
  }
  if (!current.empty()) emit();
}

}  // namespace lathe
