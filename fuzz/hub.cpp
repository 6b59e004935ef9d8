// Fuzzes what attnviz reads from the Hugging Face hub and its cache: a model name (ORG/NAME[@REV]), a refs/
// file, model.safetensors.index.json's shard list and the header values (ETag, Content-Length,
// Content-Range). Every parser sees every input; whatever they accept must keep its promise: a name's cache
// folder is one plain path segment, a shard or an ETag is a plain file name, a range lies inside its total.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/io/hf_hub.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool plain(std::string_view s) {
  return attnviz::is_plain_file_name(s) && s.find("..") == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  attnviz::HubName name;
  const attnviz::Status st = attnviz::parse_hub_name(in, name);
  require(st.is_ok() || (!st.error.empty() && st.error.find('\n') == std::string::npos));
  if (st.is_ok()) {
    require(plain(name.folder()) && name.folder().find('@') == std::string::npos);
    require(!name.revision.empty() && name.revision.find("..") == std::string::npos &&
            name.revision.front() != '/' && name.revision.back() != '/');
  }
  (void)attnviz::looks_like_hub_name(in);

  std::string commit;
  if (attnviz::parse_ref(in, commit).is_ok()) require(attnviz::is_commit_hash(commit));

  std::vector<std::string> shards;
  std::uint64_t total = 0;
  const attnviz::Status index = attnviz::parse_shard_index(in, shards, total);
  if (index.is_ok()) {
    require(!shards.empty());
    for (const std::string& s : shards) require(attnviz::is_plain_file_name(s) && s != "." && s != "..");
  } else {
    require(index.error.find('\n') == std::string::npos);
  }

  if (const auto etag = attnviz::etag_file_name(in)) require(plain(*etag) && etag->front() != '.');
  if (const auto n = attnviz::parse_content_length(in)) require(*n < (std::uint64_t{1} << 63));
  if (const auto r = attnviz::parse_content_range(in)) require(r->first <= r->last && r->last < r->total);
  return 0;
}
