// llama2.c legacy (v0) checkpoints: a 7 x int32 header, then fp32 arrays used in place.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "model/file_sniff.h"
#include "model/loaders.h"

namespace fuselm::loaders {

namespace {

namespace fs = std::filesystem;

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

std::string header_text(const Llama2cHeader& h) {
  return str_cat("dim=", h.dim, " hidden_dim=", h.hidden_dim, " n_layers=", h.n_layers, " n_heads=", h.n_heads,
                 " n_kv_heads=", h.n_kv_heads, " vocab_size=", h.vocab_size, " seq_len=", h.seq_len);
}

// Counts of fp32 values of each array, in file order.
struct Layout {
  uint64_t embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis, classifier;
  uint64_t total_without_classifier() const {
    return embedding + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final + 2 * freq_cis;
  }
};

Layout layout_of(const ModelConfig& c, int seq_len) {
  const uint64_t dim = c.hidden_size, layers = c.num_layers, hidden = c.intermediate_size;
  const uint64_t kv_dim = c.kv_dim(), vocab = c.vocab_size;
  return Layout{.embedding = vocab * dim,
                .rms_att = layers * dim,
                .wq = layers * dim * dim,
                .wk = layers * dim * kv_dim,
                .wv = layers * dim * kv_dim,
                .wo = layers * dim * dim,
                .rms_ffn = layers * dim,
                .w1 = layers * hidden * dim,
                .w2 = layers * dim * hidden,
                .w3 = layers * hidden * dim,
                .rms_final = dim,
                .freq_cis = static_cast<uint64_t>(seq_len) * c.head_dim / 2,
                .classifier = vocab * dim};
}

std::string find_tokenizer_next_to(const fs::path& checkpoint) {
  const fs::path dir = checkpoint.has_parent_path() ? checkpoint.parent_path() : fs::path(".");
  if (fs::exists(dir / "tokenizer.bin")) return (dir / "tokenizer.bin").string();
  std::vector<fs::path> candidates;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("tok") && entry.path().extension() == ".bin" &&
        entry.path().filename() != checkpoint.filename())
      candidates.push_back(entry.path());
  }
  if (candidates.empty()) return "";
  std::sort(candidates.begin(), candidates.end());
  return candidates.front().string();
}

}  // namespace

