#include "hub_download.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/model_ref.hpp"
#include "attnviz/text.hpp"

namespace attnviz {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxRedirects = 10;
constexpr std::size_t kMaxIndexBytes = std::size_t{64} << 20;  // an index of 100,000 tensors is ~10 MB
// The headers of one exchange, all responses together: the hub sends about 2 kB. More ends the exchange, so
// that a server sending header after header neither runs on nor fills memory (libcurl keeps them too).
constexpr std::size_t kMaxHeaderBytes = std::size_t{256} << 10;

// A URL as messages show it: without its query (a CDN's signed parameters) and capped.
std::string shown_url(const std::string& url) {
  return quote(url.substr(0, url.find('?')), kQuoteCap, '\0');
}

// "%2F" for '/' and the like: a revision such as refs/pr/1 is one path segment in the hub's URLs.
std::string url_segment(const std::string& s) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += digits[u >> 4];
      out += digits[u & 15];
    }
  }
  return out;
}

struct CurlUrl {
  CURLU* h = curl_url();
  ~CurlUrl() { curl_url_cleanup(h); }
  std::string part(CURLUPart p, unsigned flags = 0) const {
    char* v = nullptr;
    if (curl_url_get(h, p, &v, flags) != CURLUE_OK || !v) return "";
    std::string s = v;
    curl_free(v);
    return s;
  }
};

// Scheme, host and port (the default port filled in), lowercased by libcurl: the token's only destination.
std::string origin(const std::string& url) {
  CurlUrl u;
  if (curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return "";
  return u.part(CURLUPART_SCHEME) + "://" + u.part(CURLUPART_HOST) + ":" +
         u.part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
}

// "host" or "host:port" (an explicit port), as messages name a server.
std::string host_of(const std::string& url) {
  CurlUrl u;
  if (curl_url_set(u.h, CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return quote(url, 64);
  const std::string port = u.part(CURLUPART_PORT);
  return quote(u.part(CURLUPART_HOST) + (port.empty() ? "" : ":" + port), 64, '\0');
}

// A file the cache may trust as its own: a regular file, not a link (huggingface_hub writes no link into
// blobs/; one there could lead to any file, whose bytes a refusal might then quote or a write overwrite).
bool is_plain_file(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::regular;
}

// One HTTP exchange's answer: the status and the last response's headers (names lowercased).
struct Answer {
  long code = 0;
  std::map<std::string, std::string> headers;
  std::size_t header_bytes = 0;  // over every response of the exchange
  bool too_many_headers = false;
  std::string redirect;  // the absolute URL a 3xx points at
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// Where a GET's body goes: blobs/ETAG.incomplete, from `offset` on (a 206 answer) or from the start (a 200:
// the server ignored the Range), never past the announced `size`. The file opens at the first byte of such an
// answer, once its headers have been checked; a redirect's or an error's body is dropped.
struct Sink {
  const Answer* answer = nullptr;
  std::string path, file_name;
  std::uint64_t offset = 0, size = 0, written = 0;
  std::FILE* file = nullptr;
  bool started = false, too_long = false;
  std::string error;  // a check or a write that failed

  ~Sink() { close(); }
  void close() {
    if (file && std::fclose(file) != 0 && error.empty())
      error = "cannot write " + quote(path, kQuoteCap, '\0') + ": " + std::strerror(errno);
    file = nullptr;
  }
  // Checks the answer's headers against what was asked, then opens the file.
  bool start() {
    started = true;
    const long code = answer->code;
    if (code != 200 && code != 206) return true;
    if (code == 206) {
      const auto range = parse_content_range(answer->header("content-range"));
      if (!range || range->first != offset || range->total != size) {
        error = file_name + ": the hub answered the range " + quote(answer->header("content-range"), 64) +
                " to bytes=" + std::to_string(offset) + "- of " + std::to_string(size);
        return false;
      }
    } else {
      offset = 0;  // the whole file again
      const std::string length = answer->header("content-length");
      if (!length.empty() && parse_content_length(length) != size) {
        error = file_name + ": the hub announced " + std::to_string(size) + " bytes, but its download has " +
                quote(length, 24, '\0');
        return false;
      }
    }
    // O_NOFOLLOW: a link planted at ETAG.incomplete is not followed to write elsewhere
    const int fd = ::open(
        path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (code == 206 ? O_APPEND : O_TRUNC), 0644);
    file = fd < 0 ? nullptr : ::fdopen(fd, code == 206 ? "ab" : "wb");
    if (!file && fd >= 0) ::close(fd);
    if (!file) {
      error = "cannot write " + quote(path, kQuoteCap, '\0') + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }
};

// One request's progress: Ctrl-C, the terminal's line, and the minimum rate. Every window of
// o->rate_window_s seconds must bring kHubMinBytesPerSecond * window bytes; libcurl calls on_progress at
// least about once a second, data or not, so a window is checked within about a second of its end.
struct Transfer {
  const HubDownloadOptions* o = nullptr;
  std::function<void(std::uint64_t)> progress;
  bool stopped = false, too_slow = false;
  std::chrono::steady_clock::time_point window_start = std::chrono::steady_clock::now();
  std::uint64_t window_bytes = 0;  // the bytes received when the window began
};

extern "C" size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<Answer*>(user);
  a->header_bytes += size * n;
  if (a->header_bytes > kMaxHeaderBytes) {
    a->too_many_headers = true;
    return 0;
  }
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    a->headers.clear();  // a new response (after a 100 Continue, say)
    const auto space = line.find(' ');
    a->code = space == std::string::npos ? 0 : std::strtol(line.c_str() + space + 1, nullptr, 10);
  } else if (const auto colon = line.find(':'); colon != std::string::npos && colon > 0) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::size_t v = colon + 1;
    while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
    a->headers[name] = line.substr(v);
  }
  return size * n;
}

extern "C" size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const std::size_t bytes = size * n;
  if (!s->started && !s->start()) return 0;
  if (!s->file) return bytes;                      // a redirect's or an error's body: not the file
  if (bytes > s->size - s->offset - s->written) {  // offset + written <= size: no sum that could wrap
    s->too_long = true;
    return 0;
  }
  if (std::fwrite(data, 1, bytes, s->file) != bytes) {
    s->error = "cannot write " + quote(s->path, kQuoteCap, '\0') + ": " + std::strerror(errno);
    return 0;
  }
  s->written += bytes;
  return bytes;
}

extern "C" int on_progress(void* user, curl_off_t, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->o->stop && t->o->stop->load()) {
    t->stopped = true;
    return 1;
  }
  const std::uint64_t got = now > 0 ? static_cast<std::uint64_t>(now) : 0;
  const auto clock = std::chrono::steady_clock::now();
  if (clock - t->window_start >= std::chrono::seconds(t->o->rate_window_s)) {
    const std::uint64_t need = kHubMinBytesPerSecond * static_cast<std::uint64_t>(t->o->rate_window_s);
    if (got < t->window_bytes || got - t->window_bytes < need) {
      t->too_slow = true;
      return 1;
    }
    t->window_start = clock;
    t->window_bytes = got;
  }
  if (t->progress) t->progress(got);
  return 0;
}

