#include "attnviz/io/hf_hub.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnviz/io/files.hpp"
#include "attnviz/io/safetensors.hpp"
#include "attnviz/text.hpp"

namespace attnviz {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxRepoPart = 96;    // huggingface_hub's REPO_ID_MAX_LENGTH per part
constexpr std::size_t kMaxRevision = 128;   // git allows more; no branch a model uses comes near
constexpr std::size_t kMaxRefBytes = 4096;  // a ref holds 40 characters

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool repo_char(char c) {
  return alnum(c) || c == '_' || c == '-' || c == '.';
}

bool hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

Status check_repo_part(std::string_view part, std::string_view what, std::string_view whole) {
  const auto bad = [&](const std::string& why) {
    return Status::fail(quote(whole) + " is not a Hugging Face model name (ORG/NAME[@REV]): its " +
                        std::string(what) + " " + why);
  };
  if (part.empty()) return bad("is empty");
  if (part.size() > kMaxRepoPart)
    return bad("is longer than " + std::to_string(kMaxRepoPart) + " characters");
  for (char c : part)
    if (!repo_char(c)) return bad("may hold only letters, digits, '-', '_' and '.'");
  if (part.find("--") != std::string_view::npos || part.find("..") != std::string_view::npos)
    return bad("may not hold \"--\" or \"..\"");
  if (!alnum(part.front())) return bad("must start with a letter or a digit");
  if (part.back() == '-' || part.back() == '.') return bad("may not end with '-' or '.'");
  return Status::ok();
}

// The entries of `dir` that are links must resolve inside `root` (both canonical).
Status check_links_inside(const fs::path& dir, const fs::path& root, const std::string& shown) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return Status::fail("cannot read " + quote(dir.string(), kQuoteCap, '\0') + ": " + ec.message());
  const std::string prefix = root.string() + "/";
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::fail("cannot read " + quote(dir.string(), kQuoteCap, '\0') + ": " + ec.message());
    if (!it->is_symlink(ec)) continue;
    // weakly_canonical: a link whose blob is gone resolves as far as it can (the loader then names it)
    const fs::path target = fs::weakly_canonical(it->path(), ec);
    if (ec || target.string().rfind(prefix, 0) != 0)
      return Status::fail(shown + ": " + quote(it->path().filename().string()) +
                          " is a link that leads outside the model's cache folder; refusing to open it");
  }
  return Status::ok();
}

}  // namespace

Status parse_hub_name(std::string_view s, HubName& out) {
  const std::size_t at = s.find('@');
  const std::string_view repo = s.substr(0, at);
  const std::size_t slash = repo.find('/');
  if (slash == std::string_view::npos)
    return Status::fail(quote(s) + " is not a Hugging Face model name: give ORG/NAME or ORG/NAME@REV");
  HubName n;
  n.org = std::string(repo.substr(0, slash));
  n.name = std::string(repo.substr(slash + 1));
  if (Status st = check_repo_part(n.org, "organization", s); !st.is_ok()) return st;
  if (Status st = check_repo_part(n.name, "name", s); !st.is_ok()) return st;
  if (at != std::string_view::npos) {
    const std::string_view rev = s.substr(at + 1);
    const auto bad = [&](const std::string& why) {
      return Status::fail(quote(s) + ": the revision after '@' " + why);
    };
    if (rev.empty()) return bad("is empty");
    if (rev.size() > kMaxRevision)
      return bad("is longer than " + std::to_string(kMaxRevision) + " characters");
    for (char c : rev)
      if (!repo_char(c) && c != '/') return bad("may hold only letters, digits, '-', '_', '.' and '/'");
    if (rev.find("..") != std::string_view::npos || rev.find("//") != std::string_view::npos ||
        rev.back() == '/')
      return bad("may not hold \"..\" or \"//\", or end with '/'");
    if (!alnum(rev.front())) return bad("must start with a letter or a digit");
    n.revision = std::string(rev);
  }
  out = std::move(n);
  return Status::ok();
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!hex(c)) return false;
  return true;
}

