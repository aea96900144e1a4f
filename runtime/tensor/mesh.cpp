#include "runtime/tensor/mesh.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <numeric>
#include <sstream>

#include "decomp/grid_factor.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct Mesh::Impl {
  MPI_Comm cart = MPI_COMM_NULL;
  std::vector<MPI_Comm> axis;
  std::vector<int> dims, coords;
  std::vector<std::string> names;
  int rank = 0, size = 1;
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI already gone: nothing left to free
    for (auto& c : axis)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    if (cart != MPI_COMM_NULL) MPI_Comm_free(&cart);
  }
};

Mesh::Mesh(MPI_Comm comm, const std::vector<int>& dims, const std::vector<std::string>& names) {
  TESSERA_CHECK(comm != MPI_COMM_NULL, "Mesh: the communicator is MPI_COMM_NULL");
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  // Every rank gets the same arguments in correct use; check collectively anyway.
  std::string why;
  const long prod = std::accumulate(dims.begin(), dims.end(), 1L, std::multiplies<long>());
  if (dims.empty()) why = "a mesh needs at least one axis";
  for (int d : dims)
    if (d < 1) why = "mesh axis sizes must be positive";
  if (why.empty() && prod != size) {
    std::ostringstream os;
    os << "mesh of " << prod << " ranks (";
    for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? "x" : "") << dims[i];
    os << ") does not match the " << size << " ranks of the communicator";
    why = os.str();
  }
  if (why.empty() && !names.empty() && names.size() != dims.size())
    why = "mesh has " + std::to_string(dims.size()) + " axes but " + std::to_string(names.size()) +
          " names";
  for (std::size_t i = 0; why.empty() && i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j)
      if (names[i] == names[j]) why = "mesh axis name '" + names[i] + "' used twice";
  std::string axes;
  for (std::size_t i = 0; i < dims.size(); ++i) axes += (i ? "x" : "") + std::to_string(dims[i]);
  for (std::size_t i = 0; i < names.size(); ++i) axes += (i ? "," : " ") + names[i];
  collective_check(comm, why.empty(), why, "Mesh", "the axes", axes);

  impl_ = std::make_shared<Impl>();
  Impl& m = *impl_;
  m.dims = dims;
  m.names = names;
  if (m.names.empty())
    for (std::size_t i = 0; i < dims.size(); ++i)
      m.names.push_back(i == 0 ? "domain" : "axis" + std::to_string(i));
  std::vector<int> periods(dims.size(), 0);
  TESSERA_MPI(MPI_Cart_create(comm, static_cast<int>(dims.size()), dims.data(), periods.data(),
                              /*reorder=*/0, &m.cart));
  TESSERA_MPI(MPI_Comm_rank(m.cart, &m.rank));
  TESSERA_MPI(MPI_Comm_size(m.cart, &m.size));
  m.coords.assign(dims.size(), 0);
  TESSERA_MPI(MPI_Cart_coords(m.cart, m.rank, static_cast<int>(dims.size()), m.coords.data()));
  for (std::size_t a = 0; a < dims.size(); ++a) {
    std::vector<int> remain(dims.size(), 0);
    remain[a] = 1;
    MPI_Comm sub = MPI_COMM_NULL;
    TESSERA_MPI(MPI_Cart_sub(m.cart, remain.data(), &sub));
    m.axis.push_back(sub);
  }
}

Mesh Mesh::line(MPI_Comm comm, const std::string& name) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  return Mesh(comm, {size}, {name});
}

Mesh Mesh::for_grid(MPI_Comm comm, const std::vector<Index>& shape,
                    const std::vector<std::string>& names) {
  for (const Index e : shape)
    TESSERA_CHECK(e >= 0, "Mesh::for_grid: negative extent in grid " << shape_str(shape));
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  return Mesh(comm, min_halo_traffic_grid(size, shape), names);
}

namespace {
std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (const char ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  return true;
}
}  // namespace