// The terminal's view of a download: one line redrawn in place on a terminal, else a line every 10 s; a line
// for each file done either way.
class Progress {
 public:
  Progress(const HubDownloadOptions& o, std::string id, std::uint64_t total)
      : o_(o), id_(std::move(id)), total_(total) {}
  ~Progress() { clear(); }
  void update(std::uint64_t done) {
    if (!o_.log) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < (o_.tty ? std::chrono::milliseconds(100) : std::chrono::seconds(10))) return;
    last_ = now;
    done = std::min(done, total_);
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double pct = total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.0f%%)", pct);
    std::string text =
        o_.program + ": " + id_ + ": " + format_bytes(done) + " of " + format_bytes(total_) + buf;
    if (secs > 0.5)
      text += ", " + format_bytes(static_cast<std::uint64_t>(static_cast<double>(done) / secs)) + "/s";
    if (o_.tty) {
      *o_.log << '\r' << text << (o_.stop ? " (Ctrl-C stops)" : "") << "\033[K" << std::flush;
      drawn_ = true;
    } else {
      *o_.log << text << '\n' << std::flush;
    }
  }
  void line(const std::string& text) {
    if (!o_.log) return;
    clear();
    *o_.log << o_.program << ": " << text << '\n' << std::flush;
  }
  void clear() {
    if (drawn_ && o_.log) *o_.log << "\r\033[K" << std::flush;
    drawn_ = false;
  }

 private:
  const HubDownloadOptions& o_;
  std::string id_;
  std::uint64_t total_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

// An exclusive lock on CACHE/.locks/models--ORG--NAME/ETAG.lock, huggingface_hub's own lock file (flock, as
// Python's filelock takes it), so that two downloads never write one .incomplete.
class BlobLock {
 public:
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status take(const fs::path& path) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0)
      return Status::fail("cannot write " + quote(path.string(), kQuoteCap, '\0') + ": " +
                          std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0)
      return Status::fail("another download of the same file is under way (it holds " +
                          quote(path.string(), kQuoteCap, '\0') + "): wait for it, then run this again");
    return Status::ok();
  }

 private:
  int fd_ = -1;
};

