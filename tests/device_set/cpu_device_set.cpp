// CPU test of src/device_set.hpp over host memory: the layouts each SetOptions
// gives, what each buffer holds before a launch (inputs with their gap and
// slack, poisoned outputs, the workspace), rotation, partial downloads, and
// that broken_guard() catches a write one byte out of bounds on either side.
// Expected bytes are hand-listed here, not computed by the set's own helpers.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "device_set.hpp"

using namespace moekit;

namespace {

// DeviceBuffer's interface over host memory; a fresh allocation holds 0x11
// (a zero-byte one gets 16 bytes, as DeviceBuffer's does).
class HostMemory {
 public:
  explicit HostMemory(std::size_t bytes) : v_(bytes ? bytes : 16, 0x11) {}
  void* get() const { return const_cast<unsigned char*>(v_.data()); }
  std::size_t size() const { return v_.size(); }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0) {
    if (bytes) std::memcpy(v_.data() + offset, host, bytes);
  }
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const {
    if (bytes) std::memcpy(host, v_.data() + offset, bytes);
  }
  void fill_bytes(int b) { std::fill(v_.begin(), v_.end(), static_cast<unsigned char>(b)); }
  const std::vector<unsigned char>& all() const { return v_; }

 private:
  std::vector<unsigned char> v_;
};
using HostSet = BasicDeviceSet<HostMemory>;

const unsigned char* bytes_at(const void* p) { return static_cast<const unsigned char*>(p); }

}  // namespace

TEST_CASE("device set: layouts of the run and checked options") {
  const SetOptions run = SetOptions::run(4), chk = SetOptions::checked(2);
  const Slot a = plan_input("a", 100, {.rotate = true, .misalign = true}, run);
  CHECK(a.front == 0);
  CHECK(a.back == 0);
  CHECK(a.copies == 4);
  CHECK(a.alloc_bytes() == 100);
  CHECK(plan_input("b", 100, {}, run).copies == 1);
  const Slot c = plan_input("c", 100, {.rotate = true, .misalign = true}, chk);
  CHECK(c.front == 2);
  CHECK(c.back == 16);
  CHECK(c.copies == 1);
  CHECK(plan_input("d", 100, {.misalign = false}, chk).front == 0);
  const Slot o = plan_output("o", 40, chk);
  CHECK(o.front == 256);
  CHECK(o.back == 256);
  CHECK(o.alloc_bytes() == 552);
  CHECK(plan_output("o", 40, run).alloc_bytes() == 40);
  CHECK(plan_workspace({5, false}, run).alloc_bytes() == 16);
  CHECK(plan_workspace({0, false}, run).alloc_bytes() == 16);
  CHECK(plan_workspace({100, true}, run).alloc_bytes() == 100);
}

TEST_CASE("device set: inputs, rotation and what the outputs and workspace hold before a launch") {
  std::vector<std::uint8_t> host(10);
  std::iota(host.begin(), host.end(), std::uint8_t(1));

  SUBCASE("checked: misaligned input between fill bytes; guarded poisoned output; garbage workspace") {
    HostSet s(SetOptions::checked(3));
    const auto in = s.input("in", host.data(), host.size(), {.rotate = true, .misalign = true});
    const auto plain = s.input("plain", host.data(), host.size());
    const auto out = s.output("out", 8);
    const auto ws = s.workspace({4, false});
    const auto zws = s.workspace({6, true});
    CHECK(s.copies() == 1);
    CHECK(s.ptr(in, 0) == s.ptr(in, 5));  // one copy: every copy index is it
    CHECK(s.read<std::uint8_t>(in) == host);
    CHECK(s.read<std::uint8_t>(plain) == host);
    // The whole input allocation: 3 fill bytes, the data, 16 fill bytes.
    std::vector<unsigned char> whole(3 + 10 + 16, 0x5A);
    std::iota(whole.begin() + 3, whole.begin() + 13, std::uint8_t(1));
    const unsigned char* base = bytes_at(s.ptr(in)) - 3;
    CHECK(std::vector<unsigned char>(base, base + whole.size()) == whole);
    CHECK(reinterpret_cast<std::uintptr_t>(s.ptr(in)) - reinterpret_cast<std::uintptr_t>(base) == 3);
    CHECK(s.read<unsigned char>(out) == std::vector<unsigned char>(8, 0xAB));
    CHECK(s.read<unsigned char>(ws) == std::vector<unsigned char>(4, 0xCD));
    CHECK_FALSE(s.all_zero(ws));
    CHECK(s.all_zero(zws));
    CHECK(s.broken_guard().empty());
  }
  SUBCASE("run: rotated copies are distinct buffers; exact sizes; workspace left as allocated") {
    HostSet s(SetOptions::run(3));
    const auto in = s.input("in", host.data(), host.size(), {.rotate = true});
    const auto once = s.input("once", host.data(), host.size());
    const auto ws = s.workspace({4, false});
    CHECK(s.ptr(in, 0) != s.ptr(in, 1));
    CHECK(s.ptr(in, 1) != s.ptr(in, 2));
    CHECK(s.ptr(in, 3) == s.ptr(in, 0));
    CHECK(s.ptr(once, 0) == s.ptr(once, 2));
    for (int k = 0; k < 3; ++k) CHECK(std::memcmp(s.ptr(in, k), host.data(), host.size()) == 0);
    CHECK(s.read<unsigned char>(ws) == std::vector<unsigned char>(4, 0x11));
    CHECK(s.slots()[0].alloc_bytes() == 10);
  }
  SUBCASE("a buffer left out is a null pointer") {
    HostSet s;
    CHECK(s.ptr(HostSet::Handle{}) == nullptr);
    CHECK(s.as<int>(HostSet::Handle{}, 2) == nullptr);
  }
}

