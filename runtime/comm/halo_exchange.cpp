#include "runtime/comm/halo_exchange.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <sstream>

#include "decomp/halo_geometry.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "kernels/region_pack.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/message_plan.hpp"
#include "runtime/comm/mpi_datatype.hpp"
#include "runtime/comm/node_mailbox.hpp"
#include "kernels/device/pinned_buffer.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

namespace {
bool g_deterministic = true;
}  // namespace

bool halo_deterministic_default() {
  return g_deterministic;
}
void set_halo_deterministic_default(bool on) {
  g_deterministic = on;
}
namespace {

// The adjoint adds ghost values into owners: element types with an addition only.
DType addable(DType t) {
  TESSERA_CHECK(t == DType::f32 || t == DType::f64 || t == DType::i64,
                "halo adjoint: cannot add " << name_of(t) << " values; use float32/64");
  return t;
}

// A plan's sends (boxes in the sender's frame) and receives (in the receiver's), as the
// sides of the shared message plan over the block's padded buffer `frame`.
MessageSide send_side(const HaloPlan& p, const Box& frame) {
  std::vector<std::pair<int, Box>> e;
  for (const HaloSend& x : p.sends) e.emplace_back(x.peer, x.src);
  return message_side(e, frame);
}
MessageSide recv_side(const HaloPlan& p, const Box& frame) {
  std::vector<std::pair<int, Box>> e;
  for (const HaloRecv& x : p.recvs) e.emplace_back(x.peer, x.dst);
  return message_side(e, frame);
}

// Regions of `mine` (one direction's messages on this rank, with their region table) rebased
// onto the sender's buffer: message i's regions start where the sender packed it, at
// offset_in_sender[i].
std::vector<kernels::PackRegion> rebased(const std::vector<PeerMessage>& mine,
                                         std::vector<kernels::PackRegion> table,
                                         const std::vector<Index>& offset_in_sender) {
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const PeerMessage& m = mine[i];
    const Index shift = offset_in_sender[i] - m.offset;
    for (std::size_t r = 0; r < m.boxes.size(); ++r)
      table[static_cast<std::size_t>(m.first_region) + r].buffer_offset += shift;
  }
  return table;
}

// Offset of the message to `me` in a peer's message list.
Index offset_of_message_to(const std::vector<PeerMessage>& peer_msgs, int me) {
  for (const PeerMessage& m : peer_msgs)
    if (m.peer == me) return m.offset;
  throw Error("HaloExchange: internal error, halo plans of two blocks do not pair up");
}

constexpr int kReadyTag = 13, kDoneTag = 14;  // zero-byte signals of node-shared messages

void wait_all(std::vector<MPI_Request>& r) {
  if (!r.empty())
    TESSERA_MPI(MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE));
  r.clear();
}

}  // namespace

