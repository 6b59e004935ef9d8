// Training text as the book tokenizes it: tiktoken's encode(text, allowed_special={"<|endoftext|>"}), which
// the book's GPTDatasetV1 (chapter 2, used by chapter 5's create_dataloader_v1) and its notebook's
// text_to_token_ids call. The inference views keep Bpe::encode, where "<|endoftext|>" is plain text.
#pragma once

#include <string_view>
#include <vector>

#include "attnviz/io/bpe.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// The id of the vocabulary's "<|endoftext|>" token (50256 in GPT-2's), -1 where it has none.
int endoftext_id(const Bpe& bpe);

// Every "<|endoftext|>" in `text` (leftmost first, not overlapping) becomes endoftext_id(bpe), and the text
// between is encoded on its own with Bpe::encode, as tiktoken encodes the pieces around an allowed special
// token. A vocabulary without the token encodes the whole text with Bpe::encode. No special token is added
// around the text (no BOS from a tokenizer.json's post-processor), with or without "<|endoftext|>" in the
// vocabulary: tiktoken's encode adds none, and the training and validation parts, each encoded on its own,
// would otherwise each start with one.
Status encode_training_text(const Bpe& bpe, std::string_view text, std::vector<int>& ids);

}  // namespace attnviz
