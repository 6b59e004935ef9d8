// The head kinds of the model view's grid: the engine's (attnviz/head_kinds.hpp), read from a stage matrix.
#pragma once

#include <vector>

#include "attnviz/head_kinds.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {

using attnviz::all_head_kinds;
using attnviz::head_kind_threshold;
using attnviz::HeadKind;
using attnviz::HeadScores;
using attnviz::kBroadThreshold;
using attnviz::kFirstThreshold;
using attnviz::kInductionThreshold;
using attnviz::kPreviousThreshold;
using attnviz::kSelfThreshold;
using attnviz::parse_head_kind;
using attnviz::short_label;
using attnviz::to_string;

inline HeadScores score_head(const MatrixDesc& m, const std::vector<int>& ids) {
  return attnviz::score_head(WeightsView{m.data, m.rows, m.cols, m.row_stride, m.multiplier}, ids);
}

}  // namespace attnviz::viz
