// Ghost room on the tensor: a shard written into a padded buffer is exchanged in place (no
// copy of the shard, the exchange fills the producer's own buffer), the UNet gives bitwise
// the same forward, input gradient and parameter gradients with ghost room on and off at
// every decomposition while holding less memory, values whose consumers disagree get no
// room, and layers that take no room refuse it clearly.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/pool_layer.hpp"
#include "runtime/nn/upsample_layer.hpp"
#include "runtime/train/unet.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/grid_layouts.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/random_tensor.hpp"
#include "tests/support/unet_variants.hpp"

using namespace tessera;

namespace {

using test::same;

// Largest |a - b| / max |b| of two float64 tensors.
double rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  double num = 0, den = 1e-300;
  for (Index i = 0; i < x.numel(); ++i) {
    num = std::max(num, std::abs(x.data<double>()[i] - y.data<double>()[i]));
    den = std::max(den, std::abs(y.data<double>()[i]));
  }
  return num / den;
}

// A float64 2 -> 2 channel conv of odd kernel k with "same" zero padding.
std::shared_ptr<ConvNd> same_conv(Index k, unsigned seed) {
  ConvOptions c;
  c.nd = 2;
  c.in_channels = 2;
  c.out_channels = 2;
  c.kernel = {k};
  c.padding = {k / 2};
  c.dtype = DType::f64;
  c.seed = seed;
  return std::make_shared<ConvNd>(c);
}

// Whether dims shard a spatial dim (2 and beyond) over more than one rank.
bool spatially_sharded(const Mesh& mesh, const std::vector<Placement>& dims) {
  for (std::size_t d = 2; d < dims.size(); ++d)
    if (dims[d].sharded() && mesh.dim(dims[d].axis) > 1) return true;
  return false;
}

struct Step {
  Tensor y, dx;
  std::vector<Tensor> grads;
  int in_room = 0;
  std::size_t peak = 0;
};

Step unet_step(const UNetOptions& o, const Mesh& mesh, const std::vector<Placement>& dims,
               const Tensor& x_full, const Tensor& dy_full, bool room) {
  UNet net(o);
  net.graph().ghost_room(room);
  const ShardTensor x = ShardTensor::scatter(mesh, x_full, ShardSpec(x_full.shape(), dims, mesh));
  reset_peak_memory(MemSpace::Host);
  const std::size_t base = memory_stats(MemSpace::Host).current;
  const ShardTensor y = net.forward(x);
  const int in_room = net.graph().values_in_room();
  const ShardTensor dy = ShardTensor::scatter(mesh, dy_full, y.spec());
  const ShardTensor dx = net.backward(dy);
  Step s{y.gather_all(), dx.gather_all(), {}, in_room, memory_stats(MemSpace::Host).peak - base};
  MPI_CHECK(!y.has_room() && !dx.has_room());  // callers get plain shards
  for (const auto& p : net.graph().parameters()) s.grads.push_back(p.param->grad.clone());
  return s;
}

}  // namespace

