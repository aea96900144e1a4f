#pragma once
// The one JSON shape of every benchmark: {"case", "rows": [...], "goals": [...]},
// a table printer, and merging of per-rank-count parts into one report.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::bench {

using json = nlohmann::json;

json goal(const std::string& name, double value, const std::string& op, double target);
// Prints rows as an aligned table of the given columns (missing cells blank).
void print_table(const json& rows, const std::vector<std::string>& columns);
// Reads part files, concatenates their rows, and lets `goals` compute the goals.
json merge_parts(const std::string& case_name, const std::vector<std::string>& files);

}  // namespace tessera::bench
