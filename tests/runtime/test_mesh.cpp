#include "decomp/error.hpp"
#include "runtime/tensor/mesh.hpp"
#include "tests/harness/mpi_test.hpp"

using namespace tessera;

TEST_CASE("Mesh coordinates and axis communicators", "[mesh]") {
  const int P = test::world_size();
  for (const auto& dims :
       {std::vector<int>{P}, std::vector<int>{1, P}, std::vector<int>{P, 1, 1}}) {
    Mesh m(MPI_COMM_WORLD, dims);
    MPI_REQUIRE(m.size() == P);
    MPI_REQUIRE(m.rank_of(m.coords()) == m.rank());
    MPI_REQUIRE(m.coords_of(m.rank()) == m.coords());
    bool ok = true;
    for (int a = 0; a < m.ndim(); ++a) {
      int r = -1, s = 0;
      MPI_Comm_rank(m.axis_comm(a), &r);
      MPI_Comm_size(m.axis_comm(a), &s);
      ok = ok && r == m.coords()[a] && s == m.dim(a);
      // Members of an axis communicator agree on every other coordinate.
      std::vector<int> all(static_cast<std::size_t>(s) * m.ndim());
      MPI_Allgather(m.coords().data(), m.ndim(), MPI_INT, all.data(), m.ndim(), MPI_INT,
                    m.axis_comm(a));
      for (int k = 0; k < s; ++k)
        for (int b = 0; b < m.ndim(); ++b)
          ok = ok && (b == a ? all[k * m.ndim() + b] == k : all[k * m.ndim() + b] == m.coords()[b]);
    }
    MPI_REQUIRE(ok);
  }
}

TEST_CASE("Mesh parse, names and for_grid", "[mesh]") {
  const int P = test::world_size();
  Mesh m = Mesh::parse(MPI_COMM_WORLD, "domain=auto,data=1");
  MPI_REQUIRE(m.dims() == (std::vector<int>{P, 1}));
  MPI_REQUIRE(m.axis("data") == 1);
  MPI_REQUIRE(m.str() == "domain=" + std::to_string(P) + " x data=1");
  Mesh g = Mesh::for_grid(MPI_COMM_WORLD, {64, 64, 64});
  int prod = 1;
  for (int d : g.dims()) prod *= d;
  MPI_REQUIRE(prod == P);
  MPI_REQUIRE(g.ndim() == 3);
}

TEST_CASE("A mesh that does not match the rank count fails on every rank", "[mesh]") {
  const int P = test::world_size();
  bool threw = false;
  std::string msg;
  try {
    Mesh m(MPI_COMM_WORLD, {P + 1});
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  MPI_REQUIRE(threw);
  MPI_REQUIRE(msg.find("does not match the " + std::to_string(P) + " ranks") != std::string::npos);
  threw = false;
  try {
    Mesh::parse(MPI_COMM_WORLD, "domain=x");
  } catch (const Error& e) {
    threw = std::string(e.what()).find("not an integer") != std::string::npos;
  }
  MPI_REQUIRE(threw);
  threw = false;
  try {
    Mesh m = Mesh::parse(MPI_COMM_WORLD, "domain=auto");
    (void)m.axis("data");
  } catch (const Error& e) {
    threw = std::string(e.what()).find("no axis named 'data'") != std::string::npos;
  }
  MPI_REQUIRE(threw);
}