TEST_CASE("device set: downloads and guard zones") {
  HostSet s(SetOptions::checked());
  const auto a = s.output("a", 16);
  const auto b = s.output("b", 8);
  unsigned char* body = s.as<unsigned char>(b);
  for (int i = 0; i < 8; ++i) body[i] = static_cast<unsigned char>(i);
  unsigned char part[3] = {};
  s.download(b, part, 3, 4);
  CHECK(part[0] == 4);
  CHECK(part[2] == 6);
  CHECK_THROWS_AS(s.download(b, part, 3, 6), std::out_of_range);
  CHECK(s.broken_guard().empty());  // writes inside the bodies only

  SUBCASE("one byte before b's body") { body[-1] = 0; }
  SUBCASE("one byte past b's body") { body[8] = 0; }
  SUBCASE("the last byte of b's back guard") { body[8 + 255] = 0xAC; }
  CHECK(s.broken_guard() == "b");
  s.poison();
  CHECK(s.broken_guard().empty());
  CHECK(s.read<unsigned char>(b) == std::vector<unsigned char>(8, 0xAB));
  CHECK(s.read<unsigned char>(a) == std::vector<unsigned char>(16, 0xAB));
}

TEST_CASE("device set: without guards nothing is checked and nothing is padded") {
  HostSet s(SetOptions::run(1));
  const auto o = s.output("o", 8);
  CHECK(s.broken_guard().empty());
  CHECK(s.slots()[o.index].alloc_bytes() == 8);
}

TEST_CASE("device set: a misaligned output sits past its front guard, which covers the gap") {
  SetOptions o = SetOptions::checked();
  o.output_misalign = 4;
  HostSet s(o);
  const auto m = s.output("m", 8, {.misalign = true});
  const auto plain = s.output("plain", 8);
  CHECK(s.slots()[m.index].front == 260);
  CHECK(s.slots()[m.index].back == 256);
  CHECK(s.slots()[plain.index].front == 256);
  CHECK(s.read<unsigned char>(m) == std::vector<unsigned char>(8, 0xAB));
  unsigned char* body = s.as<unsigned char>(m);
  CHECK(s.broken_guard().empty());
  SUBCASE("a write into the gap") { body[-4] = 0; }
  SUBCASE("one byte before the body") { body[-1] = 0; }
  SUBCASE("one byte past the body") { body[8] = 0; }
  CHECK(s.broken_guard() == "m");
  // Without guards and misalignment the option changes nothing.
  HostSet r(SetOptions::run(1));
  CHECK(r.slots().empty());
  const auto q = r.output("q", 8, {.misalign = true});
  CHECK(r.slots()[q.index].alloc_bytes() == 8);
}

TEST_CASE("device set: a workspace replaced for the next variant; zero checks of its kept part") {
  HostSet s(SetOptions::checked());
  const auto out = s.output("out", 4);
  const auto ws = s.workspace({4, false});
  CHECK(s.read<unsigned char>(ws) == std::vector<unsigned char>(4, 0xCD));
  s.replace_workspace(ws, {40, true});
  CHECK(s.slots()[ws.index].bytes == 40);
  CHECK(s.slots()[ws.index].zeroed);
  CHECK(s.read<unsigned char>(ws) == std::vector<unsigned char>(40, 0));
  unsigned char* w = s.as<unsigned char>(ws);
  w[20] = 1;  // scratch past the part the variant keeps zero
  CHECK(s.all_zero(ws, 20));
  CHECK_FALSE(s.all_zero(ws, 21));
  CHECK_FALSE(s.all_zero(ws));
  s.replace_workspace(ws, {2, false});
  CHECK(s.slots()[ws.index].alloc_bytes() == 16);
  CHECK(s.read<unsigned char>(ws) == std::vector<unsigned char>(2, 0xCD));
  CHECK_THROWS_AS(s.replace_workspace(out, {4, false}), std::logic_error);
  CHECK(s.read<unsigned char>(out) == std::vector<unsigned char>(4, 0xAB));
}
