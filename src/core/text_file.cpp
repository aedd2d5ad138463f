#include "core/text_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace orrery {

Expected<std::string> read_text_file(const std::filesystem::path& path, std::string_view what) {
  if (Status file = refuse_folder(path, what); !file) return file.error();
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cannot_open(path, what, errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error::make(ErrorKind::kIo, "{}: read failed", path.string());
  return std::move(text).str();
}

Error cannot_open(const std::filesystem::path& path, std::string_view what, int error) {
  return Error::make(ErrorKind::kIo, "{}: cannot open{}{}{}{}", path.string(),
                     what.empty() ? "" : " ", what, error != 0 ? ": " : "",
                     error != 0 ? std::strerror(error) : "");
}

Expected<std::filesystem::path> temp_folder() {
  std::error_code error;
  std::filesystem::path folder = std::filesystem::temp_directory_path(error);
  if (!error) return folder;
  // The variable the library read, in its order, for the message.
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"}) {
    if (const char* value = std::getenv(name); value != nullptr) {
      return Error::make(ErrorKind::kIo, "{}: not a folder for temporary files ({})", value, name);
    }
  }
  return Error::make(ErrorKind::kIo, "/tmp: not a folder for temporary files: {}", error.message());
}

Status refuse_folder(const std::filesystem::path& path, std::string_view what) {
  std::error_code status_error;
  if (std::filesystem::is_directory(path, status_error)) {
    return Error::make(ErrorKind::kIo, "{}: is a folder, not {}", path.string(),
                       what.empty() ? std::string_view("a file") : what);
  }
  return Status::ok();
}

Status write_text_file(const std::filesystem::path& path, std::string_view text) {
  errno = 0;
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    const int error = errno;
    return Error::make(ErrorKind::kIo, "{}: cannot create{}{}", path.string(),
                       error != 0 ? ": " : "", error != 0 ? std::strerror(error) : "");
  }
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Error::make(ErrorKind::kIo, "{}: cannot write", path.string());
  return Status::ok();
}

}  // namespace orrery
