// Training against PyTorch: the fixtures tests/torch/make_train_fixtures.py writes with the book's GPTModel
// (and its attention-only variant), torch.optim.AdamW, DataLoader and chapter 5's train_model_simple.
// Gradients must equal PyTorch's to 1e-5 relative, 20 AdamW steps its losses and parameters to 1e-4, the
// loader its batches and draws exactly, and the book's loop at a reduced size its printed lines. The fast
// kernels are held to the reference (Isa::scalar) too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "attnviz/io/bpe.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/train_text.hpp"
#include "attnviz/train.hpp"
#include "check.hpp"
#include "run_state_check.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

const std::filesystem::path kDir = std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "train";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

json read_json(const char* name) {
  return json::parse(read_file(kDir / name));
}

TrainConfig config_of(const json& j) {
  TrainConfig c;
  c.gpt.vocab_size = j["vocab_size"];
  c.gpt.context_length = j["context_length"];
  c.gpt.d_model = j["emb_dim"];
  c.gpt.n_heads = j["n_heads"];
  c.gpt.n_layers = j["n_layers"];
  c.gpt.drop_rate = j["drop_rate"];
  c.gpt.qkv_bias = j["qkv_bias"];
  c.gpt.attention_only = j["attention_only"];
  return c;
}

std::vector<int> flat_ids(const json& rows, int& batch, int& tokens) {
  std::vector<int> ids;
  batch = static_cast<int>(rows.size());
  tokens = static_cast<int>(rows[0].size());
  for (const json& r : rows)
    for (const json& v : r) ids.push_back(v.get<int>());
  return ids;
}

std::vector<float> floats_of(const json& a) {
  std::vector<float> v;
  for (const json& x : a) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

std::string hex(const std::vector<std::uint8_t>& bytes) {
  std::string s;
  for (std::uint8_t b : bytes) s += "0123456789abcdef"[b >> 4], s += "0123456789abcdef"[b & 15];
  return s;
}

bool key_bias(const std::string& name) {
  return name.find("W_key.bias") != std::string::npos;
}

float largest(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Every tensor of `got` in named_parameters() order against the fixture's list of {name, values}.
//
// The key bias is the exception. It adds q . b_k to every score of a row, which the softmax cancels, so its
// gradient is exactly zero and both sides hold only rounding noise (PyTorch's: below 1e-9). A gradient is
// checked to be that small against the model's largest; after AdamW, whose normalized steps turn that noise
// into steps of about lr, the key bias is not compared at all (it changes no output).
void check_tensors(const GptTensors& got, const json& want, double tolerance, const std::string& what,
                   bool gradients) {
  float scale = 0.0f;
  for (const json& w : want) scale = std::max(scale, largest(floats_of(w["values"])));
  std::size_t i = 0;
  got.each([&](const std::string& name, const Tensor& t) {
    REQUIRE(i < want.size());
    const json& w = want[i++];
    CHECK(name == w["name"].get<std::string>());
    const std::vector<float> values = floats_of(w["values"]);
    REQUIRE(values.size() == t.size());
    if (key_bias(name)) {
      if (gradients) {
        INFO(what << " " << name << ": largest " << largest(t.data) << ", PyTorch's " << largest(values)
                  << ", the model's largest gradient " << scale);
        CHECK(largest(t.data) <= 1e-6 * scale);
        CHECK(largest(values) <= 1e-6 * scale);
      }
      return;
    }
    const double err = test::max_rel_error(t.ptr(), values.data(), values.size());
    INFO(what << " " << name << ": max relative error " << err);
    CHECK(err <= tolerance);
  });
  CHECK(i == want.size());
}

struct Grads {
  float loss = 0.0f;
  GptTensors grads;
};

Grads one_backward(const json& c, Isa isa, int threads = 0) {
  const TrainConfig cfg = config_of(c["config"]);
  TorchGenerator g(c["seed"].get<std::uint64_t>());
  TrainModel m;
  REQUIRE(TrainModel::build(cfg, g, m).is_ok());
  m.exec.isa = isa;
  m.exec.threads = threads;
  m.dropout_rng = *parse_dropout_rng(c.value("dropout_rng", std::string("cpu")));
  int batch = 0, tokens = 0;
  const std::vector<int> inputs = flat_ids(c["inputs"], batch, tokens);
  const std::vector<int> targets = flat_ids(c["targets"], batch, tokens);
  Grads r;
  REQUIRE(m.loss(inputs, targets, batch, tokens, c["train"].get<bool>(), g, r.loss).is_ok());
  REQUIRE(m.backward().is_ok());
  r.grads = m.grads();
  return r;
}

}  // namespace

TEST_CASE("train: every parameter's gradient after one backward equals PyTorch's") {
  const json cases = read_json("grads.json");
  REQUIRE(cases.size() >= 9);
  int mkl = 0;
  for (const json& c : cases)
    mkl += c.value("dropout_rng", std::string("cpu")) == "mkl" && c["train"] == true;
  CHECK(mkl >= 3);  // the mkl flavour's masks, in train mode
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    for (Isa isa : {Isa::scalar, Isa::automatic}) {
      const std::string what = "case " + std::to_string(i) + " (" + to_string(resolve(isa)) + ")";
      const Grads r = one_backward(c, isa);
      INFO(what << ": loss " << r.loss << ", PyTorch " << c["loss"].get<double>());
      CHECK(std::fabs(r.loss - c["loss"].get<double>()) <= 1e-5 * std::fabs(c["loss"].get<double>()));
      // PyTorch's gradient is the float64 step's (grads64): PyTorch's float32 result is itself up to 9.3e-6
      // from it (case 2's query bias, a sum that cancels), so against that both sides' rounding adds up.
      check_tensors(r.grads, c["grads64"], 1e-5, what + " against float64", true);
      check_tensors(r.grads, c["grads"], 2e-5, what + " against float32", true);
    }
  }
}

