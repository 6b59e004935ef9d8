// The configuration flags shared by attnviz-cli and the desktop app (--variant, --preset, --d-in, ...),
// parsed with CLI11 into an engine Config and Exec.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "attnviz/config.hpp"
#include "attnviz/exec.hpp"
#include "attnviz/status.hpp"
#include "attnviz/text.hpp"

namespace attnviz {

struct ConfigArgs {
  std::string text = kDefaultText;
  CLI::Option* text_option = nullptr;  // set by add_config_options, for `excludes`
  std::string variant = "mha", preset = "book", rng = "cpu", isa = "auto";
  std::optional<int> d_in, d_out, heads, context_length;
  std::optional<double> dropout;
  std::uint64_t seed = 123;
  bool qkv_bias = false, eval = false, no_mask = false;
  int threads = 0;
};

// Registers --text and every configuration and execution flag on `app`.
void add_config_options(CLI::App& app, ConfigArgs& a);

// Turns parsed flags into a configuration (not yet validated) and execution options. Fails with one line
// naming the bad value.
Status config_from_args(const ConfigArgs& a, Config& c, Exec& exec);

}  // namespace attnviz
