// Scatters a tensor, redistributes it and checks the result against the serial value.
#include <cstdio>

#include "runtime/tensor/context.hpp"
#include "runtime/tensor/shard_tensor.hpp"

int main(int argc, char** argv) {
  using namespace tessera;
  Context ctx(argc, argv);
  Mesh mesh = Mesh::line(ctx.world());
  Tensor full = Tensor::empty({8, 6}, DType::i64);
  for (Index i = 0; i < full.numel(); ++i) full.data<std::int64_t>()[i] = i;
  ShardTensor x = ShardTensor::scatter(mesh, full, {Shard(0), Replicate()});
  ShardTensor y = x.redistribute({Replicate(), Shard(0)});
  const Box b = y.local_box();
  int bad = 0;
  for (Index i = b.lo[0]; i < b.hi[0]; ++i)
    for (Index j = b.lo[1]; j < b.hi[1]; ++j)
      bad += y.local().at<std::int64_t>({i - b.lo[0], j - b.lo[1]}) != i * 6 + j;
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, ctx.world());
  if (ctx.rank() == 0)
    std::printf("downstream: %s (%s)\n", all ? "WRONG" : "ok", ctx.describe().c_str());
  return all ? 1 : 0;
}
