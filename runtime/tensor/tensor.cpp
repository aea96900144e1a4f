#include "runtime/tensor/tensor.hpp"

#include <sstream>

#include "kernels/strided_copy.hpp"
#include "kernels/device/device.hpp"

namespace tessera {

Storage::Storage(MemSpace space, std::size_t bytes)
    : space_(space), bytes_(bytes), ptr_(mem_alloc(space, bytes)) {}

Storage::~Storage() {
  mem_free(space_, ptr_, bytes_);
}

std::vector<Index> row_major_strides(const std::vector<Index>& shape) {
  std::vector<Index> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * std::max<Index>(shape[d + 1], 1);
  return s;
}

Index numel_of(const std::vector<Index>& shape) {
  Index n = 1;
  for (Index e : shape)
    if (__builtin_mul_overflow(n, e, &n))  // a product past 2^63 wrapped to a small buffer
      throw Error("Tensor: shape " + shape_str(shape) + " holds more than 2^63 elements");
  return n;
}

std::string shape_str(const std::vector<Index>& shape) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ')';
  return os.str();
}

Tensor Tensor::empty(const std::vector<Index>& shape, DType dtype, MemSpace space) {
  TESSERA_CHECK(static_cast<int>(shape.size()) <= kMaxDims,
                "Tensor: rank " << shape.size() << " exceeds " << kMaxDims);
  for (Index e : shape)
    TESSERA_CHECK(e >= 0, "Tensor: negative extent in shape " << shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.strides_ = row_major_strides(shape);
  t.numel_ = numel_of(shape);
  Index bytes = 0;
  TESSERA_CHECK(!__builtin_mul_overflow(t.numel_, static_cast<Index>(size_of(dtype)), &bytes),
                "Tensor: shape " << shape_str(shape) << " of " << name_of(dtype)
                                 << " holds more than 2^63 bytes");
  t.dtype_ = dtype;
  t.space_ = space;
  t.storage_ = std::make_shared<Storage>(space, t.nbytes());
  return t;
}

Tensor Tensor::zeros(const std::vector<Index>& shape, DType dtype, MemSpace space) {
  Tensor t = empty(shape, dtype, space);
  t.zero();
  return t;
}

bool Tensor::is_contiguous() const {
  if (numel_ == 0) return true;  // nothing to lay out
  Index expect = 1;
  for (int d = ndim() - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return static_cast<unsigned char*>(storage_->data()) + offset_bytes_;
}

Index Tensor::offset_of(const std::vector<Index>& idx) const {
  TESSERA_CHECK(static_cast<int>(idx.size()) == ndim(),
                "Tensor index of rank " << idx.size() << " into tensor of rank " << ndim());
  TESSERA_CHECK(space_ == MemSpace::Host, "Tensor element access on CUDA memory; copy to host");
  Index off = 0;
  for (int d = 0; d < ndim(); ++d) {
    TESSERA_CHECK(idx[d] >= 0 && idx[d] < shape_[d], "Tensor index "
                                                         << idx[d] << " out of range in dim " << d
                                                         << " of shape " << shape_str(shape_));
    off += idx[d] * strides_[d];
  }
  return off;
}

Tensor Tensor::view(const Box& b) const {
  TESSERA_CHECK(b.ndim == ndim(),
                "Tensor::view: box " << b.str() << " for tensor of rank " << ndim());
  TESSERA_CHECK(Box::from_shape(shape_).contains(b) || b.empty(),
                "Tensor::view: box " << b.str() << " outside shape " << shape_str(shape_));
  Tensor v = *this;
  Index off = 0;
  for (int d = 0; d < ndim(); ++d) {
    v.shape_[d] = b.extent(d);
    if (!b.empty()) off += b.lo[d] * strides_[d];
  }
  v.numel_ = numel_of(v.shape_);
  v.offset_bytes_ += static_cast<std::size_t>(off) * elem_size();
  return v;
}

Tensor Tensor::reshape(const std::vector<Index>& shape) const {
  TESSERA_CHECK(is_contiguous(), "Tensor::reshape needs a contiguous tensor");
  for (const Index e : shape)
    TESSERA_CHECK(e >= 0, "Tensor::reshape: negative extent in " << shape_str(shape));
  TESSERA_CHECK(numel_of(shape) == numel_,
                "Tensor::reshape: " << shape_str(shape_) << " to " << shape_str(shape));
  Tensor v = *this;
  v.shape_ = shape;
  v.strides_ = row_major_strides(shape);
  return v;
}

Tensor Tensor::view_as_complex() const {
  TESSERA_CHECK(is_contiguous() && ndim() >= 1 && shape_.back() == 2 &&
                    (dtype_ == DType::f32 || dtype_ == DType::f64),
                "Tensor::view_as_complex needs a contiguous float32/float64 tensor (..., 2), not "
                    << name_of(dtype_) << " " << shape_str(shape_));
  Tensor v = *this;
  v.shape_.pop_back();
  v.strides_ = row_major_strides(v.shape_);
  v.numel_ = numel_ / 2;
  v.dtype_ = complex_of(dtype_);
  return v;
}

Tensor Tensor::view_as_real() const {
  TESSERA_CHECK(is_contiguous() && is_complex(dtype_),
                "Tensor::view_as_real needs a contiguous complex tensor, not "
                    << name_of(dtype_) << " " << shape_str(shape_));
  Tensor v = *this;
  v.shape_.push_back(2);
  v.strides_ = row_major_strides(v.shape_);
  v.numel_ = numel_ * 2;
  v.dtype_ = real_part_of(dtype_);
  return v;
}

Tensor Tensor::clone() const {
  return to(space_);
}

Tensor Tensor::to(MemSpace space) const {
  TESSERA_CHECK(defined(), "Tensor::to / clone: the tensor is undefined (default-constructed)");
  Tensor t = empty(shape_, dtype_, space);
  t.copy_from(*this);
  return t;
}

kernels::StridedCopy element_map(const Tensor& dst, const Tensor& src) {
  TESSERA_CHECK(dst.shape() == src.shape(), "element_map: shape " << shape_str(src.shape())
                                                                  << " onto "
                                                                  << shape_str(dst.shape()));
  kernels::StridedCopy c;
  c.ndim = dst.ndim();
  for (int d = 0; d < c.ndim; ++d) {
    c.shape[d] = dst.shape()[d];
    c.dst_stride[d] = dst.strides()[d];
    c.src_stride[d] = src.strides()[d];
  }
  return c;
}

void Tensor::copy_from(const Tensor& src) const {
  TESSERA_CHECK(src.shape_ == shape_, "Tensor::copy_from: shape " << shape_str(src.shape_)
                                                                  << " into " << shape_str(shape_));
  TESSERA_CHECK(src.dtype_ == dtype_,
                "Tensor::copy_from: dtype " << name_of(src.dtype_) << " into " << name_of(dtype_));
  if (numel_ == 0) return;
  const bool both_contig = is_contiguous() && src.is_contiguous();
  if (space_ == src.space_) {
    // Within one space (one bulk device copy where both are dense).
    if (both_contig && space_ == MemSpace::Cuda)
      device::copy(raw(), src.raw(), nbytes(), device::Copy::DeviceToDevice);
    else
      kernels::strided_copy(device(), raw(), src.raw(), element_map(*this, src), elem_size());
  } else if (both_contig) {
    device::copy(
        raw(), src.raw(), nbytes(),
        space_ == MemSpace::Cuda ? device::Copy::HostToDevice : device::Copy::DeviceToHost);
  } else {
    // Across spaces with strides: make both sides contiguous, then one bulk transfer.
    const Tensor s = src.contiguous();
    const Tensor d = is_contiguous() ? *this : empty(shape_, dtype_, space_);
    device::copy(
        d.raw(), s.raw(), nbytes(),
        space_ == MemSpace::Cuda ? device::Copy::HostToDevice : device::Copy::DeviceToHost);
    if (d.raw() != raw()) copy_from(d);
  }
}

void Tensor::zero() const {
  if (numel_ == 0) return;
  if (space_ == MemSpace::Cuda && is_contiguous()) return device::memset_zero(raw(), nbytes());
  kernels::strided_zero(device(), raw(), element_map(*this, *this), elem_size());
}

}  // namespace tessera
