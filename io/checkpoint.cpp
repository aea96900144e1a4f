#include "io/checkpoint.hpp"

#include <set>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "io/checksum.hpp"
#include "io/file.hpp"
#include "io/finite.hpp"
#include "io/output_file.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::io {
namespace {

constexpr std::int64_t kCheckpointVersion = 1;
// Root attribute naming the checksum every dataset carries ("crc32", attribute of the same
// name); checkpoints written before checksums lack it and load unchecked.
constexpr const char* kChecksumAttr = "checksum";
constexpr const char* kCrc = "crc32";
CheckpointFaultHook g_hook;
int g_writes = 0;

void fault_point(const std::string& stage) {
  if (g_hook) g_hook(stage);
  static const char* env = std::getenv("TESSERA_CHECKPOINT_FAULT");
  if (!env || !*env) return;
  std::string spec = env;
  int nth = 1;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    nth = std::atoi(spec.c_str() + colon + 1);
    spec.resize(colon);
  }
  if (spec == stage && g_writes == nth) {
    std::fprintf(stderr, "checkpoint: TESSERA_CHECKPOINT_FAULT: ending the process at '%s'\n",
                 stage.c_str());
    std::fflush(stderr);
    std::_Exit(86);
  }
}

// `what` names the entries in errors ("parameter"); `path` the checkpoint.
void write_group(File& f, const std::string& group, const std::vector<NamedTensor>& ts, int rank,
                 const std::string& what, const std::string& path) {
  std::set<std::string> seen;
  for (const NamedTensor& nt : ts) {
    TESSERA_CHECK(!nt.name.empty() && nt.name.find('/') == std::string::npos && nt.name != "." &&
                      nt.name != "..",
                  "checkpoint: tensor name '" << nt.name << "' in " << group
                                              << " must be non-empty without '/' (nor . or ..)");
    TESSERA_CHECK(seen.insert(nt.name).second,
                  "checkpoint: two tensors named '" << nt.name << "' in " << group);
  }
  for (const NamedTensor& nt : ts) {
    // One made entry at a time (a sharded tensor gathered whole), checked as it is made: the
    // temporary file is removed on an error, the previous checkpoints stay.
    const Tensor t = nt.value().to(MemSpace::Host).contiguous();
    if (!nt.tensor.defined()) {
      // The root checksum lists the declared shape and type: a made tensor of others would
      // write a checkpoint that loads as damaged.
      TESSERA_CHECK(t.shape() == nt.made_shape && t.dtype() == nt.made_dtype,
                    "checkpoint: entry " << group << "/" << nt.name << " was made "
                                         << name_of(t.dtype()) << shape_str(t.shape())
                                         << ", declared " << name_of(nt.made_dtype)
                                         << shape_str(nt.made_shape));
      const std::string bad = first_nonfinite({{nt.name, t}}, what);
      collective_check(f.comm(), bad.empty(),
                       "checkpoint '" + path + "' not written: non-finite " + bad +
                           " (the previous checkpoints are kept)");
    }
    const std::string dset = group + "/" + nt.name;
    f.create_dataset(dset, t.shape(), t.dtype());
    // Replicated: rank 0 writes, the others take part with an empty selection.
    const std::vector<Index> zero(t.shape().size(), 0);
    const Box mine = rank == 0 ? Box::from_shape(t.shape()) : Box(zero, zero);
    write_box(f, dset, mine, t, mine);
    // Rank 0's bytes are the ones written; attributes are collective, so one value for all.
    std::int64_t crc = rank == 0 ? static_cast<std::int64_t>(crc32_of(t)) : 0;
    TESSERA_MPI(MPI_Bcast(&crc, 1, MPI_INT64_T, 0, f.comm()));
    f.set_attr(dset, kCrc, crc);
  }
}

// The root attributes' text and the list of entries (group, name, type, shape), checksummed
// as one: a damaged rng or config string is found, and so is an entry deleted or renamed.
std::string entry_line(const std::string& group, const std::string& name, DType t,
                       const std::vector<Index>& shape) {
  return group + "/" + name + " " + name_of(t) + shape_str(shape);
}
void add_entries(std::vector<std::string>& entries, const std::string& group,
                 const std::vector<NamedTensor>& ts) {
  for (const NamedTensor& nt : ts)
    entries.push_back(entry_line(group, nt.name, nt.dtype(), nt.shape()));
}
// `skipped_optimizer`: the entries of an optimizer group left unread, from its metadata.
std::uint32_t root_crc(const Checkpoint& c,
                       const std::vector<std::string>& skipped_optimizer = {}) {
  std::vector<std::string> entries = skipped_optimizer;
  add_entries(entries, "params", c.params);
  add_entries(entries, "optimizer", c.optimizer);
  add_entries(entries, "buffers", c.buffers);
  std::sort(entries.begin(), entries.end());  // the file lists them in name order
  std::string all = std::to_string(c.step) + '\0' + c.config + '\0' + c.rng + '\0' + c.model;
  for (const std::string& e : entries) all += '\0' + e;
  return crc32_of(all.data(), all.size());
}

