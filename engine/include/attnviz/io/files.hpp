// Reading small files that come from outside (JSON inputs, vocabularies, config.json): a regular file only
// (not a directory, FIFO, device or socket: they could block or never end), its size checked before reading,
// every read error reported (and written files every write error). Weights files are mapped instead
// (safetensors.hpp) with the same checks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "attnviz/status.hpp"

namespace attnviz {

// Reads the whole of `path` into `out`, refusing anything that is not a regular file or holds more than
// `max_bytes` (a /proc entry, which reports size 0, is read up to that limit). Messages: "cannot read PATH:
// is a directory", "cannot read PATH: 70.0 MB, more than the 64.0 MB limit", "cannot read PATH: No such file
// or directory".
Status read_untrusted_file(const std::string& path, std::size_t max_bytes, std::string& out);

// Writes `bytes` to `path` (created or truncated), every write error reported: a full disk or /dev/full
// gives "cannot write PATH: No space left on device", not a truncated file and success.
Status write_file(const std::string& path, std::string_view bytes);

// Writes `bytes` to a file made afresh at `path`, flushed to the disk (fsync): what was at the name is
// removed first as itself (a symbolic link is removed, never followed, so nothing outside the folder is
// written; a FIFO, socket or device node is removed, never opened, so nothing blocks), then the file is
// created with O_EXCL | O_NOFOLLOW. A directory at the name is refused ("cannot write PATH: is a
// directory"); every error is one line, and a file cut short is removed. A checkpoint's files are written so.
Status write_new_file(const std::string& path, std::string_view bytes);

// "a directory", "a symbolic link" (from lstat), "a FIFO", "a character device", "a block device", "a
// socket", "not a regular file".
std::string file_kind(unsigned mode);

}  // namespace attnviz
