// fuselm: the command-line front end. Library errors (fuselm::Error) become a one-paragraph
// message on stderr and exit code 1; bad usage exits 2.
#include <algorithm>
#include <cstdio>
#include <exception>

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
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto body = c.setup(*sub);
    sub->callback([&run, body] { run = body; });
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
