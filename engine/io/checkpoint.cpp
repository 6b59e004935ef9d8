// Training checkpoints (checkpoint.hpp): safetensors written here, read back through the model loader.
#include "attnviz/io/checkpoint.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
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

// A strict decimal: digits only (at most 19, no sign, no leading zero but "0"), at most `max`.
std::optional<std::uint64_t> decimal(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

constexpr const char* kHex = "0123456789abcdef";

// An untrusted metadata value in a message: quoted, and cut after 40 bytes.
std::string brief(const std::string& s) {
  return s.size() <= 40 ? quote(s) : quote(s.substr(0, 40)) + "...";
}

}  // namespace

std::uint64_t run_data_hash(const Windows& train, const Windows& val) {
  std::uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  for (const Windows* w : {&train, &val}) {
    mix(static_cast<std::uint64_t>(w->max_length));
    mix(w->starts.size());
    for (int start : w->starts) mix(static_cast<std::uint64_t>(start));
    if (w->ids) {
      mix(w->ids->size());
      for (int id : *w->ids) mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(id)));
    }
  }
  return h;
}

namespace {

std::string hex_of(const std::vector<std::uint8_t>& bytes) {
  std::string s;
  for (std::uint8_t b : bytes) s += kHex[b >> 4], s += kHex[b & 15];
  return s;
}

// A strict real number: an optional '-', digits, optionally '.' and digits, optionally an exponent (what
// number() writes for finite values), finite. No spaces, no "inf" or "nan", no hex floats.
std::optional<double> real(const std::string& s) {
  if (s.empty() || s.size() > 40) return std::nullopt;
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > from;
  };
  if (s[i] == '-') ++i;
  if (!digits()) return std::nullopt;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::map<std::string, std::string> run_state_metadata(const RunState& r) {
  if (r.task == RunTask::induction) {
    const InductionRunState& n = r.induction;
    return {{"run.version", "1"},
            {"run.task", "induction"},
            {"run.global_step", std::to_string(n.steps)},
            {"run.total_steps", std::to_string(n.total_steps)},
            {"run.eval_freq", std::to_string(n.eval_freq)},
            {"run.batch_size", std::to_string(r.batch_size)},
            {"run.vocab", std::to_string(n.task.vocab)},
            {"run.tokens", std::to_string(n.task.tokens)},
            {"run.min_repeat", std::to_string(n.task.min_repeat)},
            {"run.max_repeat", std::to_string(n.task.max_repeat)},
            {"run.fixed_distance", std::to_string(n.task.fixed_distance)},
            {"run.lr", number(n.lr)},
            {"run.weight_decay", number(n.weight_decay)},
            {"run.first_induction", n.first_induction < 0 ? "none" : std::to_string(n.first_induction)},
            {"run.dropout_rng", to_string(r.dropout_rng)},
            {"run.rng_state", hex_of(r.rng)},
            {"run.data_rng_state", hex_of(n.data_rng)}};
  }
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(r.data_hash));
  const TrainPosition& p = r.position;
  std::map<std::string, std::string> m = {
      {"run.version", r.settings ? "2" : "1"},
      {"run.epoch", std::to_string(p.epoch)},
      {"run.batch", std::to_string(p.batch)},
      {"run.global_step", std::to_string(p.global_step + 1)},  // steps taken: never negative
      {"run.tokens_seen", std::to_string(p.tokens_seen)},
      {"run.sampler_seed", std::to_string(p.sampler_seed)},
      {"run.batch_size", std::to_string(r.batch_size)},
      {"run.train_windows", std::to_string(r.train_windows)},
      {"run.val_windows", std::to_string(r.val_windows)},
      {"run.data_hash", hash},
      {"run.dropout_rng", to_string(r.dropout_rng)},
      {"run.rng_state", hex_of(r.rng)}};
  if (const std::optional<BookRunSettings>& b = r.settings) {
    m.insert({{"run.epochs", std::to_string(b->epochs)},
              {"run.eval_freq", std::to_string(b->eval_freq)},
              {"run.eval_iter", std::to_string(b->eval_iter)},
              {"run.lr", number(b->lr)},
              {"run.weight_decay", number(b->weight_decay)},
              {"run.schedule", b->use_schedule ? "warmup_cosine" : "constant"}});
    if (b->use_schedule)
      m.insert({{"run.warmup_steps", std::to_string(b->schedule.warmup_steps)},
                {"run.initial_lr", number(b->schedule.initial_lr)},
                {"run.min_lr", number(b->schedule.min_lr)},
                {"run.max_norm", number(b->schedule.max_norm)}});
  }
  return m;
}

