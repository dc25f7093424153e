// Bindings of dtensor.tune.
#include "bindings.hpp"

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
}

}  // namespace dtensor::python
