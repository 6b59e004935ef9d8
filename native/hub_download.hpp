// Downloading a model from the Hugging Face hub into the cache that huggingface_hub writes (and
// find_in_hub_cache reads), only when the user asks: attnviz-cli download, or --download beside --model.
// Natively with libcurl; the WebAssembly build has no downloader (hub_download_none.cpp).
//
// What is fetched: config.json, the tokenizer's files that exist (tokenizer.json, tokenizer_config.json,
// vocab.json, merges.txt), and the weights: model.safetensors, or model.safetensors.index.json and every
// shard it names. Each file is GET {endpoint}/{org}/{name}/resolve/{rev}/{file}; the first answer's
// X-Repo-Commit pins the commit every later file is asked at, its ETag (X-Linked-Etag for a large file) names
// the blob, and a large file's answer is a redirect to a CDN. Bytes go to blobs/ETAG.incomplete, resumed with
// Range after an interruption, renamed when whole and of the announced size.
//
// HF_TOKEN goes as "Authorization: Bearer" to the endpoint's own scheme, host and port only (never to the
// CDN a redirect leads to, as Python's requests drops it there), and never into a message, file or URL.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>

#include "attnviz/io/hf_hub.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

// The slowest a request to the hub (or its CDN) may be: every window of kHubRateWindowSeconds must bring at
// least kHubMinBytesPerSecond bytes a second on average (61,440 bytes a minute), or the request ends and the
// download is refused ("tiny/gpt2: the download of 'model.safetensors' from HOST fell below 1024 bytes/s for
// 60 s; running again resumes it"). A server that sends a byte now and then, or a burst now and then, so
// ends: a file of B bytes within about B / 1024 + 60 seconds, an answer without a body (a HEAD request)
// within 60 s. ATTNVIZ_HUB_RATE_WINDOW (whole seconds, 1 to 3600) sets another window: a connection that
// stalls for long, or a test that needs a short one.
constexpr std::uint64_t kHubMinBytesPerSecond = 1024;
constexpr long kHubRateWindowSeconds = 60;
constexpr long kHubMaxRateWindowSeconds = 3600;

struct HubDownloadOptions {
  std::string cache;                           // the cache folder (hub_cache_dir())
  std::string endpoint;                        // $HF_ENDPOINT, else https://huggingface.co
  std::string token;                           // $HF_TOKEN ("": none)
  std::string program;                         // the messages' prefix ("attnviz-cli")
  std::ostream* log = nullptr;                 // progress and notes (stderr)
  bool tty = false;                            // a progress bar redrawn in place, else a line now and then
  const std::atomic<bool>* stop = nullptr;     // set by Ctrl-C: the download stops, its .incomplete stays
  long rate_window_s = kHubRateWindowSeconds;  // the window of the minimum rate (above)
  std::string env_error;  // a bad ATTNVIZ_HUB_RATE_WINDOW: hub_download refuses with this line
};

// The options from the environment: HF_HUB_CACHE / HF_HOME / ..., HF_ENDPOINT, HF_TOKEN and
// ATTNVIZ_HUB_RATE_WINDOW.
HubDownloadOptions hub_options_from_env();

struct HubDownloadResult {
  std::string snapshot;       // the snapshot folder, ready for open_model
  std::string commit;         // what the revision pointed at
  std::uint64_t fetched = 0;  // bytes transferred (0 when everything was in the cache already)
  bool stopped = false;       // Ctrl-C: the status says so, the partial file stays for the next run
};

// Brings `name` at its revision into the cache (what is there already is kept), then returns its snapshot.
// Fails in one line: no such model, file or revision; a gated or private model without a token that opens
// it; a size that differs from the announced one; sizes that no download may hold (kMaxHubDownloadBytes) or
// too little disk space (both sizes named); an ETag that is not a blob name, or one that two files share; a
// redirect loop; a connection failure or a request slower than the minimum rate (the .incomplete stays, and
// running it again resumes).
Status hub_download(const HubName& name, const HubDownloadOptions& options, HubDownloadResult& result);

// What a host's --download (and attnviz-cli download) does with what the user typed: `model` must be a hub
// name (ORG/NAME[@REV]); it is downloaded with the environment's options, progress and a last line on `err`
// (prefixed with `program`), and `snapshot` is the folder to open. `stopped` says Ctrl-C ended it.
Status download_model(const std::string& model, const std::string& program, std::ostream& err, bool tty,
                      const std::atomic<bool>* stop, std::string& snapshot, bool& stopped);

}  // namespace attnviz
