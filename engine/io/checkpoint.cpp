// Training checkpoints (checkpoint.hpp): safetensors written here, read back through the model loader.
#include "attnviz/io/checkpoint.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/safetensors.hpp"
#include "attnviz/text.hpp"

namespace attnviz {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Named {
  std::string name;
  const Tensor* tensor;
};

std::vector<std::uint64_t> shape_of(const Tensor& t) {
  std::vector<std::uint64_t> s;
  for (int i = 0; i < t.rank; ++i)
    s.push_back(static_cast<std::uint64_t>(t.shape[static_cast<std::size_t>(i)]));
  return s;
}

// A safetensors file: the header (keys sorted, data in the order given), padded with spaces to a multiple of
// 8 bytes, then float32 little-endian data.
std::string safetensors(const std::vector<Named>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const Named& n : tensors) {
    const std::uint64_t bytes = n.tensor->size() * sizeof(float);
    header[n.name] = {
        {"dtype", "F32"}, {"shape", shape_of(*n.tensor)}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  out.reserve(out.size() + static_cast<std::size_t>(offset));
  static_assert(sizeof(float) == 4, "float32");
  for (const Named& t : tensors)  // x86-64 and WebAssembly are little-endian, as the format is
    out.append(reinterpret_cast<const char*>(t.tensor->ptr()), t.tensor->size() * sizeof(float));
  return out;
}

Status write_replacing(const fs::path& path, const std::string& bytes) {
  // Written beside, then renamed: an interrupted write never leaves half a checkpoint under the real name.
  const fs::path tmp = path.string() + ".tmp";
  if (Status st = write_file(tmp.string(), bytes); !st.is_ok()) return st;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::fail("cannot write " + quote(path.string()) + ": " + ec.message());
  return Status::ok();
}

std::string number(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

Status write_checkpoint(const std::string& dir, const TrainModel& m, const AdamW& opt,
                        const std::string& vocab_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) return Status::fail("cannot create the folder " + quote(dir));
  const fs::path folder(dir);

  std::vector<Named> params;
  m.params().each([&](const std::string& name, const Tensor& t) { params.push_back({name, &t}); });
  if (Status st = write_replacing(folder / "model.safetensors", safetensors(params, {{"format", "pt"}}));
      !st.is_ok())
    return st;

  const GptConfig& c = m.config().gpt;
  json config = {{"vocab_size", c.vocab_size}, {"context_length", c.context_length},
                 {"emb_dim", c.d_model},       {"n_heads", c.n_heads},
                 {"n_layers", c.n_layers},     {"drop_rate", c.drop_rate},
                 {"qkv_bias", c.qkv_bias}};
  if (c.attention_only) config["attention_only"] = true;
  if (Status st = write_replacing(folder / "config.json", config.dump(2) + "\n"); !st.is_ok()) return st;

  if (opt.steps > 0) {
    std::vector<Named> moments;
    std::vector<std::string> names;
    opt.exp_avg.each([&](const std::string& name, const Tensor& t) {
      moments.push_back({"exp_avg." + name, &t});
    });
    opt.exp_avg_sq.each([&](const std::string& name, const Tensor& t) {
      moments.push_back({"exp_avg_sq." + name, &t});
    });
    const std::map<std::string, std::string> meta = {{"optimizer", "AdamW"},
                                                     {"step", std::to_string(opt.steps)},
                                                     {"lr", number(opt.lr)},
                                                     {"beta1", number(opt.beta1)},
                                                     {"beta2", number(opt.beta2)},
                                                     {"eps", number(opt.eps)},
                                                     {"weight_decay", number(opt.weight_decay)}};
    if (Status st = write_replacing(folder / "optimizer.safetensors", safetensors(moments, meta));
        !st.is_ok())
      return st;
  }

  if (!vocab_dir.empty()) {
    const fs::path v(vocab_dir);
    const bool hf = fs::exists(v / "vocab.json", ec);
    std::string vocab, merges;
    constexpr std::size_t kMax = std::size_t{64} << 20;
    if (Status st = read_untrusted_file((v / (hf ? "vocab.json" : "encoder.json")).string(), kMax, vocab);
        !st.is_ok())
      return st;
    if (Status st = read_untrusted_file((v / (hf ? "merges.txt" : "vocab.bpe")).string(), kMax, merges);
        !st.is_ok())
      return st;
    if (fs::equivalent(v, folder, ec)) return Status::ok();  // already there
    if (Status st = write_replacing(folder / "vocab.json", vocab); !st.is_ok()) return st;
    if (Status st = write_replacing(folder / "merges.txt", merges); !st.is_ok()) return st;
  }
  return Status::ok();
}

Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer) {
  GptLoadOptions lo;
  lo.isa = Isa::scalar;
  GptWeights w;
  if (Status st = load_gpt(path, lo, w); !st.is_ok()) return st;
  TrainConfig c;
  c.gpt = w.config;
  GptTensors p;
  p.tok_emb = unpack(w.tok_emb);
  p.pos_emb = w.pos_emb;
  for (const GptBlock& b : w.blocks) {
    GptTensors::Block n;
    n.query_w = unpack(b.query.weight), n.query_b = b.query.bias;
    n.key_w = unpack(b.key.weight), n.key_b = b.key.bias;
    n.value_w = unpack(b.value.weight), n.value_b = b.value.bias;
    n.out_w = unpack(b.out_proj.weight), n.out_b = b.out_proj.bias;
    n.fc_w = unpack(b.fc.weight), n.fc_b = b.fc.bias;
    n.proj_w = unpack(b.proj.weight), n.proj_b = b.proj.bias;
    n.norm1_scale = b.norm1_scale, n.norm1_shift = b.norm1_shift;
    n.norm2_scale = b.norm2_scale, n.norm2_shift = b.norm2_shift;
    p.blocks.push_back(std::move(n));
  }
  p.final_scale = w.final_scale, p.final_shift = w.final_shift;
  p.out_head =
      unpack(w.head());  // a tied head (GPT-2's files) becomes a parameter of its own, as in the book
  TrainModel model;
  if (Status st = TrainModel::from_tensors(c, std::move(p), model); !st.is_ok()) return st;

  AdamW o;
  has_optimizer = false;
  std::error_code ec;
  const fs::path folder = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path optim = folder / "optimizer.safetensors";
  if (fs::exists(optim, ec)) {
    SafetensorsFile f;
    if (Status st = SafetensorsFile::open(optim.string(), f); !st.is_ok()) return st;
    const auto meta = f.metadata();
    const auto get = [&](const char* key, double& out) -> Status {
      const auto it = meta.find(key);
      char* end = nullptr;
      if (it == meta.end())
        return Status::fail(quote(optim.string()) + ": no " + key + " in its __metadata__");
      out = std::strtod(it->second.c_str(), &end);
      if (end == it->second.c_str() || *end != '\0' || !std::isfinite(out))
        return Status::fail(quote(optim.string()) + ": its " + key + " is " + quote(it->second) +
                            ", not a number");
      return Status::ok();
    };
    double step = 0;
    for (auto [key, out] : {std::pair{"step", &step},
                            {"lr", &o.lr},
                            {"beta1", &o.beta1},
                            {"beta2", &o.beta2},
                            {"eps", &o.eps},
                            {"weight_decay", &o.weight_decay}})
      if (Status st = get(key, *out); !st.is_ok()) return st;
    if (step < 1 || step > 1e15 || step != std::floor(step))
      return Status::fail(quote(optim.string()) + ": its step count is not a positive whole number");
    o.steps = static_cast<std::int64_t>(step);
    o.exp_avg = model.params().zeros_like();
    o.exp_avg_sq = model.params().zeros_like();
    for (auto [prefix_name, into] : {std::pair{"exp_avg.", &o.exp_avg}, {"exp_avg_sq.", &o.exp_avg_sq}}) {
      const std::string prefix = prefix_name;  // a lambda cannot capture a structured binding in C++17
      Status st;
      into->each([&](const std::string& name, Tensor& t) {
        if (!st.is_ok()) return;
        const SafeTensor* s = f.find(prefix + name);
        if (!s) {
          st = Status::fail(quote(optim.string()) + ": no tensor " + quote(prefix + name));
          return;
        }
        if (s->dtype != Dtype::f32 || s->shape != shape_of(t)) {
          st = Status::fail(quote(optim.string()) + ": tensor " + quote(prefix + name) +
                            " is not F32 of the parameter's shape");
          return;
        }
        widen(s->data, Dtype::f32, 0, t.size(), t.ptr());
      });
      if (!st.is_ok()) return st;
    }
    if (Status st = f.intact(); !st.is_ok()) return st;
    has_optimizer = true;
  }
  m = std::move(model);
  opt = std::move(o);
  return Status::ok();
}

}  // namespace attnviz
