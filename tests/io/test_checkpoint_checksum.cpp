// Checkpoint checksums: every dataset carries the CRC-32 of its bytes and the root one of
// its attributes and list of entries; a flipped bit in a parameter's data on disk, or an edited
// attribute, is found on load (on every rank, one message) instead of being trained on or predicted
// with; a checkpoint written before checksums loads unchecked.
#include <hdf5.h>
#include <zlib.h>

#include <cstdio>

#include "io/checkpoint.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;

namespace {

io::Checkpoint sample() {
  io::Checkpoint c;
  c.step = 7;
  c.config = "model.type = \"unet\"";
  c.rng = "42 1 2";
  c.model = "unet nd=2";
  Tensor w = Tensor::zeros({3, 4}, DType::f64), m = Tensor::zeros({5}, DType::f32);
  for (Index i = 0; i < 12; ++i) w.data<double>()[i] = 0.25 * static_cast<double>(i) - 1.0;
  for (Index i = 0; i < 5; ++i) m.data<float>()[i] = 1.5f * static_cast<float>(i);
  c.params = {{"conv.weight", w}};
  c.optimizer = {{"conv.weight.exp_avg", m}};
  c.buffers = {{"data.input_mean", Tensor::zeros({1}, DType::f64)}};
  return c;
}

// Rank 0 edits the closed file with plain HDF5 (serial), the others wait.
template <class Edit>
void edit(const std::string& path, Edit e) {
  if (test::world_rank() == 0) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    e(f);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Flips one bit of a contiguous dataset's data in the file's bytes, as a disk would.
void flip_bit(const std::string& path, const char* dset, long byte) {
  haddr_t offset = HADDR_UNDEF;
  edit(path, [&](hid_t f) {
    const hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    offset = H5Dget_offset(d);
    H5Dclose(d);
  });
  if (test::world_rank() == 0) {
    REQUIRE(offset != HADDR_UNDEF);
    std::FILE* fp = std::fopen(path.c_str(), "r+b");
    std::fseek(fp, static_cast<long>(offset) + byte, SEEK_SET);
    const int c = std::fgetc(fp);
    std::fseek(fp, static_cast<long>(offset) + byte, SEEK_SET);
    std::fputc(c ^ 0x10, fp);
    std::fclose(fp);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("checkpoint checksums: stored, independent of the writer, and checked", "[checkpoint]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
  const std::string path = test::temp_file(MPI_COMM_WORLD, "ck-crc");
  const io::Checkpoint c = sample();
  io::save_checkpoint(path, MPI_COMM_WORLD, c);
  // The stored value is zlib's CRC-32 of the data's bytes, as any tool computes it.
  edit(path, [&](hid_t f) {
    std::int64_t crc = 0;
    const hid_t a = H5Aopen_by_name(f, "params/conv.weight", "crc32", H5P_DEFAULT, H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT64, &crc);
    H5Aclose(a);
    const Tensor& w = c.params[0].tensor;
    CHECK(crc == static_cast<std::int64_t>(
                     crc32(0L, static_cast<const Bytef*>(w.raw()), static_cast<uInt>(w.nbytes()))));
  });
  // Each check both as a whole load and streamed (entries read again when used, each checked
  // as the load reads it once).
  const io::CheckpointRead read = GENERATE(io::CheckpointRead::Whole, io::CheckpointRead::Streamed);
  const io::Checkpoint back =
      io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read);
  MPI_CHECK(back.step == 7 && back.rng == c.rng && back.params.size() == 1);
  if (read == io::CheckpointRead::Streamed) {
    // Read when used, from the file the entries keep open: the values as saved.
    MPI_CHECK(!back.params[0].tensor.defined() && back.params[0].defined());
    MPI_CHECK(back.params[0].shape() == std::vector<Index>({3, 4}));
    const Tensor w = back.params[0].value(), m = back.optimizer[0].value();
    for (Index i = 0; i < 12; ++i)
      MPI_CHECK(w.data<double>()[i] == c.params[0].tensor.data<double>()[i]);
    MPI_CHECK(m.dtype() == DType::f32 && m.data<float>()[4] == 6.0f);
  }

  SECTION("a bit flipped in a parameter's data is found") {
    flip_bit(path, "params/conv.weight", 8 * 5 + 3);
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "is damaged: /params/conv.weight does not match its checksum");
  }
  SECTION("and in optimizer state") {
    flip_bit(path, "optimizer/conv.weight.exp_avg", 2);
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "/optimizer/conv.weight.exp_avg does not match its checksum");
  }
  SECTION("the model alone: optimizer state listed and checked by name, its data unread") {
    const io::Checkpoint model =
        io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::Model);
    MPI_CHECK(model.optimizer.empty() && model.params.size() == 1 && model.buffers.size() == 1);
    for (Index i = 0; i < 12; ++i)
      MPI_CHECK(model.params[0].tensor.data<double>()[i] == c.params[0].tensor.data<double>()[i]);
    // Streamed (as tessera-infer loads it): the same values, read when used.
    const io::Checkpoint streamed = io::load_checkpoint(
        path, MPI_COMM_WORLD, io::CheckpointParts::Model, io::CheckpointRead::Streamed);
    MPI_CHECK(streamed.optimizer.empty() && streamed.params.size() == 1);
    MPI_CHECK(streamed.params[0].value().data<double>()[11] ==
              c.params[0].tensor.data<double>()[11]);
    // Its data is not read, so a flipped bit there does not stop inference ...
    flip_bit(path, "optimizer/conv.weight.exp_avg", 2);
    bool loaded = true;
    try {
      io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::Model);
    } catch (const Error&) {
      loaded = false;
    }
    MPI_CHECK(loaded);
    // ... but a deleted optimizer entry still fails the root checksum.
    edit(path, [](hid_t f) { H5Ldelete(f, "optimizer/conv.weight.exp_avg", H5P_DEFAULT); });
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::Model),
                    "or its list of entries (one deleted, renamed or reshaped) do not match");
  }
  SECTION("an edited attribute is found") {
    edit(path, [](hid_t f) {
      H5Adelete(f, "rng");
      const hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, H5T_VARIABLE);
      const hid_t space = H5Screate(H5S_SCALAR);
      const hid_t a = H5Acreate2(f, "rng", type, space, H5P_DEFAULT, H5P_DEFAULT);
      const char* v = "43 1 2";
      H5Awrite(a, type, &v);
      H5Aclose(a);
      H5Sclose(space);
      H5Tclose(type);
    });
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "its attributes (step, config, rng, model) or its list of entries");
  }
  SECTION("a deleted entry is found") {
    edit(path, [](hid_t f) { H5Ldelete(f, "buffers/data.input_mean", H5P_DEFAULT); });
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "or its list of entries (one deleted, renamed or reshaped) do not match");
  }
  SECTION("a lost root marker does not turn the check off") {
    flip_bit(path, "params/conv.weight", 1);
    edit(path, [](hid_t f) { H5Adelete(f, "checksum"); });
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "its root attribute 'checksum' is missing");
  }
  SECTION("a dataset without its checksum is refused") {
    edit(path,
         [](hid_t f) { H5Adelete_by_name(f, "buffers/data.input_mean", "crc32", H5P_DEFAULT); });
    MPI_CHECK_ERROR(io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read),
                    "/buffers/data.input_mean has no crc32 attribute");
  }
  SECTION("a checkpoint of before checksums loads unchecked") {
    flip_bit(path, "params/conv.weight", 0);
    edit(path, [](hid_t f) {
      H5Adelete(f, "checksum");
      H5Adelete(f, "crc32");
      for (const char* d :
           {"params/conv.weight", "optimizer/conv.weight.exp_avg", "buffers/data.input_mean"})
        H5Adelete_by_name(f, d, "crc32", H5P_DEFAULT);
    });
    const io::Checkpoint old =
        io::load_checkpoint(path, MPI_COMM_WORLD, io::CheckpointParts::All, read);
    MPI_CHECK(old.params[0].value().data<double>()[0] != c.params[0].tensor.data<double>()[0]);
  }
  test::remove_file(MPI_COMM_WORLD, path);
}
