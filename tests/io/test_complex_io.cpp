// Complex tensors through parallel HDF5: a complex64 and a complex128 ShardTensor written
// sharded and read back (another decomposition) bit for bit; the file type is h5py's
// compound {r, i} (checked with h5dump), which reads back as the complex DType; a complex
// dataset asked for as float64 is refused naming both types.
#include <complex>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "io/file.hpp"
#include "io/sharded.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"

using namespace tessera;

namespace {
std::string tmp_path(const std::string& name) {
  const char* t = std::getenv("TESSERA_TEST_TMPDIR");
  const std::string d =
      std::string(t ? t : "/tmp") + "/complex-io-np" + std::to_string(test::world_size());
  if (test::world_rank() == 0) std::filesystem::create_directories(d);
  MPI_Barrier(MPI_COMM_WORLD);
  return d + "/" + name;
}

template <class T>
Tensor random_complex(const std::vector<Index>& shape, DType dt) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t = Tensor::empty(shape, dt);
  for (Index i = 0; i < t.numel(); ++i)
    t.data<std::complex<T>>()[i] = std::complex<T>(static_cast<T>(u(rng)), static_cast<T>(u(rng)));
  return t;
}
}  // namespace

TEST_CASE("complex64/complex128 round trip through sharded HDF5 as h5py's compound") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape{3, 5, 7};
  const std::string path = tmp_path("complex.h5");
  const Tensor c64 = random_complex<float>(shape, DType::c64);
  const Tensor c128 = random_complex<double>(shape, DType::c128);
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    io::write_sharded(f, "/c64",
                      ShardTensor::scatter(mesh, c64, {Shard(0), Replicate(), Replicate()}));
    io::write_sharded(f, "/c128",
                      ShardTensor::scatter(mesh, c128, {Replicate(), Shard(0), Replicate()}));
    f.close();
  }
  io::File f = io::File::open(path, MPI_COMM_WORLD);
  MPI_CHECK(f.info("/c64").dtype == DType::c64);
  MPI_CHECK(f.info("/c128").type_name == "complex128");
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0)}, mesh);
  MPI_CHECK(test::same(io::read_sharded(f, "/c64", mesh, spec, DType::c64).gather_all(), c64));
  MPI_CHECK(test::same(io::read_sharded(f, "/c128", mesh, spec, DType::c128).gather_all(), c128));
  bool refused = false;
  try {
    io::read_sharded(f, "/c128", mesh, spec, DType::f64);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("holds complex128, expected float64") != std::string::npos;
  }
  MPI_CHECK(refused);
  f.close();
  if (test::world_rank() == 0) {
    // h5py's layout: a compound of two native floats named r and i.
    const std::string cmd = std::string(TESSERA_H5DUMP) + " -H -d /c128 " + path;
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p.get())) out += buf;
    CHECK(out.find("H5T_COMPOUND") != std::string::npos);
    CHECK(out.find("\"r\"") != std::string::npos);
    CHECK(out.find("\"i\"") != std::string::npos);
  }
}
