#pragma once
// Subcommands register themselves: each cmd_*.cpp adds one with FUSELM_COMMAND, so adding a
// command never touches main.cpp. A command's run function returns the process exit code.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace fuselm::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds the command's options to `sub` and returns the function that runs it.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { command_registry().push_back(std::move(c)); }
};

}  // namespace fuselm::cli

#define FUSELM_CONCAT_INNER(a, b) a##b
#define FUSELM_CONCAT(a, b) FUSELM_CONCAT_INNER(a, b)
#define FUSELM_COMMAND(name, help, setup_fn) \
  static ::fuselm::cli::CommandRegistrar FUSELM_CONCAT(fuselm_command_, __LINE__)({name, help, setup_fn})
