// Input widgets of the UI that differ from Dear ImGui's own.
#pragma once

#include <string>
#include <string_view>

namespace attnviz::viz {

// An int field with - and + buttons (step, and step * 8 with Ctrl). ImGui's InputInt reads typed text with
// sscanf("%d"), which wraps: 4294967304 becomes 8. This one reads it as a 64-bit number and clamps it to
// int's range, so an out-of-range entry stays out of range and the configuration's check names it.
bool input_int(const char* label, int& v, int step);

// Text as the current font can draw it: a character the font lacks (CJK and emoji in the app's DejaVu Sans,
// anything past U+FFFF) becomes its code point, <U+4E2D>, instead of ImGui's '?' (so that different tokens
// never look the same); a control character becomes <U+0001>, bytes that are not UTF-8 <0xFF>. Line breaks
// and tabs stay. Call it inside a frame (it asks the font in use).
std::string visible_text(std::string_view utf8);

}  // namespace attnviz::viz
