// Training checkpoints (checkpoint.hpp): safetensors written here, read back through the model loader.
#include "attnviz/io/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/safetensors.hpp"
#include "attnviz/text.hpp"

namespace attnviz {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Named {
  std::string name;
  const Tensor* tensor;
};

std::vector<std::uint64_t> shape_of(const Tensor& t) {
  std::vector<std::uint64_t> s;
  for (int i = 0; i < t.rank; ++i)
    s.push_back(static_cast<std::uint64_t>(t.shape[static_cast<std::size_t>(i)]));
  return s;
}

// A safetensors file: the header (keys sorted, data in the order given), padded with spaces to a multiple of
// 8 bytes, then float32 little-endian data.
std::string safetensors(const std::vector<Named>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const Named& n : tensors) {
    const std::uint64_t bytes = n.tensor->size() * sizeof(float);
    header[n.name] = {
        {"dtype", "F32"}, {"shape", shape_of(*n.tensor)}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  out.reserve(out.size() + static_cast<std::size_t>(offset));
  static_assert(sizeof(float) == 4, "float32");
  for (const Named& t : tensors)  // x86-64 and WebAssembly are little-endian, as the format is
    out.append(reinterpret_cast<const char*>(t.tensor->ptr()), t.tensor->size() * sizeof(float));
  return out;
}

std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// A strict decimal: digits only (at most 19, no sign, no leading zero but "0"), at most `max`.
std::optional<std::uint64_t> decimal(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

constexpr const char* kHex = "0123456789abcdef";

// An untrusted metadata value in a message: quoted, and cut after 40 bytes.
std::string brief(const std::string& s) {
  return s.size() <= 40 ? quote(s) : quote(s.substr(0, 40)) + "...";
}

// ---- The checkpoint as a set (checkpoint.json)
// -------------------------------------------------------------

// The names a checkpoint may hold, and the names a model loader reads from a folder (open_model, load_gpt,
// Bpe::load_dir): one of the second that a checkpoint's manifest does not list is no file of its set.
constexpr const char* kSetNames[] = {"model.safetensors", "config.json", "optimizer.safetensors",
                                     "tokenizer.json",    "vocab.json",  "merges.txt"};
constexpr const char* kLoaderNames[] = {"model.safetensors", "config.json", "optimizer.safetensors",
                                        "tokenizer.json",    "vocab.json",  "merges.txt",
                                        "encoder.json",      "vocab.bpe",   "model.safetensors.index.json"};
constexpr const char* kManifest = "checkpoint.json";
constexpr const char* kPending = "checkpoint.pending.json";
constexpr std::uint64_t kMaxManifestBytes = 1 << 20;

bool set_name(const std::string& name) {
  for (const char* n : kSetNames)
    if (name == n) return true;
  return false;
}

// A 64-bit hash of a file's bytes, streamed: four lanes of 64-bit multiply-rotate rounds over 32-byte
// blocks, then the tail byte by byte, then a final mix. Integer arithmetic only: the same on every machine.
class Hash64 {
 public:
  // `n` must be a multiple of 32 except in the last call.
  void update(const unsigned char* p, std::size_t n) {
    total_ += n;
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int l = 0; l < 4; ++l) lane_[l] = round(lane_[l], word(p + i + 8 * static_cast<std::size_t>(l)));
    for (; i < n; ++i) tail_ = (tail_ ^ p[i]) * 0x100000001b3ULL;
  }
  std::uint64_t digest() const {
    std::uint64_t h = total_ * kP1;
    for (std::uint64_t l : lane_) h = round(h, l);
    h = round(h, tail_);
    h ^= h >> 33, h *= kP2, h ^= h >> 29, h *= kP1, h ^= h >> 32;
    return h;
  }

 private:
  static constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ULL, kP2 = 0xC2B2AE3D27D4EB4FULL;
  static std::uint64_t word(const unsigned char* p) {
    std::uint64_t w = 0;
    for (int b = 7; b >= 0; --b) w = (w << 8) | p[b];
    return w;
  }
  static std::uint64_t round(std::uint64_t acc, std::uint64_t w) {
    acc += w * kP2;
    acc = (acc << 31) | (acc >> 33);
    return acc * kP1;
  }
  std::uint64_t lane_[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  std::uint64_t tail_ = 0xcbf29ce484222325ULL, total_ = 0;
};

std::string hex64(std::uint64_t v) {
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = kHex[v & 15];
  return s;
}

std::uint64_t hash_of(std::string_view bytes) {
  Hash64 h;
  h.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return h.digest();
}

struct SetFile {
  std::uint64_t bytes = 0, hash = 0;
};
struct Manifest {
  std::string id;
  std::map<std::string, SetFile> files;
};

std::string manifest_text(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, f] : m.files) files[name] = {{"bytes", f.bytes}, {"hash", hex64(f.hash)}};
  return json{{"format", "attnviz checkpoint"}, {"version", 1}, {"id", m.id}, {"files", files}}.dump(2) +
         "\n";
}

bool hex16(const json& v, std::uint64_t* out = nullptr) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() != 16) return false;
  std::uint64_t x = 0;
  for (char c : s) {
    const char* at = std::strchr(kHex, c);
    if (c == '\0' || !at) return false;
    x = (x << 4) | static_cast<std::uint64_t>(at - kHex);
  }
  if (out) *out = x;
  return true;
}

