// Hugging Face names, the small texts of the hub and its cache (refs, shard indexes, header values), and the
// cache lookup behind --model ORG/NAME: refs/main, @branch, @commit, and links that lead outside refused.
// The downloads themselves are tests/hub_test.py's, against a local stand-in for the hub.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnviz/io/hf_hub.hpp"
#include "attnviz/io/model_ref.hpp"
#include "attnviz/io/model_source.hpp"
#include "safetensors_writer.hpp"

namespace fs = std::filesystem;
using attnviz::HubName;
using attnviz::Status;

namespace {

const std::string kFolder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kOther = "89abcdef0123456789abcdef0123456789abcdef";

std::string name_error(const std::string& s) {
  HubName n;
  const Status st = attnviz::parse_hub_name(s, n);
  return st.error;
}

// An environment variable set for one test and restored after it.
struct Env {
  std::string name;
  std::optional<std::string> old;
  Env(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value)
      setenv(name.c_str(), value, 1);
    else
      unsetenv(name.c_str());
  }
  ~Env() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("Hugging Face names: ORG/NAME and ORG/NAME@REV as huggingface_hub takes repository ids") {
  HubName n;
  REQUIRE(attnviz::parse_hub_name("HuggingFaceTB/SmolLM2-135M", n).is_ok());
  CHECK(n.org == "HuggingFaceTB");
  CHECK(n.name == "SmolLM2-135M");
  CHECK(n.revision == "main");
  CHECK(n.folder() == "models--HuggingFaceTB--SmolLM2-135M");
  REQUIRE(attnviz::parse_hub_name("openai-community/gpt2@refs/pr/1", n).is_ok());
  CHECK(n.revision == "refs/pr/1");
  REQUIRE(attnviz::parse_hub_name("a_b/c.d@" + kCommit, n).is_ok());
  CHECK(n.revision == kCommit);

  CHECK(name_error("gpt2").find("give ORG/NAME") != std::string::npos);
  CHECK(name_error("a/b/c").find("its name may hold only") != std::string::npos);
  CHECK(name_error("a--b/c").find("\"--\"") != std::string::npos);
  CHECK(name_error("a/..b").find("\"..\"") != std::string::npos);
  CHECK(name_error("-a/b").find("must start with a letter or a digit") != std::string::npos);
  CHECK(name_error("_a/b").find("must start with a letter or a digit") != std::string::npos);
  CHECK(name_error("a/b.").find("may not end with '-' or '.'") != std::string::npos);
  CHECK(name_error("/b").find("organization is empty") != std::string::npos);
  CHECK(name_error("a/" + std::string(97, 'x')).find("longer than 96") != std::string::npos);
  CHECK(name_error("a/b@").find("revision after '@' is empty") != std::string::npos);
  CHECK(name_error("a/b@../../x").find("\"..\"") != std::string::npos);
  CHECK(name_error("a/b@x//y").find("\"//\"") != std::string::npos);
  CHECK(name_error("a/b@/x").find("must start with a letter or a digit") != std::string::npos);
  CHECK(name_error("a/b@-x").find("must start with a letter or a digit") != std::string::npos);
  CHECK(name_error("a/b@x/").find("end with '/'") != std::string::npos);
  CHECK(name_error("a/b@x y").find("may hold only") != std::string::npos);
}

TEST_CASE("The hub's small texts: refs, shard indexes and header values") {
  std::string commit;
  CHECK(attnviz::parse_ref(kCommit, commit).is_ok());
  CHECK(commit == kCommit);
  CHECK(attnviz::parse_ref(kCommit + "\n", commit).is_ok());
  CHECK(attnviz::parse_ref("main", commit).error.find("not a 40-hex commit") != std::string::npos);
  CHECK_FALSE(attnviz::parse_ref(kCommit.substr(1), commit).is_ok());
  CHECK_FALSE(attnviz::parse_ref(std::string(40, 'g'), commit).is_ok());
  CHECK_FALSE(attnviz::parse_ref(kCommit + "x", commit).is_ok());

  std::vector<std::string> shards;
  std::uint64_t total = 7;
  REQUIRE(attnviz::parse_shard_index(
              R"({"metadata":{"total_size":1234},"weight_map":{"a":"m-2.safetensors","b":"m-1.safetensors",)"
              R"("c":"m-2.safetensors"}})",
              shards, total)
              .is_ok());
  CHECK(shards == std::vector<std::string>{"m-2.safetensors", "m-1.safetensors"});  // nlohmann sorts keys
  CHECK(total == 1234);
  REQUIRE(attnviz::parse_shard_index(R"({"weight_map":{"a":"x.safetensors"}})", shards, total).is_ok());
  CHECK(total == 0);
  const auto index_error = [&](const std::string& text) {
    return attnviz::parse_shard_index(text, shards, total).error;
  };
  CHECK(index_error("[]").find("not a JSON object") != std::string::npos);
  CHECK(index_error("{").find("not a JSON object") != std::string::npos);
  CHECK(index_error("{}").find("no \"weight_map\"") != std::string::npos);
  CHECK(index_error(R"({"weight_map":{}})").find("names no shards") != std::string::npos);
  CHECK(index_error(R"({"weight_map":{"a":3}})").find("not a string") != std::string::npos);
  for (const char* bad : {"../x.safetensors", "sub/x.safetensors", "..", ".", "", "a\\\\b", "/etc/passwd"})
    CHECK_MESSAGE(
        index_error(std::string(R"({"weight_map":{"a":")") + bad + "\"}}").find("plain file name") !=
            std::string::npos,
        bad);

  CHECK(attnviz::etag_file_name("\"" + kCommit + "\"") == kCommit);
  CHECK(attnviz::etag_file_name("W/\"" + kCommit + kCommit.substr(0, 24) + "\"") ==
        kCommit + kCommit.substr(0, 24));
  CHECK(attnviz::etag_file_name(" " + kOther + "\r\n") == kOther);
  for (const char* bad : {"", "\"\"", "\"../x\"", "\".hidden\"", "\"a/b\"", "\"a b\"", "b..", "\"abc123\""})
    CHECK_MESSAGE(!attnviz::etag_file_name(bad), bad);
  CHECK(attnviz::parse_content_length("292776") == 292776u);
  CHECK(attnviz::parse_content_length(" 42\r\n") == 42u);
  CHECK(attnviz::parse_content_length("999999999999999999") == 999999999999999999u);
  for (const char* bad : {"", "-1", "1e3", "0x10", "12 34", "+5", "18446744073709551616"})
    CHECK_MESSAGE(!attnviz::parse_content_length(bad), bad);

  const auto range = attnviz::parse_content_range("bytes 100-199/200");
  REQUIRE(range);
  CHECK(range->first == 100);
  CHECK(range->last == 199);
  CHECK(range->total == 200);
  for (const char* bad :
       {"bytes 5-4/10", "bytes 0-10/10", "bytes */10", "items 0-1/2", "bytes 0-1", "bytes -1/2"})
    CHECK_MESSAGE(!attnviz::parse_content_range(bad), bad);
}

TEST_CASE("hub ETags: only a lowercase sha1 or sha256 names a blob, never another's .incomplete") {
  std::mt19937_64 rng(44);
  const std::string hex = "0123456789abcdef";
  const auto random_hex = [&](std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += hex[rng() % 16];
    return s;
  };
  for (std::size_t n = 0; n <= 130; ++n) {
    const std::string h = random_hex(n);
    const bool shaped = n == 40 || n == 64;
    for (const std::string& v : {h, "\"" + h + "\"", "W/\"" + h + "\""}) {
      const auto name = attnviz::etag_file_name(v);
      CHECK_MESSAGE(name.has_value() == shaped, v);
      if (name) CHECK(*name == h);
    }
    if (!shaped) continue;
    // One byte of another kind anywhere, an uppercase digit, a suffix or a path: refused.
    for (int k = 0; k < 40; ++k) {
      std::string bad = h;
      const std::size_t at = rng() % n;
      const std::string others = "ABCDEFghijxyz./-_ \t\"\\%:\x01\x7f\xc3";
      bad[at] = others[rng() % others.size()];
      CHECK_MESSAGE(!attnviz::etag_file_name("\"" + bad + "\""), bad);
    }
    for (const std::string tail : {".incomplete", ".lock", "/x", "0", ".", "-"})
      CHECK_MESSAGE(!attnviz::etag_file_name("\"" + h + tail + "\""), (h + tail));
    CHECK_FALSE(attnviz::etag_file_name("\"../" + h.substr(3) + "\""));
  }
}

TEST_CASE("hub sizes: decimal within uint64, and sums that saturate or are refused, never wrap") {
  CHECK(attnviz::parse_content_length("18446744073709551615") == UINT64_MAX);
  CHECK(attnviz::parse_content_length("00000000000000000000000042") == 42u);
  CHECK_FALSE(attnviz::parse_content_length("18446744073709551616"));
  CHECK_FALSE(attnviz::parse_content_length("99999999999999999999999999"));
  std::mt19937_64 rng(4402);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    CHECK(attnviz::parse_content_length(std::to_string(v)) == v);
    // Ten times v (and more) past 2^64 is refused, not wrapped.
    if (v > UINT64_MAX / 10)
      CHECK_FALSE(attnviz::parse_content_length(std::to_string(v) + std::to_string(i % 10)));
  }

