# Required: MPI, a *parallel* HDF5 (C API), zlib, oneDNN (CPU conv), OpenMP (CPU kernels).
find_package(MPI REQUIRED COMPONENTS C CXX)

set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "Tessera needs a parallel (MPI) build of HDF5, but found a serial one at "
    "'${HDF5_INCLUDE_DIRS}'. On Debian: apt-get install libhdf5-openmpi-dev "
    "(scripts/setup.sh does this), or point HDF5_ROOT / HDF5_C_COMPILER_EXECUTABLE=h5pcc "
    "at a parallel build.")
endif()
if(NOT TARGET hdf5::hdf5)
  message(FATAL_ERROR "FindHDF5 did not define hdf5::hdf5; CMake >= 3.19 is needed")
endif()

# zlib: the CRC-32 of checkpoint datasets (HDF5 depends on it already).
find_package(ZLIB REQUIRED)

# Which MPI is it? The Open MPI launch flags are added only for Open MPI.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
  OUTPUT_VARIABLE _tessera_mpiexec_version ERROR_QUIET)
if(_tessera_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(TESSERA_MPI_IS_OPENMPI ON)
else()
  set(TESSERA_MPI_IS_OPENMPI OFF)
endif()
message(STATUS "Tessera: MPI launcher ${MPIEXEC_EXECUTABLE} (Open MPI: ${TESSERA_MPI_IS_OPENMPI}), "
  "HDF5 ${HDF5_VERSION} parallel")

# oneDNN: the CPU convolution primitives. Found by header and library rather than its
# CMake config, which on Debian demands OpenCL development files for its GPU runtime that
# Tessera does not use (it runs oneDNN on the CPU engine only).
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY dnnl)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "Tessera needs oneDNN: apt-get install libdnnl-dev (scripts/setup.sh does this)")
endif()
add_library(tessera_dnnl INTERFACE)
target_include_directories(tessera_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(tessera_dnnl INTERFACE ${DNNL_LIBRARY})
# OpenMP: CPU kernels that no library provides.
find_package(OpenMP REQUIRED COMPONENTS CXX)
# FFTW: the CPU FFTs (double and single precision, OpenMP threads); FFTW-MPI only as the
# distributed FFT benchmark's baseline.
find_path(FFTW_INCLUDE_DIR fftw3.h)
foreach(lib fftw3 fftw3f fftw3_omp fftw3f_omp fftw3_mpi fftw3f_mpi)
  find_library(FFTW_${lib}_LIBRARY ${lib})
  if(NOT FFTW_${lib}_LIBRARY)
    message(FATAL_ERROR "Tessera needs FFTW (${lib}): apt-get install libfftw3-dev libfftw3-mpi-dev "
      "(scripts/setup.sh does this)")
  endif()
endforeach()
add_library(tessera_fftw INTERFACE)
target_include_directories(tessera_fftw INTERFACE ${FFTW_INCLUDE_DIR})
target_link_libraries(tessera_fftw INTERFACE ${FFTW_fftw3_omp_LIBRARY} ${FFTW_fftw3f_omp_LIBRARY}
  ${FFTW_fftw3_LIBRARY} ${FFTW_fftw3f_LIBRARY})
add_library(tessera_fftw_mpi INTERFACE)
target_link_libraries(tessera_fftw_mpi INTERFACE ${FFTW_fftw3_mpi_LIBRARY}
  ${FFTW_fftw3f_mpi_LIBRARY} tessera_fftw)
# nanoflann: the k-d tree of the exact neighbour queries (header only).
find_path(NANOFLANN_INCLUDE_DIR nanoflann.hpp)
if(NOT NANOFLANN_INCLUDE_DIR)
  message(FATAL_ERROR "Tessera needs nanoflann: apt-get install libnanoflann-dev (scripts/setup.sh does this)")
endif()