// A manifest from outside: every key known and in range, every file one of a checkpoint's names (no path),
// model.safetensors and config.json among them.
Status parse_manifest(const fs::path& path, Manifest& out) {
  // The entry itself, before it is opened: a link is no manifest of the folder's (a pending one would be
  // renamed into place), a FIFO or device is not opened.
  struct stat entry {};
  if (::lstat(path.string().c_str(), &entry) == 0 && !S_ISREG(entry.st_mode))
    return Status::fail("cannot read " + quote(path.string()) + ": is " +
                        file_kind(static_cast<unsigned>(entry.st_mode)));
  std::string text;
  if (Status st = read_untrusted_file(path.string(), kMaxManifestBytes, text); !st.is_ok()) return st;
  const json j = json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) {
    return Status::fail(quote(path.string()) + " is not a checkpoint manifest: " + why);
  };
  if (!j.is_object()) return bad("not a JSON object");
  for (const auto& [key, v] : j.items())
    if (key != "format" && key != "version" && key != "id" && key != "files")
      return bad("unknown key " + brief(key));
  if (!j.contains("format") || j["format"] != "attnviz checkpoint")
    return bad("its format is not \"attnviz checkpoint\"");
  if (!j.contains("version") || !j["version"].is_number_unsigned() || j["version"] != 1)
    return bad("its version is not 1");
  if (!j.contains("id") || !hex16(j["id"])) return bad("its id is not 16 hex digits");
  out.id = j["id"].get<std::string>();
  if (!j.contains("files") || !j["files"].is_object()) return bad("no \"files\" object");
  out.files.clear();
  for (const auto& [name, v] : j["files"].items()) {
    if (!set_name(name)) return bad("it lists " + brief(name) + ", no file of a checkpoint");
    SetFile f;
    if (!v.is_object() || v.size() != 2 || !v.contains("bytes") || !v["bytes"].is_number_unsigned() ||
        !v.contains("hash") || !hex16(v["hash"], &f.hash))
      return bad(name + "'s entry is not {\"bytes\": N, \"hash\": 16 hex digits}");
    f.bytes = v["bytes"].get<std::uint64_t>();
    out.files[name] = f;
  }
  if (!out.files.count("model.safetensors") || !out.files.count("config.json"))
    return bad("it does not list model.safetensors and config.json");
  return Status::ok();
}

