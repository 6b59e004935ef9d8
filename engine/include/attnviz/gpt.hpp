// Whole GPT-2 models: the book's chapter-4 GPTModel (drawn from a seed in PyTorch's construction order) or
// weights loaded from a file (engine/include/attnviz/io/gpt_file.hpp), one forward pass that keeps what is
// asked for, an incremental path that reuses the keys and values of an unchanged prefix, and greedy
// generation.
//
// GPT-2 as the book's GPTModel and Hugging Face's GPT2LMHeadModel compute it:
//   x = drop(tok_emb[ids] + pos_emb[0..T))
//   per block: x = x + drop(att(norm1(x)));  x = x + drop(proj(gelu(fc(norm2(x)))))
//   logits = out_head(final_norm(x))            (out_head tied to tok_emb in GPT-2 files)
// LayerNorm: eps 1e-5, biased variance, scale and shift. GELU: the tanh approximation. att: the chapter-3
// `mha` variant (d_in = d_out = d_model) with the causal mask and dropout on the weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/config.hpp"
#include "attnviz/engine.hpp"
#include "attnviz/exec.hpp"
#include "attnviz/status.hpp"
#include "attnviz/tensor.hpp"
#include "attnviz/torch_rng.hpp"

namespace attnviz {

// What a decoder's blocks are made of, beyond GPT-2's sizes (docs/models.md, "Architectures"). The defaults
// are GPT-2's, so a GptConfig that sets none of this is the book's GPTModel. One forward pass reads the
// description; an architecture is a set of choices here, never a pass of its own.
enum class NormKind {
  layer_norm,  // (x - mean) / sqrt(var + eps) * w + b
  rms_norm,    // x / sqrt(mean(x^2) + eps) * w; Gemma's (1 + w) is folded into w when its weights load
};
enum class MlpKind {
  plain,  // proj(act(fc(x)))                         GPT-2, GPT-NeoX
  gated,  // down(act(gate(x)) * up(x)), fc = up      Llama, Qwen (SiLU: SwiGLU), Gemma (tanh GELU: GeGLU)
};
enum class Activation { gelu_tanh, gelu_erf, silu };
enum class ResidualKind {
  sequential,  // x += attn(norm1(x)); x += mlp(norm2(x))                           GPT-2, Llama, Qwen
  parallel,    // x = mlp(norm2(x)) + attn(norm1(x)) + x                           GPT-NeoX (Pythia)
  sandwich,    // x += post_attn_norm(attn(norm1(x))); x += post_ff_norm(mlp(norm2(x)))   Gemma 3
};
enum class RopeScaling { none, linear, llama3 };
const char* to_string(NormKind k);
const char* to_string(MlpKind k);
const char* to_string(Activation a);
const char* to_string(ResidualKind k);
const char* to_string(RopeScaling s);

struct GptArch {
  std::string name = "gpt2";  // config.json's model_type
  NormKind norm = NormKind::layer_norm;
  bool norm_plus_one = false;  // Gemma: the norms scale by (1 + w); the loaded weights hold 1 + w
  double norm_eps = 1e-5;
  // Positions: GPT-2's learned table (pos_emb), or rotary (rotate-half layout) with no table.
  bool rotary = false;
  double rope_theta = 10000.0;
  double rope_local_theta = 0.0;  // the sliding-window layers' base (Gemma 3); 0: rope_theta
  int rotary_dims = 0;            // rotated dimensions of a head (GPT-NeoX's rotary_pct); 0: all of it
  RopeScaling rope_scaling = RopeScaling::none;  // of the global layers' frequencies
  double rope_factor = 1.0, rope_low_freq = 1.0, rope_high_freq = 4.0;
  int rope_original_context = 0;  // llama3 scaling's original_max_position_embeddings
  // Attention: grouped key/value heads, an explicit head width, q/k norms, the scale, sliding windows.
  int kv_heads = 0;         // 0: n_heads
  int head_dim = 0;         // 0: d_model / n_heads
  bool qk_norm = false;     // RMSNorm over each head's q and k before the rotation (Qwen3, Gemma 3)
  double attn_scale = 0.0;  // 0: 1 / sqrt(head_dim)
  bool out_bias = true;     // out_proj has a bias
  int window = 0;           // the sliding window of local layers (keys i - window + 1 .. i)
  std::vector<char> local;  // per layer, 1 where the layer attends within `window` only (empty: none)
  MlpKind mlp = MlpKind::plain;
  Activation act = Activation::gelu_tanh;
  int d_ff = 0;  // 0: 4 d_model
  bool mlp_bias = true;
  ResidualKind residual = ResidualKind::sequential;
  bool embed_scale = false;  // Gemma: the token embeddings times sqrt(d_model)
};

struct GptConfig {
  int vocab_size = 50257;
  int context_length = 1024;
  int d_model = 768;  // emb_dim
  int n_heads = 12;
  int n_layers = 12;
  double drop_rate = 0.1;
  bool qkv_bias = false;  // the book's chapter-4 config; GPT-2 files have biases
  // Blocks without norm2 and the feed-forward network: x = x + drop(att(norm1(x))). The small model of
  // induction-head studies (attnviz's induction recipe); the book's files name it with "attention_only".
  bool attention_only = false;
  GptArch arch = {};  // GPT-2's unless the weights are another architecture's