TEST_CASE("A shard in ghost room is exchanged in place", "[ghost_room]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {2, 3, 13, 7};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  const Tensor full = test::random_tensor(shape, DType::f64, 11);
  const ShardTensor plain = ShardTensor::scatter(mesh, full, spec);
  const HaloWidths widths({0, 0, 2, 1}, {0, 0, 1, 1});
  const ShardTensor roomy =
      ShardTensor::with_room(mesh, spec, {0, 0, 2, 1}, {0, 0, 1, 1}, DType::f64, MemSpace::Host);
  MPI_CHECK(roomy.has_room() && !plain.has_room());
  MPI_CHECK(roomy.local().shape() == plain.local().shape());
  MPI_CHECK(roomy.room().numel() > roomy.local().numel());
  roomy.local().copy_from(plain.local());
  HaloOptions opts;
  HaloExchange ex(mesh, spec, widths, opts);
  // Room that fits: the exchange runs on the shard's own buffer.
  HaloTensor in_place = HaloTensor::over(roomy, widths);
  MPI_CHECK(in_place.padded().same_storage(roomy.room()));
  ex.exchange(in_place);
  HaloTensor copied = HaloTensor::from_shard(plain, widths);
  ex.exchange(copied);
  MPI_CHECK(same(in_place.padded(), copied.padded()));
  MPI_CHECK(same(roomy.without_room().local(), plain.local()));
  MPI_CHECK(roomy.without_room().local().is_contiguous());
  // Gather and redistribution read a shard in room as a plain one.
  MPI_CHECK(same(roomy.gather_all(), full));
  const ShardSpec cols(shape, {Replicate(), Replicate(), Replicate(), Shard(0)}, mesh);
  MPI_CHECK(same(roomy.redistribute(cols).local(), plain.redistribute(cols).local()));
  const Tensor at_root = roomy.gather(0);
  MPI_CHECK(mesh.rank() != 0 || same(at_root, full));
  // Room of other widths: a padded copy, the same values.
  const HaloWidths wider({0, 0, 3, 1}, {0, 0, 3, 1});
  HaloExchange ex2(mesh, spec, wider, opts);
  HaloTensor other = HaloTensor::over(roomy, wider);
  MPI_CHECK(!other.padded().same_storage(roomy.room()));
  ex2.exchange(other);
  HaloTensor other_ref = HaloTensor::from_shard(plain, wider);
  ex2.exchange(other_ref);
  MPI_CHECK(same(other.padded(), other_ref.padded()));
  // A buffer that does not hold the shard is refused.
  const Box own = spec.local_box(mesh.coords());
  MPI_CHECK_ERROR(ShardTensor::in_room(mesh, spec, Tensor::zeros({1}, DType::f64), own),
                  "does not hold the shard");
}

TEST_CASE("UNet with ghost room == without, bitwise, in less memory", "[ghost_room]") {
  for (const int variant : {0, 1, 2}) {
    const bool strided = variant == 1;
    UNetOptions o = strided ? test::unet_strided_batchnorm() : test::unet_pool_groupnorm();
    // Reflect padding: each conv's Pad reads the activation before it.
    if (variant == 2) o.padding = PaddingMode::Reflect;
    const std::vector<Index> shape = {2, o.in_channels, 32, 12};
    const Tensor x = test::random_tensor(shape, DType::f64, 3);
    const Tensor dy = test::random_tensor({2, o.out_channels, 32, 12}, DType::f64, 5);
    for (const auto& [mesh, dims] : test::grid_layouts()) {
      INFO("mesh " << mesh.str() << (strided ? ", strided conv" : ", pool")
                   << (variant == 2 ? ", reflect padding" : ""));
      const Step plain = unet_step(o, mesh, dims, x, dy, false);
      const Step room = unet_step(o, mesh, dims, x, dy, true);
      MPI_CHECK(plain.in_room == 0);
      // Activations feeding a conv that exchanges halos are written into room (with reflect
      // padding the conv reads its Pad's output: room only where the Pad exchanges).
      if (variant < 2) MPI_CHECK((room.in_room > 0) == (spatially_sharded(mesh, dims)));
      MPI_CHECK(same(room.y, plain.y));
      MPI_CHECK(same(room.dx, plain.dx));
      MPI_REQUIRE(room.grads.size() == plain.grads.size());
      bool grads_equal = true;
      for (std::size_t i = 0; i < room.grads.size(); ++i)
        grads_equal = grads_equal && same(room.grads[i], plain.grads[i]);
      MPI_CHECK(grads_equal);
      INFO("peak bytes with room " << room.peak << ", without " << plain.peak);
      MPI_CHECK(room.peak <= plain.peak);
    }
  }
}

