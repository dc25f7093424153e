// dtensor tune fit | predict | measure | validate | show (and storage, tune_storage_cmd.cpp): fit the cost model to nccl-tests logs (docs/cost-model.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "common.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/tune.hpp"
#include "dtensor/tune_validate.hpp"
#include "dtensor/viz.hpp"
#ifdef DTENSOR_CLI_MPI
#include "dtensor/mpi.hpp"
#endif
#ifdef DTENSOR_CLI_NCCL
#include "dtensor/nccl_mpi.hpp"
#endif

namespace dtensor::cli {
namespace {

struct TuneArgs {
  std::vector<std::string> logs;
  std::string ranks, ranks_per_node, collective, output, format = "text", base = "default";
  std::string profile = "default", bytes, report;
  std::string mesh, backend = "threads", sizes = "1K:16M", iters = "5", devices_per_host = "8", truth, noise = "0", seed = "1";
  std::string validate_bytes = "64K,4M", cases, memory_budget, min_rounds, max_rounds = "50", sim_memory_limit;
  std::vector<std::string> against;
  bool strict = false;
} args;

// --report's page, written and flushed, and the stream checked after writing: a report that
// could not be written in full (a full disk, /dev/full) is an error (exit 2), never "report X".
void write_report(const std::string& page) {
  std::ofstream rep(args.report);
  if (rep) rep << page;
  if (rep) rep.flush();
  if (!rep) throw InputError(fmt::format("--report {} cannot be written", quote_input(args.report)));
}

std::optional<Collective> collective_flag(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (auto c = parse_collective(text)) return c;
  throw InputError(fmt::format("--collective {} is not all_gather, reduce_scatter, all_reduce, alltoall or sendrecv",
                               quote_input(text)));
}

void run_fit() {
  check_format(args.format);
  if (args.logs.empty()) throw InputError("tune fit needs at least one nccl-tests log");
  if (args.output.empty()) throw InputError("tune fit needs -o PROFILE.json");
  tune::LogOptions opt;
  if (!args.ranks.empty()) opt.ranks = parse_index("--ranks", args.ranks, std::int64_t{1} << 24);
  if (!args.ranks_per_node.empty()) opt.ranks_per_node = parse_index("--ranks-per-node", args.ranks_per_node, std::int64_t{1} << 24);
  opt.collective = collective_flag(args.collective);
  const CostModel base = for_flag("--base", [] { return CostModel::load(args.base); });
  if (base.formula == CostModel::Formula::pytorch) throw InputError("--base: fitted curves need a ring-formula profile");
  std::vector<tune::Log> logs;
  for (const auto& path : args.logs) logs.push_back(tune::read_nccl_log(path, opt));
  const auto fitted = tune::fit_profile(logs, base);
  const CostModel& model = fitted.model;
  std::string text = tune::fit_text(fitted);
  const std::vector<std::string> warnings = tune::fit_warnings(fitted);
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  if (args.strict && !warnings.empty())
    throw InputError(fmt::format("--strict: {} warning(s), no profile written", warnings.size()));
  const std::string json = model.to_json();
  std::ofstream out(args.output);
  if (!out) throw InputError(fmt::format("-o {} cannot be written", quote_input(args.output)));
  out << nlohmann::json::parse(json).dump(2) << "\n";
  if (!args.report.empty()) {
    write_report(viz::render_fit_report(fitted, args.output));
    text += fmt::format("report {}\n", args.report);
  }
  if (args.format == "json") {
    std::cout << tune::fit_json(fitted, args.output) << "\n";
  } else {
    std::cout << text << fmt::format("wrote {}\n", args.output);
  }
}

void run_predict() {
  check_format(args.format);
  const CostModel model = for_flag("--profile", [] { return CostModel::load(args.profile); });
  const auto c = collective_flag(args.collective);
  if (!c) throw InputError("tune predict needs --collective");
  if (args.ranks.empty()) throw InputError("tune predict needs --ranks N");
  const auto n = parse_index("--ranks", args.ranks, std::int64_t{1} << 24);
  if (n < 2) throw InputError(fmt::format("--ranks {} must be at least 2", n));
  const auto per_node = args.ranks_per_node.empty() ? n : parse_index("--ranks-per-node", args.ranks_per_node, n + 1);
  if (per_node < 1) throw InputError("--ranks-per-node must be at least 1");
  if (args.bytes.empty()) throw InputError("tune predict needs --bytes B[,B...]");
  std::vector<std::int64_t> sizes;
  std::stringstream ss(args.bytes);
  for (std::string b; std::getline(ss, b, ',');) sizes.push_back(parse_bytes("--bytes", b));
  const bool inter = per_node < n;
  nlohmann::ordered_json preds = nlohmann::ordered_json::array();
  // where the time comes from: a fitted curve, or the profile's link constants
  const CollectiveCurve* curve = model.formula == CostModel::Formula::pytorch ? nullptr : model.curve(*c, inter);
  const std::string source =
      curve ? fmt::format("the {} curve fitted at {} ranks", inter ? "inter-node" : "intra-node", curve->ranks)
            : fmt::format("the profile's {} link constants (no fitted curve for {} on that link)",
                          inter ? "inter-node" : "intra-node", to_string(*c));
  std::string text = fmt::format("{} on {} ranks ({} per node), profile {}, from {}:\n", to_string(*c), n, per_node,
                                 model.name, source);
  for (auto b : sizes) {
    const double t = predict_collective_us(model, *c, n, inter, static_cast<double>(b));
    preds.push_back({{"bytes", b}, {"time_us", t}});
    text += fmt::format("  {:>16} bytes  {:>14.3f} us\n", b, t);
  }
  if (args.format == "json") {
    nlohmann::ordered_json j;
    j["fitted_curve"] = curve != nullptr;
    j["source"] = source;
    j["predictions"] = preds;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << text;
  }
}

// --noise: the whole text a number in [0, 1) ("0.5x" is refused, not read as 0.5).
double parse_noise() {
  char* end = nullptr;
  const double noise = args.noise.empty() ? -1 : std::strtod(args.noise.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(noise >= 0 && noise < 1))
    throw InputError(fmt::format("--noise {} must be a number in [0, 1)", quote_input(args.noise)));
  return noise;
}

// Runs fn(rank, communicator, clock) on every rank of `mesh`: one thread per rank of the
// in-process backend (wall clock, or the --truth profile's virtual clock), or this process's rank
// of an MPI job (`mpirun -np N dtensor tune ... --backend mpi`; wall clock). Returns whether this
// process prints (the in-process backend, or MPI rank 0).
// The buffers' memory comes with the backend (Communicator::memory()): host, or the GPU's for nccl.
bool run_spmd(const Mesh& mesh, const std::function<void(std::int64_t, Communicator&, const std::function<double()>&)>& fn) {
  if (args.backend == "threads") {
    if (mesh.num_ranks() > 256) throw InputError(fmt::format("--mesh {}: the in-process backend runs at most 256 ranks", args.mesh));
    WorldOptions wo;
    if (!args.truth.empty()) {
      wo.clock_profile = std::make_shared<const CostModel>(for_flag("--truth", [] { return CostModel::load(args.truth); }));
      wo.clock_noise = parse_noise();
      wo.clock_seed = static_cast<std::uint64_t>(parse_index("--seed", args.seed, INT64_MAX));
    }
    SimulatedWorld world(mesh, wo);
    const auto t0 = std::chrono::steady_clock::now();
    const bool virtual_clock = wo.clock_profile != nullptr;
    run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
      const std::function<double()> now = [&world, rank, virtual_clock, t0]() -> double {
        if (virtual_clock) return world.clock_us(rank);
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      };
      fn(rank, comm, now);
    });
    return true;
  }
  if (!args.truth.empty()) throw InputError("--truth (a virtual clock) works with --backend threads only");
  if (args.backend == "mpi" || args.backend == "nccl") {
#ifdef DTENSOR_CLI_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(nullptr, nullptr);
    struct Finalize {
      ~Finalize() {
        int done = 0;
        MPI_Finalized(&done);
        if (!done) MPI_Finalize();
      }
    } finalize;
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != mesh.num_ranks())
      throw InputError(fmt::format("--mesh {} has {} ranks but the MPI job has {} processes (mpirun -np {})", args.mesh,
                                   mesh.num_ranks(), size, mesh.num_ranks()));
    const std::function<double()> now = [] { return MPI_Wtime() * 1e6; };
    if (args.backend == "mpi") {
      MpiCommunicator comm(mesh);
      fn(comm.rank(), comm, now);
      return comm.rank() == 0;
    }
#ifdef DTENSOR_CLI_NCCL
    // one GPU per process (its local rank's), NCCL started through MPI; buffers on the GPU
    auto comm = nccl_communicator_from_mpi(mesh);
    fn(comm->rank(), *comm, now);
    comm->wait();
    return comm->rank() == 0;
#else
    throw InputError("--backend nccl: this dtensor was built without the NCCL backend (CUDA and NCCL not found)");
#endif
#else
    throw InputError(fmt::format("--backend {}: this dtensor was built without MPI, which starts the {} job "
                                 "(Debian: libopenmpi-dev, then rebuild)", args.backend, args.backend));
#endif
  }
  throw InputError(fmt::format("--backend {}: the CLI runs threads (in-process), mpi or nccl (both under mpirun)",
                               quote_input(args.backend)));
}

