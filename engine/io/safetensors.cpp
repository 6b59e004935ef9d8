#include "attnviz/io/safetensors.hpp"

#include "attnviz/io/files.hpp"
#include "attnviz/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(__EMSCRIPTEN__)
#include <signal.h>
#include <sys/mman.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace attnviz {

#if !defined(__EMSCRIPTEN__)
namespace {

// A mapped file that another program truncates (a download restarting, a checkpoint being rewritten) raises
// SIGBUS on the first read of a page past its new end, which ends the process without a word. Reading with
// pread instead reports the error, but the packing reads each matrix whole (a Conv1D weight's packed rows are
// the file's columns), so it would need each matrix copied out first: gpt2's 154 MB wte beside its packed
// copy is ~1.3x the packed weights at peak, against ~1.0x for the mapping whose pages are released as each
// tensor is packed. So the mapping stays, guarded: while a file is mapped, a SIGBUS inside its mapping maps a
// page of zeros over the faulting page and marks the file. The read goes on with zeros, and the loader, which
// checks intact() after each tensor and before handing out its result, refuses it: never a crash, never a
// silently wrong model. A SIGBUS anywhere else goes to the handler that was there before.
struct GuardSlot {
  std::atomic<bool> taken{false};
  std::atomic<std::uintptr_t> begin{0}, end{0};  // the mapping, [begin, end); begin 0 while unset
  std::atomic<bool> faulted{false};
};
// Files mapped at once; more are refused with a message. A sharded model's shards are all mapped while it
// loads (kMaxWeightShards); the table held 64 while the loader read up to 1,000 shards.
constexpr int kGuardSlots = static_cast<int>(SafetensorsFile::kMaxMappedFiles);
GuardSlot g_guard[kGuardSlots];
struct sigaction g_previous_sigbus {};
std::uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (GuardSlot& slot : g_guard) {
    const std::uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= slot.end.load(std::memory_order_acquire)) continue;
    void* page = reinterpret_cast<void*>(addr / g_page * g_page);
    if (mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      slot.faulted.store(true, std::memory_order_release);
      errno = saved_errno;
      return;  // the read is retried, and reads zeros
    }
  }
  errno = saved_errno;
  if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
    if (g_previous_sigbus.sa_sigaction) g_previous_sigbus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  // Not a mapped weights file: the default action, as if this handler had never been installed.
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_sigbus_handler() {
  static const bool installed = [] {
    g_page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, &g_previous_sigbus) == 0;
  }();
  (void)installed;
}

// A slot guarding [begin, begin + size), or -1 when every slot is taken.
int guard_mapping(const void* begin, std::size_t size) {
  install_sigbus_handler();
  for (int i = 0; i < kGuardSlots; ++i) {
    GuardSlot& slot = g_guard[i];
    bool expected = false;
    if (!slot.taken.compare_exchange_strong(expected, true)) continue;
    slot.faulted.store(false);
    slot.end.store(reinterpret_cast<std::uintptr_t>(begin) + size, std::memory_order_release);
    slot.begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_release);
    return i;
  }
  return -1;
}

void unguard_mapping(int i) {
  GuardSlot& slot = g_guard[i];
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_release);
  slot.taken.store(false, std::memory_order_release);
}

}  // namespace
#endif

struct SafetensorsFile::Storage {
  std::shared_ptr<const std::vector<unsigned char>> owned;  // bytes in memory (the page, or a WASM read)
  void* map = nullptr;                                      // or a read-only private mapping of the file
  std::size_t map_size = 0;
  int fd = -1;     // the mapped file, kept open to see its size shrink
  int guard = -1;  // the SIGBUS guard's slot for the mapping

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
#if !defined(__EMSCRIPTEN__)
    if (guard >= 0) unguard_mapping(guard);
    if (map) munmap(map, map_size);
    if (fd >= 0) ::close(fd);
#endif
  }
};

