// Scaffolding shared by the GPU tests (tests/*/gpu_*.cpp): the sanitizer-subset
// switch, poisoned outputs between guard zones, inputs uploaded at an offset,
// workspaces, launching with the launch status checked, and one doctest
// assertion per (variant, case, run) whose failure names all of them.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cuda_util.hpp"

namespace moekit::test {

// MOEKIT_GPU_SUBSET=sanitizer: every family runs its small cases only (for
// compute-sanitizer memcheck / racecheck). gpu_test_main rejects other values.
inline bool sanitizer_subset() {
  const char* e = std::getenv("MOEKIT_GPU_SUBSET");
  return e != nullptr && std::string_view(e) == "sanitizer";
}

// A device array of `bytes` bytes between guard zones of `guard` bytes, all
// poisoned with `poison`. The body starts `misalign` bytes past the front guard
// (a pointer off 16-byte alignment when misalign is not a multiple of 16); the
// front zone covers those bytes too.
class Guarded {
 public:
  explicit Guarded(std::size_t bytes, unsigned char poison = 0xAB, std::size_t guard = 256,
                   std::size_t misalign = 0)
      : buf_(guard + misalign + bytes + guard), front_(guard + misalign), bytes_(bytes), poison_(poison) {}

  void* data() const { return static_cast<unsigned char*>(buf_.get()) + front_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }
  std::size_t bytes() const { return bytes_; }
  void poison() { buf_.fill_bytes(poison_); }

  // The whole allocation, downloaded: body() is the output, guard_ok whether
  // every guard byte still holds the poison.
  struct Readback {
    std::vector<unsigned char> all;
    std::size_t front = 0, bytes = 0;
    bool guard_ok = true;
    const unsigned char* body() const { return all.data() + front; }
    template <class T>
    std::vector<T> body_as() const {
      std::vector<T> v(bytes / sizeof(T));
      std::copy(body(), body() + v.size() * sizeof(T), reinterpret_cast<unsigned char*>(v.data()));
      return v;
    }
  };
  Readback read() const {
    Readback r;
    r.all.resize(buf_.size());
    buf_.download(r.all.data(), r.all.size());
    r.front = front_;
    r.bytes = bytes_;
    const auto bad = [&](unsigned char c) { return c != poison_; };
    r.guard_ok = std::none_of(r.all.begin(), r.all.begin() + static_cast<std::ptrdiff_t>(front_), bad) &&
                 std::none_of(r.all.begin() + static_cast<std::ptrdiff_t>(front_ + bytes_), r.all.end(), bad);
    return r;
  }

 private:
  DeviceBuffer buf_;
  std::size_t front_, bytes_;
  unsigned char poison_;
};

// `bytes` of host data on the device, `misalign` bytes past the start of the
// allocation (filled with `fill`), with 16 spare bytes after.
class Uploaded {
 public:
  Uploaded(const void* host, std::size_t bytes, std::size_t misalign = 0, unsigned char fill = 0x5A)
      : buf_(misalign + bytes + 16), misalign_(misalign) {
    if (misalign == 0) {  // no host copy: inputs reach gigabytes
      buf_.fill_bytes(fill);
      buf_.upload(host, bytes);
      return;
    }
    std::vector<unsigned char> staged(misalign + bytes + 16, fill);
    if (bytes > 0) std::copy_n(static_cast<const unsigned char*>(host), bytes, staged.begin() + misalign);
    buf_.upload(staged.data(), staged.size());
  }
  const void* data() const { return static_cast<const unsigned char*>(buf_.get()) + misalign_; }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data());
  }

 private:
  DeviceBuffer buf_;
  std::size_t misalign_;
};

// A variant's workspace: zeroed when the variant keeps it zero (it must hand
// it back zeroed), else filled with garbage (0xCD) that it must not rely on.
class Workspace {
 public:
  Workspace(std::size_t bytes, bool zeroed) : buf_(std::max<std::size_t>(bytes, 16)), bytes_(bytes) {
    buf_.fill_bytes(zeroed ? 0 : 0xCD);
  }
  void* get() const { return buf_.get(); }
  // Whether the first `upto` bytes (all of them by default) are zero.
  bool all_zero(std::size_t upto = static_cast<std::size_t>(-1)) const {
    const std::size_t n = std::min(upto, bytes_);
    std::vector<unsigned char> h(n);
    if (n > 0) buf_.download(h.data(), n);
    return std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 0; });
  }

 private:
  DeviceBuffer buf_;
  std::size_t bytes_;
};

// Runs `launch` (a variant's launch on the default stream) `times` times
// back to back, then waits. Returns "" on success, else what went wrong: the
// status a launch returned, an error it left pending without returning it, or
// one the kernels raised. With times = 2 and a launch with pdl set, the
// second launch may start while the first finishes (programmatic dependent
// launch): its kernels must wait before touching what the first one writes.
template <class Launch>
std::string launch_and_sync(const Launch& launch, int times = 1) {
  try {
    for (int i = 0; i < times; ++i) {
      if constexpr (std::is_void_v<std::invoke_result_t<const Launch&>>) {
        launch();
      } else {
        cuda_check(static_cast<int>(launch()), "launch (status it returned)");
      }
      cuda_check_last("launch (error left pending)");
    }
    cuda_sync("kernel");
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// One doctest assertion per (variant, case, run): passes when `why` is
// empty, else fails naming the run (`what`: variant, shape, dtype, seed).
inline void expect_ok(const std::string& what, const std::string& why) {
  INFO(what);
  CHECK_MESSAGE(why.empty(), why);
}

}  // namespace moekit::test
