#include "apps/prep/npy.hpp"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "decomp/error.hpp"

namespace tessera::prep {
namespace {

std::string value_of(const std::string& dict, const std::string& key, const std::string& path) {
  const std::string k = "'" + key + "'";
  auto p = dict.find(k);
  if (p == std::string::npos) throw Error("'" + path + "': .npy header has no " + k);
  // numpy's parser (a Python dict) takes a repeated key's last value: refuse rather than read
  // another shape or type than numpy would.
  if (dict.find(k, p + k.size()) != std::string::npos)
    throw Error("'" + path + "': .npy header gives " + k + " twice");
  p = dict.find(':', p + k.size());
  if (p == std::string::npos) throw Error("'" + path + "': malformed .npy header");
  ++p;
  while (p < dict.size() && dict[p] == ' ') ++p;
  if (p < dict.size() && dict[p] == '(') {
    const auto e = dict.find(')', p);
    if (e == std::string::npos) throw Error("'" + path + "': malformed shape in .npy header");
    return dict.substr(p, e - p + 1);
  }
  if (p < dict.size() && (dict[p] == '\'' || dict[p] == '"')) {
    const auto e = dict.find(dict[p], p + 1);
    if (e == std::string::npos) throw Error("'" + path + "': malformed .npy header");
    return dict.substr(p + 1, e - p - 1);
  }
  const auto e = dict.find_first_of(",}", p);
  return dict.substr(p, e - p);
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw Error("'" + path + "' is not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  std::size_t hlen = 0, pre = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    hlen = b[0] | (std::size_t(b[1]) << 8);
    pre = 10;
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | (std::size_t(b[1]) << 8) | (std::size_t(b[2]) << 16) | (std::size_t(b[3]) << 24);
    pre = 12;
  } else {
    throw Error("'" + path + "': .npy format version " + std::to_string(major) + " not supported");
  }
  std::string dict(hlen, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(hlen)))
    throw Error("'" + path + "': truncated .npy header");
  NpyHeader h;
  h.data_offset = pre + hlen;
  h.descr = value_of(dict, "descr", path);
  h.fortran_order = value_of(dict, "fortran_order", path).find("True") != std::string::npos;
  const std::string shape = value_of(dict, "shape", path);
  // "(3, 1, 8, 8)", "(5,)" or "()": each entry a non-negative decimal integer that fits.
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    throw Error("'" + path + "': malformed shape in .npy header: " + shape);
  std::stringstream items(shape.substr(1, shape.size() - 2));
  for (std::string item; std::getline(items, item, ',');) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;  // the empty entry after a trailing comma
    item = item.substr(b, e - b + 1);
    Index v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item[0] == '-' || (ec == std::errc() && v < 0))
      throw Error("'" + path + "': .npy header shape " + shape + " has a negative extent " + item);
    if (ec == std::errc::result_out_of_range)
      throw Error("'" + path + "': .npy header shape " + shape + " has an extent " + item +
                  " past 2^63");
    if (ec != std::errc() || end != item.data() + item.size())
      throw Error("'" + path + "': .npy header shape " + shape + " has a non-integer extent '" +
                  item + "'");
    h.shape.push_back(v);
  }
  // Only plain scalar types: '<f4', '|u1', ... A structured dtype is a list of fields
  // ([('a', '<f4'), ...]), and strings ('<U5'), objects ('|O') and the like are no numbers.
  const auto dk = dict.find("'descr'");
  const auto dv = dk == std::string::npos ? dk : dict.find_first_not_of(" :", dk + 7);
  if (dv != std::string::npos && dict[dv] == '[')
    throw Error("'" + path + "': structured dtype (a record of named fields) not supported: " +
                "save one plain float32 or float64 array per field");
  const auto digits = h.descr.size() >= 3 ? h.descr.find_first_not_of("0123456789", 2) : 0;
  if (h.descr.size() < 3 || std::string("<>|=").find(h.descr[0]) == std::string::npos ||
      std::string("fiuc").find(h.descr[1]) == std::string::npos || digits != std::string::npos ||
      h.descr.size() > 5)
    throw Error("'" + path + "': dtype '" + h.descr +
                "' not supported (float32 or float64, either byte order)");
  const char order = h.descr[0];
  h.little_endian = order == '<' || order == '|' || order == '=';
  h.kind = h.descr[1];
  h.elem_size = static_cast<std::size_t>(std::stoul(h.descr.substr(2)));
  return h;
}

std::string npy_header_bytes(const std::string& descr, const std::vector<Index>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  s += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + s + ", }";
  const std::size_t total = 10 + dict.size() + 1;
  dict += std::string((64 - total % 64) % 64, ' ') + "\n";  // pad to 64 bytes
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

}  // namespace tessera::prep
