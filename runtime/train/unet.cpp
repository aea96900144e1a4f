#include "runtime/train/unet.hpp"

#include <sstream>

#include "runtime/nn/conv_layer.hpp"
#include "runtime/nn/conv_transpose_layer.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/pointwise_layers.hpp"
#include "runtime/nn/pool_layer.hpp"
#include "runtime/nn/upsample_layer.hpp"

namespace tessera {

UNetOptions::Norm unet_norm(const std::string& n) {
  if (n == "group") return UNetOptions::Norm::Group;
  if (n == "batch") return UNetOptions::Norm::Batch;
  if (n == "none") return UNetOptions::Norm::None;
  throw Error("unet: norm '" + n + "' is not one of group, batch, none");
}
UNetOptions::Down unet_down(const std::string& n) {
  if (n == "pool") return UNetOptions::Down::Pool;
  if (n == "conv") return UNetOptions::Down::StridedConv;
  throw Error("unet: down '" + n + "' is not one of pool, conv");
}
UNetOptions::Up unet_up(const std::string& n) {
  if (n == "upsample") return UNetOptions::Up::Upsample;
  if (n == "transposed_conv") return UNetOptions::Up::TransposedConv;
  throw Error("unet: up '" + n + "' is not one of upsample, transposed_conv");
}
PaddingMode unet_padding(const std::string& n) {
  if (n == "zeros") return PaddingMode::Zeros;
  if (n == "circular") return PaddingMode::Circular;
  if (n == "reflect") return PaddingMode::Reflect;
  if (n == "replicate") return PaddingMode::Replicate;
  throw Error("unet: padding '" + n + "' is not one of zeros, circular, reflect, replicate");
}
std::string name_of(UNetOptions::Norm n) {
  return n == UNetOptions::Norm::Group ? "group" : n == UNetOptions::Norm::Batch ? "batch" : "none";
}
std::string name_of(UNetOptions::Down d) {
  return d == UNetOptions::Down::Pool ? "pool" : "conv";
}
std::string name_of(UNetOptions::Up u) {
  return u == UNetOptions::Up::Upsample ? "upsample" : "transposed_conv";
}

std::string current_unet_signature(const std::string& stored) {
  if (stored.rfind("unet ", 0) != 0) return stored;
  // The words " norm=N", " down=N", " up=N" with N one digit, each replaced by its name.
  std::string s = stored;
  const auto upgrade = [&s](const std::string& key, const std::vector<std::string>& names) {
    const std::string word = " " + key + "=";
    const std::size_t at = s.find(word);
    if (at == std::string::npos) return;
    const std::size_t v = at + word.size();
    const std::size_t end = s.find(' ', v);
    const std::string value = s.substr(v, end == std::string::npos ? std::string::npos : end - v);
    if (value.size() != 1 || value[0] < '0' ||
        static_cast<std::size_t>(value[0] - '0') >= names.size())
      return;
    s.replace(v, 1, names[static_cast<std::size_t>(value[0] - '0')]);
  };
  upgrade("norm", {"group", "batch", "none"});
  upgrade("down", {"pool", "conv"});
  upgrade("up", {"upsample", "transposed_conv"});
  // groups=0 without GroupNorm (nothing reads it): older signatures carried the setting.
  if (s.find(" norm=group ") == std::string::npos) {
    const std::size_t at = s.find(" groups=");
    if (at != std::string::npos) {
      const std::size_t v = at + 8, end = s.find(' ', v);
      s.replace(v, end == std::string::npos ? std::string::npos : end - v, "0");
    }
  }
  return s;
}

kernels::Activation activation_by_name(const std::string& n) {
  for (auto a : {kernels::Activation::ReLU, kernels::Activation::GELU, kernels::Activation::SiLU,
                 kernels::Activation::Tanh})
    if (n == kernels::name_of(a)) return a;
  throw Error("unet: activation '" + n + "' is not one of relu, gelu, silu, tanh");
}

template <class ConvOpts>
ConvOpts UNet::conv_options(Index cin, Index cout) {
  ConvOpts c;
  c.nd = opts_.nd;
  c.in_channels = cin;
  c.out_channels = cout;
  c.dtype = opts_.dtype;
  c.space = opts_.space;
  c.seed = next_seed_++;
  return c;
}

UNet::UNet(const UNetOptions& o) : opts_(o), next_seed_(o.seed * 7919u) {
  TESSERA_CHECK(o.nd >= 1 && o.nd <= 3, "unet: " << o.nd << " spatial dims (1 to 3 supported)");
  TESSERA_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.width >= 1,
                "unet: channels must be positive (in "
                    << o.in_channels << ", out " << o.out_channels << ", width " << o.width << ")");
  TESSERA_CHECK(o.depth >= 0 && o.depth <= 8, "unet: depth " << o.depth << " (0 to 8 supported)");
  TESSERA_CHECK(o.kernel >= 1 && o.kernel % 2 == 1,
                "unet: kernel size " << o.kernel << " must be odd (\"same\" padding)");
  TESSERA_CHECK(o.norm != UNetOptions::Norm::Group || (o.groups >= 1 && o.width % o.groups == 0),
                "unet: GroupNorm groups " << o.groups << " must divide the width " << o.width);

