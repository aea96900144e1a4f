#include "runtime/comm/fault_inject.hpp"

#include <mpi.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

namespace tessera {
namespace {

struct Item {
  std::string site;
  int rank = 0;
  long nth = 1;
};

std::vector<Item> parse(const char* env) {
  std::vector<Item> items;
  std::stringstream ss(env);
  std::string one;
  while (std::getline(ss, one, ',')) {
    std::stringstream is(one);
    std::string site, rank, nth;
    std::getline(is, site, ':');
    std::getline(is, rank, ':');
    std::getline(is, nth, ':');
    if (site.empty() || rank.empty()) continue;
    items.push_back({site, std::atoi(rank.c_str()), nth.empty() ? 1 : std::atol(nth.c_str())});
  }
  return items;
}

}  // namespace

bool fault_point(const std::string& site) {
  static const char* env = std::getenv("TESSERA_FAULT_INJECT");
  if (!env || !*env) return false;
  static const std::vector<Item> items = parse(env);
  static std::map<std::string, long> hits;
  const long n = ++hits[site];
  int rank = 0, init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const Item& i : items)
    if (i.site == site && i.rank == rank && i.nth == n) return true;
  return false;
}

}  // namespace tessera