  // Blocks made as GPT-2's: every choice of the description at its default, whatever the name (what the GPU
  // kernels and training compute, and what the UI need not spell out). Sizes and attention_only aside.
  bool gpt2_blocks() const;
  int kv_heads() const { return arch.kv_heads > 0 ? arch.kv_heads : n_heads; }
  int head_dim() const { return arch.head_dim > 0 ? arch.head_dim : d_model / n_heads; }
  int q_width() const { return n_heads * head_dim(); }
  int kv_width() const { return kv_heads() * head_dim(); }
  int ff_width() const { return arch.d_ff > 0 ? arch.d_ff : 4 * d_model; }
  bool local_layer(int l) const {
    return l >= 0 && static_cast<std::size_t>(l) < arch.local.size() &&
           arch.local[static_cast<std::size_t>(l)];
  }
  // GPT-2's attention: learned positions, every head its own keys, no q/k norm, no window (the fused kernel).
  bool plain_attention() const {
    return !arch.rotary && kv_heads() == n_heads && !arch.qk_norm && arch.window == 0 &&
           arch.attn_scale == 0.0 && head_dim() * n_heads == d_model;
  }
};

// The published sizes: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl (the book's chapter-4 config otherwise:
// qkv_bias false, drop_rate 0.1).
struct GptPreset {
  const char* name;
  GptConfig config;
};
const std::vector<GptPreset>& gpt_presets();
std::optional<GptConfig> find_gpt_preset(std::string_view name);

// Checks sizes: positive, d_model divisible by n_heads, and bounded so that every count fits the engine's
// ints.
Status validate(const GptConfig& c);

// Parameters of a configuration (the book's numel over named_parameters(), out_head counted only when
// untied).
std::int64_t parameter_count(const GptConfig& c, bool tied_head);

// 64-byte aligned float storage (the fast kernels load whole vectors).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n);  // zero-filled
  // n floats not yet written, for a caller that writes every one (packing gpt2-small's 652 MB: zeroing it
  // first cost WebAssembly as much as the packing itself).
  static AlignedBuffer uninitialized(std::size_t n);
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  std::size_t size_ = 0;
};

// Element types of weights files, widened to float.
enum class Dtype { f32, f16, bf16 };
std::size_t dtype_size(Dtype t);
const char* to_string(Dtype t);
// Reads element i of little-endian `dtype` data at `bytes` (any alignment).
float load_element(const unsigned char* bytes, Dtype t, std::size_t i);
// Widens n elements starting at element `first`.
void widen(const unsigned char* bytes, Dtype t, std::size_t first, std::size_t n, float* out);
// One 16-bit element widened exactly (BF16: the high half of a float; F16: IEEE half).
float widen16(std::uint16_t bits, Dtype t);

// A weight matrix of logical shape (out, in) (nn.Linear's layout), stored only in the fast kernels' panel
// layout: W^T cut into panels of `nr` columns of `out`, each k-major ([in][nr]) and zero-padded past `out`.
// Element (o, i) is data[(o / nr) * in * nr + i * nr + o % nr]. `nr` is the panel width of the ISA it was
// packed for (any width works for the scalar reference, which reads it through at()).
// Weights files' BF16 and F16 matrices may stay in their own type (`dtype`, in `half`, two elements a float
// slot, the same panel layout): the kernels widen each panel's slice as they reach it, so a model takes half
// the memory its float32 copy would. The values are the file's, exactly.
struct PackedMatrix {
  int out = 0, in = 0, nr = 0;
  AlignedBuffer data;        // float32 panels (dtype f32)
  Dtype dtype = Dtype::f32;  // f32, or the 16-bit type `half` holds
  AlignedBuffer half;        // 16-bit panels (dtype bf16 or f16)

