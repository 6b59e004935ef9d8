// config.json's text read strictly (engine/io internal): at most max_bytes (kMaxConfigBytes for a config),
// no NUL, no key twice in one object, nesting at most 64 deep, and a JSON object (NaN, Infinity and a number
// past a double's range, 1e999, are not JSON). Messages are one line
// starting "WHERE: ".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "attnviz/io/gpt_config.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

Status parse_strict_json(const std::string& where, std::string_view text, nlohmann::json& out,
                         std::size_t max_bytes = kMaxConfigBytes);

// A value for a message: strings quoted and cut, numbers and literals as written, containers by kind.
std::string shown(const nlohmann::json& v);

}  // namespace attnviz