struct RemoteFile {
  std::string name;  // in the repository (and the snapshot)
  std::string etag;  // the blob's name
  std::uint64_t size = 0;
  std::string location;       // where its bytes are (the CDN for a large file)
  std::uint64_t partial = 0;  // bytes in its .incomplete already
  bool cached = false;        // its blob is whole in the cache
};

std::uint64_t file_size_or_0(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<std::uint64_t>(n);
}

// The hash a blob name (the hub's ETag) is of a file's bytes. A 40-hex ETag (a small file, kept in git) is
// git's blob id: sha1 over "blob SIZE\0" and then the bytes, as `git hash-object` computes it; a 64-hex ETag
// (an LFS file) is the bytes' sha256. The file is read whole, in 1 MiB pieces (sha256 runs at about 1 GB/s:
// a second or so per GB), so a download resumed from an .incomplete is checked over all of its bytes.
// Returns the hash in lowercase hex; empty with `error` set when the file cannot be read or Ctrl-C stopped
// the reading (`stopped`).
std::string hash_as_etag(const std::string& path, const std::string& etag, std::uint64_t size,
                         const std::atomic<bool>* stop, bool& stopped, std::string& error) {
  stopped = false;
  const bool git_blob = etag.size() == 40;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), git_blob ? EVP_sha1() : EVP_sha256(), nullptr) != 1) {
    error = "cannot start OpenSSL's " + std::string(git_blob ? "sha1" : "sha256");
    return "";
  }
  if (git_blob) {
    const std::string header = "blob " + std::to_string(size);
    if (EVP_DigestUpdate(ctx.get(), header.c_str(), header.size() + 1) != 1) {  // with its '\0'
      error = "cannot hash with OpenSSL's sha1";
      return "";
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot read " + quote(path, kQuoteCap, '\0') + ": " + std::strerror(errno);
    return "";
  }
  std::vector<unsigned char> buf(std::size_t{1} << 20);
  std::uint64_t total = 0;
  for (;;) {
    if (stop && stop->load()) {
      ::close(fd);
      stopped = true;
      error = "stopped by Ctrl-C while checking " + quote(path, kQuoteCap, '\0');
      return "";
    }
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read " + quote(path, kQuoteCap, '\0') + ": " + std::strerror(errno);
      ::close(fd);
      return "";
    }
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(n)) != 1) {
      error = "cannot hash with OpenSSL's " + std::string(git_blob ? "sha1" : "sha256");
      ::close(fd);
      return "";
    }
  }
  ::close(fd);
  if (total != size) {  // changed under us since its size was checked
    error = quote(path, kQuoteCap, '\0') + " has " + std::to_string(total) + " bytes, not " +
            std::to_string(size);
    return "";
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) {
    error = "cannot finish OpenSSL's " + std::string(git_blob ? "sha1" : "sha256");
    return "";
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += digits[md[i] >> 4];
    hex += digits[md[i] & 15];
  }
  return hex;
}

