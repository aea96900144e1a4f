#include "kernels/stat_layout.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {

void check_stat_layout(const StatLayout& l, const char* where) {
  TESSERA_CHECK(l.n >= 0 && l.c >= 0 && l.inner >= 0, where << ": negative extent (n " << l.n
                                                            << ", c " << l.c << ", inner "
                                                            << l.inner << ")");
  if (l.kind == StatKind::PerGroup)
    TESSERA_CHECK(l.groups >= 1 && l.c % l.groups == 0,
                  where << ": " << l.groups << " groups do not divide " << l.c << " channels");
}

}  // namespace tessera::kernels
