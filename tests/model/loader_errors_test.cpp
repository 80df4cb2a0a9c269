// Errors a user can act on, each from a small crafted file, and a mutation pass that checks no
// malformed input crashes the loaders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "model/file_sniff.h"
#include "model/loader.h"
#include "model_test_util.h"

namespace fuselm {
namespace {

using test::expect_error;
using test::TempDir;
namespace fs = std::filesystem;

constexpr const char* kLfsPointer =
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 4976698672\n";

constexpr const char* kHtmlPage =
    "<!DOCTYPE html>\n<html class=\"\" lang=\"en\">\n<head><meta charset=\"utf-8\" />"
    "<title>model.safetensors - Hugging Face</title></head><body>...</body></html>\n";

// A valid crafted HF model in `dir`, after `edit` changed its config or tensors.
void write_model(const fs::path& dir, const std::function<void(nlohmann::json&, std::vector<test::StEntry>&)>& edit) {
  nlohmann::json config = test::tiny_config();
  std::vector<test::StEntry> tensors = test::tiny_tensors();
  edit(config, tensors);
  test::write_hf_model(dir, config, tensors);
}

TEST(LoaderErrors, NonexistentPath) {
  expect_error([] { load_model("no/such/model-dir-xyz"); },
               {"model path 'no/such/model-dir-xyz' does not exist", "HF model directory", ".gguf", "synthetic:"});
  // An "owner/name" that is not on disk is most likely a Hugging Face repository id.
  expect_error([] { load_model("meta-llama/Llama-3.2-1B"); }, {"hf download meta-llama/Llama-3.2-1B"});
  expect_error([] { load_model(""); }, {"no model given"});
}

TEST(LoaderErrors, DirectoryWithoutConfig) {
  TempDir tmp;
  expect_error([&] { load_model(tmp.path().string()); }, {"directory without config.json", "not an HF model directory"});
  test::write_bytes(tmp.file("model.gguf"), "GGUF");
  expect_error([&] { load_model(tmp.path().string()); }, {"pass it directly", "model.gguf"});
}

TEST(LoaderErrors, MalformedConfigJson) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto&) {});
  test::write_bytes((dir / "config.json").string(), "{\n  \"hidden_size\": 8,\n  \"vocab_size\": 10,,\n}\n");
  expect_error([&] { load_model(dir.string()); }, {"config.json: malformed JSON at line 3, column 20", "byte 41", "unexpected ','"});
}

TEST(LoaderErrors, MissingConfigKey) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto& c, auto&) { c.erase("intermediate_size"); });
  expect_error([&] { load_model(dir.string()); }, {"config.json", "required key 'intermediate_size' is missing"});
}

TEST(LoaderErrors, UnsupportedArchitecture) {
  TempDir tmp;
  write_model(tmp.path() / "a", [](auto& c, auto&) {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
  });
  expect_error([&] { load_model((tmp.path() / "a").string()); },
               {"unsupported architecture 'Qwen2ForCausalLM'", "LlamaForCausalLM, MistralForCausalLM"});
  write_model(tmp.path() / "b", [](auto& c, auto&) {
    c.erase("architectures");
    c["model_type"] = "gemma";
  });
  expect_error([&] { load_model((tmp.path() / "b").string()); }, {"unsupported model_type 'gemma'"});
  write_model(tmp.path() / "c", [](auto& c, auto&) {
    c.erase("architectures");
    c.erase("model_type");
  });
  expect_error([&] { load_model((tmp.path() / "c").string()); }, {"neither 'architectures' nor 'model_type'"});
}

// Parsing is iterative, but printing the value in the error message recursed once per level: a
// small config.json of "[[[[..." crashed the process.
TEST(LoaderErrors, DeeplyNestedJsonIsAnError) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto&) {});
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  test::write_bytes((dir / "config.json").string(), "{\"architectures\": " + deep + "}");
  expect_error([&] { load_model(dir.string()); }, {"config.json", "nested more than 512 levels deep"});
  // 512 levels are still read (and refused for what they hold, not for their depth).
  const std::string ok = std::string(511, '[') + std::string(511, ']');
  test::write_bytes((dir / "config.json").string(), "{\"architectures\": " + ok + "}");
  expect_error([&] { load_model(dir.string()); }, {"'architectures' must be a list of names"});
}

