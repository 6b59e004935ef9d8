// Training text as the book tokenizes it (train_text.hpp).
#include "attnviz/io/train_text.hpp"

namespace attnviz {

int endoftext_id(const Bpe& bpe) {
  for (int id = bpe.size() - 1; id >= 0; --id)  // GPT-2's vocabulary holds it last
    if (bpe.bytes(id) == kEndOfText) return id;
  return -1;
}

Status encode_training_text(const Bpe& bpe, std::string_view text, std::vector<int>& ids) {
  const int special = endoftext_id(bpe);
  if (special < 0) return bpe.encode(text, ids, false);
  std::vector<int> out, piece;
  for (;;) {
    const std::size_t at = text.find(kEndOfText);
    const std::string_view before = text.substr(0, at);
    if (!before.empty()) {
      if (Status st = bpe.encode(before, piece, false); !st.is_ok()) return st;
      out.insert(out.end(), piece.begin(), piece.end());
    }
    if (at == std::string_view::npos) break;
    out.push_back(special);
    text.remove_prefix(at + kEndOfText.size());
  }
  ids = std::move(out);
  return Status::ok();
}

}  // namespace attnviz