// Whether a dataset's stored checksum attribute (its values) holds t's CRC-32.
bool crc_matches(const std::vector<double>& stored, const Tensor& t) {
  return stored.size() == 1 && stored[0] == static_cast<double>(crc32_of(t));
}

// Checks each entry of a group as it is made (one at a time for entries read when used):
// its checksum where `checked` (the first mismatch into `damaged`), and its values (the
// first non-finite one into `nonfinite`, for groups named by `what`; "" checks none). Every
// entry is read and every attribute looked at on every rank, whatever it found: the reads
// and metadata calls are collective, and a rank that stopped early would leave the others
// in them.
void verify_group(const File& f, const std::string& group, const std::vector<NamedTensor>& ts,
                  bool checked, const std::string& what, std::string& damaged,
                  std::string& nonfinite) {
  for (const NamedTensor& nt : ts) {
    const std::string dset = group + "/" + nt.name;
    const bool has_crc = checked && f.has_attr(dset, kCrc);
    const auto stored = has_crc ? f.attr_doubles(dset, kCrc) : std::vector<double>{};
    // Entries read when used are read here as they are (their own reads check the bytes
    // against this pass's verdict, so they are not the ones to give it).
    const Tensor t =
        nt.tensor.defined()
            ? nt.tensor
            : read_slab(f, dset, Box(std::vector<Index>(nt.made_shape.size(), 0), nt.made_shape),
                        nt.made_dtype);
    if (checked && damaged.empty()) {
      if (!has_crc) {
        damaged = dset + " has no " + kCrc + " attribute";
      } else if (!crc_matches(stored, t)) {
        std::ostringstream os;
        os << dset << " does not match its checksum (" << kCrc << " stored ";
        if (stored.size() == 1)
          os << std::llround(stored[0]);
        else
          os << stored.size() << " values";
        os << ", its data gives " << crc32_of(t) << ")";
        damaged = os.str();
      }
    }
    if (nonfinite.empty() && !what.empty()) nonfinite = first_nonfinite({{nt.name, t}}, what);
  }
}

// A group's datasets: (name in the group, path, metadata), each of a type Tessera reads.
struct Entry {
  std::string name, path;
  DatasetInfo info;
};
std::vector<Entry> group_entries(const File& f, const std::string& group) {
  std::vector<Entry> out;
  if (!f.exists(group)) return out;
  for (const std::string& dset : f.datasets(group)) {
    DatasetInfo info = f.info(dset);
    TESSERA_CHECK(info.dtype.has_value(),
                  "checkpoint: " << f.where(dset) << " has type " << info.type_name);
    out.push_back({dset.substr(group.size() + 1), dset, std::move(info)});
  }
  return out;
}

std::vector<NamedTensor> read_group(const File& f, const std::string& group) {
  std::vector<NamedTensor> out;
  for (const Entry& e : group_entries(f, group)) {
    const Box all(std::vector<Index>(e.info.shape.size(), 0), e.info.shape);
    out.push_back({e.name, read_slab(f, e.path, all, *e.info.dtype)});
  }
  return out;
}

// A group's entries read when used, from the file they keep open. Each read is checked
// against the dataset's stored checksum again (the load checked the bytes it read then, the
// restore takes these), on every rank at once: a file changed in between, or a read gone
// wrong, is damage, not a model.
std::vector<NamedTensor> listed_group(const std::shared_ptr<const File>& f,
                                      const std::string& group, const std::string& path) {
  std::vector<NamedTensor> out;
  for (const Entry& e : group_entries(*f, group)) {
    const Box all(std::vector<Index>(e.info.shape.size(), 0), e.info.shape);
    const DType dt = *e.info.dtype;
    const std::string where = e.path;
    const auto stored =
        f->has_attr(where, kCrc) ? f->attr_doubles(where, kCrc) : std::vector<double>{};
    out.push_back({e.name, Tensor(),
                   [f, where, all, dt, stored, path] {
                     Tensor t = read_slab(*f, where, all, dt);
                     // No single stored value: unchecked (the load's pass judged it).
                     const bool same = stored.size() != 1 || crc_matches(stored, t);
                     collective_check(f->comm(), same,
                                      "checkpoint: '" + path + "' is damaged: " + where +
                                          " no longer matches its checksum (changed since "
                                          "it was checked, or misread)");
                     return t;
                   },
                   e.info.shape, dt});
  }
  return out;
}

}  // namespace

