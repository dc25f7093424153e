// The MPI backend's logic (src/comm/mpi/mpi.cpp, the very code of dtensor::mpi) on
// the one-process MPI stand-in (tests/fakes/mpi_vendor_cpu.hpp): a plan runs and verifies, every
// collective moves the rank's data, MPI error codes become BackendErrors naming the call and
// MPI's text, a request that never completes ends in MPI_Abort after a message naming the
// collective, and bad requests are refused before MPI is called. Multi-process behaviour is
// tested on the real MPI under mpirun (spmd_mpi_*).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "comm/mpi/post_order.hpp"
#include "fakes/mpi_vendor_cpu.hpp"
#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/mpi.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/verify.hpp"

using namespace dtensor;
namespace stand_in = dtensor::mpi_vendor::stand_in;

namespace {

// Runs fn with stderr captured; returns what it wrote.
template <class F>
std::string stderr_of(F&& fn) {
  std::fflush(stderr);
  const std::string path = "/tmp/dtensor_mpi_cpu_stderr_" + std::to_string(::getpid());
  const int saved = ::dup(2);
  REQUIRE(std::freopen(path.c_str(), "w", stderr) != nullptr);
  try {
    fn();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(path.c_str());
  return ss.str();
}

}  // namespace

TEST_CASE("mpi stand-in: a plan runs and verifies; each collective moves the rank's data", "[mpi_cpu]") {
  stand_in::reset();
  const Mesh mesh = Mesh::parse("1x1");
  MpiCommunicator comm(mesh);
  CHECK(stand_in::calls("comm_dup") == 1);
  for (const char* to : {"RR", "S(1)R", "RS(0)"}) {
    const Layout src = Layout::parse(mesh, {6, 4}, DType::bf16, "S(0)S(1)");
    const Layout dst = Layout::parse(mesh, {6, 4}, DType::bf16, to);
    const Plan plan = plan_redistribution(src, dst, CostModel::default_model());
    const Executor ex(plan, comm);
    auto in = seeded_input(src, 0);
    std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
    ex.execute({in, out, ws});
    CHECK(verify_outputs(dst, {out}).empty());
  }
  // the collectives themselves, on groups of one mesh dim and of both (split once per group)
  std::vector<float> a{1, 2, 3, 4}, b(4, 0);
  comm.all_gather(Group{{0}}, a.data(), b.data(), 4, DType::f32);
  CHECK(b == a);
  std::fill(b.begin(), b.end(), 0.f);
  comm.all_reduce(Group{{0, 1}}, a.data(), b.data(), 4, DType::f32, ReduceOp::avg);  // avg over one member
  CHECK(b == a);
  std::fill(b.begin(), b.end(), 0.f);
  comm.reduce_scatter(Group{{1}}, a.data(), b.data(), 4, DType::f32, ReduceOp::sum);
  CHECK(b == a);
  std::fill(b.begin(), b.end(), 0.f);
  comm.all_to_all(Group{{0}}, a.data(), b.data(), 4, DType::f32);
  CHECK(b == a);
  CHECK(stand_in::calls("comm_split") == 3);  // {0}, {0,1}, {1}: each group split once
  std::fill(b.begin(), b.end(), 0.f);
  const Transfer send{0, a.data(), 4}, recv{0, b.data(), 4};
  comm.send_recv({&send, 1}, {&recv, 1}, DType::f32);
  CHECK(b == a);
  CHECK(comm.exchange(42) == std::vector<std::uint64_t>{42});
}

TEST_CASE("mpi stand-in: MPI errors name the call and MPI's text", "[mpi_cpu]") {
  stand_in::reset();
  MpiCommunicator comm(Mesh::parse("1"));
  std::vector<float> a(4), b(4);
  for (const char* call : {"iallgather", "iallreduce", "ireduce_scatter_block", "ialltoall", "comm_split", "testall"}) {
    INFO(call);
    stand_in::reset();
    stand_in::faults().fail = call;
    stand_in::faults().code = 17;
    MpiCommunicator c(Mesh::parse("1"));
    try {
      if (std::string(call) == "iallreduce") c.all_reduce(Group{{0}}, a.data(), b.data(), 4, DType::f32, ReduceOp::sum);
      else if (std::string(call) == "ireduce_scatter_block")
        c.reduce_scatter(Group{{0}}, a.data(), b.data(), 4, DType::f32, ReduceOp::sum);
      else if (std::string(call) == "ialltoall") c.all_to_all(Group{{0}}, a.data(), b.data(), 4, DType::f32);
      else c.all_gather(Group{{0}}, a.data(), b.data(), 4, DType::f32);
      FAIL("no error");
    } catch (const BackendError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("MPI error 17 (stand-in error 17)"));
    }
  }
  stand_in::reset();
  stand_in::faults().fail = "comm_dup";
  stand_in::faults().code = 5;
  CHECK_THROWS_WITH(MpiCommunicator(Mesh::parse("1")), Catch::Matchers::Contains("MPI_Comm_dup: MPI error 5"));
  stand_in::reset();
}

