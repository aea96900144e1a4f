#pragma once
// Training checkpoints in HDF5 with a global layout that does not depend on the rank
// count or the mesh (parameters are replicated, and sharded ones are gathered whole by the
// caller, so any run can load any checkpoint):
//
//   /                    attrs tessera_checkpoint_version = 1, step (int64),
//                        config (string: the resolved config), rng (string), model (string)
//   /params/NAME         one dataset per parameter, by registry name ("enc0.conv1.weight")
//   /optimizer/NAME      optimizer state by name ("enc0.conv1.weight.exp_avg", "step")
//   /buffers/NAME        other named state (BatchNorm running statistics, data normalization)
//
// Written atomically: every rank takes part in writing the job's temporary (io::NewFile:
// PATH.tmp.HOST.PID), the file is closed
// (collectively), and only then rank 0 renames it to PATH; a crash before that leaves
// the previous checkpoint untouched and a stray temporary that loaders ignore.
#include "io/floor.hpp"
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor/named_tensor.hpp"

namespace tessera::io {

// A checkpoint whose content does not load into the run it describes (an entry missing,
// misshaped or unusable): a resumed run passes over it to an older one. Other errors of a
// restore (another model, another optimizer) are plain Errors.
class DamagedCheckpoint : public Error {
 public:
  using Error::Error;
};

struct Checkpoint {
  std::int64_t step = 0;
  std::string config;  // resolved config text
  std::string rng;     // serialized random state (the data sampler's)
  std::string model;   // a model description to check on load ("unet nd=2 ...")
  std::vector<NamedTensor> params, optimizer, buffers;  // host tensors
};

// Collective over comm; every rank passes the same content (rank 0's data is written).
void save_checkpoint(const std::string& path, MPI_Comm comm, const Checkpoint& c);
// What a load reads: everything (resuming a run), or the model alone (inference: the
// optimizer's state, twice the parameters under Adam, is listed and checked against the
// root checksum but not read).
enum class CheckpointParts { All, Model };
// How parameters and optimizer state are handed out: read whole, or streamed (a large
// model: each is checked as the load reads it, one at a time, then handed out as an entry
// that reads it again when used, NamedTensor::make, so a restore holds one whole tensor at a
// time; the file stays open while any entry lives, and every rank must use the entries in
// the same order, as restoring does, and drop them at the same point).
enum class CheckpointRead { Whole, Streamed };
// Collective over comm; every rank gets the whole checkpoint (its optimizer state empty for
// Model). Throws on every rank naming the file when it is missing, truncated, damaged or not
// a checkpoint.
Checkpoint load_checkpoint(const std::string& path, MPI_Comm comm,
                           CheckpointParts parts = CheckpointParts::All,
                           CheckpointRead read = CheckpointRead::Whole);

// "DIR/ckpt_00000120.h5"
std::string checkpoint_path(const std::string& dir, std::int64_t step);
// The checkpoint of the highest step in dir ("" if none; .tmp files ignored).
// Collective: rank 0 looks, every rank gets its answer.
std::string latest_checkpoint(const std::string& dir, MPI_Comm comm);
// Every checkpoint in dir, newest (highest step) first. Collective, as latest_checkpoint.
std::vector<std::string> list_checkpoints(const std::string& dir, MPI_Comm comm);
// Whether checkpoint path a is of a later step than b (by number: steps of more digits than
// the names' zero padding included).
bool newer_checkpoint(const std::string& a, const std::string& b);
// Retention: removes all but the `keep` newest checkpoints of dir (keep <= 0: none), so
// the one just written always stays. Collective; rank 0 removes; returns what went.
// `written`: the checkpoint just written; those of later steps (left by a run abandoned
// there, which a resume passed over as damaged) are neither counted nor removed: the
// retention of a resumed run never drops its own newest, nor counts a file it could not use.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, MPI_Comm comm,
                                           const std::string& written = "");

// Test fault hook: called at each stage of a write ("params", "optimizer", "buffers",
// "close") with the file still open; a hook that throws or exits simulates a crash
// midway. Env TESSERA_CHECKPOINT_FAULT=STAGE[:K] makes the K-th write (1-based,
// default 1) of the process end it at STAGE with std::_Exit(86), on every rank.
using CheckpointFaultHook = std::function<void(const std::string& stage)>;
void set_checkpoint_fault_hook(CheckpointFaultHook hook);

}  // namespace tessera::io