  std::size_t index(int o, int i) const {
    return static_cast<std::size_t>(o / nr) * in * nr + static_cast<std::size_t>(i) * nr + o % nr;
  }
  float at(int o, int i) const;
  bool empty() const { return data.empty() && half.empty(); }
  const std::uint16_t* halves() const { return reinterpret_cast<const std::uint16_t*>(half.data()); }
  std::size_t bytes() const { return (data.size() + half.size()) * sizeof(float); }
};

// A matrix as a file stores it: `rows` x `cols` row-major elements of `dtype` at `bytes` (any alignment).
struct MatrixSource {
  const unsigned char* bytes = nullptr;
  Dtype dtype = Dtype::f32;
  int rows = 0, cols = 0;
};
// Packs the logical (out, in) matrix held by `src`: stored as (out, in) (nn.Linear, nn.Embedding), or
// `transposed` as (in, out) (GPT-2's Conv1D). The panel width is `isa`'s (resolved).
// `keep_dtype`: a BF16 or F16 source stays 16-bit (PackedMatrix::half).
PackedMatrix pack_matrix(const MatrixSource& src, bool transposed, Isa isa, bool keep_dtype = false);
PackedMatrix pack_matrix(const Tensor& out_in, Isa isa);  // a float (out, in) tensor
Tensor unpack(const PackedMatrix& m);                     // back to (out, in)
PackedMatrix repack(const PackedMatrix& m, Isa isa);

// A linear layer: weight packed, bias (out) or empty.
struct PackedLinear {
  PackedMatrix weight;
  Tensor bias;
};

// One block's weights. GPT-2's shapes are given; other architectures (GptConfig::arch) have query (H hd, d),
// key and value (KV hd, d), out_proj (d, H hd), fc and proj of width d_ff, and RMSNorm blocks no shifts.
struct GptBlock {
  Tensor norm1_scale, norm1_shift;      // (d)
  PackedLinear query, key, value;       // (d, d)
  PackedLinear out_proj;                // (d, d), with bias
  Tensor norm2_scale, norm2_shift;      // (d)
  PackedLinear fc;                      // (4d, d): ff.layers.0, GPT-2's mlp.c_fc; a gated MLP's up_proj
  PackedLinear proj;                    // (d, 4d): ff.layers.2, GPT-2's mlp.c_proj; a gated MLP's down_proj
  PackedLinear gate;                    // (d_ff, d): a gated MLP's gate_proj (empty otherwise)
  Tensor q_norm, k_norm;                // (head_dim): q/k norms (arch.qk_norm)
  Tensor post_attn_norm, post_ff_norm;  // (d): the sandwich's norms after attention and the MLP (Gemma 3)
};

struct GptWeights {
  GptConfig config;
  PackedMatrix tok_emb;  // (vocab, d): embedding rows are read out of the panels
  Tensor pos_emb;        // (context, d); empty with rotary positions
  std::vector<GptBlock> blocks;
  Tensor final_scale, final_shift;  // (d)
  PackedMatrix out_head;            // (vocab, d); empty when tied to tok_emb (GPT-2 files)
  Isa isa = Isa::scalar;            // the ISA whose panel width the matrices have
  std::string source;               // "seeded gpt2-small, seed 123" or the file's name
  // Loaded weights: the config.json used ("gpt2/config.json"), or "none (sizes from the tensors, heads from
  // d_model / 64)"; and what the host should tell the user that nothing could check ("11 layers found in
  // the file; no config.json to check the count against"), or "". Both empty for seeded models.
  std::string config_from, note;

  bool tied() const { return out_head.empty(); }
  const PackedMatrix& head() const { return tied() ? tok_emb : out_head; }
  std::size_t bytes() const;  // memory held
};

