// Fuzzes the --inputs reader: arbitrary bytes through parse_input_rows, with a row limit (the context
// length) taken from the first byte so that the limit is crossed too, and when they parse, input_from_rows.
// Each must succeed or fail with one line. On success the rows fit the limit, every row has the same width
// and every value is a finite float.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/io/json_io.hpp"
#include "attnviz/text.hpp"

namespace {

void check_message(const attnviz::Status& st) {
  if (st.error.empty() || st.error.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t max_rows = data[0] == 0 ? SIZE_MAX : data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::vector<double>> rows;
  const attnviz::Status parsed = attnviz::parse_input_rows(text, rows, max_rows);
  if (!parsed.is_ok()) {
    check_message(parsed);
    return 0;
  }
  if (rows.empty() || rows.size() > max_rows) std::abort();
  attnviz::Input in;
  const attnviz::Status made = attnviz::input_from_rows(rows, in);
  if (!made.is_ok()) {
    check_message(made);
    return 0;
  }
  if (in.x.shape[0] != static_cast<int>(rows.size()) || in.x.shape[1] != static_cast<int>(rows[0].size()) ||
      in.tokens.size() != rows.size())
    std::abort();
  for (float x : in.x.data)
    if (!std::isfinite(x)) std::abort();
  return 0;
}
