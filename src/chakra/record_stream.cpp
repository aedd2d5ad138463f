#include "chakra/record_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace orrery::chakra {

namespace {

constexpr size_t kReadBuffer = 1 << 18;
// No real Chakra node comes near this; a larger length means the bytes are not a trace.
constexpr uint64_t kMaxRecordBytes = 1ull << 30;

gzFile as_gz(void* handle) { return static_cast<gzFile>(handle); }

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// ---- RecordReader ----------------------------------------------------------------------------

Expected<RecordReader> RecordReader::open(const std::string& path) {
  // One descriptor serves the size, the gzip magic and zlib: thousands of rank files are opened
  // in one run, and each system call counts.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Error::make(ErrorKind::kIo, "{}: cannot open: {}", path, std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    const int error = S_ISDIR(info.st_mode) ? EISDIR : errno;
    ::close(fd);
    return Error::make(ErrorKind::kIo, "{}: cannot open: {}", path, std::strerror(error));
  }
  unsigned char magic[2] = {0, 0};
  const ssize_t got = ::pread(fd, magic, 2, 0);

  RecordReader reader;
  reader.path_ = path;
  reader.compressed_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  reader.file_bytes_ = S_ISREG(info.st_mode) ? static_cast<uint64_t>(info.st_size) : 0;
  if (!reader.compressed_) {
    // A plain file is read straight into the buffer: zlib's transparent mode would copy every
    // byte once more through a buffer of its own (rank files of a large set are gigabytes).
    // 64 KiB at most: below malloc's mmap threshold, so the buffers of successive files reuse
    // the same memory instead of faulting in fresh pages for each (a few reads more per file).
    constexpr uint64_t kPlainBuffer = 64 << 10;
    reader.fd_ = fd;
    reader.buffer_.resize(
        reader.file_bytes_ == 0
            ? kPlainBuffer
            : static_cast<size_t>(std::clamp<uint64_t>(reader.file_bytes_ + 1, 4096, kPlainBuffer)));
    return reader;
  }
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    ::close(fd);
    return Error::make(ErrorKind::kIo, "{}: cannot open: out of memory", path);
  }
  gzbuffer(file, static_cast<unsigned>(kReadBuffer));
  reader.file_ = file;
  reader.buffer_.resize(kReadBuffer);
  return reader;
}

RecordReader::RecordReader(RecordReader&& other) noexcept { *this = std::move(other); }

RecordReader& RecordReader::operator=(RecordReader&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) gzclose(as_gz(file_));
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
    begin_ = other.begin_;
    end_ = other.end_;
    consumed_ = other.consumed_;
    record_index_ = other.record_index_;
    record_offset_ = other.record_offset_;
    compressed_ = other.compressed_;
    file_bytes_ = other.file_bytes_;
    io_error_ = std::move(other.io_error_);
  }
  return *this;
}

RecordReader::~RecordReader() {
  if (file_ != nullptr) gzclose(as_gz(file_));
  if (fd_ >= 0) ::close(fd_);
}

bool RecordReader::fill() {
  if (begin_ < end_) return true;
  consumed_ += end_;
  begin_ = 0;
  end_ = 0;
  if (fd_ >= 0) {
    ssize_t got = 0;
    do {
      got = ::read(fd_, buffer_.data(), buffer_.size());
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
      io_error_ = std::strerror(errno);
      return false;
    }
    end_ = static_cast<size_t>(got);
    return end_ > 0;
  }
  const int got = gzread(as_gz(file_), buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (got < 0) {
    int code = 0;
    const char* message = gzerror(as_gz(file_), &code);
    io_error_ = message != nullptr ? message : "read error";
    return false;
  }
  end_ = static_cast<size_t>(got);
  if (end_ == 0) {
    // zlib reports a cut gzip stream as end of file plus an error code; a plain file has none.
    int code = Z_OK;
    const char* message = gzerror(as_gz(file_), &code);
    if (code != Z_OK) {
      io_error_ = fmt::format("{} (the gzip stream is cut short or corrupt)",
                              message != nullptr ? message : "decompression error");
    }
  }
  return end_ > 0;
}

Expected<bool> RecordReader::next(std::string& record) {
  record.clear();
  return append_next(record);
}

Expected<bool> RecordReader::append_next(std::string& out) {
  // The position of buffer_[begin_] in the stream is consumed_ + begin_ (consumed_ counts whole
  // buffers already used up).
  auto position = [this] { return consumed_ + begin_; };
  if (!fill()) {
    if (!io_error_.empty()) {
      return Error::make(ErrorKind::kIo, "{}: read error after byte {}: {}", path_, position(),
                         io_error_);
    }
    return false;
  }
  record_offset_ = position();
  const uint64_t index = record_index_;

  // The length prefix: a varint of at most 5 bytes (32 bits).
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (!fill()) {
      return Error::make(ErrorKind::kParse,
                         "{}: record {} at byte {} is truncated: the file ends inside its length",
                         path_, index, record_offset_);
    }
    const auto byte = static_cast<unsigned char>(buffer_[begin_++]);
    length |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
    if (shift >= 28) {
      return Error::make(ErrorKind::kParse,
                         "{}: record {} at byte {} has a malformed length prefix (not a varint32); "
                         "this is not a Chakra trace",
                         path_, index, record_offset_);
    }
  }
  if (length > kMaxRecordBytes) {
    return Error::make(
        ErrorKind::kParse,
        "{}: record {} at byte {} claims {} bytes, more than any Chakra record; this "
        "is not a Chakra trace",
        path_, index, record_offset_, length);
  }

  // The length bounds nothing until the bytes are there: the record grows with what is read (a
  // 16-byte file claiming a 1 GiB record costs no more than its 16 bytes).
  const size_t start = out.size();
  auto got = [&] { return out.size() - start; };
  while (got() < length) {
    if (!fill()) {
      if (!io_error_.empty()) {
        return Error::make(ErrorKind::kIo, "{}: read error in record {} at byte {}: {}", path_,
                           index, record_offset_, io_error_);
      }
      return Error::make(ErrorKind::kParse,
                         "{}: record {} at byte {} is truncated: its length is {} bytes but the "
                         "file ends after {}",
                         path_, index, record_offset_, length, got());
    }
    const size_t take = std::min(end_ - begin_, static_cast<size_t>(length) - got());
    out.append(buffer_.data() + begin_, take);
    begin_ += take;
  }
  ++record_index_;
  return true;
}