// torch.manual_seed(seed); GPTModel(config): every parameter drawn in the book's construction order, packed
// for `isa`. `g` is left where PyTorch's generator is after construction (forward-time dropout continues from
// it).
Status build_gpt(const GptConfig& c, TorchGenerator& g, GptWeights& out, Isa isa = Isa::automatic);
// Bytes the weights of `c` take once packed for `isa` (what GptWeights::bytes() will say, the panels' padding
// included), computed before anything is drawn or loaded. Only meaningful for a configuration validate()
// accepts.
// `matrices`: the type the weight matrices keep (bf16 / f16 for a 16-bit file read with keep_dtype).
std::uint64_t packed_bytes(const GptConfig& c, bool tied_head, Isa isa, Dtype matrices = Dtype::f32);

// The same weights with the matrices packed for another ISA (the fast kernels need their own panel width).
GptWeights repacked(const GptWeights& w, Isa isa);

// What a forward pass keeps. The KV cache and every layer's computation happen regardless; only what is kept
// costs memory in the result (docs/models.md: "What a pass keeps, and what it costs").
struct GptRequest {
  std::vector<int> layers;  // layers whose attention is kept; empty: every layer
  bool all_layers = true;   // keep every layer (ignores `layers`)
  unsigned stages = 0;      // chapter-3 stages kept per kept layer besides the weights (kStageScores, ...)
  bool qkv = false;         // keep q, k, v and the context of kept layers
  bool residuals = false;   // keep each kept layer's residual stream in and out (T, d)
  bool all_logits = false;  // logits of every position; otherwise the last position's only
  // One kept layer that keeps every chapter-3 stage and q, k, v and the context whatever `stages` and `qkv`
  // say: the model view's opened layer, next to the weights of every other layer (-1: none).
  int detail_layer = -1;
  int top_k = 10;  // next-token candidates of the last position
};

// The bytes a pass over `tokens` tokens holds for what `request` keeps (every kept layer's (H, T, T) weights
// and other stages, q/k/v/context, residuals, the logits), the keys and values of every layer (the
// incremental cache) and the pass's working buffers: what to check against the free memory before running it.
// Saturates instead of overflowing.
std::uint64_t pass_bytes(const GptConfig& c, int tokens, const GptRequest& request);

struct TopToken {
  int id = 0;
  float logit = 0.0f;
  double probability = 0.0;
};
// The k most probable of `vocab` logits, most probable first; equal logits by id. The softmax's sum is in
// double: of exps in double on the scalar ISA (and for a row with a value that is not finite), else of exps
// in float lanes, to about 2 ulp each (what PyTorch's float softmax sums), a few times faster, each top
// token's term as the sum took it (so their probabilities add up to at most 1, to double's rounding).
// `log_sum_exp`, when given, receives the log of the softmax's denominator (a token's log probability is its
// logit minus it). `target_probability`, when given, receives token `target`'s probability by the same rule
// as the top tokens' (its term of the sum over the sum): the same number where it is one of them.
std::vector<TopToken> top_tokens(const float* logits, int vocab, int k, double* log_sum_exp = nullptr,
                                 Isa isa = Isa::scalar, int target = -1,
                                 double* target_probability = nullptr);

struct GptLayer {
  int index = 0;
  Result attention;            // the chapter-3 result of this layer's `mha` (inputs = norm1's output)
  Tensor resid_in, resid_out;  // (T, d) when asked
  // Rotary models, where q, k, v are kept: q (T, H hd) and k (T, KV hd) as projected, and after the model's
  // q/k norms (empty without them), before the rotation. attention.q and attention.k hold them rotated (k
  // laid out per query head).
  Tensor q_proj, k_proj, q_normed, k_normed;
};

struct GptOptions {
  bool train = true;  // PyTorch modules start in training mode: dropout in three places
  DropoutRng dropout_rng = DropoutRng::cpu;
  Exec exec;
};

struct GptResult {
  GptConfig config;
  GptOptions options;
  std::vector<int> ids;
  std::vector<GptLayer> layers;  // the kept layers, in order
  Tensor logits;                 // (T, vocab) with all_logits, else (1, vocab) for the last position
  std::vector<TopToken> next;    // the last position's top_k, most probable first
  double seconds = 0.0;
  Isa isa = Isa::scalar;
  int threads = 1;
  int reused = 0;           // rows taken from the previous pass (incremental recompute)
  std::uint64_t stamp = 0;  // identifies the pass: the next one reads this result's rows when it extends it
  std::string backend;      // who computed it when not this engine's kernels (e.g. "webgpu"); empty for `isa`

  const GptLayer* layer(int index) const;
};

