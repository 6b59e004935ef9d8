#include "attnviz/config.hpp"

#include "attnviz/engine.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "attnviz/enum_names.hpp"

namespace attnviz {
namespace {

constexpr int kMaxDim = 16384;                      // widest d_in / d_out accepted (GPT-2 xl is 1600)
constexpr int kMaxContext = 1 << 16;                // longest context length accepted
constexpr std::uint64_t kMaxBytes = 4'000'000'000;  // the most memory one run may take (run_memory)

bool single_head(Variant v) {
  return v != Variant::wrapper && v != Variant::mha;
}

std::string format(const char* fmt, long long a, long long b) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

bool is_causal(Variant v) {
  return v == Variant::causal || v == Variant::wrapper || v == Variant::mha;
}

Config effective(const Config& c) {
  Config e = c;
  if (single_head(e.variant)) e.num_heads = 1;
  if (e.variant == Variant::simplified) {
    e.d_out = e.d_in;
    e.qkv_bias = false;
  }
  if (!is_causal(e.variant)) {
    e.dropout = 0.0;
    e.dropout_rng = DropoutRng::cpu;
  }
  if (e.variant == Variant::self_v1) e.qkv_bias = false;  // torch.rand parameters have no bias
  if (!is_causal(e.variant)) e.mask = true;               // no mask to turn off
  return e;
}

Shape shape_of(const Config& config) {
  const Config c = effective(config);
  Shape s;
  s.heads = c.num_heads;
  s.has_weights = c.variant != Variant::simplified;
  s.causal = is_causal(c.variant) && c.mask;
  s.dropout = is_causal(c.variant) && c.train && c.dropout > 0.0;
  s.out_proj = c.variant == Variant::mha;
  if (c.variant == Variant::mha) {
    s.head_dim = c.num_heads > 0 ? c.d_out / c.num_heads : 1;
  } else {
    s.head_dim = c.d_out;  // per head for `wrapper`; d_in for `simplified` (effective sets d_out = d_in)
  }
  s.width = s.heads * s.head_dim;
  s.out_width = c.variant == Variant::mha ? c.d_out : s.width;
  // PyTorch divides by keys.shape[-1] ** 0.5 (a double, applied to float32 scores).
  s.scale = s.has_weights ? 1.0f / static_cast<float>(std::sqrt(static_cast<double>(s.head_dim))) : 1.0f;
  return s;
}

Status validate(const Config& config, int tokens) {
  const Config c = effective(config);
  if (c.d_in < 1 || c.d_in > kMaxDim)
    return Status::fail(format("d_in must be between 1 and %lld (got %lld)", kMaxDim, c.d_in));
  if (c.d_out < 1 || c.d_out > kMaxDim)
    return Status::fail(format("d_out must be between 1 and %lld (got %lld)", kMaxDim, c.d_out));
  if (c.num_heads < 1 || c.num_heads > kMaxDim)
    return Status::fail(format("num_heads must be between 1 and %lld (got %lld)", kMaxDim, c.num_heads));
  if (c.variant == Variant::mha && c.d_out % c.num_heads != 0)
    return Status::fail(format("d_out (%lld) must be divisible by num_heads (%lld)", c.d_out, c.num_heads));
  if (c.variant == Variant::wrapper && static_cast<long long>(c.d_out) * c.num_heads > kMaxDim)
    return Status::fail(format("num_heads * d_out must be at most %lld (got %lld)", kMaxDim,
                               static_cast<long long>(c.d_out) * c.num_heads));
  if (c.context_length < 1 || c.context_length > kMaxContext)
    return Status::fail(
        format("context_length must be between 1 and %lld (got %lld)", kMaxContext, c.context_length));
  if (!std::isfinite(config.dropout) || config.dropout < 0.0 || config.dropout >= 1.0) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "dropout must be in [0, 1) (got %g)", config.dropout);
    return Status::fail(buf);
  }
  if (tokens > c.context_length)
    return Status::fail(
        format("the text has %lld tokens, more than the context length %lld", tokens, c.context_length));
  // The parameters count from the start (build_params validates without tokens), the tensors once the
  // tokens are known.
  const RunMemory m = run_memory(c, tokens);
  if (m.total() > kMaxBytes) {
    const BytesApart b = format_bytes_apart(m.total(), kMaxBytes);
    return Status::fail("this configuration needs " + b.first + " of memory (parameters " +
                        format_bytes(m.params) + ", tensors " + format_bytes(m.tensors) +
                        "), more than the engine's " + b.second +
                        " limit: use smaller sizes, fewer heads or fewer tokens");
  }
  return Status::ok();
}

namespace {

constexpr EnumName<Variant> kVariantNames[] = {
    {Variant::simplified, "simplified"}, {Variant::self_v1, "self_v1"}, {Variant::self_v2, "self_v2"},
    {Variant::causal, "causal"},         {Variant::wrapper, "wrapper"}, {Variant::mha, "mha"},
};
constexpr EnumName<DropoutRng> kDropoutRngNames[] = {{DropoutRng::cpu, "cpu"}, {DropoutRng::mkl, "mkl"}};

}  // namespace

const char* to_string(Variant v) {
  return name_in(kVariantNames, v);
}

const char* to_string(DropoutRng r) {
  return name_in(kDropoutRngNames, r);
}

const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> all{Variant::simplified, Variant::self_v1, Variant::self_v2,
                                        Variant::causal,     Variant::wrapper, Variant::mha};
  return all;
}

std::optional<Variant> parse_variant(std::string_view s) {
  return value_in(kVariantNames, s);
}

std::optional<DropoutRng> parse_dropout_rng(std::string_view s) {
  return value_in(kDropoutRngNames, s);
}

const std::vector<Preset>& presets() {
  // GPT-2 head counts from the published models (one of the book's chapter-3 study notes, 003 in
  // docs/testing.md, lists 24 and 36 heads for medium and large, which do not divide d_model).
  static const std::vector<Preset> all{
      {"book", 3, 2, 2, 1024, 0.0},
      {"gpt2-small", 768, 768, 12, 1024, 0.1},
      {"gpt2-medium", 1024, 1024, 16, 1024, 0.1},
      {"gpt2-large", 1280, 1280, 20, 1024, 0.1},
      {"gpt2-xl", 1600, 1600, 25, 1024, 0.1},
  };
  return all;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (name == p.name) return &p;
  return nullptr;
}

const Preset* preset_of(const Config& c) {
  for (const Preset& p : presets())
    if (p.d_in == c.d_in && p.d_out == c.d_out && p.num_heads == c.num_heads &&
        p.context_length == c.context_length)
      return &p;
  return nullptr;
}

void apply(const Preset& p, Config& c) {
  c.d_in = p.d_in;
  c.d_out = p.d_out;
  c.num_heads = p.num_heads;
  c.context_length = p.context_length;
  c.dropout = p.dropout;
}

}  // namespace attnviz
