#include "apps/common/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <numeric>
#include <sstream>

#include "apps/common/builders.hpp"
#include "apps/common/memory_estimate.hpp"
#include "apps/common/node_memory.hpp"
#include "apps/common/stop_signal.hpp"
#include "kernels/device/memory.hpp"
#include "io/finite.hpp"
#include "io/schema.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/comm_timers.hpp"
#include "runtime/comm/halo_exchange.hpp"
#include "runtime/comm/fault_inject.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/tensor/tensor_math.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/train/vit.hpp"

namespace tessera::app {

unsigned init_seed(std::int64_t seed) {
  const auto s = static_cast<std::uint64_t>(seed);
  return static_cast<unsigned>(s ^ (s >> 32) * 0x9E3779B97F4A7C15ull);
}

UNetOptions unet_options(const TrainConfig& c, int spatial_dims, Index cin, Index cout,
                         MemSpace space) {
  UNetOptions o;
  o.nd = spatial_dims;
  o.in_channels = cin;
  o.out_channels = cout;
  o.width = c.model.width;
  o.depth = static_cast<int>(c.model.depth);
  o.kernel = c.model.kernel_size;
  o.norm = unet_norm(c.model.norm);
  o.groups = c.model.groups;
  o.activation = activation_by_name(c.model.activation);
  o.down = unet_down(c.model.down);
  o.up = unet_up(c.model.up);
  o.padding = unet_padding(c.model.padding);
  o.dtype = model_dtype(c.model);
  o.space = space;
  o.seed = init_seed(c.train.seed);
  return o;
}

FnoOptions fno_options(const TrainConfig& c, int spatial_dims, Index cin, Index cout,
                       MemSpace space) {
  FnoOptions o;
  o.nd = spatial_dims;
  o.in_channels = cin;
  o.out_channels = cout;
  o.width = c.model.width;
  o.layers = static_cast<int>(c.model.layers);
  TESSERA_CHECK(c.model.modes.size() == 1 || static_cast<int>(c.model.modes.size()) == spatial_dims,
                "model.modes has " << c.model.modes.size() << " values for " << spatial_dims
                                   << "-D fields: give one value for every dim, or one per dim");
  o.modes.assign(c.model.modes.begin(), c.model.modes.end());
  o.projection = c.model.projection;
  o.mode_sharded = c.model.weights == "mode_sharded";
  o.activation = activation_by_name(c.model.activation);
  o.dtype = model_dtype(c.model);
  o.space = space;
  o.seed = init_seed(c.train.seed);
  return o;
}

TransolverOptions transolver_options(const TrainConfig& c, int spatial_dims, bool points, Index cin,
                                     Index cout, MemSpace space) {
  TransolverOptions o;
  o.nd = spatial_dims;
  o.coordinates = !points;  // a point cloud's coordinates are input channels already
  o.in_channels = cin;
  o.out_channels = cout;
  o.width = c.model.width;
  o.layers = static_cast<int>(c.model.layers);
  o.heads = c.model.heads;
  o.slices = c.model.slices;
  o.dtype = model_dtype(c.model);
  o.space = space;
  o.seed = init_seed(c.train.seed);
  return o;
}

VitOptions vit_options(const TrainConfig& c, int spatial_dims, Index cin, Index cout,
                       MemSpace space, const std::vector<Index>& grid) {
  VitOptions o;
  o.nd = spatial_dims;
  o.in_channels = cin;
  o.out_channels = cout;
  o.patch = c.model.patch;
  o.dim = c.model.dim;
  o.depth = static_cast<int>(c.model.depth);
  o.heads = c.model.heads;
  if (c.model.attention == "neighbourhood")
    o.window = c.model.window;
  else
    o.attention = sequence_algorithm_from_name(c.model.attention);
  o.learned_positions = c.model.positions == "learned";
  if (o.learned_positions) {
    TESSERA_CHECK(static_cast<int>(grid.size()) == spatial_dims,
                  "model.positions = \"learned\" needs the training grid (a table per patch)");
    for (Index g : grid) o.position_grid.push_back(g / std::max<Index>(c.model.patch, 1));
  }
  o.dtype = model_dtype(c.model);
  o.space = space;
  o.seed = init_seed(c.train.seed);
  return o;
}

PointConvNetOptions point_conv_options(const TrainConfig& c, bool points, Index cin, Index cout,
                                       MemSpace space) {
  // The coordinates' channels: "coords" among the point inputs (each other one channel).
  int pos = -1, at = 0;
  for (const std::string& n : c.data.inputs) {
    if (n == "coords" && pos < 0) pos = at;
    at += n == "coords" ? 3 : 1;
  }
  TESSERA_CHECK(points && pos >= 0,
                "model.type = 'pointconv' needs a point cloud with \"coords\" among data.inputs "
                "(the neighbourhoods come from the coordinates)");
  PointConvNetOptions o;
  o.in_channels = cin;
  o.out_channels = cout;
  o.pos_offset = pos;
  o.width = c.model.width;
  o.layers = static_cast<int>(c.model.layers);
  o.neighbourhood.neighbours = c.model.neighbours;
  o.neighbourhood.radius = c.model.radius;
  o.dtype = model_dtype(c.model);
  o.space = space;
  o.seed = init_seed(c.train.seed);
  return o;
}

namespace {
std::unique_ptr<Model> build_model(const TrainConfig& c, int spatial_dims, Index cin, Index cout,
                                   MemSpace space, bool points, const std::vector<Index>& grid) {
  // Spectral and conv layers need a grid: over a point cloud's storage order they would
  // train on a meaningless 1-D signal.
  TESSERA_CHECK(
      !points || (c.model.type != "fno" && c.model.type != "unet" && c.model.type != "vit"),
      "model.type = '" << c.model.type
                       << "' takes grid fields, not point clouds (for points: "
                          "pointconv or transolver)");
  if (c.model.type == "fno") {
    const FnoOptions o = fno_options(c, spatial_dims, cin, cout, space);
    // Before the weights exist: modes far past the grid would allocate them first (a
    // typo's 1000 modes is gigabytes per layer).
    const std::string problem =
        static_cast<int>(grid.size()) == spatial_dims ? fno_modes_problem(o.modes, grid, 0) : "";
    TESSERA_CHECK(problem.empty(), "model.modes: the data's grid "
                                       << shape_str(grid) << " cannot take them: " << problem);
    return std::make_unique<Fno>(o);
  }
  if (c.model.type == "transolver")
    return std::make_unique<Transolver>(
        transolver_options(c, spatial_dims, points, cin, cout, space));
  if (c.model.type == "pointconv")
    return std::make_unique<PointConvNet>(point_conv_options(c, points, cin, cout, space));
  if (c.model.type == "vit")
    return std::make_unique<Vit>(vit_options(c, spatial_dims, cin, cout, space, grid));
  TESSERA_CHECK(c.model.type == "unet", "model.type = '" << c.model.type
                                                         << "' is not one of unet, fno, "
                                                            "transolver, pointconv, vit");
  return std::make_unique<UNet>(unet_options(c, spatial_dims, cin, cout, space));
}
}  // namespace

namespace {
// While alive: this rank's tracked allocations may not pass what it holds plus its share of
// the node's available memory (nor a lower TESSERA_MEMORY_LIMIT_MB). Host models only: a
// device model's parameters are refused by the device's own allocator.
class BuildBudget {
 public:
  BuildBudget(MPI_Comm comm, MemSpace space, int copies) : saved_(memory_limit()) {
    if (space != MemSpace::Host) return;
    // The built model holds 2 copies (values and gradients) of the `copies` the run will.
    copies = std::max(copies, 2);
    const double share = node_share_bytes(comm), budget = share * 2 / copies;
    const double cap = static_cast<double>(memory_stats(MemSpace::Host).current) + budget;
    if (saved_ != 0 && static_cast<double>(saved_) <= cap) return;
    std::ostringstream named;
    named << "this rank's share of the node's available memory for the parameters' values and "
             "gradients";
    if (copies > 2)
      named << " (2 of the " << copies << " copies training holds, with the optimizer's states, of "
            << memory_text(share) << ")";
    named << ", " << memory_text(budget);
    set_memory_limit(static_cast<std::size_t>(cap), named.str());
    set_ = true;
  }
  ~BuildBudget() {
    if (set_) set_memory_limit(saved_);
  }
  BuildBudget(const BuildBudget&) = delete;
  BuildBudget& operator=(const BuildBudget&) = delete;

