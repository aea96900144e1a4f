#pragma once
// How the cells of a contiguous (n, c, inner) tensor (inner = spatial volume) fall into
// the statistics groups of a normalization, shared by the reductions and the norm kernels
// on host and device:
//   PerGroup    (GroupNorm; groups == c is InstanceNorm, groups == 1 LayerNorm over C and
//                space): group n*groups + c/(c/groups), reduced over its channels and space;
//   PerChannel  (BatchNorm): group c, reduced over n and space;
//   PerPosition (channel LayerNorm): group n*inner + s, reduced over c.
// On a spatial shard the local groups hold the shard's part; summing over ranks (and
// dividing by the global count) gives the global statistics.
#include "kernels/floor.hpp"
#include "decomp/box.hpp"
#include "decomp/host_device.hpp"

namespace tessera::kernels {

enum class StatKind { PerGroup, PerChannel, PerPosition };

struct StatLayout {
  StatKind kind = StatKind::PerChannel;
  Index n = 1, c = 1, inner = 1;
  Index groups = 1;  // PerGroup only; must divide c

  static StatLayout per_group(Index n, Index c, Index inner, Index groups) {
    return {StatKind::PerGroup, n, c, inner, groups};
  }
  static StatLayout per_channel(Index n, Index c, Index inner) {
    return {StatKind::PerChannel, n, c, inner, 1};
  }
  static StatLayout per_position(Index n, Index c, Index inner) {
    return {StatKind::PerPosition, n, c, inner, 1};
  }

  TESSERA_HD Index elements() const { return n * c * inner; }
  // Number of statistics groups.
  TESSERA_HD Index count() const {
    switch (kind) {
      case StatKind::PerGroup:
        return n * groups;
      case StatKind::PerChannel:
        return c;
      case StatKind::PerPosition:
        return n * inner;
    }
    return 0;
  }
  // Local cells per group.
  TESSERA_HD Index size() const {
    switch (kind) {
      case StatKind::PerGroup:
        return (c / groups) * inner;
      case StatKind::PerChannel:
        return n * inner;
      case StatKind::PerPosition:
        return c;
    }
    return 0;
  }
  TESSERA_HD Index channel_of(Index e) const { return (e / inner) % c; }
  // A cell with its linear index and coordinates (sample, channel, position).
  struct Cell {
    Index e, nn, ch, s;
  };
  TESSERA_HD Cell cell_at(Index e) const {
    return {e, e / (inner * c), (e / inner) % c, e % inner};
  }
  // Group of cell e (row-major linear index).
  TESSERA_HD Index group_of(Index e) const {
    const Cell k = cell_at(e);
    return group_at(k.nn, k.ch, k.s);
  }
  // The group of the cell at (sample nn, channel ch, position s).
  TESSERA_HD Index group_at(Index nn, Index ch, Index s) const {
    switch (kind) {
      case StatKind::PerGroup:
        return nn * groups + ch / (c / groups);
      case StatKind::PerChannel:
        return ch;
      case StatKind::PerPosition:
        return nn * inner + s;
    }
    return 0;
  }
  // The j-th cell of group g. The host loops walk a group's cells from there with next(),
  // which divides nothing (element and cell_at divide per call).
  TESSERA_HD Cell cell(Index g, Index j) const { return cell_at(element(g, j)); }
  // The group's next cell, in the order of j.
  void next(Cell& k) const {
    switch (kind) {
      case StatKind::PerGroup:  // one contiguous run: positions, then the next channel
        ++k.e;
        if (++k.s == inner) k.s = 0, ++k.ch;
        return;
      case StatKind::PerChannel:  // a channel's positions, then the next sample's
        ++k.e;
        if (++k.s == inner) k.s = 0, ++k.nn, k.e += (c - 1) * inner;
        return;
      case StatKind::PerPosition:  // one position across the channels
        ++k.ch;
        k.e += inner;
        return;
    }
  }
  // Linear index of the j-th cell of group g.
  TESSERA_HD Index element(Index g, Index j) const {
    switch (kind) {
      case StatKind::PerGroup: {  // one contiguous run per (n, group)
        const Index nn = g / groups, gi = g % groups;
        return nn * c * inner + gi * (c / groups) * inner + j;
      }
      case StatKind::PerChannel:
        return ((j / inner) * c + g) * inner + j % inner;
      case StatKind::PerPosition:
        return ((g / inner) * c + j) * inner + g % inner;
    }
    return 0;
  }
};

// Throws tessera::Error naming `where` if the layout is inconsistent.
void check_stat_layout(const StatLayout& l, const char* where);

}  // namespace tessera::kernels
