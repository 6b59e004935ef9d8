// The result as JSON (the CLI's --json format, also used by exports and fixtures) and JSON inputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/engine.hpp"

namespace attnviz {

// Writes the result object: config, tokens, inputs, params, heads (scores, weights, dropped, context),
// output. Floats are written in their shortest form that reads back to the same float32. Stages the result
// did not keep are left out of each head.
std::string result_to_json(const Result& r, const std::vector<NamedTensor>& params);

// An upper bound on the bytes of result_to_json's text for a run of `c` over `tokens` tokens whose strings
// hold `token_bytes` bytes in all, known before computing (result_to_json reserves its own bound at once,
// so the text never takes more). Saturates at UINT64_MAX.
std::uint64_t result_json_bound(const Config& c, int tokens, std::uint64_t token_bytes);

// Parses `--inputs` text: an array of T rows, each an array of numbers (input_from_rows checks the widths
// and the range). Refuses, in one line naming the row and column: anything but that shape, invalid JSON
// (a NUL byte too: it would end the text early), a number no double holds (1e400), and more than
// `max_rows` rows (the context length: the rows past it are counted, not kept).
Status parse_input_rows(std::string_view json_text, std::vector<std::vector<double>>& rows,
                        std::size_t max_rows = SIZE_MAX);

}  // namespace attnviz
