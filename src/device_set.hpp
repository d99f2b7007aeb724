// One family's device buffers, declared once and used alike by its CLI job
// (src/<f>/family.cpp), its bench program (bench/<f>/bench_<f>.cpp) and its
// GPU test (tests/<f>/gpu_<f>.cpp): allocation, rotated input copies, poisoned
// outputs between guard zones, the workspace, upload and download.
// CUDA-free (DeviceBuffer's header is).
//
// How a family uses it: src/<f>/buffers.hpp holds one class (say
// `<f>::DeviceBuffers`) built from the family's Problem, views of its host
// inputs, the variant's workspace (`WorkspaceNeed::of(v, p, caps)`) and a
// SetOptions. Its constructor declares every buffer on a DeviceSet:
//
//   hidden_ = set_.input("hidden", host, bytes, {.rotate = true, .misalign = true});
//   perm_   = set_.output("permuted", rows * row_bytes);
//   ws_     = set_.workspace(need);
//
// and it adds what only the family knows: `Buffers buffers(int copy)` (the
// kernels' pointer struct for input copy `copy`, from set_.as<T>(handle,
// copy)), `download(Outputs&)` (the family's host outputs, "" or what is
// wrong: a changed guard zone, an out-of-range count), and `bytes_moved()`
// (the least traffic per launch, the figure GB/s is computed from). The CLI
// job, the bench and the GPU test then differ only in the SetOptions they
// pass: SetOptions::run(copies) (exact sizes, outputs poisoned, no guards)
// or SetOptions::checked(misalign) (guards, misaligned inputs, a garbage-filled
// workspace), so a buffer is never declared twice.
//
// The set is a template over its memory (DeviceBuffer on the GPU; the CPU test
// tests/device_set/ runs it over host memory), so its bookkeeping is tested
// without a GPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.hpp"

namespace moekit {

// How careful a set is. The CLI and the benches time what serving runs
// (exact sizes); the GPU tests look for writes out of bounds and reads of
// uninitialised memory.
struct SetOptions {
  int copies = 1;                  // copies of each rotated input (timing rotates through them)
  std::size_t guard = 0;           // poisoned bytes before and after each output (broken_guard())
  std::size_t misalign = 0;        // a misalignable input starts this many bytes into its allocation
  std::size_t output_misalign = 0; // a misalignable output starts this many bytes past its front guard
  std::size_t input_slack = 0;     // spare bytes after each input
  unsigned char poison = 0xAB;     // outputs, guards included, before the first launch and on poison()
  unsigned char input_fill = 0x5A; // an input's misalignment gap and slack
  int workspace_fill = -1;         // a workspace the variant does not keep zeroed gets this byte; -1: none

  // The CLI's and the benches' set: `copies` rotated input copies, exact sizes.
  static SetOptions run(int copies) {
    SetOptions o;
    o.copies = copies;
    return o;
  }
  // The GPU tests' set: one copy, 256-byte guard zones around every output,
  // misalignable inputs `misalign` bytes off, 16 spare input bytes, and a
  // non-zeroed workspace full of 0xCD that a variant must not rely on.
  static SetOptions checked(std::size_t misalign = 0) {
    SetOptions o;
    o.guard = 256;
    o.misalign = misalign;
    o.input_slack = 16;
    o.workspace_fill = 0xCD;
    return o;
  }
};

// What a variant asks of its workspace on one problem.
struct WorkspaceNeed {
  std::size_t bytes = 0;
  bool zeroed = false;  // it agrees through counters it hands back zeroed: zero it once
  template <class V, class P, class Caps>
  static WorkspaceNeed of(const V& v, const P& p, const Caps& caps) {
    return {v.workspace_bytes(p, caps), v.zeroed_workspace != nullptr && v.zeroed_workspace(p, caps)};
  }
};

enum class Role { input, output, workspace };

// Where one buffer's body sits in its allocation(s). Pure layout arithmetic.
struct Slot {
  std::string name;
  Role role = Role::input;
  std::size_t front = 0, bytes = 0, back = 0;  // allocation = front + bytes + back
  int copies = 1;                              // device copies (a rotated input: SetOptions::copies)
  bool zeroed = false;                         // a workspace kept zero
  std::size_t alloc_bytes() const { return front + bytes + back; }
};

struct InputHow {
  bool rotate = false;    // one copy per SetOptions::copies (what timing rotates); else one
  bool misalign = false;  // starts SetOptions::misalign bytes in (the narrow-copy paths)
};

inline Slot plan_input(std::string name, std::size_t bytes, InputHow how, const SetOptions& o) {
  return {std::move(name), Role::input, how.misalign ? o.misalign : 0, bytes, o.input_slack,
          how.rotate ? std::max(o.copies, 1) : 1, false};
}
struct OutputHow {
  bool misalign = false;  // starts SetOptions::output_misalign bytes past the front guard, which covers them
};

inline Slot plan_output(std::string name, std::size_t bytes, const SetOptions& o, OutputHow how = {}) {
  return {std::move(name), Role::output, o.guard + (how.misalign ? o.output_misalign : 0), bytes, o.guard, 1, false};
}
// At least 16 bytes: a variant may take a workspace pointer it never reads.
inline Slot plan_workspace(WorkspaceNeed need, const SetOptions&) {
  return {"workspace", Role::workspace, 0, need.bytes, need.bytes < 16 ? 16 - need.bytes : 0, 1, need.zeroed};
}

// The buffers over `Memory` (DeviceBuffer's interface: Memory(bytes), get(),
// upload/download(host, bytes, offset), fill_bytes(byte)).
template <class Memory>
class BasicDeviceSet {
 public:
  // An invalid handle (a buffer the family left out: no expert map) gives nullptr.
  struct Handle {
    std::size_t index = static_cast<std::size_t>(-1);
    bool valid() const { return index != static_cast<std::size_t>(-1); }
  };