TEST(LoaderErrors, RopeOriginalContextOutOfRange) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto& c, auto&) {
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1e20}};
  });
  expect_error([&] { load_model(dir.string()); }, {"original_max_position_embeddings' = 1e+20 is out of range"});
}

// Integer fields are read through one checked reader: 2^64-1 was taken as -1 (no BOS token) and
// 2^63 reported as -2^63.
TEST(LoaderErrors, ConfigIntegersOutOfRange) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto& c, auto&) { c["bos_token_id"] = 18446744073709551615ull; });
  expect_error([&] { load_model(dir.string()); }, {"config.json: 'bos_token_id' must be an integer in "
                                                   "-2147483648..2147483647, found 18446744073709551615"});
  write_model(dir, [](auto& c, auto&) { c["eos_token_id"] = {2, 9223372036854775808ull}; });
  expect_error([&] { load_model(dir.string()); }, {"'eos_token_id' must be an integer", "found 9223372036854775808"});
  write_model(dir, [](auto& c, auto&) { c["num_hidden_layers"] = 1e30; });
  expect_error([&] { load_model(dir.string()); }, {"'num_hidden_layers' must be an integer", "found 1e+30"});
  write_model(dir, [](auto& c, auto&) { c["num_hidden_layers"] = 1.0; });  // integral floats are accepted
  EXPECT_EQ(load_model(dir.string())->config.num_layers, 1);
}

TEST(LoaderErrors, TensorMissing) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto& t) {
    std::erase_if(t, [](const test::StEntry& e) { return e.name == "model.layers.0.mlp.up_proj.weight"; });
  });
  expect_error([&] { load_model(dir.string()); },
               {"tensor 'model.layers.0.mlp.up_proj.weight' is missing", "looked in model.safetensors"});
  write_model(dir, [](auto&, auto& t) { t.pop_back(); });  // lm_head, and the config says untied
  expect_error([&] { load_model(dir.string()); }, {"'lm_head.weight' is missing", "tie_word_embeddings false"});
}

TEST(LoaderErrors, TensorWrongShape) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  // A config that does not match the weights: 12 tokens declared, 10 stored.
  write_model(dir, [](auto& c, auto&) { c["vocab_size"] = 12; });
  expect_error([&] { load_model(dir.string()); },
               {"model.safetensors", "tensor 'model.embed_tokens.weight' has shape [10, 8], expected [12, 8]"});
}

TEST(LoaderErrors, UnsupportedDtype) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto& t) {
    t[2].dtype = "I8";  // q_proj, 64 values: keep the byte count consistent with I8
    t[2].bytes = std::string(64, '\1');
  });
  expect_error([&] { load_model(dir.string()); },
               {"tensor 'model.layers.0.self_attn.q_proj.weight' has dtype I8", "supported: F32, F16, BF16"});
}

TEST(LoaderErrors, TruncatedSafetensors) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto&) {});
  const std::string file = (dir / "model.safetensors").string();
  const std::string bytes = test::read_bytes(file);
  test::write_bytes(file, bytes.substr(0, bytes.size() - 50));
  expect_error([&] { load_model(dir.string()); },
               {"tensor 'lm_head.weight' lies outside the file", "ends at byte " + std::to_string(bytes.size()),
                "has " + std::to_string(bytes.size() - 50) + " bytes", "truncated"});
  // So short that even the header is cut.
  test::write_bytes(file, bytes.substr(0, 100));
  expect_error([&] { load_model(dir.string()); }, {"header length field says", "truncated"});
}