  CHECK(attnviz::saturating_add(1, 2) == 3u);
  CHECK(attnviz::saturating_add(UINT64_MAX, 0) == UINT64_MAX);
  CHECK(attnviz::saturating_add(std::uint64_t{1} << 63, std::uint64_t{1} << 63) == UINT64_MAX);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t a = rng() >> (rng() % 4), b = rng() >> (rng() % 4);
    const std::uint64_t sum = attnviz::saturating_add(a, b);
    CHECK((a <= UINT64_MAX - b ? sum == a + b : sum == UINT64_MAX));
    CHECK(sum >= a);
    CHECK(sum >= b);
  }

  const std::uint64_t limit = attnviz::kMaxHubDownloadBytes;
  std::uint64_t total = 7;
  // 2^63 + 2^63 + 2^64-1 + 2 wraps a uint64 to 0: the first size is refused, by name and with both numbers.
  Status st = attnviz::sum_announced_sizes({{"a.safetensors", std::uint64_t{1} << 63},
                                            {"b.safetensors", std::uint64_t{1} << 63},
                                            {"c.safetensors", UINT64_MAX},
                                            {"d.safetensors", 2}},
                                           total);
  CHECK(
      st.error.find("9223372036854775808 bytes for 'a.safetensors', more than the 9007199254740992 bytes") !=
      std::string::npos);
  CHECK(total == 7);
  st = attnviz::sum_announced_sizes({{"config.json", 300}, {"x", limit - 299}, {"y", 0}}, total);
  CHECK(st.error.find("9007199254740993 bytes for the first 2 files (up to 'x')") != std::string::npos);
  REQUIRE(attnviz::sum_announced_sizes({{"config.json", 300}, {"x", limit - 300}, {"y", 0}}, total).is_ok());
  CHECK(total == limit);
  // Generated lists: accepted exactly when the true sum (two words, no wrap) is at most the limit.
  for (int i = 0; i < 500; ++i) {
    std::vector<attnviz::AnnouncedFile> files;
    std::uint64_t hi = 0, lo = 0;
    const int count = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < count; ++k) {
      const std::uint64_t size = (rng() % 4 == 0) ? rng() : rng() >> (12 + rng() % 52);
      files.push_back({"f" + std::to_string(k), size});
      lo += size;
      if (lo < size) ++hi;
    }
    const bool fits = hi == 0 && lo <= limit;
    std::uint64_t got = 0;
    const Status s = attnviz::sum_announced_sizes(files, got);
    CHECK(s.is_ok() == fits);
    if (fits) CHECK(got == lo);
    if (!fits) CHECK(s.error.find("more than the 9007199254740992 bytes (2^53)") != std::string::npos);
    CHECK(s.error.find('\n') == std::string::npos);
  }

  std::vector<std::string> shards;
  const std::string map = R"("weight_map":{"a":"x.safetensors"})";
  REQUIRE(attnviz::parse_shard_index("{\"metadata\":{\"total_size\":9007199254740992}," + map + "}", shards,
                                     total)
              .is_ok());
  CHECK(total == limit);
  for (const char* bad : {"18446744073709551616", "18446744073709551615", "9007199254740993", "-1", "1.5",
                          "1e3", "\"12\"", "null", "[]"})
    CHECK_MESSAGE(attnviz::parse_shard_index(
                      std::string("{\"metadata\":{\"total_size\":") + bad + "}," + map + "}", shards, total)
                          .error.find("metadata.total_size") != std::string::npos,
                  bad);
}