// Whether `path` is a regular file of `want.bytes` bytes whose hash is `want.hash`; `why` says how not. The
// entry itself, not what it points to: a symbolic link (to a file elsewhere, or to one of the set) is no
// file of the set, and a FIFO or device is refused without being opened for reading (which could block).
bool file_matches(const fs::path& path, const SetFile& want, std::string& why,
                  const char* listed_by = kManifest) {
  struct stat st {};
  if (::lstat(path.string().c_str(), &st) != 0) {
    why = errno == ENOENT ? "is missing" : std::string("cannot be read: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is " + file_kind(static_cast<unsigned>(st.st_mode)) + ", not a regular file";
    return false;
  }
  // O_NOFOLLOW | O_NONBLOCK: an entry swapped for a link or a FIFO since is refused, not followed or waited
  // on; fstat checks what was opened.
  const int fd = ::open(path.string().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = std::string("cannot be read: ") + std::strerror(errno);
    return false;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    why = "is not a regular file";
    return false;
  }
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (size != want.bytes) {
    ::close(fd);
    why = "has " + std::to_string(size) + " bytes, not the " + std::to_string(want.bytes) + " its " +
          listed_by + " lists";
    return false;
  }
  Hash64 h;
  std::vector<unsigned char> buf(std::size_t{1} << 20);
  std::uint64_t got = 0;
  bool error = false;
  // Full buffers until the end (Hash64 takes a multiple of 32 bytes but in its last call).
  for (;;) {
    std::size_t n = 0;
    while (n < buf.size()) {
      const ssize_t r = ::read(fd, buf.data() + n, buf.size() - n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        error = r < 0;
        break;
      }
      n += static_cast<std::size_t>(r);
    }
    h.update(buf.data(), n);
    got += n;
    if (n < buf.size() || error) break;
  }
  ::close(fd);
  if (error || got != want.bytes) {
    why = "cannot be read whole";
    return false;
  }
  if (h.digest() != want.hash) {
    why =
        std::string("holds other bytes than its ") + listed_by + " lists (another save's, or changed since)";
    return false;
  }
  return true;
}

// Flushes the folder's entries (the renames) to the disk, where the file system has folder handles.
void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.string().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

std::function<Status(const std::string&)>& write_hook() {
  static std::function<Status(const std::string&)> hook;
  return hook;
}

// The commit's second half, after checkpoint.pending.json: each NAME.tmp that the pending manifest lists
// renamed over NAME (NAME already matching: renamed before an interruption), the files of the old set that
// the new one lacks removed, the pending manifest made checkpoint.json. Run by the write and by a reader
// that finds the pending manifest (a write interrupted after its commit point).
// `written`: called by the write that has just written and flushed every NAME.tmp, which are renamed
// without being read again.
Status finish_pending(const fs::path& dir, bool written = false) {
  Manifest next;
  if (Status st = parse_manifest(dir / kPending, next); !st.is_ok()) return st;
  std::error_code ec;
  for (const auto& [name, f] : next.files) {
    const fs::path tmp = dir / (name + ".tmp");
    std::string why, why_tmp;
    if (written || (fs::exists(fs::symlink_status(tmp, ec)) && file_matches(tmp, f, why_tmp, kPending))) {
      fs::rename(tmp, dir / name, ec);
      if (ec)
        return Status::fail("cannot finish the checkpoint write in " + quote(dir.string()) + ": renaming " +
                            name + ".tmp: " + ec.message());
    } else if (!file_matches(dir / name, f, why, kPending)) {
      return Status::fail(quote(dir.string()) +
                          " holds a checkpoint write that was cut short and cannot be finished: its " + name +
                          " " + why);
    }
  }
  for (const char* name : kSetNames)
    if (!next.files.count(name)) {
      Manifest old;
      const bool owned = std::string(name) == "optimizer.safetensors" ||
                         (parse_manifest(dir / kManifest, old).is_ok() && old.files.count(name));
      if (owned) fs::remove(dir / name, ec);
    }
  sync_dir(dir);
  fs::rename(dir / kPending, dir / kManifest, ec);
  if (ec)
    return Status::fail("cannot finish the checkpoint write in " + quote(dir.string()) + ": " + ec.message());
  sync_dir(dir);
  return Status::ok();
}

// A file in `dir` that a model loader reads and that is no file of the checkpoint: one neither `listed` (the
// folder's checkpoint.json) lists nor `writing` (a set being written there) replaces. While writing,
// model.safetensors, config.json and optimizer.safetensors are the checkpoint's own names: an older
// checkpoint's (written before checkpoint.json) are replaced or removed.
Status foreign_files(const fs::path& dir, const Manifest* listed, const std::vector<std::string>* writing) {
  std::error_code ec;
  // a folder where the write renames a file would fail after its commit point: refused before it
  if (writing) {
    std::vector<std::string> targets = {kManifest, kPending, std::string(kPending) + ".tmp"};
    for (const char* name : kSetNames) targets.push_back(name), targets.push_back(std::string(name) + ".tmp");
    for (const std::string& name : targets)
      if (fs::is_directory(fs::symlink_status(dir / name, ec)))
        return Status::fail(quote(dir.string()) + " holds a folder named " + name +
                            ", where the checkpoint writes a file (remove it, or choose another folder)");
  }
  for (const char* name : kLoaderNames) {
    if (!fs::exists(fs::symlink_status(dir / name, ec))) continue;
    if (listed && listed->files.count(name)) continue;
    if (writing) {
      const std::string n = name;
      if (n == "model.safetensors" || n == "config.json" || n == "optimizer.safetensors" ||
          std::find(writing->begin(), writing->end(), n) != writing->end())
        continue;
    }
    return Status::fail(quote(dir.string()) + " holds " + name + ", which " +
                        (writing ? "the checkpoint would not write" : "its checkpoint.json does not list") +
                        ": a model loader would read it as the checkpoint's own (remove it" +
                        (writing ? ", or choose another folder)" : ")"));
  }
  return Status::ok();
}

// What a checkpoint copies from a tokenizer folder, as Bpe::load_dir reads it: tokenizer.json when there,
// else vocab.json + merges.txt, else GPT-2's encoder.json + vocab.bpe (saved as vocab.json + merges.txt).
Status tokenizer_files(const std::string& vocab_dir, std::vector<std::pair<std::string, std::string>>& out) {
  out.clear();
  if (vocab_dir.empty()) return Status::ok();
  const fs::path v(vocab_dir);
  std::error_code ec;
  constexpr std::size_t kMax = std::size_t{64} << 20;
  std::vector<std::pair<std::string, std::string>> from;  // saved name, read name
  if (fs::is_regular_file(v / "tokenizer.json", ec))
    from = {{"tokenizer.json", "tokenizer.json"}};
  else if (fs::is_regular_file(v / "vocab.json", ec) && fs::is_regular_file(v / "merges.txt", ec))
    from = {{"vocab.json", "vocab.json"}, {"merges.txt", "merges.txt"}};
  else
    from = {{"vocab.json", "encoder.json"}, {"merges.txt", "vocab.bpe"}};
  for (const auto& [saved, read] : from) {
    std::string bytes;
    if (Status st = read_untrusted_file((v / read).string(), kMax, bytes); !st.is_ok()) return st;
    out.emplace_back(saved, std::move(bytes));
  }
  return Status::ok();
}

// The folder's checkpoint.json (a pending write finished first); `has` false for a folder without one.
Status current_manifest(const fs::path& dir, Manifest& m, bool& has) {
  std::error_code ec;
  has = false;
  if (fs::exists(fs::symlink_status(dir / kPending, ec)))
    if (Status st = finish_pending(dir); !st.is_ok()) return st;
  if (!fs::exists(fs::symlink_status(dir / kManifest, ec))) return Status::ok();
  if (Status st = parse_manifest(dir / kManifest, m); !st.is_ok()) return st;
  has = true;
  return Status::ok();
}

}  // namespace

std::uint64_t run_data_hash(const Windows& train, const Windows& val) {
  std::uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  for (const Windows* w : {&train, &val}) {
    mix(static_cast<std::uint64_t>(w->max_length));
    mix(w->starts.size());
    for (int start : w->starts) mix(static_cast<std::uint64_t>(start));
    if (w->ids) {
      mix(w->ids->size());
      for (int id : *w->ids) mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(id)));
    }
  }
  return h;
}