class Downloader {
 public:
  Downloader(const HubName& name, const HubDownloadOptions& o) : name_(name), o_(o) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
    id_ = name.repo_id() + (name.revision == "main" ? "" : "@" + name.revision);
    repo_ = fs::path(o.cache) / name.folder();
    if (is_commit_hash(name.revision)) {
      commit_ = name.revision;
      for (char& c : commit_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  ~Downloader() {
    if (curl_) curl_easy_cleanup(curl_);
  }

  Status run(HubDownloadResult& r) {
    if (!curl_) return Status::fail("cannot start libcurl");
    endpoint_ = o_.endpoint;
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
    if (endpoint_.rfind("https://", 0) != 0 && endpoint_.rfind("http://", 0) != 0)
      return Status::fail("HF_ENDPOINT " + quote(endpoint_) + " is not an http:// or https:// URL");
    endpoint_origin_ = origin(endpoint_);
    if (o_.cache.empty())
      return Status::fail("no cache folder: set HF_HUB_CACHE (or HF_HOME, or HOME) to where models may go");
    if (!o_.env_error.empty()) return Status::fail(o_.env_error);

    // 1. What each file is: its commit, blob name, size and location (HEAD requests), before any byte moves.
    // Each file's blob is its own: two files of one download never share a blob name (nor a file name: an
    // index naming config.json as a shard).
    std::vector<RemoteFile> files;
    const auto admit = [&](const RemoteFile& file) {
      for (const RemoteFile& other : files) {
        if (other.name == file.name)
          return Status::fail(id_ + ": model.safetensors.index.json names " + quote(file.name) +
                              " as a shard, a file this download has already");
        if (other.etag == file.etag)
          return Status::fail(id_ + ": the hub gives " + quote(other.name) + " and " + quote(file.name) +
                              " the same blob name " + file.etag + "; each file of a download needs its own");
      }
      files.push_back(file);
      return Status::ok();
    };
    bool missing = false;
    RemoteFile f;
    if (Status st = metadata("config.json", false, f, missing); !st.is_ok()) return st;
    if (Status st = admit(f); !st.is_ok()) return st;
    for (const char* optional : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"}) {
      if (Status st = metadata(optional, true, f, missing); !st.is_ok()) return st;
      if (!missing)
        if (Status st = admit(f); !st.is_ok()) return st;
    }
    if (Status st = metadata("model.safetensors", true, f, missing); !st.is_ok()) return st;
    if (!missing) {
      if (Status st = admit(f); !st.is_ok()) return st;
    } else {
      if (Status st = metadata("model.safetensors.index.json", true, f, missing); !st.is_ok()) return st;
      if (missing)
        return Status::fail(id_ +
                            " has neither model.safetensors nor model.safetensors.index.json on the hub: "
                            "attnviz reads safetensors weights only");
      // The index is fetched before the others are counted: its size is checked against its own cap first.
      if (f.size > kMaxIndexBytes)
        return Status::fail(id_ + ": the hub announces " + std::to_string(f.size) +
                            " bytes for 'model.safetensors.index.json', more than the " +
                            std::to_string(kMaxIndexBytes) + " bytes (" + format_bytes(kMaxIndexBytes) +
                            ") an index may have");
      if (Status st = admit(f); !st.is_ok()) return st;
      Progress none(o_, id_, f.size);
      if (Status st = fetch(f, none, 0, r); !st.is_ok()) return st;
      std::string text;
      std::vector<std::string> shards;
      std::uint64_t total = 0;
      if (Status st = read_untrusted_file((repo_ / "blobs" / f.etag).string(), kMaxIndexBytes, text);
          !st.is_ok())
        return st;
      if (Status st = parse_shard_index(text, shards, total); !st.is_ok())
        return Status::fail(id_ + ": model.safetensors.index.json " + st.error);
      for (const std::string& shard : shards) {
        if (const auto same = std::find_if(files.begin(), files.end(),
                                           [&](const RemoteFile& other) { return other.name == shard; });
            same != files.end())
          return admit(*same);  // refused, naming the shard, before asking the hub about it
        if (Status st = metadata(shard, false, f, missing); !st.is_ok()) return st;
        if (Status st = admit(f); !st.is_ok()) return st;
      }
    }

    // 2. Sizes no download may hold, then room for what is missing, before any of it is written. Every sum
    // is checked: the announced sizes by sum_announced_sizes (at most kMaxHubDownloadBytes together), so
    // `need` and every progress figure below it cannot wrap.
    std::vector<AnnouncedFile> announced;
    for (const RemoteFile& file : files) announced.push_back({file.name, file.size});
    std::uint64_t total = 0;
    if (Status st = sum_announced_sizes(announced, total); !st.is_ok())
      return Status::fail(id_ + ": " + st.error);
    std::uint64_t need = 0;
    for (RemoteFile& file : files) {
      const fs::path blob = repo_ / "blobs" / file.etag;
      file.cached = is_plain_file(blob) && file_size_or_0(blob) == file.size;
      const fs::path partial = blob.string() + ".incomplete";
      file.partial =
          file.cached || !is_plain_file(partial) ? 0 : std::min(file_size_or_0(partial), file.size);
      if (!file.cached) need = saturating_add(need, file.size - file.partial);
    }
    std::error_code ec;
    fs::create_directories(repo_ / "blobs", ec);
    if (ec)
      return Status::fail("cannot write " + quote((repo_ / "blobs").string(), kQuoteCap, '\0') + ": " +
                          ec.message());
    struct statvfs vfs {};
    if (::statvfs((repo_ / "blobs").c_str(), &vfs) == 0) {
      const auto blocks = static_cast<std::uint64_t>(vfs.f_bavail),
                 block = static_cast<std::uint64_t>(vfs.f_frsize);
      const std::uint64_t free_bytes = block && blocks > UINT64_MAX / block ? UINT64_MAX : blocks * block;
      if (need > free_bytes) {
        const BytesApart b = format_bytes_apart(need, free_bytes);
        return Status::fail(id_ + " needs " + b.first + " more in " + quote(o_.cache, kQuoteCap, '\0') +
                            ", which has " + b.second + " free");
      }
    }

    // 3. The bytes, then the snapshot's links and the ref.
    Progress progress(o_, id_, need);
    std::uint64_t done = 0;
    for (RemoteFile& file : files) {
      if (!file.cached) {
        if (Status st = fetch(file, progress, done, r); !st.is_ok()) return st;
        done = saturating_add(done, file.size - file.partial);
      }
      if (Status st = link(file); !st.is_ok()) return st;
    }
    progress.clear();
    if (Status st = write_ref(); !st.is_ok()) return st;
    r.snapshot = (repo_ / "snapshots" / commit_).string();
    r.commit = commit_;
    return Status::ok();
  }

 private:
  std::string file_url(const std::string& file) const {
    return endpoint_ + "/" + name_.org + "/" + name_.name + "/resolve/" +
           url_segment(commit_.empty() ? name_.revision : commit_) + "/" + url_segment(file);
  }

  // One request, no redirect followed. The token goes only to the endpoint's own origin.
  CURLcode exchange(const std::string& url, bool head, Answer& a, Sink* sink, Transfer* t) {
    curl_easy_reset(curl_);
    Sink dropped;
    dropped.answer = &a;
    dropped.started = true;  // with no file, every body is dropped
    if (sink) sink->answer = &a;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "attnviz/0.1");
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, sink ? sink : &dropped);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, 30L);
    // The minimum rate is on_progress's (Transfer); libcurl's own check stays behind it, for a connection
    // that sends nothing at all for twice the window, and makes libcurl wake at least once a second.
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, 2 * o_.rate_window_s + 10);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_);
    error_[0] = '\0';
    if (t) {
      curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, on_progress);
      curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, t);
    }
    if (sink && sink->offset > 0) {
      const std::string range = std::to_string(sink->offset) + "-";
      curl_easy_setopt(curl_, CURLOPT_RANGE, range.c_str());
    }
    curl_slist* headers = nullptr;
    std::string auth;
    if (!o_.token.empty() && origin(url) == endpoint_origin_) {
      auth = "Authorization: Bearer " + o_.token;
      headers = curl_slist_append(headers, auth.c_str());
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    const CURLcode rc = curl_easy_perform(curl_);
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, nullptr);
    curl_slist_free_all(headers);
    std::fill(auth.begin(), auth.end(), '\0');
    long code = 0;
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &code);
    a.code = code;
    char* redirect = nullptr;
    curl_easy_getinfo(curl_, CURLINFO_REDIRECT_URL, &redirect);
    a.redirect = redirect ? redirect : "";
    return rc;
  }

  Status unreachable(const std::string& url, CURLcode rc) const {
    return Status::fail("cannot reach " + shown_url(url) + ": " +
                        quote(error_[0] ? error_ : curl_easy_strerror(rc), kQuoteCap, '\0'));
  }

  // A refusal by the hub, in words: what is missing, or that a token is needed.
  Status refused(const Answer& a, const std::string& file) const {
    const std::string code = std::to_string(a.code), why = a.header("x-error-code");
    const std::string rev = commit_.empty() ? name_.revision : commit_;
    if (why == "RepoNotFound")
      return Status::fail(
          name_.repo_id() + " is not on the hub, or is private" +
          (o_.token.empty() ? ": set HF_TOKEN to a token that can read it" : " and HF_TOKEN cannot read it") +
          " (HTTP " + code + ")");
    if (why == "RevisionNotFound")
      return Status::fail(name_.repo_id() + " has no revision " + quote(rev) + " on the hub (HTTP " + code +
                          ")");
    if (a.code == 401 || a.code == 403 || why == "GatedRepo")
      return Status::fail(o_.token.empty()
                              ? name_.repo_id() + " is gated or private (HTTP " + code +
                                    "): accept its terms on the hub, then set HF_TOKEN to an "
                                    "access token of that account"
                              : "HF_TOKEN does not give access to " + name_.repo_id() + " (HTTP " + code +
                                    "): accept its terms on the hub with the token's "
                                    "account, or use another token");
    if (a.code == 404) return Status::fail(id_ + " has no " + quote(file) + " on the hub (HTTP 404)");
    return Status::fail("the hub answered HTTP " + code + " for " + quote(file) + " of " + id_);
  }

  // As huggingface_hub's get_hf_file_metadata: a HEAD request, following only redirects within the same
  // server (a renamed repository); a redirect elsewhere (the CDN) is the file's location.
  Status metadata(const std::string& file, bool optional, RemoteFile& out, bool& missing) {
    missing = false;
    const std::string asked = file_url(file);
    std::string url = asked;
    Answer a;
    for (int hop = 0;; ++hop) {
      if (hop > kMaxRedirects)
        return Status::fail(id_ + ": " + quote(file) + " redirects more than " +
                            std::to_string(kMaxRedirects) + " times (a redirect loop at " + shown_url(url) +
                            ")");
      a = Answer{};
      Transfer t;  // Ctrl-C ends a slow answer too
      t.o = &o_;
      const CURLcode rc = exchange(url, true, a, nullptr, &t);
      if (t.stopped) {
        stopped_ = true;
        return Status::fail("stopped by Ctrl-C before any file was written");
      }
      if (a.too_many_headers) return too_many_headers(file, url);
      if (t.too_slow)
        return Status::fail(id_ + ": the hub's answer for " + quote(file) + " from " + host_of(url) +
                            " did not come within " + std::to_string(o_.rate_window_s) + " s (" +
                            too_slow_rule() + "); running again tries again");
      if (rc != CURLE_OK) return unreachable(url, rc);
      const std::string location = a.header("location");
      if (a.code < 300 || a.code > 399 || location.empty() || location.find("://") != std::string::npos)
        break;
      url = a.redirect;
    }
    const std::string why = a.header("x-error-code");
    if (a.code == 404 && optional && why != "RepoNotFound" && why != "RevisionNotFound") {
      missing = true;
      return Status::ok();
    }
    if (a.code >= 400 || a.code < 200) return refused(a, file);
    std::string commit = a.header("x-repo-commit");
    for (char& c : commit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!is_commit_hash(commit))
      return Status::fail(id_ + ": the hub's answer for " + quote(file) +
                          " has no X-Repo-Commit (is HF_ENDPOINT a Hugging Face hub?)");
    if (commit_.empty()) {  // the first answer pins the commit: this file too is fetched at it
      commit_ = commit;
      if (url == asked) url = file_url(file);
    }
    if (commit != commit_)
      return Status::fail(id_ + ": the hub answered " + quote(file) + " from commit " + commit + ", not " +
                          commit_);
    std::string etag = a.header("x-linked-etag");
    if (etag.empty()) etag = a.header("etag");
    const std::optional<std::string> blob = etag_file_name(etag);
    if (!blob)
      return Status::fail(id_ + ": the hub's answer for " + quote(file) + " has the ETag " + quote(etag, 80) +
                          ", not a blob name (40 or 64 lowercase hex digits: a sha1 or a sha256)");
    // A large file's answer (a redirect to its bytes, with X-Linked-Etag) must say its size in X-Linked-Size:
    // its Content-Length is the redirect's own.
    const bool linked = !a.header("x-linked-etag").empty() || (a.code >= 300 && a.code <= 399);
    const std::string length = linked ? a.header("x-linked-size") : a.header("content-length");
    const std::optional<std::uint64_t> size = parse_content_length(length);
    if (!size)
      return Status::fail(id_ + ": the hub's answer for " + quote(file) + " gives the size " +
                          quote(length, 32) +
                          ", not a number of bytes (decimal digits, at most 18446744073709551615)");
    out = RemoteFile{file, *blob, *size, a.code >= 300 && !a.redirect.empty() ? a.redirect : url, 0, false};
    return Status::ok();
  }

  Status too_many_headers(const std::string& file, const std::string& url) const {
    return Status::fail(id_ + ": the answer for " + quote(file) + " from " + host_of(url) +
                        " has more than " + std::to_string(kMaxHeaderBytes) +
                        " bytes of headers (a hub sends about 2,000)");
  }

  std::string too_slow_rule() const {
    return "a request must average " + std::to_string(kHubMinBytesPerSecond) + " bytes/s over each " +
           std::to_string(o_.rate_window_s) + " s" +
           (o_.rate_window_s == kHubRateWindowSeconds ? "" : ", the window ATTNVIZ_HUB_RATE_WINDOW sets");
  }

  // The file's bytes into blobs/ETAG, through ETAG.incomplete (resumed from where an earlier run stopped).
  Status fetch(const RemoteFile& f, Progress& progress, std::uint64_t done_before, HubDownloadResult& r) {
    const fs::path blob = repo_ / "blobs" / f.etag;
    if (is_plain_file(blob) && file_size_or_0(blob) == f.size) return Status::ok();
    BlobLock lock;
    if (Status st = lock.take(fs::path(o_.cache) / ".locks" / name_.folder() / (f.etag + ".lock"));
        !st.is_ok())
      return st;
    std::error_code ec;
    fs::create_directories(blob.parent_path(), ec);
    const std::string partial = blob.string() + ".incomplete";
    if (fs::exists(fs::symlink_status(partial, ec)) && !is_plain_file(partial))
      fs::remove(partial, ec);  // a link or a folder is no partial download of ours: start again
    std::uint64_t offset = file_size_or_0(partial);
    if (offset > f.size) {
      fs::remove(partial, ec);
      offset = 0;
    }
    const std::string resume_hint = ": run the same command again to resume";
    if (offset < f.size || !fs::exists(partial, ec)) {
      std::string url = f.location;
      for (int hop = 0;; ++hop) {
        if (hop > kMaxRedirects)
          return Status::fail(id_ + ": " + quote(f.name) + " redirects more than " +
                              std::to_string(kMaxRedirects) + " times (a redirect loop at " + shown_url(url) +
                              ")");
        Answer a;
        Sink sink;
        sink.path = partial;
        sink.file_name = id_ + ": " + quote(f.name);
        sink.offset = offset;
        sink.size = f.size;
        Transfer t;
        t.o = &o_;
        const std::uint64_t base = saturating_add(done_before, offset > f.partial ? offset - f.partial : 0);
        t.progress = [&progress, base](std::uint64_t now) { progress.update(saturating_add(base, now)); };
        const CURLcode rc = exchange(url, false, a, &sink, &t);
        sink.close();
        const std::uint64_t have = file_size_or_0(partial);
        r.fetched += sink.written;
        if (t.stopped) {
          stopped_ = r.stopped = true;
          progress.clear();
          return Status::fail("stopped by Ctrl-C: " + quote(f.name) + " has " + format_bytes(have) + " of " +
                              format_bytes(f.size) + resume_hint);
        }
        if (a.too_many_headers) {
          progress.clear();
          return too_many_headers(f.name, url);
        }
        if (t.too_slow) {
          progress.clear();
          return Status::fail(id_ + ": the download of " + quote(f.name) + " from " + host_of(url) +
                              " fell below " + std::to_string(kHubMinBytesPerSecond) + " bytes/s for " +
                              std::to_string(o_.rate_window_s) + " s (it has " + format_bytes(have) + " of " +
                              format_bytes(f.size) + "); running again resumes it");
        }
        if (sink.too_long || !sink.error.empty()) {
          fs::remove(partial, ec);
          return Status::fail(sink.too_long ? id_ + ": " + quote(f.name) + " is longer than the " +
                                                  std::to_string(f.size) + " bytes the hub announced"
                                            : sink.error);
        }
        if (a.code >= 300 && a.code <= 399 && !a.redirect.empty()) {
          url = a.redirect;
          continue;
        }
        if (a.code == 416) {  // the range starts past the file's end: the file is shorter than announced
          fs::remove(partial, ec);
          return Status::fail(id_ + ": " + quote(f.name) + " is shorter than the " + std::to_string(f.size) +
                              " bytes the hub announced");
        }
        if (a.code >= 400 || (a.code != 200 && a.code != 206 && rc == CURLE_OK)) return refused(a, f.name);
        if (rc != CURLE_OK)
          return Status::fail(id_ + ": " + quote(f.name) + ": the connection failed after " +
                              format_bytes(have) + " of " + format_bytes(f.size) + " (" +
                              quote(error_[0] ? error_ : curl_easy_strerror(rc), kQuoteCap, '\0') + ")" +
                              resume_hint);
        if (!fs::exists(partial, ec)) {  // an empty file has no body to open it
          if (Status st = write_file(partial, ""); !st.is_ok()) return st;
        }
        break;
      }
    }
    const std::uint64_t have = file_size_or_0(partial);
    if (have != f.size) {
      fs::remove(partial, ec);
      return Status::fail(id_ + ": " + quote(f.name) + " has " + std::to_string(have) + " bytes, not the " +
                          std::to_string(f.size) + " the hub announced");
    }
    // The bytes must be what the hub names them: a Content-Length shorter than the body (libcurl then reads
    // that many bytes and drops the rest) or other bytes of the announced size never reach the cache.
    {
      bool hash_stopped = false;
      std::string error;
      progress.clear();
      const std::string got = hash_as_etag(partial, f.etag, f.size, o_.stop, hash_stopped, error);
      if (hash_stopped) {
        stopped_ = r.stopped = true;
        return Status::fail("stopped by Ctrl-C: " + quote(f.name) + " has all of its " +
                            format_bytes(f.size) + ", not yet checked against its ETag" + resume_hint);
      }
      if (got.empty()) return Status::fail(error);
      if (got != f.etag) {
        fs::remove(partial, ec);
        return Status::fail(id_ + ": " + quote(f.name, kQuoteCap, '\0') +
                            "'s bytes do not hash to its ETag " + f.etag + " (the hub sent " +
                            std::to_string(f.size) + " bytes, whose " +
                            (f.etag.size() == 40 ? "git blob sha1" : "sha256") + " is " + got +
                            "): the hub's answer is cut or not this file; nothing of it is kept");
      }
    }
    fs::rename(partial, blob, ec);
    if (ec)
      return Status::fail("cannot write " + quote(blob.string(), kQuoteCap, '\0') + ": " + ec.message());
    progress.line(quote(f.name, kQuoteCap, '\0') + " (" + format_bytes(f.size) + ") downloaded");
    return Status::ok();
  }

  // snapshots/COMMIT/FILE -> ../../blobs/ETAG
  Status link(const RemoteFile& f) const {
    const fs::path dir = repo_ / "snapshots" / commit_, path = dir / f.name;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (fs::is_symlink(path, ec) && fs::read_symlink(path, ec) == fs::path("../../blobs") / f.etag)
      return Status::ok();
    fs::remove(path, ec);
    fs::create_symlink(fs::path("../../blobs") / f.etag, path, ec);
    if (ec)
      return Status::fail("cannot write " + quote(path.string(), kQuoteCap, '\0') + ": " + ec.message());
    return Status::ok();
  }

  // refs/REV holding the commit, written whole (a branch's name only: a commit needs no ref).
  Status write_ref() const {
    if (is_commit_hash(name_.revision)) return Status::ok();
    const fs::path ref = repo_ / "refs" / name_.revision;
    std::error_code ec;
    fs::create_directories(ref.parent_path(), ec);
    const std::string tmp = ref.string() + ".tmp";
    if (Status st = write_file(tmp, commit_); !st.is_ok()) return st;
    fs::rename(tmp, ref, ec);
    if (ec) return Status::fail("cannot write " + quote(ref.string(), kQuoteCap, '\0') + ": " + ec.message());
    return Status::ok();
  }

 public:
  bool stopped() const { return stopped_; }

 private:
  const HubName& name_;
  const HubDownloadOptions& o_;
  bool stopped_ = false;
  CURL* curl_ = nullptr;
  std::string id_, commit_, endpoint_, endpoint_origin_;
  fs::path repo_;
  char error_[CURL_ERROR_SIZE] = {};
};

}  // namespace