// Whether this is the SMPI build run with folded buffers (scripts/smpi-run.sh --fold; the backend
// checks the value itself): a timing-only run, whose outputs are garbage.
bool folded_smpi_run() {
#ifdef DTENSOR_CLI_SMPI
  const char* fold = std::getenv("DTENSOR_SMPI_FOLD");
  return fold != nullptr && *fold != '\0';
#else
  return false;
#endif
}

// The SMPI build's MPI backend: every rank a simulated process inside this one.
bool simulated_mpi() {
#ifdef DTENSOR_CLI_SMPI
  return args.backend == "mpi";
#else
  return false;
#endif
}

// A clock that gives every round the same times: the SMPI build's simulated one, or the virtual
// clock without noise.
bool deterministic_clock() {
  if (simulated_mpi()) return true;
  return args.backend == "threads" && !args.truth.empty() && parse_noise() == 0;
}

void run_measure() {
  if (args.mesh.empty()) throw InputError("tune measure needs --mesh M");
  if (args.output.empty()) throw InputError("tune measure needs -o DIR (one nccl-tests log per collective and link)");
  const Mesh mesh = for_flag("--mesh", [] { return Mesh::parse(args.mesh); });
  tune::MeasureOptions mo;
  const auto colon = args.sizes.find(':');
  if (colon == std::string::npos) throw InputError(fmt::format("--sizes {} must be MIN:MAX (e.g. 1K:16M)", quote_input(args.sizes)));
  mo.min_bytes = parse_bytes("--sizes", args.sizes.substr(0, colon));
  mo.max_bytes = parse_bytes("--sizes", args.sizes.substr(colon + 1));
  if (mo.max_bytes > (std::int64_t{1} << 28))
    throw InputError(fmt::format("--sizes: the CLI moves real host data; at most 256 MiB, not {}", mo.max_bytes));
  mo.iters = static_cast<int>(parse_index("--iters", args.iters, 1000000));
  mo.devices_per_host = parse_index("--devices-per-host", args.devices_per_host, std::int64_t{1} << 31);
  std::vector<tune::MeasuredLog> logs;
  std::mutex mu;
  const bool prints = run_spmd(mesh, [&](std::int64_t rank, Communicator& comm, const std::function<double()>& now) {
    auto mine = tune::measure(comm, mo, now);
    std::lock_guard lock(mu);
    if (rank == 0) logs = std::move(mine);
  });
  if (!prints) return;
  std::error_code ec;
  std::filesystem::create_directories(args.output, ec);
  if (ec || !std::filesystem::is_directory(args.output))
    throw InputError(fmt::format("-o {} is not a directory that can be created", quote_input(args.output)));
  for (const auto& l : logs) {
    const auto path = std::filesystem::path(args.output) / l.name;
    std::ofstream out(path);
    if (!out) throw InputError(fmt::format("{} cannot be written", quote_input(path.string())));
    out << l.text;
    std::cout << fmt::format("wrote {}\n", path.string());
  }
  if (logs.empty()) std::cout << "nothing to measure: every mesh dim has one rank\n";
}