namespace {

std::string hex_of(const std::vector<std::uint8_t>& bytes) {
  std::string s;
  for (std::uint8_t b : bytes) s += kHex[b >> 4], s += kHex[b & 15];
  return s;
}

// A strict real number: an optional '-', digits, optionally '.' and digits, optionally an exponent (what
// number() writes for finite values), finite. No spaces, no "inf" or "nan", no hex floats.
std::optional<double> real(const std::string& s) {
  if (s.empty() || s.size() > 40) return std::nullopt;
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > from;
  };
  if (s[i] == '-') ++i;
  if (!digits()) return std::nullopt;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::map<std::string, std::string> run_state_metadata(const RunState& r) {
  if (r.task == RunTask::induction) {
    const InductionRunState& n = r.induction;
    return {{"run.version", "1"},
            {"run.task", "induction"},
            {"run.global_step", std::to_string(n.steps)},
            {"run.total_steps", std::to_string(n.total_steps)},
            {"run.eval_freq", std::to_string(n.eval_freq)},
            {"run.batch_size", std::to_string(r.batch_size)},
            {"run.vocab", std::to_string(n.task.vocab)},
            {"run.tokens", std::to_string(n.task.tokens)},
            {"run.min_repeat", std::to_string(n.task.min_repeat)},
            {"run.max_repeat", std::to_string(n.task.max_repeat)},
            {"run.fixed_distance", std::to_string(n.task.fixed_distance)},
            {"run.lr", number(n.lr)},
            {"run.weight_decay", number(n.weight_decay)},
            {"run.first_induction", n.first_induction < 0 ? "none" : std::to_string(n.first_induction)},
            {"run.dropout_rng", to_string(r.dropout_rng)},
            {"run.rng_state", hex_of(r.rng)},
            {"run.data_rng_state", hex_of(n.data_rng)}};
  }
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(r.data_hash));
  const TrainPosition& p = r.position;
  std::map<std::string, std::string> m = {
      {"run.version", r.settings ? "2" : "1"},
      {"run.epoch", std::to_string(p.epoch)},
      {"run.batch", std::to_string(p.batch)},
      {"run.global_step", std::to_string(p.global_step + 1)},  // steps taken: never negative
      {"run.tokens_seen", std::to_string(p.tokens_seen)},
      {"run.sampler_seed", std::to_string(p.sampler_seed)},
      {"run.batch_size", std::to_string(r.batch_size)},
      {"run.train_windows", std::to_string(r.train_windows)},
      {"run.val_windows", std::to_string(r.val_windows)},
      {"run.data_hash", hash},
      {"run.dropout_rng", to_string(r.dropout_rng)},
      {"run.rng_state", hex_of(r.rng)}};
  if (const std::optional<BookRunSettings>& b = r.settings) {
    m.insert({{"run.epochs", std::to_string(b->epochs)},
              {"run.eval_freq", std::to_string(b->eval_freq)},
              {"run.eval_iter", std::to_string(b->eval_iter)},
              {"run.lr", number(b->lr)},
              {"run.weight_decay", number(b->weight_decay)},
              {"run.schedule", b->use_schedule ? "warmup_cosine" : "constant"}});
    if (b->use_schedule)
      m.insert({{"run.warmup_steps", std::to_string(b->schedule.warmup_steps)},
                {"run.initial_lr", number(b->schedule.initial_lr)},
                {"run.min_lr", number(b->schedule.min_lr)},
                {"run.max_norm", number(b->schedule.max_norm)}});
  }
  return m;
}

