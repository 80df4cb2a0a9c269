// fuselm chat-template: renders a conversation with the tokenizer's chat template.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/json_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fuselm::cli {
namespace {

struct ChatTemplateArgs {
  std::string model;
  std::string messages_path;
  bool add_generation_prompt = false;
  bool ids = false;
};

int run_chat_template(const ChatTemplateArgs& args) {
  nlohmann::ordered_json doc;
  const std::string text = read_text_file(args.messages_path);
  check_json_depth(text, str_cat("--messages file '", args.messages_path, "'"));
  try {
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("--messages file '", args.messages_path, "' is not valid JSON: ", e.what());
  }
  // Either a bare array of messages or an object holding one under "messages" (with optional tools).
  nlohmann::ordered_json messages = doc.is_object() && doc.contains("messages") ? doc["messages"] : doc;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (doc.is_object() && doc.contains("tools")) extra["tools"] = doc["tools"];
  auto tok = load_tokenizer(args.model);
  std::string prompt = apply_chat_template(*tok, messages, args.add_generation_prompt, extra);
  if (args.ids) {
    std::printf("%s\n", nlohmann::json({{"ids", tok->encode(prompt, false, true)}}).dump().c_str());
  } else {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  }
  return 0;
}

FUSELM_COMMAND("chat-template", "Render a conversation with the model's chat template",
               [](CLI::App& sub) -> std::function<int()> {
                 auto args = std::make_shared<ChatTemplateArgs>();
                 sub.add_option("-m,--model", args->model, "model folder, tokenizer file or .gguf")->required();
                 sub.add_option("--messages", args->messages_path,
                                "JSON file: [{\"role\": ..., \"content\": ...}, ...] or {\"messages\": [...]}")
                     ->required();
                 sub.add_flag("--add-generation-prompt", args->add_generation_prompt,
                              "end with the header that starts the assistant's reply");
                 sub.add_flag("--ids", args->ids, "print the prompt's token ids (special tokens parsed) as JSON");
                 return [args] { return run_chat_template(*args); };
               });

}  // namespace
}  // namespace fuselm::cli
