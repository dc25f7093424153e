#include <catch2/catch.hpp>
#include <thread>

#include "dtensor/plan_cache.hpp"

using namespace dtensor;

namespace {
Layout L(const char* pls) { return Layout::parse(Mesh::parse("2x4"), {64, 32}, DType::f32, pls); }
}  // namespace

TEST_CASE("plan cache: hits, misses, LRU eviction", "[cache]") {
  PlanCache cache(2);
  const auto def = CostModel::default_model();
  auto a = cache.get_or_plan(L("S(0)R"), L("RR"), def);
  auto b = cache.get_or_plan(L("S(0)R"), L("RR"), def);
  CHECK(a == b);  // the same shared plan
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 1);
  (void)cache.get_or_plan(L("RS(1)"), L("RR"), def);
  (void)cache.get_or_plan(L("S(0)R"), L("RR"), def);   // refresh a
  (void)cache.get_or_plan(L("S(1)R"), L("RR"), def);   // evicts RS(1)
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().size == 2);
  (void)cache.get_or_plan(L("S(0)R"), L("RR"), def);
  CHECK(cache.stats().hits == 3);
  (void)cache.get_or_plan(L("RS(1)"), L("RR"), def);
  CHECK(cache.stats().misses == 4);
  // cost model and options are part of the key
  auto pt = cache.get_or_plan(L("S(0)R"), L("RR"), CostModel::pytorch());
  CHECK(pt->cost_model == "pytorch");
  PlanOptions o;
  o.edges = EdgeSet::pytorch;
  auto pe = cache.get_or_plan(L("S(0)R"), L("RR"), def, o);
  CHECK(pe->edges == EdgeSet::pytorch);
  CHECK_THROWS(cache.get_or_plan(L("S(0)R"), Layout::parse(Mesh::parse("8"), {64, 32}, DType::f32, "R"), def));
}

TEST_CASE("plan cache: peek finds without planning, counting or reordering", "[cache]") {
  PlanCache cache(2);
  const auto def = CostModel::default_model();
  CHECK(cache.peek(L("S(0)R"), L("RR"), def) == nullptr);
  const auto a = cache.get_or_plan(L("S(0)R"), L("RR"), def);
  (void)cache.get_or_plan(L("RS(1)"), L("RR"), def);
  const auto before = cache.stats();
  CHECK(cache.peek(L("S(0)R"), L("RR"), def) == a);
  CHECK(cache.peek(L("S(0)R"), L("RR"), CostModel::pytorch()) == nullptr);  // the model is part of the key
  CHECK(cache.peek(L("S(0)R"), Layout::parse(Mesh::parse("8"), {64, 32}, DType::f32, "R"), def) == nullptr);
  CHECK(cache.stats().hits == before.hits);
  CHECK(cache.stats().misses == before.misses);
  (void)cache.get_or_plan(L("S(1)R"), L("RR"), def);  // evicts S(0)R: the peek did not refresh it
  CHECK(cache.peek(L("S(0)R"), L("RR"), def) == nullptr);
  CHECK(cache.peek(L("RS(1)"), L("RR"), def) != nullptr);
}

TEST_CASE("plan cache under concurrent use", "[cache]") {
  PlanCache cache(6);
  const char* pool[] = {"S(0)R", "RS(1)", "S(0)S(1)", "S(1)S(0)", "RR", "S(0)S(0)", "PR", "RP"};
  const auto def = CostModel::default_model();
  constexpr int kThreads = 4, kIters = 150;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        const char* a = pool[(i * 7 + t) % 8];
        const char* b = pool[(i * 3 + 2 * t) % 8];
        if (std::string(b) == "RP" || std::string(b) == "PR") b = "RR";
        auto p = cache.get_or_plan(L(a), L(b), def);
        if (p->src != L(a) || p->dst != L(b)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  const auto s = cache.stats();
  CHECK(s.hits + s.misses == kThreads * kIters);
  CHECK(s.size <= 6);
  CHECK(s.evictions > 0);
}
