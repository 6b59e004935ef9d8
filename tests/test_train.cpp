// Training against PyTorch: the fixtures tests/torch/make_train_fixtures.py writes with the book's GPTModel
// (and its attention-only variant), torch.optim.AdamW, DataLoader and chapter 5's train_model_simple.
// Gradients must equal PyTorch's to 1e-5 relative, 20 AdamW steps its losses and parameters to 1e-4, the
// loader its batches and draws exactly, and the book's loop at a reduced size its printed lines. The fast
// kernels are held to the reference (Isa::scalar) too.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "attnviz/io/bpe.hpp"
#include "attnviz/train.hpp"
#include "check.hpp"

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
  REQUIRE(cases.size() >= 6);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    for (Isa isa : {Isa::scalar, Isa::automatic}) {
      const std::string what = "case " + std::to_string(i) + " (" + to_string(resolve(isa)) + ")";
      const Grads r = one_backward(c, isa);
      INFO(what << ": loss " << r.loss << ", PyTorch " << c["loss"].get<double>());
      CHECK(std::fabs(r.loss - c["loss"].get<double>()) <= 1e-5 * std::fabs(c["loss"].get<double>()));
      check_tensors(r.grads, c["grads"], 1e-5, what, true);
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
  CHECK(torch_rand(g, 4) == floats_of(f["tail_rand"]));
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
}