TEST_CASE("train: the fast kernels' gradients equal the reference's") {
  const json cases = read_json("grads.json");
  for (const json& c : cases) {
    const Grads ref = one_backward(c, Isa::scalar);
    for (Isa isa : available_isas()) {
      if (isa == Isa::scalar) continue;
      const Grads fast = one_backward(c, isa);
      std::vector<const Tensor*> want;
      ref.grads.each([&](const std::string&, const Tensor& t) { want.push_back(&t); });
      std::size_t i = 0;
      fast.grads.each([&](const std::string& name, const Tensor& t) {
        if (key_bias(name)) return (void)++i;  // rounding noise on both sides (check_tensors)
        const double err = test::max_rel_error(t.ptr(), want[i++]->ptr(), t.size());
        INFO(to_string(isa) << " " << name << ": max relative error " << err);
        CHECK(err <= 1e-5);
      });
    }
  }
}

TEST_CASE("train: gradients do not depend on the thread count") {
  const json c = read_json("grads.json")[0];  // train mode: dropout drawn
  std::vector<GptTensors> runs;
  for (int threads : {1, 2, 3}) runs.push_back(one_backward(c, Isa::automatic, threads).grads);
  for (std::size_t r = 1; r < runs.size(); ++r) {
    std::vector<const Tensor*> first;
    runs[0].each([&](const std::string&, const Tensor& t) { first.push_back(&t); });
    std::size_t i = 0;
    runs[r].each([&](const std::string& name, const Tensor& t) {
      INFO(name);
      CHECK(t.data == first[i++]->data);
    });
  }
}

TEST_CASE("train: 20 AdamW steps give PyTorch's losses and parameters") {
  const json cases = read_json("adamw.json");
  REQUIRE(cases.size() >= 3);
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const json& c = cases[ci];
    const TrainConfig cfg = config_of(c["config"]);
    TorchGenerator g(c["seed"].get<std::uint64_t>());
    TrainModel m;
    REQUIRE(TrainModel::build(cfg, g, m).is_ok());
    AdamW opt;
    opt.lr = c["lr"];
    opt.weight_decay = c["weight_decay"];
    LrSchedule schedule;
    const bool scheduled = !c["schedule"].is_null();
    if (scheduled) {
      schedule.warmup_steps = c["schedule"]["warmup_steps"];
      schedule.initial_lr = c["schedule"]["initial_lr"];
      schedule.min_lr = c["schedule"]["min_lr"];
      schedule.max_norm = c["schedule"]["max_norm"];
    }
    const json& batches = c["batches"];
    const int steps = static_cast<int>(batches.size());
    for (int s = 0; s < steps; ++s) {
      m.zero_grad();
      if (scheduled) {
        opt.lr = schedule.lr(s, steps, c["lr"].get<double>());
        CHECK(opt.lr == c["lrs"][static_cast<std::size_t>(s)].get<double>());
      }
      std::vector<int> inputs, targets;
      for (const json& row : batches[static_cast<std::size_t>(s)]) {
        for (std::size_t t = 0; t + 1 < row.size(); ++t) inputs.push_back(row[t]);
        for (std::size_t t = 1; t < row.size(); ++t) targets.push_back(row[t]);
      }
      const int batch = static_cast<int>(batches[static_cast<std::size_t>(s)].size());
      float loss = 0.0f;
      REQUIRE(m.loss(inputs, targets, batch, static_cast<int>(inputs.size()) / batch, true, g, loss).is_ok());
      REQUIRE(m.backward().is_ok());
      if (scheduled && s > schedule.warmup_steps) clip_grad_norm(m.grads(), schedule.max_norm);
      opt.step(m.params(), m.grads());
      const double want = c["losses"][static_cast<std::size_t>(s)];
      INFO("case " << ci << " step " << s << ": loss " << loss << ", PyTorch " << want);
      CHECK(std::fabs(loss - want) <= 1e-4 * std::fabs(want));
    }
    check_tensors(m.params(), c["params"], 1e-4, "case " + std::to_string(ci), false);
  }
}