std::vector<std::int64_t> byte_list(const char* flag, const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string b; std::getline(ss, b, ',');) out.push_back(parse_bytes(flag, b));
  if (out.empty() || out.size() > 16)
    throw InputError(fmt::format("{} {}: one to 16 sizes, comma-separated", flag, quote_input(text)));
  return out;
}

void run_validate() {
  check_format(args.format);
  if (args.mesh.empty() && args.cases.empty()) throw InputError("tune validate needs --mesh M (or --cases FILE, whose mesh it takes)");
  std::vector<tune::ValidateCase> cases;
  if (!args.cases.empty()) {
    const std::string file = for_flag("--cases", [] { return read_input_file(args.cases, "case file", 64u << 20); });
    cases = for_flag("--cases", [&] { return tune::cases_from_json(file); });
  }
  const Mesh mesh = args.mesh.empty() ? cases.front().pairs.front().first.mesh()
                                      : for_flag("--mesh", [] { return Mesh::parse(args.mesh); });
  const CostModel model = for_flag("--profile", [] { return CostModel::load(args.profile); });
  tune::ValidateOptions vo;
  for (const auto& a : args.against)
    vo.candidates.others.push_back(for_flag("--against", [&] { return CostModel::load(a); }));
  if (!args.memory_budget.empty()) vo.candidates.max_peak_bytes = parse_bytes("--memory-budget", args.memory_budget);
  vo.rounds.deterministic = deterministic_clock();
  vo.rounds.min_rounds = args.min_rounds.empty() ? (vo.rounds.deterministic ? 1 : 8)
                                                 : static_cast<int>(parse_index("--min-rounds", args.min_rounds, 100000));
  vo.rounds.max_rounds = static_cast<int>(parse_index("--max-rounds", args.max_rounds, 100000));
  if (args.cases.empty()) cases = tune::validate_cases(mesh, byte_list("--bytes", args.validate_bytes), DType::f32);
  for (const auto& c : cases)
    for (const auto& [src, dst] : c.pairs) {
      if (!(src.mesh() == mesh))
        throw InputError(fmt::format("--cases: {} is on mesh {}, not --mesh {}", c.name, src.mesh().str(), mesh.str()));
      if (src.numel() > (std::int64_t{1} << 26))
        throw InputError(fmt::format("{}: the CLI moves real host data; at most 2^26 elements per tensor, not {}", c.name,
                                     src.numel()));
    }
  (void)tune::Rounds(1, vo.rounds);  // the round options checked before any rank starts
  // Where every rank runs in this process (threads; SMPI's simulated ranks, which share this
  // static), each case's candidates are planned once for all of them (and for the check below).
  static tune::CandidateMemo memo;
  if (args.backend == "threads" || simulated_mpi()) vo.memo = &memo;
  if (args.backend == "threads") {
    // the in-process world holds every rank's buffers in this process: checked before any is made
    const std::int64_t limit = args.sim_memory_limit.empty() ? default_simulation_limit()
                                                             : parse_bytes("--sim-memory-limit", args.sim_memory_limit);
    const long double stacks = static_cast<long double>(mesh.num_ranks()) * static_cast<long double>(simulation_thread_bytes());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      const auto planned = memo.get(i, c, model, [&] { return tune::validation_candidates(c, model, vo.candidates); });
      if (!planned->error.empty()) continue;  // a case that cannot be planned is reported as skipped, holding nothing
      const auto& candidates = planned->candidates;
      const long double need = static_cast<long double>(tune::validation_bytes(candidates)) + stacks;
      if (need > static_cast<long double>(limit))
        throw InputError(fmt::format("tune validate: case {} ({} plans on {} ranks, in this process) needs about {:.0f} bytes "
                                     "of host memory, above the limit of {} bytes (--sim-memory-limit)",
                                     c.name, candidates.size(), mesh.num_ranks(), need, limit));
    }
  }
  // folded buffers (a timing-only simulated run): nothing to seed or check
  const bool folded = args.backend == "mpi" && folded_smpi_run();
  if (folded) vo.check_outputs = false;
  if (simulated_mpi())  // minutes per case at 1,024 simulated ranks: say where the run is
    vo.on_case = [](std::size_t i, std::size_t n, const tune::ValidateCase& c, std::size_t plans) {
      std::fprintf(stderr, "validate: case %zu of %zu, %s (%zu plans)\n", i + 1, n, c.name.c_str(), plans);
      std::fflush(stderr);
    };
  tune::ValidationReport report;
  std::mutex mu;
  const bool prints = run_spmd(mesh, [&](std::int64_t rank, Communicator& comm, const std::function<double()>& now) {
    auto mine = tune::validate(comm, model, cases, vo, now);
    std::lock_guard lock(mu);
    if (rank == 0) report = std::move(mine);
  });
  if (!prints) return;
  report.backend = args.backend;
  report.clock = args.backend == "threads" && !args.truth.empty() ? "virtual clock (" + args.truth + ")" : "wall clock";
