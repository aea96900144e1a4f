#include "apps/bench/report.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "decomp/error.hpp"

namespace tessera::bench {

json goal(const std::string& name, double value, const std::string& op, double target) {
  const bool met = op == ">=" ? value >= target : op == "<=" ? value <= target : value == target;
  return {{"name", name}, {"value", value}, {"op", op}, {"target", target}, {"met", met}};
}

namespace {
std::string cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) {
    std::ostringstream os;
    const double x = v.get<double>();
    os << std::setprecision(x != 0 && (x < 0.01 || x >= 1e6) ? 3 : 4) << x;
    return os.str();
  }
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}
}  // namespace

void print_table(const json& rows, const std::vector<std::string>& cols) {
  std::vector<std::size_t> w(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) {
    w[c] = cols[c].size();
    for (const auto& r : rows) w[c] = std::max(w[c], cell(r.value(cols[c], json())).size());
  }
  auto line = [&](auto get) {
    for (std::size_t c = 0; c < cols.size(); ++c)
      std::cout << (c ? "  " : "") << std::setw(static_cast<int>(w[c])) << get(c);
    std::cout << '\n';
  };
  line([&](std::size_t c) { return cols[c]; });
  for (const auto& r : rows) line([&](std::size_t c) { return cell(r.value(cols[c], json())); });
}

json merge_parts(const std::string& case_name, const std::vector<std::string>& files) {
  json out = {{"case", case_name}, {"rows", json::array()}, {"goals", json::array()}};
  std::set<std::string> seen;
  for (const auto& f : files) {
    if (!seen.insert(std::filesystem::weakly_canonical(f).string()).second)
      throw Error("bench merge: " + f + " is given twice (its rows would count twice)");
    if (std::filesystem::is_directory(f)) throw Error("bench merge: " + f + " is a folder");
    std::ifstream in(f);
    if (!in) throw Error("bench merge: cannot read " + f);
    json part;
    try {
      part = json::parse(in);
    } catch (const json::exception& e) {
      throw Error("bench merge: " + f + " is no JSON part: " + e.what());
    }
    // A part of another case would fill this case's table with empty cells and no goals.
    if (!part.is_object() || !part.contains("case") || !part["case"].is_string() ||
        !part.contains("rows") || !part["rows"].is_array())
      throw Error("bench merge: " + f +
                  " is no part of tessera-bench --out (needs \"case\" and \"rows\")");
    if (part["case"] != case_name)
      throw Error("bench merge: " + f + " holds case '" + part["case"].get<std::string>() +
                  "', not '" + case_name + "'");
    // A row equal to one of an earlier part, timings and all, is a copy of that part.
    const std::size_t earlier = out["rows"].size();
    for (auto& r : part["rows"]) {
      for (std::size_t i = 0; i < earlier; ++i)
        if (out["rows"][i] == r)
          throw Error("bench merge: " + f + " repeats a row of an earlier part (" +
                      r.dump().substr(0, 80) + "...): a copy of a part would count twice");
      out["rows"].push_back(r);
    }
  }
  return out;
}

}  // namespace tessera::bench
