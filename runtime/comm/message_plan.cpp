#include "runtime/comm/message_plan.hpp"

#include <algorithm>
#include <climits>

#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

MessageSide message_side(const std::vector<std::pair<int, Box>>& entries, const Box& frame) {
  MessageSide s;
  s.frame = frame;
  const std::vector<Index> strides = row_major_strides(frame.shape());
  Index off = 0;
  for (const auto& [peer, b] : entries) {
    if (b.empty()) continue;
    TESSERA_CHECK(frame.contains(b),
                  "message plan: box " << b.str() << " outside the buffer " << frame.str());
    if (s.messages.empty() || s.messages.back().peer != peer)
      s.messages.push_back({peer, off, 0, {}, static_cast<int>(s.regions.size())});
    PeerMessage& m = s.messages.back();
    m.boxes.push_back(b);
    m.count += b.volume();
    kernels::PackRegion g;
    g.buffer_offset = off;
    g.box.ndim = b.ndim;
    for (int d = 0; d < b.ndim; ++d) {
      g.tensor_offset += (b.lo[d] - frame.lo[d]) * strides[static_cast<std::size_t>(d)];
      g.box.shape[d] = b.extent(d);
      g.box.src_stride[d] = strides[static_cast<std::size_t>(d)];
    }
    s.regions.push_back(g);
    off += b.volume();
  }
  // MPI's datatype engine pays per contiguous run: short-run messages are cheaper to pack.
  const std::vector<Index> fs = frame.shape();
  for (const PeerMessage& m : s.messages) {
    Index shortest = -1;
    for (const Box& b : m.boxes) {
      int d = b.ndim - 1;
      Index run = b.extent(d);
      while (d > 0 && b.extent(d) == fs[static_cast<std::size_t>(d)]) run *= b.extent(--d);
      shortest = shortest < 0 ? run : std::min(shortest, run);
    }
    s.shortest_run.push_back(shortest);
  }
  return s;
}

MessageSide message_side(const std::vector<Box>& box_per_peer, const Box& frame) {
  std::vector<std::pair<int, Box>> entries;
  for (std::size_t q = 0; q < box_per_peer.size(); ++q)
    entries.emplace_back(static_cast<int>(q), box_per_peer[q]);
  return message_side(entries, frame);
}

Index MessageSide::total() const {
  return messages.empty() ? 0 : messages.back().offset + messages.back().count;
}

int MessageSide::region_at(std::size_t i) const {
  return i < messages.size() ? messages[i].first_region : static_cast<int>(regions.size());
}
Index MessageSide::element_at(std::size_t i) const {
  return i < messages.size() ? messages[i].offset : total();
}

std::vector<MpiType> MessageSide::types(std::size_t elem_size, Index most) const {
  std::vector<MpiType> out;
  bool frame_fits = true;
  for (int d = 0; d < frame.ndim; ++d) frame_fits = frame_fits && frame.extent(d) <= INT_MAX;
  for (const PeerMessage& m : messages) {
    if (!frame_fits || m.count > most) {
      out.emplace_back(MPI_DATATYPE_NULL, false);
      continue;
    }
    std::vector<MpiType> parts;
    std::vector<MPI_Datatype> ts;
    for (const Box& b : m.boxes) {
      parts.push_back(subarray_type(frame.shape(), relative_to(b, frame), elem_size));
      ts.push_back(parts.back().get());
    }
    if (ts.size() == 1) {  // one box: its subarray as is
      out.push_back(std::move(parts.front()));
      continue;
    }
    const std::vector<int> ones(ts.size(), 1);
    const std::vector<MPI_Aint> zeros(ts.size(), 0);
    MPI_Datatype t;
    TESSERA_MPI(MPI_Type_create_struct(static_cast<int>(ts.size()), ones.data(), zeros.data(),
                                       ts.data(), &t));
    TESSERA_MPI(MPI_Type_commit(&t));
    out.emplace_back(t);
  }
  return out;
}

}  // namespace tessera
