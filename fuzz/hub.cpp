// Fuzzes what attnviz reads from the Hugging Face hub and its cache: a model name (ORG/NAME[@REV], also as a
// --model string told apart by classify_model), a refs/ file, model.safetensors.index.json's shard list and
// the header values (ETag, Content-Length, Content-Range), and the input's bytes as a list of announced sizes
// (sum_announced_sizes). Every parser sees every input; whatever they accept must keep its promise: a name's
// cache folder is one plain path segment, a shard is a plain file name, an ETag a lowercase sha1 or sha256, a
// length the decimal it reads, a range lies inside its total, a sum is exact and at most
// kMaxHubDownloadBytes (never wrapped), a ref's refusal quotes none of its bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/io/hf_hub.hpp"
#include "attnviz/io/model_ref.hpp"

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
  // As a --model string: a hub is exactly a name parse_hub_name takes or refuses in the same one line.
  const attnviz::ModelRef model = attnviz::classify_model(in);
  if (model.kind == attnviz::ModelRefKind::hub) {
    require(model.error == st.error);
    if (model.ok()) require(model.hub.repo_id() == name.repo_id() && model.hub.revision == name.revision);
  }

  std::string commit;
  const attnviz::Status ref = attnviz::parse_ref(in, commit);
  if (ref.is_ok())
    require(attnviz::is_commit_hash(commit));
  else  // never a byte of the ref: it may be a link to another file
    require(ref.error == "holds " + std::to_string(in.size()) + " bytes that are not a 40-hex commit");

  std::vector<std::string> shards;
  std::uint64_t total = 0;
  const attnviz::Status index = attnviz::parse_shard_index(in, shards, total);
  if (index.is_ok()) {
    require(!shards.empty());
    for (const std::string& s : shards) require(attnviz::is_plain_file_name(s) && s != "." && s != "..");
    require(total <= attnviz::kMaxHubDownloadBytes);
  } else {
    require(index.error.find('\n') == std::string::npos);
  }

  if (const auto etag = attnviz::etag_file_name(in)) {
    require(plain(*etag) && (etag->size() == 40 || etag->size() == 64));
    for (char c : *etag) require((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (const auto n = attnviz::parse_content_length(in)) {
    const std::string digits = std::to_string(*n);  // the input, less spaces and leading zeros
    require(in.find(digits) != std::string_view::npos);
  }

  // Eight bytes a size: the sum is accepted exactly when its true value (two words) is at most the limit.
  std::vector<attnviz::AnnouncedFile> files;
  std::uint64_t hi = 0, lo = 0;
  for (std::size_t at = 0; at + 8 <= size; at += 8) {
    std::uint64_t v = 0;
    std::memcpy(&v, data + at, 8);
    files.push_back({"f", v});
    lo += v;
    if (lo < v) ++hi;
  }
  std::uint64_t sum = 0;
  const attnviz::Status summed = attnviz::sum_announced_sizes(files, sum);
  require(summed.is_ok() == (hi == 0 && lo <= attnviz::kMaxHubDownloadBytes));
  if (summed.is_ok())
    require(sum == lo);
  else
    require(summed.error.find('\n') == std::string::npos);
  if (const auto r = attnviz::parse_content_range(in)) require(r->first <= r->last && r->last < r->total);
  return 0;
}
