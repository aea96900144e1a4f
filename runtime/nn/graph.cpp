#include "runtime/nn/graph.hpp"

#include <algorithm>
#include <atomic>
#include <set>
#include <sstream>

#include "decomp/hash.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/fault_inject.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

ShardTensor zeros_like_spec(const Mesh& mesh, const ShardSpec& spec, DType dt, MemSpace space) {
  return ShardTensor::unchecked(mesh, spec,
                                Tensor::zeros(spec.local_shape(mesh.coords()), dt, space));
}

std::string kind_name(Graph::Kind k) {
  switch (k) {
    case Graph::Kind::Input:
      return "input";
    case Graph::Kind::Layer:
      return "layer";
    case Graph::Kind::Concat:
      return "concat";
    case Graph::Kind::Add:
      return "add";
    case Graph::Kind::Op:
      return "op";
  }
  return "?";
}

// Forward tickets: one per Graph::forward in the process, so a layer shared by two graphs
// knows which graph's forward it last ran.
std::uint64_t next_forward_ticket() {
  static std::atomic<std::uint64_t> next{0};
  return ++next;
}

}  // namespace

std::uint64_t& Graph::ticket_of(const Node& n) {
  if (n.layer) return n.layer->forward_ticket_;
  if (const auto* lo = dynamic_cast<const LayerOp*>(n.op.get()))
    return lo->layer()->forward_ticket_;
  return n.op->forward_ticket_;
}

int Graph::add_node(Node n) {
  for (const Node& m : nodes_)
    TESSERA_CHECK(m.name != n.name, "Graph: a node named '" << n.name << "' exists already");
  TESSERA_CHECK(!n.name.empty(), "Graph: node names must not be empty");
  for (int in : n.inputs)
    TESSERA_CHECK(in >= 0 && in < num_nodes(), "Graph: node '"
                                                   << n.name << "' takes value " << in
                                                   << ", which is not a node of this graph");
  // One object, one node: a layer added both as a layer and inside a LayerOp included.
  // (the ticket lives in the object holding the state: its address names that object).
  if (n.kind != Kind::Input)
    for (const Node& m : nodes_)
      TESSERA_CHECK(m.kind == Kind::Input || &ticket_of(m) != &ticket_of(n),
                    "Graph: the " << (n.kind == Kind::Layer ? "layer" : "op") << " of node '"
                                  << n.name << "' is already node '" << m.name
                                  << "'; a layer or op object keeps one forward's state, use two");
  if (n.kind != Kind::Input) n.segment = open_segment_;
  nodes_.push_back(std::move(n));
  forwarded_ = false;
  return num_nodes() - 1;
}

int Graph::begin_segment() {
  TESSERA_CHECK(open_segment_ < 0,
                "Graph::begin_segment: segment "
                    << open_segment_ << " is still open (end_segment first: segments do not nest)");
  open_segment_ = segments_++;
  return open_segment_;
}

void Graph::end_segment() {
  TESSERA_CHECK(open_segment_ >= 0, "Graph::end_segment: no segment is open");
  const int s = open_segment_;
  open_segment_ = -1;
  const bool any =
      std::any_of(nodes_.begin(), nodes_.end(), [s](const Node& nd) { return nd.segment == s; });
  if (!any) --segments_;
  TESSERA_CHECK(any, "Graph::end_segment: segment " << s << " holds no node");
  forwarded_ = false;
}

bool Graph::ends_segment(std::size_t id) const {
  const int s = nodes_[id].segment;
  return s >= 0 && (id + 1 == nodes_.size() || nodes_[id + 1].segment != s);
}

std::vector<std::vector<int>> Graph::segment_inputs() const {
  std::vector<std::vector<int>> in(static_cast<std::size_t>(segments_));
  for (const Node& nd : nodes_) {
    if (nd.segment < 0) continue;
    std::vector<int>& v = in[static_cast<std::size_t>(nd.segment)];
    for (int i : nd.inputs)
      if (nodes_[static_cast<std::size_t>(i)].segment != nd.segment &&
          std::find(v.begin(), v.end(), i) == v.end())
        v.push_back(i);
  }
  return in;
}

