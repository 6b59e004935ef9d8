// Training checkpoints: a folder that attnviz opens like any other model (attnviz-cli --model DIR, the app's
// Model panel) and that training resumes from.
//
//   model.safetensors      every parameter in float32 under the book's names (tok_emb.weight,
//                          trf_blocks.0.att.W_query.weight, ...), what load_gpt reads
//   config.json            the book's keys: vocab_size, context_length, emb_dim, n_heads, n_layers,
//   drop_rate,
//                          qkv_bias
//   optimizer.safetensors  AdamW's moments, exp_avg.NAME and exp_avg_sq.NAME for every parameter NAME, with
//   its
//                          step count and settings in __metadata__ (step, lr, beta1, beta2, eps,
//                          weight_decay)
//   vocab.json, merges.txt the tokenizer trained with (when given), so the folder opens with its own
#pragma once

#include <string>

#include "attnviz/status.hpp"
#include "attnviz/train.hpp"

namespace attnviz {

// Writes the folder (created when missing; the three files replaced). `vocab_dir`: a folder Bpe::load_dir
// reads, copied as vocab.json and merges.txt; empty writes no tokenizer.
Status write_checkpoint(const std::string& dir, const TrainModel& m, const AdamW& opt,
                        const std::string& vocab_dir);

// Reads a checkpoint folder (or any GPT-2 model folder or .safetensors file load_gpt reads) into a model to
// train; `opt` gets the moments and step count when optimizer.safetensors is there (`has_optimizer`).
Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer);

}  // namespace attnviz
