#include "runtime/comm/axes_comm.hpp"

#include <algorithm>

#include "runtime/comm/mpi_error.hpp"

namespace tessera {

struct AxesComm::Owned {
  MPI_Comm comm = MPI_COMM_NULL;
  ~Owned() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

AxesComm::AxesComm(const Mesh& mesh, std::vector<int> axes) : mesh_(mesh) {
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (int a : axes)
    TESSERA_CHECK(a >= 0 && a < mesh.ndim(),
                  "AxesComm: mesh axis " << a << " out of range for mesh " << mesh.str());
  axes_ = axes;
  if (static_cast<int>(axes.size()) == mesh.ndim()) {
    comm_ = mesh.comm();
  } else if (axes.size() == 1) {
    comm_ = mesh.axis_comm(axes[0]);
  } else {
    // No axes: MPI_Cart_sub gives each rank a communicator of itself.
    std::vector<int> remain(static_cast<std::size_t>(mesh.ndim()), 0);
    for (int a : axes) remain[static_cast<std::size_t>(a)] = 1;
    owned_ = std::make_shared<Owned>();
    TESSERA_MPI(MPI_Cart_sub(mesh.comm(), remain.data(), &owned_->comm));
    comm_ = owned_->comm;
  }
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));
}

}  // namespace tessera