Status parse_run_state(const std::map<std::string, std::string>& meta, std::optional<RunState>& out) {
  out.reset();
  const auto version = meta.find("run.version");
  if (version == meta.end()) return Status::ok();
  if (version->second != "1" && version->second != "2")
    return Status::fail("its run state is version " + quote(version->second) + ", not 1 or 2");
  const auto text = [&](const char* key, const std::string*& v) -> Status {
    const auto it = meta.find(key);
    if (it == meta.end()) return Status::fail(std::string("its run state has no ") + key);
    v = &it->second;
    return Status::ok();
  };
  const auto whole = [&](const char* key, std::uint64_t max, std::uint64_t& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<std::uint64_t> x = decimal(*s, max);
    if (!x)
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a whole number up to " +
                          std::to_string(max));
    v = *x;
    return Status::ok();
  };
  // a generator's state: the hex of the bytes TorchGenerator::state() writes, checked by set_state and kept
  // as state() writes it back (the bytes set_state ignores as zeros)
  const auto generator = [&](const char* key, std::vector<std::uint8_t>& bytes) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    if (s->size() != 2 * kTorchRngStateBytes || s->find_first_not_of(kHex) != std::string::npos)
      return Status::fail(std::string("its ") + key + " is not " + std::to_string(2 * kTorchRngStateBytes) +
                          " lowercase hex digits");
    bytes.clear();
    for (std::size_t i = 0; i < s->size(); i += 2)
      bytes.push_back(static_cast<std::uint8_t>(std::stoi(s->substr(i, 2), nullptr, 16)));
    TorchGenerator check;
    if (Status st = check.set_state(bytes.data(), bytes.size()); !st.is_ok())
      return Status::fail(std::string("its ") + key + ": " + st.error);
    bytes = check.state();
    return Status::ok();
  };
  const auto positive_real = [&](const char* key, double& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<double> x = real(*s);
    if (!x || !(*x > 0))
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a positive number");
    v = *x;
    return Status::ok();
  };
  const auto nonnegative_real = [&](const char* key, double& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<double> x = real(*s);
    if (!x || !(*x >= 0))
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a number of 0 or more");
    v = *x;
    return Status::ok();
  };
  RunState r;
  const std::string* s = nullptr;
  if (const auto task = meta.find("run.task"); task != meta.end()) {
    if (task->second == "induction")
      r.task = RunTask::induction;
    else if (task->second != "book")
      return Status::fail("its run.task is " + brief(task->second) + ", not book or induction");
  }
  if (Status st = text("run.dropout_rng", s); !st.is_ok()) return st;
  const std::optional<DropoutRng> flavour = parse_dropout_rng(*s);
  if (!flavour) return Status::fail("its run.dropout_rng is " + brief(*s) + ", not cpu or mkl");
  r.dropout_rng = *flavour;
  constexpr std::uint64_t kInt = 0x7FFFFFFF;

  if (r.task == RunTask::induction) {
    InductionRunState& n = r.induction;
    std::uint64_t steps = 0, total = 0, eval_freq = 0, batch_size = 0, vocab = 0, tokens = 0, min_repeat = 0,
                  max_repeat = 0, fixed = 0;
    for (auto [key, into] : {std::pair{"run.global_step", &steps},
                             {"run.total_steps", &total},
                             {"run.eval_freq", &eval_freq},
                             {"run.batch_size", &batch_size},
                             {"run.vocab", &vocab},
                             {"run.tokens", &tokens},
                             {"run.min_repeat", &min_repeat},
                             {"run.max_repeat", &max_repeat},
                             {"run.fixed_distance", &fixed}})
      if (Status st = whole(key, kInt, *into); !st.is_ok()) return st;
    if (batch_size < 1 || eval_freq < 1 || total < 1)
      return Status::fail(
          "its run state's batch size, evaluation frequency and total steps must be at least 1");
    if (steps > total)
      return Status::fail("its run state has taken " + std::to_string(steps) +
                          " steps, more than its total of " + std::to_string(total));
    n.task.vocab = static_cast<int>(vocab), n.task.tokens = static_cast<int>(tokens);
    n.task.min_repeat = static_cast<int>(min_repeat), n.task.max_repeat = static_cast<int>(max_repeat);
    n.task.fixed_distance = static_cast<int>(fixed);
    if (Status st = validate(n.task); !st.is_ok()) return Status::fail("its run state's task: " + st.error);
    n.steps = static_cast<int>(steps), n.total_steps = static_cast<int>(total);
    n.eval_freq = static_cast<int>(eval_freq);
    r.batch_size = static_cast<int>(batch_size);
    if (Status st = positive_real("run.lr", n.lr); !st.is_ok()) return st;
    if (Status st = nonnegative_real("run.weight_decay", n.weight_decay); !st.is_ok()) return st;
    if (Status st = text("run.first_induction", s); !st.is_ok()) return st;
    if (*s != "none") {
      const std::optional<std::uint64_t> first = decimal(*s, steps);
      if (!first)
        return Status::fail("its run.first_induction is " + brief(*s) + ", not none or a step up to " +
                            std::to_string(steps));
      n.first_induction = static_cast<int>(*first);
    }
    if (Status st = generator("run.rng_state", r.rng); !st.is_ok()) return st;
    if (Status st = generator("run.data_rng_state", n.data_rng); !st.is_ok()) return st;
    out = std::move(r);
    return Status::ok();
  }

  std::uint64_t epoch = 0, batch = 0, steps = 0, tokens = 0, seed = 0, batch_size = 0, train_windows = 0,
                val_windows = 0;
  for (auto [key, max, into] : {std::tuple{"run.epoch", kInt, &epoch},
                                {"run.batch", kInt, &batch},
                                {"run.global_step", kInt, &steps},
                                {"run.tokens_seen", std::uint64_t{1} << 62, &tokens},
                                {"run.sampler_seed", (std::uint64_t{1} << 63) - 1, &seed},
                                {"run.batch_size", kInt, &batch_size},
                                {"run.train_windows", kInt, &train_windows},
                                {"run.val_windows", kInt, &val_windows}})
    if (Status st = whole(key, max, *into); !st.is_ok()) return st;
  if (batch_size < 1 || train_windows < batch_size)
    return Status::fail("its run state's batch size " + std::to_string(batch_size) + " does not fit its " +
                        std::to_string(train_windows) + " training windows");
  const std::uint64_t batches = train_windows / batch_size;
  if (batch > batches || epoch * batches + batch != steps)
    return Status::fail("its run state's position (epoch " + std::to_string(epoch) + ", batch " +
                        std::to_string(batch) + ", " + std::to_string(steps) +
                        " steps) is inconsistent with " + std::to_string(batches) + " batches an epoch");
  if (Status st = text("run.data_hash", s); !st.is_ok()) return st;
  if (s->size() != 16 || s->find_first_not_of(kHex) != std::string::npos)
    return Status::fail("its run.data_hash is " + brief(*s) + ", not 16 hex digits");
  r.data_hash = std::stoull(*s, nullptr, 16);
  if (Status st = generator("run.rng_state", r.rng); !st.is_ok()) return st;
  r.position.epoch = static_cast<int>(epoch);
  r.position.batch = static_cast<int>(batch);
  r.position.global_step = static_cast<int>(steps) - 1;
  r.position.tokens_seen = static_cast<std::int64_t>(tokens);
  r.position.sampler_seed = seed;
  r.batch_size = static_cast<int>(batch_size);
  r.train_windows = static_cast<int>(train_windows);
  r.val_windows = static_cast<int>(val_windows);
  if (version->second == "2") {  // the run's settings: what makes the rest of it
    BookRunSettings b;
    std::uint64_t epochs = 0, eval_freq = 0, eval_iter = 0;
    for (auto [key, into] :
         {std::pair{"run.epochs", &epochs}, {"run.eval_freq", &eval_freq}, {"run.eval_iter", &eval_iter}})
      if (Status st = whole(key, kInt, *into); !st.is_ok()) return st;
    if (epochs < 1 || eval_freq < 1 || eval_iter < 1)
      return Status::fail(
          "its run state's epochs, evaluation frequency and evaluation batches must be at least 1");
    const std::uint64_t total = epochs * batches;  // both below 2^31: no overflow
    if (total > kInt)
      return Status::fail("its run state's " + std::to_string(epochs) + " epochs of " +
                          std::to_string(batches) + " batches are more than " + std::to_string(kInt) +
                          " steps");
    if (steps > total)
      return Status::fail("its run state has taken " + std::to_string(steps) + " steps, more than its " +
                          std::to_string(epochs) + " epochs of " + std::to_string(batches) + " batches");
    b.epochs = static_cast<int>(epochs), b.eval_freq = static_cast<int>(eval_freq);
    b.eval_iter = static_cast<int>(eval_iter);
    if (Status st = positive_real("run.lr", b.lr); !st.is_ok()) return st;
    if (Status st = nonnegative_real("run.weight_decay", b.weight_decay); !st.is_ok()) return st;
    if (Status st = text("run.schedule", s); !st.is_ok()) return st;
    if (*s != "constant" && *s != "warmup_cosine")
      return Status::fail("its run.schedule is " + brief(*s) + ", not constant or warmup_cosine");
    b.use_schedule = *s == "warmup_cosine";
    constexpr const char* kScheduleKeys[] = {"run.warmup_steps", "run.initial_lr", "run.min_lr",
                                             "run.max_norm"};
    if (!b.use_schedule) {
      for (const char* key : kScheduleKeys)
        if (meta.count(key))
          return Status::fail(std::string("its run state has ") + key + " but a constant learning rate");
    } else {
      std::uint64_t warmup = 0;
      if (Status st = whole("run.warmup_steps", kInt, warmup); !st.is_ok()) return st;
      if (warmup > total)
        return Status::fail("its run.warmup_steps " + std::to_string(warmup) + " is more than the run's " +
                            std::to_string(total) + " steps");
      b.schedule.warmup_steps = static_cast<int>(warmup);
      for (auto [key, into] : {std::pair{"run.initial_lr", &b.schedule.initial_lr},
                               {"run.min_lr", &b.schedule.min_lr},
                               {"run.max_norm", &b.schedule.max_norm}})
        if (Status st = nonnegative_real(key, *into); !st.is_ok()) return st;
    }
    r.settings = b;
  }
  out = std::move(r);
  return Status::ok();
}