Mesh Mesh::parse(MPI_Comm comm, const std::string& spec) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  if (trimmed(spec).empty() || trimmed(spec) == "auto") return line(comm);
  std::vector<int> dims;
  std::vector<std::string> names;
  std::string why;
  int free_axis = -1;
  // The product of the given sizes, held just past the int range once it gets there.
  constexpr long long kPastInt = static_cast<long long>(std::numeric_limits<int>::max()) + 1;
  long long known = 1;
  std::stringstream ss(spec);
  std::string item;
  // getline yields no item after a last ',': an empty item there as anywhere else.
  if (trimmed(spec).back() == ',') why = "mesh spec '" + spec + "' ends with ',': an empty item";
  while (why.empty() && std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    const std::string name = trimmed(item.substr(0, eq));
    if (eq == std::string::npos || name.empty()) {
      why = "mesh spec item '" + item + "' is not name=size";
      break;
    }
    // Spaces around names and sizes are dropped ("domain=2, data=2"); a name is a word, so
    // a stray character cannot make an axis of its own.
    if (!is_identifier(name)) {
      why = "mesh axis name '" + name + "' is not a word (letters, digits, _)";
      break;
    }
    names.push_back(name);
    const std::string v = trimmed(item.substr(eq + 1));
    int n = 0;
    try {
      std::size_t used = 0;
      n = v == "auto" ? 0 : std::stoi(v, &used);
      if (v != "auto" && used != v.size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      why = "mesh axis '" + name + "' has size '" + v + "', not an integer";
      break;
    }
    if (v != "auto" && n < 1) {  // 0 is not a spelling of auto
      why = "mesh axis '" + name + "' has size " + v + ": a size is >= 1 or 'auto'";
      break;
    }
    if (n == 0) {
      if (free_axis >= 0) why = "mesh spec '" + spec + "' has more than one auto axis";
      free_axis = static_cast<int>(dims.size());
    } else {
      known = std::min<long long>(known * n, kPastInt);
    }
    dims.push_back(n);
  }
  if (why.empty() && free_axis >= 0) {
    if (size % known)
      why = "mesh spec '" + spec + "': " + std::to_string(size) + " ranks not divisible by " +
            (known == kPastInt ? "the product of the sizes given (past the int range)"
                               : std::to_string(known));
    else
      dims[static_cast<std::size_t>(free_axis)] = size / static_cast<int>(known);
  }
  collective_check(comm, why.empty(), why);
  return Mesh(comm, dims, names);
}

const Mesh::Impl& Mesh::impl() const {
  // A default-constructed Mesh (a member not yet assigned) has no ranks to describe.
  TESSERA_CHECK(impl_ != nullptr,
                "Mesh: default-constructed, it spans no ranks (build one with "
                "Mesh(comm, dims), Mesh::line, Mesh::for_grid or Mesh::parse)");
  return *impl_;
}

int Mesh::ndim() const {
  return static_cast<int>(impl().dims.size());
}
const std::vector<int>& Mesh::dims() const {
  return impl().dims;
}
const std::vector<std::string>& Mesh::names() const {
  return impl().names;
}
int Mesh::size() const {
  return impl().size;
}
int Mesh::rank() const {
  return impl().rank;
}
const std::vector<int>& Mesh::coords() const {
  return impl().coords;
}
MPI_Comm Mesh::comm() const {
  return impl().cart;
}

int Mesh::axis(const std::string& name) const {
  for (int a = 0; a < ndim(); ++a)
    if (impl().names[a] == name) return a;
  throw Error("mesh " + str() + " has no axis named '" + name + "'");
}

MPI_Comm Mesh::axis_comm(int axis) const {
  TESSERA_CHECK(axis >= 0 && axis < ndim(), "mesh axis " << axis << " out of range for " << str());
  return impl().axis[axis];
}

std::vector<int> Mesh::coords_of(int rank) const {
  TESSERA_CHECK(rank >= 0 && rank < size(), "rank " << rank << " not in mesh " << str());
  std::vector<int> c(ndim());
  for (int a = ndim() - 1; a >= 0; --a) {
    c[a] = rank % impl().dims[a];
    rank /= impl().dims[a];
  }
  return c;
}

int Mesh::rank_of(const std::vector<int>& c) const {
  TESSERA_CHECK(static_cast<int>(c.size()) == ndim(), "mesh coords of wrong rank");
  int r = 0;
  for (int a = 0; a < ndim(); ++a) {
    TESSERA_CHECK(c[a] >= 0 && c[a] < impl().dims[a], "mesh coordinate out of range");
    r = r * impl().dims[a] + c[a];
  }
  return r;
}

std::string Mesh::str() const {
  if (!impl_) return "(no mesh)";
  std::ostringstream os;
  for (int a = 0; a < ndim(); ++a)
    os << (a ? " x " : "") << impl_->names[a] << '=' << impl_->dims[a];
  return os.str();
}

}  // namespace tessera
