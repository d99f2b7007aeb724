// libFuzzer target for the text readers behind `trace import` (json, jsonl,
// csv: tools::import_trace) and behind `compare` and `plot` (the JSON-lines
// record reader, records::read_file), through the real path-based API (the
// input lives in a memfd opened by its /proc/self/fd path). Records that read
// are compared with themselves (tools::compare and its text and JSON
// renderings). Besides the sanitizers, it traps on broken properties:
// - every rejection is an InputError whose message is one printable line
//   starting with the path; no other exception (nlohmann's own, say) escapes;
// - an imported trace has whole tokens: per layer, topk >= 1 and the ids a
//   multiple of it, and every id in [0, E) when -E is given;
// - a file compared with itself has no regressed or faster cell.
// Build and run: FUZZ_TARGET=readers tests/fuzz/run.sh (see docs/npy.md).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "errors.hpp"
#include "memfile.hpp"
#include "records.hpp"
#include "tools.hpp"

using namespace moekit;

namespace {

[[noreturn]] void broken(const char* why, const std::string& m) {
  std::fprintf(stderr, "fuzz_readers: %s: %s\n", why, m.c_str());
  __builtin_trap();
}

void check_message(const std::string& path, const char* what) {
  const std::string m = what;
  if (m.rfind(path, 0) != 0) broken("a message not naming the file", m);  // "PATH: ..." or "PATH:LINE: ..."
  for (const unsigned char c : m)
    if (c < 0x20 || c == 0x7f) broken("a control byte in a message", m);
}

// Runs `f`; an InputError must name the file in one printable line, and
// nothing else may escape.
template <class F>
bool accepted(const std::string& path, F&& f) {
  try {
    f();
    return true;
  } catch (const InputError& e) {
    check_message(path, e.what());
  } catch (const std::exception& e) {
    broken("an exception other than InputError", e.what());
  } catch (...) {
    broken("an exception other than InputError", "?");
  }
  return false;
}

void import(const MemFile& in, const char* format, std::int64_t layers, std::int64_t topk, std::int64_t experts) {
  tools::ImportOptions o;
  o.format = format;
  o.inputs = {in.path};
  o.layers = layers;
  o.topk = topk;
  o.num_experts = experts;
  std::map<std::int64_t, tools::LayerIds> got;
  if (!accepted(in.path, [&] { got = tools::import_trace(o); })) return;
  for (const auto& [layer, ids] : got) {
    if (layer < 0 || ids.topk < 1 || ids.ids.size() % static_cast<std::size_t>(ids.topk) != 0) __builtin_trap();
    if (experts > 0)
      for (const auto e : ids.ids)
        if (e < 0 || e >= experts) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const MemFile in("fuzz-in.txt");
  in.set(data, size);
  // trace import, each format; json also with a base64 shape (SGLang) and -E.
  import(in, "json", 0, 0, 0);
  import(in, "json", 2, 3, 16);
  import(in, "jsonl", 0, 0, 0);
  import(in, "csv", 0, 0, 64);
  // compare's and plot's record reader, and compare on what it read.
  std::vector<records::Record> recs;
  if (accepted(in.path, [&] { recs = records::read_file(in.path); })) {
    const tools::Comparison c = tools::compare(recs, recs, 0.05);
    if (c.regressed != 0 || c.faster != 0) __builtin_trap();
    (void)accepted(in.path, [&] {
      (void)tools::render_comparison(c, in.path, in.path, 0.05, false);
      (void)tools::render_comparison(c, in.path, in.path, 0.05, true);
    });
  }
  return 0;
}