  std::vector<Index> ch;
  for (int l = 0; l <= o.depth; ++l) ch.push_back(o.width << l);
  std::vector<Value> skips;
  Value x = graph_.input("x");
  Index cin = o.in_channels;
  for (int l = 0; l <= o.depth; ++l) {
    const std::string lv = std::to_string(l);
    x = block(l < o.depth ? "enc" + lv : "mid", x, cin, ch[l]);
    cin = ch[l];
    if (l == o.depth) break;
    skips.push_back(x);
    if (o.down == UNetOptions::Down::Pool) {
      PoolOptions p;
      p.kernel.assign(static_cast<std::size_t>(o.nd), 2);
      x = graph_.layer("down" + lv, std::make_shared<Pool>(p), x);
    } else {
      ConvOptions c = conv_options<ConvOptions>(ch[l], ch[l]);
      c.kernel = {2};
      c.stride = {2};
      x = graph_.layer("down" + lv, std::make_shared<ConvNd>(c), x);
    }
  }
  for (int l = o.depth - 1; l >= 0; --l) {
    const std::string lv = std::to_string(l);
    Index cup = ch[l + 1];
    if (o.up == UNetOptions::Up::Upsample) {
      UpsampleOptions u;
      u.scale.assign(static_cast<std::size_t>(o.nd), 2);
      x = graph_.layer("up" + lv, std::make_shared<Upsample>(u), x);
    } else {
      ConvTransposeOptions c = conv_options<ConvTransposeOptions>(ch[l + 1], ch[l]);
      cup = ch[l];
      c.kernel = {2};
      c.stride = {2};
      x = graph_.layer("up" + lv, std::make_shared<ConvTransposeNd>(c), x);
    }
    x = graph_.concat("skip" + lv, x, skips[static_cast<std::size_t>(l)]);
    x = block("dec" + lv, x, cup + ch[l], ch[l]);
  }
  ConvOptions h = conv_options<ConvOptions>(ch[0], o.out_channels);
  h.kernel = {1};
  graph_.output(graph_.layer("head", std::make_shared<ConvNd>(h), x));
}

Value UNet::block(const std::string& name, Value x, Index cin, Index cout) {
  graph_.begin_segment();  // recomputed in backward with Graph::recompute
  for (int i = 1; i <= 2; ++i) {
    ConvOptions c = conv_options<ConvOptions>(i == 1 ? cin : cout, cout);
    c.kernel = {opts_.kernel};
    c.padding = {opts_.kernel / 2};
    c.padding_mode = opts_.padding;
    c.bias = opts_.norm == UNetOptions::Norm::None;  // a norm's beta makes it redundant
    x = graph_.layer(name + ".conv" + std::to_string(i), std::make_shared<ConvNd>(c), x);
    x = norm_act(name, i, x, cout);
  }
  graph_.end_segment();
  return x;
}