TEST(LoaderErrors, GitLfsPointer) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto&) {});
  test::write_bytes((dir / "model.safetensors").string(), kLfsPointer);
  expect_error([&] { load_model(dir.string()); }, {"model.safetensors' is a Git LFS pointer", "git lfs pull"});
  test::write_bytes(tmp.file("model.gguf"), kLfsPointer);
  expect_error([&] { load_model(tmp.file("model.gguf")); }, {"Git LFS pointer", "not a GGUF file", "git lfs pull"});
  test::write_bytes(tmp.file("stories.bin"), kLfsPointer);
  expect_error([&] { load_model(tmp.file("stories.bin")); }, {"Git LFS pointer", "git lfs pull"});
  test::write_bytes((dir / "config.json").string(), kLfsPointer);
  expect_error([&] { load_model(dir.string()); }, {"config.json' is a Git LFS pointer"});
}

TEST(LoaderErrors, HtmlPageInsteadOfModel) {
  TempDir tmp;
  const auto dir = tmp.path() / "m";
  write_model(dir, [](auto&, auto&) {});
  test::write_bytes((dir / "model.safetensors").string(), kHtmlPage);
  expect_error([&] { load_model(dir.string()); }, {"is an HTML page", "web page was downloaded instead of the file"});
  test::write_bytes(tmp.file("model.gguf"), kHtmlPage);
  expect_error([&] { load_model(tmp.file("model.gguf")); }, {"is an HTML page", "not a GGUF file"});
  test::write_bytes(tmp.file("model.bin"), kHtmlPage);
  expect_error([&] { load_model(tmp.file("model.bin")); }, {"is an HTML page"});
}

TEST(LoaderErrors, OtherWrongFiles) {
  TempDir tmp;
  test::write_bytes(tmp.file("empty.gguf"), "");
  expect_error([&] { load_model(tmp.file("empty.gguf")); }, {"is empty (0 bytes)"});
  test::write_bytes(tmp.file("pytorch_model.bin"), std::string("PK\x03\x04", 4) + std::string(2000, '\0'));
  expect_error([&] { load_model(tmp.file("pytorch_model.bin")); }, {"zip archive", "PyTorch checkpoints are not supported"});
  test::write_bytes(tmp.file("consolidated.pth"), std::string("\x80\x02", 2) + std::string(2000, '\0'));
  expect_error([&] { load_model(tmp.file("consolidated.pth")); }, {"Python pickle"});
  test::write_bytes(tmp.file("notes.txt"), "Entry not found");
  expect_error([&] { load_model(tmp.file("notes.txt")); }, {"15-byte text file", "Entry not found"});
  test::write_bytes(tmp.file("x.safetensors"), "abc");
  expect_error([&] { load_model(tmp.file("x.safetensors")); }, {"pass the directory that holds it"});
}

TEST(LoaderErrors, GgufMagicAndVersion) {
  TempDir tmp;
  test::write_bytes(tmp.file("bad.gguf"), std::string("GGUX\x03\0\0\0", 8) + std::string(64, '\0'));
  expect_error([&] { load_model(tmp.file("bad.gguf")); }, {"not a GGUF file", "begins with \"GGUX\""});
  test::write_bytes(tmp.file("v9.gguf"), std::string("GGUF\x09\0\0\0", 8) + std::string(64, '\0'));
  expect_error([&] { load_model(tmp.file("v9.gguf")); }, {"unsupported GGUF version 9"});
  test::write_bytes(tmp.file("be.gguf"), std::string("GGUF\0\0\0\x03", 8) + std::string(64, '\0'));
  expect_error([&] { load_model(tmp.file("be.gguf")); }, {"big-endian"});
}

TEST(LoaderErrors, DescribeWrongFileLeavesRealDataAlone) {
  EXPECT_EQ(describe_wrong_file("x", std::string("GGUF\x03\0\0\0", 8), 1 << 20, "a GGUF file"), "");
  EXPECT_EQ(describe_wrong_file("x", "{\"hidden_size\": 8}", 18, "a config.json", FileKind::Text), "");
  EXPECT_NE(describe_wrong_file("x", "{\"hidden_size\": 8}", 18, "a GGUF file"), "");
}

