// GPU clusters for SimGrid's SMPI, as a platform plugin (`smpirun -platform libdtensor_platform.so`):
// the virtual cluster of docs/virtual-cluster.md. scripts/smpi-run.sh sets the environment below,
// writes the matching hostfile and runs smpirun; read platforms/README.md for the model.
//
//   DTENSOR_PLATFORM  dgx-h100 | dgx-b200 | pcie   (the kinds below)
//   DTENSOR_NODES     nodes (1 to 4096); ranks = nodes x gpus per node
//   DTENSOR_POD       nodes under one leaf switch of the fat-tree (default 16)
//   DTENSOR_OVERSUB   leaf-switch oversubscription, down:up (default 1; 1, 2, 4 or 8 and dividing DTENSOR_POD)
//
// One node: a full zone of its GPUs (hosts `node-N-gpu-G`), each with two split-duplex links: its
// NVLink (or PCIe) port to the node's switch, used by GPU-to-GPU routes in the node, and its own
// NIC (GPUDirect RDMA, one rail per GPU), used by every route off the node. The nodes are the
// leaves of a SimGrid fat-tree: one link per node to its leaf switch (the node's NICs together),
// leaf switches to spine switches with the chosen oversubscription, every fat-tree link of the
// node's aggregate NIC bandwidth. SimGrid shares each link's bandwidth max-min fairly among the
// flows crossing it, so mesh dims whose collectives meet on a NIC or an uplink slow each other.
//
// Numbers: "measured" ones come from published nccl-tests logs (file, row, column named); the
// bandwidth is the bus bandwidth at the largest size, which NCCL defines as what each rank's link
// carries. Latencies are per link; a GPU-to-GPU route crosses two in a node, and four plus two
// per switch level across nodes.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

