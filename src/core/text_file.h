// core/text_file.h: the whole contents of an input file, or one clear error.
//
// Every reader of a configuration or table file goes through here, so that a path that is a
// folder, cannot be opened or fails mid-read is refused with the path named. An std::ifstream on
// a folder opens on Linux and reads nothing, which a parser would otherwise take as an empty file
// (an empty perturbation file is valid, and a run would silently ignore its flag).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"

namespace orrery {

// The bytes of `path`. Errors (kIo): "<path>: cannot open[ <what>]: <reason>", "<path>: is a
// folder, not <what>" (or "a file") and "<path>: read failed"; `what` names the file's role, as
// "the perturbation file".
Expected<std::string> read_text_file(const std::filesystem::path& path, std::string_view what = {});

// "<path>: cannot open[ <what>][: <strerror(error)>]", for a reader that opens its file itself
// (`error`: errno after the failed open; 0 leaves the reason out).
Error cannot_open(const std::filesystem::path& path, std::string_view what, int error);

// "<path>: is a folder, not <what>" (or "a file") when `path` names a folder, ok otherwise, for a
// reader that streams its file rather than reading it whole: a folder would read as no bytes.
Status refuse_folder(const std::filesystem::path& path, std::string_view what = {});

// The folder for scratch files: TMPDIR (or TMP, TEMP, TEMPDIR), else /tmp, as
// std::filesystem::temp_directory_path finds it, whose throwing form ended the program when the
// variable named no folder. Errors (kIo): "<folder>: not a folder for temporary files (TMPDIR)".
Expected<std::filesystem::path> temp_folder();

// Writes `text` to `path` (replacing it) and closes it, so that a full disk, which a short text
// meets only when the stream's buffer is flushed, is an error too. Errors (kIo): "<path>: cannot
// create: <reason>", "<path>: cannot write".
Status write_text_file(const std::filesystem::path& path, std::string_view text);

}  // namespace orrery