std::unique_ptr<Model> load_llama2c(const std::string& path) {
  auto file = MappedFile::open(path);
  reject_wrong_file(*file, "a llama2.c checkpoint");
  const bool bin = fs::path(path).extension() == ".bin";
  const std::string what = str_cat("'", path, "' is not a valid llama2.c checkpoint",
                                   bin ? "" : " (nor recognised as GGUF or an HF model directory)");
  FUSELM_CHECK(file->size() >= kHeaderBytes, what, ": it has ", file->size(), " bytes, fewer than the ", kHeaderBytes,
               "-byte header");
  FUSELM_CHECK(std::memcmp(file->data(), "ak42", 4) != 0, "'", path,
               "' is a llama2.c checkpoint in a newer export version (magic \"ak42\"); only the legacy v0 format is "
               "supported: export it with `python export.py --version 0`");

  Llama2cHeader h;
  std::memcpy(&h, file->data(), kHeaderBytes);
  const bool shared_classifier = h.vocab_size > 0;
  // Fields above these bounds cannot come from a real checkpoint; they also keep sizes from overflowing.
  auto field = [&](int32_t v, const char* name, int32_t max) {
    FUSELM_CHECK(v > 0 && v <= max, what, ": header field ", name, " = ", v, " is out of range (1..", max,
                 "); header: ", header_text(h));
  };
  field(h.dim, "dim", 1 << 16);
  field(h.hidden_dim, "hidden_dim", 1 << 18);
  field(h.n_layers, "n_layers", 1024);
  field(h.n_heads, "n_heads", 1024);
  field(h.n_kv_heads, "n_kv_heads", 1024);
  FUSELM_CHECK(h.vocab_size != 0 && h.vocab_size > -(1 << 22) && h.vocab_size < (1 << 22), what,
               ": header field vocab_size = ", h.vocab_size, " is out of range; header: ", header_text(h));
  field(h.seq_len, "seq_len", 1 << 22);
  FUSELM_CHECK(h.dim % h.n_heads == 0, what, ": dim (", h.dim, ") is not a multiple of n_heads (", h.n_heads,
               "); header: ", header_text(h));

  auto model = std::make_unique<Model>();
  model->format = ModelFormat::Llama2c;
  model->source = path;
  ModelConfig& c = model->config;
  c.hidden_size = h.dim;
  c.intermediate_size = h.hidden_dim;
  c.num_layers = h.n_layers;
  c.num_heads = h.n_heads;
  c.num_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.vocab_size = shared_classifier ? h.vocab_size : -h.vocab_size;
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.tie_word_embeddings = shared_classifier;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  validate_config(c, path);

  const Layout layout = layout_of(c, h.seq_len);
  const uint64_t without = kHeaderBytes + 4 * layout.total_without_classifier();
  const uint64_t with = without + 4 * layout.classifier;
  const uint64_t expected = shared_classifier ? without : with;
  const uint64_t size = file->size();
  if (size != expected) {
    std::string detail;
    if (size == with && shared_classifier) {
      detail = " The size fits a checkpoint with an unshared classifier, but vocab_size is positive (which means "
               "shared); the header looks wrong.";
    } else if (size == without && !shared_classifier) {
      detail = " The size fits a checkpoint whose classifier is shared with the embedding, but vocab_size is "
               "negative (which means an unshared classifier is stored at the end); the classifier is missing.";
    } else if (size < expected) {
      detail = str_cat(" ", expected - size, " bytes are missing: the file is truncated (interrupted download?); "
                       "download it again.");
    } else {
      detail = str_cat(" It has ", size - expected, " bytes more than the header implies: the header does not "
                       "describe this file (wrong format or a newer llama2.c export version?).");
    }
    fail(what, ": its header (", header_text(h), ") implies ", expected, " bytes (", kHeaderBytes,
         "-byte header + fp32 weights", shared_classifier ? "" : " + classifier", ") but the file has ", size,
         " bytes.", detail);
  }
  model->mappings.push_back(file);

  const std::byte* cursor = file->data() + kHeaderBytes;
  const ExpectedShapes shapes = expected_shapes(c);
  // Each array holds n_layers consecutive per-layer matrices.
  auto take = [&](uint64_t floats) {
    const std::byte* p = cursor;
    cursor += floats * 4;
    return p;
  };
  auto tensor = [&](const std::string& name, const std::vector<int64_t>& shape, const std::byte* data) {
    WeightTensor t;
    t.name = name;
    t.dtype = DType::F32;
    t.shape = shape;
    t.data = data;
    return t;
  };
  // Meta's weights rotate adjacent pairs; permute q/k rows so every path sees rotate-half pairs.
  auto rotate_half_copy = [&](const std::byte* src, const std::vector<int64_t>& shape, int n_heads) {
    const size_t row_bytes = static_cast<size_t>(shape[1]) * 4;
    std::byte* dst = model->allocate(row_bytes * shape[0]);
    interleaved_to_rotate_half(src, dst, shape[0], row_bytes, n_heads);
    return static_cast<const std::byte*>(dst);
  };
  auto layer_name = [](int i, const char* rest) { return str_cat("model.layers.", i, ".", rest); };

  ModelWeights& w = model->weights;
  const int L = c.num_layers;
  w.layers.resize(L);
  w.token_embedding = tensor("model.embed_tokens.weight", shapes.embedding, take(layout.embedding));
  const std::byte* rms_att = take(layout.rms_att);
  const std::byte* wq = take(layout.wq);
  const std::byte* wk = take(layout.wk);
  const std::byte* wv = take(layout.wv);
  const std::byte* wo = take(layout.wo);
  const std::byte* rms_ffn = take(layout.rms_ffn);
  const std::byte* w1 = take(layout.w1);
  const std::byte* w2 = take(layout.w2);
  const std::byte* w3 = take(layout.w3);
  const std::byte* rms_final = take(layout.rms_final);
  take(2 * layout.freq_cis);  // precomputed RoPE tables: recomputed from theta instead
  const std::byte* classifier = shared_classifier ? nullptr : take(layout.classifier);

  for (int i = 0; i < L; ++i) {
    LayerWeights& l = w.layers[i];
    l.attn_norm = tensor(layer_name(i, "input_layernorm.weight"), shapes.norm, rms_att + 4 * (layout.rms_att / L) * i);
    l.wq = tensor(layer_name(i, "self_attn.q_proj.weight"), shapes.wq,
                  rotate_half_copy(wq + 4 * (layout.wq / L) * i, shapes.wq, c.num_heads));
    l.wk = tensor(layer_name(i, "self_attn.k_proj.weight"), shapes.wk,
                  rotate_half_copy(wk + 4 * (layout.wk / L) * i, shapes.wk, c.num_kv_heads));
    l.wv = tensor(layer_name(i, "self_attn.v_proj.weight"), shapes.wv, wv + 4 * (layout.wv / L) * i);
    l.wo = tensor(layer_name(i, "self_attn.o_proj.weight"), shapes.wo, wo + 4 * (layout.wo / L) * i);
    l.ffn_norm = tensor(layer_name(i, "post_attention_layernorm.weight"), shapes.norm,
                        rms_ffn + 4 * (layout.rms_ffn / L) * i);
    // llama2.c: w1 = gate, w3 = up, w2 = down.
    l.w_gate = tensor(layer_name(i, "mlp.gate_proj.weight"), shapes.w_gate, w1 + 4 * (layout.w1 / L) * i);
    l.w_up = tensor(layer_name(i, "mlp.up_proj.weight"), shapes.w_up, w3 + 4 * (layout.w3 / L) * i);
    l.w_down = tensor(layer_name(i, "mlp.down_proj.weight"), shapes.w_down, w2 + 4 * (layout.w2 / L) * i);
  }
  w.final_norm = tensor("model.norm.weight", shapes.norm, rms_final);
  if (shared_classifier) {
    tie_lm_head(w);
  } else {
    w.lm_head = tensor("lm_head.weight", shapes.lm_head, classifier);
  }
  model->tokenizer_hint = find_tokenizer_next_to(fs::path(path));
  return model;
}

}  // namespace fuselm::loaders
