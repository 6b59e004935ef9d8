// The configuration flags shared by attnviz-cli and the desktop app (--variant, --preset, --d-in, ...),
// parsed with CLI11 into an engine Config and Exec.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

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
  std::uint64_t memory_budget = 0;  // --memory-budget, for the hosts that register it (0: not given)
};

// CLI11's own messages hold the flag and its value: they go out through quote too, unmarked, with room for
// both.
inline constexpr std::size_t kParserMessageCap = 4 * kQuoteCap;

// Registers --text and every configuration and execution flag on `app`.
void add_config_options(CLI::App& app, ConfigArgs& a);

// "[+-]digits" as an int: decimal only (leading zeros allowed, no spaces, no hexadecimal), and nothing that
// wraps: a value outside INT_MIN..INT_MAX is nullopt, as is anything else that is not such a number.
std::optional<int> parse_decimal_int(std::string_view s);

// Numbers on the command line are decimal (CLI11 alone reads "010" as octal 8 and "0x10" as 16) and fit
// their type. Each is a CLI11 transform: it rewrites the value as the plain decimal CLI11 then converts, or
// refuses it in one line. An empty value passes (parse_command_line says it "needs a value").
CLI::Validator decimal_int();     // an int
CLI::Validator decimal_number();  // a double ("nan" and "inf" pass, for the range checks to name them)
// torch.manual_seed's range: -2^63 .. 2^64 - 1, a negative seed taken as PyTorch takes it (its 64-bit two's
// complement: -1 is 2^64 - 1).
CLI::Validator torch_seed();

// --memory-budget BYTES | NkB | NMB | NGB (decimal units, as format_bytes writes them) into
// a.memory_budget: the memory a run may take, checked before anything is allocated. Left 0 when not given:
// the host then takes the memory available. Not one of add_config_options' flags: a link has no budget.
void add_memory_budget_option(CLI::App& app, ConfigArgs& a);

// --model, the whole model both native hosts open (what it names: classify_model, attnviz/io/model_ref.hpp).
// Its help names the presets (gpt_presets()), every architecture the loader opens (gpt2 and
// decoder_architectures()), folders and files, and hub names from the Hugging Face cache; `seed_flag` is the
// flag that seeds a preset ("--seed" in attnviz-cli, "--model-seed" in the app).
void add_model_option(CLI::App& app, std::string& model, const char* seed_flag);

// --download: fetch a Hugging Face model name given to --model from the hub (into its cache) before opening
// it. The hosts never touch the network without it.
void add_download_option(CLI::App& app, bool& download);

// Fails when `needed` bytes exceed `budget` (0: no budget), naming both, what the need is made of
// (`breakdown`: "parameters 8.6 GB, tensors 4.9 MB"), where the budget came from (--memory-budget when
// `given`, else the memory available) and how to need less.
Status check_memory(std::uint64_t needed, std::uint64_t budget, bool given, const std::string& breakdown);

// The chapter-3 layer's flags that a whole model takes from its preset or file instead. Both hosts refuse
// them beside --model; --heads is not among them, because attnviz-cli gives a weights file without
// config.json its head count with it (the app and the page have no such use and refuse it too).
inline constexpr const char* kLayerOnlyFlags[] = {"--variant",        "--preset",  "--d-in",     "--d-out",
                                                  "--context-length", "--dropout", "--qkv-bias", "--no-mask"};

// Fails naming the first of kLayerOnlyFlags given on `cli` (and --heads, unless `heads_apply`), in one line:
// "--variant does not apply to --model: a model's sizes come from its preset or file".
Status refuse_layer_flags(const CLI::App& cli, bool heads_apply);

// Turns parsed flags into a configuration (not yet validated) and execution options. Fails with one line
// naming the bad value.
Status config_from_args(const ConfigArgs& a, Config& c, Exec& exec);

// More threads than this are refused: beyond it they only cost memory (each is a stack) and can exhaust the
// process's thread limit.
inline constexpr int kMaxThreads = 256;

// The execution flags alone (--isa, --threads).
Status exec_from_args(const ConfigArgs& a, Exec& exec);

// Parses `args` (without the program name) into `app`. Returns the exit status when the program should stop
// now: 0 after printing --help to `out`, 1 after one line on `err` naming the bad argument: one CLI11
// refuses, arguments not expected (in the order given), or a flag given an empty value other than --text
// ("--seed needs a value"; an empty text is the engine's to explain).
std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
                                      std::ostream& err);

}  // namespace attnviz
