#include "kernels/cuda/cublas_handle.hpp"

#include <map>
#include <mutex>
#include <string>

#include "decomp/error.hpp"

namespace tessera::kernels {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS: ") + what + " failed (" + cublasGetStatusString(s) + ")");
}

cublasHandle_t cublas_for(const Device& dev) {
  static std::mutex lock;
  static std::map<int, cublasHandle_t> handles;
  std::lock_guard<std::mutex> guard(lock);
  const int id = device::current();
  auto it = handles.find(id);
  if (it == handles.end()) {
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    cublas_check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    it = handles.emplace(id, h).first;
  }
  cublas_check(cublasSetStream(it->second, static_cast<cudaStream_t>(dev.stream)),
               "cublasSetStream");
  return it->second;
}

}  // namespace tessera::kernels
