#include "json_io.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "json_writer.hpp"

namespace attnviz {
std::string result_to_json(const Result& r, const std::vector<NamedTensor>& params) {
  const Config& c = r.config;
  const int T = r.tokens_count(), hd = r.shape.head_dim;
  JsonWriter w;
  w.out.reserve(64 + static_cast<std::size_t>(r.weights.size()) * 40);
  w.out += '{';
  w.key("config");
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\"variant\":\"%s\",\"d_in\":%d,\"d_out\":%d,\"num_heads\":%d,\"context_length\":%d,"
      "\"dropout\":%.17g,\"qkv_bias\":%s,\"seed\":%llu,\"train\":%s,\"dropout_rng\":\"%s\",\"mask\":%s}",
      to_string(c.variant), c.d_in, c.d_out, c.num_heads, c.context_length, c.dropout,
      c.qkv_bias ? "true" : "false", static_cast<unsigned long long>(c.seed), c.train ? "true" : "false",
      to_string(c.dropout_rng), c.mask ? "true" : "false");
  w.out += buf;
  w.out += ",";
  w.key("tokens");
  w.out += '[';
  for (int t = 0; t < T; ++t) {
    if (t) w.out += ',';
    w.string(r.tokens[static_cast<std::size_t>(t)]);
  }
  w.out += "],";
  w.key("inputs");
  w.tensor(r.inputs);
  w.out += ',';
  w.key("params");
  w.out += '{';
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i) w.out += ',';
    w.key(params[i].name);
    w.tensor(params[i].value);
  }
  w.out += "},";
  w.key("heads");
  w.out += '[';
  for (int h = 0; h < r.shape.heads; ++h) {
    if (h) w.out += ',';
    w.out += '{';
    const auto stage = [&](const char* name, const Tensor& t) {
      if (t.empty()) return;
      w.key(name);
      w.matrix(t.slice(h), T, T, T);
      w.out += ',';
    };
    stage("scores", r.scores);
    stage("weights", r.weights);
    stage("dropped", r.dropped);
    w.key("context");
    w.matrix(r.context.ptr() + static_cast<std::size_t>(h) * hd, T, hd, r.shape.width);
    w.out += '}';
  }
  w.out += "],";
  w.key("output");
  w.tensor(r.output);
  // "backend": "cpu" for this engine's kernels (named by "isa"), else who computed it (e.g. "webgpu").
  std::snprintf(buf, sizeof buf, ",\"engine\":{\"backend\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"ms\":%.4f}",
                r.backend.empty() ? "cpu" : r.backend.c_str(), r.backend.empty() ? to_string(r.isa) : "none",
                r.threads, r.seconds * 1e3);
  w.out += buf;
  w.out += '}';
  return std::move(w.out);
}

Status parse_input_rows(std::string_view text, std::vector<std::vector<double>>& rows) {
  const nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::fail("the inputs are not valid JSON: expected [[x, ...], ...]");
  if (!j.is_array() || j.empty()) return Status::fail("the inputs must be a non-empty array of rows");
  std::vector<std::vector<double>> parsed;
  for (std::size_t r = 0; r < j.size(); ++r) {
    const nlohmann::json& row = j[r];
    char buf[128];
    if (!row.is_array()) {
      std::snprintf(buf, sizeof buf, "input row %zu is not an array of numbers", r + 1);
      return Status::fail(buf);
    }
    std::vector<double> values;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (!row[c].is_number()) {
        std::snprintf(buf, sizeof buf, "input row %zu, column %zu is not a number", r + 1, c + 1);
        return Status::fail(buf);
      }
      values.push_back(row[c].get<double>());
    }
    parsed.push_back(std::move(values));
  }
  rows = std::move(parsed);
  return Status::ok();
}

}  // namespace attnviz