Status parse_run_state(const std::map<std::string, std::string>& meta, std::optional<RunState>& out) {
  out.reset();
  const auto version = meta.find("run.version");
  if (version == meta.end()) return Status::ok();
  if (version->second != "1" && version->second != "2")
    return Status::fail("its run state is version " + quote(version->second) + ", not 1 or 2");
  const auto text = [&](const char* key, const std::string*& v) -> Status {
    const auto it = meta.find(key);
    if (it == meta.end()) return Status::fail(std::string("its run state has no ") + key);
    v = &it->second;
    return Status::ok();
  };
  const auto whole = [&](const char* key, std::uint64_t max, std::uint64_t& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<std::uint64_t> x = decimal(*s, max);
    if (!x)
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a whole number up to " +
                          std::to_string(max));
    v = *x;
    return Status::ok();
  };
  // a generator's state: the hex of the bytes TorchGenerator::state() writes, checked by set_state and kept
  // as state() writes it back (the bytes set_state ignores as zeros)
  const auto generator = [&](const char* key, std::vector<std::uint8_t>& bytes) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    if (s->size() != 2 * kTorchRngStateBytes || s->find_first_not_of(kHex) != std::string::npos)
      return Status::fail(std::string("its ") + key + " is not " + std::to_string(2 * kTorchRngStateBytes) +
                          " lowercase hex digits");
    bytes.clear();
    for (std::size_t i = 0; i < s->size(); i += 2)
      bytes.push_back(static_cast<std::uint8_t>(std::stoi(s->substr(i, 2), nullptr, 16)));
    TorchGenerator check;
    if (Status st = check.set_state(bytes.data(), bytes.size()); !st.is_ok())
      return Status::fail(std::string("its ") + key + ": " + st.error);
    bytes = check.state();
    return Status::ok();
  };
  const auto positive_real = [&](const char* key, double& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<double> x = real(*s);
    if (!x || !(*x > 0))
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a positive number");
    v = *x;
    return Status::ok();
  };
  const auto nonnegative_real = [&](const char* key, double& v) -> Status {
    const std::string* s = nullptr;
    if (Status st = text(key, s); !st.is_ok()) return st;
    const std::optional<double> x = real(*s);
    if (!x || !(*x >= 0))
      return Status::fail(std::string("its ") + key + " is " + brief(*s) + ", not a number of 0 or more");
    v = *x;
    return Status::ok();
  };
  RunState r;
  const std::string* s = nullptr;
  if (const auto task = meta.find("run.task"); task != meta.end()) {
    if (task->second == "induction")
      r.task = RunTask::induction;
    else if (task->second != "book")
      return Status::fail("its run.task is " + brief(task->second) + ", not book or induction");
  }
  if (Status st = text("run.dropout_rng", s); !st.is_ok()) return st;
  const std::optional<DropoutRng> flavour = parse_dropout_rng(*s);
  if (!flavour) return Status::fail("its run.dropout_rng is " + brief(*s) + ", not cpu or mkl");
  r.dropout_rng = *flavour;
  constexpr std::uint64_t kInt = 0x7FFFFFFF;

  if (r.task == RunTask::induction) {
    InductionRunState& n = r.induction;
    std::uint64_t steps = 0, total = 0, eval_freq = 0, batch_size = 0, vocab = 0, tokens = 0, min_repeat = 0,
                  max_repeat = 0, fixed = 0;
    for (auto [key, into] : {std::pair{"run.global_step", &steps},
                             {"run.total_steps", &total},
                             {"run.eval_freq", &eval_freq},
                             {"run.batch_size", &batch_size},
                             {"run.vocab", &vocab},
                             {"run.tokens", &tokens},
                             {"run.min_repeat", &min_repeat},
                             {"run.max_repeat", &max_repeat},
                             {"run.fixed_distance", &fixed}})
      if (Status st = whole(key, kInt, *into); !st.is_ok()) return st;
    if (batch_size < 1 || eval_freq < 1 || total < 1)
      return Status::fail(
          "its run state's batch size, evaluation frequency and total steps must be at least 1");
    if (steps > total)
      return Status::fail("its run state has taken " + std::to_string(steps) +
                          " steps, more than its total of " + std::to_string(total));
    n.task.vocab = static_cast<int>(vocab), n.task.tokens = static_cast<int>(tokens);
    n.task.min_repeat = static_cast<int>(min_repeat), n.task.max_repeat = static_cast<int>(max_repeat);
    n.task.fixed_distance = static_cast<int>(fixed);
    if (Status st = validate(n.task); !st.is_ok()) return Status::fail("its run state's task: " + st.error);
    n.steps = static_cast<int>(steps), n.total_steps = static_cast<int>(total);
    n.eval_freq = static_cast<int>(eval_freq);
    r.batch_size = static_cast<int>(batch_size);
    if (Status st = positive_real("run.lr", n.lr); !st.is_ok()) return st;
    if (Status st = nonnegative_real("run.weight_decay", n.weight_decay); !st.is_ok()) return st;
    if (Status st = text("run.first_induction", s); !st.is_ok()) return st;
    if (*s != "none") {
      const std::optional<std::uint64_t> first = decimal(*s, steps);
      if (!first)
        return Status::fail("its run.first_induction is " + brief(*s) + ", not none or a step up to " +
                            std::to_string(steps));
      n.first_induction = static_cast<int>(*first);
    }
    if (Status st = generator("run.rng_state", r.rng); !st.is_ok()) return st;
    if (Status st = generator("run.data_rng_state", n.data_rng); !st.is_ok()) return st;
    out = std::move(r);
    return Status::ok();
  }

  std::uint64_t epoch = 0, batch = 0, steps = 0, tokens = 0, seed = 0, batch_size = 0, train_windows = 0,
                val_windows = 0;
  for (auto [key, max, into] : {std::tuple{"run.epoch", kInt, &epoch},
                                {"run.batch", kInt, &batch},
                                {"run.global_step", kInt, &steps},
                                {"run.tokens_seen", std::uint64_t{1} << 62, &tokens},
                                {"run.sampler_seed", (std::uint64_t{1} << 63) - 1, &seed},
                                {"run.batch_size", kInt, &batch_size},
                                {"run.train_windows", kInt, &train_windows},
                                {"run.val_windows", kInt, &val_windows}})
    if (Status st = whole(key, max, *into); !st.is_ok()) return st;
  if (batch_size < 1 || train_windows < batch_size)
    return Status::fail("its run state's batch size " + std::to_string(batch_size) + " does not fit its " +
                        std::to_string(train_windows) + " training windows");
  const std::uint64_t batches = train_windows / batch_size;
  if (batch > batches || epoch * batches + batch != steps)
    return Status::fail("its run state's position (epoch " + std::to_string(epoch) + ", batch " +
                        std::to_string(batch) + ", " + std::to_string(steps) +
                        " steps) is inconsistent with " + std::to_string(batches) + " batches an epoch");
  if (Status st = text("run.data_hash", s); !st.is_ok()) return st;
  if (s->size() != 16 || s->find_first_not_of(kHex) != std::string::npos)
    return Status::fail("its run.data_hash is " + brief(*s) + ", not 16 hex digits");
  r.data_hash = std::stoull(*s, nullptr, 16);
  if (Status st = generator("run.rng_state", r.rng); !st.is_ok()) return st;
  r.position.epoch = static_cast<int>(epoch);
  r.position.batch = static_cast<int>(batch);
  r.position.global_step = static_cast<int>(steps) - 1;
  r.position.tokens_seen = static_cast<std::int64_t>(tokens);
  r.position.sampler_seed = seed;
  r.batch_size = static_cast<int>(batch_size);
  r.train_windows = static_cast<int>(train_windows);
  r.val_windows = static_cast<int>(val_windows);
  if (version->second == "2") {  // the run's settings: what makes the rest of it
    BookRunSettings b;
    std::uint64_t epochs = 0, eval_freq = 0, eval_iter = 0;
    for (auto [key, into] :
         {std::pair{"run.epochs", &epochs}, {"run.eval_freq", &eval_freq}, {"run.eval_iter", &eval_iter}})
      if (Status st = whole(key, kInt, *into); !st.is_ok()) return st;
    if (epochs < 1 || eval_freq < 1 || eval_iter < 1)
      return Status::fail(
          "its run state's epochs, evaluation frequency and evaluation batches must be at least 1");
    const std::uint64_t total = epochs * batches;  // both below 2^31: no overflow
    if (total > kInt)
      return Status::fail("its run state's " + std::to_string(epochs) + " epochs of " +
                          std::to_string(batches) + " batches are more than " + std::to_string(kInt) +
                          " steps");
    if (steps > total)
      return Status::fail("its run state has taken " + std::to_string(steps) + " steps, more than its " +
                          std::to_string(epochs) + " epochs of " + std::to_string(batches) + " batches");
    b.epochs = static_cast<int>(epochs), b.eval_freq = static_cast<int>(eval_freq);
    b.eval_iter = static_cast<int>(eval_iter);
    if (Status st = positive_real("run.lr", b.lr); !st.is_ok()) return st;
    if (Status st = nonnegative_real("run.weight_decay", b.weight_decay); !st.is_ok()) return st;
    if (Status st = text("run.schedule", s); !st.is_ok()) return st;
    if (*s != "constant" && *s != "warmup_cosine")
      return Status::fail("its run.schedule is " + brief(*s) + ", not constant or warmup_cosine");
    b.use_schedule = *s == "warmup_cosine";
    constexpr const char* kScheduleKeys[] = {"run.warmup_steps", "run.initial_lr", "run.min_lr",
                                             "run.max_norm"};
    if (!b.use_schedule) {
      for (const char* key : kScheduleKeys)
        if (meta.count(key))
          return Status::fail(std::string("its run state has ") + key + " but a constant learning rate");
    } else {
      std::uint64_t warmup = 0;
      if (Status st = whole("run.warmup_steps", kInt, warmup); !st.is_ok()) return st;
      if (warmup > total)
        return Status::fail("its run.warmup_steps " + std::to_string(warmup) + " is more than the run's " +
                            std::to_string(total) + " steps");
      b.schedule.warmup_steps = static_cast<int>(warmup);
      for (auto [key, into] : {std::pair{"run.initial_lr", &b.schedule.initial_lr},
                               {"run.min_lr", &b.schedule.min_lr},
                               {"run.max_norm", &b.schedule.max_norm}})
        if (Status st = nonnegative_real(key, *into); !st.is_ok()) return st;
    }
    r.settings = b;
  }
  out = std::move(r);
  return Status::ok();
}