 private:
  std::size_t saved_;
  bool set_ = false;
};
}  // namespace

std::string grid_problem_before_build(const TrainConfig& c, const std::vector<Index>& shape) {
  if (c.model.type != "vit") return "";
  return vit_grid_problem(shape, c.model.patch,
                          c.model.attention == "neighbourhood" ? c.model.window : 0);
}

std::unique_ptr<Model> make_model(MPI_Comm comm, int copies, const TrainConfig& c, int spatial_dims,
                                  Index cin, Index cout, MemSpace space, bool points,
                                  const std::vector<Index>& grid) {
  std::unique_ptr<Model> model;
  // A rank refused alone (its node's figure, or what it held) must not leave the others in
  // the caller's next collective: the verdict is every rank's.
  collective_run(comm, [&] {
    try {
      const BuildBudget budget(comm, space, copies);
      model = build_model(c, spatial_dims, cin, cout, space, points, grid);
    } catch (const AllocationError& e) {
      // The parameters come first, before any estimate can be made from the built model.
      throw Error("model.type = '" + c.model.type + "': its parameters do not fit this rank's " +
                  "memory (" + e.what() + "); a smaller model (model.width, model.dim, ...)");
    }
  });
  return model;
}

// ---------------------------------------------------------------------------- Sampler

Sampler::Sampler(Index n, Index batch, bool shuffle, std::uint64_t seed)
    : batch_(batch), shuffle_(shuffle), rng_(seed), perm_(static_cast<std::size_t>(n)) {
  TESSERA_CHECK(batch >= 1 && batch <= n, "sampler: batch " << batch << " of " << n << " samples");
  new_epoch();
  epoch_ = 0;
}

void Sampler::new_epoch() {
  std::iota(perm_.begin(), perm_.end(), Index{0});
  if (shuffle_)  // Fisher-Yates with our own draws: std::shuffle differs between libraries
    for (std::size_t i = perm_.size() - 1; i > 0; --i)
      std::swap(perm_[i], perm_[static_cast<std::size_t>(rng_() % (i + 1))]);
  cursor_ = 0;
  ++epoch_;
}

std::vector<Index> Sampler::next() {
  // The permutations are one stream: a batch that reaches an epoch's end takes the rest
  // from the next one, so every sample is drawn once per pass (dropping the tail left the
  // last samples out of every epoch without shuffling) and train.epochs counts passes.
  std::vector<Index> b;
  b.reserve(static_cast<std::size_t>(batch_));
  const Index n = static_cast<Index>(perm_.size());
  while (static_cast<Index>(b.size()) < batch_) {
    if (cursor_ >= n) {
      new_epoch();
      keep_out_of_head(b);
    }
    const Index take = std::min(batch_ - static_cast<Index>(b.size()), n - cursor_);
    b.insert(b.end(), perm_.begin() + cursor_, perm_.begin() + cursor_ + take);
    cursor_ += take;
  }
  return b;
}

void Sampler::keep_out_of_head(const std::vector<Index>& taken) {
  // A batch that spans two epochs must not draw a sample twice (a shuffle can put the old
  // epoch's last samples first in the new one): the new epoch's first positions that this
  // batch fills swap any sample already taken with the next one further on that is not.
  // The epoch stays a permutation, so every sample is still drawn once per pass.
  if (taken.empty()) return;
  std::vector<char> in_batch(perm_.size(), 0);
  for (Index s : taken) in_batch[static_cast<std::size_t>(s)] = 1;
  const std::size_t head = static_cast<std::size_t>(batch_) - taken.size();
  std::size_t next = head;
  for (std::size_t i = 0; i < head; ++i) {
    if (!in_batch[static_cast<std::size_t>(perm_[i])]) continue;
    while (in_batch[static_cast<std::size_t>(perm_[next])]) ++next;
    std::swap(perm_[i], perm_[next++]);
  }
}

std::string Sampler::state() const {
  std::ostringstream os;
  os << epoch_ << ' ' << cursor_ << ' ' << perm_.size();
  for (Index i : perm_) os << ' ' << i;
  os << ' ' << rng_;
  return os.str();
}

void Sampler::load_state(const std::string& s) {
  std::istringstream is(s);
  std::size_t n = 0;
  is >> epoch_ >> cursor_ >> n;
  TESSERA_CHECK(is && n == perm_.size(), "checkpoint: sampler state for "
                                             << n << " training samples, this run has "
                                             << perm_.size());
  for (Index& i : perm_) is >> i;
  is >> rng_;
  TESSERA_CHECK(!is.fail(), "checkpoint: unreadable sampler state");
}

// ---------------------------------------------------------------------------- Trainer

namespace {

Tensor vector_tensor(const std::vector<double>& v) {
  Tensor t = Tensor::empty({static_cast<Index>(v.size())}, DType::f64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

std::vector<double> tensor_vector(const Tensor& t) {
  const Tensor d = host_converted(t, DType::f64);
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

const Tensor* find(const std::vector<NamedTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

// The first non-finite value of a step, "" when all are finite: the loss, else the
// gradient of the first parameter holding one.
std::string nonfinite_step(double loss, double grad_norm_value,
                           const std::vector<NamedParameter>& params) {
  if (!std::isfinite(loss)) return "loss (" + std::to_string(loss) + ")";
  if (std::isfinite(grad_norm_value)) return "";
  std::vector<NamedTensor> grads;
  for (const auto& p : params) grads.push_back({p.name, p.param->grad});
  const std::string g = io::first_nonfinite(grads, "gradient of");
  return g.empty() ? "gradient norm (" + std::to_string(grad_norm_value) + ")" : g;
}

// Test faults inside a step on one rank (TESSERA_FAULT_INJECT=step.forward:2, ...).
void inject(const char* site) {
  if (fault_point(site))
    throw Error(std::string("injected fault at ") + site + " (TESSERA_FAULT_INJECT)");
}

}  // namespace

std::vector<NamedTensor> normalizer_buffers(const Normalizer& in, const Normalizer& out) {
  if (in.identity()) return {};
  return {{"data.input_mean", vector_tensor(in.mean)},
          {"data.input_std", vector_tensor(in.std)},
          {"data.target_mean", vector_tensor(out.mean)},
          {"data.target_std", vector_tensor(out.std)}};
}

namespace {
// A checkpoint's normalization must be usable: as many means as stds, finite means, finite
// positive stds (an edited or corrupt buffer would otherwise turn every prediction into NaN
// or silently rescale it).
void check_normalizer(const Normalizer& n, const char* mean_name, const char* std_name) {
  TESSERA_CHECK(n.mean.size() == n.std.size(), "checkpoint: " << mean_name << " has "
                                                              << n.mean.size() << " values, "
                                                              << std_name << " " << n.std.size());
  for (std::size_t k = 0; k < n.mean.size(); ++k) {
    TESSERA_CHECK(std::isfinite(n.mean[k]), "checkpoint: " << mean_name << "[" << k << "] = "
                                                           << n.mean[k] << " is not finite");
    TESSERA_CHECK(std::isfinite(n.std[k]) && n.std[k] > 0,
                  "checkpoint: " << std_name << "[" << k << "] = " << n.std[k]
                                 << ", not a positive finite number");
  }
}
}  // namespace

std::pair<Normalizer, Normalizer> normalizers_from(const std::vector<NamedTensor>& b,
                                                   bool normalized) {
  Normalizer in, out;
  const Tensor* t = find(b, "data.input_mean");
  TESSERA_CHECK(!normalized || t,
                "checkpoint: trained with data.normalize = true, but it holds "
                "no normalization (buffers/data.input_mean ...)");
  TESSERA_CHECK(normalized || !t,
                "checkpoint: trained with data.normalize = false, but it holds "
                "a normalization (buffers/data.input_mean ...)");
  if (t) {
    const char* names[] = {"data.input_std", "data.target_mean", "data.target_std"};
    for (const char* n : names)
      TESSERA_CHECK(find(b, n), "checkpoint: data.input_mean without " << n);
    in.mean = tensor_vector(*t);
    in.std = tensor_vector(*find(b, "data.input_std"));
    out.mean = tensor_vector(*find(b, "data.target_mean"));
    out.std = tensor_vector(*find(b, "data.target_std"));
    check_normalizer(in, "data.input_mean", "data.input_std");
    check_normalizer(out, "data.target_mean", "data.target_std");
  }
  return {in, out};
}

Trainer::Trainer(const Mesh& mesh, const TrainConfig& cfg, std::string config_text)
    : mesh_(mesh), cfg_(cfg), config_text_(std::move(config_text)) {
  if (config_text_.empty()) config_text_ = to_toml(cfg);
  check_complete(cfg_);
  Context* ctx = nullptr;
  try {
    ctx = &Context::current();
  } catch (const Error&) {
  }
  space_ = model_space(ctx ? ctx->device() : -1);
  const DType dtype = model_dtype(cfg.model);
  // Before any layer exists: the halo adjoint's order for every layer of the model.
  set_halo_deterministic_default(cfg.train.deterministic);

  FieldSet inputs, targets;
  {
    const io::File f = io::File::open(cfg.data.path, mesh.comm());
    io::schema::require_valid(f);
    inputs = field_set(f, cfg.data.inputs);
    targets = field_set(f, cfg.data.targets);
  }
  target_channels_ = targets.channels;
  // The shapes only: the values are read once the model, its optimizer and a step are known
  // to fit the node beside them.
  data_ =
      std::make_unique<GridData>(mesh, cfg.data.path, inputs, targets, dtype, GridData::Load::Later,
                                 cfg.data.stream ? GridData::Keep::Stream : GridData::Keep::Memory);
  const Index n = data_->samples();
  const Index bsz = cfg.train.batch_size;
  const Index n_val = std::min<Index>(
      n - 1, static_cast<Index>(std::llround(cfg.train.validation_split * double(n))));
  TESSERA_CHECK(n - n_val >= bsz,
                "train.batch_size = " << bsz << " is larger than the " << n - n_val
                                      << " training samples of " << cfg.data.path << " (" << n
                                      << " samples, " << n_val << " held out for validation)");
  const int data_ranks = data_->layout().data_axis >= 0 ? mesh.dim(data_->layout().data_axis) : 1;
  TESSERA_CHECK(bsz % data_ranks == 0,
                "train.batch_size = " << bsz << " is not divisible by the " << data_ranks
                                      << " ranks of the mesh's data axis (" << mesh.str() << ")");
  const Index acc = cfg.train.accumulate;
  TESSERA_CHECK(bsz % acc == 0,
                "train.batch_size = " << bsz << " is not divisible by train.accumulate = " << acc
                                      << " (micro-batches of equal size)");
  TESSERA_CHECK(micro_batch() % data_ranks == 0, "train.batch_size / train.accumulate = "
                                                     << micro_batch() << " samples a micro-batch "
                                                     << "is not divisible by the " << data_ranks
                                                     << " ranks of the mesh's data axis ("
                                                     << mesh.str() << ")");
  for (Index i = 0; i < n; ++i) (i < n - n_val ? train_ : val_).push_back(i);

  // The inputs as the file holds them (N samples, channels concatenated): what errors quote.
  std::vector<Index> shape = {n, data_->input_channels()};
  shape.insert(shape.end(), data_->spatial().begin(), data_->spatial().end());
  if (!data_->points()) {
    const std::string p = grid_problem_before_build(cfg, shape);
    TESSERA_CHECK(p.empty(), "dataset " << cfg.data.path << " (fields " << inputs.names[0]
                                        << "...): the model cannot take it: " << p);
  }
  model_ = make_model(mesh.comm(), 2 + optimizer_states(cfg.optim), cfg, data_->spatial_dims(),
                      data_->input_channels(), data_->target_channels(), space_, data_->points(),
                      data_->spatial());
  const std::string problem = model_->input_problem(shape);
  TESSERA_CHECK(problem.empty(), "dataset " << cfg.data.path << " (fields " << inputs.names[0]
                                            << "...): the model cannot take it: " << problem);

  // Sharded parameters take their blocks for the training batches' decomposition before the
  // optimizer and GradSync hold them. A forward and backward hold one micro-batch.
  const auto [x_spec, y_spec] = data_->batch_specs(micro_batch());
  model_->graph().ghost_room(cfg.train.ghost_room);
  model_->graph().recompute(cfg.train.recompute);
  model_->graph().bind(mesh, {x_spec});
  // Before the data, the optimizer's state and a step's activations are allocated: do they
  // fit the node?
  memory_ = estimate_training_memory(model_->graph(), x_spec, y_spec, dtype,
                                     optimizer_states(cfg.optim), data_->cache_bytes(), space_);
  check_memory_fits(mesh.comm(), memory_);
  data_->load();

  if (cfg.data.normalize) {
    const Normalizer in = data_->statistics(true, train_), out = data_->statistics(false, train_);
    data_->normalize(in, out);
  }
  // A zero target has no relative error: found now, not at the step that draws it.
  if (!cfg.train.resume) check_training_targets();

  sampler_ = std::make_unique<Sampler>(train_samples(), bsz, cfg.data.shuffle,
                                       static_cast<std::uint64_t>(cfg.train.seed));
  // train.epochs passes over the training split: the steps that draw that many samples.
  const Index n_train = train_samples();
  TESSERA_CHECK(
      cfg.train.steps > 0 ||
          cfg.train.epochs <= (std::numeric_limits<std::int64_t>::max() - (bsz - 1)) / n_train,
      "train.epochs = " << cfg.train.epochs << " of " << n_train
                        << " training samples overflows the step count");
  total_steps_ = cfg.train.steps;
  optimizer_ = make_optimizer(cfg.optim, model_->graph().parameters());
  schedule_ = make_schedule(cfg, total_steps_);
  count_passes_left();  // train.epochs: the steps that draw its passes
  loss_ = std::make_unique<Loss>(loss_kind(cfg.train));
  val_loss_ = std::make_unique<Loss>(loss_kind(cfg.train), LossOptions{{}, true});
  val_rel_l2_ = std::make_unique<Loss>(LossKind::RelativeL2, LossOptions{{}, true});

  // The loss is a mean over the global batch: gradients are summed over every axis that
  // splits the batch (the axes each layer declares: domain and data), in buckets started
  // as backward finishes each layer.
  std::vector<Parameter*> ps;
  for (const auto& np : model_->graph().parameters()) ps.push_back(np.param);
  sync_ = std::make_unique<GradSync>(mesh, ps, GradSyncOptions{{}, {}, std::size_t{4} << 20});
  model_->graph().on_grads_ready([this](const std::vector<Parameter*>& ready) {
    if (sync_as_ready_) sync_->mark_ready(ready);
  });
}

HaloWidths Trainer::input_room(std::size_t batch) {
  return model_->graph().input_room(0, mesh_,
                                    {data_->batch_specs(static_cast<Index>(batch)).first});
}

void Trainer::count_passes_left() {
  if (cfg_.train.steps > 0) return;
  const std::int64_t want = cfg_.train.epochs * static_cast<std::int64_t>(train_.size()),
                     drawn = sampler_->drawn(), bsz = cfg_.train.batch_size;
  total_steps_ = optimizer_->steps_taken() + (drawn < want ? (want - drawn + bsz - 1) / bsz : 0);
  schedule_ = make_schedule(cfg_, total_steps_);
}

void Trainer::check_training_targets() const {
  if (loss_kind(cfg_.train) != LossKind::RelativeL2) return;
  const std::vector<Index> zero = data_->zero_targets(train_);
  TESSERA_CHECK(zero.empty(),
                "train.loss = \"rel_l2\": the target of sample "
                    << (zero.empty() ? 0 : zero[0]) << " of " << cfg_.data.path
                    << " is zero everywhere" << (cfg_.data.normalize ? " after normalization" : "")
                    << " (" << zero.size()
                    << " such training samples): its relative error is undefined; leave it "
                       "out of the data, or use train.loss = \"mse\"");
}

StepResult Trainer::step() {
  device::reset_stats();
  std::vector<Index> idx = sampler_->next();
  for (Index& i : idx) i = train_[static_cast<std::size_t>(i)];
  // The step's micro-batches: consecutive runs of the batch (one, the batch, by default).
  const std::size_t micro = static_cast<std::size_t>(micro_batch());
  const std::size_t parts = idx.size() / micro;
  const auto load_part = [&](std::size_t k) {
    const std::vector<Index> sub(idx.begin() + static_cast<std::ptrdiff_t>(k * micro),
                                 idx.begin() + static_cast<std::ptrdiff_t>((k + 1) * micro));
    return data_->batch(sub, space_, input_room(sub.size()));
  };
  auto batch = load_part(0);  // (input, target)
  inject("step.batch");
  TESSERA_MPI(MPI_Barrier(mesh_.comm()));  // time this step, not the last one's stragglers
  comm_times() = {};
  sync_->reset_stats();
  const double t0 = MPI_Wtime();
  model_->train(true);
  model_->graph().set_grad_enabled(true);
  optimizer_->zero_grad();
  // The loss is the mean over the batch: each micro-batch's mean weighs 1 / parts, and so
  // does its gradient; gradients add up in the parameters and are all-reduced once, as the
  // last micro-batch's backward makes them.
  double loss_value = 0;
  for (std::size_t k = 0; k < parts; ++k) {
    if (k > 0) batch = load_part(k);
    const ShardTensor pred = model_->forward(batch.first);
    inject("step.forward");
    if (fault_point("step.sigkill")) std::raise(SIGKILL);  // a rank that dies mid-step
    if (fault_point("step.sigterm")) std::raise(SIGTERM);  // as scancel or a time limit does
    // SLURM's warning before a time limit (--signal=USR1@SECONDS), to one rank mid-step.
    if (fault_point("step.stop_signal")) {  // with "none", SIGUSR1 and its default action
      const int sig = stop_signal_number(cfg_.train.stop_signal);
      std::raise(sig != 0 ? sig : SIGUSR1);
    }
    LossResult l = (*loss_)(pred, batch.second);
    // A gradient gone NaN on one rank (as an overflow makes one), for the skip_step tests.
    if (fault_point("step.nonfinite"))
      scale_inplace(l.grad.local(), std::numeric_limits<double>::quiet_NaN());
    if (parts > 1) scale_inplace(l.grad.local(), 1.0 / static_cast<double>(parts));
    loss_value += l.value / static_cast<double>(parts);
    sync_as_ready_ = k + 1 == parts;
    model_->backward(l.grad);
    inject("step.backward");
  }
  sync_as_ready_ = true;
  sync_->finish();
  const auto& params = optimizer_->parameters();
  const double gn =
      cfg_.optim.grad_clip > 0 ? clip_grad_norm(params, cfg_.optim.grad_clip) : grad_norm(params);
  const double lr = schedule_.lr(optimizer_->steps_taken());
  StepResult r;
  // The loss and the gradients are the same on every rank (summed over the mesh), so every
  // rank takes the same decision here.
  const std::string bad = nonfinite_step(loss_value, gn, params);
  if (bad.empty()) {
    skips_in_a_row_ = 0;
    optimizer_->set_lr(lr);
    optimizer_->step();
  } else {
    const std::string what =
        "step " + std::to_string(optimizer_->steps_taken() + 1) + ": non-finite " + bad;
    if (cfg_.train.nonfinite != "skip_step")
      throw Error(what +
                  ": training stopped (train.nonfinite = \"stop\"; nothing of this step "
                  "was saved)");
    if (++skips_in_a_row_ > cfg_.train.max_skips)
      throw Error(what + ": training stopped after " + std::to_string(cfg_.train.max_skips) +
                  " skipped steps in a row (train.max_skips)");
    r.skipped = what + ": update skipped (" + std::to_string(skips_in_a_row_) + " in a row)";
    optimizer_->zero_grad();
    if (cfg_.train.steps == 0) {  // its batch was drawn: one step fewer reaches the passes
      count_passes_left();
      r.skipped += "; train.epochs = " + std::to_string(cfg_.train.epochs) +
                   " is drawn after step " + std::to_string(total_steps_);
    }
  }
  inject("step.update");
  // The slowest rank's split (maxima taken per part would not add up to the total).
  double t[4] = {MPI_Wtime() - t0, comm_times().halo_s,
                 comm_times().allreduce_s + sync_->stats().seconds, comm_times().alltoall_s};
  struct {
    double v;
    int rank;
  } slowest{t[0], mesh_.rank()};
  TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, mesh_.comm()));
  TESSERA_MPI(MPI_Bcast(t, 4, MPI_DOUBLE, slowest.rank, mesh_.comm()));
  r.t = {t[0], t[1], t[2], t[3]};
  r.step = optimizer_->steps_taken();
  r.loss = loss_value;
  r.lr = lr;
  r.grad_norm = gn;
  r.samples = static_cast<Index>(idx.size());
  r.dev = device::stats();
  return r;
}

EvalResult Trainer::validate() {
  EvalResult e;
  if (val_.empty()) {
    e.loss = e.rel_l2 = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  model_->train(false);
  model_->graph().set_grad_enabled(false);  // forward only: no saved tensors pile up
  double loss_weight = 0, rel_weight = 0;
  // In micro-batches: no more activations than a training step holds.
  const std::size_t bsz = static_cast<std::size_t>(micro_batch());
  for (std::size_t b0 = 0; b0 < val_.size(); b0 += bsz) {
    const std::vector<Index> idx(
        val_.begin() + static_cast<std::ptrdiff_t>(b0),
        val_.begin() + static_cast<std::ptrdiff_t>(std::min(val_.size(), b0 + bsz)));
    auto [x, y] = data_->batch(idx, space_, input_room(idx.size()));
    const ShardTensor pred = model_->forward(x);
    // Means weighted by the samples each covers (a relative error skips zero targets).
    const LossResult l = (*val_loss_)(pred, y, false);
    const double wl = loss_->kind() == LossKind::Mse ? static_cast<double>(idx.size())
                                                     : static_cast<double>(l.samples);
    e.loss += l.value * wl;
    loss_weight += wl;
    // The error in physical units: undo the target normalization on both.
    const Tensor p = pred.local().to(MemSpace::Host).clone(),
                 t = y.local().to(MemSpace::Host).clone();
    target_norm().invert(p);
    target_norm().invert_snapping_zero(t);  // a target zero in the file: skipped, not noise
    const LossResult r = (*val_rel_l2_)(ShardTensor::unchecked(mesh_, pred.spec(), p),
                                        ShardTensor::unchecked(mesh_, y.spec(), t), false);
    e.rel_l2 += r.value * static_cast<double>(r.samples);
    rel_weight += static_cast<double>(r.samples);
  }
  model_->train(true);
  model_->graph().set_grad_enabled(true);
  e.samples = val_samples();
  e.loss_samples = static_cast<Index>(std::llround(loss_weight));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  e.loss = loss_weight > 0 ? e.loss / loss_weight : nan;
  e.rel_l2 = rel_weight > 0 ? e.rel_l2 / rel_weight : nan;
  return e;
}

io::Checkpoint Trainer::checkpoint() const {
  io::Checkpoint c = checkpoint_entries();
  c.params = made(c.params);
  c.optimizer = made(c.optimizer);
  return c;
}

io::Checkpoint Trainer::checkpoint_entries() const {
  io::Checkpoint c;
  c.step = optimizer_->steps_taken();
  c.config = config_text_;
  c.rng = sampler_->state();
  c.model = model_->signature();
  c.params = parameter_entries(model_->graph());
  c.optimizer = optimizer_->state_entries();
  for (const auto& b : model_->buffers()) c.buffers.push_back({b.name, vector_tensor(b.value)});
  for (auto& t : normalizer_buffers(input_norm(), target_norm())) c.buffers.push_back(std::move(t));
  std::vector<double> tch(target_channels_.begin(), target_channels_.end());
  c.buffers.push_back({"data.target_channels", vector_tensor(tch)});
  // The grid trained on: inference rebuilds grid-shaped parameters (learned positions) from it.
  const std::vector<double> grid(data_->spatial().begin(), data_->spatial().end());
  c.buffers.push_back({"data.grid", vector_tensor(grid)});
  return c;
}

void Trainer::save(const std::string& path) const {
  io::save_checkpoint(path, mesh_.comm(), checkpoint_entries());  // one tensor whole at a time
}

void Trainer::restore(const io::Checkpoint& c) {
  TrainConfig then;
  std::string unparsed;  // why the checkpoint's config does not parse: damage
  try {
    then = parse_config(c.config, {}, "checkpoint");
  } catch (const Error& e) {
    unparsed = e.what();
  }
  // The fields in their order: the weights map these channels to those (the model's
  // signature sees only their counts, and a point model's where its coordinates start).
  const auto fields = [](const DataConfig& d) {
    std::string s;
    for (const auto& n : d.inputs) s += (s.empty() ? "'" : ", '") + n + "'";
    s += " -> ";
    for (std::size_t i = 0; i < d.targets.size(); ++i) s += (i ? ", '" : "'") + d.targets[i] + "'";
    return s;
  };
  TESSERA_CHECK(!unparsed.empty() || (then.data.inputs == cfg_.data.inputs &&
                                      then.data.targets == cfg_.data.targets),
                "the checkpoint was trained on the fields "
                    << fields(then.data) << " (data.inputs -> data.targets), this run reads "
                    << fields(cfg_.data) << ": resume with the checkpoint's fields");
  const std::string mine = model_->signature(), theirs = current_unet_signature(c.model);
  TESSERA_CHECK(theirs == mine, "checkpoint of another model ("
                                    << signature_difference(theirs, mine) << "): it has '" << theirs
                                    << "', the config builds '" << mine << "'");
  if (!unparsed.empty())
    throw io::DamagedCheckpoint("its config attribute does not parse: " + unparsed);
  // Settings the checkpoint's state was made under: another value is another run.
  TESSERA_CHECK(then.optim.name == cfg_.optim.name,
                "the checkpoint's optimizer state was written with optim.name = '"
                    << then.optim.name << "', this run sets '" << cfg_.optim.name
                    << "': resume with the checkpoint's optimizer settings, or start a new run "
                       "in another train.checkpoint_dir");
  TESSERA_CHECK(then.data.normalize == cfg_.data.normalize,
                "the checkpoint was trained with data.normalize = "
                    << (then.data.normalize ? "true" : "false") << " (its weights expect "
                    << (then.data.normalize ? "normalized" : "raw") << " data), this run sets "
                    << (cfg_.data.normalize ? "true" : "false")
                    << ": resume with the checkpoint's setting");
  TESSERA_CHECK(then.train.validation_split == cfg_.train.validation_split,
                "the checkpoint was trained with train.validation_split = "
                    << then.train.validation_split << " (its sampler draws from that split), "
                    << "this run sets " << cfg_.train.validation_split
                    << ": resume with the checkpoint's setting");
  // The seed made the weights and the shuffled order the checkpoint carries on; a resumed
  // run restores both, so another seed would change nothing but the config it records.
  TESSERA_CHECK(then.train.seed == cfg_.train.seed,
                "the checkpoint's run was seeded with train.seed = "
                    << then.train.seed << " (its weights and sampler state come from it), this "
                    << "run sets " << cfg_.train.seed
                    << ": resume with the checkpoint's seed, or start a new run in another "
                       "train.checkpoint_dir");
  // The training set: the sampler's permutation is of the checkpoint's sample count, so
  // another count is another dataset (a count it cannot read is damage, found below).
  {
    std::istringstream is(c.rng);
    std::int64_t epoch = 0, cursor = 0, n = 0;
    is >> epoch >> cursor >> n;
    TESSERA_CHECK(!is || n == static_cast<std::int64_t>(train_.size()),
                  "the checkpoint's run trained on "
                      << n << " training samples (data.path = '" << then.data.path
                      << "', train.validation_split = " << then.train.validation_split
                      << "), this run's '" << cfg_.data.path << "' gives " << train_.size()
                      << ": resume with the checkpoint's data, "
                         "or start a new run in another "
                         "train.checkpoint_dir");
  }
  Normalizer restored_in, restored_out;
  // The state itself: what fails to load here is damage (or a setting the state depends
  // on that changed), and a resumed run passes over this checkpoint.
  try {
    load_parameter_state(model_->graph(), c.params);
    optimizer_->load_state(c.optimizer);
    std::vector<Model::Buffer> bufs;
    for (const auto& b : c.buffers) bufs.push_back({b.name, tensor_vector(b.tensor)});
    model_->load_buffers(bufs);
    auto [in, out] = normalizers_from(c.buffers, then.data.normalize);
    sampler_->load_state(c.rng);
    // At this run's batch size, which an earlier resume may have changed (the checkpoint's
    // config holds only the last).
    count_passes_left();
    restored_in = in, restored_out = out;
  } catch (const io::DamagedCheckpoint&) {
    throw;
  } catch (const Error& e) {
    throw io::DamagedCheckpoint(std::string("its state does not load: ") + e.what());
  }
  // Last, with the checkpoint taken: the data normalized the checkpoint's way (the one its
  // weights expect). A failure here is the data's (read from the file again, or values past
  // the type once normalized), not the checkpoint's: it ends the run, as no older checkpoint
  // would train on a cache left half rescaled.
  if (restored_in.mean != input_norm().mean || restored_in.std != input_norm().std ||
      restored_out.mean != target_norm().mean || restored_out.std != target_norm().std)
    data_->renormalize(restored_in, restored_out);
  check_training_targets();  // as the checkpoint normalizes them
}

}  // namespace tessera::app
