// Sharded HDF5 I/O: N-rank writes read back at M ranks exactly, halo reads equal the
// halo exchange, point ranges, collective-mode reports, h5dump reading our files, and
// every bad input failing on every rank with the file and dataset named.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <hdf5.h>

#include "decomp/grid_factor.hpp"
#include "io/checkpoint.hpp"
#include "io/schema.hpp"
#include "io/transfer.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;

namespace {

// A random spec of `shape` on `mesh`: dim d sharded over axis d (skipping "data"
// axes), balanced or random uneven sizes with empty shards.
ShardSpec random_spec(std::mt19937& rng, const Mesh& mesh, const std::vector<Index>& shape) {
  std::vector<Placement> dims(shape.size(), Replicate());
  std::vector<std::vector<Index>> sizes(shape.size());
  for (int a = 0; a < mesh.ndim() && a < static_cast<int>(shape.size()); ++a) {
    if (mesh.names()[static_cast<std::size_t>(a)] == "data") continue;
    dims[static_cast<std::size_t>(a)] = Shard(a);
    if (rng() % 2)
      sizes[static_cast<std::size_t>(a)] = test::random_sizes(rng, shape[a], mesh.dim(a));
  }
  return ShardSpec(shape, dims, mesh, {}, sizes);
}

bool equals_reference_box(const Tensor& got, const Tensor& ref, const Box& box) {
  return test::same(got, box.empty() ? Tensor::empty(box.shape(), ref.dtype()) : ref.view(box));
}

}  // namespace

TEST_CASE("A tensor written at N ranks reads back exactly at M ranks", "[io]") {
  const int P = test::world_size();
  std::mt19937 rng(5);
  int pairs = 0;
  for (int N = 1; N <= P; ++N) {
    for (int M = 1; M <= P; ++M) {
      for (DType dt : {DType::f32, DType::f64}) {
        const std::vector<Index> shape = {1 + Index(rng() % 3), 1 + Index(rng() % 2),
                                          1 + Index(rng() % 9), 1 + Index(rng() % 9)};
        const std::uint32_t seed_w = rng(), seed_r = rng();
        const bool contiguous = rng() % 3 == 0;
        const std::string path = test::temp_file(MPI_COMM_WORLD, "roundtrip");
        const Tensor ref = test::reference(shape, dt, N * 10 + M);
        bool ok = true;
        MPI_Comm wc = test::first_ranks(MPI_COMM_WORLD, N);
        if (wc != MPI_COMM_NULL) {
          std::mt19937 r(seed_w);
          const Mesh mesh = test::test_meshes(wc)[r() % 3];
          const ShardSpec spec = random_spec(r, mesh, shape);
          const ShardTensor st =
              ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
          io::File f = io::File::create(path, wc);
          io::WriteOptions wo;
          if (contiguous) wo.chunk = {0};
          io::write_sharded(f, "/fields/u", st, wo);
          const io::DatasetInfo in = f.info("/fields/u");
          ok = ok && in.shape == shape && in.dtype == dt && in.chunk.empty() == contiguous;
          f.close();
          MPI_Comm_free(&wc);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Comm rc = test::first_ranks(MPI_COMM_WORLD, M);
        if (rc != MPI_COMM_NULL) {
          std::mt19937 r(seed_r);
          const Mesh mesh = test::test_meshes(rc)[r() % 3];
          const ShardSpec spec = random_spec(r, mesh, shape);
          io::File f = io::File::open(path, rc);
          io::TransferReport rep;
          const ShardTensor got = io::read_sharded(f, "/fields/u", mesh, spec, dt, {}, &rep);
          ok = ok && equals_reference_box(got.local(), ref, got.local_box()) && rep.collective;
          // And the whole tensor, gathered, is the reference.
          const Tensor all = got.gather_all();
          ok = ok && test::same(all, ref);
          f.close();
          MPI_Comm_free(&rc);
        }
        INFO("N=" << N << " M=" << M << " " << name_of(dt) << " shape " << shape_str(shape)
                  << (contiguous ? " contiguous" : " chunked"));
        MPI_REQUIRE(ok);
        test::remove_file(MPI_COMM_WORLD, path);
        ++pairs;
      }
    }
  }
  MPI_REQUIRE(pairs == 2 * P * P);
}

TEST_CASE("Scalar (0-d) and empty datasets round-trip, in files and checkpoints", "[io]") {
  // A 0-d box also spells "no part of the dataset", so a scalar was written as nothing (its
  // checksum taken from the value) and read as whatever the buffer held; a dataset of no
  // elements has no storage address and its transfer failed with HDF5's "addr overflow".
  const Mesh line = Mesh::line(MPI_COMM_WORLD);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "scalar");
  Tensor scalar = Tensor::empty({}, DType::f64);
  scalar.data<double>()[0] = 3.5;
  const Tensor empty = Tensor::zeros({0, 5}, DType::f32);
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    f.create_dataset("/s", {}, DType::f64);
    io::write_box(f, "/s", Box::from_shape({}), scalar, Box::from_shape({}));
    io::write_sharded(f, "/e", ShardTensor::scatter(line, empty, {Shard(0), Replicate()}));
    f.close();
  }
  {
    io::File f = io::File::open(path, MPI_COMM_WORLD);
    const Tensor s = io::read_slab(f, "/s", Box::from_shape({}), DType::f64);
    MPI_CHECK(s.ndim() == 0 && s.data<double>()[0] == 3.5);
    const ShardTensor e = io::read_sharded(
        f, "/e", line, ShardSpec({0, 5}, {Shard(0), Replicate()}, line), DType::f32);
    MPI_CHECK(e.global_shape() == std::vector<Index>({0, 5}));
    f.close();
  }
  // A scalar as h5py writes one (an H5S_SCALAR dataspace), read on every rank.
  if (test::world_rank() == 0) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t d = H5Dcreate2(file, "/h5py_scalar", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    const double v = -2.25;
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
    H5Dclose(d), H5Sclose(space), H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    io::File f = io::File::open(path, MPI_COMM_WORLD);
    MPI_CHECK(io::read_slab(f, "/h5py_scalar", Box::from_shape({}), DType::f64).data<double>()[0] ==
              -2.25);
    f.close();
  }
  test::remove_file(MPI_COMM_WORLD, path);
  // Checkpoints: a scalar and an empty parameter load back as saved (the scalar's checksum
  // held the value it was not written with: "damaged" on load).
  io::Checkpoint c;
  c.step = 3;
  c.params = {{"temperature", scalar}, {"none", Tensor::zeros({0}, DType::f32)}};
  const std::string ck = test::temp_file(MPI_COMM_WORLD, "scalar_ckpt");
  io::save_checkpoint(ck, MPI_COMM_WORLD, c);
  const io::Checkpoint back = io::load_checkpoint(ck, MPI_COMM_WORLD);
  std::map<std::string, Tensor> by_name;
  for (const NamedTensor& p : back.params) by_name[p.name] = p.tensor;
  MPI_REQUIRE(by_name.size() == 2 && by_name.count("temperature") && by_name.count("none"));
  MPI_CHECK(by_name["temperature"].ndim() == 0 && by_name["temperature"].data<double>()[0] == 3.5);
  MPI_CHECK(by_name["none"].shape() == std::vector<Index>({0}));
  test::remove_file(MPI_COMM_WORLD, ck);
}

