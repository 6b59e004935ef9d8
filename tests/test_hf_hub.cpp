// Hugging Face names, the small texts of the hub and its cache (refs, shard indexes, header values), and the
// cache lookup behind --model ORG/NAME: refs/main, @branch, @commit, and links that lead outside refused.
// The downloads themselves are tests/hub_test.py's, against a local stand-in for the hub.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/io/hf_hub.hpp"
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
  CHECK(name_error("-a/b").find("start or end") != std::string::npos);
  CHECK(name_error("a/b.").find("start or end") != std::string::npos);
  CHECK(name_error("/b").find("organization is empty") != std::string::npos);
  CHECK(name_error("a/" + std::string(97, 'x')).find("longer than 96") != std::string::npos);
  CHECK(name_error("a/b@").find("revision after '@' is empty") != std::string::npos);
  CHECK(name_error("a/b@../../x").find("\"..\"") != std::string::npos);
  CHECK(name_error("a/b@x//y").find("\"//\"") != std::string::npos);
  CHECK(name_error("a/b@/x").find("start or end with '/'") != std::string::npos);
  CHECK(name_error("a/b@x y").find("may hold only") != std::string::npos);

  CHECK(attnviz::looks_like_hub_name("org/name"));
  CHECK(attnviz::looks_like_hub_name("org/name@v1"));
  CHECK(attnviz::looks_like_hub_name("org/name@refs/pr/1"));
  for (const char* path : {"gpt2-small", "./org/name", "/abs/name", "a/b/c", "dir/model.safetensors",
                           "dir/config.json", "~/x", ""})
    CHECK_MESSAGE(!attnviz::looks_like_hub_name(path), path);
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

  CHECK(attnviz::etag_file_name("\"abc123\"") == "abc123");
  CHECK(attnviz::etag_file_name("W/\"abc-1.2_3\"") == "abc-1.2_3");
  CHECK(attnviz::etag_file_name(" deadbeef\r\n") == "deadbeef");
  for (const char* bad : {"", "\"\"", "\"../x\"", "\".hidden\"", "\"a/b\"", "\"a b\"", "b.."})
    CHECK_MESSAGE(!attnviz::etag_file_name(bad), bad);
  CHECK_FALSE(attnviz::etag_file_name(std::string(129, 'a')));

  CHECK(attnviz::parse_content_length("292776") == 292776u);
  CHECK(attnviz::parse_content_length(" 42\r\n") == 42u);
  CHECK(attnviz::parse_content_length("999999999999999999") == 999999999999999999u);
  for (const char* bad : {"", "-1", "1e3", "0x10", "12 34", "9999999999999999999"})
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
  REQUIRE(attnviz::resolve_model_path("tiny/gpt2", path).is_ok());
  CHECK(path == (repo / "snapshots" / kCommit).string());
  REQUIRE(attnviz::resolve_model_path("tiny/gpt2@v1", path).is_ok());
  CHECK(path == (repo / "snapshots" / kOther).string());
  REQUIRE(attnviz::resolve_model_path("tiny/gpt2@" + kOther, path).is_ok());
  CHECK(path == (repo / "snapshots" / kOther).string());
  REQUIRE(attnviz::resolve_model_path(kFolder, path).is_ok());  // a path stays a path
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

  const auto error = [](const std::string& model) {
    std::string p;
    return attnviz::resolve_model_path(model, p).error;
  };
  CHECK(error("tiny/absent").find("is not in the Hugging Face cache") != std::string::npos);
  CHECK(error("tiny/absent").find("--download") != std::string::npos);
  CHECK(error("tiny/gpt2@v2").find("the cache has no revision 'v2'") != std::string::npos);
  CHECK(error("tiny/gpt2@" + std::string(40, 'a')).find("has no snapshot") != std::string::npos);
  CHECK(error("tiny/gpt2@a/../../x").find("\"..\"") != std::string::npos);
  tmp.write("hub/models--tiny--gpt2/refs/bad", std::string("../../../etc"));
  CHECK(error("tiny/gpt2@bad").find("not a 40-hex commit") != std::string::npos);

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