TEST_CASE("Values whose consumers want different room get none", "[ghost_room]") {
  // act feeds a 3x3 and a 5x5 conv: their exchanges differ, so act's output is plain; the
  // second act feeds one conv and gets room.
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const Mesh one = Mesh::line(MPI_COMM_SELF);
  const std::vector<Index> shape = {1, 2, 24, 6};
  const Tensor xf = test::random_tensor(shape, DType::f64, 7);
  const Tensor dyf = test::random_tensor({1, 2, 24, 6}, DType::f64, 8);
  auto run = [&](const Mesh& m, std::vector<Placement> dims, int& in_room) {
    Graph g;
    const Value x = g.input("x");
    const Value a = g.layer("act", std::make_shared<ActivationLayer>(kernels::Activation::GELU), x);
    const Value c3 = g.layer("c3", same_conv(3, 1), a);
    const Value c5 = g.layer("c5", same_conv(5, 2), a);
    const Value s = g.add("sum", c3, c5);
    const Value b =
        g.layer("act2", std::make_shared<ActivationLayer>(kernels::Activation::SiLU), s);
    g.output(g.layer("c3b", same_conv(3, 3), b));
    const ShardTensor xs = ShardTensor::scatter(m, xf, ShardSpec(shape, dims, m));
    const ShardTensor y = g.forward(xs);
    in_room = g.values_in_room();
    const ShardTensor dx = g.backward(ShardTensor::scatter(m, dyf, y.spec()));
    std::vector<Tensor> out = {y.gather_all(), dx.gather_all()};
    std::vector<Parameter*> ps;
    for (const auto& p : g.parameters()) ps.push_back(p.param);
    sync_grads(m, ps);  // the layers' local shares summed
    for (Parameter* p : ps) out.push_back(p->grad.clone());
    return out;
  };
  const std::vector<Placement> slab = {Replicate(), Replicate(), Shard(0), Replicate()};
  int rooms_ref = 0, rooms = 0;
  const auto ref = run(one, std::vector<Placement>(4, Replicate()), rooms_ref);
  const auto got = run(mesh, slab, rooms);
  MPI_CHECK(rooms_ref == 0);
  MPI_CHECK(rooms == (test::world_size() > 1 ? 1 : 0));
  MPI_REQUIRE(got.size() == ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, rel_diff(got[i], ref[i]));
  MPI_CHECK(worst < 1e-12);
}

namespace {
// A graph (built by `build` on input x, returning its output) run on one rank and sharded
// over a line of ranks with room on and off: results == one rank, bitwise equal with and
// without room, and `in_room` values (sharded, with room) written into room.
void check_room_graph(const std::vector<Index>& shape, unsigned seed,
                      const std::function<Value(Graph&, Value)>& build, int in_room) {
  const Tensor xf = test::random_tensor(shape, DType::f64, seed);
  auto run = [&](const Mesh& m, const std::vector<Placement>& dims, bool room, int& values) {
    Graph g;
    g.ghost_room(room);
    g.output(build(g, g.input("x")));
    const ShardTensor y = g.forward(ShardTensor::scatter(m, xf, ShardSpec(shape, dims, m)));
    values = g.values_in_room();
    const Tensor dyf = test::random_tensor(y.global_shape(), DType::f64, seed + 1);
    const ShardTensor dx = g.backward(ShardTensor::scatter(m, dyf, y.spec()));
    return std::vector<Tensor>{y.gather_all(), dx.gather_all()};
  };
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Placement> slab = {Replicate(), Replicate(), Shard(0), Replicate()};
  int r0 = 0, r1 = 0, r2 = 0;
  const auto ref = run(Mesh::line(MPI_COMM_SELF), std::vector<Placement>(4, Replicate()), true, r0);
  const auto plain = run(mesh, slab, false, r1);
  const auto room = run(mesh, slab, true, r2);
  MPI_CHECK(r0 == 0 && r1 == 0);
  MPI_CHECK(r2 == (test::world_size() > 1 ? in_room : 0));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    MPI_CHECK(rel_diff(room[i], ref[i]) < 1e-12);
    MPI_CHECK(same(room[i], plain[i]));
  }
}
}  // namespace

TEST_CASE("Pooling and upsampling read their input in room", "[ghost_room]") {
  // act -> max pool 3x3 stride 2 (halo 1) and act -> linear upsample (halo 1): each act
  // writes into its consumer's room.
  check_room_graph(
      {2, 2, 20, 6}, 17,
      [](Graph& g, Value x) {
        const Value a =
            g.layer("act", std::make_shared<ActivationLayer>(kernels::Activation::GELU), x);
        PoolOptions po;
        po.kernel = {3, 3};
        po.stride = {2, 2};
        po.pad_lo = {1, 1};
        const Value p = g.layer("pool", std::make_shared<Pool>(po), a);
        const Value b =
            g.layer("act2", std::make_shared<ActivationLayer>(kernels::Activation::Tanh), p);
        UpsampleOptions uo;
        uo.mode = UpsampleOptions::Mode::Linear;
        uo.scale = {2, 2};
        return g.layer("up", std::make_shared<Upsample>(uo), b);
      },
      2);
}

