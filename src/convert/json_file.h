// convert/json_file.h: whole JSON documents from disk, plain or gzip-compressed.
//
// PyTorch host traces and Kineto traces are single JSON documents, often gzip-compressed
// (`.json.gz`). read_json_file() reads one completely (zlib reads plain files transparently) and
// parses it with nlohmann::json; a syntax error or a truncated file is an Error that names the file
// and the byte where parsing stopped. read_file_head() reads only the first bytes, to tell the kind
// of a file without parsing all of it.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace orrery::convert {

// The whole (decompressed) text of `path`. Cost: one pass over the file.
Expected<std::string> read_file_text(const std::string& path);

// At most `bytes` bytes from the start of the decompressed text of `path`.
Expected<std::string> read_file_head(const std::string& path, size_t bytes);

// Reads and parses `path`. Errors: kIo when it cannot be read, kParse (with the byte offset) when
// it is not one complete JSON document.
Expected<nlohmann::json> read_json_file(const std::string& path);

// The error for a document that stops parsing at `byte` of `size` ("..., it ends too early" when
// the text ran out), given nlohmann's exception text ("[json.exception.parse_error.101] parse error
// at line 3, column 5: ...", of which the part from "parse error" is kept).
Error json_parse_error(const std::string& path, size_t byte, size_t size, const std::string& what);

// Parses `text` as if read from `path` (for tests).
Expected<nlohmann::json> parse_json_text(const std::string& path, const std::string& text);

}  // namespace orrery::convert