Status parse_ref(std::string_view text, std::string& commit) {
  std::size_t end = text.size();
  while (end > 0 &&
         (text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == ' ' || text[end - 1] == '\t'))
    --end;
  const std::string_view hash = text.substr(0, end);
  if (!is_commit_hash(hash))  // its bytes unquoted: a ref that is a link could show another file's secret
    return Status::fail("holds " + std::to_string(text.size()) + " bytes that are not a 40-hex commit");
  commit = std::string(hash);
  return Status::ok();
}

bool is_plain_file_name(std::string_view s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\' || u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

Status parse_shard_index(std::string_view json, std::vector<std::string>& shards, std::uint64_t& total_size) {
  const nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::fail("is not a JSON object");
  const auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) return Status::fail("has no \"weight_map\" object");
  std::vector<std::string> names;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string())
      return Status::fail("names no file for the tensor " + quote(tensor) + " (not a string)");
    const std::string& f = file.get_ref<const std::string&>();
    if (!is_plain_file_name(f))
      return Status::fail("names the shard " + quote(f) +
                          ": a shard must be a plain file name beside the index (no folder, no \"..\")");
    if (std::find(names.begin(), names.end(), f) == names.end()) {
      if (names.size() ==
          kMaxWeightShards)  // the loader's cap: a larger model would download, then be refused
        return Status::fail("names more than " + std::to_string(kMaxWeightShards) +
                            " shards, the most attnviz reads");
      names.push_back(f);
    }
  }
  if (names.empty()) return Status::fail("names no shards (its \"weight_map\" is empty)");
  std::uint64_t total = 0;
  if (const auto meta = j.find("metadata"); meta != j.end() && meta->is_object()) {
    const auto t = meta->find("total_size");
    // nlohmann reads a number past 2^64 as a float and a negative one as a signed integer: both refused
    if (t != meta->end()) {
      if (!t->is_number_unsigned())
        return Status::fail("gives a metadata.total_size that is not a whole number of bytes");
      total = t->get<std::uint64_t>();
      if (total > kMaxHubDownloadBytes)
        return Status::fail("gives a metadata.total_size of " + std::to_string(total) +
                            " bytes, more than the " + std::to_string(kMaxHubDownloadBytes) +
                            " bytes (2^53) one download may hold");
    }
  }
  shards = std::move(names);
  total_size = total;
  return Status::ok();
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

Status sum_announced_sizes(const std::vector<AnnouncedFile>& files, std::uint64_t& total) {
  const std::string limit = std::to_string(kMaxHubDownloadBytes) + " bytes (2^53)";
  std::uint64_t sum = 0;
  for (const AnnouncedFile& f : files) {
    if (f.size > kMaxHubDownloadBytes)
      return Status::fail("the hub announces " + std::to_string(f.size) + " bytes for " + quote(f.name) +
                          ", more than the " + limit + " one download may hold");
    sum = saturating_add(sum, f.size);
    if (sum > kMaxHubDownloadBytes)  // each term is at most the limit: the sum has not saturated yet
      return Status::fail("the hub announces " + std::to_string(sum) + " bytes for the first " +
                          std::to_string(&f - files.data() + 1) + " files (up to " + quote(f.name) +
                          "), more than the " + limit + " one download may hold");
  }
  total = sum;
  return Status::ok();
}

