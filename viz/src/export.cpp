#include "attnviz/viz/export.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "attnviz/io/files.hpp"
#include "attnviz/io/json_io.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>

namespace attnviz::viz {
namespace {

Status make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::fail("cannot create folder " + quote(dir) + ": " + ec.message());
  return Status::ok();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string head_file(const std::string& dir, const std::string& prefix, StageId s, int head, int heads,
                      const char* ext) {
  std::string name = prefix + "_" + to_string(s);
  if (heads > 1) name += "_head" + std::to_string(head);
  return (std::filesystem::path(dir) / (name + ext)).string();
}

}  // namespace

Status write_png(const std::string& path, int width, int height, const std::vector<std::uint32_t>& rgba) {
  if (width <= 0 || height <= 0 ||
      rgba.size() < static_cast<std::size_t>(width) * static_cast<std::size_t>(height))
    return Status::fail("no image to write to " + quote(path));
  // Encoded in memory, then written with every error reported: stbi_write_png ignores failed writes, so a
  // full disk left a short file and "wrote ...". Texels are R in the low byte, so on a little-endian machine
  // the bytes are already R, G, B, A.
  std::string png;
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data),
                                               static_cast<std::size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, width, height, 4, rgba.data(), width * 4))
    return Status::fail("cannot encode the PNG for " + quote(path));
  return write_file(path, png);
}

std::string to_csv(const MatrixDesc& m, const std::vector<std::string>& tokens) {
  std::string out = "token";
  for (int j = 0; j < m.cols; ++j)
    out += "," + (m.square ? csv_field(tokens[static_cast<std::size_t>(j)]) : "dim" + std::to_string(j));
  out += "\n";
  char buf[32];
  for (int i = 0; i < m.rows; ++i) {
    out += csv_field(tokens[static_cast<std::size_t>(i)]);
    for (int j = 0; j < m.cols; ++j) {
      const float x = m.at(i, j);
      // %.9g reads back to the same float32; masked cells are written as -inf like PyTorch prints them.
      if (x == -HUGE_VALF)
        std::snprintf(buf, sizeof buf, ",-inf");
      else
        std::snprintf(buf, sizeof buf, ",%.9g", static_cast<double>(x));
      out += buf;
    }
    out += "\n";
  }
  return out;
}

Status export_text(const std::string& dir, const std::string& name, const std::string& text, Written& out) {
  if (Status st = make_dir(dir); !st.is_ok()) return st;
  const std::string path = (std::filesystem::path(dir) / name).string();
  if (Status st = write_file(path, text); !st.is_ok()) return st;
  out.paths.push_back(path);
  return Status::ok();
}

Status export_json(const std::string& dir, const std::string& prefix, const Result& r, const Params& p,
                   Written& out) {
  if (Status st = make_dir(dir); !st.is_ok()) return st;
  const std::string path = (std::filesystem::path(dir) / (prefix + ".json")).string();
  if (Status st = write_file(path, result_to_json(r, state_dict(r.config, p)) + "\n"); !st.is_ok()) return st;
  out.paths.push_back(path);
  return Status::ok();
}

Status export_csv(const std::string& dir, const std::string& prefix, const Result& r, StageId s,
                  Written& out) {
  const StageInfo info = stage_info(r, s);
  if (!info.available) return Status::fail(std::string("no ") + info.title + " to export: " + info.why_not);
  if (Status st = make_dir(dir); !st.is_ok()) return st;
  const int heads = stage_heads(r, s);
  for (int h = 0; h < heads; ++h) {
    const std::string path = head_file(dir, prefix, s, h, heads, ".csv");
    if (Status st = write_file(path, to_csv(stage_matrix(r, s, h), r.tokens)); !st.is_ok()) return st;
    out.paths.push_back(path);
  }
  return Status::ok();
}

int default_cell_px(int rows, int cols) {
  return std::clamp(512 / std::max(1, std::max(rows, cols)), 1, kMaxCellPx);
}

Status export_png(const std::string& dir, const std::string& prefix, const Result& r, StageId s,
                  const ColorOptions& o, int cell_px, Written& out) {
  const StageInfo info = stage_info(r, s);
  if (!info.available) return Status::fail(std::string("no ") + info.title + " to export: " + info.why_not);
  if (cell_px < 1 || cell_px > kMaxCellPx)
    return Status::fail("cell size must be 1 to " + std::to_string(kMaxCellPx) + " pixels");
  if (Status st = make_dir(dir); !st.is_ok()) return st;
  const int heads = stage_heads(r, s);
  Range shared{HUGE_VALF, -HUGE_VALF};
  for (int h = 0; h < heads; ++h) shared = merge(shared, finite_range(stage_matrix(r, s, h)));
  std::vector<std::uint32_t> cells, image;
  for (int h = 0; h < heads; ++h) {
    const MatrixDesc m = stage_matrix(r, s, h);
    colorize(m, o, shared, cells);
    const int w = m.cols * cell_px, ht = m.rows * cell_px;
    image.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(ht));
    for (int y = 0; y < ht; ++y)
      for (int x = 0; x < w; ++x)
        image[static_cast<std::size_t>(y) * w + x] =
            cells[static_cast<std::size_t>(y / cell_px) * static_cast<std::size_t>(m.cols) + x / cell_px];
    const std::string path = head_file(dir, prefix, s, h, heads, ".png");
    if (Status st = write_png(path, w, ht, image); !st.is_ok()) return st;
    out.paths.push_back(path);
  }
  return Status::ok();
}

}  // namespace attnviz::viz