TEST_CASE("train: the data loader's batches and draws are PyTorch's") {
  const json f = read_json("loader.json");
  for (const json& p : f["randperm"]) {
    TorchGenerator g(p["seed"].get<std::uint64_t>());
    const std::vector<int> got = torch_randperm(g, p["n"]);
    CHECK(got == p["perm"].get<std::vector<int>>());
  }
  auto loader_of = [](const json& j) {
    return Loader(j["windows"], j["batch_size"], j["shuffle"], j["drop_last"]);
  };
  const Loader train = loader_of(f["train"]), val = loader_of(f["val"]);
  TorchGenerator g(f["seed"].get<std::uint64_t>());
  for (const json& e : f["events"]) {
    if (e.contains("rand")) {
      const std::vector<float> got = torch_rand(g, e["rand"].get<std::size_t>());
      CHECK(got == floats_of(e["values"]));
      continue;
    }
    Loader l = e["loader"] == "train" ? train : val;
    l.begin(g);
    const int n = e["stop_after"].is_null() ? l.batches() : std::min(l.batches(), e["stop_after"].get<int>());
    std::vector<std::vector<int>> got;
    for (int i = 0; i < n; ++i) got.push_back(l.batch(i));
    CHECK(got == e["batches"].get<std::vector<std::vector<int>>>());
  }
  // the generator's state is torch.get_rng_state()'s bytes
  CHECK(hex(g.state()) == f["state"].get<std::string>());
  CHECK(torch_rand(g, 4) == floats_of(f["tail_rand"]));
}