#if !defined(__EMSCRIPTEN__)  // the hosts look in the cache natively only (the page has none)

TEST_CASE("The cache folder: HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME, else HOME") {
  Env a("HF_HUB_CACHE", "/c/hub"), b("HF_HOME", "/h"), c("XDG_CACHE_HOME", "/x"), d("HOME", "/home/u");
  CHECK(attnviz::hub_cache_dir() == "/c/hub");
  unsetenv("HF_HUB_CACHE");
  CHECK(attnviz::hub_cache_dir() == "/h/hub");
  unsetenv("HF_HOME");
  CHECK(attnviz::hub_cache_dir() == "/x/huggingface/hub");
  unsetenv("XDG_CACHE_HOME");
  CHECK(attnviz::hub_cache_dir() == "/home/u/.cache/huggingface/hub");
}

TEST_CASE("--model ORG/NAME opens the cache's snapshot: refs/main, @branch, @commit, and links kept inside") {
  attnviz::test::TempDir tmp("hf_cache");
  const fs::path cache = tmp.path / "hub", repo = cache / "models--tiny--gpt2";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  // The fixture's files as blobs, linked from two snapshots as huggingface_hub links them.
  for (const std::string& commit : {kCommit, kOther}) {
    fs::create_directories(repo / "snapshots" / commit);
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"}) {
      const std::string blob = std::string("blob-") + f;
      fs::copy_file(kFolder + "/" + f, repo / "blobs" / blob, fs::copy_options::overwrite_existing);
      fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / commit / f);
    }
  }
  tmp.write("hub/models--tiny--gpt2/refs/main", kCommit);
  tmp.write("hub/models--tiny--gpt2/refs/v1", kOther + "\n");
  Env env("HF_HUB_CACHE", cache.c_str());

  std::string path;
  const auto resolve = [](const std::string& model, std::string& p) {
    return attnviz::resolve_model_path(attnviz::classify_model(model), p);
  };
  REQUIRE(resolve("tiny/gpt2", path).is_ok());
  CHECK(path == (repo / "snapshots" / kCommit).string());
  REQUIRE(resolve("tiny/gpt2@v1", path).is_ok());
  CHECK(path == (repo / "snapshots" / kOther).string());
  REQUIRE(resolve("tiny/gpt2@" + kOther, path).is_ok());
  CHECK(path == (repo / "snapshots" / kOther).string());
  REQUIRE(resolve(kFolder, path).is_ok());  // a path stays a path
  CHECK(path == kFolder);

  // The whole model opens from the snapshot, with the folder's own vocabulary, as the folder itself does.
  attnviz::ModelSpec spec;
  spec.model = "tiny/gpt2";
  attnviz::OpenedModel from_cache, from_folder;
  REQUIRE(attnviz::open_model(spec, from_cache).is_ok());
  spec.model = kFolder;
  REQUIRE(attnviz::open_model(spec, from_folder).is_ok());
  CHECK(from_cache.vocab_from == (repo / "snapshots" / kCommit).string());
  CHECK(from_cache.bpe.size() == from_folder.bpe.size());
  CHECK(from_cache.model.weights().config.n_layers == from_folder.model.weights().config.n_layers);
  CHECK(from_cache.model.weights().config.n_heads == from_folder.model.weights().config.n_heads);

  const auto error = [&resolve](const std::string& model) {
    std::string p;
    return resolve(model, p).error;
  };
  CHECK(error("tiny/absent").find("is not in the Hugging Face cache") != std::string::npos);
  CHECK(error("tiny/absent").find("--download") != std::string::npos);
  CHECK(error("tiny/gpt2@v2").find("the cache has no revision 'v2'") != std::string::npos);
  CHECK(error("tiny/gpt2@" + std::string(40, 'a')).find("has no snapshot") != std::string::npos);
  CHECK(error("tiny/gpt2@a/../../x").find("\"..\"") != std::string::npos);
  tmp.write("hub/models--tiny--gpt2/refs/bad", std::string("../../../etc"));
  CHECK(error("tiny/gpt2@bad").find("not a 40-hex commit") != std::string::npos);
  CHECK(error("tiny/gpt2@bad").find("../../../etc") == std::string::npos);  // a ref's bytes are never quoted

  // refs/REV that is a link, or a path through a linked folder, to a file outside: refused, its bytes (a
  // secret, a valid commit too) in no message.
  std::mt19937_64 rng(4403);
  for (int i = 0; i < 6; ++i) {
    char secret[64];
    std::snprintf(secret, sizeof secret, i % 2 ? "%016llx%016llx%08llx" : "SECRET-%016llx%016llx-%llx",
                  static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng() >> 32));
    const std::string outside_dir = "outside" + std::to_string(i);
    fs::create_directories(tmp.path / outside_dir);
    const std::string outside = tmp.write(outside_dir + "/main", std::string(secret));
    const std::string rev = "link" + std::to_string(i);
    fs::create_symlink(outside, repo / "refs" / rev);
    const std::string linked = error("tiny/gpt2@" + rev);
    CHECK(linked.find("is a link") != std::string::npos);
    CHECK_MESSAGE(linked.find(secret) == std::string::npos, linked);
    CHECK(linked.find(std::string(secret).substr(0, 16)) == std::string::npos);
    fs::create_directory_symlink(tmp.path / outside_dir, repo / "refs" / ("dir" + std::to_string(i)));
    const std::string through = error("tiny/gpt2@dir" + std::to_string(i) + "/main");
    CHECK(through.find("leads outside the model's cache folder") != std::string::npos);
    CHECK_MESSAGE(through.find(std::string(secret).substr(0, 16)) == std::string::npos, through);
    tmp.write("hub/models--tiny--gpt2/refs/plain" + std::to_string(i), std::string(secret) + "x");
    const std::string plain = error("tiny/gpt2@plain" + std::to_string(i));
    CHECK(plain.find("not a 40-hex commit") != std::string::npos);
    CHECK_MESSAGE(plain.find(std::string(secret).substr(0, 16)) == std::string::npos, plain);
  }
  // A link to a ref inside the folder is refused too: huggingface_hub writes none.
  fs::create_symlink("main", repo / "refs" / "alias");
  CHECK(error("tiny/gpt2@alias").find("is a link") != std::string::npos);

  // A link that leads outside the model's cache folder, absolute or relative, is refused.
  const std::string outside = tmp.write("outside.safetensors", std::string("not weights"));
  const fs::path link = repo / "snapshots" / kCommit / "model.safetensors";
  fs::remove(link);
  fs::create_symlink(outside, link);
  CHECK(error("tiny/gpt2").find("leads outside the model's cache folder") != std::string::npos);
  fs::remove(link);
  fs::create_symlink("../../../../outside.safetensors", link);
  CHECK(error("tiny/gpt2").find("'model.safetensors' is a link that leads outside") != std::string::npos);
  spec.model = "tiny/gpt2";
  attnviz::OpenedModel refused;
  CHECK(attnviz::open_model(spec, refused).error.find("leads outside") != std::string::npos);
  // ...and a snapshot folder that is itself a link elsewhere.
  fs::remove_all(repo / "snapshots" / kCommit);
  fs::create_directory_symlink(tmp.path, repo / "snapshots" / kCommit);
  CHECK(error("tiny/gpt2").find("snapshot " + kCommit + " leads outside") != std::string::npos);
}

#endif