HubDownloadOptions hub_options_from_env() {
  HubDownloadOptions o;
  o.cache = hub_cache_dir();
  const char* endpoint = std::getenv("HF_ENDPOINT");
  o.endpoint = endpoint && *endpoint ? endpoint : "https://huggingface.co";
  const char* token = std::getenv("HF_TOKEN");
  if (token) o.token = token;
  if (const char* w = std::getenv("ATTNVIZ_HUB_RATE_WINDOW"); w && *w) {
    const std::optional<std::uint64_t> s = parse_content_length(w);  // decimal digits, within uint64
    if (s && *s >= 1 && *s <= static_cast<std::uint64_t>(kHubMaxRateWindowSeconds))
      o.rate_window_s = static_cast<long>(*s);
    else
      o.env_error = "ATTNVIZ_HUB_RATE_WINDOW is " + quote(w, 32) +
                    ", not a whole number of seconds from 1 to " + std::to_string(kHubMaxRateWindowSeconds);
  }
  return o;
}

Status hub_download(const HubName& name, const HubDownloadOptions& options, HubDownloadResult& result) {
  HubDownloadResult r;
  Downloader d(name, options);
  const Status st = d.run(r);
  r.stopped = d.stopped();
  result = r;  // the bytes fetched and `stopped` count on failure too
  return st;
}

