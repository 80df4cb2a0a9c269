// fuselm: the command-line front end. Library errors (fuselm::Error) become a one-paragraph
// message on stderr and exit code 1; bad usage exits 2.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/command.h"
#include "core/error.h"

namespace fuselm::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}
}  // namespace fuselm::cli

int main(int argc, char** argv) {
  using namespace fuselm::cli;
  CLI::App app{"fuselm: fused-kernel LLM inference for Llama-family models"};
  app.require_subcommand(1);
  auto& commands = command_registry();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::function<int()> run;
  const char* running = "";  // the subcommand, for the out-of-memory message
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto body = c.setup(*sub);
    sub->callback([&run, &running, body, name = c.name.c_str()] {
      run = body;
      running = name;
    });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run ? run() : 2;
  } catch (const fuselm::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Its what() is only "std::bad_alloc". The loaders name the file they were reading; this is
    // for the rest (engine buffers, logits, ...), printed without building a string.
    std::fprintf(stderr,
                 "error: out of memory in `fuselm %s`: the model or the request needs more memory than is free "
                 "(see `fuselm inspect -m MODEL` for the model's size); free memory or use a smaller model\n",
                 running);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
