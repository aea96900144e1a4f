#pragma once
// pread until `bytes` are in or the file ends: one call returns at most about 2 GiB on
// Linux (a rank's part of a 33000^2 float32 sample came back short), and may stop early on
// a signal.
#include "io/floor.hpp"
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace tessera::io {

// The bytes read into buf from `offset` of fd: `bytes` unless the file ends or read fails.
inline std::size_t pread_fully(int fd, void* buf, std::size_t bytes, std::size_t offset) {
  char* p = static_cast<char*>(buf);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

}  // namespace tessera::io
