// The WebAssembly build's attnviz-cli has no downloader (no libcurl, no sockets under node): the page fetches
// nothing the user did not ask for either. The native build links hub_download.cpp instead.
#include "hub_download.hpp"

namespace attnviz {

HubDownloadOptions hub_options_from_env() {
  return {};
}

Status hub_download(const HubName&, const HubDownloadOptions&, HubDownloadResult&) {
  return Status::fail("downloads from the Hugging Face hub need the native attnviz-cli or app");
}

Status download_model(const std::string&, const std::string&, std::ostream&, bool, const std::atomic<bool>*,
                      std::string&, bool& stopped) {
  stopped = false;
  return Status::fail("downloads from the Hugging Face hub need the native attnviz-cli or app");
}

}  // namespace attnviz
