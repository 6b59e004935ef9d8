#include "attnviz/io/json_io.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "attnviz/io/json_writer.hpp"
#include "attnviz/io/safetensors.hpp"  // json_error_text
#include "attnviz/saturating.hpp"

namespace attnviz {
namespace {

// A float takes at most 15 bytes in its shortest form ("-1.17549435e-38"), 16 with its comma; a matrix row
// adds "[", "]" and a comma.
std::uint64_t matrix_bytes(std::uint64_t rows, std::uint64_t cols) {
  return sat_add(sat_mul(rows, sat_add(sat_mul(cols, 16), 3)), 2);
}

struct JsonCounts {
  std::uint64_t tokens = 0, token_bytes = 0, d_in = 0, heads = 0, head_dim = 0, out_width = 0;
  std::uint64_t square_stages = 0;  // T x T matrices per head: scores, weights, dropped
  std::uint64_t param_floats = 0, param_tensors = 0;
};

std::uint64_t json_bytes(const JsonCounts& n) {
  const std::uint64_t T = n.tokens;
  std::uint64_t b = 1024;  // the braces, the keys, "config" and "engine"
  b = sat_add(b, sat_add(sat_mul(n.token_bytes, 6), sat_mul(T, 3)));  // a control byte is written \u00XX
  b = sat_add(b, matrix_bytes(T, n.d_in));
  // every parameter row's brackets take at most 3 bytes per float; a name at most 64
  b = sat_add(b, sat_add(sat_mul(n.param_floats, 19), sat_mul(n.param_tensors, 80)));
  const std::uint64_t head = sat_add(
      sat_add(sat_mul(n.square_stages, sat_add(matrix_bytes(T, T), 16)), matrix_bytes(T, n.head_dim)), 32);
  b = sat_add(b, sat_mul(n.heads, head));
  return sat_add(b, matrix_bytes(T, n.out_width));
}

}  // namespace

std::uint64_t result_json_bound(const Config& config, int tokens, std::uint64_t token_bytes) {
  const Config c = effective(config);
  const Shape s = shape_of(c);
  JsonCounts n;
  n.tokens = tokens > 0 ? static_cast<std::uint64_t>(tokens) : 0;
  n.token_bytes = token_bytes;
  n.d_in = static_cast<std::uint64_t>(c.d_in);
  n.heads = static_cast<std::uint64_t>(s.heads);
  n.head_dim = static_cast<std::uint64_t>(s.head_dim);
  n.out_width = static_cast<std::uint64_t>(s.out_width);
  n.square_stages = 1 + ((c.stages & kStageScores) ? 1 : 0) + ((c.stages & kStageDropped) ? 1 : 0);
  n.param_floats = parameter_count(c);
  n.param_tensors =
      sat_add(sat_mul(6, n.heads), 2);  // the wrapper's per-head weights and biases; at most 8 otherwise
  return json_bytes(n);
}

std::string result_to_json(const Result& r, const std::vector<NamedTensor>& params) {
  const Config& c = r.config;
  const int T = r.tokens_count(), hd = r.shape.head_dim;
  JsonCounts n;
  n.tokens = static_cast<std::uint64_t>(T);
  for (const std::string& t : r.tokens) n.token_bytes += t.size();
  n.d_in = static_cast<std::uint64_t>(c.d_in);
  n.heads = static_cast<std::uint64_t>(r.shape.heads);
  n.head_dim = static_cast<std::uint64_t>(hd);
  n.out_width = static_cast<std::uint64_t>(r.output.rank == 2 ? r.output.shape[1] : 0);
  for (const HeadSquares* t : {&r.scores, &r.weights, &r.dropped}) n.square_stages += t->empty() ? 0 : 1;
  for (const NamedTensor& p : params) n.param_floats += p.value.size();
  n.param_tensors = params.size();
  JsonWriter w;
  // The whole text's bound at once: growing a string by doubling would hold up to 1.5 times the text.
  if (const std::uint64_t bound = json_bytes(n); bound < w.out.max_size())
    w.out.reserve(static_cast<std::size_t>(bound));
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
    const auto stage = [&](const char* name, const HeadSquares& t) {
      if (t.empty()) return;
      w.key(name);
      w.matrix(t.row(h, 0), T, T, t.stride);
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

namespace {

// The --inputs reader, fed by nlohmann's SAX parser so that only the rows are built (no document tree):
// [[x, ...], ...] at depth 0 (outside), 1 (the array of rows) and 2 (a row).
class RowsReader {
 public:
  using json = nlohmann::json;
  explicit RowsReader(std::size_t max_rows) : max_rows_(max_rows) {}

  std::vector<std::vector<double>> rows;
  std::size_t count = 0;  // rows seen, kept or not (past max_rows they are only counted)
  std::string error;

  bool null() { return not_number(); }
  bool boolean(bool) { return not_number(); }
  bool number_integer(json::number_integer_t x) { return number(static_cast<double>(x)); }
  bool number_unsigned(json::number_unsigned_t x) { return number(static_cast<double>(x)); }
  bool number_float(json::number_float_t x, const json::string_t&) { return number(x); }
  bool string(json::string_t&) { return not_number(); }
  bool binary(json::binary_t&) { return not_number(); }
  bool start_object(std::size_t) { return not_number(); }
  bool key(json::string_t&) { return true; }  // never reached: objects are refused as they start
  bool end_object() { return true; }
  bool start_array(std::size_t) {
    if (depth_ == 2) return not_number();
    if (depth_ == 1) {
      ++count;
      column_ = 0;
      if (count <= max_rows_) rows.emplace_back();
    }
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& e) {
    if (e.id == 406 && depth_ == 2)  // "number overflow": valid JSON, but no float32 (nor double) holds it
      return fail(where() + " is not a finite float (" + token + " is out of range)");
    return fail("the inputs are not valid JSON: " + json_error_text(e));
  }

 private:
  std::size_t max_rows_;
  int depth_ = 0;
  std::size_t column_ = 0;  // numbers so far in the current row

  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  std::string where() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "input row %zu, column %zu", count, column_ + 1);
    return buf;
  }
  bool number(double x) {
    if (depth_ != 2) return not_number();
    if (count <= max_rows_) rows.back().push_back(x);
    ++column_;
    return true;
  }
  bool not_number() {
    if (depth_ == 0) return fail("the inputs must be a non-empty array of rows: [[x, ...], ...]");
    if (depth_ == 1) return fail("input row " + std::to_string(count + 1) + " is not an array of numbers");
    return fail(where() + " is not a number");
  }
};

}  // namespace

Status parse_input_rows(std::string_view text, std::vector<std::vector<double>>& rows, std::size_t max_rows) {
  // nlohmann's parser takes a NUL as the end of the text: what follows one would be silently ignored.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    return Status::fail("the inputs are not valid JSON: a NUL byte at offset " + std::to_string(nul));
  RowsReader reader(max_rows);
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &reader);
  } catch (const std::bad_alloc&) {
    return Status::fail("the inputs need more memory than is available");
  }
  if (!reader.error.empty()) return Status::fail(reader.error);
  if (reader.count == 0) return Status::fail("the inputs must be a non-empty array of rows: [[x, ...], ...]");
  if (reader.count > max_rows) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "the inputs have %zu rows, more than the context length %zu", reader.count,
                  max_rows);
    return Status::fail(buf);
  }
  rows = std::move(reader.rows);
  return Status::ok();
}

}  // namespace attnviz
