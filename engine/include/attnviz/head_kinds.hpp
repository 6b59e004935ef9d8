// What one attention head does, from its causal weight matrix and the token ids: a score in [0, 1] per kind
// of pattern and a short label, for the model view's grid of layers x heads, the command line's JSON and the
// training run's probe. Pure and headless.
//
// A is one head's (T, T) softmax weights, row i over the visible cells j <= i (row i sums to 1). Row 0 always
// puts 1 on itself and is left out of every score. Cells that are not finite read as 0.
//
//   previous   mean over rows i >= 1 of A[i][i-1]
//   first      mean over rows i >= 1 of A[i][0]            (the "attention sink")
//   self       mean over rows i >= 1 of A[i][i]
//   broad      mean over rows i >= 2 of H_i / log(i + 1), where H_i = -sum_j p_j log p_j is the entropy
//              of row i over its i + 1 visible cells, p_j = A[i][j] / sum_j A[i][j] over the cells with
//              A[i][j] > 0 (1 = uniform, 0 = all weight on one cell; a row with no positive cell counts 0)
//   induction  over the positions i whose token appeared earlier at some j with j + 1 < i: the sum of
//              A[i][j + 1] over every such j (the token that followed each earlier occurrence; j + 1 < i
//              leaves out an occurrence right before i, whose successor would be i itself), averaged over
//              those positions. Defined only when at least 2 such positions exist; otherwise
//              induction_defined is false and the score is 0. On "A B C D A B C D" the second B (i = 5)
//              scores A[5][2], its attention to the first C.
//
// Each score is clamped to [0, 1] (it only matters for rows that do not sum to 1, e.g. after dropout).
// T < 2, an empty or non-square matrix: every score 0, kind none. With fewer ids than rows, induction looks
// only at the positions that have an id; the other scores read the matrix alone.
//
// The label is the kind with the highest score among those whose score reaches its threshold (induction only
// when defined); equal scores go to the kind earlier in all_head_kinds(); none when no kind reaches its
// threshold. Cost: O(T^2) for the matrix plus O(T x earlier occurrences) for induction, no allocation
// per row.
#pragma once

#include <string>
#include <vector>

#include <cstddef>

#include "attnviz/exec.hpp"
#include "attnviz/tensor.hpp"

namespace attnviz {

enum class HeadKind { none, previous, first, self, broad, induction };

// The threshold each score must reach for its kind to be the label.
inline constexpr float kPreviousThreshold = 0.4f;
inline constexpr float kFirstThreshold = 0.4f;
inline constexpr float kSelfThreshold = 0.4f;
inline constexpr float kBroadThreshold = 0.75f;  // normalized entropy
inline constexpr float kInductionThreshold = 0.4f;
float head_kind_threshold(HeadKind k);  // the constant above; 0 for none

// Every kind but none, in the order that breaks ties: induction, previous, first, self, broad.
const std::vector<HeadKind>& all_head_kinds();
// "previous-token", "first-token", "self", "broad", "induction"; "none"
const char* to_string(HeadKind k);
// At most 6 characters, for thumbnails: "prev", "first", "self", "broad", "induct"; "" for none.
const char* short_label(HeadKind k);
// to_string's names, "none" included.
bool parse_head_kind(const std::string& s, HeadKind& out);

struct HeadScores {
  float previous = 0.0f, first = 0.0f, self = 0.0f, broad = 0.0f, induction = 0.0f;
  bool induction_defined = false;
  HeadKind kind = HeadKind::none;  // the label

  float score(HeadKind k) const;  // 0 for none
};

// One head's weights as stored: rows x cols cells, row i at data + i * row_stride, each read times
// `multiplier` (the model view's stage matrices are views of this kind).
struct WeightsView {
  const float* data = nullptr;
  int rows = 0, cols = 0;
  std::ptrdiff_t row_stride = 0;
  float multiplier = 1.0f;
};

// Head h of kept (H, T, T) squares (a pass's weights), read through their row stride.
inline WeightsView head_view(const HeadSquares& w, int h) {
  return w.empty() ? WeightsView{} : WeightsView{w.row(h, 0), w.n, w.n, w.stride, 1.0f};
}

HeadScores score_head(const WeightsView& weights, const std::vector<int>& ids);

// The running sums behind a head's scores: each score is a sum over rows in order, and row i's terms read
// only row i and ids[0..i], so a pass that appends rows to the same prefix (a keystroke) continues them.
struct HeadSums {
  int rows = 0;  // rows [0, rows) are summed
  double previous = 0.0, first = 0.0, self = 0.0, broad = 0.0, induction = 0.0;
  int positions = 0;       // induction's positions so far
  int induction_rows = 0;  // rows [0, induction_rows) walked for induction (those with an id)
};
// score_head, summing rows [sums.rows, T) onto `sums` (rows 0 .. sums.rows - 1 of `weights` and `ids` must
// be those the sums were made from; a default HeadSums sums every row). The scores equal score_head's bit for
// bit. A sums.rows beyond T, or a weights view score_head refuses, starts over from row 0.
HeadScores score_head(const WeightsView& weights, const std::vector<int>& ids, HeadSums& sums);

// One head of many to score: its weights, its running sums (continued as score_head(weights, ids, *sums)
// does; a default HeadSums sums every row) and where its scores go.
struct HeadTask {
  WeightsView weights;
  HeadSums* sums = nullptr;
  HeadScores* out = nullptr;
};

// score_head for every task over the same ids, the heads spread over `how`'s threads (the scalar ISA runs
// them on one, as the passes do). Each task writes only its own sums and scores, so the results are those of
// one score_head after another, bit for bit, on any thread count. Not to be called while a pass runs on
// another thread: it uses the passes' thread pool.
void score_heads(const std::vector<HeadTask>& tasks, const std::vector<int>& ids, const Exec& how);

// The label of a set of scores (s.kind), by the rule above: for scores combined from several matrices.
HeadKind label_of(const HeadScores& s);

}  // namespace attnviz
