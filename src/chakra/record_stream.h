// chakra/record_stream.h: length-delimited protobuf records in a file, gzip or plain.
//
// A Chakra .et file is a sequence of records, each a varint32 byte length followed by that many
// bytes of one message (protobuf's standard delimited framing). RecordReader streams them one at a
// time, so reading never holds the whole file; it accepts gzip-compressed files transparently.
// RecordWriter writes the same framing, gzip-compressed when the file name ends in ".gz".
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/message_lite.h>

#include "core/error.h"

namespace orrery::chakra {

class RecordReader {
 public:
  // Opens `path` for reading. Fails when the file cannot be opened or is a directory. Cost: one
  // open, one fstat and a buffer.
  static Expected<RecordReader> open(const std::string& path);

  RecordReader(RecordReader&&) noexcept;
  RecordReader& operator=(RecordReader&&) noexcept;
  ~RecordReader();

  // Reads the next record's bytes into `record` (reusing its capacity). Returns false at a clean
  // end of file, and an Error naming the file, the record number and its byte offset when the file
  // ends inside a record or a length is implausible.
  Expected<bool> next(std::string& record);
  // As next, appending the record's bytes to `out` instead (one copy fewer for a caller that
  // collects records back to back).
  Expected<bool> append_next(std::string& out);

  const std::string& path() const { return path_; }
  // Index of the record last returned by next() (0 for the first).
  uint64_t record_index() const { return record_index_ - 1; }
  // Offset, in the uncompressed stream, of the length prefix of the record last returned.
  uint64_t record_offset() const { return record_offset_; }
  bool compressed() const { return compressed_; }
  // Size of the file on disk when it is a regular file, else 0.
  uint64_t file_bytes() const { return file_bytes_; }
  // Bytes of the uncompressed stream consumed so far.
  uint64_t bytes_consumed() const { return consumed_ + begin_; }

 private:
  RecordReader() = default;
  // Makes at least one unread byte available; false at end of file. Sets io_error_ on failure.
  bool fill();

  std::string path_;
  void* file_ = nullptr;  // gzFile, for a compressed file
  int fd_ = -1;           // a plain file, read directly
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  uint64_t consumed_ = 0;  // bytes of the uncompressed stream before buffer_[begin_]
  uint64_t record_index_ = 0;
  uint64_t record_offset_ = 0;
  bool compressed_ = false;
  uint64_t file_bytes_ = 0;
  std::string io_error_;
};

class RecordWriter {
 public:
  // Creates (truncates) `path`; gzip-compressed when it ends in ".gz".
  static Expected<RecordWriter> create(const std::string& path);

  RecordWriter(RecordWriter&&) noexcept;
  RecordWriter& operator=(RecordWriter&&) noexcept;
  ~RecordWriter();

  // Appends one record holding `message`. Cost: one serialization into a reused buffer.
  Status write(const google::protobuf::MessageLite& message);
  // Appends one record holding `bytes` as they are.
  Status write_bytes(const std::string& bytes);
  // Flushes and closes; errors from the last writes surface here. Called by the destructor if
  // needed, but then errors are lost: call it explicitly.
  Status close();

  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  RecordWriter() = default;
  Status write_raw(const char* data, size_t size);

  std::string path_;
  void* gz_ = nullptr;         // gzFile when compressing
  std::FILE* file_ = nullptr;  // plain output otherwise
  std::string scratch_;
  uint64_t bytes_written_ = 0;
};

}  // namespace orrery::chakra