namespace {

std::vector<std::uint8_t> unhex(const std::string& s) {
  std::vector<std::uint8_t> b;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    b.push_back(static_cast<std::uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return b;
}

}  // namespace

TEST_CASE("train: the generator's state reads and writes as torch.get_rng_state") {
  const json f = read_json("loader.json");
  // a state with a cached normal sample (torch.randn(3) after manual_seed): the next randn uses it
  const std::vector<std::uint8_t> cached = unhex(f["cached_normal"]["state"]);
  TorchGenerator g(1);
  REQUIRE(g.set_state(cached.data(), cached.size()).is_ok());
  CHECK(g.initial_seed() == (std::uint64_t{1} << 40) + 5);
  CHECK(g.state() == cached);
  CHECK(torch_randn(g, 3) == floats_of(f["cached_normal"]["randn"]));
  // right after manual_seed (next 0) and after draws (next k, left 625 - k): written as PyTorch writes them
  TorchGenerator a(123), b(1);
  const std::vector<std::uint8_t> fresh = a.state();
  REQUIRE(b.set_state(fresh.data(), fresh.size()).is_ok());
  CHECK(b.state() == fresh);
  CHECK(a.random() == b.random());
  for (int i = 0; i < 700; ++i) (void)a.random();
  const std::vector<std::uint8_t> later = a.state();
  REQUIRE(b.set_state(later.data(), later.size()).is_ok());
  CHECK(torch_rand(a, 1000) == torch_rand(b, 1000));
  // the bytes PyTorch's set_rng_state ignores are ignored: padding, the legacy normal_x and normal_rho, the
  // normal sample while its flag is 0 and the float sample while its flag is 0; they read back as zeros
  std::vector<std::uint8_t> noisy = later;
  for (const std::size_t at : {5016, 5020, 5024, 5031, 5032, 5039, 5044, 5047, 5048, 5051, 5053, 5055})
    noisy[at] = 0xA5;
  TorchGenerator c(5);
  REQUIRE(c.set_state(noisy.data(), noisy.size()).is_ok());
  CHECK(c.state() == later);
  REQUIRE(b.set_state(later.data(), later.size()).is_ok());
  CHECK(torch_rand(c, 10) == torch_rand(b, 10));

  // untrusted: each refusal is one line and leaves the generator as it was
  const auto refused = [&](std::vector<std::uint8_t> bytes, const std::string& error) {
    TorchGenerator t(9);
    const std::vector<std::uint8_t> before = t.state();
    const Status st = t.set_state(bytes.data(), bytes.size());
    CHECK(st.error == error);
    CHECK(t.state() == before);
  };
  refused(std::vector<std::uint8_t>(5048),
          "the generator state is 5048 bytes, not 5056 (torch.get_rng_state() of PyTorch 1.13)");
  std::vector<std::uint8_t> bad = later;
  bad[8] = 0, bad[9] = 0;  // left 0
  refused(bad, "the generator state's position is inconsistent (left 0, next " +
                   std::to_string(later[16] | later[17] << 8) + ")");
  bad = later;
  bad[12] = 0;
  refused(bad, "the generator state is not seeded");
  bad = later;
  bad[24 + 8 * 5 + 4] = 1;
  refused(bad, "the generator state's word 5 is not 32-bit");
  bad = later;
  bad[5052] = 1;
  refused(bad, "the generator state caches a float normal sample, which attnviz never draws");
  bad = cached;
  for (int i = 0; i < 8; ++i) bad[5024 + static_cast<std::size_t>(i)] = 0xFF;  // a NaN
  refused(bad, "the generator state's cached normal sample is not a finite number");
}

TEST_CASE("train: text as the book reads and splits it") {
  std::string out;
  REQUIRE(read_text_universal("a\r\nb\rc\n\xC3\xA9", out).is_ok());
  CHECK(out == "a\nb\nc\n\xC3\xA9");
  const Status bad = read_text_universal("ok\xC3(", out);
  CHECK(bad.error == "the text is not valid UTF-8 (bad byte 0xC3 at offset 2)");
  CHECK_FALSE(read_text_universal("\xED\xA0\x80", out).is_ok());  // a surrogate, refused as Python does
  std::string a, b;
  split_text("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9xxxxx", 0.9, a, b);  // 10 characters, 15 bytes
  CHECK(a == "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9xxxx");
  CHECK(b == "x");
  const std::vector<int> ids = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(make_windows(ids, 3, 3).starts == std::vector<int>{0, 3});  // range(0, 8 - 3, 3)
  CHECK(make_windows(ids, 7, 1).starts == std::vector<int>{0});
  CHECK(make_windows(ids, 8, 1).starts.empty());
}

TEST_CASE("train: the book's chapter-5 loop at a reduced size prints PyTorch's lines") {
  const json f = read_json("book_run.json");
  Bpe bpe;
  REQUIRE(
      Bpe::load_dir((std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string(), bpe).is_ok());
  std::string text;
  REQUIRE(read_text_universal(read_file(kDir / "story.txt"), text).is_ok());
  std::string train_text, val_text;
  split_text(text, f["train_ratio"], train_text, val_text);
  std::vector<int> train_ids, val_ids;
  REQUIRE(bpe.encode(train_text, train_ids).is_ok());
  REQUIRE(bpe.encode(val_text, val_ids).is_ok());
  const TrainConfig cfg = config_of(f["config"]);
  const int ctx = cfg.gpt.context_length;
  const Windows train = make_windows(train_ids, ctx, ctx), val = make_windows(val_ids, ctx, ctx);
  CHECK(train.size() == f["train_windows"].get<int>());
  CHECK(val.size() == f["val_windows"].get<int>());

  TorchGenerator g(f["seed"].get<std::uint64_t>());
  TrainModel m;
  REQUIRE(TrainModel::build(cfg, g, m).is_ok());
  AdamW opt;
  TrainRun run;
  run.batch_size = f["batch_size"], run.epochs = f["epochs"], run.eval_freq = f["eval_freq"];
  run.eval_iter = f["eval_iter"], run.lr = f["lr"], run.weight_decay = f["weight_decay"];
  REQUIRE(bpe.encode(f["start_context"].get<std::string>(), run.start_ids).is_ok());
  std::vector<std::string> lines;
  std::vector<int> line_epoch;
  TrainEvents events;
  events.eval = [&](int epoch, int step, double tl, double vl, std::int64_t) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "Ep %d (Step %06d): Train loss %.3f, Val loss %.3f", epoch, step, tl, vl);
    lines.push_back(buf);
    line_epoch.push_back(epoch);
  };
  events.sample = [&](int epoch, const std::vector<int>& ids) {
    std::string s = bpe.decode(ids);
    for (char& ch : s)
      if (ch == '\n') ch = ' ';
    lines.push_back(s);
    line_epoch.push_back(epoch);
  };
  REQUIRE(train_book(m, opt, train, val, run, g, events).is_ok());
  const std::vector<std::string> want = f["lines"];
  REQUIRE(lines.size() == want.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i << ": got '" << lines[i] << "', PyTorch '" << want[i] << "'");
    if (line_epoch[i] <= 2 || lines[i].rfind("Ep ", 0) != 0) {
      CHECK(lines[i] == want[i]);  // the first two epochs to the printed decimals, and every sample
      continue;
    }
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
    REQUIRE(std::sscanf(lines[i].c_str(), "Ep %*d (Step %*d): Train loss %lf, Val loss %lf", &a1, &a2) == 2);
    REQUIRE(std::sscanf(want[i].c_str(), "Ep %*d (Step %*d): Train loss %lf, Val loss %lf", &b1, &b2) == 2);
    CHECK(std::fabs(a1 - b1) <= 0.02);
    CHECK(std::fabs(a2 - b2) <= 0.02);
  }
}