namespace {

struct Kind {
  const char* name;
  unsigned gpus;        // per node
  double gpu_bw;        // bytes/s per direction, each GPU's port to the node's switch
  double gpu_lat;       // s, per link
  double nic_bw;        // bytes/s per direction, each GPU's NIC
  double nic_lat;       // s
  double fabric_lat;    // s, each fat-tree link
};

// Software overhead per MPI message, charged by SMPI to the rank that posts or completes it (host
// properties smpi/ois, smpi/os, smpi/or: "size:seconds:seconds-per-byte" pieces). SMPI charges
// none unless told, so without these a rank that exchanges with 255 peers pays one latency, as if
// posting a message were free: the fitted profile then saw no per-peer cost, the planner chose
// 255-peer direct exchanges, and SimGrid, whose bookkeeping grows with the messages in flight at
// once, took tens of minutes to simulate them. No log here measures the overhead (the nccl-tests
// logs time whole collectives); these are assumed, at the low end of SimGrid's published
// calibrations of MPI on InfiniBand-class clusters (SimGrid's platform-calibration procedure:
// 0.1-1.8 us to post a send, 1.0-3.3 us to complete a receive of an eager message, none for a
// rendezvous one above the eager limit, where the transfer dominates). The same for every kind:
// it is the host's MPI stack, not the GPU link.
constexpr const char* kIsendOverhead = "0:0.5e-6:0";             // MPI_Isend, every size
constexpr const char* kSendOverhead = "0:0.5e-6:0;65536:0:0";    // MPI_Send, eager sizes only
constexpr const char* kRecvOverhead = "0:1.0e-6:0;65536:0:0";    // MPI_Recv and a received Irecv

const Kind kKinds[] = {
    // DGX-H100-like. NVLink 4 (NVSwitch, non-blocking in the node):
    //   367.25 GB/s: h100x8-nvlink-sendrecv (8x H100 80GB HBM3, xxrjun/nccl-tests-cluster
    //   455de4f), 17179869184-byte row, out-of-place busbw; all_gather on the same node: 361.86
    //   (h100x8-nvlink-all_gather). Vendor: 450 GB/s per direction per GPU (NVIDIA H100 datasheet).
    //   0.45 us: the 8-byte all_reduce on a p5 (8x H100) takes 12.90 us
    //   (h100x8-nvlink-all_reduce-awsbatch-p5, aws-samples 7217859), a ring of 2x7 steps of
    //   two links each: 12.90 / 28.
    // NICs: 8 x ConnectX-7 400 Gb/s per node (vendor, DGX H100 user guide) = 50 GB/s per GPU;
    //   measured 40.4 GB/s per GPU: h100x80-10node-reduce_scatter (10 x 8 H100, xxrjun
    //   455de4f), 17179868160-byte row, busbw 323.40 GB/s per rank over 8 rails = 40.4 each.
    //   1.0 us per NIC link: the 128-byte all_gather on 2 x 4 H100 over InfiniBand takes 16.59 us
    //   (h100x8-2node-ib-all_gather, odissei-benchmarks 6df4cb5), 7 ring steps of which one
    //   crosses the network; a rough split, the logs do not separate NIC from switch latency.
    {"dgx-h100", 8, 367.25e9, 0.45e-6, 40.4e9, 1.0e-6, 0.25e-6},
    // DGX-B200-like. NVLink 5: vendor 900 GB/s per direction per GPU (NVIDIA DGX B200
    //   datasheet: 1.8 TB/s per GPU, both directions); no single-node B200 log: the H100's
    //   measured/vendor ratio (367.25 / 450 = 0.816) applied, 734 GB/s. Latency as the H100's.
    // NICs: 8 x 400 Gb/s per node (vendor); measured 32.5 GB/s per GPU: b200x16-2node-roce-
    //   all_gather (2 x 8 B200 over RoCE, google/dranet 7b7661a), 8589934592-byte row, busbw
    //   260.03 GB/s per rank over 8 rails. (Its 1 KiB row, 280 us, is not a NIC latency: the
    //   run's small sizes are dominated by something the log does not say; not used.)
    {"dgx-b200", 8, 734.0e9, 0.45e-6, 32.5e9, 1.0e-6, 0.25e-6},
    // PCIe node, 8 GPUs, no NVLink. 16.57 GB/s per GPU: a100pciex2-pcie-sendrecv-linear (2x
    //   A100-PCIE-40GB, thomaslie210 83dd17d), 1070596096-byte row, busbw; the L40S pair agrees
    //   (l40sx2-pcie-all_reduce, 134217728-byte row, busbw 15.80). 2.25 us per link: the 8-byte
    //   all_reduce on the L40S pair takes 9.02 us, a ring of 2 steps of two links each.
    //   The GPUs' PCIe switches and the CPUs' root complexes are not modelled (each GPU's port
    //   carries its own traffic only): an optimistic node.
    // NICs: one 200 Gb/s NIC per two GPUs (a common PCIe server; an assumption, no log): 12.5
    //   GB/s per GPU, latency as the DGX's.
    {"pcie", 8, 16.57e9, 2.25e-6, 12.5e9, 1.0e-6, 0.25e-6},
};

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

unsigned env_count(const char* var, unsigned fallback, unsigned lo, unsigned hi) {
  const char* text = std::getenv(var);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < lo || v > hi)
    fail(std::string(var) + "=" + text + " is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<unsigned>(v);
}

const Kind& kind_from_env() {
  const char* name = std::getenv("DTENSOR_PLATFORM");
  if (name == nullptr || *name == '\0') fail("DTENSOR_PLATFORM is not set (dgx-h100, dgx-b200 or pcie)");
  for (const Kind& k : kKinds)
    if (std::strcmp(k.name, name) == 0) return k;
  fail(std::string("DTENSOR_PLATFORM=") + name + " is not dgx-h100, dgx-b200 or pcie");
}

// One node: its GPUs, their links, and the gateway its NICs lead to.
std::pair<simgrid::kernel::routing::NetPoint*, simgrid::kernel::routing::NetPoint*> make_node(const Kind& k, sg4::NetZone* parent,
                                                                                            unsigned long id) {
  const std::string node = "node-" + std::to_string(id);
  sg4::NetZone* zone = sg4::create_full_zone(node);
  zone->set_parent(parent);
  std::vector<sg4::Host*> gpus;
  std::vector<sg4::Link*> port, nic;
  for (unsigned g = 0; g < k.gpus; ++g) {
    const std::string name = node + "-gpu-" + std::to_string(g);
    sg4::Host* host = zone->create_host(name, 1e12);
    host->set_property("smpi/ois", kIsendOverhead);
    host->set_property("smpi/os", kSendOverhead);
    host->set_property("smpi/or", kRecvOverhead);
    gpus.push_back(host);
    port.push_back(zone->create_split_duplex_link(name + "-port", k.gpu_bw)->set_latency(k.gpu_lat)->seal());
    nic.push_back(zone->create_split_duplex_link(name + "-nic", k.nic_bw)->set_latency(k.nic_lat)->seal());
  }
  auto* gateway = zone->create_router(node + "-gw");
  using D = sg4::LinkInRoute::Direction;
  for (unsigned a = 0; a < k.gpus; ++a) {
    for (unsigned b = a + 1; b < k.gpus; ++b)
      zone->add_route(gpus[a]->get_netpoint(), gpus[b]->get_netpoint(), nullptr, nullptr,
                      {{port[a], D::UP}, {port[b], D::DOWN}}, true);
    zone->add_route(gpus[a]->get_netpoint(), gateway, nullptr, nullptr, {{nic[a], D::UP}}, true);
  }
  zone->seal();
  return {zone->get_netpoint(), gateway};
}

}  // namespace

extern "C" void load_platform(const sg4::Engine& /*engine*/);
void load_platform(const sg4::Engine& /*engine*/) {
  const Kind& k = kind_from_env();
  const unsigned nodes = env_count("DTENSOR_NODES", 0, 1, 4096);
  if (nodes == 0) fail("DTENSOR_NODES is not set (the number of nodes)");
  const unsigned pod = env_count("DTENSOR_POD", 16, 1, 4096);
  const unsigned oversub = env_count("DTENSOR_OVERSUB", 1, 1, 8);
  if (pod % oversub != 0)
    fail("DTENSOR_OVERSUB=" + std::to_string(oversub) + " does not divide DTENSOR_POD=" + std::to_string(pod));
  if (nodes > pod && nodes % pod != 0)
    fail("DTENSOR_NODES=" + std::to_string(nodes) + " is not a multiple of DTENSOR_POD=" + std::to_string(pod) +
         " (each leaf switch holds a whole pod)");
  // every fat-tree link carries a node's NICs together
  const double link_bw = k.nic_bw * k.gpus;
  const bool one_switch = nodes <= pod;
  const sg4::FatTreeParams tree = one_switch ? sg4::FatTreeParams(1, {nodes}, {1}, {1})
                                             : sg4::FatTreeParams(2, {pod, nodes / pod}, {1, pod / oversub}, {1, 1});
  auto* root = sg4::create_fatTree_zone(
      std::string("cluster-") + k.name, nullptr, tree,
      sg4::ClusterCallbacks([&k](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
        return make_node(k, zone, id);
      }),
      link_bw, k.fabric_lat, sg4::Link::SharingPolicy::SPLITDUPLEX);
  root->seal();
}
