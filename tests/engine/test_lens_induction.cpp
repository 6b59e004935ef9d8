// The worked example of docs/lens.md as a test: on a model attnviz trained itself (the induction recipe's
// checkpoint in tests/fixtures/induction, see its README), the causal tools must find the induction head, on
// every ISA. The text is 12 random tokens, none of them twice, then the same 12 again: at a position of the
// second copy, the next token is the one that followed the current token in the first copy, and only a
// layer-1 head that attends there (after a layer-0 previous-token head marked it) can know it. That head,
// labelled induction by the head kinds (attnviz/head_kinds.hpp), must stand out in direct logit attribution,
// in activation patching and under ablation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/head_kinds.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/lens.hpp"

using namespace attnviz;

namespace {

const std::filesystem::path kModel = std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "induction";

// Drawn once at random from the vocabulary of 128, without repeats, so that no token recurs by chance.
const std::vector<int> kFirstCopy = {37, 101, 5, 88, 62, 14, 120, 49, 73, 26, 94, 3};
constexpr int kCopy = 12;
// The position measured: the second copy's 9th token (kFirstCopy[8]), whose successor in the first copy is
// kFirstCopy[9] at position 9, the target.
constexpr int kPosition = kCopy + 8;
constexpr int kSource = 9;  // the first copy's position the induction head copies from
// The corrupted text puts this token, which the text never holds, at kSource.
constexpr int kReplacement = 77;

struct Head {
  int layer = -1, head = -1;
  double value = 0.0;
};

// The largest entry of a [layer][head] map.
Head largest(const std::vector<std::vector<double>>& map) {
  Head best;
  for (std::size_t l = 0; l < map.size(); ++l)
    for (std::size_t h = 0; h < map[l].size(); ++h)
      if (best.layer < 0 || map[l][h] > best.value)
        best = {static_cast<int>(l), static_cast<int>(h), map[l][h]};
  return best;
}

}  // namespace

