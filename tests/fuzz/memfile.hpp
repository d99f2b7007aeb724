// A memfd the fuzz targets put each input in, opened by its /proc/self/fd
// path, so the readers run through their real path-based API.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <string>

struct MemFile {
  int fd;
  std::string path;
  explicit MemFile(const char* name) : fd(::memfd_create(name, 0)), path("/proc/self/fd/" + std::to_string(fd)) {
    if (fd < 0) __builtin_trap();
  }
  void set(const void* data, std::size_t n) const {
    if (::ftruncate(fd, 0) != 0) __builtin_trap();
    const auto* p = static_cast<const char*>(data);
    for (std::size_t off = 0; off < n;) {
      const ssize_t put = ::pwrite(fd, p + off, n - off, static_cast<off_t>(off));
      if (put <= 0) __builtin_trap();
      off += static_cast<std::size_t>(put);
    }
  }
};