std::optional<std::string> etag_file_name(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r' || v.back() == '\n'))
    v.remove_suffix(1);
  if (v.substr(0, 2) == "W/") v.remove_prefix(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (v.size() != 40 && v.size() != 64) return std::nullopt;
  for (char c : v)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return std::string(v);
}

std::optional<std::uint64_t> parse_content_length(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t' || v.back() == '\r' || v.back() == '\n'))
    v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return std::nullopt;  // past 2^64 - 1
    n = n * 10 + digit;
  }
  return n;
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
  if (v.substr(0, 6) != "bytes ") return std::nullopt;
  v.remove_prefix(6);
  const std::size_t dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) return std::nullopt;
  const auto first = parse_content_length(v.substr(0, dash));
  const auto last = parse_content_length(v.substr(dash + 1, slash - dash - 1));
  const auto total = parse_content_length(v.substr(slash + 1));
  if (!first || !last || !total || *first > *last || *last >= *total) return std::nullopt;
  return ContentRange{*first, *last, *total};
}

std::string hub_cache_dir() {
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string d = env("HF_HUB_CACHE"); !d.empty()) return d;
  if (std::string d = env("HF_HOME"); !d.empty()) return d + "/hub";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/huggingface/hub";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/huggingface/hub";
  return "";
}

Status find_in_hub_cache(const HubName& name, const std::string& cache, std::string& snapshot) {
  const std::string id = name.repo_id() + (name.revision == "main" ? "" : "@" + name.revision);
  const fs::path repo = fs::path(cache) / name.folder();
  std::error_code ec;
  if (cache.empty() || !fs::is_directory(repo, ec))
    return Status::fail(quote(id, kQuoteCap, '\0') + " is not in the Hugging Face cache (" +
                        (cache.empty() ? std::string("no HF_HUB_CACHE, HF_HOME or HOME set")
                                       : quote(cache, kQuoteCap, '\0')) +
                        "): add --download to fetch it from the hub, or run attnviz-cli download " +
                        quote(id, kQuoteCap, '\0'));
  const fs::path root = fs::canonical(repo, ec);
  if (ec) return Status::fail("cannot read " + quote(repo.string(), kQuoteCap, '\0') + ": " + ec.message());
  std::string commit = name.revision;
  if (!is_commit_hash(commit)) {
    const fs::path ref = repo / "refs" / name.revision;
    const fs::file_status kind = fs::symlink_status(ref, ec);
    if (!fs::exists(kind))
      return Status::fail(quote(id, kQuoteCap, '\0') + ": the cache has no revision " + quote(name.revision) +
                          " (no " + quote(ref.string(), kQuoteCap, '\0') +
                          "): add --download to fetch it from the hub");
    // A ref is a plain file in the repository's folder, as huggingface_hub writes it: a link, or a path
    // through a linked folder to elsewhere, is refused before a byte of it is read.
    const fs::path real_ref = fs::weakly_canonical(ref, ec);
    if (fs::is_symlink(kind) || ec || real_ref.string().rfind(root.string() + "/", 0) != 0)
      return Status::fail(quote(ref.string(), kQuoteCap, '\0') +
                          (fs::is_symlink(kind) ? " is a link (a ref is a file holding a commit)"
                                                : " leads outside the model's cache folder") +
                          "; refusing to read it");
    std::string text;
    if (Status st = read_untrusted_file(ref.string(), kMaxRefBytes, text); !st.is_ok()) return st;
    if (Status st = parse_ref(text, commit); !st.is_ok())
      return Status::fail(quote(ref.string(), kQuoteCap, '\0') + " " + st.error);
  }
  const fs::path snap = repo / "snapshots" / commit;
  if (!fs::is_directory(snap, ec))
    return Status::fail(quote(id, kQuoteCap, '\0') + ": the cache has no snapshot " + commit +
                        ": add --download to fetch it from the hub");
  const fs::path real_snap = fs::canonical(snap, ec);
  if (ec || real_snap.string().rfind(root.string() + "/", 0) != 0)
    return Status::fail(quote(id, kQuoteCap, '\0') + ": the snapshot " + commit +
                        " leads outside the model's cache folder; refusing to open it");
  if (Status st = check_links_inside(snap, root, quote(id, kQuoteCap, '\0')); !st.is_ok()) return st;
  snapshot = snap.string();
  return Status::ok();
}

}  // namespace attnviz