TEST_CASE("train: <|endoftext|> becomes its id as tiktoken's allowed_special makes it, GPT-2's vocabulary") {
  Bpe gpt2;
  REQUIRE(Bpe::load_dir(ATTNVIZ_GPT2_DIR, gpt2).is_ok());
  CHECK(endoftext_id(gpt2) == 50256);
  std::vector<int> ids;
  REQUIRE(encode_training_text(gpt2, "Hello<|endoftext|>world", ids).is_ok());
  CHECK(ids == std::vector<int>{15496, 50256, 6894});
  REQUIRE(encode_training_text(gpt2, "<|endoftext|><|endoftext|>", ids).is_ok());
  CHECK(ids == std::vector<int>{50256, 50256});
  // each half of a split inside it is plain text; so is the whole string for Bpe::encode (the views)
  REQUIRE(encode_training_text(gpt2, "<|end", ids).is_ok());
  CHECK(ids == std::vector<int>{27, 91, 437});
  REQUIRE(encode_training_text(gpt2, "oftext|>", ids).is_ok());
  CHECK(ids == std::vector<int>{1659, 5239, 91, 29});
  REQUIRE(gpt2.encode(" <|endoftext|> x", ids).is_ok());
  CHECK(ids == std::vector<int>{1279, 91, 437, 1659, 5239, 91, 29, 2124});
  // a vocabulary without the token (the truncated 512-id one) reads it as plain text
  Bpe small;
  REQUIRE(
      Bpe::load_dir((std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string(), small).is_ok());
  CHECK(endoftext_id(small) == -1);
  std::vector<int> plain;
  REQUIRE(encode_training_text(small, "a<|endoftext|>b", ids).is_ok());
  REQUIRE(small.encode("a<|endoftext|>b", plain).is_ok());
  CHECK(ids == plain);
}

namespace {

using Lines = std::vector<std::pair<int, std::string>>;  // (epoch, line)

TrainEvents line_events(const Bpe& bpe, Lines& lines) {
  TrainEvents events;
  events.eval = [&lines](int epoch, int step, double tl, double vl, std::int64_t) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "Ep %d (Step %06d): Train loss %.3f, Val loss %.3f", epoch, step, tl, vl);
    lines.emplace_back(epoch, buf);
  };
  events.sample = [&lines, &bpe](int epoch, const std::vector<int>& ids) {
    std::string s = bpe.decode(ids);
    for (char& ch : s)
      if (ch == '\n') ch = ' ';
    lines.emplace_back(epoch, s);
  };
  return events;
}

// The book's tolerance: every line of the first two epochs and every sample exactly, later losses to 0.02.
void check_lines(const Lines& lines, const std::vector<std::string>& want, const std::string& what) {
  REQUIRE(lines.size() == want.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO(what << " line " << i << ": got '" << lines[i].second << "', PyTorch '" << want[i] << "'");
    if (lines[i].first <= 2 || lines[i].second.rfind("Ep ", 0) != 0) {
      CHECK(lines[i].second == want[i]);
      continue;
    }
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
    REQUIRE(std::sscanf(lines[i].second.c_str(), "Ep %*d (Step %*d): Train loss %lf, Val loss %lf", &a1,
                        &a2) == 2);
    REQUIRE(std::sscanf(want[i].c_str(), "Ep %*d (Step %*d): Train loss %lf, Val loss %lf", &b1, &b2) == 2);
    CHECK(std::fabs(a1 - b1) <= 0.02);
    CHECK(std::fabs(a2 - b2) <= 0.02);
  }
}

}  // namespace

