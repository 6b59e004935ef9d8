// The UI driven through ImGui's own input (mouse position, buttons, wheel, typed characters) with no window
// and no GPU: textures go to a stub, frames are built and rendered to draw lists only.
#include <doctest/doctest.h>
#include <imgui.h>

#include <climits>
#include <string>

#include "attnviz/viz/app.hpp"
#include "attnviz/viz/widgets.hpp"
#include "ui_harness.hpp"

using namespace attnviz;
using namespace attnviz::viz;
using namespace attnviz::viz::test;

TEST_CASE("ui: the first screen shows the book sentence, one heatmap per head") {
  Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  ui.frame(app);
  CHECK(app.session.result().tokens_count() == 6);
  REQUIRE(app.layout.size() == 2u);
  CHECK(app.layout[0].rows == 6);
  CHECK(app.layout[1].slot == 1);
  CHECK(app.layout[0].cell > 20.0f);  // the book's 6 x 6 gets big cells
  CHECK(ui.textures.last_width == 6);
  CHECK(app.uploads == 2);
  for (int i = 0; i < 5; ++i) ui.frame(app);
  CHECK(app.uploads == 2);  // nothing changed: no texture work per frame
}

TEST_CASE("ui: hover shows a cell, click locks it, the lock survives moving away, a second click frees it") {
  Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  ui.hover(app, 1, 3, 1);
  CHECK(app.view.hover == Cell{true, 1, 3, 1});
  CHECK_FALSE(app.view.locked.active);
  CHECK(cell_at(app, ImGui::GetIO().MousePos.x, ImGui::GetIO().MousePos.y) == Cell{true, 1, 3, 1});

  ui.click(app);
  CHECK(app.view.locked == Cell{true, 1, 3, 1});
  ui.hover(app, 0, 5, 4);
  CHECK(app.view.hover == Cell{true, 0, 5, 4});
  CHECK(app.view.locked == Cell{true, 1, 3, 1});

  ui.hover(app, 1, 3, 1);
  ui.click(app);
  CHECK_FALSE(app.view.locked.active);

  ImGui::GetIO().MousePos = ImVec2(5, 5);  // over the controls: nothing hovered
  ui.frame(app);
  ui.frame(app);
  CHECK_FALSE(app.view.hover.active);
}

TEST_CASE("ui: typing into the sentence box recomputes on every keystroke") {
  Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  ui.frame(app);  // the sentence box takes the keyboard
  ui.frame(app);
  const int gen = app.session.generation(), uploads = app.uploads;
  for (char ch : std::string(" home")) {
    ImGui::GetIO().AddInputCharacter(static_cast<unsigned>(ch));
    ui.frame(app);
  }
  CHECK(app.session.text == "Your journey starts with one step home");
  CHECK(app.session.generation() == gen + 5);  // one recompute per keystroke
  CHECK(app.session.result().tokens_count() == 7);
  CHECK(app.layout[0].rows == 7);
  CHECK(app.uploads > uploads);
}

TEST_CASE("ui: the wheel zooms around the pointer, a head's title enlarges it, stages switch") {
  Ui ui;
  App app;
  app.session.text = "one two three four five six seven eight nine ten eleven twelve";
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  ui.hover(app, 0, 6, 6);
  ImGui::GetIO().MouseWheel = 2.0f;
  ui.frame(app);
  ImGui::GetIO().MouseWheel = 0.0f;
  ui.frame(app);
  CHECK(app.view.zoom == doctest::Approx(1.5625f));
  // The cell under the pointer stays under it.
  const ImVec2 m = ImGui::GetIO().MousePos;
  CHECK(cell_at(app, m.x, m.y) == Cell{true, 0, 6, 6});

  app.view.enlarged = 1;  // what the title button does
  ui.frame(app);
  REQUIRE(app.layout.size() == 1u);
  CHECK(app.layout[0].slot == 1);

  app.view.stage = StageId::context;
  ui.frame(app);
  CHECK(app.layout[0].cols == app.session.result().shape.head_dim);
  app.view.stage = StageId::dropped;  // not available without dropout: falls back to the weights
  ui.frame(app);
  CHECK(app.view.stage == StageId::weights);
}