const Graph::Node& Graph::node(Value v, const char* what) const {
  TESSERA_CHECK(v.id >= 0 && v.id < num_nodes(), "Graph::" << what << ": no value " << v.id);
  return nodes_[static_cast<std::size_t>(v.id)];
}

Value Graph::input(const std::string& name) {
  TESSERA_CHECK(open_segment_ < 0, "Graph::input '" << name << "': inside recompute segment "
                                                    << open_segment_
                                                    << " (a segment holds ops only)");
  const int id = add_node(Node{Kind::Input, name, nullptr, nullptr, {}, {}});
  inputs_.push_back(id);
  return Value{id};
}

Value Graph::layer(const std::string& name, std::shared_ptr<Layer> l, Value x) {
  TESSERA_CHECK(l != nullptr, "Graph: layer node '" << name << "' has no layer");
  auto op = std::make_shared<LayerOp>(l);
  return Value{add_node(Node{Kind::Layer, name, std::move(op), std::move(l), {x.id}, {}})};
}

Value Graph::concat(const std::string& name, Value a, Value b) {
  return Value{add_node(
      Node{Kind::Concat, name, std::make_shared<ConcatOp>(name), nullptr, {a.id, b.id}, {}})};
}

Value Graph::add(const std::string& name, Value a, Value b) {
  return Value{
      add_node(Node{Kind::Add, name, std::make_shared<AddOp>(name), nullptr, {a.id, b.id}, {}})};
}

Value Graph::op(const std::string& name, std::shared_ptr<Op> o, const std::vector<Value>& inputs) {
  TESSERA_CHECK(o != nullptr, "Graph: op node '" << name << "' has no op");
  TESSERA_CHECK(!inputs.empty(), "Graph: op node '" << name << "' takes no input");
  std::vector<int> ids;
  for (const Value& v : inputs) ids.push_back(v.id);
  return Value{add_node(Node{Kind::Op, name, std::move(o), nullptr, std::move(ids), {}})};
}

void Graph::output(Value v) {
  node(v, "output");
  outputs_.push_back(v.id);
}