#ifdef DTENSOR_CLI_SMPI
  // under smpirun MPI_Wtime is the simulated network's clock (docs/virtual-cluster.md)
  const char* selector = std::getenv("DTENSOR_SMPI_SELECTOR");
  if (args.backend == "mpi")
    report.clock = fmt::format("simulated clock (SimGrid SMPI, coll-selector {}, all_to_all every peer at once{})",
                               selector ? selector : "unknown",
                               folded ? ", folded buffers: timing only, outputs not checked" : "");
#endif
  const auto cores = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  if (report.clock == "wall clock" && cores > 0 && mesh.num_ranks() > cores)
    report.note = fmt::format("{} ranks share {} cores here: the ranks take turns, so the measured times say little about "
                              "a cluster (the protocol runs end to end)", mesh.num_ranks(), cores);
  if (!args.report.empty()) {
    write_report(viz::render_validate_report(report));
  }
  if (args.format == "json") {
    std::cout << report.to_json() << "\n";
  } else {
    std::cout << report.text();
    if (!args.report.empty()) std::cout << fmt::format("report {}\n", args.report);
  }
  if (!folded && !report.all_verified()) throw BackendError("validate: a plan's output is wrong on some rank (marked OUTPUT WRONG)");
}

void run_show() {
  check_format(args.format);
  const CostModel m = for_flag("PROFILE", [] { return CostModel::load(args.profile); });
  if (args.format == "json") {
    std::cout << m.to_json() << "\n";
    return;
  }
  std::string out = fmt::format("profile {} ({} formula), {} devices per host, local copies {:.1f} GB/s\n", m.name,
                                m.formula == CostModel::Formula::pytorch ? "pytorch" : "ring", m.devices_per_host, m.copy_bw_GBps);
  out += fmt::format("  {:<6} {:>10} {:>16} {:>12} {:>12}\n", "link", "alpha us", "per-peer us", "bw GB/s", "p2p GB/s");
  for (bool inter : {false, true}) {
    const auto& l = m.link(inter);
    out += fmt::format("  {:<6} {:>10.3f} {:>16.3f} {:>12.3f} {:>12.3f}\n", inter ? "inter" : "intra", l.alpha_us,
                       l.alpha_per_peer_us, l.bw_GBps, l.p2p_bw_GBps);
  }
  if (m.curves.empty()) out += "no fitted curves: every collective uses the link's alpha-beta line\n";
  for (const auto& c : m.curves) out += tune::curve_table(c);
  std::cout << out;
}

}  // namespace