namespace {

struct DtypeName {
  const char* name;
  bool supported;
  Dtype dtype;
  std::size_t size;
};

// Every dtype the safetensors format defines; only the float types GPT-2 files use are read.
constexpr DtypeName kDtypes[] = {
    {"F32", true, Dtype::f32, 4},      {"F16", true, Dtype::f16, 2},      {"BF16", true, Dtype::bf16, 2},
    {"F64", false, Dtype::f32, 8},     {"BOOL", false, Dtype::f32, 1},    {"U8", false, Dtype::f32, 1},
    {"I8", false, Dtype::f32, 1},      {"I16", false, Dtype::f32, 2},     {"U16", false, Dtype::f32, 2},
    {"I32", false, Dtype::f32, 4},     {"U32", false, Dtype::f32, 4},     {"I64", false, Dtype::f32, 8},
    {"U64", false, Dtype::f32, 8},     {"F8_E5M2", false, Dtype::f32, 1}, {"F8_E4M3", false, Dtype::f32, 1},
    {"F8_E8M0", false, Dtype::f32, 1}, {"F6_E2M3", false, Dtype::f32, 1}, {"F6_E3M2", false, Dtype::f32, 1},
    {"F4", false, Dtype::f32, 1},      {"C64", false, Dtype::f32, 8},
};

}  // namespace

namespace {

std::string range(std::uint64_t a, std::uint64_t b) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return true;
  out = a * b;
  return false;
}

// A valid header nests three deep at most: {name: {"shape": [dims]}}.
constexpr int kMaxDepth = 3;

struct HeaderShape {
  int depth = 0;            // the deepest nesting of objects and arrays (no more is read past kMaxDepth)
  std::size_t entries = 0;  // members of the top-level object
  std::size_t values = 0;   // members of every object and elements of every array
};

// Brackets and commas outside strings, in one pass. For any prefix the JSON parser accepts, the
// depth found here is the parser's and the counts are its objects' members and arrays' elements; anything
// else is invalid JSON that the parser refuses.
HeaderShape scan_header(const char* p, std::size_t n) {
  HeaderShape s;
  int depth = 0;
  bool in_string = false, opened = false;  // opened: a container began and its first value is not seen yet
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (opened && c != '}' && c != ']') {
      ++s.values;
      if (depth == 1) ++s.entries;
    }
    opened = false;
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > s.depth) s.depth = depth;
      if (depth > kMaxDepth) return s;  // refused: the rest need not be read
      opened = true;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',') {
      ++s.values;
      if (depth == 1) ++s.entries;
    }
  }
  return s;
}

// Checks one header entry on its own (the tiling needs every entry); an empty string when it is consistent.
std::string check_entry(const std::string& key, const nlohmann::json& v, std::uint64_t data_size,
                        SafeTensor& t) {
  if (!v.is_object()) return "entry is not an object";
  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) return "no dtype string";
  const auto& dname = dt->get_ref<const std::string&>();
  const DtypeName* found = nullptr;
  for (const auto& d : kDtypes)
    if (dname == d.name) found = &d;
  if (!found) return "unknown dtype " + quote(dname);
  if (!found->supported) return "dtype " + dname + " is not supported (only F32, F16 and BF16 are)";

  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) return "no shape array";
  std::uint64_t numel = 1;
  for (const auto& dim : *sh) {
    if (dim.is_number_integer() && !dim.is_number_unsigned())
      return "shape has a negative dimension " + std::to_string(dim.get<std::int64_t>());
    if (!dim.is_number_unsigned()) return "shape is not a list of non-negative integers";
    t.shape.push_back(dim.get<std::uint64_t>());
  }
  for (std::uint64_t d : t.shape)
    if (mul_overflows(numel, d, numel)) return "shape " + shape_string(t.shape) + " has over 2^64 elements";
  std::uint64_t need = 0;
  if (mul_overflows(numel, found->size, need))
    return "shape " + shape_string(t.shape) + " needs over 2^64 bytes in " + dname;

  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return "no data_offsets [begin, end] of two non-negative integers";
  const auto begin = (*off)[0].get<std::uint64_t>(), end = (*off)[1].get<std::uint64_t>();
  if (end < begin) return "data_offsets " + range(begin, end) + " end before they begin";
  if (end > data_size)
    return "data_offsets " + range(begin, end) + " run past the end of the " + std::to_string(data_size) +
           "-byte data section";
  if (end - begin != need)
    return "data_offsets " + range(begin, end) + " hold " + std::to_string(end - begin) +
           " bytes but shape " + shape_string(t.shape) + " in " + dname + " needs " + std::to_string(need);

  // Everything below is at most the data section's size, which fits size_t.
  t.name = key;
  t.dtype = found->dtype;
  t.numel = static_cast<std::size_t>(numel);
  t.begin = static_cast<std::size_t>(begin);
  t.end = static_cast<std::size_t>(end);
  return {};
}