std::vector<ShardTensor> Graph::forward(const std::vector<ShardTensor>& inputs) {
  TESSERA_CHECK(inputs.size() == inputs_.size(),
                "Graph::forward: " << inputs_.size() << " inputs expected, got " << inputs.size());
  TESSERA_CHECK(!outputs_.empty(), "Graph::forward: no outputs marked");
  TESSERA_CHECK(open_segment_ < 0,
                "Graph::forward: recompute segment " << open_segment_ << " is still open");
  const std::size_t n = nodes_.size();
  values_.assign(n, ShardTensor());
  value_specs_.assign(n, ShardSpec());
  grads_.clear();
  grad_owned_.clear();
  forwarded_ = false;
  // Consumers left per value; a value is freed when it reaches zero.
  std::vector<int> uses(n, 0);
  for (const Node& nd : nodes_)
    for (int in : nd.inputs) ++uses[static_cast<std::size_t>(in)];
  std::vector<bool> keep(n, keep_values_);
  for (int o : outputs_) keep[static_cast<std::size_t>(o)] = true;
  for (int i : inputs_) keep[static_cast<std::size_t>(i)] = true;
  for (std::size_t k = 0; k < inputs_.size(); ++k)
    values_[static_cast<std::size_t>(inputs_[k])] = inputs[k];
  mesh_ = inputs.front().mesh();
  // Recompute: each segment's inputs stay until its replay in backward.
  const bool release_segments = recompute_ && grad_enabled_ && segments_ > 0;
  replays_left_.assign(n, 0);
  segment_inputs_.clear();
  if (release_segments) segment_inputs_ = segment_inputs();
  for (const std::vector<int>& in : segment_inputs_)
    for (int i : in) {
      ++replays_left_[static_cast<std::size_t>(i)];
      keep[static_cast<std::size_t>(i)] = true;
    }
  replaying_forward_ = false;

  std::vector<ShardSpec> in_specs;
  for (const ShardTensor& t : inputs) in_specs.push_back(t.spec());
  rooms_for(in_specs);
  values_in_room_ = 0;
  ticket_ = next_forward_ticket();
  backwards_ = 0;
  for (std::size_t id = 0; id < n; ++id) {
    Node& nd = nodes_[id];
    if (nd.kind != Kind::Input) ticket_of(nd) = ticket_;
    nd.input_specs.clear();
    for (int in : nd.inputs) nd.input_specs.push_back(values_[static_cast<std::size_t>(in)].spec());
    ShardTensor out;
    if (nd.kind == Kind::Input) {
      out = values_[id];
    } else {
      std::vector<const ShardTensor*> in;
      for (int v : nd.inputs) in.push_back(&values_[static_cast<std::size_t>(v)]);
      out = run_op(id, in, rooms_);
      values_in_room_ += out.has_room();
      if (!grad_enabled_) nd.op->release_saved();
      // Tests: an exception in the middle of a forward pass on one rank.
      if (fault_point("layer"))
        throw Error("injected fault in layer '" + nd.name + "' (TESSERA_FAULT_INJECT)");
      // Every rank sees the same specs, so this check is consistent across ranks.
      const ShardSpec want = nd.op->output_spec(nd.input_specs);
      TESSERA_CHECK(out.spec() == want, kind_name(nd.kind)
                                            << " node '" << nd.name << "' (" << nd.op->name()
                                            << ") returned " << out.spec().str()
                                            << " but its output_spec says " << want.str());
    }
    value_specs_[id] = out.spec();
    values_[id] = std::move(out);
    for (int in : nd.inputs) {
      const auto i = static_cast<std::size_t>(in);
      if (--uses[i] == 0 && !keep[i]) values_[i] = ShardTensor();
    }
    // A segment that has run drops what its ops saved: backward replays it.
    if (release_segments && ends_segment(id))
      for (std::size_t k = id + 1; k-- > 0 && nodes_[k].segment == nd.segment;)
        nodes_[k].op->release_saved();
  }
  forwarded_ = true;
  forwarded_with_grad_ = grad_enabled_;
  replaying_forward_ = release_segments;
  // The replays use this forward's rooms (input_room() may rebuild the cache meanwhile).
  if (release_segments) replay_rooms_ = rooms_;
  std::vector<ShardTensor> outs;
  for (int o : outputs_) outs.push_back(values_[static_cast<std::size_t>(o)]);
  return outs;
}

ShardTensor Graph::run_op(std::size_t id, const std::vector<const ShardTensor*>& values,
                          const Rooms& rooms) {
  Node& nd = nodes_[id];
  const std::vector<HaloWidths>& wants = rooms.wants[id];
  const HaloWidths& room = rooms.of_value[id];
  std::vector<ShardTensor> in;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const ShardTensor& v = *values[k];
    // Only an op that wants room is handed a value with room (a caller's input may have it).
    in.push_back(v.has_room() && wants[k].empty() ? v.without_room() : v);
  }
  return room.empty() ? nd.op->forward(in) : nd.op->forward_into_room(in, room);
}

void Graph::replay_segment(std::size_t last) {
  const int s = nodes_[last].segment;
  std::size_t first = last;
  while (first > 0 && nodes_[first - 1].segment == s) --first;
  // Gradients enter a segment from after it: none so far, none at all (a branch to an output
  // without gradient). Then no replay (its saved state would outlive backward).
  bool reached = false;
  for (std::size_t id = first; id <= last; ++id) reached = reached || grads_[id].local().defined();
  if (reached) run_replay(first, last);
  // A kept input goes once every segment that takes it has replayed (or been passed over).
  for (int v : segment_inputs_[static_cast<std::size_t>(s)]) {
    const auto i = static_cast<std::size_t>(v);
    const bool held = keep_values_ || nodes_[i].kind == Kind::Input ||
                      std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
    if (--replays_left_[i] == 0 && !held) values_[i] = ShardTensor();
  }
}

