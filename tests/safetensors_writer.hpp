// A small .safetensors writer for the tests: files built in memory from known values (or from a hand-written
// header, to break one rule at a time), and tiny GPT-2 models in both naming schemes.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"

namespace attnviz::test {

using Bytes = std::vector<unsigned char>;

inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// x in `t`, little-endian. Only values `t` holds exactly are accepted (the tests compare exactly).
inline void append_value(Bytes& out, float x, Dtype t) {
  const std::uint32_t u = float_bits(x);
  std::uint32_t v = u;
  std::size_t n = 4;
  if (t == Dtype::bf16) {
    REQUIRE((u & 0xffffu) == 0u);
    v = u >> 16;
    n = 2;
  } else if (t == Dtype::f16) {
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const int exp = static_cast<int>((u >> 23) & 0xffu) - 127 + 15;
    const std::uint32_t mant = u & 0x7fffffu;
    if ((u & 0x7fffffffu) == 0) {
      v = sign;
    } else {
      REQUIRE(exp > 0);  // normal halves only here; subnormals are written as raw bits
      REQUIRE(exp < 31);
      REQUIRE((mant & 0x1fffu) == 0u);
      v = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
    }
    n = 2;
  }
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

inline const char* dtype_name(Dtype t) {
  return t == Dtype::f32 ? "F32" : t == Dtype::f16 ? "F16" : "BF16";
}

// Tensors and the header describing them; `bytes()` lays them out in the order added.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name, dtype;
    std::vector<std::uint64_t> shape;
    Bytes data;
  };
  std::vector<Entry> entries;
  nlohmann::json metadata;     // written as __metadata__ when not null
  std::size_t header_pad = 0;  // spaces after the JSON, to move the data section's start

  void add(const std::string& name, Dtype t, std::vector<std::uint64_t> shape,
           const std::vector<float>& values) {
    Entry e{name, dtype_name(t), std::move(shape), {}};
    for (float x : values) append_value(e.data, x, t);
    entries.push_back(std::move(e));
  }
  void add_raw(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape,
               Bytes data) {
    entries.push_back(Entry{name, dtype, std::move(shape), std::move(data)});
  }

  nlohmann::json header() const {
    nlohmann::json h = nlohmann::json::object();
    if (!metadata.is_null()) h["__metadata__"] = metadata;
    std::uint64_t at = 0;
    for (const auto& e : entries) {
      h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + e.data.size()}}};
      at += e.data.size();
    }
    return h;
  }
  Bytes data() const {
    Bytes d;
    for (const auto& e : entries) d.insert(d.end(), e.data.begin(), e.data.end());
    return d;
  }
  Bytes bytes() const { return file(header().dump() + std::string(header_pad, ' '), data()); }

  // A file from a header text and a data section as given (for headers that break a rule).
  static Bytes file(const std::string& header, const Bytes& data) {
    Bytes out;
    const auto n = static_cast<std::uint64_t>(header.size());
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(n >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
};

inline std::shared_ptr<const Bytes> shared(Bytes b) {
  return std::make_shared<const Bytes>(std::move(b));
}

// A fresh directory under the system's temporary directory (the same code runs natively and under node with
// NODERAWFS), removed with everything in it at the end of the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("attnviz_st_" + name);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const Bytes& b) const {
    const auto p = path / name;
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    REQUIRE(f.good());
    return p.string();
  }
  std::string write(const std::string& name, const std::string& text) const {
    return write(name, Bytes(text.begin(), text.end()));
  }
};

// The working directory moved into `dir` for one test, and back at its end: relative paths as a user gives
// them (--model ORG/NAME that is also a folder here).
struct InDirectory {
  std::filesystem::path old;
  explicit InDirectory(const std::filesystem::path& dir) : old(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~InDirectory() {
    std::error_code ec;
    std::filesystem::current_path(old, ec);
  }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;
};

// Distinct small dyadic values (k/64 with |k| <= 127): exact in F32, F16 and BF16, different for every
// tensor (`salt`) and element.
inline std::vector<float> known_values(std::size_t n, int salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 37 + static_cast<std::size_t>(salt) * 101) % 255) - 127) /
           64.0f;
  return v;
}

