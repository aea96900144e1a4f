# CUDA toolkit, cuBLAS, cuFFT and cuDNN (which ships no CMake module: found by hand).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper: sm_90 SASS plus compute_90 PTX
endif()
enable_language(CUDA)
# .cu sources are C++20 like the rest. CMake 3.25 does not know nvcc's C++20 flag, so it
# is taught here (nvcc 12+ accepts -std=c++20).
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT
  PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  ENV CUDNN_ROOT PATH_SUFFIXES lib lib64 lib/x64)
if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
  message(FATAL_ERROR "TESSERA_CUDA is ON but cuDNN was not found (set CUDNN_ROOT), "
    "or configure with -DTESSERA_CUDA=OFF")
endif()
set(_cudnn_version_h "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
file(STRINGS "${_cudnn_version_h}" _cudnn_major REGEX "#define CUDNN_MAJOR [0-9]+")
file(STRINGS "${_cudnn_version_h}" _cudnn_minor REGEX "#define CUDNN_MINOR [0-9]+")
string(REGEX MATCH "[0-9]+" CUDNN_VERSION_MAJOR "${_cudnn_major}")
string(REGEX MATCH "[0-9]+" CUDNN_VERSION_MINOR "${_cudnn_minor}")
if(CUDNN_VERSION_MAJOR LESS 9)
  message(FATAL_ERROR "Tessera needs cuDNN >= 9, found ${CUDNN_VERSION_MAJOR}.${CUDNN_VERSION_MINOR}")
endif()
add_library(tessera_cudnn INTERFACE)
target_include_directories(tessera_cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
target_link_libraries(tessera_cudnn INTERFACE ${CUDNN_LIBRARY})
message(STATUS "Tessera: CUDA ${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, "
  "cuDNN ${CUDNN_VERSION_MAJOR}.${CUDNN_VERSION_MINOR} (${CUDNN_LIBRARY})")