Status write_checkpoint(const std::string& dir, const TrainModel& m, const AdamW& opt,
                        const std::string& vocab_dir, const RunState* run) {
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
    std::map<std::string, std::string> meta = {{"optimizer", "AdamW"},
                                               {"step", std::to_string(opt.steps)},
                                               {"lr", number(opt.lr)},
                                               {"beta1", number(opt.beta1)},
                                               {"beta2", number(opt.beta2)},
                                               {"eps", number(opt.eps)},
                                               {"weight_decay", number(opt.weight_decay)}};
    if (run) meta.merge(run_state_metadata(*run));
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
  std::optional<RunState> run;
  return read_checkpoint(path, m, opt, has_optimizer, run);
}

Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer,
                       std::optional<RunState>& run_out) {
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
  std::optional<RunState> run;
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
    if (Status st = parse_run_state(meta, run); !st.is_ok())
      return Status::fail(quote(optim.string()) + ": " + st.error);
    if (run && run->task == RunTask::induction) {
      const InductionRunState& n = run->induction;
      if (n.steps > o.steps)
        return Status::fail(quote(optim.string()) + ": its run state has taken " + std::to_string(n.steps) +
                            " steps, its optimizer only " + std::to_string(o.steps));
      if (n.task.vocab > c.gpt.vocab_size || n.task.tokens > c.gpt.context_length)
        return Status::fail(quote(optim.string()) + ": its run state's task (" +
                            std::to_string(n.task.vocab) + " tokens, sequences of " +
                            std::to_string(n.task.tokens) +
                            ") does not fit the model's vocabulary and context length");
    } else if (run) {
      const TrainPosition& at = run->position;
      const std::int64_t steps = at.global_step + 1;
      if (steps > o.steps)
        return Status::fail(quote(optim.string()) + ": its run state has taken " + std::to_string(steps) +
                            " steps, its optimizer only " + std::to_string(o.steps));
      if (at.tokens_seen != steps * run->batch_size * c.gpt.context_length)
        return Status::fail(quote(optim.string()) + ": its run state's tokens_seen " +
                            std::to_string(at.tokens_seen) + " is not its steps times the batch's tokens");
    }
    has_optimizer = true;
  }
  m = std::move(model);
  opt = std::move(o);
  run_out = std::move(run);
  return Status::ok();
}

}  // namespace attnviz