TEST_CASE("ui: aggregate and compare views") {
  Ui ui;
  App app;
  app.view.aggregate = Aggregate::mean;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  REQUIRE(app.layout.size() == 1u);
  CHECK(app.layout[0].slot == kAggregateSlot);

  app.view.aggregate = Aggregate::none;
  app.compare.mode = CompareMode::mask;
  app.compare.synced = -1;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  REQUIRE(app.layout.size() == 3u);
  CHECK(app.layout[2].slot == kCompareSlot + 2);
  CHECK_FALSE(app.compare.b.result().shape.causal);  // B: the same layer without its mask
  CHECK(app.session.result().shape.causal);
  ui.hover(app, kCompareSlot + 2, 1, 4);
  CHECK(app.view.hover == Cell{true, kCompareSlot + 2, 1, 4});
}

TEST_CASE("ui: an invalid edit is explained in place and the last good view stays") {
  Ui ui;
  App app;
  REQUIRE(start(app).is_ok());
  ui.frame(app);
  app.session.config.num_heads = 3;  // as if typed into the heads field
  CHECK_FALSE(app.session.recompute().is_ok());
  ui.frame(app);
  CHECK_FALSE(app.session.error().empty());
  CHECK(app.layout.size() == 2u);  // still the two heads of the last valid result
  CHECK(app.layout[0].rows == 6);
}

TEST_CASE("ui: a typed number past int's range is clamped, never wrapped") {
  // ImGui's InputInt reads 4294967304 as 8 (2^32 + 8, wrapped): the context length field became 8.
  Ui ui;
  int fields = 0;
  const auto type = [&](int& v, const std::string& text) {
    const std::string label = "n" + std::to_string(++fields);  // a new field each time: it opens selected
    bool changed = false;
    for (int frame = 0; frame < 3 + static_cast<int>(text.size()); ++frame) {
      if (frame >= 2 && frame - 2 < static_cast<int>(text.size()))
        ImGui::GetIO().AddInputCharacter(static_cast<unsigned>(text[static_cast<std::size_t>(frame - 2)]));
      ImGui::NewFrame();
      ImGui::Begin("field");
      if (frame == 0) ImGui::SetKeyboardFocusHere();
      changed |= input_int(label.c_str(), v, 1);
      ImGui::End();
      ImGui::Render();
    }
    return changed;
  };
  int v = 0;
  CHECK(type(v, "4294967304"));
  CHECK(v == INT_MAX);
  int w = 0;
  CHECK(type(w, "-99999999999999999999"));
  CHECK(w == INT_MIN);
  int x = 0;
  CHECK(type(x, "1024"));
  CHECK(x == 1024);
}

TEST_CASE(
    "ui: characters the font lacks are drawn as their code points, so different tokens look different") {
  // ImGui draws a missing glyph as '?': the CJK tokens 中 and 文 both looked like "?", an emoji like "??".
  Ui ui;
  ImGui::NewFrame();
  CHECK(visible_text("Your journey") == "Your journey");
  CHECK(visible_text("\xE4\xB8\xAD") == "<U+4E2D>");  // 中: not in the test's font (ImGui's ASCII one)
  CHECK(visible_text("\xE6\x96\x87") == "<U+6587>");  // 文
  CHECK(visible_text("I \xF0\x9F\x98\x80 you") == "I <U+1F600> you");
  CHECK(visible_text("a\x01"
                     "b\x7F") == "a<U+0001>b<U+007F>");
  CHECK(visible_text("cut \xE4\xB8") == "cut <0xE4><0xB8>");  // a partial character (a BPE piece)
  CHECK(visible_text("two\nlines\tand a tab") == "two\nlines\tand a tab");
  ImGui::Render();
}