// ---- RecordWriter ----------------------------------------------------------------------------

Expected<RecordWriter> RecordWriter::create(const std::string& path) {
  RecordWriter writer;
  writer.path_ = path;
  if (ends_with(path, ".gz")) {
    gzFile file = gzopen(path.c_str(), "wb6");
    if (file == nullptr) {
      return Error::make(ErrorKind::kIo, "{}: cannot create: {}", path, std::strerror(errno));
    }
    gzbuffer(file, kReadBuffer);
    writer.gz_ = file;
  } else {
    writer.file_ = std::fopen(path.c_str(), "wb");
    if (writer.file_ == nullptr) {
      return Error::make(ErrorKind::kIo, "{}: cannot create: {}", path, std::strerror(errno));
    }
  }
  return writer;
}

RecordWriter::RecordWriter(RecordWriter&& other) noexcept { *this = std::move(other); }

RecordWriter& RecordWriter::operator=(RecordWriter&& other) noexcept {
  if (this != &other) {
    (void)close();
    path_ = std::move(other.path_);
    gz_ = std::exchange(other.gz_, nullptr);
    file_ = std::exchange(other.file_, nullptr);
    scratch_ = std::move(other.scratch_);
    bytes_written_ = other.bytes_written_;
  }
  return *this;
}

RecordWriter::~RecordWriter() { (void)close(); }

Status RecordWriter::write_raw(const char* data, size_t size) {
  if (size == 0) return Status::ok();
  bool ok = false;
  if (gz_ != nullptr) {
    ok = gzwrite(as_gz(gz_), data, static_cast<unsigned>(size)) == static_cast<int>(size);
  } else if (file_ != nullptr) {
    ok = std::fwrite(data, 1, size, file_) == size;
  }
  if (!ok) {
    return Error::make(ErrorKind::kIo, "{}: write failed after {} bytes: {}", path_, bytes_written_,
                       std::strerror(errno));
  }
  bytes_written_ += size;
  return Status::ok();
}

Status RecordWriter::write_bytes(const std::string& bytes) {
  if (bytes.size() > kMaxRecordBytes) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: a record of {} bytes is too large", path_,
                       bytes.size());
  }
  char prefix[5];
  size_t used = 0;
  auto length = static_cast<uint32_t>(bytes.size());
  do {
    auto byte = static_cast<unsigned char>(length & 0x7f);
    length >>= 7;
    if (length != 0) byte |= 0x80;
    prefix[used++] = static_cast<char>(byte);
  } while (length != 0);
  if (Status status = write_raw(prefix, used); !status) return status;
  return write_raw(bytes.data(), bytes.size());
}

Status RecordWriter::write(const google::protobuf::MessageLite& message) {
  scratch_.clear();
  if (!message.SerializeToString(&scratch_)) {
    return Error::make(ErrorKind::kInvalidArgument, "{}: cannot serialize a {}", path_,
                       message.GetTypeName());
  }
  return write_bytes(scratch_);
}

Status RecordWriter::close() {
  bool ok = true;
  if (gz_ != nullptr) {
    ok = gzclose(as_gz(gz_)) == Z_OK;
    gz_ = nullptr;
  }
  if (file_ != nullptr) {
    ok = std::fclose(file_) == 0 && ok;
    file_ = nullptr;
  }
  if (!ok) {
    return Error::make(ErrorKind::kIo, "{}: cannot finish writing: {}", path_,
                       std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace orrery::chakra
