// A library program that does not end through failure::conclude: its tessera::Context is
// built inside the try block, so an exception unwinds through the Context's destructor.
// Mode "one": rank 1 fails alone while the other ranks wait for its message (as in a halo
// exchange); the job must end within the failure deadline naming the error, not wait in
// MPI_Finalize for ever. Mode "preinit": the same where the program initialized MPI itself
// before the Context (and finalizes it after). Mode "all": every rank fails alike and ends
// at once, printing only its own catch. Mode "none": the program succeeds. Modes
// "start_one" and "start_all": the Context's constructor fails (TESSERA_DEVICE is not a
// number) on rank 1, or on every rank; it must release MPI and meet the others as above.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "decomp/error.hpp"
#include "runtime/tensor/context.hpp"

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "one";
  const bool preinit = std::strcmp(mode, "preinit") == 0;
  if (preinit) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    mode = "one";
  }
  if (std::strncmp(mode, "start_", 6) == 0) {
    // The rank before MPI_Init, from the launcher: Open MPI's, PMIx's or PMI's variable.
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!world_rank) world_rank = std::getenv("PMIX_RANK");
    if (!world_rank) world_rank = std::getenv("PMI_RANK");
    if (std::strcmp(mode, "start_all") == 0 || (world_rank && std::string(world_rank) == "1"))
      setenv("TESSERA_DEVICE", "abc", 1);
    mode = std::strcmp(mode, "start_all") == 0 ? "all" : "one";
  }
  int rc = 0;
  try {
    tessera::Context ctx(argc, argv);
    const bool fail =
        std::strcmp(mode, "all") == 0 || (std::strcmp(mode, "one") == 0 && ctx.rank() == 1);
    if (fail) throw tessera::Error("injected failure on rank " + std::to_string(ctx.rank()));
    if (std::strcmp(mode, "one") == 0) {
      int x = 0;  // never sent: rank 1 has failed
      MPI_Recv(&x, 1, MPI_INT, 1, 0, ctx.world(), MPI_STATUS_IGNORE);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "caught: %s\n", e.what());
    rc = 1;
  }
  if (preinit) MPI_Finalize();
  return rc;
}