TEST_CASE(
    "train: short book runs (<|endoftext|> in the text, a split inside it, mkl dropout) are PyTorch's") {
  const json runs = read_json("book_runs.json");
  REQUIRE(runs.size() == 3);
  for (const json& r : runs) {
    const std::string name = r["name"];
    INFO(name);
    Bpe bpe;
    REQUIRE(Bpe::load_dir(
                (std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / r["vocab"].get<std::string>()).string(), bpe)
                .is_ok());
    std::string train_text, val_text;
    split_text(r["text"].get<std::string>(), r["train_ratio"], train_text, val_text);
    std::vector<int> train_ids, val_ids, start_ids;
    REQUIRE(encode_training_text(bpe, train_text, train_ids).is_ok());
    REQUIRE(encode_training_text(bpe, val_text, val_ids).is_ok());
    REQUIRE(encode_training_text(bpe, r["start_context"].get<std::string>(), start_ids).is_ok());
    CHECK(train_ids == r["train_ids"].get<std::vector<int>>());
    CHECK(val_ids == r["val_ids"].get<std::vector<int>>());
    CHECK(start_ids == r["start_ids"].get<std::vector<int>>());
    if (name == "endoftext") CHECK(std::count(train_ids.begin(), train_ids.end(), 512) >= 2);
    if (name == "endoftext_split") {  // the split leaves "<|end" and "oftext|>", both plain
      CHECK(train_text.substr(train_text.size() - 5) == "<|end");
      CHECK(std::count(val_ids.begin(), val_ids.end(), 512) == 0);
    }
    const TrainConfig cfg = config_of(r["config"]);
    const int ctx = cfg.gpt.context_length;
    const Windows train = make_windows(train_ids, ctx, ctx), val = make_windows(val_ids, ctx, ctx);
    // the training loader's first epoch, right after torch.manual_seed(seed)
    Loader loader(train.size(), r["batch_size"], true, true);
    TorchGenerator first(r["seed"].get<std::uint64_t>());
    loader.begin(first);
    std::vector<std::vector<std::vector<int>>> got;
    for (int b = 0; b < loader.batches(); ++b) {
      std::vector<int> inputs, targets;
      gather_batch(train, loader.batch(b), inputs, targets);
      got.emplace_back();
      for (std::size_t i = 0; i < inputs.size(); i += static_cast<std::size_t>(ctx))
        got.back().emplace_back(inputs.begin() + static_cast<std::ptrdiff_t>(i),
                                inputs.begin() + static_cast<std::ptrdiff_t>(i) + ctx);
    }
    CHECK(got == r["first_epoch"].get<std::vector<std::vector<std::vector<int>>>>());

    TorchGenerator g(r["seed"].get<std::uint64_t>());
    TrainModel m;
    REQUIRE(TrainModel::build(cfg, g, m).is_ok());
    m.dropout_rng = *parse_dropout_rng(r["dropout_rng"].get<std::string>());
    AdamW opt;
    TrainRun run;
    run.batch_size = r["batch_size"], run.epochs = r["epochs"], run.eval_freq = r["eval_freq"];
    run.eval_iter = r["eval_iter"], run.lr = r["lr"], run.weight_decay = r["weight_decay"];
    run.start_ids = start_ids;
    Lines lines;
    REQUIRE(train_book(m, opt, train, val, run, g, line_events(bpe, lines)).is_ok());
    check_lines(lines, r["lines"], name);
  }
}

