#pragma once
// The subcommands. Each cmd_X.cpp holds an options struct, a setup_X that adds the subcommand to
// the app and binds its flags, and a run_X(options) that calls the library once and prints.
// Errors are thrown (errors.hpp); main.cpp alone turns them into exit codes. A command that ends
// with a non-error exit code other than 0 (compare: 1 = differs) throws CLI::RuntimeError(code).
//
// Adding a command: one file cmd_X.cpp, one declaration here, one line in main.cpp.
#include <CLI/CLI.hpp>

void setup_info(CLI::App& app);
void setup_convert(CLI::App& app);
void setup_compare(CLI::App& app);
void setup_random(CLI::App& app);
void setup_sdpa(CLI::App& app);
void setup_mha(CLI::App& app);
void setup_rollout(CLI::App& app);
void setup_check(CLI::App& app);