  explicit BasicDeviceSet(SetOptions o = {}) : o_(o) {}

  // `bytes` of `host` on the device (in every copy when rotated). A null
  // `host` leaves the body for the family to fill on the device (generated
  // weights: experts), never poisoned.
  Handle input(std::string name, const void* host, std::size_t bytes, InputHow how = {}) {
    const Handle h = add(plan_input(std::move(name), bytes, how, o_));
    const Slot& s = slots_[h.index];
    for (Memory& m : mem_[h.index]) {
      if (s.front + s.back > 0) m.fill_bytes(o_.input_fill);
      if (host != nullptr) m.upload(host, bytes, s.front);
    }
    return h;
  }
  // Poisoned (guards included) until a launch writes it.
  Handle output(std::string name, std::size_t bytes, OutputHow how = {}) {
    const Handle h = add(plan_output(std::move(name), bytes, o_, how));
    mem_[h.index][0].fill_bytes(o_.poison);
    return h;
  }
  // Zeroed once when the variant keeps it zero, else SetOptions::workspace_fill.
  Handle workspace(WorkspaceNeed need) {
    const Handle h = add(plan_workspace(need, o_));
    fill_workspace(h);
    return h;
  }
  // The workspace `h` made anew for another variant's `need`, filled as
  // workspace() fills it: the inputs and outputs stay, variants take turns.
  void replace_workspace(Handle h, WorkspaceNeed need) {
    if (slots_.at(h.index).role != Role::workspace) throw std::logic_error(slots_[h.index].name + " is no workspace");
    Slot s = plan_workspace(need, o_);
    std::vector<Memory> m;
    m.emplace_back(s.alloc_bytes());
    mem_[h.index] = std::move(m);
    slots_[h.index] = std::move(s);
    fill_workspace(h);
  }

  // The body of copy `copy` (copy % copies: a buffer without copies has one).
  void* ptr(Handle h, int copy = 0) const {
    if (!h.valid()) return nullptr;
    const Slot& s = slots_.at(h.index);
    const auto& v = mem_[h.index];
    return static_cast<unsigned char*>(v[std::size_t(copy) % v.size()].get()) + s.front;
  }
  template <class T>
  T* as(Handle h, int copy = 0) const {
    return static_cast<T*>(ptr(h, copy));
  }

  // Every output back to the poison, guards included (before a checked launch).
  void poison() {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].role == Role::output) mem_[i][0].fill_bytes(o_.poison);
  }
  // A workspace the variant does not keep zero filled again as workspace()
  // filled it (SetOptions::workspace_fill), so that a second launch cannot
  // pass on what the first left there (a barrier that opens early would).
  void refill_workspace(Handle h) {
    if (!slots_.at(h.index).zeroed) fill_workspace(h);
  }

  // `bytes` of the body of copy 0 from `offset` (throws past the body's end).
  void download(Handle h, void* host, std::size_t bytes, std::size_t offset = 0) const {
    const Slot& s = slots_.at(h.index);
    if (offset > s.bytes || bytes > s.bytes - offset)
      throw std::out_of_range("download past the end of " + s.name);
    mem_[h.index][0].download(host, bytes, s.front + offset);
  }
  // The whole body as T.
  template <class T>
  std::vector<T> read(Handle h) const {
    std::vector<T> v(slots_.at(h.index).bytes / sizeof(T));
    download(h, v.data(), v.size() * sizeof(T));
    return v;
  }

  // The first output whose guard zones no longer hold the poison (a write out
  // of bounds), or "" when all are intact (always, without guards).
  std::string broken_guard() const {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.role != Role::output || s.front + s.back == 0) continue;
      std::vector<unsigned char> z(std::max(s.front, s.back));
      const auto intact = [&](std::size_t n) {
        return std::all_of(z.begin(), z.begin() + std::ptrdiff_t(n), [&](unsigned char c) { return c == o_.poison; });
      };
      mem_[i][0].download(z.data(), s.front, 0);
      if (!intact(s.front)) return s.name;
      mem_[i][0].download(z.data(), s.back, s.front + s.bytes);
      if (!intact(s.back)) return s.name;
    }
    return {};
  }

  // Whether the workspace's bytes are all zero (a zeroed workspace handed back),
  // or its first `upto` bytes (the part a variant keeps zero; others are scratch).
  bool all_zero(Handle h, std::size_t upto = static_cast<std::size_t>(-1)) const {
    std::vector<unsigned char> v(std::min(upto, slots_.at(h.index).bytes));
    download(h, v.data(), v.size());
    return std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == 0; });
  }

  const std::vector<Slot>& slots() const { return slots_; }
  const SetOptions& options() const { return o_; }
  int copies() const { return std::max(o_.copies, 1); }

 private:
  void fill_workspace(Handle h) {
    if (slots_[h.index].zeroed) mem_[h.index][0].fill_bytes(0);
    else if (o_.workspace_fill >= 0) mem_[h.index][0].fill_bytes(o_.workspace_fill);
  }
  Handle add(Slot s) {
    std::vector<Memory> m;
    for (int k = 0; k < s.copies; ++k) m.emplace_back(s.alloc_bytes());
    slots_.push_back(std::move(s));
    mem_.push_back(std::move(m));
    return Handle{slots_.size() - 1};
  }

  SetOptions o_;
  std::vector<Slot> slots_;
  std::vector<std::vector<Memory>> mem_;
};

using DeviceSet = BasicDeviceSet<DeviceBuffer>;

}  // namespace moekit