void set_checkpoint_fault_hook(CheckpointFaultHook hook) {
  g_hook = std::move(hook);
}

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  std::ostringstream os;
  os << dir << "/ckpt_" << std::setw(8) << std::setfill('0') << step << ".h5";
  return os.str();
}

void save_checkpoint(const std::string& path, MPI_Comm comm, const Checkpoint& c) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  ++g_writes;
  // Every tensor defined, and the same names, shapes and types on every rank (the file's
  // datasets are created collectively).
  std::string undefined, layout;
  for (const auto* group : {&c.params, &c.optimizer, &c.buffers})
    for (const NamedTensor& nt : *group) {
      if (!nt.defined()) {
        if (undefined.empty()) undefined = nt.name;
        layout += nt.name + " undefined; ";
        continue;
      }
      layout += nt.name + " " + name_of(nt.dtype()) + shape_str(nt.shape()) + "; ";
    }
  collective_check(comm, undefined.empty(),
                   "checkpoint '" + path + "' not written: tensor '" + undefined + "' is undefined",
                   "save_checkpoint", "the tensors' names, shapes or types", layout);
  // A checkpoint is something to go back to: never one with NaN or Inf in it (entries made
  // when written are checked then).
  std::string bad = first_nonfinite(c.params, "parameter");
  if (bad.empty()) bad = first_nonfinite(c.optimizer, "optimizer state");
  if (bad.empty()) bad = first_nonfinite(c.buffers, "buffer");
  collective_check(comm, bad.empty(),
                   "checkpoint '" + path + "' not written: non-finite " + bad +
                       " (the previous checkpoints are kept)");
  collective_run(comm, [&] {
    const auto dir = std::filesystem::path(path).parent_path();
    if (rank == 0 && !dir.empty()) std::filesystem::create_directories(dir);
  });
  {
    NewFile out(path, comm);  // its temporary until complete; removed on an error
    File& f = out.file();
    f.set_attr("/", "tessera_checkpoint_version", kCheckpointVersion);
    f.set_attr("/", "step", c.step);
    f.set_attr("/", "config", c.config);
    f.set_attr("/", "rng", c.rng);
    f.set_attr("/", "model", c.model);
    f.set_attr("/", kChecksumAttr, std::string(kCrc));
    f.set_attr("/", kCrc, static_cast<std::int64_t>(root_crc(c)));
    write_group(f, "/params", c.params, rank, "parameter", path);
    fault_point("params");
    write_group(f, "/optimizer", c.optimizer, rank, "optimizer state", path);
    fault_point("optimizer");
    write_group(f, "/buffers", c.buffers, rank, "buffer", path);
    fault_point("buffers");
    fault_point("close");
    out.commit();  // every rank has closed it: only now may it replace the previous one
  }
}