struct HaloExchange::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // ranks sharing a block grid; rank == block id
  int me = 0;
  HaloWidths widths;
  ShardSpec spec;
  HaloOptions opts;
  // The message plan (runtime/comm/message_plan.hpp) of the forward direction over the padded
  // buffer; the adjoint swaps its sides.
  MessagePlan plan;
  std::vector<Box> open;
  MpiType elem;     // one element of elem_size bytes
  Index piece = 0;  // elements per message piece (runtime/comm/message_pieces)
  std::size_t elem_size = 0;
  std::vector<MpiType> send_types, recv_types;  // forward messages, in place (host memory)
  // Per message of the exchange in flight: MPI walks the padded buffer through its derived
  // type (in place) instead of our pack and unpack.
  std::vector<char> out_direct, in_direct;
  // Node-shared send buffers (null: messages only). A message to an on-node peer is packed
  // into this rank's buffer and signalled ready; the peer unpacks it from there and signals
  // done; the next exchange waits for every done before it packs again.
  std::unique_ptr<NodeMailbox> mailbox;
  // Receive-side region tables rebased onto the senders' buffers, per direction.
  std::vector<kernels::PackRegion> fwd_shared_regions, adj_shared_regions;
  std::vector<char> out_shared, in_shared;  // per message of the exchange in flight
  std::vector<MPI_Request> done_recvs, done_sends;
  // In-flight state.
  enum class Phase { Idle, Forward, Adjoint } phase = Phase::Idle;
  const HaloTensor* target = nullptr;
  // The target's buffer, held while MPI may write into it (in-place receives), so that an
  // error that unwinds past the caller's tensor mid-exchange cannot free it under MPI.
  Tensor target_buffer;
  Tensor out_buf, in_buf;  // in the tensor's memory space
  // Device memory MPI cannot take: messages staged through page-locked host buffers.
  bool staged = false;
  PinnedBuffer out_stage, in_stage;
  // One request per message (its first piece); a message longer than one piece
  // (runtime/comm/message_pieces) keeps the requests of the others in in_rest / out_rest.
  std::vector<MPI_Request> reqs;
  std::vector<std::vector<MPI_Request>> in_rest;
  std::vector<MPI_Request> out_rest;
  // The transport of each message sent by the last start(), and its direction.
  std::vector<std::pair<int, Transport>> last_out;
  Direction last_direction = Direction::Forward;

  void check_tensor(const HaloTensor& t) const {
    TESSERA_CHECK(phase == Phase::Idle, "HaloExchange: begin() while an exchange is in flight");
    TESSERA_CHECK(t.spec() == spec, "HaloExchange: tensor spec " << t.spec().str()
                                                                 << " differs from the plan's "
                                                                 << spec.str());
    TESSERA_CHECK(
        t.widths() == widths || (t.left() == widths.left(me) && t.right() == widths.right(me)),
        "HaloExchange: tensor ghost widths differ from the plan's");
  }

  // Runs `op` over n regions between t's padded buffer and buf[regions[0], end).
  void run_regions(const HaloTensor& t, void* buf, const kernels::PackRegion* regions, int n,
                   Index end, kernels::PackOp op) const {
    const Tensor& p = t.padded();
    const auto add = op == kernels::PackOp::UnpackAdd ? addable(p.dtype()) : DType::f32;
    kernels::region_pack(p.device(), p.raw(), buf, regions, n, end, elem_size, op, add);
  }

  // Packs or unpacks messages [first, last) of `side` between t and buf.
  void pack(const HaloTensor& t, const MessageSide& side, void* buf, kernels::PackOp op,
            std::size_t first, std::size_t last) {
    if (first >= last) return;
    const int r0 = side.region_at(first);
    run_regions(t, buf, side.regions.data() + r0, side.region_at(last) - r0, side.element_at(last),
                op);
  }

  // Unpacks message i of `in` straight from its sender's node-shared buffer, then tells the
  // sender it is done with it.
  void unpack_shared(const MessageSide& in, std::size_t i, kernels::PackOp op) {
    const auto& table = &in == &plan.recv ? fwd_shared_regions : adj_shared_regions;
    const PeerMessage& m = in.messages[i];
    const auto r0 = static_cast<std::size_t>(m.first_region);
    mailbox->sync();  // the sender's stores, published before its ready signal
    run_regions(*target, mailbox->buffer_of(m.peer), table.data() + r0,
                static_cast<int>(m.boxes.size()), table[r0].buffer_offset + m.count, op);
    mailbox->sync();  // these loads before the sender's next stores
    done_sends.emplace_back();
    TESSERA_MPI(MPI_Isend(nullptr, 0, MPI_BYTE, m.peer, kDoneTag, comm, &done_sends.back()));
  }

  // The MPI element type (and the per-message derived types over the padded buffer)
  // follow the tensor's element size; built only when it changes.
  void use_element_size(std::size_t es) {
    if (es == elem_size) return;
    elem = element_type(es);
    elem_size = es;
    piece = piece_units(elem.get());
    // In-place types only for messages that go whole (one piece).
    send_types = plan.send.types(es, piece);
    recv_types = plan.recv.types(es, piece);
  }

  // Posts receives for `in`, then packs and sends `out`. On host memory, messages to and
  // from on-node peers go through the node-shared buffers (when enabled); of the others,
  // those whose runs are long enough travel in place when `in_place_ok` (forward): MPI reads
  // and writes the padded buffer through derived datatypes, no pack buffer. The rest are
  // packed; on host memory each is sent (or signalled) as soon as it is packed, so the first
  // bytes travel while the rest is packed; on device memory one kernel packs all messages
  // (then host staging if MPI cannot take device pointers).
  void start(const HaloTensor& t, const MessageSide& out_side, const MessageSide& in_side, int tag,
             bool in_place_ok) {
    const std::vector<PeerMessage>& out = out_side.messages;
    const std::vector<PeerMessage>& in = in_side.messages;
    const Tensor& p = t.padded();
    use_element_size(p.elem_size());
    const bool host = p.space() == MemSpace::Host;
    const bool shared = host && mailbox;
    // The previous exchange's readers must be done with this rank's buffer before it is
    // packed again.
    wait_all(done_recvs);
    if (shared) mailbox->sync();  // their loads before this rank's stores
    const Index min_run = static_cast<Index>(opts.in_place_min_run_bytes / elem_size);
    // An in-place message is one MPI message (count 1 of a derived type): one longer than a
    // piece has no type (use_element_size) and is packed and cut instead, on both sides (the
    // peer cuts the same count the same way).
    out_shared.assign(out.size(), 0);
    in_shared.assign(in.size(), 0);
    out_direct.assign(out.size(), 0);
    in_direct.assign(in.size(), 0);
    for (std::size_t i = 0; i < out.size(); ++i) {
      out_shared[i] = shared && mailbox->shares(out[i].peer);
      out_direct[i] = in_place_ok && !out_shared[i] && out_side.shortest_run[i] >= min_run &&
                      send_types[i].get() != MPI_DATATYPE_NULL;
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
      in_shared[i] = shared && mailbox->shares(in[i].peer);
      in_direct[i] = in_place_ok && !in_shared[i] && in_side.shortest_run[i] >= min_run &&
                     recv_types[i].get() != MPI_DATATYPE_NULL;
    }
    // Message buffers persist across exchanges of the same dtype and memory space.
    auto reuse = [&](Tensor& b, Index n, MemSpace space) {
      if (!b.defined() || b.numel() != n || b.dtype() != p.dtype() || b.space() != space)
        b = Tensor::empty({n}, p.dtype(), space);
    };
    // Pack buffers only where something is packed: not for node-shared or in-place messages.
    bool packed_in = !host;
    for (std::size_t i = 0; i < in.size(); ++i)
      packed_in = packed_in || !(in_shared[i] || in_direct[i]);
    if (!shared) reuse(out_buf, out_side.total(), p.space());
    if (packed_in) reuse(in_buf, in_side.total(), p.space());
    staged = !mpi_accepts(p.space());
    last_out.clear();
    for (std::size_t i = 0; i < out.size(); ++i)
      last_out.emplace_back(out[i].peer, out_shared[i]   ? Transport::NodeShared
                                         : out_direct[i] ? Transport::InPlace
                                         : staged        ? Transport::Staged
                                                         : Transport::Packed);
    const auto out_bytes = static_cast<std::size_t>(out_side.total()) * elem_size;
    const auto in_bytes = static_cast<std::size_t>(in_side.total()) * elem_size;
    TESSERA_CHECK(!shared || out_side.total() * static_cast<Index>(elem_size) <=
                                 static_cast<Index>(mailbox->bytes()),
                  "HaloExchange: internal error, node-shared buffer too small");
    reqs.assign(in.size() + out.size(), MPI_REQUEST_NULL);
    in_rest.assign(in.size(), {});
    out_rest.clear();
    void* base = p.raw();
    // What MPI reads and writes: the tensor's own buffers, the node-shared one, or staging.
    auto* ib = staged ? in_stage.reserve(in_bytes) : static_cast<unsigned char*>(in_buf.raw());
    auto* ob = shared   ? mailbox->mine()
               : staged ? out_stage.reserve(out_bytes)
                        : static_cast<unsigned char*>(out_buf.raw());
    // Device memory MPI writes directly (CUDA-aware): the receives below may land in in_buf
    // at once, while the last exchange's unpack kernels (queued, not waited for) still read
    // it - or, where in_buf was just allocated, kernels still read the recycled block.
    if (!host && !staged) device::synchronize(p.device());
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in_shared[i])
        TESSERA_MPI(MPI_Irecv(nullptr, 0, MPI_BYTE, in[i].peer, kReadyTag, comm, &reqs[i]));
      else if (in_direct[i])
        TESSERA_MPI(MPI_Irecv(base, 1, recv_types[i].get(), in[i].peer, tag, comm, &reqs[i]));
      else
        post_packed(false, ib + in[i].offset * elem_size, in[i].count, in[i].peer, tag, reqs[i],
                    in_rest[i]);
    }
    auto send = [&](std::size_t i) {
      MPI_Request* r = &reqs[in.size() + i];
      if (out_shared[i]) {
        mailbox->sync();  // publish the packed message before the ready signal
        TESSERA_MPI(MPI_Isend(nullptr, 0, MPI_BYTE, out[i].peer, kReadyTag, comm, r));
        done_recvs.emplace_back();
        TESSERA_MPI(
            MPI_Irecv(nullptr, 0, MPI_BYTE, out[i].peer, kDoneTag, comm, &done_recvs.back()));
      } else if (out_direct[i]) {
        TESSERA_MPI(MPI_Isend(base, 1, send_types[i].get(), out[i].peer, tag, comm, r));
      } else {
        post_packed(true, ob + out[i].offset * elem_size, out[i].count, out[i].peer, tag, *r,
                    out_rest);
      }
    };
    if (host) {
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (!out_direct[i]) pack(t, out_side, ob, kernels::PackOp::Pack, i, i + 1);
        send(i);
      }
    } else {
      pack(t, out_side, out_buf.raw(), kernels::PackOp::Pack, 0, out.size());
      // MPI reads the packed buffer: the pack kernel must be done (the staged copy waits too).
      if (staged)
        device::copy(ob, out_buf.raw(), out_bytes, device::Copy::DeviceToHost);
      else
        device::synchronize(out_buf.device());
      for (std::size_t i = 0; i < out.size(); ++i) send(i);
    }
    target = &t;
    target_buffer = t.padded();
  }

  // A packed message of `count` elements as pieces: the first's request in `first`, the
  // others' appended to `rest`.
  void post_packed(bool send, unsigned char* buf, Index count, int peer, int tag,
                   MPI_Request& first, std::vector<MPI_Request>& rest) {
    if (count <= piece) {  // one piece (the usual case): no request list
      if (send)
        TESSERA_MPI(MPI_Isend(buf, static_cast<int>(count), elem.get(), peer, tag, comm, &first));
      else
        TESSERA_MPI(MPI_Irecv(buf, static_cast<int>(count), elem.get(), peer, tag, comm, &first));
      return;
    }
    std::vector<MPI_Request> r;
    if (send)
      isend_pieces(buf, count, elem.get(), peer, tag, comm, r);
    else
      irecv_pieces(buf, count, elem.get(), peer, tag, comm, r);
    first = r.front();
    rest.insert(rest.end(), r.begin() + 1, r.end());
  }

  // Waits for the pieces of received message i after its first.
  void wait_rest(std::size_t i) {
    if (i < in_rest.size()) wait_all(in_rest[i]);
  }

  // Applies received message i of `in` with `op`, wherever it is.
  void apply(const MessageSide& in, std::size_t i, kernels::PackOp op) {
    if (in_direct[i]) return;  // MPI wrote it in place
    if (in_shared[i])
      unpack_shared(in, i, op);
    else
      pack(*target, in, in_buf.raw(), op, i, i + 1);
  }

  // Waits for the receives of `in` and applies each with `op` as it arrives (or, when
  // staged through host memory or `ordered`, all at once in plan order), then waits
  // for the sends.
  void complete(const MessageSide& in, kernels::PackOp op, bool ordered) {
    const std::size_t nin = in.messages.size();
    if (staged) {  // device memory staged through the host
      TESSERA_MPI(MPI_Waitall(static_cast<int>(nin), reqs.data(), MPI_STATUSES_IGNORE));
      for (std::size_t i = 0; i < nin; ++i) wait_rest(i);
      device::copy(in_buf.raw(), in_stage.data(), static_cast<std::size_t>(in.total()) * elem_size,
                   device::Copy::HostToDevice);
      // One unpack kernel over all messages; additions one message per kernel, in plan
      // order, since messages from different peers may add into the same owned cells.
      if (op == kernels::PackOp::UnpackAdd)
        for (std::size_t i = 0; i < nin; ++i) pack(*target, in, in_buf.raw(), op, i, i + 1);
      else
        pack(*target, in, in_buf.raw(), op, 0, nin);
    } else if (ordered) {
      TESSERA_MPI(MPI_Waitall(static_cast<int>(nin), reqs.data(), MPI_STATUSES_IGNORE));
      // Peer order, then plan order: the same sequence of operations on every run.
      for (std::size_t i = 0; i < nin; ++i) wait_rest(i), apply(in, i, op);
    } else {
      for (std::size_t left = nin; left > 0; --left) {
        int idx = MPI_UNDEFINED;
        TESSERA_MPI(MPI_Waitany(static_cast<int>(nin), reqs.data(), &idx, MPI_STATUS_IGNORE));
        if (idx == MPI_UNDEFINED) break;
        wait_rest(static_cast<std::size_t>(idx));
        apply(in, static_cast<std::size_t>(idx), op);
      }
    }
    TESSERA_MPI(
        MPI_Waitall(static_cast<int>(reqs.size() - nin), reqs.data() + nin, MPI_STATUSES_IGNORE));
    wait_all(out_rest);
    wait_all(done_sends);
  }
};

