#include "config_args.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>

#include "attnviz/engine.hpp"
#include "attnviz/gpt.hpp"
#include "attnviz/io/decoder.hpp"

namespace attnviz {
namespace {

// "[+-]digits": the sign, and the digits without leading zeros ("0" for zero). False for anything else.
bool split_decimal(const std::string& s, bool& negative, std::string& digits) {
  std::size_t i = 0;
  negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  for (std::size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9') return false;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  digits = s.substr(i);
  if (digits == "0") negative = false;
  return true;
}

// The value of at most 20 decimal digits, or false past UINT64_MAX.
bool to_u64(const std::string& digits, std::uint64_t& v) {
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace

std::optional<int> parse_decimal_int(std::string_view s) {
  bool negative = false;
  std::string digits;
  std::uint64_t v = 0;
  if (!split_decimal(std::string(s), negative, digits) || !to_u64(digits, v)) return std::nullopt;
  if (v > (negative ? std::uint64_t{1} << 31 : std::uint64_t{INT_MAX})) return std::nullopt;
  return negative ? static_cast<int>(-static_cast<std::int64_t>(v)) : static_cast<int>(v);
}

CLI::Validator decimal_int() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return {};
        bool negative = false;
        std::string digits;
        if (!split_decimal(s, negative, digits)) return quote(s) + " is not a decimal integer";
        const std::optional<int> v = parse_decimal_int(s);
        if (!v)
          return quote(s) + " is out of range (" + std::to_string(INT_MIN) + " to " +
                 std::to_string(INT_MAX) + ")";
        s = std::to_string(*v);
        return {};
      },
      "", "decimal_int");
}

CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return {};
        std::string lower;
        for (char ch : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        const std::size_t sign = !lower.empty() && (lower[0] == '+' || lower[0] == '-') ? 1 : 0;
        const std::string word = lower.substr(sign);
        if (word == "nan" || word == "inf" || word == "infinity") return {};
        // digits, an optional fraction and an optional exponent: no hexadecimal, no trailing text
        std::size_t i = sign, mantissa = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++mantissa;
        if (i < s.size() && s[i] == '.') {
          ++i;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++mantissa;
        }
        bool ok = mantissa > 0;
        if (ok && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
          ++i;
          if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
          const std::size_t exponent = i;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
          ok = i > exponent;
        }
        if (!ok || i != s.size()) return quote(s) + " is not a decimal number";
        return {};
      },
      "", "decimal_number");
}

CLI::Validator torch_seed() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return {};
        bool negative = false;
        std::string digits;
        if (!split_decimal(s, negative, digits)) return quote(s) + " is not a decimal integer";
        std::uint64_t v = 0;
        if (!to_u64(digits, v) || (negative && v > (std::uint64_t{1} << 63)))
          return quote(s) +
                 " is outside torch.manual_seed's range (-9223372036854775808 to 18446744073709551615)";
        s = std::to_string(negative ? ~v + 1 : v);  // PyTorch reads a negative seed as its two's complement
        return {};
      },
      "", "torch_seed");
}

void add_model_option(CLI::App& app, std::string& model, const char* seed_flag) {
  std::string presets, archs = "gpt2 (GPT-2)";
  for (const GptPreset& p : gpt_presets()) presets += (presets.empty() ? "" : " | ") + std::string(p.name);
  const std::vector<std::string>& decoders = decoder_architectures();
  for (std::size_t i = 0; i < decoders.size(); ++i)
    archs += (i + 1 == decoders.size() ? " or " : ", ") + decoders[i];
  app.add_option("--model", model,
                 "a whole model: a preset, " + presets + " (the book's GPTModel drawn from " + seed_flag +
                     "); a folder with config.json and safetensors weights, its model_type " + archs +
                     ", or GPT-2's .safetensors file alone; or a Hugging Face name ORG/NAME[@REV] from its "
                     "cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), which "
                     "--download fetches");
}

void add_download_option(CLI::App& app, bool& download) {
  app.add_flag(
      "--download", download,
      "with --model ORG/NAME[@REV]: fetch it from the Hugging Face hub ($HF_ENDPOINT, $HF_TOKEN) into "
      "its cache first (what is there already is kept); without it nothing touches the network");
}

void add_memory_budget_option(CLI::App& app, ConfigArgs& a) {
  app.add_option("--memory-budget", a.memory_budget,
                 "memory a run may take, e.g. 2GB or 500MB (default: the memory the system has available)")
      ->transform(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s.empty()) return {};
            std::size_t digits = 0;
            while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
            const std::string unit = s.substr(digits);
            std::uint64_t scale = 0;
            if (unit.empty() || unit == "B")
              scale = 1;
            else if (unit == "kB" || unit == "KB")
              scale = 1'000;
            else if (unit == "MB")
              scale = 1'000'000;
            else if (unit == "GB")
              scale = 1'000'000'000;
            std::uint64_t v = 0;
            if (digits == 0 || scale == 0 || !to_u64(s.substr(0, digits), v))
              return quote(s) + " is not a size: give bytes, or a whole number of kB, MB or GB";
            if (v == 0 || v > UINT64_MAX / scale) return quote(s) + " is out of range (1 byte to 18 EB)";
            s = std::to_string(v * scale);
            return {};
          },
          "", "byte_size"));
}

Status check_memory(std::uint64_t needed, std::uint64_t budget, bool given, const std::string& breakdown) {
  if (!budget || needed <= budget) return Status::ok();
  const BytesApart b = format_bytes_apart(needed, budget);
  return Status::fail("this configuration needs " + b.first + " of memory (" + breakdown +
                      "), more than the " + b.second +
                      (given ? " of --memory-budget" : " available (--memory-budget sets another budget)") +
                      ": use smaller sizes, fewer heads or fewer tokens");
}

