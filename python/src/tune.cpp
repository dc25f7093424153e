// Bindings of dtensor.tune.
#include <chrono>

#include "bindings.hpp"
#include "py_communicator.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/tune_validate.hpp"
#include "dtensor/viz.hpp"

namespace dtensor::python {

void bind_tune(nb::module_& m) {
  // ---- tuning (dtensor.tune) ----
  auto t = m.def_submodule("tune", "Fitting the cost model to nccl-tests logs (as `dtensor tune fit`).");
  nb::class_<tune::Log>(t, "Log", "One parsed nccl-tests log.")
      .def_ro("name", &tune::Log::name)
      .def_prop_ro("collective", [](const tune::Log& l) { return std::string(to_string(l.collective)); })
      .def_ro("ranks", &tune::Log::ranks)
      .def_ro("ranks_per_node", &tune::Log::ranks_per_node)
      .def_prop_ro("rows", [](const tune::Log& l) {
        std::vector<std::tuple<std::int64_t, double, int>> out;
        for (const auto& r : l.rows) out.emplace_back(r.bytes, r.time_us, r.line);
        return out;
      }, "(bytes, out-of-place time in us, line) per data row")
      .def_prop_ro("ignored", [](const tune::Log& l) { return ignored_of(l.ignored); },
                   "(line, reason) per row the parser skipped");
  auto log_options = [](const std::optional<std::string>& collective, std::optional<std::int64_t> ranks,
                        std::optional<std::int64_t> ranks_per_node) {
    tune::LogOptions o;
    if (collective) {
      o.collective = parse_collective(*collective);
      if (!o.collective) throw InputError("unknown collective " + quote_input(*collective));
    }
    o.ranks = ranks;
    o.ranks_per_node = ranks_per_node;
    return o;
  };
  t.def("parse_nccl_log",
        [log_options](const std::string& text, const std::string& name, const std::optional<std::string>& collective,
                      std::optional<std::int64_t> ranks, std::optional<std::int64_t> ranks_per_node) {
          return tune::parse_nccl_log(text, name, log_options(collective, ranks, ranks_per_node));
        },
        "text"_a, "name"_a = "log", "collective"_a = nb::none(), "ranks"_a = nb::none(), "ranks_per_node"_a = nb::none(),
        "Parses nccl-tests output (every variant `dtensor tune fit` reads)");
  t.def("read_nccl_log",
        [log_options](const std::string& path, const std::optional<std::string>& collective,
                      std::optional<std::int64_t> ranks, std::optional<std::int64_t> ranks_per_node) {
          return tune::read_nccl_log(path, log_options(collective, ranks, ranks_per_node));
        },
        "path"_a, "collective"_a = nb::none(), "ranks"_a = nb::none(), "ranks_per_node"_a = nb::none(),
        "Reads and parses one nccl-tests log file, as `dtensor tune fit` does");
  nb::class_<tune::LogFit>(t, "LogFit", "The fit of one log.")
      .def_ro("log", &tune::LogFit::log)
      .def_ro("inter_host", &tune::LogFit::inter_host)
      .def_prop_ro("rows_used", [](const tune::LogFit& f) { return f.fit.rows_used; })
      .def_prop_ro("median_rel_error", [](const tune::LogFit& f) { return f.fit.median_rel_error; })
      .def_prop_ro("max_rel_error", [](const tune::LogFit& f) { return f.fit.max_rel_error; })
      .def_prop_ro("bands", [](const tune::LogFit& f) {
        std::vector<std::tuple<double, double, double>> out;
        for (const auto& b : f.fit.curve.bands) out.emplace_back(b.up_to_bytes, b.alpha_us, b.bw_GBps);
        return out;
      }, "(up_to_bytes, alpha_us, bus bandwidth GB/s) per size band")
      .def_prop_ro("ignored", [](const tune::LogFit& f) { return ignored_of(f.ignored); });
  nb::class_<tune::ProfileFit>(t, "ProfileFit")
      .def_ro("model", &tune::ProfileFit::model)
      .def_ro("logs", &tune::ProfileFit::logs);
  t.def("fit_profile",
        [](const std::vector<tune::Log>& logs, const nb::handle& base) {
          const CostModel b = model_of(base);
          nb::gil_scoped_release release;
          return tune::fit_profile(logs, b);
        },
        "logs"_a, "base"_a = "default",
        "One fitted curve per log (collective and link class) on top of base's links: a CostModel and per-log reports");

  t.def("render_fit_report", &viz::render_fit_report, "fitted"_a, "profile_path"_a,
        "The HTML page `dtensor tune fit --report` writes");
  t.def("fit_text", &tune::fit_text, "fitted"_a, "What `dtensor tune fit` prints per log");
  t.def("fit_json", &tune::fit_json, "fitted"_a, "profile_path"_a, "`dtensor tune fit --format json`'s report");
  t.def("fit_warnings", &tune::fit_warnings, "fitted"_a, "The fits a planner should not trust, and why");

  // ---- plan-ranking validation (dtensor.tune.validate; `dtensor tune validate`) ----
  nb::class_<tune::ValidateCase>(t, "ValidateCase", "One validation case: a redistribution, or several planned as a batch.")
      .def(nb::init<std::string, std::vector<std::pair<Layout, Layout>>>(), "name"_a, "pairs"_a)
      .def_ro("name", &tune::ValidateCase::name)
      .def_ro("pairs", &tune::ValidateCase::pairs)
      .def("__repr__", [](const tune::ValidateCase& c) { return fmt::format("ValidateCase({}, {} pair(s))", c.name, c.pairs.size()); });
  t.def("validate_cases",
        [](const Mesh& mesh, const std::vector<std::int64_t>& bytes, const std::string& dtype) {
          return tune::validate_cases(mesh, bytes, parse_dtype(dtype));
        },
        "mesh"_a, "bytes"_a, "dtype"_a = "f32", "The built-in cases on `mesh`, each at every tensor size in `bytes`");
  t.def("cases_from_json", &tune::cases_from_json, "text"_a,
        "The cases of a batch file (`dtensor plan --batch`'s JSON): every pair, and all of them as one batch");
  nb::class_<tune::Candidate>(t, "Candidate", "A plan in the comparison (a batch's plans, staged or one after another).")
      .def_ro("label", &tune::Candidate::label)
      .def_ro("also", &tune::Candidate::also)
      .def_ro("chosen", &tune::Candidate::chosen)
      .def_ro("plans", &tune::Candidate::plans)
      .def_ro("batch", &tune::Candidate::batch)
      .def_ro("predicted_us", &tune::Candidate::predicted_us)
      .def_ro("trace", &tune::Candidate::trace);
  auto candidate_options = [](const std::vector<nb::object>& others, bool pytorch_edges, bool runner_up,
                              std::optional<std::int64_t> max_peak_bytes) {
    tune::CandidateOptions o;
    for (const auto& m : others) o.others.push_back(model_of(m));
    o.pytorch_edges = pytorch_edges;
    o.runner_up = runner_up;
    o.max_peak_bytes = max_peak_bytes;
    return o;
  };
  t.def("validation_candidates",
        [candidate_options](const tune::ValidateCase& c, const nb::handle& model, const std::vector<nb::object>& others,
                            bool pytorch_edges, bool runner_up, std::optional<std::int64_t> max_peak_bytes) {
          const auto o = candidate_options(others, pytorch_edges, runner_up, max_peak_bytes);
          const CostModel m = model_of(model);
          nb::gil_scoped_release release;
          return tune::validation_candidates(c, m, o);
        },
        "case"_a, "model"_a = "default", "others"_a = std::vector<nb::object>{}, "pytorch_edges"_a = true,
        "runner_up"_a = true, "max_peak_bytes"_a = nb::none(),
        "The chosen plan and its competitors under `model` (the chosen one first, each distinct plan once)");
  t.def("validation_bytes",
        [](const std::vector<tune::Candidate>& candidates) { return tune::validation_bytes(candidates); }, "candidates"_a,
        "The memory a case's run holds at once on all of its mesh's ranks (every candidate's buffers)");
  t.def("default_memory_limit", [] { return default_simulation_limit(); },
        "Half of this machine's physical memory: validate's default host-memory bound");
  t.def("predict_plan_us", [](const Plan& p, const nb::handle& model) { return tune::predict_plan_us(p, model_of(model)); },
        "plan"_a, "model"_a, "A plan's time under `model` (each step priced as the planner prices that edge)");
  nb::class_<tune::TimeSummary>(t, "TimeSummary")
      .def_ro("median_us", &tune::TimeSummary::median_us)
      .def_ro("q1_us", &tune::TimeSummary::q1_us)
      .def_ro("q3_us", &tune::TimeSummary::q3_us)
      .def_ro("ci_low_us", &tune::TimeSummary::ci_low_us)
      .def_ro("ci_high_us", &tune::TimeSummary::ci_high_us)
      .def_ro("rounds", &tune::TimeSummary::rounds);
  nb::class_<tune::Rounds>(t, "Rounds", "The measurement protocol: rotated rounds until every median is known.")
      .def(
          "__init__",
          [](tune::Rounds* self, std::size_t candidates, int min_rounds, int max_rounds, double ci_target) {
            new (self) tune::Rounds(candidates, tune::RoundOptions{min_rounds, max_rounds, ci_target});
          },
          "candidates"_a, "min_rounds"_a = 8, "max_rounds"_a = 50, "ci_target"_a = 0.05)
      .def("order", &tune::Rounds::order)
      .def("add", [](tune::Rounds& r, const std::vector<double>& times) { r.add(times); }, "slowest_us"_a)
      .def("done", &tune::Rounds::done)
      .def("converged", &tune::Rounds::converged)
      .def_prop_ro("rounds", &tune::Rounds::rounds)
      .def("summary", &tune::Rounds::summary, "candidate"_a);
  nb::class_<tune::PlanResult>(t, "PlanResult")
      .def_ro("label", &tune::PlanResult::label)
      .def_ro("also", &tune::PlanResult::also)
      .def_ro("chosen", &tune::PlanResult::chosen)
      .def_ro("trace", &tune::PlanResult::trace)
      .def_ro("predicted_us", &tune::PlanResult::predicted_us)
      .def_ro("measured", &tune::PlanResult::measured)
      .def_ro("error", &tune::PlanResult::error)
      .def_ro("verified", &tune::PlanResult::verified);
  nb::class_<tune::CaseResult>(t, "CaseResult")
      .def_ro("name", &tune::CaseResult::name)
      .def_ro("what", &tune::CaseResult::what)
      .def_ro("skipped", &tune::CaseResult::skipped)
      .def_ro("plans", &tune::CaseResult::plans)
      .def_ro("pairs_compared", &tune::CaseResult::pairs_compared)
      .def_ro("pairs_agreeing", &tune::CaseResult::pairs_agreeing)
      .def_ro("regret", &tune::CaseResult::regret)
      .def_ro("converged", &tune::CaseResult::converged)
      .def_ro("rounds", &tune::CaseResult::rounds);
  nb::class_<tune::ValidationReport>(t, "ValidationReport", "What `tune validate` reports: text, JSON and HTML.")
      .def_rw("profile", &tune::ValidationReport::profile)
      .def_rw("others", &tune::ValidationReport::others)
      .def_rw("mesh", &tune::ValidationReport::mesh)
      .def_rw("backend", &tune::ValidationReport::backend)
      .def_rw("clock", &tune::ValidationReport::clock)
      .def_rw("note", &tune::ValidationReport::note)
      .def_ro("cases", &tune::ValidationReport::cases)
      .def("max_regret", &tune::ValidationReport::max_regret)
      .def("agreement", &tune::ValidationReport::agreement)
      .def("all_verified", &tune::ValidationReport::all_verified)
      .def("text", &tune::ValidationReport::text)
      .def("to_json", &tune::ValidationReport::to_json, "indent"_a = -1)
      .def("html", [](const tune::ValidationReport& r) { return viz::render_validate_report(r); });

  // ---- the same protocols on the torch.distributed backend (python -m dtensor.tune) ----
  // Every rank of the communicator's mesh calls them; the buffers are torch tensors the Python
  // side allocates (own_buffers), timed on this process's steady clock after the device waits.
  auto steady_us = [] {
    const auto t0 = std::chrono::steady_clock::now();
    return std::function<double()>([t0] {
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    });
  };
  t.def("_measure",
        [steady_us](PyCommunicator& comm, std::int64_t min_bytes, std::int64_t max_bytes, int warmup, int iters,
                    std::int64_t devices_per_host) {
          tune::MeasureOptions o{min_bytes, max_bytes, warmup, iters, devices_per_host};
          comm.own_buffers();
          std::vector<tune::MeasuredLog> logs;
          {
            nb::gil_scoped_release release;
            logs = tune::measure(comm, o, steady_us());
          }
          std::vector<std::pair<std::string, std::string>> out;
          for (auto& l : logs) out.emplace_back(std::move(l.name), std::move(l.text));
          return out;
        },
        "comm"_a, "min_bytes"_a, "max_bytes"_a, "warmup"_a, "iters"_a, "devices_per_host"_a);
  t.def("_validate",
        [steady_us, candidate_options](PyCommunicator& comm, const nb::handle& model, const std::vector<tune::ValidateCase>& cases,
                                       const std::vector<nb::object>& others, std::optional<std::int64_t> max_peak_bytes,
                                       int min_rounds, int max_rounds, double ci_target) {
          tune::ValidateOptions o;
          o.candidates = candidate_options(others, true, true, max_peak_bytes);
          o.rounds = {min_rounds, max_rounds, ci_target};
          const CostModel m = model_of(model);
          (void)tune::Rounds(1, o.rounds);  // checked before any collective
          comm.own_buffers();
          nb::gil_scoped_release release;
          return tune::validate(comm, m, cases, o, steady_us());
        },
        "comm"_a, "model"_a, "cases"_a, "others"_a, "max_peak_bytes"_a, "min_rounds"_a, "max_rounds"_a, "ci_target"_a);
}

}  // namespace dtensor::python