void Graph::run_replay(std::size_t first, std::size_t last) {
  const auto inside = [&](int v) {
    return static_cast<std::size_t>(v) >= first && static_cast<std::size_t>(v) <= last;
  };
  std::vector<ShardTensor> local(last - first + 1);
  std::vector<int> uses(local.size(), 0);  // consumers left within the segment
  for (std::size_t id = first; id <= last; ++id)
    for (int v : nodes_[id].inputs)
      if (inside(v)) ++uses[static_cast<std::size_t>(v) - first];
  for (std::size_t id = first; id <= last; ++id) {
    Node& nd = nodes_[id];
    std::vector<const ShardTensor*> in;
    for (int v : nd.inputs) {
      const auto i = static_cast<std::size_t>(v);
      in.push_back(inside(v) ? &local[i - first] : &values_[i]);
      TESSERA_CHECK(in.back()->local().defined(), "Graph::backward: replaying node '"
                                                      << nd.name << "': its input '"
                                                      << nodes_[i].name << "' was not kept");
    }
    struct ReplayOff {  // the op leaves replay mode also when its forward throws
      Op& op;
      ~ReplayOff() { op.set_replay(false); }
    };
    nd.op->set_replay(true);
    const ReplayOff off{*nd.op};
    local[id - first] = run_op(id, in, replay_rooms_);
    for (int v : nd.inputs)
      if (inside(v) && --uses[static_cast<std::size_t>(v) - first] == 0)
        local[static_cast<std::size_t>(v) - first] = ShardTensor();
  }
}

ShardTensor Graph::forward(const ShardTensor& x) {
  TESSERA_CHECK(inputs_.size() == 1 && outputs_.size() == 1, "Graph::forward(x): the graph has "
                                                                 << inputs_.size() << " inputs and "
                                                                 << outputs_.size() << " outputs");
  return forward(std::vector<ShardTensor>{x}).front();
}

void Graph::accumulate(int value, ShardTensor g) {
  const auto v = static_cast<std::size_t>(value);
  if (!g.local().defined()) return;
  if (g.spec() != value_specs_[v]) g = g.without_room().redistribute(value_specs_[v]);
  if (!grads_[v].local().defined() && g.has_room()) {
    // A gradient left in its ghost frame: kept as is; a second contribution copies it first.
    grad_owned_[v] = false;
    grads_[v] = std::move(g);
    return;
  }
  if (!grads_[v].local().defined()) {
    // The first contribution may share storage with another value's gradient (add's
    // backward, a layer passing dy through): keep it, copy before adding into it.
    grad_owned_[v] = !g.local().is_contiguous();
    grads_[v] =
        grad_owned_[v] ? ShardTensor::unchecked(mesh_, g.spec(), g.local().clone()) : std::move(g);
    return;
  }
  if (!grad_owned_[v]) {
    grads_[v] = ShardTensor::unchecked(mesh_, value_specs_[v], grads_[v].local().clone());
    grad_owned_[v] = true;
  }
  add_into(grads_[v].local(), g.local().contiguous());
}