TEST_CASE("Checkpoint entries made when written, one at a time, checked as made", "[io][made]") {
  // Entries made when written (a sharded tensor gathered whole) are made in file order, each
  // after the previous one was written, and load back like tensors given whole.
  std::vector<std::string> made;
  auto entry = [&](const std::string& name, double v) {
    return NamedTensor{name,
                       Tensor(),
                       [&made, name, v] {
                         made.push_back(name);
                         Tensor t = Tensor::empty({2, 3}, DType::f64);
                         for (Index i = 0; i < 6; ++i)
                           t.data<double>()[i] = v + static_cast<double>(i);
                         return t;
                       },
                       {2, 3},
                       DType::f64};
  };
  io::Checkpoint c;
  c.step = 4;
  c.params = {entry("a", 1), {"b", Tensor::zeros({2}, DType::f32)}};
  c.optimizer = {entry("a.exp_avg", 10)};
  const std::string ck = test::temp_file(MPI_COMM_WORLD, "made_ckpt");
  io::save_checkpoint(ck, MPI_COMM_WORLD, c);
  MPI_CHECK((made == std::vector<std::string>{"a", "a.exp_avg"}));
  const io::Checkpoint back = io::load_checkpoint(ck, MPI_COMM_WORLD);
  MPI_REQUIRE(back.params.size() == 2 && back.optimizer.size() == 1);
  MPI_CHECK(back.params[0].name == "a" && back.params[0].tensor.data<double>()[5] == 6.0);
  MPI_CHECK(back.optimizer[0].tensor.data<double>()[0] == 10.0);
  test::remove_file(MPI_COMM_WORLD, ck);
  // A made entry holding a NaN (on one rank: a replica gone bad): refused on every rank, no
  // file left behind; so is a NaN in a tensor given whole, before anything is written.
  io::Checkpoint bad = c;
  bad.optimizer = {NamedTensor{"a.exp_avg",
                               Tensor(),
                               [] {
                                 Tensor t = Tensor::zeros({2, 3}, DType::f64);
                                 if (test::world_rank() == test::world_size() - 1)
                                   t.data<double>()[4] = std::nan("");
                                 return t;
                               },
                               {2, 3},
                               DType::f64}};
  const std::string nf = test::temp_file(MPI_COMM_WORLD, "nonfinite_ckpt");
  MPI_CHECK_ERROR(io::save_checkpoint(nf, MPI_COMM_WORLD, bad),
                  "not written: non-finite optimizer state a.exp_avg (element 4 = nan)");
  MPI_CHECK(!std::filesystem::exists(nf));
  bad.optimizer.clear();
  bad.params[1].tensor.data<float>()[1] = INFINITY;
  MPI_CHECK_ERROR(io::save_checkpoint(nf, MPI_COMM_WORLD, bad),
                  "not written: non-finite parameter b (element 1 = inf)");
  MPI_CHECK(!std::filesystem::exists(nf));
}