HaloExchange::HaloExchange(const Mesh& mesh, const ShardSpec& spec, const std::vector<Index>& left,
                           const std::vector<Index>& right, const HaloOptions& opts)
    : HaloExchange(mesh, spec, HaloWidths(left, right), opts) {}

HaloExchange::HaloExchange(const Mesh& mesh, const ShardSpec& spec, const HaloWidths& widths,
                           const HaloOptions& opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  TESSERA_CHECK(!spec.has_partial(), "HaloExchange: resolve Partial axes first");
  // A spec of another mesh would send to ranks that mesh does not have (MPI_ERR_RANK, fatal).
  TESSERA_CHECK(spec.mesh_dims() == mesh.dims(),
                "HaloExchange: the spec " << spec.str() << " lays the tensor out over a mesh of "
                                          << spec.mesh_dims().size() << " axes, not over mesh "
                                          << mesh.str());
  m.widths = widths;
  m.spec = spec;
  m.opts = opts;
  const std::vector<bool> periodic =
      opts.periodic.empty() ? std::vector<bool>(spec.ndim(), false) : opts.periodic;
  // Block of this rank: its coordinates on the axes that shard the tensor's dims.
  const auto& c = mesh.coords();
  const int block = block_of(mesh, spec);
  // The geometry validates widths and periodic flags, before any communicator exists; every
  // rank must pass the same spec, widths and options (or the exchange would hang or mix).
  std::shared_ptr<const HaloGeometry> cached;
  std::string why;
  try {
    cached = cached_halo_geometry(spec.partition(), widths, periodic);
  } catch (const Error& e) {
    why = e.what();
  }
  std::ostringstream args;
  args << spec.str() << " periodic";
  for (const bool p : periodic) args << ' ' << p;
  if (why.empty())
    for (int b = 0; b < (widths.uniform() ? 1 : spec.partition().num_blocks()); ++b)
      args << " widths " << shape_str(widths.left(b)) << shape_str(widths.right(b));
  args << " shared " << opts.node_shared << ' ' << opts.node_group_ranks << " in place "
       << opts.in_place << ' ' << opts.in_place_min_run_bytes << " fill "
       << static_cast<int>(opts.open_fill);
  collective_check(mesh.comm(), why.empty(), why, "HaloExchange",
                   "the spec, widths, periodic flags or options", args.str());
  const HaloGeometry& geo = *cached;
  const HaloPlan& plan = geo.plan(block);
  const Box pb = geo.padded_box(block);
  m.plan.send = send_side(plan, pb);
  m.plan.recv = recv_side(plan, pb);
  m.open = plan.open;

  // Ranks with equal coordinates on the axes that shard nothing hold one block grid.
  int color = 0;
  for (int a = 0; a < mesh.ndim(); ++a)
    if (spec.dim_on_axis(a) < 0) color = color * mesh.dim(a) + c[a];
  TESSERA_MPI(MPI_Comm_split(mesh.comm(), color, block, &m.comm));
  TESSERA_MPI(MPI_Comm_rank(m.comm, &m.me));
  TESSERA_CHECK(m.me == block,
                "HaloExchange: internal error, block " << block << " got rank " << m.me);

  if (!opts.node_shared) return;
  // Room for either direction's messages at the widest element (complex128, 16 bytes),
  // allocated here because allocation is collective over the node and begin() must not be.
  constexpr std::size_t kWidestElement = 16;
  m.mailbox = std::make_unique<NodeMailbox>(m.comm, opts.node_group_ranks);
  if (!m.mailbox->allocate(
          static_cast<std::size_t>(std::max(m.plan.send.total(), m.plan.recv.total())) *
          kWidestElement)) {
    m.mailbox.reset();  // no room in the node's shared memory: messages
    return;
  }
  // Where each on-node sender packs the message this rank receives: forward, in the
  // sender's sends; adjoint, in its receives (ghosts travel back).
  auto offsets = [&](const std::vector<PeerMessage>& mine, auto senders_side) {
    std::vector<Index> off;
    for (const PeerMessage& x : mine)
      off.push_back(m.mailbox->shares(x.peer)
                        ? offset_of_message_to(
                              senders_side(geo.plan(x.peer), geo.padded_box(x.peer)).messages, m.me)
                        : x.offset);
    return off;
  };
  m.fwd_shared_regions =
      rebased(m.plan.recv.messages, m.plan.recv.regions, offsets(m.plan.recv.messages, send_side));
  m.adj_shared_regions =
      rebased(m.plan.send.messages, m.plan.send.regions, offsets(m.plan.send.messages, recv_side));
}

