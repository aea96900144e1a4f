// Outputs (io/output_file.hpp) never destroy what the user has: written under a temporary
// name of the job's own, created exclusively (a link placed there is not followed), renamed
// into place when complete; temporaries of ended processes of the host are cleared; two jobs
// writing one path each leave a whole file of their own, and adding to one another job is
// adding to is refused; an output that is empty, a folder, a link or a FIFO, or in a missing
// folder, is refused with the target untouched.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/output_file.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {
int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
// Collective: a file holding `tag` as the root attribute "writer", committed to `path`.
void write_tagged(const std::string& path, MPI_Comm comm, std::int64_t tag) {
  io::NewFile out(path, comm);
  MPI_CHECK(out.temp().rfind(path + ".tmp.", 0) == 0 && fs::exists(out.temp()));
  out.file().set_attr("/", "writer", tag);
  out.commit();
}
std::int64_t tag_of(const std::string& path, MPI_Comm comm) {
  const io::File f = io::File::open(path, comm);
  return static_cast<std::int64_t>(f.attr_doubles("/", "writer").at(0));
}
}  // namespace

TEST_CASE("an output is written under a temporary of its own and renamed when complete",
          "[io][output]") {
  const std::string path = test::temp_file(MPI_COMM_WORLD, "out");
  write_tagged(path, MPI_COMM_WORLD, 7);
  MPI_CHECK(tag_of(path, MPI_COMM_WORLD) == 7 && !test::temp_output_left(path));
  // Left without commit (an error): the temporary goes, the file before stays.
  {
    io::NewFile out(path, MPI_COMM_WORLD);
    out.file().set_attr("/", "writer", std::int64_t{8});
  }
  MPI_CHECK(tag_of(path, MPI_COMM_WORLD) == 7 && !test::temp_output_left(path));
  if (rank_of(MPI_COMM_WORLD) == 0) fs::remove(path);
}

TEST_CASE("temporaries of ended processes of this host are removed, others' kept", "[io][output]") {
  const std::string path = test::temp_file(MPI_COMM_WORLD, "stale");
  const std::string mine = io::temp_path(path, MPI_COMM_WORLD);  // PATH.tmp.HOST.PID
  const std::string host_dot = mine.substr(0, mine.rfind('.') + 1);
  const std::string ended = host_dot + "999999999", other_host = path + ".tmp.elsewhere.1";
  if (rank_of(MPI_COMM_WORLD) == 0)
    for (const std::string& p : {ended, other_host, mine}) std::ofstream(p) << "stale\n";
  MPI_Barrier(MPI_COMM_WORLD);
  write_tagged(path, MPI_COMM_WORLD, 3);  // also over a stale one of its own number
  MPI_CHECK(tag_of(path, MPI_COMM_WORLD) == 3 && !fs::exists(ended) && !fs::exists(mine) &&
            fs::exists(other_host));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_of(MPI_COMM_WORLD) == 0) fs::remove(other_host), fs::remove(path);
}

