// Implementation of runtime/device.hpp for builds without CUDA (-DTESSERA_CUDA=OFF).
#include "kernels/device/device.hpp"
#include "decomp/error.hpp"

namespace tessera::device {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
}  // namespace

bool built_with_cuda() {
  return false;
}
int count() {
  return 0;
}
void select(int) {
  no_cuda("device::select");
}
int current() {
  return -1;
}
void* alloc(std::size_t) {
  no_cuda("device::alloc");
}
void free(void*) noexcept {}
void* alloc_pinned(std::size_t) {
  no_cuda("device::alloc_pinned");
}
void free_pinned(void*) noexcept {}
void copy(void*, const void*, std::size_t, Copy) {
  no_cuda("device::copy");
}
void memset_zero(void*, std::size_t) {
  no_cuda("device::memset_zero");
}
void synchronize() {}
bool is_device_pointer(const void*) {
  return false;
}

}  // namespace tessera::device