std::string os_error() {
  return std::strerror(errno);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string json_error_text(const std::exception& e) {
  std::string what = e.what();
  if (const auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
    what.erase(0, pos + 2);
  return what;
}

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  constexpr std::size_t kShown = 8;  // a header may give millions of dimensions: the message stays short
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size() && i < kShown; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() > kShown) s += ", ... (" + std::to_string(shape.size()) + " dims)";
  return s + "]";
}

const SafeTensor* SafetensorsFile::find(std::string_view tensor_name) const {
  const auto it = index_.find(tensor_name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool SafetensorsFile::mapped() const {
  return storage_ && storage_->map != nullptr;
}

Status SafetensorsFile::intact() const {
#if !defined(__EMSCRIPTEN__)
  if (!mapped()) return Status::ok();
  struct stat st {};
  const bool stat_ok = fstat(storage_->fd, &st) == 0;
  const bool faulted = g_guard[storage_->guard].faulted.load(std::memory_order_acquire);
  if (!faulted && stat_ok && static_cast<std::uintmax_t>(st.st_size) >= size_) return Status::ok();
  if (!stat_ok) return Status::fail(name_ + ": cannot stat the file while reading it (" + os_error() + ")");
  if (static_cast<std::uintmax_t>(st.st_size) >= size_)  // cut and written again, or a disk error
    return Status::fail(name_ +
                        ": part of the file could not be read while it was being read (it was "
                        "truncated and written again, or the disk failed)");
  return Status::fail(name_ + ": the file shrank to " + std::to_string(st.st_size) + " of its " +
                      std::to_string(size_) + " bytes while it was being read");
#else
  return Status::ok();
#endif
}

void SafetensorsFile::release([[maybe_unused]] const SafeTensor& t) const {
#if !defined(__EMSCRIPTEN__)
  if (!mapped() || t.bytes() == 0) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(t.data);
  const auto last = first + t.bytes();
  const std::uintptr_t lo = (first + page - 1) / page * page, hi = last / page * page;
  // The mapping itself starts on a page boundary, so [lo, hi) lies inside it and inside this tensor.
  if (lo < hi) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
#endif
}

Status SafetensorsFile::from_memory(std::shared_ptr<const std::vector<unsigned char>> bytes, std::string name,
                                    SafetensorsFile& out) {
  SafetensorsFile f;
  f.name_ = std::move(name);
  if (!bytes) bytes = std::make_shared<const std::vector<unsigned char>>();
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  f.bytes_ = storage->owned->data();
  f.size_ = storage->owned->size();
  f.storage_ = std::move(storage);
  if (Status s = f.parse(); !s.is_ok()) return s;
  out = std::move(f);
  return Status::ok();
}

Status SafetensorsFile::open(const std::string& path, SafetensorsFile& out) {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(path, kQuoteCap, '\0') + ": " + m);
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
  Fd fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (fd.fd < 0) return fail("cannot open (" + os_error() + ")");
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return fail("cannot stat (" + os_error() + ")");
  if (!S_ISREG(st.st_mode))
    return fail("is " + file_kind(static_cast<unsigned>(st.st_mode)) + ", not a .safetensors file");
  if (st.st_size == 0)
    return fail("is empty (0 bytes; /proc entries also report 0), not a .safetensors file");
  if (st.st_size < 8)
    return fail("is " + std::to_string(st.st_size) + " bytes, shorter than the 8-byte header length");
  if (static_cast<std::uintmax_t>(st.st_size) > std::numeric_limits<std::size_t>::max() / 2)
    return fail("is " + std::to_string(st.st_size) + " bytes, more than this build can address");
  const auto size = static_cast<std::size_t>(st.st_size);

  SafetensorsFile f;
  f.name_ = path;
  auto storage = std::make_shared<Storage>();
#if defined(__EMSCRIPTEN__)
  // No mmap requirement in the browser: the bytes are read into the module's memory.
  try {
    auto bytes = std::make_shared<std::vector<unsigned char>>(size);
    std::size_t got = 0;
    while (got < size) {
      const ssize_t n = ::read(fd.fd, bytes->data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail("cannot read (" + os_error() + ")");
      if (n == 0)
        return fail("ended after " + std::to_string(got) + " of its " + std::to_string(size) + " bytes");
      got += static_cast<std::size_t>(n);
    }
    storage->owned = std::move(bytes);
  } catch (const std::bad_alloc&) {
    return fail("is " + std::to_string(size) + " bytes, more than the memory available");
  }
  f.bytes_ = storage->owned->data();
#else
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) return fail("cannot map (" + os_error() + ")");
  storage->map = map;
  storage->map_size = size;
  storage->fd = std::exchange(fd.fd, -1);
  storage->guard = guard_mapping(map, size);
  if (storage->guard < 0)
    return fail("cannot be read: " + std::to_string(kGuardSlots) +
                " weights files are mapped already, the most this program maps at once");
  f.bytes_ = static_cast<const unsigned char*>(map);
#endif
  f.size_ = size;
  f.storage_ = std::move(storage);
  if (Status s = f.parse(); !s.is_ok()) return s;
  out = std::move(f);
  return Status::ok();
}

Status SafetensorsFile::parse() {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(name_, kQuoteCap, '\0') + ": " + m);
  };
  if (size_ < 8) return fail("is " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes_[i];
  if (n > kMaxHeaderBytes)
    return fail("header length " + std::to_string(n) + " is over the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > size_ - 8)
    return fail("header length " + std::to_string(n) + " runs past the end of the file (" +
                std::to_string(size_) + " bytes)");
  const auto header_size = static_cast<std::size_t>(n);
  const unsigned char* header = bytes_ + 8;
  data_start_ = 8 + header_size;
  const std::uint64_t data_size = size_ - data_start_;

  // One linear pass first: the nesting depth and the entry count are refused before the JSON is parsed.
  // (nlohmann's parser callback could limit the depth as it reads, but with a callback its end_object takes
  // a path that is quadratic in the entries: 25,000 took 9 s and 100,000 never finished.)
  const HeaderShape shape = scan_header(reinterpret_cast<const char*>(header), header_size);
  if (shape.depth > kMaxDepth) return fail("header nests deeper than a safetensors header can");
  if (shape.entries > kMaxEntries)
    return fail("header has " + std::to_string(shape.entries) + " entries, more than the limit of " +
                std::to_string(kMaxEntries) + " (models hold a few thousand tensors per file)");
  if (shape.values > kMaxValues)
    return fail("header holds " + std::to_string(shape.values) +
                " values (keys, numbers and strings), more " + "than the limit of " +
                std::to_string(kMaxValues));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header, header + header_size);
  } catch (const nlohmann::json::exception& e) {
    return fail("header is not JSON (" + json_error_text(e) + ")");
  } catch (const std::bad_alloc&) {
    return fail("header needs more memory than is available");
  }
  if (!j.is_object()) return fail("header is not a JSON object");

  std::vector<SafeTensor> tensors;
  tensors.reserve(j.size());
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return fail("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return fail("__metadata__ entry " + quote(mk) + " is not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    SafeTensor t;
    if (std::string e = check_entry(key, value, data_size, t); !e.empty())
      return fail("tensor " + quote(key) + ": " + e);
    t.data = bytes_ + data_start_ + t.begin;
    tensors.push_back(std::move(t));
  }

  // The tensors, in data order, tile the data section: no holes, no overlaps, nothing after the last one.
  std::sort(tensors.begin(), tensors.end(), [](const SafeTensor& a, const SafeTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::size_t at = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SafeTensor& t = tensors[i];
    if (t.begin > at)
      return fail("bytes " + range(at, t.begin) + " of the data section belong to no tensor (" +
                  (i ? "between tensors " + quote(tensors[i - 1].name) + " and " : "before tensor ") +
                  quote(t.name) + ")");
    if (t.begin < at)
      return fail("tensors " + quote(tensors[i - 1].name) + " " + range(tensors[i - 1].begin, at) + " and " +
                  quote(t.name) + " " + range(t.begin, t.end) + " overlap");
    at = t.end;
  }
  if (at != data_size)
    return fail("the tensors end at byte " + std::to_string(at) + " of the data section, but the file has " +
                std::to_string(data_size - at) + (data_size - at == 1 ? " more byte" : " more bytes"));

  tensors_ = std::move(tensors);
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return Status::ok();
}

}  // namespace attnviz