// Named points of one pass, for the causal tools (attnviz/lens.hpp): what a pass captures of its residual
// stream, its blocks and its heads, and where it may be changed. A pass with a probe runs as forward() does,
// with the same kernels in the same order, so a probe that changes nothing gives the same numbers bit for
// bit.
//   resid[l]    (T, d)   the residual stream entering block l; resid[L] is the final one, before the final
//   norm context[l]  (T, H hd) the heads' context vectors, as the output projection reads them attn_out[l]
//   (T, d)   the attention's output (the output projection with its bias), before a sandwich norm mlp_out[l]
//   (T, d)   the MLP's output (its down projection with its bias), before a sandwich norm; (0, d)
//                        in an attention-only block
// A probe that only captures extends an earlier pass like forward() does: when it captured the pass that
// `out` holds, its rows [0, P) stay and the pass writes rows [P, T). A probe that changes anything (`start`,
// `edit_context`) runs a full pass that neither reads nor replaces the model's cache.
// Evaluation passes only: train mode's dropout is refused.
struct PassProbe {
  bool capture = false;  // fill resid, context, attn_out and mlp_out
  std::vector<Tensor> resid, context, attn_out, mlp_out;
  std::uint64_t stamp = 0;  // the pass that filled the captures (GptResult::stamp)

  // The pass begins at block `start_layer` from `start` (T, d), the residual entering it (another pass's
  // resid[start_layer]); blocks before it are not run, and the result keeps none of their layers.
  int start_layer = 0;
  const Tensor* start = nullptr;
  // Layer l's context vectors (T, H hd), before the output projection: return true where they were changed,
  // and the projection is computed again from them.
  std::function<bool(int layer, Tensor& context)> edit_context;
  // Optional, with edit_context: whether it will change layer l. Such a layer's output projection is then
  // computed once, after the change, instead of before and again after it (the same numbers).
  std::function<bool(int layer)> edits;
  // The logits computed: -1 as the request says, or one position's only (GptResult::logits is then (1, V)
  // for that position, and `next` its top tokens).
  int logits_row = -1;
  // With capture, the logit lens asked of the pass itself: where a pass from block 0 computes one new
  // position (a keystroke) and that position's logits, the position's residual points before the last go
  // through the final norm and head together with the pass's own row, in one read of the head. lens_logits is
  // then (L + 1, V), row k the lens after k blocks (row L the pass's own logits), at lens_position; else
  // lens_position is -1 (logit_lens computes the rows itself).
  bool lens = false;
  int lens_position = -1;
  Tensor lens_logits;
  // With capture, attribution's point: each head's output at `head_position` (-1: none), head_out[l] (H, d)
  // as head_outputs() computes it, while the pass has the layer's output projection in cache. Kept where the
  // pass extends one that computed them for that position (head_out_position), else computed from the
  // context vectors at the position; empty past the text. A pass from a later block (start_layer) keeps the
  // earlier layers' where they are for the same position (CausalLens lends them), else empties them.
  int head_position = -1;
  int head_out_position = -1;  // the position head_out holds (-1: none, or a pass that failed)
  std::vector<Tensor> head_out;

  bool changes() const { return start != nullptr || edit_context; }
};

// Each head's output at one position of layer `layer`: head h's slice of `context` (one row, H hd) through
// its own columns of the output projection, without the bias, into `out` (H, d). On `exec`'s ISA, with the
// kernels a capturing pass uses for PassProbe::head_out (the same numbers).
void head_outputs(const GptWeights& w, const Exec& exec, int layer, const float* context, float* out);

// The bytes a capturing probe holds for a pass over `tokens` tokens (what to add to pass_bytes before it
// runs).
std::uint64_t probe_bytes(const GptConfig& c, int tokens);

// The pass's final norm and head over `rows` rows of residual stream (rows, d) into logits (rows, V), with
// the kernels forward() runs on `exec`'s ISA: a residual point's logit lens, and forward()'s own logits for
// the final residual.
void final_logits(const GptWeights& w, const Exec& exec, const float* resid, int rows, float* logits);

