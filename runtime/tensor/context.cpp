#include "runtime/tensor/context.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <sstream>

#include "kernels/device/device.hpp"
#include "kernels/device/host_threads.hpp"
#include "runtime/comm/bounded_failure.hpp"
#include "runtime/comm/mpi_error.hpp"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace tessera {
namespace {
Context* g_current = nullptr;

const char* level_name(int l) {
  switch (l) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  TESSERA_CHECK(end && *end == '\0',
                "environment variable " << name << "='" << v << "' is not an integer");
  return static_cast<int>(x);
}
}  // namespace

bool mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

bool mpi_accepts(MemSpace s) {
  return s == MemSpace::Host || (g_current != nullptr && g_current->cuda_aware());
}

Context::Context(int& argc, char**& argv, const ContextOptions& opts) {
  TESSERA_CHECK(g_current == nullptr, "a tessera::Context already exists in this process");
  int initialized = 0;
  TESSERA_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    // Open MPI 4.1's OMPIO reads and writes wrong cells with its default collective
    // components (see README, MPI-IO): ROMIO unless the user chose an io component.
    // Read by Open MPI at MPI_Init; other MPIs ignore it.
    setenv("OMPI_MCA_io", "^ompio", 0);
    TESSERA_MPI(MPI_Init_thread(&argc, &argv, opts.thread_level, &provided_));
    owns_mpi_ = true;
  } else {
    TESSERA_MPI(MPI_Query_thread(&provided_));
  }
  if (provided_ < opts.thread_level) {
    std::ostringstream os;
    os << "MPI provides thread level " << level_name(provided_) << ", Tessera needs "
       << level_name(opts.thread_level);
    if (owns_mpi_) MPI_Finalize();
    throw Error(os.str());
  }
  try {
    start(opts);
  } catch (const std::exception& e) {
    // A check that failed on some ranks (a bad TESSERA_DEVICE): release what was made and
    // meet the others at the end exchange, so that where every rank failed alike they all
    // finalize and throw, and one that failed alone ends the job within the deadline.
    finish(std::string("tessera::Context could not start on this rank (") + e.what() + ")");
    throw;
  }
  g_current = this;
}

void Context::start(const ContextOptions& opts) {
  TESSERA_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world_));
  TESSERA_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &end_));
  TESSERA_MPI(MPI_Comm_rank(world_, &rank_));
  TESSERA_MPI(MPI_Comm_size(world_, &size_));
  // Node-local rank: ranks sharing memory are on one node.
  MPI_Comm node = MPI_COMM_NULL;
  TESSERA_MPI(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  TESSERA_MPI(MPI_Comm_rank(node, &local_rank_));
  TESSERA_MPI(MPI_Comm_size(node, &local_size_));
  TESSERA_MPI(MPI_Comm_free(&node));

  // Host threads: the caller's, OMP_NUM_THREADS, or this rank's share of its processors.
  if (opts.threads) {
    kernels::set_host_threads(*opts.threads);
  } else if (!std::getenv("OMP_NUM_THREADS")) {
    kernels::set_host_threads(node_share_threads());
  }
  threads_ = kernels::host_threads();

  // One GPU per rank; CUDA_VISIBLE_DEVICES is honoured by the CUDA runtime itself.
  const int ndev = device::count();
  std::optional<int> dev = opts.device ? opts.device : env_int("TESSERA_DEVICE");
  if (ndev > 0) {
    device_ = dev ? *dev : local_rank_ % ndev;
    TESSERA_CHECK(device_ >= 0 && device_ < ndev,
                  "device " << device_ << " requested, " << ndev << " visible");
    device::select(device_);
  }
  std::optional<int> aware = opts.cuda_aware ? std::optional<int>(*opts.cuda_aware ? 1 : 0)
                                             : env_int("TESSERA_CUDA_AWARE");
  cuda_aware_ = aware ? *aware != 0 : mpi_is_cuda_aware();
}

Context::~Context() {
  g_current = nullptr;
  std::string error;
  if (std::uncaught_exceptions() > 0) {  // built inside the try block an exception leaves
    const std::string& what = last_error_message();
    error = "an exception left the scope of tessera::Context on this rank (" +
            (what.empty() ? std::string("not a tessera::Error") : what) + ")";
  }
  finish(error);
}

void Context::finish(const std::string& error) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (end_ != MPI_COMM_NULL) {
    // MPI_Finalize waits for every rank: a rank that failed alone would wait there for
    // ranks that wait for it. The end exchange bounds that (failure::end_of_context).
    try {
      failure::end_of_context(end_, error);
    } catch (const std::exception&) {  // an MPI error: finalize as before
    }
    MPI_Comm_free(&end_);
  }
  if (world_ != MPI_COMM_NULL) MPI_Comm_free(&world_);
  if (owns_mpi_) MPI_Finalize();
}

int Context::node_share_threads() const {
  return std::max(1, kernels::host_processors() / local_size_);
}

Context& Context::current() {
  TESSERA_CHECK(g_current != nullptr, "no tessera::Context: create one at the start of main");
  return *g_current;
}

std::string Context::describe() const {
  std::ostringstream os;
  os << "ranks=" << size_ << " local_ranks=" << local_size_ << " threads=" << threads_
     << " thread_level=" << level_name(provided_)
     << " cuda=" << (device::built_with_cuda() ? "built" : "off") << " device=" << device_
     << " cuda_aware_mpi=" << (cuda_aware_ ? "yes" : "no");
  return os.str();
}

}  // namespace tessera
