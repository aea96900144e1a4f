#pragma once
// Tensor: an N-d strided view over shared storage in host or CUDA memory. New tensors
// are contiguous row-major; view(Box) gives a strided window without copying.
#include "runtime/floor.hpp"
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <vector>

#include "decomp/box.hpp"
#include "decomp/dtype.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"
#include "kernels/strided_index.hpp"

namespace tessera {

class Storage {
 public:
  Storage(MemSpace space, std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  MemSpace space() const { return space_; }

 private:
  MemSpace space_;
  std::size_t bytes_;
  void* ptr_;
};

std::vector<Index> row_major_strides(const std::vector<Index>& shape);
Index numel_of(const std::vector<Index>& shape);
std::string shape_str(const std::vector<Index>& shape);  // "(2, 3, 4)"

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage, rank 0
  static Tensor empty(const std::vector<Index>& shape, DType dtype,
                      MemSpace space = MemSpace::Host);
  static Tensor zeros(const std::vector<Index>& shape, DType dtype,
                      MemSpace space = MemSpace::Host);

  bool defined() const { return storage_ != nullptr; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<Index>& shape() const { return shape_; }
  Index shape(int d) const { return shape_.at(static_cast<std::size_t>(d)); }
  const std::vector<Index>& strides() const { return strides_; }  // in elements
  Index numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  MemSpace space() const { return space_; }
  // Where kernels on this tensor run: its memory space and, on CUDA, the current stream.
  Device device() const { return Device::of(space_); }
  std::size_t elem_size() const { return size_of(dtype_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * elem_size(); }
  bool is_contiguous() const;

  // Address of element (0, ..., 0).
  void* raw() const;
  template <class T>
  T* data() const {
    TESSERA_CHECK(dtype_of_v<T> == dtype_, "Tensor::data: tensor is " << name_of(dtype_)
                                                                      << ", asked for "
                                                                      << name_of(dtype_of_v<T>));
    return static_cast<T*>(raw());
  }
  // Host element access by multi-index (bounds checked).
  template <class T>
  T& at(std::initializer_list<Index> idx) const {
    return data<T>()[offset_of(std::vector<Index>(idx))];
  }
  template <class T>
  T& at(const std::vector<Index>& idx) const {
    return data<T>()[offset_of(idx)];
  }
  Index offset_of(const std::vector<Index>& idx) const;  // in elements from raw()

  // Window [b.lo, b.hi) in this tensor's index space; shares storage.
  Tensor view(const Box& b) const;
  // Same storage read with another shape; requires a contiguous tensor.
  Tensor reshape(const std::vector<Index>& shape) const;
  // The same storage read as complex (the last dim of 2 parts dropped) or as real parts
  // (a last dim of 2 added), as torch.view_as_complex / view_as_real; contiguous only.
  Tensor view_as_complex() const;
  Tensor view_as_real() const;
  // A contiguous deep copy in `space` (default: the same space).
  Tensor clone() const;
  Tensor to(MemSpace space) const;
  // Itself when it already lives in `space`, else a contiguous copy there.
  Tensor in_space(MemSpace space) const { return space_ == space ? *this : to(space); }
  Tensor contiguous() const { return is_contiguous() ? *this : clone(); }
  // Element-wise copy of an equally shaped tensor of the same dtype, any strides/spaces.
  void copy_from(const Tensor& src) const;
  void zero() const;
  // True when both view the same allocation (flat buffers shared by several tensors).
  bool same_storage(const Tensor& o) const { return storage_ && storage_ == o.storage_; }

 private:
  std::shared_ptr<Storage> storage_;
  std::size_t offset_bytes_ = 0;
  std::vector<Index> shape_, strides_;
  Index numel_ = 0;
  DType dtype_ = DType::f32;
  MemSpace space_ = MemSpace::Host;
};

// Element i (row-major over the common shape) of two equally shaped tensors at its offset
// in each: dst strides from dst, src strides from src (kernels over strided views).
kernels::StridedCopy element_map(const Tensor& dst, const Tensor& src);

}  // namespace tessera