HaloExchange::~HaloExchange() {
  if (!impl_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  Impl& m = *impl_;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding after an error that other ranks may not share: waiting for peers (or
    // freeing the node window, a collective) could hang this rank before it reaches its
    // handler and MPI_Abort. The window and communicator are left to MPI's teardown; mid-
    // exchange, so are the buffers MPI may still write (the message buffers, the target's).
    if (m.mailbox) m.mailbox->leak();
    if (m.phase != Impl::Phase::Idle) static_cast<void>(impl_.release());  // never freed
    return;
  }
  if (m.phase != Impl::Phase::Idle) {
    // Abandoned mid-exchange: complete it, and release the senders of shared messages.
    MPI_Waitall(static_cast<int>(m.reqs.size()), m.reqs.data(), MPI_STATUSES_IGNORE);
    for (auto& r : m.in_rest)
      MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE);
    MPI_Waitall(static_cast<int>(m.out_rest.size()), m.out_rest.data(), MPI_STATUSES_IGNORE);
    const auto& in = m.phase == Impl::Phase::Forward ? m.plan.recv.messages : m.plan.send.messages;
    for (std::size_t i = 0; i < m.in_shared.size(); ++i)
      if (m.in_shared[i]) {
        m.done_sends.emplace_back();
        MPI_Isend(nullptr, 0, MPI_BYTE, in[i].peer, kDoneTag, m.comm, &m.done_sends.back());
      }
  }
  MPI_Waitall(static_cast<int>(m.done_sends.size()), m.done_sends.data(), MPI_STATUSES_IGNORE);
  // Readers of this rank's shared buffer finish before the window goes (MPI_Win_free).
  MPI_Waitall(static_cast<int>(m.done_recvs.size()), m.done_recvs.data(), MPI_STATUSES_IGNORE);
  if (m.comm != MPI_COMM_NULL) MPI_Comm_free(&m.comm);
  m.mailbox.reset();
}