TEST_CASE("the induction checkpoint's induction head stands out in attribution, patching and ablation") {
  std::vector<int> ids = kFirstCopy;
  ids.insert(ids.end(), kFirstCopy.begin(), kFirstCopy.end());
  std::vector<int> corrupted = ids;
  REQUIRE(std::find(ids.begin(), ids.end(), kReplacement) == ids.end());
  corrupted[kSource] = kReplacement;
  const int target = ids[kSource];
  // The measured token's first occurrence is right before kSource.
  REQUIRE(ids[kPosition] == ids[kSource - 1]);

  for (Isa isa : available_isas()) {
    CAPTURE(to_string(isa));
    GptLoadOptions load;
    load.isa = isa;
    auto w = std::make_shared<GptWeights>();
    const Status loaded = load_gpt(kModel.string(), load, *w);
    INFO(loaded.error);
    REQUIRE(loaded.is_ok());
    const GptConfig& c = w->config;
    REQUIRE(c.n_layers == 2);  // the recipe: a previous-token layer, then an induction layer
    GptOptions o;
    o.train = false;
    o.exec = Exec{isa, 2};
    GptModel model(w, TorchGenerator(0), o);

    LensRequest lr;
    lr.attribute = true;
    lr.target = LensTarget{kPosition, target, -1};
    GptRequest keep_all;  // every layer's weights, for the head kinds
    keep_all.all_logits = true;
    CausalLens lens;
    GptResult pass;
    LensResult out;
    const Status st = lens.run(model, ids, keep_all, lr, pass, out);
    INFO(st.error);
    REQUIRE(st.is_ok());

    // The model does induction here: from the second copy's third token on, the top next token is the one
    // that followed the current token in the first copy. (Its heads also check the token before, as
    // docs/training.md tells, so they commit once two tokens in a row have matched: at the copy's first two
    // tokens the model hedges, with about 1% on its top token.)
    for (int t = kCopy + 2; t < 2 * kCopy; ++t) {
      CAPTURE(t);
      const float* row = pass.logits.ptr() + static_cast<std::size_t>(t) * c.vocab_size;
      CHECK(top_tokens(row, c.vocab_size, 1)[0].id == ids[t - kCopy + 1]);
    }

    // The head kinds on this text: the layer-1 head with the highest induction score, labelled induction.
    REQUIRE(pass.layers.size() == 2u);
    std::vector<std::vector<HeadScores>> kinds(2);
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        kinds[static_cast<std::size_t>(l)].push_back(
            score_head(head_view(pass.layers[static_cast<std::size_t>(l)].attention.weights, h), ids));
    const auto induction = [&](const Head& x) {
      return x.layer == 1 && kinds[1][static_cast<std::size_t>(x.head)].kind == HeadKind::induction;
    };
    Head best_kind{1, 0, 0.0};
    for (int h = 0; h < c.n_heads; ++h)
      if (kinds[1][static_cast<std::size_t>(h)].induction > best_kind.value)
        best_kind = {1, h, kinds[1][static_cast<std::size_t>(h)].induction};
    REQUIRE(induction(best_kind));

    // (a) Direct logit attribution: the largest head component is that head. The four layer-1 heads share the
    // copy (all four are labelled induction), so the largest of them carries at least a quarter of their
    // part; asking a fifth of the whole metric leaves room for the embeddings and the layer-0 heads (2.89
    // of 7.48 here). A layer-0 head's direct path reads the tokens themselves, with no earlier layer to tell
    // it where the copy is, and the tokens were drawn at random: it can only add a bigram's guess, so each
    // must add less than a fifth of the induction head's part (0.17 against 2.89 here).
    REQUIRE(out.attributed);
    const Attribution& a = out.attribution;
    CHECK(std::fabs(a.sum() - a.value) <= 1e-4 * std::max(1.0, std::fabs(a.value)));
    const Head top = largest(a.heads);
    CAPTURE(top.layer);
    CAPTURE(top.head);
    CAPTURE(top.value);
    CHECK(induction(top));
    CHECK(top.head == best_kind.head);
    CHECK(top.value >= 0.2 * a.value);
    for (const double layer0 : a.heads[0]) CHECK(layer0 <= 0.2 * top.value);

    // (b) Patching: the corrupted text changes the token the induction heads copy from, so the target's logit
    // falls; the head whose clean context restores the most of it is the induction head. Four heads sharing
    // the copy evenly would restore about a quarter each (0.40 for the best here, 0.29, 0.29 and 0.07 for
    // the others, 0.04 at most for a layer-0 head).
    Patching p;
    const Status sp = patch(model, ids, corrupted, out.target, Ablation(), p);
    INFO(sp.error);
    REQUIRE(sp.is_ok());
    CHECK(p.clean > p.corrupted);
    const Head restores = largest(p.heads);
    CAPTURE(restores.layer);
    CAPTURE(restores.head);
    CAPTURE(restores.value);
    CHECK(induction(restores));
    CHECK(restores.head == best_kind.head);
    CHECK(restores.value >= 0.25);
    // The two texts differ at kSource alone: the residual entering block 0 restores the clean run there
    // (exactly 1, up to rounding) and nothing anywhere else.
    for (int t = 0; t < static_cast<int>(ids.size()); ++t)
      CHECK(std::fabs(p.residual[0][static_cast<std::size_t>(t)] - (t == kSource ? 1.0 : 0.0)) <= 1e-4);

    // The other half of the circuit: corrupting the measured token's first occurrence (kSource - 1), whose
    // identity a layer-0 previous-token head writes into position kSource, where the induction heads' keys
    // read it. That head's clean context alone brings most of the metric back (0.95 here; the best layer-1
    // head 0.26), so the largest entry must be a layer-0 head labelled previous-token, restoring at least
    // half.
    std::vector<int> no_first = ids;
    no_first[kSource - 1] = kReplacement;
    Patching q;
    const Status sq = patch(model, ids, no_first, out.target, Ablation(), q);
    INFO(sq.error);
    REQUIRE(sq.is_ok());
    const Head marks = largest(q.heads);
    CAPTURE(marks.layer);
    CAPTURE(marks.head);
    CAPTURE(marks.value);
    CHECK(marks.layer == 0);
    CHECK(kinds[0][static_cast<std::size_t>(marks.head)].kind == HeadKind::previous);
    CHECK(marks.value >= 0.5);

    // (c) Zero ablation of the induction head lowers the target's logit clearly: its direct part goes, and
    // the other heads, computed again, make up for less than half of it (7.48 falls to 5.32 here, by 2.16 of
    // the head's 2.89).
    lr.ablation.heads = {{best_kind.layer, best_kind.head}};
    CausalLens ablated_lens;
    GptResult ablated;
    LensResult ablated_out;
    const Status sa = ablated_lens.run(model, ids, keep_all, lr, ablated, ablated_out);
    INFO(sa.error);
    REQUIRE(sa.is_ok());
    const double drop = a.value - ablated_out.attribution.value;
    CAPTURE(drop);
    CHECK(drop >= 0.5 * top.value);
  }
}
