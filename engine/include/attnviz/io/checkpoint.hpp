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
//   (or tokenizer.json)
//   checkpoint.json        the set: its files, their sizes and hashes (below)
//
// A run's checkpoint (the book's, or the induction task's) also carries its run state (RunState) in
// optimizer.safetensors' __metadata__, under "run.*" keys, so that --resume continues the run exactly; a
// checkpoint without them (an older one) restarts the data and dropout stream. The Train panel writes the
// same run state (viz TrainSession::run_state).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/status.hpp"
#include "attnviz/train.hpp"

namespace attnviz {

// The run a run state continues: the book's over a text (train_book), or the synthetic induction task's
// (train_induction). The metadata says "run.task": "induction" for the second; no key is the book's (the
// only kind before the induction task had run state).
enum class RunTask { book, induction };

// Where an induction run stands and what it is (train_induction's InductionRun): what a resumed run needs to
// draw the same batches and to check it is given the same settings.
struct InductionRunState {
  InductionTask task;
  int steps = 0;                       // steps taken: the next is steps + 1
  int total_steps = 1, eval_freq = 1;  // --steps and --eval-freq
  double lr = 2e-3, weight_decay = 0.0;
  int first_induction = -1;            // the first reported step with an induction head; -1: none yet
  std::vector<std::uint8_t> data_rng;  // the task's batches' generator (TorchGenerator::state())
};

// What makes the rest of a book run (train_book's TrainRun, less the sample's text): run.version 2 records
// it; a version-1 checkpoint (written before) has none, and its resume takes the flags given.
struct BookRunSettings {
  int epochs = 10;                   // the run's total (--epochs): the schedule's total is epochs x batches
  int eval_freq = 5, eval_iter = 5;  // an evaluation draws from the generator: eval_freq is part of the run
  double lr = 4e-4, weight_decay = 0.1;
  bool use_schedule = false;  // the appendix-D warmup + cosine and clipping (TrainRun::use_schedule)
  LrSchedule schedule;
};

// Where a run stands, its generators' states and what the run was over, so that a resumed run can continue
// it draw for draw and check it is given the same data.
struct RunState {
  RunTask task = RunTask::book;
  // both tasks
  std::vector<std::uint8_t> rng;  // the global generator (the model's, dropout's): torch.get_rng_state()
  DropoutRng dropout_rng = DropoutRng::cpu;
  int batch_size = 1;
  // the book's run (task == book)
  TrainPosition position;
  int train_windows = 0, val_windows = 0;
  std::uint64_t data_hash = 0;              // run_data_hash of the run's windows
  std::optional<BookRunSettings> settings;  // its lr, weight decay, schedule, total (none: version 1)
  // the induction task's run (task == induction)
  InductionRunState induction;
};

// FNV-1a over the training and validation windows (their length, starts and ids): equal for the same text,
// tokenizer, split, context length and stride.
std::uint64_t run_data_hash(const Windows& train, const Windows& val);

// The "run.*" metadata of a run state, and back. parse_run_state reads untrusted strings: every whole number
// is strict decimal in range, every real number (an induction run's lr and weight decay) a plain finite
// decimal, each generator state a hex string TorchGenerator::set_state accepts, the book's position
// consistent (global_step + 1 == epoch * batches + batch), the induction task one validate() accepts and its
// steps within the run's total; a book run's settings (version 2) within range and consistent (its steps
// and warmup within epochs x batches, the schedule's keys only with a schedule); anything else is one line.
// No "run.version" key: `out` stays empty (an older checkpoint). A book run with settings writes version 2,
// any other run version 1 (its keys are what version 1 had).
std::map<std::string, std::string> run_state_metadata(const RunState& r);
Status parse_run_state(const std::map<std::string, std::string>& meta, std::optional<RunState>& out);

// A checkpoint is a set of files written whole or not at all. checkpoint.json lists the set: its id and each
// file's size and 64-bit content hash ({"format": "attnviz checkpoint", "version": 1, "id": HEX16, "files":
// {NAME: {"bytes": N, "hash": HEX16}}}). A write puts every file beside its name (NAME.tmp, flushed); any
// failure there removes them and leaves the folder's checkpoint as it was. Then the commit point: the new
// manifest, whole, as checkpoint.pending.json; each NAME.tmp is renamed over NAME, the old set's files that
// the new one lacks are removed, and checkpoint.pending.json becomes checkpoint.json. A reader that finds
// checkpoint.pending.json finishes that (or refuses by name when its files do not match); NAME.tmp files
// without it are an abandoned write, ignored and replaced by the next.

// Writes the folder (created when missing; its set replaced whole, as above). `vocab_dir`: a folder
// Bpe::load_dir reads, saved as it reads it (tokenizer.json; or vocab.json and merges.txt, GPT-2's
// encoder.json and vocab.bpe under those names); empty writes no tokenizer. `run`: the run state, kept with
// the optimizer's (written only when the optimizer has taken a step). Refused before anything is written:
// a tokenizer that cannot be read, a folder whose checkpoint.json cannot be read or finished, a file there
// that a model loader would read and that is no file of the set (a tokenizer.json left by another run).
Status write_checkpoint(const std::string& dir, const TrainModel& m, const AdamW& opt,
                        const std::string& vocab_dir, const RunState* run = nullptr);

// The checks write_checkpoint makes before writing, made before a run trains (--out): `dir` is a folder or
// can be created, a file can be written and removed there, `vocab_dir`'s tokenizer can be read, and no file
// there would be read as the checkpoint's own that the checkpoint does not write.
Status check_checkpoint_out(const std::string& dir, const std::string& vocab_dir);

// A folder with checkpoint.json (or checkpoint.pending.json, finished first): each file it lists is there
// with its size and hash, and no file a model loader reads is there that it does not list; a torn set is
// refused by name ("'DIR' is a torn checkpoint: its optimizer.safetensors holds other bytes than its
// checkpoint.json lists (...)"). A folder without one (an older checkpoint, any model folder) passes.
// read_checkpoint and open_model call it.
Status check_checkpoint_folder(const std::string& dir);

// For tests: called after each file of a write is written beside its name (the file's name); a failure it
// returns fails the write there, as a full disk would. An empty function removes it.
void set_checkpoint_write_hook(std::function<Status(const std::string& file)> hook);

// Reads a checkpoint folder (or any GPT-2 model folder or .safetensors file load_gpt reads) into a model to
// train, after check_checkpoint_folder; another architecture's model is refused as no training checkpoint;
// `opt` gets the moments and step count when optimizer.safetensors is there (`has_optimizer`).
Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer);
// The same, and the run state when the optimizer's file has one (checked against the optimizer's step count
// and the model's sizes).
Status read_checkpoint(const std::string& path, TrainModel& m, AdamW& opt, bool& has_optimizer,
                       std::optional<RunState>& run);

}  // namespace attnviz
