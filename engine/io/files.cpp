#include "attnviz/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "attnviz/engine.hpp"
#include "attnviz/text.hpp"

namespace attnviz {

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status read_untrusted_file(const std::string& path, std::size_t max_bytes, std::string& out) {
  const auto fail = [&path](const std::string& why) {
    return Status::fail("cannot read " + quote(path) + ": " + why);
  };
  if (path.empty()) return Status::fail("cannot read a file with an empty name");
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  Status result;
  if (fstat(fd, &st) != 0) {
    result = fail(std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    result = fail("is " + file_kind(static_cast<unsigned>(st.st_mode)));
  } else if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    // Both as format_bytes writes them: "%.1f MB" wrote a 4 kB limit as "0.0 MB".
    const BytesApart b = format_bytes_apart(static_cast<std::uint64_t>(st.st_size), max_bytes);
    result = fail(b.first + ", more than the " + b.second + " limit");
  } else {
    // Read to the end, not to st_size: /proc entries say 0 and are longer; growing files are cut at the
    // limit.
    std::string body;
    body.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t got = 0;
    for (;;) {
      if (got == body.size()) {
        if (body.size() > max_bytes) {
          result = fail("more than the " + format_bytes(max_bytes) + " limit");
          break;
        }
        body.resize(std::min(max_bytes + 1, body.size() * 2 + 4096));
      }
      const ssize_t n = ::read(fd, &body[got], body.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        result = fail(std::strerror(errno));
        break;
      }
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (result.is_ok()) {
      body.resize(got);
      out = std::move(body);
    }
  }
  ::close(fd);
  return result;
}

namespace {

// Writes every byte of `bytes` to `fd`, flushes it when `sync` and closes it; the errno of a failure, or 0.
int write_all(int fd, std::string_view bytes, bool sync) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return error;
    }
    done += static_cast<std::size_t>(n);
  }
  // (A file system that cannot flush, such as a pipe's or a read-only one's, says EINVAL or EROFS.)
  if (sync && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int error = errno;
    ::close(fd);
    return error;
  }
  // close() reports what a network file system could not store (a full disk seen late).
  if (::close(fd) != 0) return errno;
  return 0;
}

}  // namespace

Status write_file(const std::string& path, std::string_view bytes) {
  const auto fail = [&path](int error) {
    return Status::fail("cannot write " + quote(path) + ": " + std::strerror(error));
  };
  if (path.empty()) return Status::fail("cannot write a file with an empty name");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno);
  if (const int error = write_all(fd, bytes, false)) return fail(error);
  return Status::ok();
}

Status write_new_file(const std::string& path, std::string_view bytes) {
  const auto fail = [&path](const std::string& why) {
    return Status::fail("cannot write " + quote(path) + ": " + why);
  };
  if (path.empty()) return Status::fail("cannot write a file with an empty name");
  // Whatever is at the name goes first, as itself: a link is removed, never followed; a FIFO, socket or
  // device node is removed, never opened. A folder stays, refused.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fail("is a directory");
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fail(std::strerror(errno));
  } else if (errno != ENOENT) {
    return fail(std::strerror(errno));
  }
  // O_EXCL | O_NOFOLLOW: a file made afresh; anything put at the name since (a link, a FIFO) is refused, not
  // written through or waited on.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fail(std::strerror(errno));
  if (const int error = write_all(fd, bytes, true)) {
    ::unlink(path.c_str());  // the file made here, cut short
    return fail(std::strerror(error));
  }
  return Status::ok();
}

}  // namespace attnviz