void add_config_options(CLI::App& app, ConfigArgs& a) {
  a.text_option =
      app.add_option("--text", a.text, "the sentence, split on whitespace")->capture_default_str();
  app.add_option("--variant", a.variant, "simplified | self_v1 | self_v2 | causal | wrapper | mha")
      ->capture_default_str();
  app.add_option("--preset", a.preset, "book | gpt2-small | gpt2-medium | gpt2-large | gpt2-xl")
      ->capture_default_str();
  app.add_option("--d-in", a.d_in, "input embedding width (default: the preset's)")->transform(decimal_int());
  app.add_option("--d-out", a.d_out,
                 "output width: per head for wrapper, total for mha (default: the preset's)")
      ->transform(decimal_int());
  app.add_option("--heads", a.heads, "number of heads, for wrapper and mha (default: the preset's)")
      ->transform(decimal_int());
  app.add_option("--context-length", a.context_length, "longest accepted input (default: the preset's)")
      ->transform(decimal_int());
  app.add_option("--dropout", a.dropout, "dropout probability on the attention weights, in [0, 1)")
      ->transform(decimal_number());
  app.add_flag("--qkv-bias", a.qkv_bias, "give the query, key and value projections a bias");
  app.add_option("--seed", a.seed, "torch.manual_seed value")->capture_default_str()->transform(torch_seed());
  app.add_option("--dropout-rng", a.rng, "cpu (PyTorch without MKL, the book) | mkl (official x86-64 wheels)")
      ->capture_default_str();
  app.add_flag("--eval", a.eval, "evaluation mode: no dropout");
  app.add_flag("--no-mask", a.no_mask, "turn the causal mask off (causal, wrapper, mha)");
  app.add_option("--isa", a.isa, "kernels: auto | avx512 | avx2 | sse4.2 | neon | scalar (the reference)")
      ->capture_default_str();
  app.add_option("--threads", a.threads, "threads for the fast kernels (0: all)")
      ->capture_default_str()
      ->transform(decimal_int());
}

std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
                                      std::ostream& err) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  // Extras are collected and named here: CLI11's own message lists them in reverse.
  app.allow_extras();
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << app.get_name() << ": " << quote(e.what(), kParserMessageCap, '\0') << " (see --help)\n";
    return 1;
  }
  if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    err << app.get_name() << ": not expected:";
    for (const std::string& x : extras) err << ' ' << quote(x);
    err << " (see --help)\n";
    return 1;
  }
  for (const CLI::Option* o : app.get_options())
    for (const std::string& value : o->results())
      if (value.empty() && o->get_name() != "--text" && o->get_expected_min() > 0) {
        err << app.get_name() << ": " << o->get_name() << " needs a value\n";
        return 1;
      }
  return std::nullopt;
}

Status refuse_layer_flags(const CLI::App& cli, bool heads_apply) {
  const auto given = [&cli](const char* flag) {
    const CLI::Option* o = cli.get_option_no_throw(flag);
    return o && o->count() > 0;
  };
  for (const char* flag : kLayerOnlyFlags)
    if (given(flag))
      return Status::fail(std::string(flag) +
                          " does not apply to --model: a model's sizes come from its preset or file");
  if (!heads_apply && given("--heads"))
    return Status::fail(
        "--heads does not apply to --model: a model's head count comes from its preset or file");
  return Status::ok();
}

Status config_from_args(const ConfigArgs& a, Config& c, Exec& exec) {
  c = Config{};
  const Preset* p = find_preset(a.preset);
  if (!p)
    return Status::fail("unknown preset " + quote(a.preset) +
                        " (book, gpt2-small, gpt2-medium, gpt2-large, gpt2-xl)");
  apply(*p, c);
  const std::optional<Variant> v = parse_variant(a.variant);
  if (!v)
    return Status::fail("unknown variant " + quote(a.variant) +
                        " (simplified, self_v1, self_v2, causal, wrapper, mha)");
  c.variant = *v;
  const std::optional<DropoutRng> flavour = parse_dropout_rng(a.rng);
  if (!flavour) return Status::fail("unknown dropout rng " + quote(a.rng) + " (cpu, mkl)");
  c.dropout_rng = *flavour;
  if (a.d_in) c.d_in = *a.d_in;
  if (a.d_out) c.d_out = *a.d_out;
  if (a.heads) c.num_heads = *a.heads;
  if (a.context_length) c.context_length = *a.context_length;
  if (a.dropout) c.dropout = *a.dropout + 0.0;  // -0 is 0 (printed and written as such)
  c.qkv_bias = a.qkv_bias;
  c.seed = a.seed;
  c.train = !a.eval;
  c.mask = !a.no_mask;

  return exec_from_args(a, exec);
}

Status exec_from_args(const ConfigArgs& a, Exec& exec) {
  exec = Exec{};
  const std::optional<Isa> isa = parse_isa(a.isa);
  if (!isa)
    return Status::fail("unknown isa " + quote(a.isa) + " (auto, avx512, avx2, sse4.2, neon, scalar)");
  exec.isa = *isa;
  if (a.threads < 0 || a.threads > kMaxThreads)
    return Status::fail("--threads must be between 0 (every hardware thread) and " +
                        std::to_string(kMaxThreads) + " (got " + std::to_string(a.threads) + ")");
  exec.threads = a.threads;
  return Status::ok();
}

}  // namespace attnviz
