// dtensor: plan, explain and simulate redistributions of distributed tensors (docs/cli.md).
#include <algorithm>
#include <iostream>
#include <string_view>

#include "common.hpp"
#include "dtensor/error.hpp"

#ifndef DTENSOR_VERSION
#define DTENSOR_VERSION "unknown"
#endif

namespace dtensor::cli {
int g_exit_status = 0;

namespace {
std::string nearest(std::string_view word, const std::vector<std::string>& known) {
  const auto best = nearest_spelling(word, known, 3);
  return best.empty() ? "" : fmt::format(" (did you mean {}?)", best);
}

// Names what CLI11 would misreport: an unknown command, or an unknown flag that would otherwise
// surface as a missing required one (`--too` read as "--to is required").
void check_words(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return;
  const std::string cmd = argv[1];
  if (cmd.starts_with("-")) return;
  std::vector<std::string> names;
  for (const auto* s : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(s->get_name());
  CLI::App* sub = nullptr;
  for (auto* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->get_name() == cmd) sub = s;
  if (!sub)
    throw InputError(fmt::format("unknown command {}{}; the commands are layout, load-plan, plan, simulate, show and tune", quote_input(cmd),
                                 nearest(cmd, names)));
  int first = 2;
  std::string where = cmd;
  // a command with its own commands (tune fit|predict|show): check the flags of the one named
  const auto subs = sub->get_subcommands([](CLI::App*) { return true; });
  if (!subs.empty()) {
    if (argc < 3 || std::string_view(argv[2]).starts_with("-")) return;  // CLI11 says what is missing
    std::vector<std::string> names2;
    CLI::App* sub2 = nullptr;
    for (auto* s : subs) {
      names2.push_back(s->get_name());
      if (s->get_name() == argv[2]) sub2 = s;
    }
    if (!sub2)
      throw InputError(fmt::format("unknown command {} for dtensor {}{}", quote_input(argv[2]), cmd, nearest(argv[2], names2)));
    sub = sub2;
    first = 3;
    where = cmd + " " + argv[2];
  }
  std::vector<std::string> flags;
  for (const auto* o : sub->get_options())
    for (const auto& n : o->get_lnames()) flags.push_back("--" + n);
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (!a.starts_with("--") || a == "--") continue;
    if (const auto eq = a.find('='); eq != std::string::npos) a = a.substr(0, eq);
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
      ++i;  // its value may itself start with "--"
      continue;
    }
    throw InputError(fmt::format("unknown flag {} for dtensor {}{}", quote_input(a), where, nearest(a, flags)));
  }
}
}  // namespace
}  // namespace dtensor::cli

int main(int argc, char** argv) {
  CLI::App app{"dtensor: layouts, redistribution plans and simulations of distributed tensors"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("dtensor ") + DTENSOR_VERSION);
  dtensor::cli::register_layout(app);
  dtensor::cli::register_load_plan(app);
  dtensor::cli::register_plan(app);
  dtensor::cli::register_simulate(app);
  dtensor::cli::register_show(app);
  dtensor::cli::register_tune(app);
  if (argc < 2) {  // bare `dtensor`: the usage, on stderr, and the bad-input exit code
    std::cerr << app.help() << "\n";
    return 2;
  }
  try {
    dtensor::cli::check_words(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const dtensor::BackendError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 4;
  } catch (const dtensor::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: internal: " << e.what() << "\n";
    return 3;
  }
  return dtensor::cli::g_exit_status;
}