void set_checkpoint_write_hook(std::function<Status(const std::string& file)> hook) {
  write_hook() = std::move(hook);
}

Status check_checkpoint_folder(const std::string& dir) {
  const fs::path folder(dir);
  Manifest m;
  bool has = false;
  if (Status st = current_manifest(folder, m, has); !st.is_ok()) return st;
  if (!has) return Status::ok();  // an older checkpoint, or no checkpoint: read as before
  for (const auto& [name, f] : m.files) {
    std::string why;
    if (!file_matches(folder / name, f, why))
      return Status::fail(quote(dir) + " is a torn checkpoint: its " + name + " " + why);
  }
  return foreign_files(folder, &m, nullptr);
}

Status check_checkpoint_out(const std::string& dir, const std::string& vocab_dir) {
  std::error_code ec;
  if (dir.empty()) return Status::fail("--out needs a folder");
  if (fs::exists(fs::symlink_status(dir, ec)) && !fs::is_directory(dir, ec))
    return Status::fail("cannot write a checkpoint to " + quote(dir) + ": it is not a folder");
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return Status::fail("cannot create the folder " + quote(dir) + (ec ? ": " + ec.message() : ""));
  const fs::path folder(dir);
  const fs::path probe = folder / ".attnviz-write-probe.tmp";
  if (Status st = write_new_file(probe.string(), "probe"); !st.is_ok()) {  // (a file cut short: removed)
    return Status::fail("cannot write a checkpoint to " + quote(dir) + ": " + st.error);
  }
  if (!fs::remove(probe, ec) || ec)
    return Status::fail("cannot write a checkpoint to " + quote(dir) + ": cannot remove a file there");
  std::vector<std::pair<std::string, std::string>> tokenizer;
  if (Status st = tokenizer_files(vocab_dir, tokenizer); !st.is_ok())
    return Status::fail("the tokenizer could not be saved with the checkpoint: " + st.error);
  Manifest old;
  bool has = false;
  if (Status st = current_manifest(folder, old, has); !st.is_ok()) return st;
  std::vector<std::string> writing;
  for (const auto& t : tokenizer) writing.push_back(t.first);
  return foreign_files(folder, has ? &old : nullptr, &writing);
}

