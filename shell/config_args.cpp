#include "config_args.hpp"

namespace attnviz {

void add_config_options(CLI::App& app, ConfigArgs& a) {
  a.text_option =
      app.add_option("--text", a.text, "the sentence, split on whitespace")->capture_default_str();
  app.add_option("--variant", a.variant, "simplified | self_v1 | self_v2 | causal | wrapper | mha")
      ->capture_default_str();
  app.add_option("--preset", a.preset, "book | gpt2-small | gpt2-medium | gpt2-large | gpt2-xl")
      ->capture_default_str();
  app.add_option("--d-in", a.d_in, "input embedding width (default: the preset's)");
  app.add_option("--d-out", a.d_out,
                 "output width: per head for wrapper, total for mha (default: the preset's)");
  app.add_option("--heads", a.heads, "number of heads, for wrapper and mha (default: the preset's)");
  app.add_option("--context-length", a.context_length, "longest accepted input (default: the preset's)");
  app.add_option("--dropout", a.dropout, "dropout probability on the attention weights, in [0, 1)");
  app.add_flag("--qkv-bias", a.qkv_bias, "give the query, key and value projections a bias");
  app.add_option("--seed", a.seed, "torch.manual_seed value")->capture_default_str();
  app.add_option("--dropout-rng", a.rng, "cpu (PyTorch without MKL, the book) | mkl (official x86-64 wheels)")
      ->capture_default_str();
  app.add_flag("--eval", a.eval, "evaluation mode: no dropout");
  app.add_flag("--no-mask", a.no_mask, "turn the causal mask off (causal, wrapper, mha)");
  app.add_option("--isa", a.isa, "kernels: auto | avx512 | avx2 | sse4.2 | scalar (the reference)")
      ->capture_default_str();
  app.add_option("--threads", a.threads, "threads for the fast kernels (0: all)")->capture_default_str();
}

std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
                                      std::ostream& err) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << app.get_name() << ": " << e.what() << " (see --help)\n";
    return 1;
  }
  return std::nullopt;
}

Status config_from_args(const ConfigArgs& a, Config& c, Exec& exec) {
  c = Config{};
  const Preset* p = find_preset(a.preset);
  if (!p)
    return Status::fail("unknown preset '" + a.preset +
                        "' (book, gpt2-small, gpt2-medium, gpt2-large, gpt2-xl)");
  apply(*p, c);
  const std::optional<Variant> v = parse_variant(a.variant);
  if (!v)
    return Status::fail("unknown variant '" + a.variant +
                        "' (simplified, self_v1, self_v2, causal, wrapper, mha)");
  c.variant = *v;
  const std::optional<DropoutRng> flavour = parse_dropout_rng(a.rng);
  if (!flavour) return Status::fail("unknown dropout rng '" + a.rng + "' (cpu, mkl)");
  c.dropout_rng = *flavour;
  if (a.d_in) c.d_in = *a.d_in;
  if (a.d_out) c.d_out = *a.d_out;
  if (a.heads) c.num_heads = *a.heads;
  if (a.context_length) c.context_length = *a.context_length;
  if (a.dropout) c.dropout = *a.dropout;
  c.qkv_bias = a.qkv_bias;
  c.seed = a.seed;
  c.train = !a.eval;
  c.mask = !a.no_mask;

  return exec_from_args(a, exec);
}

Status exec_from_args(const ConfigArgs& a, Exec& exec) {
  exec = Exec{};
  const std::optional<Isa> isa = parse_isa(a.isa);
  if (!isa) return Status::fail("unknown isa '" + a.isa + "' (auto, avx512, avx2, sse4.2, scalar)");
  exec.isa = *isa;
  if (a.threads < 0 || a.threads > kMaxThreads)
    return Status::fail("--threads must be between 0 (every hardware thread) and " +
                        std::to_string(kMaxThreads) + " (got " + std::to_string(a.threads) + ")");
  exec.threads = a.threads;
  return Status::ok();
}

}  // namespace attnviz
