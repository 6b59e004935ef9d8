// Randomized comparison against PyTorch: tests/torch/make_fixtures.py ran the book's classes on a spread of
// configurations and wrote every tensor; the engine must reproduce all of them from the seed alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attnviz/engine.hpp"
#include "attnviz/io/json_io.hpp"
#include "check.hpp"

using namespace attnviz;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-5;  // relative error per element (see check.hpp for the floor near zero)

std::vector<fs::path> fixture_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(ATTNVIZ_FIXTURES_DIR))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

json load(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

Config config_of(const json& j) {
  Config c;
  c.variant = *parse_variant(j.at("variant").get<std::string>());
  c.d_in = j.at("d_in").get<int>();
  c.d_out = j.at("d_out").get<int>();
  c.num_heads = j.at("num_heads").get<int>();
  c.context_length = j.at("context_length").get<int>();
  c.dropout = j.at("dropout").get<double>();
  c.qkv_bias = j.at("qkv_bias").get<bool>();
  c.seed = j.at("seed").get<std::uint64_t>();
  c.train = j.at("train").get<bool>();
  c.dropout_rng = *parse_dropout_rng(j.at("dropout_rng").get<std::string>());
  return c;
}

std::vector<float> flat(const json& j) {
  std::vector<float> out;
  if (!j.is_array()) {
    out.push_back(j.get<float>());
    return out;
  }
  for (const json& x : j) {
    const std::vector<float> part = flat(x);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

double worst_error = 0.0;

void compare(const std::string& what, const float* got, std::size_t n, const json& want_json) {
  const std::vector<float> want = flat(want_json);
  REQUIRE_MESSAGE(want.size() == n, what << ": " << n << " values, PyTorch has " << want.size());
  const double err = test::max_rel_error(got, want.data(), n);
  worst_error = std::max(worst_error, err);
  INFO(what << ": max relative error " << err);
  CHECK(err <= kTolerance);
}

}  // namespace

TEST_CASE("PyTorch fixtures: parameters, every stage of every head, and the output") {
  const std::vector<fs::path> files = fixture_files();
  REQUIRE(files.size() >= 40);
  for (Isa isa : {Isa::scalar, Isa::automatic})
    for (const fs::path& file : files) {
      CAPTURE(to_string(isa));
      CAPTURE(file.filename().string());
      const json fx = load(file);
      const Config c = config_of(fx.at("config"));
      std::vector<std::vector<double>> rows = fx.at("inputs").get<std::vector<std::vector<double>>>();
      Input in;
      REQUIRE(input_from_rows(rows, in).is_ok());
      in.tokens = fx.at("tokens").get<std::vector<std::string>>();

      Result r;
      Params p;
      const Status st = run(c, in, r, &p, Exec{isa, 2});
      REQUIRE_MESSAGE(st.is_ok(), st.error);

      // Parameters: same names, same layouts, same draws.
      const std::vector<NamedTensor> sd = state_dict(c, p);
      REQUIRE(sd.size() == fx.at("params").size());
      for (const NamedTensor& t : sd) {
        REQUIRE_MESSAGE(fx.at("params").contains(t.name), t.name);
        const std::vector<float> want = flat(fx.at("params").at(t.name));
        REQUIRE(want.size() == t.value.size());
        // Drawn, not computed: these must agree to the last bit.
        CHECK_MESSAGE(std::equal(want.begin(), want.end(), t.value.data.begin()),
                      t.name << " differs from PyTorch");
      }

      const int T = r.tokens_count(), hd = r.shape.head_dim;
      const json& heads = fx.at("heads");
      REQUIRE(static_cast<int>(heads.size()) == r.shape.heads);
      for (int h = 0; h < r.shape.heads; ++h) {
        const std::string tag = "head " + std::to_string(h) + " ";
        const std::size_t tt = static_cast<std::size_t>(T) * T;
        const Tensor scores = r.scores.to_tensor(), weights = r.weights.to_tensor(),
                     dropped_got = r.dropped.to_tensor();
        compare(tag + "scores", scores.slice(h), tt, heads[h].at("scores"));
        compare(tag + "weights", weights.slice(h), tt, heads[h].at("weights"));
        compare(tag + "dropped", dropped_got.slice(h), tt, heads[h].at("dropped"));
        // The dropout mask itself must be the same: a cell is zero after dropout exactly when PyTorch's is.
        const std::vector<float> dropped = flat(heads[h].at("dropped"));
        for (std::size_t i = 0; i < tt; ++i) {
          CHECK_MESSAGE((dropped[i] == 0.0f) == (dropped_got.slice(h)[i] == 0.0f),
                        tag << "dropout mask cell " << i);
        }
        std::vector<float> ctx(static_cast<std::size_t>(T) * hd);
        for (int i = 0; i < T; ++i)
          for (int d = 0; d < hd; ++d)
            ctx[static_cast<std::size_t>(i) * hd + d] = r.context.at(i, h * hd + d);
        compare(tag + "context", ctx.data(), ctx.size(), heads[h].at("context"));
      }
      compare("output", r.output.ptr(), r.output.size(), fx.at("output"));

      // The JSON writer round-trips the same structure.
      const json mine = json::parse(result_to_json(r, sd));
      json config = mine.at("config");
      CHECK(config.at("mask") == true);  // attnviz's own option; PyTorch's modules always mask
      config.erase("mask");
      CHECK(config == fx.at("config"));
      CHECK(mine.at("tokens") == fx.at("tokens"));
      CHECK(mine.at("heads").size() == heads.size());
      for (const char* key : {"scores", "weights", "dropped", "context"})
        CHECK(flat(mine.at("heads")[0].at(key)).size() == flat(heads[0].at(key)).size());
      CHECK(flat(mine.at("output")) == std::vector<float>(r.output.data));
    }
  MESSAGE("largest relative error over " << files.size() << " fixtures: " << worst_error);
}