TEST_CASE("train: a run stopped, checkpointed and resumed equals the straight run, bit for bit") {
  // the mkl run's text and tokenizer, with shuffling and dropout on
  const json r = read_json("book_runs.json")[2];
  Bpe bpe;
  REQUIRE(
      Bpe::load_dir((std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "gpt" / "vocab").string(), bpe).is_ok());
  std::string train_text, val_text;
  split_text(r["text"].get<std::string>(), 0.9, train_text, val_text);
  std::vector<int> train_ids, val_ids;
  REQUIRE(encode_training_text(bpe, train_text, train_ids).is_ok());
  REQUIRE(encode_training_text(bpe, val_text, val_ids).is_ok());
  const TrainConfig cfg = config_of(r["config"]);
  const Windows train = make_windows(train_ids, 16, 16), val = make_windows(val_ids, 16, 16);
  TrainRun run;
  run.epochs = 3, run.eval_freq = 3, run.eval_iter = 2, run.new_tokens = 8, run.lr = 4e-3;
  REQUIRE(bpe.encode("Every effort", run.start_ids).is_ok());
  run.use_schedule = true;  // the schedule's position must carry over too
  run.schedule.warmup_steps = 5, run.schedule.initial_lr = 1e-4, run.schedule.min_lr = 1e-4;
  run.schedule.max_norm = 1.0;
  const int batches = train.size() / run.batch_size;
  REQUIRE(batches >= 10);

  for (DropoutRng flavour : {DropoutRng::cpu, DropoutRng::mkl}) {
    // stop mid-epoch, right after an evaluation, and after an epoch's last step (its sample still to print)
    for (int stop_after : {batches + 4, 7, batches}) {
      INFO(to_string(flavour) << ", stopped after step " << stop_after);
      Lines straight_lines, split_lines;
      TorchGenerator g1(5);
      TrainModel straight;
      REQUIRE(TrainModel::build(cfg, g1, straight).is_ok());
      straight.dropout_rng = flavour;
      AdamW o1;
      REQUIRE(train_book(straight, o1, train, val, run, g1, line_events(bpe, straight_lines)).is_ok());

      TorchGenerator g2(5);
      TrainModel first;
      REQUIRE(TrainModel::build(cfg, g2, first).is_ok());
      first.dropout_rng = flavour;
      AdamW o2;
      TrainEvents stop = line_events(bpe, split_lines);
      stop.step = [&](int, int step, double, std::int64_t) { return step + 1 < stop_after; };
      TrainPosition at;
      REQUIRE(train_book(first, o2, train, val, run, g2, stop, at).is_ok());
      CHECK(at.global_step + 1 == stop_after);
      RunState state;
      state.position = at, state.rng = g2.state(), state.dropout_rng = flavour, state.batch_size = 2;
      state.train_windows = train.size(), state.val_windows = val.size();
      state.data_hash = run_data_hash(train, val);
      const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnviz_test_resume";
      std::filesystem::remove_all(dir);
      REQUIRE(write_checkpoint(dir.string(), first, o2, "", &state).is_ok());

      TrainModel resumed;
      AdamW o3;
      bool has_optimizer = false;
      std::optional<RunState> back;
      REQUIRE(read_checkpoint(dir.string(), resumed, o3, has_optimizer, back).is_ok());
      REQUIRE(back.has_value());
      CHECK(back->data_hash == run_data_hash(train, val));
      CHECK(back->dropout_rng == flavour);
      TorchGenerator g3(999);  // the stored state replaces whatever this one holds
      REQUIRE(g3.set_state(back->rng.data(), back->rng.size()).is_ok());
      resumed.dropout_rng = back->dropout_rng;
      TrainPosition from = back->position;
      REQUIRE(train_book(resumed, o3, train, val, run, g3, line_events(bpe, split_lines), from).is_ok());
      std::filesystem::remove_all(dir);

      REQUIRE(split_lines.size() == straight_lines.size());
      for (std::size_t i = 0; i < split_lines.size(); ++i) CHECK(split_lines[i] == straight_lines[i]);
      CHECK(g3.state() == g1.state());
      CHECK(o3.steps == o1.steps);
      std::vector<const Tensor*> want;
      straight.params().each([&](const std::string&, const Tensor& t) { want.push_back(&t); });
      std::size_t i = 0;
      resumed.params().each([&](const std::string& name, const Tensor& t) {
        INFO(name);
        CHECK(t.data == want[i++]->data);
      });
    }
  }
}