// Random corruptions of valid small files (byte flips, overwritten length fields, truncation) must
// end in a fuselm::Error or a loaded model: never a crash or another exception type.
TEST(LoaderErrors, MutatedFilesNeverCrash) {
  TempDir tmp;
  const auto dir = tmp.path() / "hf";
  write_model(dir, [](auto&, auto&) {});
  const std::string safetensors = test::read_bytes((dir / "model.safetensors").string());

  test::GgufWriter g;
  g.add_string("general.architecture", "llama");
  for (auto [k, v] : std::vector<std::pair<std::string, uint32_t>>{{"llama.embedding_length", 8},
                                                                    {"llama.block_count", 1},
                                                                    {"llama.attention.head_count", 2},
                                                                    {"llama.attention.head_count_kv", 1},
                                                                    {"llama.feed_forward_length", 16}})
    g.add_u32(k, v);
  g.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  for (const auto& t : test::tiny_tensors()) {
    static const std::map<std::string, std::string> kNames = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
        {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
        {"model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight"},
        {"model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight"},
        {"model.layers.0.self_attn.o_proj.weight", "blk.0.attn_output.weight"},
        {"model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight"},
        {"model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"},
        {"model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight"},
        {"model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"}};
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());
    g.add_tensor(kNames.at(t.name), ne, 0, t.bytes);
  }
  const std::string gguf = g.bytes();
  test::write_bytes(tmp.file("ok.gguf"), gguf);
  ASSERT_NO_THROW(load_model(tmp.file("ok.gguf")));

  std::string llama2c;
  for (int32_t v : {8, 16, 1, 2, 1, 10, 4}) test::append_pod(llama2c, v);
  const int64_t floats = 10 * 8 + 2 * 8 + 2 * 64 + 2 * 32 + 3 * 128 + 8 + 4 * 4;
  for (int64_t i = 0; i < floats; ++i) test::append_pod(llama2c, 0.01f * static_cast<float>(i % 7));
  test::write_bytes(tmp.file("ok.bin"), llama2c);
  ASSERT_NO_THROW(load_model(tmp.file("ok.bin")));

  std::mt19937_64 rng(12345);
  auto mutate = [&](std::string s) {
    switch (rng() % 4) {
      case 0:  // flip a few bytes anywhere
        for (int i = 0; i < 4; ++i) s[rng() % s.size()] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 1: {  // an extreme 8-byte value somewhere in the first 512 bytes (counts, lengths, offsets)
        const uint64_t values[] = {0, ~0ull, 1ull << 62, 0xffffffffull, 1ull << 32, 7};
        const size_t at = rng() % std::min<size_t>(s.size() - 8, 512);
        std::memcpy(s.data() + at, &values[rng() % 6], 8);
        break;
      }
      case 2:  // truncate
        s.resize(rng() % s.size());
        break;
      default: {  // an extreme 4-byte value (header fields, dims, types)
        const uint32_t values[] = {0, 0xffffffffu, 0x80000000u, 4096, 31};
        const size_t at = rng() % std::min<size_t>(s.size() - 4, 512);
        std::memcpy(s.data() + at, &values[rng() % 5], 4);
        break;
      }
    }
    return s;
  };
  int errors = 0, loaded = 0;
  for (int iter = 0; iter < 600; ++iter) {
    std::string target;
    switch (iter % 3) {
      case 0:
        test::write_bytes((dir / "model.safetensors").string(), mutate(safetensors));
        target = dir.string();
        break;
      case 1:
        test::write_bytes(tmp.file("m.gguf"), mutate(gguf));
        target = tmp.file("m.gguf");
        break;
      default:
        test::write_bytes(tmp.file("m.bin"), mutate(llama2c));
        target = tmp.file("m.bin");
        break;
    }
    try {
      auto m = load_model(target);
      // Whatever loads must be internally consistent.
      for (const WeightTensor* t : m->weights.all()) ASSERT_TRUE(t->has_data()) << target;
      ++loaded;
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << " on " << target << ": non-fuselm exception: " << e.what();
    }
  }
  EXPECT_GT(errors, 100);
  std::printf("mutations: %d rejected with fuselm::Error, %d still loadable\n", errors, loaded);
}

}  // namespace
}  // namespace fuselm