Value UNet::norm_act(const std::string& name, int i, Value x, Index c) {
  const std::string idx = std::to_string(i);
  NormOptions n;
  n.dtype = opts_.dtype;
  n.space = opts_.space;
  if (opts_.norm == UNetOptions::Norm::Group) {
    x = graph_.layer(name + ".norm" + idx, std::make_shared<GroupNorm>(opts_.groups, c, n), x);
  } else if (opts_.norm == UNetOptions::Norm::Batch) {
    auto bn = std::make_shared<BatchNorm>(c, n);
    batch_norms_.emplace_back(name + ".norm" + idx, bn);
    x = graph_.layer(name + ".norm" + idx, bn, x);
  }
  return graph_.layer(name + ".act" + idx, std::make_shared<ActivationLayer>(opts_.activation), x);
}

std::string UNet::input_problem(const std::vector<Index>& shape) const {
  std::ostringstream os;
  if (static_cast<int>(shape.size()) != opts_.nd + 2) {
    os << "the UNet takes (N, C, " << opts_.nd << " spatial dims), the data has shape "
       << shape_str(shape);
    return os.str();
  }
  if (shape[1] != opts_.in_channels) {
    os << "the UNet takes " << opts_.in_channels << " input channels, the data has " << shape[1];
    return os.str();
  }
  const Index f = Index{1} << opts_.depth;
  for (int d = 0; d < opts_.nd; ++d)
    if (shape[static_cast<std::size_t>(d) + 2] % f != 0) {
      os << "spatial extent " << shape[static_cast<std::size_t>(d) + 2] << " (dim " << d + 2
         << " of " << shape_str(shape) << ") is not divisible by 2^depth = " << f << " (depth "
         << opts_.depth << ")";
      return os.str();
    }
  // Reflect padding must be narrower than the extent, down to the deepest level.
  for (int d = 0; d < opts_.nd && opts_.padding == PaddingMode::Reflect; ++d)
    if (shape[static_cast<std::size_t>(d) + 2] / f <= opts_.kernel / 2) {
      os << "reflect padding " << opts_.kernel / 2 << " (kernel " << opts_.kernel
         << ") must be narrower than every level's extent: dim " << d + 2 << " of "
         << shape_str(shape) << " is " << shape[static_cast<std::size_t>(d) + 2] / f << " at depth "
         << opts_.depth;
      return os.str();
    }
  return "";
}

void UNet::train(bool on) {
  for (auto& [name, bn] : batch_norms_) bn->train(on);
}

std::string UNet::signature() const {
  const UNetOptions& o = opts_;
  std::ostringstream os;
  os << "unet nd=" << o.nd << " in=" << o.in_channels << " out=" << o.out_channels
     << " width=" << o.width << " depth=" << o.depth << " kernel=" << o.kernel
     << " norm=" << name_of(o.norm)
     << " groups=" << (o.norm == UNetOptions::Norm::Group ? o.groups : 0)
     << " activation=" << kernels::name_of(o.activation) << " down=" << name_of(o.down)
     << " up=" << name_of(o.up) << " dtype=" << name_of(o.dtype);
  // Only where it is not zeros: the signature of checkpoints from before the option.
  if (o.padding != PaddingMode::Zeros) os << " padding=" << name_of(o.padding);
  return os.str();
}

std::vector<UNet::Buffer> UNet::buffers() const {
  std::vector<Buffer> out;
  for (const auto& [name, bn] : batch_norms_) {
    out.push_back({name + ".running_mean", bn->running_mean()});
    out.push_back({name + ".running_var", bn->running_var()});
  }
  return out;
}

void UNet::load_buffers(const std::vector<Buffer>& b) {
  auto find = [&](const std::string& n) -> const std::vector<double>& {
    for (const auto& e : b)
      if (e.name == n) return e.value;
    throw Error("unet: buffer '" + n + "' missing (a checkpoint of another model?)");
  };
  for (auto& [name, bn] : batch_norms_)
    bn->set_running_stats(find(name + ".running_mean"), find(name + ".running_var"));
}

}  // namespace tessera