TEST_CASE("mpi stand-in: a request that never completes ends in MPI_Abort, naming the collective", "[mpi_cpu]") {
  stand_in::reset();
  MpiCommunicator comm(Mesh::parse("1"), MPI_COMM_WORLD, MpiOptions{std::chrono::milliseconds(50)});
  stand_in::faults().never_complete = true;
  std::vector<float> a(4), b(4);
  std::string what;
  const std::string err = stderr_of([&] {
    try {
      comm.all_gather(Group{{0}}, a.data(), b.data(), 4, DType::f32);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  });
  CHECK(what == "MPI_Abort(4)");
  CHECK(stand_in::calls("abort") == 1);
  CHECK_THAT(err, Catch::Matchers::Contains("all_gather over mesh dim 0 (size 1) (4 elements of f32) did not complete "
                                            "within 50 ms on rank 0"));
  stand_in::reset();
}

TEST_CASE("mpi stand-in: bad requests are refused before MPI is called", "[mpi_cpu]") {
  stand_in::reset();
  stand_in::faults().initialized = false;
  CHECK_THROWS_WITH(MpiCommunicator(Mesh::parse("1")), Catch::Matchers::Contains("MPI is not initialised"));
  stand_in::reset();
  CHECK_THROWS_WITH(MpiCommunicator(Mesh::parse("2")), Catch::Matchers::Contains("has 1 processes but mesh 2 has 2 ranks"));
  CHECK_THROWS_WITH(MpiCommunicator(Mesh::parse("1"), MPI_COMM_WORLD, MpiOptions{std::chrono::milliseconds(0)}),
                    Catch::Matchers::Contains("timeout must be positive"));
  MpiCommunicator comm(Mesh::parse("1"));
  float x = 0;
  const int before = stand_in::calls("iallgather");
  CHECK_THROWS_AS(comm.all_gather(Group{{0}}, &x, &x, std::int64_t{1} << 31, DType::f32), InputError);
  CHECK(stand_in::calls("iallgather") == before);
  const std::vector<Group> bad{Group{{1}}};
  CHECK_THROWS_WITH(comm.prepare(bad), Catch::Matchers::Contains("mesh 1 has 1 dims"));
  stand_in::reset();
}

TEST_CASE("mpi: a direct exchange posts its messages in shifted order", "[mpi_cpu]") {
  // rank 5 of 8 exchanging with 0, 2, 3, 6 and 7, given in ascending order
  std::vector<Transfer> t;
  for (std::int64_t p : {0, 2, 3, 6, 7}) t.push_back(Transfer{p, nullptr, 1});
  std::vector<std::size_t> order;
  const auto peers = [&] {
    std::vector<std::int64_t> out;
    for (std::size_t i : order) out.push_back(t[i].peer);
    return out;
  };
  mpi_order::shifted(t, 5, 8, false, order);  // sends: 6, 7, then wrapping to 0, 2, 3
  CHECK(peers() == std::vector<std::int64_t>{6, 7, 0, 2, 3});
  mpi_order::shifted(t, 5, 8, true, order);  // receives: 3, 2, 0, then wrapping to 7, 6
  CHECK(peers() == std::vector<std::int64_t>{3, 2, 0, 7, 6});
  // every rank's first send goes to a different peer (no hot spot at rank 0)
  std::vector<std::int64_t> firsts;
  for (std::int64_t r = 0; r < 4; ++r) {
    std::vector<Transfer> all;
    for (std::int64_t p = 0; p < 4; ++p)
      if (p != r) all.push_back(Transfer{p, nullptr, 1});
    mpi_order::shifted(all, r, 4, false, order);
    firsts.push_back(all[order[0]].peer);
  }
  CHECK(firsts == std::vector<std::int64_t>{1, 2, 3, 0});
  // a message to itself and repeated peers keep their given order among equals
  std::vector<Transfer> same{{1, nullptr, 1}, {1, nullptr, 2}, {0, nullptr, 3}};
  mpi_order::shifted(same, 0, 2, false, order);
  CHECK(order == std::vector<std::size_t>{2, 0, 1});
}