std::vector<ShardTensor> Graph::backward(const std::vector<ShardTensor>& output_grads) {
  TESSERA_CHECK(forwarded_, "Graph::backward: no forward since the graph last changed");
  TESSERA_CHECK(forwarded_with_grad_,
                "Graph::backward: the last forward ran without gradients (set_grad_enabled)");
  TESSERA_CHECK(!replaying_forward_ || backwards_ == 0,
                "Graph::backward: a second backward of one forward with recompute (the first "
                "used up the segments' kept inputs): run forward again");
  TESSERA_CHECK(output_grads.size() == outputs_.size(),
                "Graph::backward: " << outputs_.size() << " output gradients expected, got "
                                    << output_grads.size());
  // Before any gradient is added: a layer shared with another graph holds that graph's
  // state when its forward ran after ours (the same order on every rank).
  for (const Node& nd : nodes_)
    TESSERA_CHECK(nd.kind == Kind::Input || ticket_of(nd) == ticket_,
                  "Graph::backward: node '"
                      << nd.name << "' (" << nd.op->name()
                      << ") ran in another graph's forward after this graph's forward, so it "
                         "holds that forward's state; run this graph's backward before the "
                         "other forward, or give each graph its own layer objects");
  const std::size_t n = nodes_.size();
  grads_.assign(n, ShardTensor());
  grad_owned_.assign(n, false);
  for (std::size_t k = 0; k < outputs_.size(); ++k) {
    const ShardTensor& g = output_grads[k];
    if (!g.local().defined()) continue;
    const auto o = static_cast<std::size_t>(outputs_[k]);
    TESSERA_CHECK(g.global_shape() == value_specs_[o].global_shape(),
                  "Graph::backward: gradient of output "
                      << k << " has global shape " << shape_str(g.global_shape()) << ", the output "
                      << shape_str(value_specs_[o].global_shape()));
    accumulate(outputs_[k], g);
  }
  for (std::size_t id = n; id-- > 0;) {
    Node& nd = nodes_[id];
    if (nd.kind == Kind::Input) continue;
    if (replaying_forward_ && ends_segment(id)) replay_segment(id);
    ShardTensor dy = std::move(grads_[id]);
    grads_[id] = ShardTensor();
    if (!dy.local().defined()) continue;  // nothing downstream depends on this value
    if (dy.has_room() && !nd.op->takes_grad_in_room()) dy = dy.without_room();
    // Input gradients may stay in their ghost frames where every input's producer reads
    // its output gradient in place (never for the graph's inputs: callers get plain shards).
    bool in_room = ghost_room_;
    for (int u : nd.inputs) {
      const Node& p = nodes_[static_cast<std::size_t>(u)];
      in_room = in_room && p.kind != Kind::Input && p.op->takes_grad_in_room();
    }
    std::vector<ShardTensor> dx;
    try {
      dx = in_room ? nd.op->backward_in_room(dy) : nd.op->backward(dy);
    } catch (const Error& e) {
      if (backwards_ == 0 || dynamic_cast<const AllocationError*>(&e)) throw;
      throw Error(std::string(e.what()) +
                  " (Graph::backward: a second backward of one forward; node '" + nd.name +
                  "' freed its saved state in the first: run forward again)");
    }
    for (std::size_t k = 0; k < nd.inputs.size(); ++k) accumulate(nd.inputs[k], dx.at(k));
    // A layer's parameter gradients are final now: gradient sync may start their buckets.
    if (grads_ready_ && (nd.kind == Kind::Layer || nd.kind == Kind::Op))
      grads_ready_(nd.op->parameters());
  }
  std::vector<ShardTensor> dx;
  for (int i : inputs_) {
    const auto v = static_cast<std::size_t>(i);
    if (grads_[v].local().defined()) {
      dx.push_back(grads_[v]);
    } else {
      const ShardTensor& x = values_[v];
      dx.push_back(zeros_like_spec(mesh_, value_specs_[v], x.dtype(), x.local().space()));
    }
  }
  grads_.assign(n, ShardTensor());
  ++backwards_;
  return dx;
}

ShardTensor Graph::backward(const ShardTensor& dy) {
  TESSERA_CHECK(inputs_.size() == 1 && outputs_.size() == 1, "Graph::backward(dy): the graph has "
                                                                 << inputs_.size() << " inputs and "
                                                                 << outputs_.size() << " outputs");
  return backward(std::vector<ShardTensor>{dy}).front();
}

HaloWidths Graph::input_room(int k, const Mesh& mesh, const std::vector<ShardSpec>& in_specs) {
  TESSERA_CHECK(k >= 0 && k < static_cast<int>(inputs_.size()),
                "Graph::input_room: input " << k << " of " << inputs_.size());
  mesh_ = mesh;
  return rooms_for(in_specs)
      .of_value[static_cast<std::size_t>(inputs_[static_cast<std::size_t>(k)])];
}

const Graph::Rooms& Graph::rooms_for(const std::vector<ShardSpec>& in_specs) {
  Rooms& r = rooms_;
  if (r.in_specs == in_specs && r.comm == mesh_.comm() && r.nodes == nodes_.size() &&
      r.outputs == outputs_ && r.on == ghost_room_ && r.keep == keep_values_)
    return r;
  r.wants = wanted_rooms(in_specs);
  r.of_value = value_rooms(r.wants);
  r.in_specs = in_specs;
  r.comm = mesh_.comm();
  r.nodes = nodes_.size();
  r.outputs = outputs_;
  r.on = ghost_room_;
  r.keep = keep_values_;
  return r;
}