TEST_CASE("Default chunks follow the decomposition", "[io]") {
  const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {12, 10});
  const ShardSpec spec({3, 1, 12, 10}, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
  const std::vector<Index> chunk = io::decomposition_chunk(spec, 4, std::size_t(1) << 30);
  const Index cy = (12 + mesh.dim(0) - 1) / mesh.dim(0), cx = (10 + mesh.dim(1) - 1) / mesh.dim(1);
  MPI_REQUIRE((chunk == std::vector<Index>{3, 1, cy, cx}));
  // A chunk over the byte cap is halved along its outer dims until it fits.
  const auto cap = static_cast<std::size_t>(4 * cy * cx);
  const std::vector<Index> capped = io::decomposition_chunk(spec, 4, cap);
  MPI_REQUIRE((capped == std::vector<Index>{1, 1, cy, cx}));
  const std::vector<Index> tiny = io::decomposition_chunk(spec, 4, 4);
  MPI_REQUIRE((tiny == std::vector<Index>{1, 1, 1, 1}));
  // HDF5 refuses chunks of 4 GiB or more: one rank's 33000^2 float32 sample (4.36 GB) is
  // halved along its largest dim; 400M points x 3 float32 likewise; a fitting one is kept.
  MPI_CHECK((io::chunk_within_hdf5_limit({1, 1, 33000, 33000}, 4) ==
             std::vector<Index>{1, 1, 16500, 33000}));
  MPI_CHECK(
      (io::chunk_within_hdf5_limit({1, 400000000, 3}, 4) == std::vector<Index>{1, 200000000, 3}));
  MPI_CHECK((io::chunk_within_hdf5_limit({1, 1, 32768, 32767}, 4) ==
             std::vector<Index>{1, 1, 32768, 32767}));
  MPI_CHECK((io::chunk_within_hdf5_limit({1, 1, 32768, 32768}, 4) ==
             std::vector<Index>{1, 1, 16384, 32768}));
}

TEST_CASE("A halo read equals what the halo exchange gives", "[io]") {
  std::mt19937 rng(11);
  int checked = 0, wider = 0;
  for (const Mesh& mesh : test::test_meshes(MPI_COMM_WORLD)) {
    for (int trial = 0; trial < 6; ++trial) {
      const DType dt = trial % 2 ? DType::f32 : DType::f64;
      std::vector<Index> shape, left, right;
      for (int d = 0; d < 3; ++d) {
        shape.push_back(1 + Index(rng() % 8));
        left.push_back(Index(rng() % 4));
        right.push_back(Index(rng() % 4));
      }
      const ShardSpec spec = random_spec(rng, mesh, shape);
      const Tensor ref = test::reference(shape, dt, trial);
      const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
      const std::string path = test::temp_file(MPI_COMM_WORLD, "halo");
      io::File f = io::File::create(path, mesh.comm());
      io::write_sharded(f, "/fields/u", st);
      f.close();
      f = io::File::open(path, mesh.comm(), io::Mode::ReadWrite);
      // Open boundaries (zero fill) on even trials; random periodic dims on odd ones.
      std::vector<bool> periodic(3, false);
      if (trial % 2)
        for (int d = 0; d < 3; ++d) periodic[static_cast<std::size_t>(d)] = rng() % 2 == 0;
      // Periodic ghosts may be wider than the extent (up to 3 on extents from 1): they wrap
      // again, in the file read as in the exchange (the read refused them before).
      for (int d = 0; d < 3; ++d)
        wider += periodic[static_cast<std::size_t>(d)] && std::max(left[d], right[d]) > shape[d];
      HaloTensor want = HaloTensor::from_shard(st, left, right);
      HaloOptions ho;
      ho.periodic = periodic;
      HaloExchange ex(mesh, spec, left, right, ho);
      ex.exchange(want);
      // Each memory path: straight into the padded window (MPI derived types), staged
      // through contiguous pieces (tiny pieces here, so ranks make different numbers of
      // calls), and the default.
      for (io::MemoryPath mp :
           {io::MemoryPath::Direct, io::MemoryPath::Staged, io::MemoryPath::Auto}) {
        io::IoOptions o;
        o.memory = mp;
        o.staging_bytes = 64;
        o.periodic = periodic;
        io::TransferReport rep;
        const HaloTensor got = io::read_halo(f, "/fields/u", mesh, spec, left, right, dt, o, &rep);
        INFO("mesh " << mesh.str() << " spec " << spec.str() << " left " << shape_str(left)
                     << " right " << shape_str(right) << " periodic " << periodic[0] << periodic[1]
                     << periodic[2] << " " << name_of(dt) << " memory path " << static_cast<int>(mp)
                     << " calls " << rep.calls);
        MPI_REQUIRE(got.padded_box() == want.padded_box());
        MPI_REQUIRE(test::same(got.padded(), want.padded()));
        MPI_REQUIRE(rep.collective);
        // And back: the interior window of the padded buffer written through the same
        // path reads back as the shard.
        const std::string w = "/fields/w" + std::to_string(static_cast<int>(mp));
        f.create_dataset(w, shape, dt);
        std::vector<Index> neg;
        for (int d = 0; d < 3; ++d) neg.push_back(-got.padded_box().lo[d]);
        io::write_box(f, w, got.interior_box(), got.padded(), shift(got.interior_box(), neg), o);
        const ShardTensor back = io::read_sharded(f, w, mesh, spec, dt);
        MPI_REQUIRE(test::same(back.local(), st.local()));
      }
      f.close();
      test::remove_file(MPI_COMM_WORLD, path);
      ++checked;
    }
  }
  MPI_REQUIRE(checked > 0);
  INFO(wider << " periodic dims with ghosts wider than the extent");
  MPI_REQUIRE(wider > 0);
}

