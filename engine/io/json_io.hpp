// The result as JSON (the CLI's --json format, also used by exports and fixtures) and JSON inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "attnviz/engine.hpp"

namespace attnviz {

// Writes the result object: config, tokens, inputs, params, heads (scores, weights, dropped, context),
// output. Floats are written in their shortest form that reads back to the same float32. Stages the result
// did not keep are left out of each head.
std::string result_to_json(const Result& r, const std::vector<NamedTensor>& params);

// Parses `--inputs` text: an array of T rows, each an array of d_in numbers.
Status parse_input_rows(std::string_view json_text, std::vector<std::vector<double>>& rows);

}  // namespace attnviz