void HaloExchange::begin(const HaloTensor& t, Direction d) {
  const ScopedCommTimer timer(comm_times().halo_s);
  Impl& m = *impl_;
  m.check_tensor(t);
  if (d == Direction::Forward) {
    m.start(t, m.plan.send, m.plan.recv, 11,
            t.padded().space() == MemSpace::Host && m.opts.in_place);
    m.phase = Impl::Phase::Forward;
  } else {
    addable(t.padded().dtype());  // refuse non-addable dtypes before anything is posted
    m.start(t, m.plan.recv, m.plan.send, 12, false);  // ghosts travel back to their owners
    m.phase = Impl::Phase::Adjoint;
  }
  m.last_direction = d;
}

void HaloExchange::finish() {
  Impl& m = *impl_;
  if (m.phase == Impl::Phase::Adjoint) return finish_adjoint();
  const ScopedCommTimer timer(comm_times().halo_s);
  TESSERA_CHECK(m.phase == Impl::Phase::Forward, "HaloExchange::finish without begin");
  m.complete(m.plan.recv, kernels::PackOp::Unpack, false);
  if (m.opts.open_fill == HaloOptions::OpenFill::Zero)
    for (const Box& b : m.open) m.target->view_global(b).zero();
  m.phase = Impl::Phase::Idle;
  m.target = nullptr;
  m.target_buffer = Tensor();
}