// Runs GPTModel forward passes on one set of weights and keeps each layer's keys and values, so a token
// sequence that shares a prefix with the previous one (typing at the end, deleting) computes only the new
// rows. The result is bit-identical to a full pass. Dropout (train mode with drop_rate > 0) draws fresh masks
// over the whole sequence, so train-mode passes are always full.
class GptModel {
 public:
  GptModel();
  ~GptModel();
  GptModel(GptModel&&) noexcept;
  GptModel& operator=(GptModel&&) noexcept;
  // `after_init` is the generator state right after construction: train-mode passes draw their dropout masks
  // from a copy of it, as a notebook's first model(x) after torch.manual_seed(seed); GPTModel(cfg) does.
  GptModel(std::shared_ptr<const GptWeights> weights, TorchGenerator after_init, GptOptions options);

  const GptWeights& weights() const { return *weights_; }
  const std::shared_ptr<const GptWeights>& shared_weights() const { return weights_; }
  const GptOptions& options() const { return options_; }

  // `out` is read before it is replaced: when it holds this model's previous pass and the request is the
  // same, its rows for the shared prefix are reused (that is the incremental path), so pass the same object
  // each time. Its storage is reused too, so a pass that fails after checking its input (the logits of
  // weights that overflow float32) leaves `out` empty: a view that must survive keeps its own copy.
  Status forward(const std::vector<int>& ids, const GptRequest& request, GptResult& out);
  // The same pass with the named points of `probe` captured or changed (PassProbe).
  Status forward(const std::vector<int>& ids, const GptRequest& request, PassProbe& probe, GptResult& out);
  // The book's generate_text_simple: `steps` times, append argmax of the last position's logits (stopping at
  // the context length). In train mode each step draws dropout from the continuing generator, as repeated
  // model(x) calls do. `out` receives the last step's pass; `generated` the new ids. `step`, when given, is
  // called after each token with the count so far; returning false stops there (Ctrl-C on the command line),
  // and `out` is then the pass over the text generated so far.
  Status generate(std::vector<int> ids, int steps, const GptRequest& request, std::vector<int>& generated,
                  GptResult& out, const std::function<bool(int done)>& step = {});
  void forget();  // drops the cache: the next pass is full
  // Drops the storage side passes (PassProbe::changes()) keep between them: a pass's keys, values and working
  // buffers (pass_bytes with no layer kept).
  void forget_side();
  // The rows forward(ids, request, out) would take from `out` instead of computing them (its incremental
  // path; 0 for a full pass).
  int reusable(const std::vector<int>& ids, const GptRequest& request, const GptResult& out) const;
  // Another model on the same weights (shared, not copied), generator state and options, with its own cache:
  // a second sentence or a second layer of the same model, side by side.
  GptModel fork() const;

 private:
  struct Cache;
  Status run(const std::vector<int>& ids, const GptRequest& request, TorchGenerator& g, GptResult& out,
             PassProbe* probe = nullptr);
  std::shared_ptr<const GptWeights> weights_;
  TorchGenerator after_init_;
  GptOptions options_;
  std::unique_ptr<Cache> cache_, side_cache_;
};

// The floating-point operations of a pass over `tokens` tokens that computes rows [first, tokens) (2 per
// multiply-add: every layer's projections, out_proj and feed-forward, each row's scores and context over
// the keys it sees, and the head for the logits kept), the measure of its size.
double forward_flops(const GptConfig& c, int tokens, int first = 0, bool all_logits = false);

// A pass computed somewhere else (the browser page's WebGPU), in the GptResult GptModel::forward fills.
// begin_gpt_forward checks the ids and the request as forward() does and fills all but the numbers: config,
// options, ids, and per kept layer its attention Result (config, shape, tokens) with the tensors forward()
// keeps there allocated, contents unspecified: weights; scores and scaled as the layer's stages ask; inputs
// (norm1's output), q, k, v, context and output where q, k, v are kept; resid_in and resid_out with
// request.residuals; and the logits (every position's or the last one's). The backend fills those, then
// end_gpt_forward completes the rest (dropped = weights where asked, the top k) and checks the logits as
// forward() does. Evaluation passes only: train mode's dropout masks come from PyTorch's sequential
// generators, which only the engine draws.
Status begin_gpt_forward(const GptWeights& w, const GptOptions& options, const std::vector<int>& ids,
                         const GptRequest& request, GptResult& r);
Status end_gpt_forward(const GptRequest& request, GptResult& r);

// Seeded model in one call: build_gpt with torch.manual_seed(seed), then a GptModel on it.
Status seeded_gpt(const GptConfig& c, std::uint64_t seed, const GptOptions& options, GptModel& out);

}  // namespace attnviz