TEST_CASE("train: a checkpoint's run state is untrusted: each bad value is one line") {
  RunState r;
  r.position.epoch = 1, r.position.batch = 2, r.position.global_step = 6, r.position.tokens_seen = 7 * 2 * 16;
  r.position.sampler_seed = 12345;
  r.batch_size = 2, r.train_windows = 10, r.val_windows = 1, r.data_hash = 0xfedcba9876543210ull;
  r.rng = TorchGenerator(3).state();
  const std::map<std::string, std::string> good = run_state_metadata(r);
  std::optional<RunState> out;
  REQUIRE(parse_run_state(good, out).is_ok());
  REQUIRE(out.has_value());
  CHECK(out->position.global_step == 6);
  CHECK(out->data_hash == r.data_hash);
  CHECK(out->rng == r.rng);
  CHECK(parse_run_state({{"step", "3"}}, out).is_ok());  // no run.version: an older checkpoint
  CHECK_FALSE(out.has_value());
  const auto refused = [&good](const std::string& key, const std::string& value, const std::string& error) {
    test::check_run_state_refused(good, key, value, error);
  };
  refused("run.version", "3", "its run state is version '3', not 1 or 2");
  refused("run.epoch", "(none)", "its run state has no run.epoch");
  refused("run.epoch", "-1", "its run.epoch is '-1', not a whole number up to 2147483647");
  refused("run.batch", "01", "its run.batch is '01', not a whole number up to 2147483647");
  refused("run.batch", "3",
          "its run state's position (epoch 1, batch 3, 7 steps) is inconsistent with 5 batches an epoch");
  refused("run.batch", "6",
          "its run state's position (epoch 1, batch 6, 7 steps) is inconsistent with 5 batches an epoch");
  refused("run.global_step", "99999999999999999999",
          "its run.global_step is '99999999999999999999', not a whole number up to 2147483647");
  refused("run.batch_size", "0", "its run state's batch size 0 does not fit its 10 training windows");
  refused("run.sampler_seed", "9223372036854775808",
          "its run.sampler_seed is '9223372036854775808', not a whole number up to 9223372036854775807");
  refused("run.data_hash", "xyz", "its run.data_hash is 'xyz', not 16 hex digits");
  refused("run.dropout_rng", "gpu", "its run.dropout_rng is 'gpu', not cpu or mkl");
  refused("run.rng_state", "00", "its run.rng_state is not 10112 lowercase hex digits");
  std::string rng = good.at("run.rng_state");
  rng[2 * 12] = '0', rng[2 * 12 + 1] = '0';  // seeded = 0
  refused("run.rng_state", rng, "its run.rng_state: the generator state is not seeded");
}

TEST_CASE("train: the induction task's sequences repeat a segment, at random or fixed distances") {
  InductionTask t;
  REQUIRE(validate(t).is_ok());
  // the longest run of positions k with seq[k] == seq[k + d], over d >= 1 (random) or d = fixed
  const auto longest_copy = [](const int* s, int n, int d) {
    int best = 0, run = 0;
    for (int k = 0; k + d < n; ++k) {
      run = s[k] == s[k + d] ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  };
  TorchGenerator g(5);
  std::vector<int> in, out;
  induction_batch(t, 64, g, in, out);
  REQUIRE(in.size() == 64u * 64u);
  std::set<int> distances;
  for (int b = 0; b < 64; ++b) {
    std::vector<int> seq(in.begin() + b * 64, in.begin() + (b + 1) * 64);
    seq.push_back(out[static_cast<std::size_t>(b) * 64 + 63]);  // the sequence is 65 tokens
    CHECK(std::equal(out.begin() + b * 64, out.begin() + b * 64 + 63,
                     seq.begin() + 1));  // targets: next tokens
    int best = 0, at = 0;
    for (int d = 1; d < 65; ++d) {
      const int run = longest_copy(seq.data(), 65, d);
      if (run > best) best = run, at = d;
    }
    CHECK(best >= t.min_repeat);
    distances.insert(at);
  }
  CHECK(distances.size() > 10);  // the distances vary
  t.fixed_distance = 16;
  REQUIRE(validate(t).is_ok());
  induction_batch(t, 32, g, in, out);
  for (int b = 0; b < 32; ++b) CHECK(longest_copy(in.data() + b * 64, 64, 16) >= t.min_repeat - 1);
  t.fixed_distance = 2;  // shorter than the shortest repeat
  CHECK_FALSE(validate(t).is_ok());
  // a probe: `repeat` tokens again `distance` later
  const std::vector<int> p = induction_probe(InductionTask{}, 10, 31, 7);
  REQUIRE(p.size() == 64u);
  CHECK(longest_copy(p.data(), 64, 31) >= 10);
  // and no other token recurs: 54 distinct tokens in the 64 positions, the copy's 10 each twice
  std::map<int, int> count;
  for (int id : p) ++count[id];
  CHECK(count.size() == 54u);
  int twice = 0;
  for (const auto& [id, n] : count) {
    CHECK((id >= 0 && id < InductionTask{}.vocab));
    CHECK(n <= 2);
    twice += n == 2;
  }
  CHECK(twice == 10);
  CHECK(induction_probe_repeat(InductionTask{}) == 16);
  // past the vocabulary, the draws start over: a 40-token probe over 16 tokens holds each of them
  InductionTask small;
  small.vocab = 16, small.tokens = 40;
  const std::vector<int> q = induction_probe(small, 4, 10, 3);
  CHECK(std::set<int>(q.begin(), q.end()).size() == 16u);
}