std::vector<std::vector<HaloWidths>> Graph::wanted_rooms(const std::vector<ShardSpec>& in_specs) {
  std::vector<std::vector<HaloWidths>> wants(nodes_.size());
  for (std::size_t id = 0; id < nodes_.size(); ++id)
    wants[id].assign(nodes_[id].inputs.size(), HaloWidths());
  if (!ghost_room_) return wants;
  // Same order and calls on every rank (halo plans are built collectively).
  walk_specs("forward", in_specs,
             [&](std::size_t id, const std::vector<ShardSpec>& in, const ShardSpec&) {
               for (std::size_t k = 0; k < in.size(); ++k)
                 wants[id][k] = nodes_[id].op->input_room(mesh_, in, static_cast<int>(k));
             });
  return wants;
}

std::vector<HaloWidths> Graph::value_rooms(
    const std::vector<std::vector<HaloWidths>>& wants) const {
  const std::size_t n = nodes_.size();
  std::vector<HaloWidths> rooms(n);
  std::vector<int> consumers(n, 0);
  std::vector<bool> agree(n, true);
  for (std::size_t id = 0; id < n; ++id)
    for (std::size_t k = 0; k < nodes_[id].inputs.size(); ++k) {
      const auto v = static_cast<std::size_t>(nodes_[id].inputs[k]);
      const HaloWidths& w = wants[id][k];
      if (consumers[v]++ == 0) rooms[v] = w;
      agree[v] = agree[v] && !w.empty() && w == rooms[v];
    }
  for (int o : outputs_) agree[static_cast<std::size_t>(o)] = false;  // callers get plain shards
  for (std::size_t v = 0; v < n; ++v)
    if (!ghost_room_ || keep_values_ || consumers[v] == 0 || !agree[v]) rooms[v] = HaloWidths();
  return rooms;
}

std::vector<ShardSpec> Graph::walk_specs(
    const char* what, const std::vector<ShardSpec>& input_specs,
    const std::function<void(std::size_t, const std::vector<ShardSpec>&, const ShardSpec&)>& visit)
    const {
  TESSERA_CHECK(input_specs.size() == inputs_.size(), "Graph::" << what << ": " << inputs_.size()
                                                                << " input specs expected, got "
                                                                << input_specs.size());
  std::vector<ShardSpec> specs(nodes_.size());
  for (std::size_t k = 0; k < inputs_.size(); ++k)
    specs[static_cast<std::size_t>(inputs_[k])] = input_specs[k];
  for (std::size_t id = 0; id < nodes_.size(); ++id) {
    const Node& nd = nodes_[id];
    if (nd.kind == Kind::Input) continue;
    std::vector<ShardSpec> in;
    for (int v : nd.inputs) in.push_back(specs[static_cast<std::size_t>(v)]);
    try {
      specs[id] = nd.op->output_spec(in);  // the same verdict on every rank
    } catch (const Error& e) {
      throw Error("Graph: " + kind_name(nd.kind) + " node '" + nd.name +
                  "' cannot take its input: " + e.what());
    }
    if (visit) visit(id, in, specs[id]);
  }
  std::vector<ShardSpec> outs;
  for (int o : outputs_) outs.push_back(specs[static_cast<std::size_t>(o)]);
  return outs;
}

std::vector<ShardSpec> Graph::output_specs(const std::vector<ShardSpec>& input_specs) const {
  return walk_specs("output_specs", input_specs, nullptr);
}

void Graph::bind(const Mesh& mesh, const std::vector<ShardSpec>& input_specs) {
  walk_specs("bind", input_specs,
             [&](std::size_t id, const std::vector<ShardSpec>& in, const ShardSpec&) {
               nodes_[id].op->bind(mesh, in);
             });
  // Every rank must hold the same model: a setting or seed that differs on one rank would
  // train another model there without a word, or hang in its first exchange. One line per
  // op and per parameter (a replicated one with a hash of its value), compared in one
  // all-reduce; the first line that differs is named.
  std::ostringstream model;
  // Recompute too: a rank that replays its segments makes collectives the others do not.
  model << "recompute: " << (recompute_ ? "on" : "off") << '\n';
  for (const Node& nd : nodes_) {
    if (!nd.op) continue;
    model << nd.name << ": " << nd.op->name();
    if (nd.segment >= 0) model << " (segment " << nd.segment << ')';
    model << '\n';
    for (const Parameter* p : nd.op->parameters()) {
      model << nd.name << '.' << p->name << ": " << name_of(parameter_dtype(*p)) << ' '
            << shape_str(global_shape(*p));
      if (p->shard || p->deferred) {  // blocks, or values made from the seed when laid out
        model << (p->shard ? " sharded" : " deferred");
      } else {
        const Tensor host = p->value.in_space(MemSpace::Host).contiguous();
        model << " value hash " << std::hex << fnv1a(host.raw(), host.nbytes()) << std::dec;
      }
      model << '\n';
    }
  }
  collective_check(mesh.comm(), true, "", "Graph::bind", "the model", model.str());
}