Checkpoint load_checkpoint(const std::string& path, MPI_Comm comm, CheckpointParts parts,
                           CheckpointRead read) {
  const auto opened = std::make_shared<const File>(File::open(path, comm, Mode::Read));
  const File& f = *opened;
  const bool streamed = read == CheckpointRead::Streamed;
  collective_check(comm, f.has_attr("/", "tessera_checkpoint_version"),
                   "checkpoint: '" + path +
                       "' is not a Tessera checkpoint (no "
                       "tessera_checkpoint_version attribute)");
  const auto v = f.attr_doubles("/", "tessera_checkpoint_version");
  TESSERA_CHECK(v.size() == 1 && v[0] == static_cast<double>(kCheckpointVersion),
                "checkpoint: '" << path << "' has version " << (v.empty() ? -1 : v[0])
                                << ", this program reads version " << kCheckpointVersion);
  Checkpoint c;
  c.step = static_cast<std::int64_t>(f.attr_doubles("/", "step").at(0));
  c.config = f.attr_strings("/", "config").at(0);
  c.rng = f.attr_strings("/", "rng").at(0);
  c.model = f.attr_strings("/", "model").at(0);
  c.params = streamed ? listed_group(opened, "/params", path) : read_group(f, "/params");
  std::vector<std::string> skipped;  // the optimizer's entries, where only listed
  if (parts == CheckpointParts::All) {
    c.optimizer = streamed ? listed_group(opened, "/optimizer", path) : read_group(f, "/optimizer");
  } else {
    for (const Entry& e : group_entries(f, "/optimizer"))
      skipped.push_back(entry_line("optimizer", e.name, *e.info.dtype, e.info.shape));
  }
  c.buffers = read_group(f, "/buffers");
  // Checksums: every rank checks the bytes it read; one verdict for all. A file with any
  // trace of them is checked whole (a lost root marker must not turn the check off).
  bool checked = f.has_attr("/", kChecksumAttr) || f.has_attr("/", kCrc);
  for (const NamedTensor& nt : c.params)
    checked = checked || f.has_attr("/params/" + nt.name, kCrc);
  std::string damaged, bad;
  if (checked) {
    if (f.has_attr("/", kChecksumAttr)) {
      const auto kind = f.attr_strings("/", kChecksumAttr);
      if (kind.size() != 1 || kind[0] != kCrc)
        damaged = "its root attribute '" + std::string(kChecksumAttr) + "' is not '" + kCrc + "'";
    } else {
      damaged = "its root attribute '" + std::string(kChecksumAttr) + "' is missing";
    }
  }
  // Each tensor checked as it is made (streamed: read, checked and freed one at a time).
  verify_group(f, "/params", c.params, checked, "parameter", damaged, bad);
  verify_group(f, "/optimizer", c.optimizer, checked, "optimizer state", damaged, bad);
  verify_group(f, "/buffers", c.buffers, checked, "", damaged, bad);
  if (checked) {
    const auto root = f.has_attr("/", kCrc) ? f.attr_doubles("/", kCrc) : std::vector<double>{};
    if (damaged.empty() &&
        (root.size() != 1 || root[0] != static_cast<double>(root_crc(c, skipped))))
      damaged =
          "its attributes (step, config, rng, model) or its list of entries (one deleted, "
          "renamed or reshaped) do not match their checksum";
    collective_check(f.comm(), damaged.empty(),
                     "checkpoint: '" + path + "' is damaged: " + damaged);
  }
  // Collective: a rank that alone read a non-finite value must not leave the others.
  collective_check(f.comm(), bad.empty(), "checkpoint: '" + path + "' holds a non-finite " + bad);
  return c;
}

namespace {
// The step digits of ".../ckpt_<digits>.h5" without leading zeros (steps past 8 digits have
// more, so names do not sort as strings).
std::string step_digits(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  std::string d = name.substr(5, name.size() - 8);
  const std::size_t first = d.find_first_not_of('0');
  return first == std::string::npos ? std::string() : d.substr(first);
}
}  // namespace

bool newer_checkpoint(const std::string& a, const std::string& b) {
  const std::string x = step_digits(a), y = step_digits(b);
  return x.size() != y.size() ? x.size() > y.size() : x > y;
}

std::vector<std::string> list_checkpoints(const std::string& dir, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string joined;  // names, newline separated, newest first
  if (rank == 0) {
    std::vector<std::string> found;
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec))
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        // ckpt_<digits>.h5 files only (a folder of that name is not one; retention would
        // count it and prune a real one; nor is a link, which retention would delete, leaving
        // its target); zero-padded steps sort as strings.
        if (e.is_symlink(ec) || !e.is_regular_file(ec)) continue;
        if (name.size() < 9 || name.rfind("ckpt_", 0) != 0 || name.substr(name.size() - 3) != ".h5")
          continue;
        const std::string digits = name.substr(5, name.size() - 8);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        found.push_back(e.path().string());
      }
    std::sort(found.begin(), found.end(),
              [](const std::string& a, const std::string& b) { return newer_checkpoint(a, b); });
    for (const auto& f : found) joined += f + "\n";
  }
  joined = broadcast_string(comm, joined);
  std::vector<std::string> out;
  std::stringstream ss(joined);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

std::string latest_checkpoint(const std::string& dir, MPI_Comm comm) {
  const std::vector<std::string> all = list_checkpoints(dir, comm);
  return all.empty() ? std::string() : all.front();
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, MPI_Comm comm,
                                           const std::string& written) {
  std::vector<std::string> all = list_checkpoints(dir, comm);
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  if (!written.empty())  // later steps: left alone, and not counted
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const std::string& p) { return newer_checkpoint(p, written); }),
              all.end());
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  for (std::size_t i = static_cast<std::size_t>(keep); i < all.size(); ++i) {
    std::error_code ec;
    if (rank == 0) std::filesystem::remove(all[i], ec);
    removed.push_back(all[i]);
  }
  return removed;
}

}  // namespace tessera::io
