#include "runtime/comm/mpi_error.hpp"

namespace tessera {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  std::ostringstream os;
  os << "MPI error in " << call << " at " << file << ':' << line << ": "
     << std::string(text, static_cast<std::size_t>(len));
  throw Error(os.str());
}

}  // namespace tessera