void HaloExchange::finish_adjoint() {
  const ScopedCommTimer timer(comm_times().halo_s);
  Impl& m = *impl_;
  TESSERA_CHECK(m.phase == Impl::Phase::Adjoint,
                "HaloExchange::finish_adjoint without begin_adjoint");
  // Adjoint receives arrive where forward sends left; add them into the owned cells.
  m.complete(m.plan.send, kernels::PackOp::UnpackAdd, m.opts.deterministic);
  // The adjoint of copying into a ghost is moving out of it: ghosts end at zero.
  for (const PeerMessage& r : m.plan.recv.messages)
    for (const Box& b : r.boxes) m.target->view_global(b).zero();
  for (const Box& b : m.open) m.target->view_global(b).zero();
  m.phase = Impl::Phase::Idle;
  m.target = nullptr;
  m.target_buffer = Tensor();
}

Index HaloExchange::cells_received() const {
  return impl_->plan.recv.total();
}
Index HaloExchange::cells_sent() const {
  return impl_->plan.send.total();
}

std::size_t HaloExchange::bytes_to_other_ranks(std::size_t es) const {
  Index n = 0;
  for (const auto& s : impl_->plan.send.messages)
    if (s.peer != impl_->me) n += s.count;
  return static_cast<std::size_t>(n) * es;
}