TEST_CASE("A reflect-padded conv's Pad reads its input in room", "[ghost_room]") {
  // act -> conv 3x3 with reflect padding 3/0 x 1/1: its Pad's output blocks (the padded
  // extent split evenly) read cells of the neighbour below at every rank count > 1, so the
  // act writes into the Pad's room.
  check_room_graph(
      {1, 2, 20, 6}, 19,
      [](Graph& g, Value x) {
        const Value a =
            g.layer("act", std::make_shared<ActivationLayer>(kernels::Activation::GELU), x);
        ConvOptions c;
        c.nd = 2;
        c.in_channels = c.out_channels = 2;
        c.kernel = {3};
        c.padding = {3, 1};
        c.padding_hi = {0, 1};
        c.padding_mode = PaddingMode::Reflect;
        c.dtype = DType::f64;
        c.seed = 4;
        return g.layer("conv", std::make_shared<ConvNd>(c), a);
      },
      1);
}

TEST_CASE("Layers that take no ghost room say so", "[ghost_room]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {1, 2, 8, 4};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  const ShardTensor roomy =
      ShardTensor::with_room(mesh, spec, {0, 0, 1, 1}, {0, 0, 1, 1}, DType::f64, MemSpace::Host);
  roomy.local().zero();
  ActivationLayer act(kernels::Activation::ReLU);
  MPI_CHECK_ERROR(act.forward(roomy), "ghost room");
  const std::shared_ptr<ConvNd> conv = same_conv(3, 0);
  // A conv takes an input in room (the copy path when the room is not its plan's)...
  const ShardTensor y = conv->forward(roomy);
  MPI_CHECK(!y.has_room());
  // ... but not an output gradient in room.
  const ShardTensor dy_room = ShardTensor::with_room(mesh, y.spec(), {0, 0, 1, 0}, {0, 0, 1, 0},
                                                     DType::f64, MemSpace::Host);
  MPI_CHECK_ERROR(conv->backward(dy_room), "ghost room");
}

TEST_CASE("A graph input written into the room the graph asks for is exchanged in place",
          "[ghost_room]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Index> shape = {2, 2, 24, 6};
  const ShardSpec spec(shape, {Replicate(), Replicate(), Shard(0), Replicate()}, mesh);
  const Tensor xf = test::random_tensor(shape, DType::f64, 17);
  const ShardTensor plain = ShardTensor::scatter(mesh, xf, spec);
  Graph g;
  const Value x = g.input("x");
  g.output(g.layer("act", std::make_shared<ActivationLayer>(kernels::Activation::GELU),
                   g.layer("c3", same_conv(3, 4), x)));
  const HaloWidths room = g.input_room(0, mesh, {spec});
  // One rank exchanges nothing: no room wanted.
  MPI_REQUIRE(room.empty() == (test::world_size() == 1));
  // Empty widths (no room wanted) are not a room to write into: said so, not "no widths for
  // block 0".
  MPI_CHECK_ERROR(ShardTensor::with_room(mesh, spec, HaloWidths(), DType::f64, MemSpace::Host),
                  "with_room: no widths given (Graph::input_room gives none");
  if (room.empty()) return;
  const ShardTensor roomy = ShardTensor::with_room(mesh, spec, room, DType::f64, MemSpace::Host);
  roomy.local().copy_from(plain.local());
  const ShardTensor y_plain = g.forward(plain);
  const ShardTensor y_room = g.forward(roomy);
  MPI_CHECK(same(y_room.local(), y_plain.local()));
  // The exchange wrote the neighbours' rows into the input's own ghost slabs.
  double padded_sum = 0;
  const Tensor padded = roomy.room();
  for (Index i = 0; i < padded.numel(); ++i) padded_sum += std::abs(padded.data<double>()[i]);
  double interior = 0;
  const Tensor in = roomy.local().contiguous();
  for (Index i = 0; i < in.numel(); ++i) interior += std::abs(in.data<double>()[i]);
  MPI_CHECK((padded_sum > interior) == (plain.local_box().extent(2) > 0));

  // Consumers that want different room, or ghost room off: the input stays plain.
  Graph two;
  const Value x2 = two.input("x");
  two.output(
      two.add("sum", two.layer("c3", same_conv(3, 1), x2), two.layer("c5", same_conv(5, 2), x2)));
  MPI_CHECK(two.input_room(0, mesh, {spec}).empty());
  g.ghost_room(false);
  MPI_CHECK(g.input_room(0, mesh, {spec}).empty());
}