TEST_CASE("Point clouds are read by ranges", "[io]") {
  const int P = test::world_size(), rank = test::world_rank();
  const std::vector<Index> shape = {3, 101, 3};
  const Tensor ref = test::reference(shape, DType::f32, 4);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const ShardSpec spec(shape, {Replicate(), Shard(0), Replicate()}, mesh);
  const ShardTensor st = ShardTensor::scatter(mesh, rank == 0 ? ref : Tensor(), spec);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "points");
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  io::write_sharded(f, io::schema::kCoords, st);
  bool ok = true;
  for (Index n = 0; n < shape[0]; ++n) {
    // Ranges that differ from the write's split: rank r reads the r-th of P+1 pieces,
    // the last rank also the final piece; rank 0 of an odd sample reads nothing.
    auto [b, e] = io::balanced_range(shape[1], P + 1, rank);
    if (rank == P - 1) e = shape[1];
    if (n % 2 == 1 && rank == 0 && P > 1) e = b;
    const Tensor pts = io::read_points(f, io::schema::kCoords, n, b, e);
    ok = ok && pts.shape() == std::vector<Index>{e - b, 3};
    ok = ok && equals_reference_box(pts.reshape({1, e - b, 3}), ref, Box({n, b, 0}, {n + 1, e, 3}));
  }
  f.close();
  MPI_REQUIRE(ok);
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("The transfer report says whether HDF5 stayed collective", "[io]") {
  const std::vector<Index> shape = {2, 1, 6, 5};
  const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {6, 5});
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
  const Tensor ref = test::reference(shape, DType::f32);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "mode");
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  const io::TransferReport w = io::write_sharded(f, "/fields/u", st);
  MPI_REQUIRE(w.collective);
  MPI_REQUIRE(w.cause.empty());
  io::IoOptions indep;
  indep.collective = false;
  io::TransferReport r;
  const ShardTensor got = io::read_sharded(f, "/fields/u", mesh, spec, DType::f32, indep, &r);
  MPI_REQUIRE(!r.collective);
  MPI_REQUIRE(test::has(r.cause, "independent I/O was requested"));
  MPI_REQUIRE(test::same(got.local(), st.local()));
  f.close();
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("h5dump reads a file we wrote and sees the same values", "[io]") {
  const std::vector<Index> shape = {2, 1, 3, 4};
  const Tensor ref = test::reference(shape, DType::f32, 1);
  const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {3, 4});
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "h5dump");
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    io::schema::write_root(f, "test_io");
    io::write_sharded(f, "/fields/u", st);
  }
  bool ok = true;
  std::string why;
  if (test::world_rank() == 0) {
    const std::string out = path + ".txt";
    const std::string cmd = std::string(TESSERA_H5DUMP) + " -d /fields/u -y -w 0 -o " + out + " " +
                            path + " > /dev/null";
    ok = std::system(cmd.c_str()) == 0;
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : text)
      if (c == ',') c = ' ';
    std::istringstream is(text);
    std::vector<double> vals;
    for (double v; is >> v;) vals.push_back(v);
    ok = ok && static_cast<Index>(vals.size()) == ref.numel();
    for (Index i = 0; ok && i < ref.numel(); ++i) ok = vals[i] == ref.data<float>()[i];
    if (!ok) why = "h5dump gave " + std::to_string(vals.size()) + " values: " + text;
    // The schema version attribute, as h5dump shows it.
    const std::string acmd = std::string(TESSERA_H5DUMP) + " -a /tessera_schema_version " + path;
    FILE* p = popen(acmd.c_str(), "r");
    std::string attr;
    char buf[256];
    while (p && fgets(buf, sizeof buf, p)) attr += buf;
    if (p) pclose(p);
    ok = ok && test::has(attr, "(0): 1");
    std::remove(out.c_str());
  }
  INFO(why);
  MPI_REQUIRE(ok);
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("Bad inputs fail on every rank, naming the file and the dataset", "[io][errors]") {
  const int rank = test::world_rank();
  const std::string good = test::temp_file(MPI_COMM_WORLD, "good");
  const std::vector<Index> shape = {2, 1, 8, 6};
  const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {8, 6});
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
  {
    const Tensor ref = test::reference(shape, DType::f64);
    const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
    io::File f = io::File::create(good, MPI_COMM_WORLD);
    io::write_sharded(f, "/fields/u", st);
  }
  auto read = [&](const std::string& path, const std::string& dset, const ShardSpec& s, DType dt) {
    return test::error_of([&] {
      io::File f = io::File::open(path, MPI_COMM_WORLD);
      io::read_sharded(f, dset, mesh, s, dt);
    });
  };
  SECTION("missing file") {
    const std::string e = read(good + ".nope", "/fields/u", spec, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(e, good + ".nope") && test::has(e, "no such file"));
  }
  SECTION("not an HDF5 file") {
    const std::string txt = good + ".txt";
    if (rank == 0) std::ofstream(txt) << "this is not HDF5\n";
    MPI_Barrier(MPI_COMM_WORLD);
    const std::string e = read(txt, "/fields/u", spec, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(e, txt) && test::has(e, "not an HDF5 file"));
    test::remove_file(MPI_COMM_WORLD, txt);
  }
  SECTION("truncated file") {
    const std::string cut = good + ".cut";
    if (rank == 0) {
      std::filesystem::copy_file(good, cut);
      std::filesystem::resize_file(cut, std::filesystem::file_size(good) / 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::string e = read(cut, "/fields/u", spec, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(e, cut) && test::has(e, "truncated"));
    test::remove_file(MPI_COMM_WORLD, cut);
  }
  SECTION("missing dataset") {
    const std::string e = read(good, "/fields/v", spec, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(e, "missing dataset '/fields/v' in '" + good + "'"));
  }
  SECTION("wrong dtype") {
    const std::string e = read(good, "/fields/u", spec, DType::f32);
    INFO(e);
    MPI_REQUIRE(
        test::has(e, "dataset '/fields/u' in '" + good + "' holds float64, expected float32"));
  }
  SECTION("wrong rank") {
    const ShardSpec s3({2, 8, 6}, {Replicate(), Shard(0), Shard(1)}, mesh);
    const std::string e = read(good, "/fields/u", s3, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(e, "'/fields/u' in '" + good + "' has rank 4") &&
                test::has(e, "expected rank 3"));
  }
  SECTION("shape not matching what was asked") {
    const ShardSpec s({2, 1, 8, 7}, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
    const std::string e = read(good, "/fields/u", s, DType::f64);
    INFO(e);
    MPI_REQUIRE(test::has(
        e, "'/fields/u' in '" + good + "' has shape (2, 1, 8, 6), expected (2, 1, 8, 7)"));
  }
  SECTION("a box outside the dataset") {
    const std::string e = test::error_of([&] {
      io::File f = io::File::open(good, MPI_COMM_WORLD);
      io::read_slab(f, "/fields/u", rank == 0 ? Box({0, 0, 0, 0}, {3, 1, 1, 1}) : Box(),
                    DType::f64);
    });
    INFO(e);
    MPI_REQUIRE(test::has(e, "lies outside dataset '/fields/u'"));
  }
  test::remove_file(MPI_COMM_WORLD, good);
}

TEST_CASE("Datasets that fit the disk one by one but not together: the one past it is refused",
          "[io][errors]") {
  // Created datasets take their space as they are written: the check counts the bytes of
  // those created earlier and not yet on disk. Nothing is written here (the file stays
  // sparse).
  const std::string path = test::temp_file(MPI_COMM_WORLD, "room");
  double free_bytes = 0;
  if (test::world_rank() == 0)
    free_bytes = static_cast<double>(
        std::filesystem::space(std::filesystem::path(path).parent_path()).available);
  MPI_Bcast(&free_bytes, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  auto elems = [&](double share) { return static_cast<Index>(share * free_bytes / 8); };
  std::string e;
  {
    io::File f = io::File::create(path, MPI_COMM_WORLD);
    f.create_dataset("/a", {elems(0.3)}, DType::f64);
    f.create_dataset("/b", {elems(0.3)}, DType::f64);  // 0.6 of the free space in all: fits
    e = test::error_of([&] { f.create_dataset("/c", {elems(0.6)}, DType::f64); });
  }
  INFO(e);
  MPI_CHECK(test::has(e, "'/c'") &&
            test::has(e, "with the datasets created before it and not yet written") &&
            test::has(e, "iB free"));
  test::remove_file(MPI_COMM_WORLD, path);
}

namespace {
// As h5py leaves one: an 8x8 float64 dataset /u in chunks of 4x4, fill value 7, of which
// only the chunk at rows 4-7, columns 0-3 was written (values 0..15); rank 0 writes it.
void write_partly(const std::string& path, bool deflate) {
  if (test::world_rank() == 0) {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {8, 8}, chunk[2] = {4, 4};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    if (deflate) H5Pset_deflate(dcpl, 1);
    const double fill = 7.0;
    H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill);
    const hid_t d =
        H5Dcreate2(file, "/u", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    const hsize_t start[2] = {4, 0}, count[2] = {4, 4};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t mspace = H5Screate_simple(2, count, nullptr);
    std::vector<double> v(16);
    for (int i = 0; i < 16; ++i) v[static_cast<std::size_t>(i)] = i;
    H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, space, H5P_DEFAULT, v.data());
    H5Sclose(mspace);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Dclose(d);
    H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
}  // namespace

TEST_CASE("A chunked dataset written only in part reads, unwritten chunks as fill values", "[io]") {
  // A collective MPI-IO read of it failed (MPI_File_set_view: invalid datatype); it is read
  // independently. Filtered (compressed), parallel HDF5 cannot read it: refused, saying so.
  const std::string path = test::temp_file(MPI_COMM_WORLD, "partial");
  const int rank = test::world_rank();
  write_partly(path, false);
  // Each rank reads a band of rows (the last ranks may read none).
  const int n = test::world_size();
  const Index r0 = std::min<Index>(8, 8 * rank / n), r1 = std::min<Index>(8, 8 * (rank + 1) / n);
  {
    const io::File f = io::File::open(path, MPI_COMM_WORLD);
    const Tensor t = io::read_slab(f, "/u", Box({r0, 0}, {r1, 8}), DType::f64);
    bool ok = true;
    for (Index r = r0; r < r1; ++r)
      for (Index c = 0; c < 8; ++c) {
        const double want = r >= 4 && c < 4 ? static_cast<double>((r - 4) * 4 + c) : 7.0;
        ok = ok && t.at<double>({r - r0, c}) == want;
      }
    MPI_CHECK(ok);
  }
  write_partly(path, true);
  {
    const io::File f = io::File::open(path, MPI_COMM_WORLD);
    MPI_CHECK_ERROR(io::read_slab(f, "/u", Box({r0, 0}, {r1, 8}), DType::f64),
                    "is filtered (compressed or checksummed) and only partly written");
  }
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("A file changed in place while read is named; one left alone or replaced is not",
          "[io]") {
  const std::string path = test::temp_file(MPI_COMM_WORLD, "changed");
  write_partly(path, false);
  const bool root = test::world_rank() == 0;
  {
    const io::File f = io::File::open(path, MPI_COMM_WORLD);
    MPI_CHECK(test::error_of([&] { f.check_unchanged(); }).empty());
    // Replaced under its name (a new file renamed over it): the open one is still whole.
    if (root) {
      std::filesystem::copy_file(path, path + ".new");
      std::filesystem::rename(path + ".new", path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_CHECK(test::error_of([&] { f.check_unchanged(); }).empty());
  }
  {
    const io::File f = io::File::open(path, MPI_COMM_WORLD);
    // Written in place (truncated): a reader past the cut would get zeros.
    if (root) std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_CHECK_ERROR(f.check_unchanged(), "changed while it was read (its size went from");
  }
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("String attributes in ASCII or UTF-8, variable or fixed length, read alike", "[io]") {
  // h5py writes a list of bytes as variable-length ASCII, a list of str as UTF-8; HDF5
  // converts between neither.
  const std::string path = test::temp_file(MPI_COMM_WORLD, "strings");
  if (test::world_rank() == 0) {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const char* v[2] = {"p", "qq"};
    const hsize_t n = 2;
    for (H5T_cset_t cset : {H5T_CSET_ASCII, H5T_CSET_UTF8}) {
      const hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, H5T_VARIABLE);
      H5Tset_cset(t, cset);
      const hid_t space = H5Screate_simple(1, &n, nullptr);
      const char* name = cset == H5T_CSET_ASCII ? "ascii" : "utf8";
      const hid_t a = H5Acreate2(file, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, t, v);
      H5Aclose(a);
      H5Sclose(space);
      H5Tclose(t);
    }
    H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    const io::File f = io::File::open(path, MPI_COMM_WORLD);
    const std::vector<std::string> want = {"p", "qq"};
    MPI_CHECK(f.attr_strings("/", "ascii") == want && f.attr_strings("/", "utf8") == want);
  }
  test::remove_file(MPI_COMM_WORLD, path);
}

TEST_CASE("Statistics and the first non-finite value, at any rank count", "[io][schema]") {
  const std::vector<Index> shape = {3, 2, 7, 5};
  std::mt19937 rng(3);
  std::normal_distribution<float> g(1.f, 2.f);
  Tensor ref = Tensor::empty(shape, DType::f32);
  for (Index i = 0; i < ref.numel(); ++i) ref.data<float>()[i] = g(rng);
  const std::vector<Index> bad1 = {1, 1, 3, 2}, bad2 = {2, 0, 0, 0};
  ref.at<float>(bad1) = std::nanf("");
  ref.at<float>(bad2) = INFINITY;
  const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, {7, 5});
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Shard(1)}, mesh);
  const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "stats");
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  io::write_sharded(f, "/fields/u", st);
  const io::schema::ChannelStats s = io::schema::scan(f, "/fields/u", 1);
  // Naive float64 reference over the finite values of each channel.
  bool ok = s.first_bad == bad1 && std::isnan(s.first_bad_value);
  for (Index c = 0; c < 2; ++c) {
    double sum = 0, n = 0, mn = INFINITY, mx = -INFINITY;
    for (Index i = 0; i < ref.numel(); ++i) {
      std::vector<Index> p(4);
      delinearize(Box::from_shape(shape), i, p.data());
      const double v = ref.data<float>()[i];
      if (p[1] != c || !std::isfinite(v)) continue;
      sum += v, n += 1, mn = std::min(mn, v), mx = std::max(mx, v);
    }
    const double mean = sum / n;
    double ss = 0;
    for (Index i = 0; i < ref.numel(); ++i) {
      std::vector<Index> p(4);
      delinearize(Box::from_shape(shape), i, p.data());
      const double v = ref.data<float>()[i];
      if (p[1] == c && std::isfinite(v)) ss += (v - mean) * (v - mean);
    }
    const auto cc = static_cast<std::size_t>(c);
    ok = ok && std::abs(s.mean[cc] - mean) < 1e-12 * (1 + std::abs(mean)) &&
         std::abs(s.std[cc] - std::sqrt(ss / n)) < 1e-12 * std::sqrt(ss / n) && s.min[cc] == mn &&
         s.max[cc] == mx;
  }
  MPI_REQUIRE(ok);
  // validate names the dataset and the first bad index.
  const auto problems = io::schema::validate(f);
  bool named = false;
  for (const auto& p : problems)
    named = named || test::has(p, "dataset '/fields/u' in '" + path +
                                      "': non-finite value nan at index (1, 1, 3, 2)");
  INFO((problems.empty() ? std::string("no problems") : problems[0]));
  MPI_REQUIRE(named);
  f.close();
  test::remove_file(MPI_COMM_WORLD, path);
}

namespace {

// TESSERA_IO_PIECE_BYTES set for a scope (empty: unset), unset after it.
struct PieceBytes {
  explicit PieceBytes(const std::string& v) {
    if (v.empty())
      unsetenv("TESSERA_IO_PIECE_BYTES");
    else
      setenv("TESSERA_IO_PIECE_BYTES", v.c_str(), 1);
  }
  ~PieceBytes() { unsetenv("TESSERA_IO_PIECE_BYTES"); }
  PieceBytes(const PieceBytes&) = delete;
  PieceBytes& operator=(const PieceBytes&) = delete;
};

// `a` (streamed in pieces) against `b` (each rank's share of a sample read whole): counts,
// min, max, mean and the first non-finite value bit for bit, std to 1e-12 relative.
std::string stats_differ(const io::schema::ChannelStats& a, const io::schema::ChannelStats& b) {
  auto bits = [](const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) return false;
    return true;
  };
  if (a.count != b.count || a.finite != b.finite) return "counts";
  if (!bits(a.mean, b.mean)) return "mean";
  if (!bits(a.min, b.min) || !bits(a.max, b.max)) return "min/max";
  if (a.first_bad != b.first_bad) return "first non-finite index";
  if (std::memcmp(&a.first_bad_value, &b.first_bad_value, sizeof(double)) != 0)
    return "first non-finite value";
  if (a.std.size() != b.std.size()) return "std size";
  for (std::size_t c = 0; c < a.std.size(); ++c)
    if (!(std::abs(a.std[c] - b.std[c]) <= 1e-12 * std::abs(b.std[c]))) return "std";
  return "";
}

}  // namespace

TEST_CASE("Statistics streamed in pieces of any size equal the whole-share results",
          "[io][schema]") {
  // Fields split over the ranks along their rows (7 > 5), points along P, a dataset (N, C)
  // read by rank 0 alone, and float64: each scanned with every rank's share of a sample in
  // one piece (the default 64 MiB), then in pieces of 1 value up to more than a share.
  std::mt19937 rng(11);
  std::normal_distribution<double> g(1000.0, 3.0);  // an offset: cancellation would show
  auto random = [&](const std::vector<Index>& shape, DType dt) {
    Tensor t = Tensor::empty(shape, dt);
    for (Index i = 0; i < t.numel(); ++i)
      if (dt == DType::f32)
        t.data<float>()[i] = static_cast<float>(g(rng));
      else
        t.data<double>()[i] = g(rng);
    return t;
  };
  const std::string path = test::temp_file(MPI_COMM_WORLD, "stats-pieces");
  io::File f = io::File::create(path, MPI_COMM_WORLD);
  struct Case {
    std::string dset;
    std::vector<Index> shape;
    DType dt;
    int cdim;
    std::vector<Index> bad;  // a NaN there (empty: none)
  };
  // The NaNs of /fields/b*: with pieces of 20 bytes (a row of 5) at a piece's first and
  // last value, with 12 bytes (pieces [0,3) and [3,5) of a row) at both ends of one too;
  // an Inf after each (later in row-major order) must not be the one reported.
  const std::vector<Case> cases = {
      {"/fields/u", {3, 2, 7, 5}, DType::f32, 1, {}},
      {"/fields/b0", {3, 2, 7, 5}, DType::f32, 1, {1, 1, 3, 0}},
      {"/fields/b1", {3, 2, 7, 5}, DType::f32, 1, {1, 1, 3, 3}},
      {"/fields/b2", {3, 2, 7, 5}, DType::f32, 1, {1, 1, 3, 4}},
      {"/fields/b3", {3, 2, 7, 5}, DType::f32, 1, {0, 0, 0, 0}},
      {"/fields/b4", {3, 2, 7, 5}, DType::f32, 1, {2, 1, 6, 4}},
      {"/fields/w", {2, 3, 9, 4, 3}, DType::f64, 1, {}},
      {"/points/features", {2, 37, 3}, DType::f32, 2, {1, 20, 2}},
      {"/table", {5, 3}, DType::f32, 1, {}},
  };
  for (const Case& c : cases) {
    Tensor ref = random(c.shape, c.dt);  // the same values on every rank (one seed)
    if (!c.bad.empty()) {
      if (c.dt == DType::f32)
        ref.at<float>(c.bad) = std::nanf("");
      else
        ref.at<double>(c.bad) = std::nan("");
      std::vector<Index> inf = c.shape;
      for (Index& x : inf) x -= 1;  // the last value
      if (inf != c.bad && c.dt == DType::f32) ref.at<float>(inf) = INFINITY;
      if (inf != c.bad && c.dt == DType::f64) ref.at<double>(inf) = INFINITY;
    }
    std::vector<Index> spatial(c.shape.begin() + (c.cdim == 1 ? 2 : 1),
                               c.shape.begin() + (c.cdim == 1 ? c.shape.size() : 2));
    if (spatial.empty()) spatial = {c.shape[0]};
    const Mesh mesh = Mesh::for_grid(MPI_COMM_WORLD, spatial);
    std::vector<Placement> dims(c.shape.size(), Replicate());
    if (c.shape.size() > 2)
      for (std::size_t k = 0; k < spatial.size(); ++k)
        dims[c.cdim == 1 ? k + 2 : 1] = Shard(static_cast<int>(k));
    const ShardSpec spec(c.shape, dims, mesh);
    const ShardTensor st = ShardTensor::scatter(mesh, mesh.rank() == 0 ? ref : Tensor(), spec);
    io::write_sharded(f, c.dset, st);
  }
  std::map<std::string, io::schema::ChannelStats> whole;
  std::map<std::string, std::string> whole_problem;
  // The non-finite problem validate's list holds for dset ("" if none).
  auto problem_of = [&](const std::vector<std::string>& problems, const std::string& dset) {
    std::string p;
    for (const std::string& q : problems)
      if (test::has(q, "'" + dset + "'") && test::has(q, "non-finite")) p = q;
    return p;
  };
  {
    const PieceBytes unset("");
    for (const Case& c : cases) whole[c.dset] = io::schema::scan(f, c.dset, c.cdim);
    const auto problems = io::schema::validate(f);
    for (const Case& c : cases) whole_problem[c.dset] = problem_of(problems, c.dset);
  }
  for (const Case& c : cases) {
    INFO(c.dset);
    MPI_REQUIRE(whole[c.dset].first_bad == c.bad);
    MPI_REQUIRE(c.bad.empty() == whole_problem[c.dset].empty());
    if (!c.bad.empty()) MPI_REQUIRE(test::has(whole_problem[c.dset], shape_str(c.bad)));
  }
  for (const char* bytes : {"1", "4", "8", "12", "20", "28", "44", "100", "1000", "1048576"}) {
    const PieceBytes set(bytes);
    for (const Case& c : cases) {
      INFO(c.dset << " in pieces of " << bytes << " bytes");
      const io::schema::ChannelStats s = io::schema::scan(f, c.dset, c.cdim);
      const std::string why = stats_differ(s, whole[c.dset]);
      INFO(why);
      MPI_REQUIRE(why.empty());
      // Pieces larger than a share: one piece, the same bits for std too.
      if (std::string(bytes) == "1048576") MPI_REQUIRE(s.std == whole[c.dset].std);
    }
    const auto problems = io::schema::validate(f);
    for (const Case& c : cases) {
      INFO(c.dset << " validated in pieces of " << bytes << " bytes");
      MPI_REQUIRE(problem_of(problems, c.dset) == whole_problem[c.dset]);
    }
  }
  {
    const PieceBytes bad("64k");
    MPI_CHECK_ERROR(io::schema::scan(f, "/fields/u", 1),
                    "TESSERA_IO_PIECE_BYTES='64k' is not a whole number");
  }
  f.close();
  test::remove_file(MPI_COMM_WORLD, path);
}
