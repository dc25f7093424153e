// dtensor: plan, explain and simulate redistributions of distributed tensors (docs/cli.md).
#include <iostream>

#include "common.hpp"
#include "dtensor/error.hpp"

namespace dtensor::cli {
int g_exit_status = 0;
}

int main(int argc, char** argv) {
  CLI::App app{"dtensor: layouts, redistribution plans and simulations of distributed tensors"};
  app.require_subcommand(1);
  dtensor::cli::register_layout(app);
  dtensor::cli::register_plan(app);
  dtensor::cli::register_simulate(app);
  dtensor::cli::register_show(app);
  try {
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