Status download_model(const std::string& model, const std::string& program, std::ostream& err, bool tty,
                      const std::atomic<bool>* stop, std::string& snapshot, bool& stopped) {
  stopped = false;
  // What --model opens: a path that exists here is one even when it reads as ORG/NAME, and is not fetched.
  const ModelRef ref = classify_model(model);
  if (ref.kind != ModelRefKind::hub)
    return Status::fail("--download takes a Hugging Face model name (ORG/NAME or ORG/NAME@REV), not " +
                        quote(model) +
                        (ref.exists ? ", a path here (it exists): --model opens it without --download" : ""));
  if (!ref.ok()) return Status::fail(ref.error);
  const HubName& name = ref.hub;
  HubDownloadOptions o = hub_options_from_env();
  o.program = program;
  o.log = &err;
  o.tty = tty;
  o.stop = stop;
  HubDownloadResult r;
  const Status st = hub_download(name, o, r);
  stopped = r.stopped;
  if (!st.is_ok()) return st;
  err << program << ": " << quote(model, kQuoteCap, '\0') << " is commit " << r.commit << " in "
      << quote(r.snapshot, kQuoteCap, '\0') << " ("
      << (r.fetched ? format_bytes(r.fetched) + " downloaded" : std::string("all in the cache already"))
      << ")\n";
  snapshot = r.snapshot;
  return Status::ok();
}

}  // namespace attnviz
