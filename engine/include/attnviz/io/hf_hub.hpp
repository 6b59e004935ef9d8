// Models named the Hugging Face way ("ORG/NAME", "ORG/NAME@REV"): the names, the cache that huggingface_hub
// writes and transformers reads, and the small texts the hub and the cache hold (a ref, a shard index, HTTP
// header values). Everything here reads local files only; the download itself is the native hosts'
// (native/hub_download.hpp), which writes the same layout:
//   CACHE/models--ORG--NAME/refs/REV              the commit REV points at (40 hex digits)
//   CACHE/models--ORG--NAME/snapshots/COMMIT/FILE a relative symlink to ../../blobs/ETAG
//   CACHE/models--ORG--NAME/blobs/ETAG            the file's bytes
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/status.hpp"

namespace attnviz {

struct HubName {
  std::string org, name;
  std::string revision = "main";  // a branch or tag ("refs/pr/1" too), or a 40-hex commit

  std::string repo_id() const { return org + "/" + name; }
  // "models--ORG--NAME", the repository's folder in the cache
  std::string folder() const { return "models--" + org + "--" + name; }
};

// "ORG/NAME" or "ORG/NAME@REV", the one check of a hub name (the hosts', the cache's and the page's, through
// classify_model in model_ref.hpp and attnviz_check_hub_name): huggingface_hub's validate_repo_id, and
// where the page's own rule was stricter, that: each part 1..96 of [A-Za-z0-9_.-], neither "--" nor ".."
// inside, starting with a letter or a digit, not ending with '-' or '.'. A revision is 1..128 of
// [A-Za-z0-9_.-/] starting with a letter or a digit, without "..", "//" or a '/' at its end. Fails in one
// line naming the bad part.
Status parse_hub_name(std::string_view s, HubName& out);

// A 40-hex commit (either case).
bool is_commit_hash(std::string_view s);

// A refs/ file's text: a commit hash, optionally followed by whitespace (huggingface_hub writes none). The
// refusal never quotes the text (a ref may be a link to a file that is not the cache's).
Status parse_ref(std::string_view text, std::string& commit);

// A file name the downloader may write into a snapshot: 1..255 bytes, no '/', '\\' or NUL, not "." or "..",
// no control characters.
bool is_plain_file_name(std::string_view s);

// The most bytes one download may announce, each file and all together: far above any model on the hub (the
// largest are a few TB), and 2^53, so that every size, sum and progress figure stays exact in a double and
// no sum of up to 2^11 such sizes wraps a uint64.
constexpr std::uint64_t kMaxHubDownloadBytes = std::uint64_t{1} << 53;

// a + b, or UINT64_MAX where the sum does not fit: sizes from outside are added with this, never wrapped.
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b);

// A file of a download and the size the hub announced for it.
struct AnnouncedFile {
  std::string name;
  std::uint64_t size = 0;
};
// Refuses, in one line naming the file and both numbers, a size above kMaxHubDownloadBytes, then a total
// above it ("the hub announces 18446744073709551615 bytes for 'x', more than the 9007199254740992 bytes
// (2^53) one download may hold"); else `total` is the exact sum. Never wraps, whatever the sizes and count.
Status sum_announced_sizes(const std::vector<AnnouncedFile>& files, std::uint64_t& total);

// model.safetensors.index.json: the shard names its weight_map names (each is_plain_file_name, listed once,
// in order of first appearance) and metadata.total_size when given (0 otherwise). Fails in one line on
// anything else: not JSON, no weight_map, a value that is not a string, a shard name with a path in it, a
// total_size that is not a whole number of bytes up to kMaxHubDownloadBytes (negative, fractional, past 2^64,
// a string).
Status parse_shard_index(std::string_view json, std::vector<std::string>& shards, std::uint64_t& total_size);

// HTTP header values. An ETag as a blob's file name: W/ and the quotes dropped, it must be what the hub
// gives, a git blob's sha1 (40 hex digits, small files) or a sha256 (64 hex digits, X-Linked-Etag of LFS
// files), in lowercase, else nullopt. No such name ends in ".incomplete" or ".lock", holds a '/' or a '.', or
// differs from another only in case (a case-insensitive disk would make them one file).
std::optional<std::string> etag_file_name(std::string_view value);
// A Content-Length (or X-Linked-Size): decimal digits only (spaces around them allowed), within uint64
// (18446744073709551615 is the largest taken, 18446744073709551616 is refused, as are signs, "0x", "1e3").
std::optional<std::uint64_t> parse_content_length(std::string_view value);
// A Content-Range "bytes FIRST-LAST/TOTAL" (FIRST <= LAST < TOTAL), else nullopt.
struct ContentRange {
  std::uint64_t first = 0, last = 0, total = 0;
};
std::optional<ContentRange> parse_content_range(std::string_view value);

// The cache folder, as huggingface_hub finds it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub ("" when none of them is set).
std::string hub_cache_dir();

// The snapshot folder `name` resolves to in `cache`: refs/REV (or the commit itself) picks
// snapshots/COMMIT/. Every entry of that folder that is a link must lead inside the repository's own cache
// folder (a snapshot's files are links into blobs/): one that leads elsewhere is refused. refs/REV must be a
// plain file inside that folder: a link (huggingface_hub writes none) or a path through a linked folder that
// leads outside is refused, and no refusal quotes a ref's bytes. Fails in one line: not in the cache (saying
// how to download it), a ref that is not a commit, a snapshot missing or a link leading outside.
Status find_in_hub_cache(const HubName& name, const std::string& cache, std::string& snapshot);

}  // namespace attnviz