std::vector<NodeCost> Graph::costs(const std::vector<ShardSpec>& input_specs, DType dtype) const {
  std::vector<NodeCost> out;
  walk_specs(
      "costs", input_specs,
      [&](std::size_t id, const std::vector<ShardSpec>& in, const ShardSpec& spec) {
        const Node& nd = nodes_[id];
        try {
          NodeCost c;
          c.name = nd.name;
          c.op = nd.op->name();
          c.out_shape = spec.global_shape();
          c.cost = nd.op->cost(in, spec, dtype);
          c.out_bytes = busiest_elems(spec) * static_cast<double>(size_of(dtype));
          c.kept =
              std::find(outputs_.begin(), outputs_.end(), static_cast<int>(id)) != outputs_.end();
          c.segment = recompute_ ? nd.segment : -1;
          for (const Node& other : nodes_) {
            if (!other.op || std::find(other.inputs.begin(), other.inputs.end(),
                                       static_cast<int>(id)) == other.inputs.end())
              continue;
            const int s = recompute_ ? other.segment : -1;
            if (s >= 0 && s != c.segment) {
              c.kept = true;  // a segment's input, kept for its replay
              if (other.op->keeps_inputs() &&
                  std::find(c.copied_in.begin(), c.copied_in.end(), s) == c.copied_in.end())
                c.copied_in.push_back(s);
            } else if (other.op->keeps_inputs())
              (s >= 0 ? c.kept_in_segment : c.kept) = true;
          }
          if (c.kept) c.kept_in_segment = false;
          out.push_back(c);
        } catch (const Error& e) {
          throw Error("Graph: " + kind_name(nd.kind) + " node '" + nd.name + "': " + e.what());
        }
      });
  return out;
}

bool Graph::costs_complete() const {
  return std::all_of(nodes_.begin(), nodes_.end(),
                     [](const Node& nd) { return !nd.op || nd.op->cost_complete(); });
}

std::vector<NamedParameter> Graph::parameters() const {
  std::vector<NamedParameter> out;
  std::set<std::string> seen;
  for (const Node& nd : nodes_) {
    if (!nd.op) continue;
    for (Parameter* p : nd.op->parameters()) {
      TESSERA_CHECK(p != nullptr, "Graph: layer '" << nd.name << "' lists a null parameter");
      std::string name = nd.name + "." + p->name;
      TESSERA_CHECK(seen.insert(name).second, "Graph: two parameters are named '" << name << "'");
      out.push_back(NamedParameter{std::move(name), p});
    }
  }
  return out;
}

Parameter& Graph::parameter(const std::string& name) const {
  for (const NamedParameter& np : parameters())
    if (np.name == name) return *np.param;
  throw Error("Graph: no parameter named '" + name + "'");
}

void Graph::zero_grad() const {
  for (const NamedParameter& np : parameters())
    if (np.param->grad.defined()) np.param->grad.zero();
}

const ShardTensor& Graph::value(Value v) const {
  node(v, "value");
  const ShardTensor& t = values_[static_cast<std::size_t>(v.id)];
  TESSERA_CHECK(forwarded_ && t.local().defined(),
                "Graph::value: value of node '"
                    << nodes_[static_cast<std::size_t>(v.id)].name
                    << "' is not kept (run forward; keep_values(true) keeps intermediates)");
  return t;
}

const std::string& Graph::node_name(Value v) const {
  return node(v, "node_name").name;
}

Graph::Kind Graph::node_kind(Value v) const {
  return node(v, "node_kind").kind;
}

}  // namespace tessera