TEST_CASE("adding to an output another job is adding to is refused", "[io][output]") {
  // Each job adds to a copy and renames it into place: at once, the last rename would drop
  // the other's addition. The first holds the file's lock from the copy to the rename.
  const std::string path = test::temp_file(MPI_COMM_WORLD, "add");
  write_tagged(path, MPI_COMM_WORLD, 1);
  int held = -1;
  if (rank_of(MPI_COMM_WORLD) == 0) {  // the other job, holding its lock
    held = open(path.c_str(), O_RDONLY);
    flock(held, LOCK_EX);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_CHECK_ERROR(io::NewFile(path, MPI_COMM_WORLD, io::NewFile::Start::CopyOfPath),
                  "is being added to by another job");
  MPI_Barrier(MPI_COMM_WORLD);
  if (held >= 0) close(held);
  {  // once it is done, adding goes on
    io::NewFile out(path, MPI_COMM_WORLD, io::NewFile::Start::CopyOfPath);
    out.file().set_attr("/", "second", std::int64_t{2});
    out.commit();
  }
  MPI_CHECK(tag_of(path, MPI_COMM_WORLD) == 1 && !test::temp_output_left(path));
  if (rank_of(MPI_COMM_WORLD) == 0) fs::remove(path);
}

TEST_CASE("two jobs writing one output each rename a whole file of their own", "[io][output]") {
  // Each rank is a job of its own (its own communicator, host and process).
  MPI_Comm self = MPI_COMM_SELF;
  const std::string path = test::temp_file(MPI_COMM_WORLD, "shared-out");
  const int me = rank_of(MPI_COMM_WORLD);
  io::NewFile out(path, self);
  MPI_Barrier(MPI_COMM_WORLD);  // every job's temporary exists at once
  out.file().set_attr("/", "writer", std::int64_t{me});
  out.commit();
  MPI_Barrier(MPI_COMM_WORLD);
  std::int64_t got = -1;
  if (me == 0) got = tag_of(path, self);
  MPI_Bcast(&got, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_CHECK(got >= 0 && got < size && !test::temp_output_left(path));
  if (me == 0) fs::remove(path);
}

TEST_CASE("a link at the temporary's name is not followed", "[io][output]") {
  // A link left (or planted) under this process's temporary name is removed as stale; the
  // file it points to is never written.
  const std::string path = test::temp_file(MPI_COMM_WORLD, "linked-tmp");
  const std::string precious = path + ".precious";
  const std::string tmp = io::temp_path(path, MPI_COMM_WORLD);
  if (rank_of(MPI_COMM_WORLD) == 0) {
    std::ofstream(precious) << "precious\n";
    fs::create_symlink(fs::path(precious).filename(), tmp);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  write_tagged(path, MPI_COMM_WORLD, 1);
  MPI_CHECK(read_text(precious) == "precious\n" && tag_of(path, MPI_COMM_WORLD) == 1 &&
            !fs::exists(fs::symlink_status(tmp)));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_of(MPI_COMM_WORLD) == 0) fs::remove(path), fs::remove(precious);
}

TEST_CASE("an output that is empty, a folder, a link, a FIFO or in no folder is refused",
          "[io][output]") {
  const std::string base = test::temp_file(MPI_COMM_WORLD, "odd-out");
  const std::string dir = base + ".d", link = base + ".link", target = base + ".target",
                    fifo = base + ".fifo";
  if (rank_of(MPI_COMM_WORLD) == 0) {
    fs::create_directory(dir);
    std::ofstream(target) << "keep\n";
    fs::create_symlink(fs::path(target).filename(), link);
    mkfifo(fifo.c_str(), 0600);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_CHECK_ERROR(write_tagged("", MPI_COMM_WORLD, 1), "the output path is empty");
  MPI_CHECK_ERROR(write_tagged(dir + "/none/out.h5", MPI_COMM_WORLD, 1),
                  "cannot be written: its folder '" + dir + "/none': No such file or directory");
  // A folder that refuses new files though access() allows writing (root on /sys, a
  // read-only mount): named before any work, not as an MPI-IO code at the file's creation.
  MPI_CHECK_ERROR(io::check_output_path(MPI_COMM_WORLD, "/sys/out.h5"),
                  "cannot be written: its folder '/sys'");
  MPI_CHECK_ERROR(write_tagged(dir, MPI_COMM_WORLD, 1), "is a directory");
  MPI_CHECK_ERROR(write_tagged(dir + "/", MPI_COMM_WORLD, 1), "ends in '/': name a file");
  // A file where a folder is named: not the EACCES that access() gives for it.
  MPI_CHECK_ERROR(write_tagged(target + "/out.h5", MPI_COMM_WORLD, 1),
                  "its folder '" + target + "' is not a folder");
  MPI_CHECK_ERROR(write_tagged(target + "/", MPI_COMM_WORLD, 1), "ends in '/'");
  MPI_CHECK_ERROR(write_tagged(link, MPI_COMM_WORLD, 1), "is a symbolic link");
  MPI_CHECK_ERROR(write_tagged(fifo, MPI_COMM_WORLD, 1), "is not a regular file");
  MPI_CHECK_ERROR(io::check_output_path(MPI_COMM_WORLD, fifo), "is not a regular file");
  MPI_CHECK(read_text(target) == "keep\n" && fs::is_symlink(link) &&
            fs::is_fifo(fs::symlink_status(fifo)));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_of(MPI_COMM_WORLD) == 0)
    for (const std::string& p : {dir, link, target, fifo}) fs::remove(p);
}