Status write_checkpoint(const std::string& dir, const TrainModel& m, const AdamW& opt,
                        const std::string& vocab_dir, const RunState* run) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) return Status::fail("cannot create the folder " + quote(dir));
  const fs::path folder(dir);

  // Everything that can be refused is, before a byte is written: the tokenizer read, the folder's own set
  // (a write cut short after its commit point finished), files there that are not the checkpoint's.
  std::vector<std::pair<std::string, std::string>> tokenizer;
  if (Status st = tokenizer_files(vocab_dir, tokenizer); !st.is_ok()) return st;
  Manifest old;
  bool has_old = false;
  if (Status st = current_manifest(folder, old, has_old); !st.is_ok()) return st;
  std::vector<std::string> writing;
  for (const auto& t : tokenizer) writing.push_back(t.first);
  if (Status st = foreign_files(folder, has_old ? &old : nullptr, &writing); !st.is_ok()) return st;

  // Each file beside its name (NAME.tmp, flushed); on any failure they are removed and the folder's
  // checkpoint is as it was.
  Manifest next;
  std::vector<fs::path> written;
  const auto abandon = [&](Status st) {
    for (const fs::path& p : written) fs::remove(p, ec);
    return st;
  };
  const auto put = [&](const std::string& name, std::string bytes) -> Status {
    const fs::path tmp = folder / (name + ".tmp");
    written.push_back(tmp);
    if (Status st = write_new_file(tmp.string(), bytes); !st.is_ok()) return st;
    next.files[name] = {bytes.size(), hash_of(bytes)};
    if (write_hook())
      if (Status st = write_hook()(name); !st.is_ok()) return st;
    return Status::ok();
  };

  {
    std::vector<Named> params;
    m.params().each([&](const std::string& name, const Tensor& t) { params.push_back({name, &t}); });
    if (Status st = put("model.safetensors", safetensors(params, {{"format", "pt"}})); !st.is_ok())
      return abandon(st);
  }
  const GptConfig& c = m.config().gpt;
  json config = {{"vocab_size", c.vocab_size}, {"context_length", c.context_length},
                 {"emb_dim", c.d_model},       {"n_heads", c.n_heads},
                 {"n_layers", c.n_layers},     {"drop_rate", c.drop_rate},
                 {"qkv_bias", c.qkv_bias}};
  if (c.attention_only) config["attention_only"] = true;
  if (Status st = put("config.json", config.dump(2) + "\n"); !st.is_ok()) return abandon(st);

  if (opt.steps > 0) {
    std::vector<Named> moments;
    opt.exp_avg.each([&](const std::string& name, const Tensor& t) {
      moments.push_back({"exp_avg." + name, &t});
    });
    opt.exp_avg_sq.each([&](const std::string& name, const Tensor& t) {
      moments.push_back({"exp_avg_sq." + name, &t});
    });
    std::map<std::string, std::string> meta = {{"optimizer", "AdamW"},
                                               {"step", std::to_string(opt.steps)},
                                               {"lr", number(opt.lr)},
                                               {"beta1", number(opt.beta1)},
                                               {"beta2", number(opt.beta2)},
                                               {"eps", number(opt.eps)},
                                               {"weight_decay", number(opt.weight_decay)}};
    if (run) meta.merge(run_state_metadata(*run));
    if (Status st = put("optimizer.safetensors", safetensors(moments, meta)); !st.is_ok()) return abandon(st);
  }
  for (auto& [name, bytes] : tokenizer)
    if (Status st = put(name, std::move(bytes)); !st.is_ok()) return abandon(st);

  // The commit point: the new set's manifest, whole under its pending name. From here a reader finishes the
  // write (finish_pending) if it is cut short.
  {
    // the set's id: a hash of its files' entries, so that two saves that differ in any file differ in it
    std::string all;
    for (const auto& [name, f] : next.files)
      all += name + ":" + std::to_string(f.bytes) + ":" + hex64(f.hash) + ";";
    next.id = hex64(hash_of(all));
  }
  const fs::path pending_tmp = folder / (std::string(kPending) + ".tmp");
  written.push_back(pending_tmp);
  if (Status st = write_new_file(pending_tmp.string(), manifest_text(next)); !st.is_ok()) return abandon(st);
  sync_dir(folder);
  fs::rename(pending_tmp, folder / kPending, ec);
  if (ec)
    return abandon(Status::fail("cannot write " + quote((folder / kPending).string()) + ": " + ec.message()));
  return finish_pending(folder, true);
}

Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer) {
  std::optional<RunState> run;
  return read_checkpoint(path, m, opt, has_optimizer, run);
}

Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer,
                       std::optional<RunState>& run_out) {
  std::error_code ec;
  const fs::path folder = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  // a set written with checkpoint.json: whole, or refused by name (a write cut short after its commit point
  // is finished first)
  if (Status st = check_checkpoint_folder(folder.empty() ? std::string(".") : folder.string()); !st.is_ok())
    return st;
  GptLoadOptions lo;
  lo.isa = Isa::scalar;
  GptWeights w;
  if (Status st = load_gpt(path, lo, w); !st.is_ok()) return st;
  if (!w.config.gpt2_blocks())
    return Status::fail(
        quote(path) + " is a " + w.config.arch.name +
        " model, not a training checkpoint: training continues a GPT-2-shaped model (a folder "
        "written by attnviz-cli train --out or the Train panel's Save model)");
  TrainConfig c;
  c.gpt = w.config;
  GptTensors p;
  p.tok_emb = unpack(w.tok_emb);
  p.pos_emb = w.pos_emb;
  for (const GptBlock& b : w.blocks) {
    GptTensors::Block n;
    n.query_w = unpack(b.query.weight), n.query_b = b.query.bias;
    n.key_w = unpack(b.key.weight), n.key_b = b.key.bias;
    n.value_w = unpack(b.value.weight), n.value_b = b.value.bias;
    n.out_w = unpack(b.out_proj.weight), n.out_b = b.out_proj.bias;
    n.fc_w = unpack(b.fc.weight), n.fc_b = b.fc.bias;
    n.proj_w = unpack(b.proj.weight), n.proj_b = b.proj.bias;
    n.norm1_scale = b.norm1_scale, n.norm1_shift = b.norm1_shift;
    n.norm2_scale = b.norm2_scale, n.norm2_shift = b.norm2_shift;
    p.blocks.push_back(std::move(n));
  }
  p.final_scale = w.final_scale, p.final_shift = w.final_shift;
  p.out_head =
      unpack(w.head());  // a tied head (GPT-2's files) becomes a parameter of its own, as in the book
  TrainModel model;
  if (Status st = TrainModel::from_tensors(c, std::move(p), model); !st.is_ok()) return st;

  AdamW o;
  std::optional<RunState> run;
  has_optimizer = false;
  const fs::path optim = folder / "optimizer.safetensors";
  if (fs::exists(optim, ec)) {
    SafetensorsFile f;
    if (Status st = SafetensorsFile::open(optim.string(), f); !st.is_ok()) return st;
    const auto meta = f.metadata();
    const auto get = [&](const char* key, double& out) -> Status {
      const auto it = meta.find(key);
      char* end = nullptr;
      if (it == meta.end())
        return Status::fail(quote(optim.string()) + ": no " + key + " in its __metadata__");
      out = std::strtod(it->second.c_str(), &end);
      if (end == it->second.c_str() || *end != '\0' || !std::isfinite(out))
        return Status::fail(quote(optim.string()) + ": its " + key + " is " + quote(it->second) +
                            ", not a number");
      return Status::ok();
    };
    double step = 0;
    for (auto [key, out] : {std::pair{"step", &step},
                            {"lr", &o.lr},
                            {"beta1", &o.beta1},
                            {"beta2", &o.beta2},
                            {"eps", &o.eps},
                            {"weight_decay", &o.weight_decay}})
      if (Status st = get(key, *out); !st.is_ok()) return st;
    if (step < 1 || step > 1e15 || step != std::floor(step))
      return Status::fail(quote(optim.string()) + ": its step count is not a positive whole number");
    o.steps = static_cast<std::int64_t>(step);
    o.exp_avg = model.params().zeros_like();
    o.exp_avg_sq = model.params().zeros_like();
    for (auto [prefix_name, into] : {std::pair{"exp_avg.", &o.exp_avg}, {"exp_avg_sq.", &o.exp_avg_sq}}) {
      const std::string prefix = prefix_name;  // a lambda cannot capture a structured binding in C++17
      Status st;
      into->each([&](const std::string& name, Tensor& t) {
        if (!st.is_ok()) return;
        const SafeTensor* s = f.find(prefix + name);
        if (!s) {
          st = Status::fail(quote(optim.string()) + ": no tensor " + quote(prefix + name));
          return;
        }
        if (s->dtype != Dtype::f32 || s->shape != shape_of(t)) {
          st = Status::fail(quote(optim.string()) + ": tensor " + quote(prefix + name) +
                            " is not F32 of the parameter's shape");
          return;
        }
        widen(s->data, Dtype::f32, 0, t.size(), t.ptr());
      });
      if (!st.is_ok()) return st;
    }
    if (Status st = f.intact(); !st.is_ok()) return st;
    if (Status st = parse_run_state(meta, run); !st.is_ok())
      return Status::fail(quote(optim.string()) + ": " + st.error);
    if (run && run->task == RunTask::induction) {
      const InductionRunState& n = run->induction;
      if (n.steps > o.steps)
        return Status::fail(quote(optim.string()) + ": its run state has taken " + std::to_string(n.steps) +
                            " steps, its optimizer only " + std::to_string(o.steps));
      if (n.task.vocab > c.gpt.vocab_size || n.task.tokens > c.gpt.context_length)
        return Status::fail(quote(optim.string()) + ": its run state's task (" +
                            std::to_string(n.task.vocab) + " tokens, sequences of " +
                            std::to_string(n.task.tokens) +
                            ") does not fit the model's vocabulary and context length");
    } else if (run) {
      const TrainPosition& at = run->position;
      const std::int64_t steps = at.global_step + 1;
      if (steps > o.steps)
        return Status::fail(quote(optim.string()) + ": its run state has taken " + std::to_string(steps) +
                            " steps, its optimizer only " + std::to_string(o.steps));
      if (at.tokens_seen != steps * run->batch_size * c.gpt.context_length)
        return Status::fail(quote(optim.string()) + ": its run state's tokens_seen " +
                            std::to_string(at.tokens_seen) + " is not its steps times the batch's tokens");
    }
    has_optimizer = true;
  }
  m = std::move(model);
  opt = std::move(o);
  run_out = std::move(run);
  return Status::ok();
}

}  // namespace attnviz