// A tiny GPT-2 in one of the two naming schemes, every tensor filled with known values.
struct TinyGpt {
  enum class Scheme { hf, book };
  Scheme scheme = Scheme::hf;
  int vocab = 11, context = 5, d = 8, layers = 2;
  bool qkv_bias = true;      // the book scheme's optional q/k/v biases
  bool lm_head = false;      // an untied lm_head.weight in the HF scheme
  bool mask_buffers = true;  // the causal-mask buffers saved beside the weights (attn.bias, att.mask)
  std::string prefix;        // "transformer." in the HF scheme
  Dtype dtype = Dtype::f32;

  struct Stored {
    std::vector<std::uint64_t> shape;
    std::vector<float> values;  // as stored, row-major
  };
  std::map<std::string, Stored> tensors;  // by full name

  // Fills `tensors` in the scheme's order with known values.
  void build() {
    tensors.clear();
    order.clear();
    const auto D = static_cast<std::uint64_t>(d), V = static_cast<std::uint64_t>(vocab),
               C = static_cast<std::uint64_t>(context);
    if (scheme == Scheme::hf) {
      put(prefix + "wte.weight", {V, D});
      put(prefix + "wpe.weight", {C, D});
      for (int i = 0; i < layers; ++i) {
        const std::string b = prefix + "h." + std::to_string(i) + ".";
        put(b + "ln_1.weight", {D});
        put(b + "ln_1.bias", {D});
        if (mask_buffers) put(b + "attn.bias", {1, 1, C, C});
        put(b + "attn.c_attn.weight", {D, 3 * D});
        put(b + "attn.c_attn.bias", {3 * D});
        put(b + "attn.c_proj.weight", {D, D});
        put(b + "attn.c_proj.bias", {D});
        put(b + "ln_2.weight", {D});
        put(b + "ln_2.bias", {D});
        put(b + "mlp.c_fc.weight", {D, 4 * D});
        put(b + "mlp.c_fc.bias", {4 * D});
        put(b + "mlp.c_proj.weight", {4 * D, D});
        put(b + "mlp.c_proj.bias", {D});
      }
      put(prefix + "ln_f.weight", {D});
      put(prefix + "ln_f.bias", {D});
      if (lm_head) put("lm_head.weight", {V, D});
    } else {
      put("tok_emb.weight", {V, D});
      put("pos_emb.weight", {C, D});
      for (int i = 0; i < layers; ++i) {
        const std::string b = "trf_blocks." + std::to_string(i) + ".";
        for (const char* m : {"W_query", "W_key", "W_value"}) {
          put(b + "att." + m + ".weight", {D, D});
          if (qkv_bias) put(b + "att." + m + ".bias", {D});
        }
        put(b + "att.out_proj.weight", {D, D});
        put(b + "att.out_proj.bias", {D});
        if (mask_buffers) put(b + "att.mask", {C, C});
        put(b + "ff.layers.0.weight", {4 * D, D});
        put(b + "ff.layers.0.bias", {4 * D});
        put(b + "ff.layers.2.weight", {D, 4 * D});
        put(b + "ff.layers.2.bias", {D});
        put(b + "norm1.scale", {D});
        put(b + "norm1.shift", {D});
        put(b + "norm2.scale", {D});
        put(b + "norm2.shift", {D});
      }
      put("final_norm.scale", {D});
      put("final_norm.shift", {D});
      put("out_head.weight", {V, D});
    }
  }

  const Stored& operator[](const std::string& name) const {
    const auto it = tensors.find(name);
    REQUIRE_MESSAGE(it != tensors.end(), name);
    return it->second;
  }
  // Element (r, c) of a stored 2-D tensor.
  float at(const std::string& name, std::size_t r, std::size_t c) const {
    const Stored& s = (*this)[name];
    return s.values[r * static_cast<std::size_t>(s.shape[1]) + c];
  }

  // A writer holding every tensor but `skip`, in the scheme's order.
  SafetensorsWriter writer(const std::string& skip = "") const {
    SafetensorsWriter w;
    for (const auto& name : order)
      if (name != skip) w.add(name, dtype, tensors.at(name).shape, tensors.at(name).values);
    return w;
  }
  Bytes bytes(const std::string& skip = "") const { return writer(skip).bytes(); }

  std::vector<std::string> order;

 private:
  void put(const std::string& name, std::vector<std::uint64_t> shape) {
    std::size_t n = 1;
    for (auto s : shape) n *= static_cast<std::size_t>(s);
    tensors[name] = Stored{std::move(shape), known_values(n, static_cast<int>(order.size()))};
    order.push_back(name);
  }
};

}  // namespace attnviz::test