void register_tune(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", "fit the cost model to nccl-tests measurements, predict, show profiles");
  tune->require_subcommand(1);
  auto* fit = tune->add_subcommand("fit", "fit size-band curves to nccl-tests logs and write a profile");
  fit->add_option("logs", args.logs, "nccl-tests output files (all_gather_perf, reduce_scatter_perf, all_reduce_perf, "
                                     "alltoall_perf, sendrecv_perf)");
  fit->add_option("--ranks", args.ranks, "ranks of logs without a run header");
  fit->add_option("--ranks-per-node", args.ranks_per_node, "ranks per node (default: from the device list, else all on one node)");
  fit->add_option("--collective", args.collective, "the collective, for logs that do not say");
  fit->add_option("--base", args.base, "profile whose links and copy bandwidth the fitted one keeps (default)");
  fit->add_option("-o,--output", args.output, "the profile to write (JSON, version 2)");
  fit->add_option("--format", args.format, "text or json report on stdout");
  fit->add_option("--report", args.report, "also write a self-contained HTML page with plots of the fit");
  fit->add_flag("--strict", args.strict,
                "fail (exit 2, nothing written) when a fit's median error exceeds 20% or a band hits a validation limit");
  fit->callback(run_fit);
  auto* predict = tune->add_subcommand("predict", "the time the planner charges for one collective");
  predict->add_option("--profile", args.profile, "default, pytorch or a profile file");
  predict->add_option("--collective", args.collective, "all_gather, reduce_scatter, all_reduce, alltoall or sendrecv");
  predict->add_option("--ranks", args.ranks, "group size");
  predict->add_option("--ranks-per-node", args.ranks_per_node, "ranks per node (default: all on one node)");
  predict->add_option("--bytes", args.bytes, "sizes as nccl-tests counts them (1024-based K/M/G suffixes), comma-separated");
  predict->add_option("--format", args.format, "text or json");
  predict->callback(run_predict);
  auto* measure = tune->add_subcommand("measure", "time the library's collectives and write nccl-tests logs");
  measure->add_option("--mesh", args.mesh, "mesh shape: 2x4 or dp=2,tp=4");
  measure->add_option("--backend", args.backend, "threads (in-process), or mpi or nccl (under mpirun; nccl: one GPU per process)");
  measure->add_option("--sizes", args.sizes, "MIN:MAX in bytes, doubling (default 1K:16M)");
  measure->add_option("--iters", args.iters, "timed iterations per size (default 5)");
  measure->add_option("--devices-per-host", args.devices_per_host, "which mesh dims are within a host (default 8)");
  measure->add_option("--truth", args.truth, "a profile that drives a virtual clock instead of the wall clock");
  measure->add_option("--noise", args.noise, "relative noise of the virtual clock, in [0, 1) (default 0)");
  measure->add_option("--seed", args.seed, "seed of the virtual clock's noise");
  measure->add_option("-o,--output", args.output, "directory for the logs");
  measure->callback(run_measure);
  auto* validate = tune->add_subcommand("validate", "run real redistributions: predicted vs measured time per plan");
  validate->add_option("--profile", args.profile, "the profile validated: default, pytorch or a profile file");
  validate->add_option("--against", args.against, "another profile whose best plan competes (repeatable)");
  validate->add_option("--mesh", args.mesh, "mesh shape: 2x4 or dp=2,tp=4 (with --cases: the file's, by default)");
  validate->add_option("--bytes", args.validate_bytes, "tensor sizes of the built-in cases (default 64K,4M: latency- and "
                                                       "bandwidth-bound)");
  validate->add_option("--cases", args.cases, "a batch file (as `plan --batch` reads) instead: every pair a case, and all together");
  validate->add_option("--memory-budget", args.memory_budget, "the workspace every plan must keep within (bytes)");
  validate->add_option("--sim-memory-limit", args.sim_memory_limit,
                       "threads: the host memory the in-process run may hold, checked before allocating (default: half "
                       "of this machine's memory)");
  validate->add_option("--min-rounds", args.min_rounds, "rounds at least (default 8; 1 on a deterministic clock: the SMPI build, --truth without --noise)");
  validate->add_option("--max-rounds", args.max_rounds, "rounds at most, when the medians' 95% intervals are not within 5% (default 50)");
  validate->add_option("--backend", args.backend, "threads (in-process), or mpi or nccl (under mpirun; nccl: one GPU per process)");
  validate->add_option("--truth", args.truth, "threads: a profile that drives a virtual clock instead of the wall clock");
  validate->add_option("--noise", args.noise, "relative noise of the virtual clock, in [0, 1) (default 0)");
  validate->add_option("--seed", args.seed, "seed of the virtual clock's noise");
  validate->add_option("--format", args.format, "text or json");
  validate->add_option("--report", args.report, "also write a self-contained HTML page: predicted vs measured per plan");
  validate->callback(run_validate);
  auto* show = tune->add_subcommand("show", "print a profile as a table");
  show->add_option("profile", args.profile, "default, pytorch or a profile file");
  show->add_option("--format", args.format, "text or json");
  show->callback(run_show);
  register_tune_storage(*tune);
}

}  // namespace dtensor::cli
