#pragma once
// The subcommands. Each cmd_X.cpp holds an options struct, a setup_X that adds the subcommand to
// the app and binds its flags, and a run_X(options) that calls the library once and prints.
// Errors are thrown (errors.hpp); main.cpp alone turns them into exit codes. A command that ends
// with a non-error exit code other than 0 (compare: 1 = differs) throws CLI::RuntimeError(code).
//
// Adding a command: one file cmd_X.cpp, one declaration here, one line in main.cpp.
#include <memory>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "flag_parsing.hpp"

// The library's phrases every command puts in its own words (naming_flags): a .safetensors file
// given as a tensor is mha's --params; a format no command's flag names is left unsaid.
inline const FlagNames kEveryCommandPhrases = {{"read it as attention parameters", "give it to mha --params"},
                                               {" (or name the format)", ""}};

// Adds the subcommand NAME (HELP) to APP with its options O, alive as long as APP, and returns both
// for binding the flags. The callback runs RUN(options) with the library's PHRASES in the command's
// words, then kEveryCommandPhrases.
template <class O, class Run>
std::pair<std::shared_ptr<O>, CLI::App*> add_command(CLI::App& app, const std::string& name, const std::string& help,
                                                     Run run, FlagNames phrases = {}) {
    auto options = std::make_shared<O>();
    CLI::App* cmd = app.add_subcommand(name, help);
    phrases.insert(phrases.end(), kEveryCommandPhrases.begin(), kEveryCommandPhrases.end());
    cmd->callback([options, run, phrases] { naming_flags({}, [&] { run(*options); }, phrases); });
    return {options, cmd};
}

void setup_info(CLI::App& app);
void setup_convert(CLI::App& app);
void setup_compare(CLI::App& app);
void setup_random(CLI::App& app);
void setup_sdpa(CLI::App& app);
void setup_mha(CLI::App& app);
void setup_rollout(CLI::App& app);
void setup_check(CLI::App& app);
void setup_tokenize(CLI::App& app);
void setup_model(CLI::App& app);
void setup_lens(CLI::App& app);
void setup_ablate(CLI::App& app);
void setup_attribute(CLI::App& app);
void setup_patch(CLI::App& app);