std::vector<std::pair<int, Index>> HaloExchange::send_counts() const {
  std::vector<std::pair<int, Index>> v;
  for (const auto& m : impl_->plan.send.messages) v.emplace_back(m.peer, m.count);
  return v;
}
std::vector<std::pair<int, Index>> HaloExchange::recv_counts() const {
  std::vector<std::pair<int, Index>> v;
  for (const auto& m : impl_->plan.recv.messages) v.emplace_back(m.peer, m.count);
  return v;
}
bool HaloExchange::node_shared() const {
  return impl_->mailbox != nullptr;
}
std::vector<std::pair<int, Transport>> HaloExchange::last_transports() const {
  return impl_->last_out;
}

std::string HaloExchange::describe() const {
  std::string s = name_of(impl_->last_direction);
  s += ":";
  for (Transport t :
       {Transport::InPlace, Transport::Packed, Transport::NodeShared, Transport::Staged}) {
    int n = 0;
    for (const auto& m : impl_->last_out) n += m.second == t;
    if (n == 0) continue;
    // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on " " + string.
    s += ' ';
    s += std::to_string(n);
    s += ' ';
    s += name_of(t);
    s += ',';
  }
  if (s.back() == ',') s.pop_back();
  if (impl_->last_out.empty()) s += " no messages";
  return s;
}

MPI_Comm HaloExchange::comm() const {
  return impl_->comm;
}

}  // namespace tessera
